package privacy

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// ErrErased is returned (wrapped) by OpenRecorded for a dossier whose data
// subject was erased: its recorded intent is gone. Callers answer it as a
// reason (replay: SUBJECT_ERASED), never as a fault.
var ErrErased = errors.New("privacy: the dossier's personal data was erased")

// ReceiptProfile names the receipt format.
const ReceiptProfile = "clearance-erasure-receipt/1"

// Scopes of an erasure.
const (
	ScopeSubject = "SUBJECT" // one data subject of one org
	ScopeOrg     = "ORG"     // every data subject of one org
)

// ReceiptPayload is what an erasure receipt signs (RFC 8785 JSON).
type ReceiptPayload struct {
	Aud       string `json:"aud"` // grant.AudErasureReceipt
	Iss       string `json:"iss"`
	Profile   string `json:"profile"`
	ReceiptID string `json:"receipt_id"`
	OrgID     string `json:"org_id"`
	Scope     string `json:"scope"`
	// SubjectRef names the subject as the store did: a MAC under the
	// server's secrets key, never the subject id ("" for ScopeOrg).
	SubjectRef string `json:"subject_ref,omitempty"`
	// RequestedBy is the credential that asked, and its kind (org or
	// platform: a marketplace's deletion notice).
	RequestedBy       Requester `json:"requested_by"`
	ErasedAt          string    `json:"erased_at"`
	KeysDestroyed     []string  `json:"keys_destroyed"`
	DossiersAffected  int       `json:"dossiers_affected"`
	StoresTouched     []string  `json:"stores_touched"`
	LedgerSeq         uint64    `json:"ledger_seq"`
	LedgerOrigin      string    `json:"ledger_origin"`
	LedgerVerifierKey string    `json:"ledger_verifier_key"`
}

// Requester is who asked for an erasure.
type Requester struct {
	CredentialID   string `json:"credential_id"`
	CredentialKind string `json:"credential_kind"`
}

// Receipt is an erasure's answer: the signed receipt and what it says.
type Receipt struct {
	Receipt string         `json:"receipt"` // compact JWS, typ grant.TypErasureReceipt
	Payload ReceiptPayload `json:"payload"`
	// Replayed: nothing was left to destroy and the receipt is the one
	// answered before.
	Replayed bool `json:"replayed"`
}

// What an erasure touches, as the receipt lists it. Grants, managed
// escalations and idempotent answers of a sealed decision are sealed under
// the same subject key as its dossier.
const (
	storeSubjectKeys = "subject_keys:deleted"
	storeDossiers    = "dossiers:personal_data_crypto_shredded"
	storeGrants      = "grants:personal_data_crypto_shredded"
	storeEscalations = "escalations:personal_data_crypto_shredded"
	storeIdempotency = "idempotency_records:personal_data_crypto_shredded"
)

// erasureRecord is the stored receipt.
type erasureRecord struct {
	Receipt string         `json:"receipt"`
	Payload ReceiptPayload `json:"payload"`
}

// ErasureRequest asks to erase one subject of OrgID.
type ErasureRequest struct {
	OrgID string
	// Body is {"subject_id"} as received.
	Body      []byte
	Requester Requester
}

// Erase destroys the key of one data subject of the org, so that every
// dossier sealed under it keeps only ciphertext nobody can open, and
// answers a signed receipt. An erasure with nothing new to destroy answers
// the receipt of the last one (Replayed); a subject never seen gets a
// receipt destroying nothing.
func (s *Service) Erase(ctx context.Context, req ErasureRequest) (Receipt, error) {
	var body struct {
		SubjectID *string `json:"subject_id"`
	}
	if err := strictjson.Decode(req.Body, &body, s.d.JSON); err != nil {
		return Receipt{}, core.TranslateInput(err)
	}
	if body.SubjectID == nil {
		return Receipt{}, core.Invalid(core.CodeMissingField, "subject_id", "subject_id is required")
	}
	if err := checkSubject(*body.SubjectID); err != nil {
		return Receipt{}, err
	}
	if err := s.ready(ctx, req.OrgID); err != nil {
		return Receipt{}, err
	}
	ref := s.subjectRef(req.OrgID, *body.SubjectID)
	return s.erase(ctx, req.OrgID, ScopeSubject, ref, req.Requester, []string{ref})
}

