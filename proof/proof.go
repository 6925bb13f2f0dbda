package proof

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
)

// Version is the packet_version of packets this package builds and checks.
const Version = "clearance-proof-packet/1"

// AlgEd25519 is the proof bundle's signature algorithm.
const AlgEd25519 = "Ed25519"

// signingContext prefixes the signed statement, so that a bundle signature
// can never be mistaken for a checkpoint signature by the same key.
const signingContext = Version + "\n"

// Packet is a Decision Dossier proof packet.
type Packet struct {
	Version    string `json:"packet_version"`
	OrgID      string `json:"org_id"`
	DossierID  string `json:"dossier_id"`
	DecisionID string `json:"decision_id"`
	// Dossier is the dossier payload exactly as stored: its RFC 8785 form.
	Dossier        json.RawMessage `json:"dossier"`
	DossierDigest  string          `json:"dossier_digest"`
	PolicySnapshot json.RawMessage `json:"policy_snapshot"`
	// LedgerEntry is the decision.recorded entry of the dossier.
	LedgerEntry  ledger.Entry  `json:"ledger_entry"`
	LedgerAnchor ledger.Anchor `json:"ledger_anchor"`
	LedgerOrigin string        `json:"ledger_origin"`
	// LedgerVerifierKey is the key the checkpoint claims; an auditor
	// compares it with the key it trusts rather than believing it.
	LedgerVerifierKey string  `json:"ledger_verifier_key"`
	ProofBundle       Bundle  `json:"proof_bundle"`
	IssuedAt          string  `json:"issued_at"`
	Verification      *Result `json:"verification,omitempty"`
}

// Bundle is the Ed25519 proof bundle: a signature by the ledger key over a
// statement naming everything the packet proves.
type Bundle struct {
	Alg       string `json:"alg"`
	PublicKey string `json:"public_key"` // base64url, raw 32 bytes
	Statement string `json:"statement"`  // base64url of the statement's RFC 8785 JSON
	Signature string `json:"signature"`  // base64url, over "clearance-proof-packet/1\n" || statement bytes
}

// Statement is what the proof bundle signs.
type Statement struct {
	Version         string `json:"packet_version"`
	OrgID           string `json:"org_id"`
	DossierID       string `json:"dossier_id"`
	DecisionID      string `json:"decision_id"`
	DossierDigest   string `json:"dossier_digest"`
	LedgerSeq       uint64 `json:"ledger_seq"`
	LedgerEntryHash string `json:"ledger_entry_hash"`
	LeafHash        string `json:"leaf_hash"`
	// CheckpointDigest is the SHA-256 of the signed checkpoint note.
	CheckpointDigest string `json:"checkpoint_digest"`
	IssuedAt         string `json:"issued_at"`
}

// StatementOf returns the statement p's bundle must sign.
func StatementOf(p *Packet) Statement {
	return Statement{Version: p.Version, OrgID: p.OrgID, DossierID: p.DossierID, DecisionID: p.DecisionID,
		DossierDigest: p.DossierDigest, LedgerSeq: p.LedgerEntry.Seq, LedgerEntryHash: p.LedgerEntry.EntryHash,
		LeafHash: p.LedgerAnchor.LeafHash.String(), CheckpointDigest: canon.Digest([]byte(p.LedgerAnchor.Checkpoint)),
		IssuedAt: p.IssuedAt}
}

// Sign fills p's proof bundle: key signs the statement of p.
func Sign(p *Packet, key ed25519.PrivateKey) error {
	stmt, err := canon.Marshal(StatementOf(p))
	if err != nil {
		return err
	}
	sig := ed25519.Sign(key, append([]byte(signingContext), stmt...))
	b64 := base64.RawURLEncoding
	p.ProofBundle = Bundle{Alg: AlgEd25519, PublicKey: b64.EncodeToString(key.Public().(ed25519.PublicKey)),
		Statement: b64.EncodeToString(stmt), Signature: b64.EncodeToString(sig)}
	return nil
}

// Check is one verification step and its result.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Result is the outcome of Verify.
type Result struct {
	Valid        bool     `json:"valid"`
	Checks       []Check  `json:"checks"`
	Instructions []string `json:"instructions"`
}

