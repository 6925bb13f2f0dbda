package server

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/capsule"
	"github.com/clearancehq/clearance/ledger"
)

// Capsule response headers (spec: x-svc-aac-profile, x-svc-class1-verified).
const (
	HeaderCapsuleProfile = "X-Clearance-Aac-Profile"
	HeaderClass1Verified = "X-Clearance-Class1-Verified"
)

// requiredOrg resolves the org_id query parameter the evidence export routes
// require.
func (c *call) requiredOrg() (string, error) {
	org, err := c.query("org_id")
	if err != nil {
		return "", err
	}
	if org == "" {
		return "", &clearance.Error{Kind: clearance.ErrInvalidRequest, Code: clearance.CodeOrgRequired, Detail: "org_id is required",
			Fields: []clearance.FieldError{{Field: "org_id", Message: "org_id is required"}}}
	}
	return c.orgFor(org)
}

// querySize parses an optional positive integer query parameter (0 when absent).
func (c *call) querySize(name string) (uint64, error) {
	q, err := c.query(name)
	if err != nil || q == "" {
		return 0, err
	}
	n, err := strconv.ParseUint(q, 10, 63)
	if err != nil || n == 0 {
		return 0, badQuery(name, name+" must be a positive integer")
	}
	return n, nil
}

// checkpointView is a signed checkpoint as the ledger routes answer it.
type checkpointView struct {
	OrgID       string `json:"org_id"`
	Origin      string `json:"origin"`
	TreeSize    uint64 `json:"tree_size"`
	RootHash    string `json:"root_hash"` // base64, as in the note
	Checkpoint  string `json:"checkpoint"`
	VerifierKey string `json:"verifier_key"`
}

func (s *Server) checkpointView(org string, cp ledger.Checkpoint) checkpointView {
	return checkpointView{OrgID: org, Origin: cp.Origin, TreeSize: cp.Size, RootHash: cp.Root.String(),
		Checkpoint: string(cp.Note), VerifierKey: s.engine.Audit.LedgerVerifierKey()}
}

func (s *Server) ledgerCheckpoint(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	cp, err := s.engine.Audit.LedgerCheckpoint(c.r.Context(), org)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, s.checkpointView(org, cp))
}

// sealRequest is the body of a seal: an object with no members yet.
type sealRequest struct{}

// sealLedger signs a checkpoint over every entry now and answers it like
// the checkpoint read. A repeat with nothing new answers the same one.
func (s *Server) sealLedger(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	if err := c.decode(&sealRequest{}); err != nil {
		return err
	}
	cp, err := s.engine.Audit.SealLedger(c.r.Context(), org)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, s.checkpointView(org, cp))
}

func (s *Server) ledgerCheckpointAt(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	size, err := strconv.ParseUint(c.r.PathValue("size"), 10, 63)
	if err != nil || size == 0 {
		return &clearance.Error{Kind: clearance.ErrNotFound, Code: clearance.CodeCheckpointNotFound, Detail: "no such checkpoint"}
	}
	cp, err := s.engine.Audit.LedgerCheckpointAt(c.r.Context(), org, size)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, s.checkpointView(org, cp))
}

func (s *Server) inclusionProof(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	seq, err := c.querySize("seq")
	if err != nil {
		return err
	}
	if seq == 0 {
		return badQuery("seq", "seq is required")
	}
	size, err := c.querySize("tree_size")
	if err != nil {
		return err
	}
	p, err := s.engine.Audit.LedgerInclusionProof(c.r.Context(), org, seq, size)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, p)
}

func (s *Server) consistencyProof(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	oldSize, err := c.querySize("old_size")
	if err != nil {
		return err
	}
	if oldSize == 0 {
		return badQuery("old_size", "old_size is required")
	}
	newSize, err := c.querySize("new_size")
	if err != nil {
		return err
	}
	p, err := s.engine.Audit.LedgerConsistencyProof(c.r.Context(), org, oldSize, newSize)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, p)
}

// ledgerKey publishes the ledger verifier key as text, for auditors.
func (s *Server) ledgerKey(c *call) error {
	k := s.engine.Audit.LedgerVerifierKey()
	if k == "" {
		return &clearance.Error{Kind: clearance.ErrNotFound, Code: clearance.CodeLedgerKeyNotConfigured, Detail: "no ledger key is configured"}
	}
	c.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	c.w.Header().Set("Cache-Control", "public, max-age=300")
	c.w.WriteHeader(http.StatusOK)
	c.status = http.StatusOK
	_, err := c.w.Write([]byte(k + "\n"))
	return err
}

// auditorCheckpoint decodes the optional checkpoint query parameter: a
// signed note, base64url without padding.
func (c *call) auditorCheckpoint() ([]byte, error) {
	q, err := c.query("checkpoint")
	if err != nil || q == "" {
		return nil, err
	}
	note, err := base64.RawURLEncoding.DecodeString(q)
	if err != nil || len(note) == 0 {
		return nil, badQuery("checkpoint", "checkpoint must be a signed note, base64url without padding")
	}
	return note, nil
}

func (s *Server) proofPacket(c *call) error {
	org, err := c.requiredOrg()
	if err != nil {
		return err
	}
	p, err := s.engine.Evidence.ProofPacket(c.r.Context(), org, c.r.PathValue("dossierId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, p)
}

func (s *Server) agentActionCapsule(c *call) error {
	org, err := c.requiredOrg()
	if err != nil {
		return err
	}
	caps, err := s.engine.Evidence.Capsules(c.r.Context(), org, c.r.PathValue("dossierId"))
	if err != nil {
		return err
	}
	h := c.w.Header()
	h.Set("Content-Type", capsule.MediaType)
	h.Set("Cache-Control", "no-store")
	h.Set(HeaderCapsuleProfile, clearance.CapsuleProfile)
	// Only a capsule the Class 1 checks ran on and passed says so.
	if caps.LatestVerified() {
		h.Set(HeaderClass1Verified, "true")
	} else {
		s.log.Error("a capsule failed our own Class 1 checks", "dossier_id", c.r.PathValue("dossierId"))
	}
	c.w.WriteHeader(http.StatusOK)
	c.status = http.StatusOK
	_, err = c.w.Write(caps.Latest().JSON)
	return err
}

// envelopeList is the producer-envelopes answer.
type envelopeList struct {
	CapsuleID string                       `json:"capsule_id"`
	Profile   string                       `json:"profile"`
	Envelopes []clearance.ProducerEnvelope `json:"envelopes"`
}

func (s *Server) producerEnvelopes(c *call) error {
	org, err := c.requiredOrg()
	if err != nil {
		return err
	}
	id, envs, err := s.engine.Evidence.ProducerEnvelopes(c.r.Context(), org, c.r.PathValue("dossierId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, envelopeList{CapsuleID: id.String(), Profile: clearance.CapsuleProfile + "#producer-envelope", Envelopes: envs})
}