// EraseOrg destroys every subject key of the org: what a marketplace's
// deletion notice for a whole account asks. Its receipt has scope ORG.
func (s *Service) EraseOrg(ctx context.Context, orgID string, body []byte, requester Requester) (Receipt, error) {
	if len(body) > 0 {
		var empty struct{}
		if err := strictjson.Decode(body, &empty, s.d.JSON); err != nil {
			return Receipt{}, core.TranslateInput(err)
		}
	}
	if err := s.ready(ctx, orgID); err != nil {
		return Receipt{}, err
	}
	recs, err := s.d.Store.ArtifactsByRef(ctx, orgID, kindSubjectKey, refKey, 0)
	if err != nil {
		return Receipt{}, core.Unavailable("list subject keys", err)
	}
	refs := make([]string, len(recs))
	for i, r := range recs {
		refs[i] = r.ID
	}
	return s.erase(ctx, orgID, ScopeOrg, "", requester, refs)
}

// ready refuses an erasure that could not be receipted or of an unknown
// org, before anything is destroyed.
func (s *Service) ready(ctx context.Context, orgID string) error {
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return err
	}
	if s.d.LedgerKey == nil {
		return core.New(core.ErrUnavailable, CodeLedgerKeyNotConfigured, "erasure receipts are signed with the ledger key, and none is configured")
	}
	if s.d.Secrets == nil {
		return core.New(core.ErrUnavailable, CodeSecretsNotConfigured, "erasure needs the server's secrets key")
	}
	return nil
}

// erase deletes the subject keys named by refs in one transaction of the
// org, with the subject.erased entry and the stored receipt.
// eraseBound is how long an erasure's transaction may take: an org-wide
// one reads and deletes every subject key of the org in one transaction
// (about 1 ms a key on PostgreSQL), far past a store's bound on an
// ordinary call.
const eraseBound = 10 * time.Minute