// Check names, in the order Verify runs them.
const (
	CheckFormat         = "packet_format"
	CheckVerifierKey    = "verifier_key_pinned"
	CheckDossierDigest  = "dossier_digest"
	CheckDossierFields  = "dossier_matches_packet"
	CheckLedgerEntry    = "ledger_entry"
	CheckLedgerAnchor   = "ledger_anchor"
	CheckBundle         = "proof_bundle_signature"
	CheckBundleContents = "proof_bundle_statement"
)

// Instructions are the steps a third party follows to check a packet by hand.
var Instructions = []string{
	"Obtain the ledger verifier key out of band (GET /.well-known/clearance-ledger-key on the service, or an earlier checkpoint you kept) and compare it with ledger_verifier_key.",
	"Compute SHA-256 over the bytes of `dossier` exactly as given (they are its RFC 8785 form) and compare with dossier_digest.",
	"Check that the dossier's dossier_id, decision_id, org_id, ledger_seq and policy_snapshot equal the packet's.",
	"Recompute ledger_entry.entry_hash: SHA-256 of the RFC 8785 form of ledger_entry without entry_hash; its payload_digest must be dossier_digest, kind decision.recorded, subject_id the dossier_id.",
	"Compute the RFC 9162 leaf hash SHA-256(0x00 || RFC 8785 form of ledger_entry) and check ledger_anchor.inclusion_proof from leaf ledger_entry.seq-1 to the root of ledger_anchor.checkpoint (a C2SP signed note: origin, size, base64 root) whose signature verifies with the trusted key and whose origin is ledger_origin.",
	"Verify proof_bundle.signature (Ed25519, the key in proof_bundle.public_key, which must be the ledger key) over \"clearance-proof-packet/1\\n\" followed by the base64url-decoded statement, and check that the statement names this packet's dossier, digests, ledger entry and checkpoint.",
	"Or run: clearance verify packet --ledger-key '<verifier key>' packet.json",
}

// Verify checks a packet with the ledger verifier key the caller trusts.
// An empty trustedKey checks the packet against the key it names, which
// proves only self-consistency: the result is then not Valid.
func Verify(raw []byte, trustedKey string) Result {
	r := &report{}
	var p Packet
	if err := strictjson.Decode(raw, &p, strictjson.Options{RejectUnknown: true}); err != nil {
		r.add(CheckFormat, false, "the packet does not decode: %v", err)
		return r.result()
	}
	if p.Version != Version {
		r.add(CheckFormat, false, "packet_version %q, want %q", p.Version, Version)
		return r.result()
	}
	r.add(CheckFormat, true, "")
	key := trustedKey
	switch {
	case trustedKey == "":
		key = p.LedgerVerifierKey
		r.add(CheckVerifierKey, false, "no trusted key was given; checked against the key the packet names")
	case trustedKey != p.LedgerVerifierKey:
		r.add(CheckVerifierKey, false, "the packet names key %q, not the trusted one", p.LedgerVerifierKey)
	default:
		r.add(CheckVerifierKey, true, "")
	}
	checkDossier(r, &p)
	checkEntry(r, &p)
	if !strings.HasSuffix(p.LedgerOrigin, "/ledger/"+p.OrgID) {
		r.add(CheckLedgerAnchor, false, "ledger_origin %q is not the ledger of org %q", p.LedgerOrigin, p.OrgID)
	} else if _, err := ledger.VerifyAnchor(key, p.LedgerOrigin, p.LedgerEntry, p.LedgerAnchor); err != nil {
		r.add(CheckLedgerAnchor, false, "%v", err)
	} else {
		r.add(CheckLedgerAnchor, true, "")
	}
	checkBundle(r, &p, key)
	return r.result()
}