func (s *Service) erase(ctx context.Context, orgID, scope, subjectRef string, who Requester, refs []string) (Receipt, error) {
	signer, err := grant.KeyFromSeed(s.d.LedgerKey.Seed())
	if err != nil {
		return Receipt{}, core.Unavailable("ledger key", err)
	}
	receiptID, err := s.d.IDs.New()
	if err != nil {
		return Receipt{}, err
	}
	recordID := idOrgErasure
	if scope == ScopeSubject {
		recordID = subjectRef
	}
	now := s.d.Now()
	var out Receipt
	err = s.d.Store.Update(store.WithLongCall(ctx, eraseBound), orgID, func(tx store.Tx) error {
		out = Receipt{}
		keys, dossiers := []string{}, 0
		for _, ref := range refs {
			r, err := tx.ArtifactInTx(ctx, kindSubjectKey, ref)
			if core.IsNotFound(err) {
				continue
			}
			if err != nil {
				return err
			}
			var k subjectKey
			if err := json.Unmarshal(r.Body, &k); err != nil {
				return fmt.Errorf("privacy: subject key does not decode: %w", err)
			}
			if _, err := tx.DeleteArtifact(ctx, kindSubjectKey, ref); err != nil {
				return err
			}
			if _, err := tx.DeleteArtifact(ctx, kindKeyIndex, k.KeyID); err != nil {
				return err
			}
			keys, dossiers = append(keys, k.KeyID), dossiers+k.Dossiers
		}
		if len(keys) == 0 {
			var prev erasureRecord
			err := core.ReadRecord(ctx, tx, kindErasure, recordID, &prev)
			if err == nil {
				out = Receipt{Receipt: prev.Receipt, Payload: prev.Payload, Replayed: true}
				return nil
			}
			if !core.IsNotFound(err) {
				return err
			}
		}
		head, err := tx.LedgerHead(ctx)
		if err != nil {
			return err
		}
		p := ReceiptPayload{Aud: grant.AudErasureReceipt, Iss: s.d.Issuer, Profile: ReceiptProfile, ReceiptID: receiptID,
			OrgID: orgID, Scope: scope, SubjectRef: subjectRef, RequestedBy: who, ErasedAt: core.Format(now),
			KeysDestroyed: keys, DossiersAffected: dossiers, StoresTouched: []string{storeSubjectKeys, storeDossiers, storeGrants, storeEscalations, storeIdempotency},
			LedgerSeq: head.Seq + 1, LedgerOrigin: ledger.Origin(s.d.Issuer, orgID), LedgerVerifierKey: s.d.LedgerKey.VerifierKey()}
		raw, err := canon.Marshal(p)
		if err != nil {
			return err
		}
		jws, err := grant.SignErasureReceipt(signer, raw)
		if err != nil {
			return err
		}
		if _, err := ledger.Append(ctx, tx, orgID, ledger.Record{Kind: ledger.KindSubjectErased, SubjectID: receiptID,
			PayloadDigest: canon.Digest(raw)}, now); err != nil {
			return err
		}
		out = Receipt{Receipt: jws, Payload: p}
		body, err := json.Marshal(erasureRecord{Receipt: jws, Payload: p})
		if err != nil {
			return err
		}
		return tx.PutArtifact(ctx, artifact.Record{OrgID: orgID, Kind: kindErasure, ID: recordID, Ref: scope, CreatedAt: now, Body: body})
	})
	if err != nil {
		return Receipt{}, core.Translate("erase personal data", err)
	}
	return out, nil
}

// checkSubject: 1 to MaxSubjectLen bytes of text without control
// characters.
func checkSubject(id string) error {
	if id == "" || len(id) > MaxSubjectLen || !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl) {
		return core.Invalid(CodeInvalidSubject, "subject_id", "subject_id must be 1 to %d bytes of text without control characters", MaxSubjectLen)
	}
	return nil
}

// VerifyReceipt checks an erasure receipt offline with the ledger verifier
// key the caller trusts (the service publishes it at
// /.well-known/clearance-ledger-key) and returns what it says: the
// signature must verify under that key, and the payload must name it.
func VerifyReceipt(receipt, ledgerVerifierKey string) (ReceiptPayload, error) {
	pub, err := publicKeyOf(ledgerVerifierKey)
	if err != nil {
		return ReceiptPayload{}, err
	}
	kid, err := grant.Thumbprint(pub)
	if err != nil {
		return ReceiptPayload{}, err
	}
	raw, _, err := grant.VerifyErasureReceipt(receipt, func(k string) (ed25519.PublicKey, error) {
		if k != kid {
			return nil, grant.ErrUnknownKey
		}
		return pub, nil
	})
	if err != nil {
		return ReceiptPayload{}, err
	}
	var p ReceiptPayload
	if err := strictjson.Decode(raw, &p, strictjson.Options{RejectUnknown: true}); err != nil {
		return ReceiptPayload{}, fmt.Errorf("privacy: receipt payload: %w", err)
	}
	if p.LedgerVerifierKey != ledgerVerifierKey || p.Profile != ReceiptProfile {
		return ReceiptPayload{}, errors.New("privacy: the receipt names another ledger key or profile")
	}
	return p, nil
}

// publicKeyOf extracts the raw Ed25519 key of a C2SP note verifier key
// ("<name>+<hash>+<base64(0x01 || key)>").
func publicKeyOf(vkey string) (ed25519.PublicKey, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return nil, errors.New("privacy: malformed ledger verifier key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 1 {
		return nil, errors.New("privacy: malformed ledger verifier key")
	}
	return ed25519.PublicKey(raw[1:]), nil
}