func checkDossier(r *report, p *Packet) {
	sum := sha256.Sum256(p.Dossier)
	if got := canon.FormatDigest(sum); got != p.DossierDigest {
		r.add(CheckDossierDigest, false, "the dossier hashes to %s, the packet says %s", got, p.DossierDigest)
	} else if c, err := canon.Transform(p.Dossier); err != nil || !bytes.Equal(c, p.Dossier) {
		r.add(CheckDossierDigest, false, "the dossier is not in its RFC 8785 form")
	} else {
		r.add(CheckDossierDigest, true, "")
	}
	var d struct {
		DossierID      string          `json:"dossier_id"`
		DecisionID     string          `json:"decision_id"`
		OrgID          string          `json:"org_id"`
		LedgerSeq      uint64          `json:"ledger_seq"`
		PolicySnapshot json.RawMessage `json:"policy_snapshot"`
	}
	if err := json.Unmarshal(p.Dossier, &d); err != nil {
		r.add(CheckDossierFields, false, "the dossier does not decode: %v", err)
		return
	}
	snapA, errA := canon.Transform(d.PolicySnapshot)
	snapB, errB := canon.Transform(p.PolicySnapshot)
	switch {
	case d.DossierID != p.DossierID || d.DecisionID != p.DecisionID || d.OrgID != p.OrgID:
		r.add(CheckDossierFields, false, "the dossier names dossier %q, decision %q, org %q", d.DossierID, d.DecisionID, d.OrgID)
	case d.LedgerSeq != p.LedgerEntry.Seq:
		r.add(CheckDossierFields, false, "the dossier's ledger_seq %d is not the entry's seq %d", d.LedgerSeq, p.LedgerEntry.Seq)
	case errA != nil || errB != nil || !bytes.Equal(snapA, snapB):
		r.add(CheckDossierFields, false, "policy_snapshot differs from the dossier's")
	default:
		r.add(CheckDossierFields, true, "")
	}
}

func checkEntry(r *report, p *Packet) {
	e := p.LedgerEntry
	h, err := e.ComputeHash()
	switch {
	case err != nil || h != e.EntryHash:
		r.add(CheckLedgerEntry, false, "entry_hash %s does not recompute (%s)", e.EntryHash, h)
	case e.Kind != ledger.KindDecision || e.SubjectID != p.DossierID || e.OrgID != p.OrgID:
		r.add(CheckLedgerEntry, false, "the entry records %s of %q in org %q", e.Kind, e.SubjectID, e.OrgID)
	case e.PayloadDigest != p.DossierDigest:
		r.add(CheckLedgerEntry, false, "the entry records digest %s, not the dossier's %s", e.PayloadDigest, p.DossierDigest)
	default:
		r.add(CheckLedgerEntry, true, "")
	}
}

func checkBundle(r *report, p *Packet, verifierKey string) {
	b64 := base64.RawURLEncoding
	b := p.ProofBundle
	pub, err := b64.DecodeString(b.PublicKey)
	stmt, err2 := b64.DecodeString(b.Statement)
	sig, err3 := b64.DecodeString(b.Signature)
	want, err4 := publicKeyOf(verifierKey)
	switch {
	case b.Alg != AlgEd25519 || errors.Join(err, err2, err3) != nil || len(pub) != ed25519.PublicKeySize:
		r.add(CheckBundle, false, "the proof bundle is malformed")
		return
	case err4 != nil || !bytes.Equal(pub, want):
		r.add(CheckBundle, false, "the proof bundle is not signed by the ledger key")
		return
	case !ed25519.Verify(pub, append([]byte(signingContext), stmt...), sig):
		r.add(CheckBundle, false, "the proof bundle signature does not verify")
		return
	}
	r.add(CheckBundle, true, "")
	expected, err := canon.Marshal(StatementOf(p))
	if err != nil || !bytes.Equal(expected, stmt) {
		r.add(CheckBundleContents, false, "the signed statement does not describe this packet")
		return
	}
	r.add(CheckBundleContents, true, "")
}

// publicKeyOf extracts the raw Ed25519 key of a C2SP note verifier key
// ("<name>+<hash>+<base64(0x01 || key)>").
func publicKeyOf(vkey string) ([]byte, error) {
	parts := strings.SplitN(vkey, "+", 3) // the base64 key may itself hold '+'
	if len(parts) != 3 {
		return nil, fmt.Errorf("proof: malformed verifier key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 1 {
		return nil, fmt.Errorf("proof: malformed verifier key")
	}
	return raw[1:], nil
}

type report struct{ checks []Check }

func (r *report) add(name string, ok bool, format string, args ...any) {
	c := Check{Name: name, OK: ok}
	if format != "" {
		c.Detail = fmt.Sprintf(format, args...)
	}
	r.checks = append(r.checks, c)
}

func (r *report) result() Result {
	valid := len(r.checks) > 0
	for _, c := range r.checks {
		valid = valid && c.OK
	}
	return Result{Valid: valid, Checks: r.checks, Instructions: Instructions}
}
