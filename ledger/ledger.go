package ledger

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/internal/canon"
)

// Genesis is the prev_entry_hash of an org's first entry.
const Genesis = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// Entry is one record of an org's ledger.
type Entry struct {
	Seq           uint64 `json:"seq"`
	OrgID         string `json:"org_id"`
	Kind          string `json:"kind"`
	SubjectID     string `json:"subject_id"`
	PayloadDigest string `json:"payload_digest"`
	RecordedAt    string `json:"recorded_at"`
	PrevEntryHash string `json:"prev_entry_hash"`
	EntryHash     string `json:"entry_hash"`
}

// Entry kinds written by Clearance.
const (
	KindOrgCreated      = "org.created"
	KindAPIKeyCreated   = "api_key.created"
	KindPolicyPublished = "policy.published"
	// KindPolicyActivated: the subject version became the org's active
	// policy (payload: its bundle digest).
	KindPolicyActivated = "policy.activated"
	KindDecision        = "decision.recorded"
	KindGrantIssued     = "grant.issued"
	KindClaimed         = "execution.claimed"
	KindFinalized       = "execution.finalized"
	KindReconciled      = "execution.reconciled"
	KindKeyRegistered   = "key.registered"
	KindKeyRevoked      = "key.revoked"
	// KindExportRequested records a validation pack queued (subject: the
	// export id); KindExportCompleted its build ending, SUCCEEDED (with the
	// pack's hashes) or FAILED.
	KindExportRequested = "export.requested"
	KindExportCompleted = "export.completed"
	KindOverride        = "decision.overridden"
	KindDispatched      = "execution.dispatched"

	// KindShareLinksRevoked: every dossier share link of the org was
	// revoked (the org's share epoch moved on).
	KindShareLinksRevoked = "share_links.revoked"

	// KindEscalationOpened: a managed escalation opened its approval
	// request (subject: the escalation id). Its later transitions are
	// "escalation." + the lowercase state: escalation.verifying,
	// escalation.grant_ready, escalation.denied, escalation.expired,
	// escalation.cancelled, escalation.failed.
	KindEscalationOpened = "escalation.opened"
	// KindApprovalUsed: an approval receipt became evidence for one intent.
	KindApprovalUsed = "approval.used"

	// KindSignalConnectorCreated and KindSignalConnectorRevoked: an inbound
	// signal connector was made or revoked (subject: the connector id).
	KindSignalConnectorCreated = "signal_connector.created"
	KindSignalConnectorRevoked = "signal_connector.revoked"
	// KindSignalsReceived: a delivery of inbound signals was stored
	// (subject: the delivery id).
	KindSignalsReceived = "signals.received"
	// KindOnboardingBundleIssued: a mapping session's deployment bundle was
	// issued (subject: the session id): the org's key, its connector, the
	// onboarding grants it revoked.
	KindOnboardingBundleIssued = "onboarding.bundle_issued"
	// KindCredentialsRevoked: credentials of the org were revoked at once
	// by its owner (subject: the org id).
	KindCredentialsRevoked = "credentials.revoked"
	// KindWorkspaceProvisioned: an agent started a provisional workspace
	// without a human (subject: the org id): its SHADOW-only key and when
	// its claim window ends.
	KindWorkspaceProvisioned = "onboarding.workspace_provisioned"
	// KindWorkspaceClaimed: a signed-in owner claimed a provisional
	// workspace (subject: the org id): the account and the owner's key.
	KindWorkspaceClaimed = "onboarding.workspace_claimed"
	// KindSpendReserved records what a claim charged to spend gates, and
	// KindSpendSettled each move of that reservation (committed, released,
	// held): the spend package's Reservation.
	KindSpendReserved = "spend.reserved"
	KindSpendSettled  = "spend.settled"
	// KindDataProtectionSet: the org's data-protection setting changed
	// (subject: the org id): which intent members are personal data.
	KindDataProtectionSet = "data_protection.set"
	// KindSubjectErased: a data subject's keys were destroyed (subject: the
	// erasure receipt id); the payload digest is the digest of the signed
	// receipt's payload.
	KindSubjectErased = "subject.erased"
	// KindIssuerTrusted: an issuer of federated decisions was put on the
	// org's trust list, or its entry replaced (subject: the issuer; payload:
	// the entry). KindIssuerRemoved: it was taken off (payload: the removal).
	KindIssuerTrusted = "federation.issuer_trusted"
	KindIssuerRemoved = "federation.issuer_removed"
)

// Head is the newest entry of an org's ledger; the zero Head is an empty ledger.
type Head struct {
	Seq       uint64 `json:"seq"`
	EntryHash string `json:"entry_hash"`
}

// Record is what an Append describes: the kind of change, the id of the
// changed thing and the digest of its stored form.
type Record struct {
	Kind          string
	SubjectID     string
	PayloadDigest string
}

// Tx is what Append needs from a backend transaction scoped to one org.
type Tx interface {
	LedgerHead(ctx context.Context) (Head, error)
	// PutLedgerEntry stores e and makes it the org's head.
	PutLedgerEntry(ctx context.Context, e Entry) error
}

// Reader reads an org's ledger in seq order.
type Reader interface {
	// LedgerEntries returns up to limit entries with seq > afterSeq, ascending.
	LedgerEntries(ctx context.Context, orgID string, afterSeq uint64, limit int) ([]Entry, error)
	// LedgerHeadOf returns the org's stored head (zero when empty).
	LedgerHeadOf(ctx context.Context, orgID string) (Head, error)
}

// hashable is Entry without entry_hash: the bytes the hash covers.
type hashable struct {
	Seq           uint64 `json:"seq"`
	OrgID         string `json:"org_id"`
	Kind          string `json:"kind"`
	SubjectID     string `json:"subject_id"`
	PayloadDigest string `json:"payload_digest"`
	RecordedAt    string `json:"recorded_at"`
	PrevEntryHash string `json:"prev_entry_hash"`
}

// ComputeHash returns the entry hash: SHA-256 of the RFC 8785 form of e
// without its entry_hash member.
func (e Entry) ComputeHash() (string, error) {
	var buf [512]byte
	if b, ok := appendCanonical(buf[:0], &e, false); ok {
		return canon.FormatDigest(sha256.Sum256(b)), nil
	}
	return canon.DigestValue(hashable{e.Seq, e.OrgID, e.Kind, e.SubjectID, e.PayloadDigest, e.RecordedAt, e.PrevEntryHash})
}

// LeafData returns the bytes the org's Merkle tree commits to for e: the
// RFC 8785 canonical JSON of the whole entry, entry_hash included, e.g.
//
//	{"entry_hash":"sha256:…","kind":"decision.recorded","org_id":"org_1",
//	 "payload_digest":"sha256:…","prev_entry_hash":"sha256:…",
//	 "recorded_at":"2026-11-01T00:00:00Z","seq":1,"subject_id":"dos_1"}
//
// (one line, no spaces). Entry seq n is leaf n-1 of the tree.
func (e Entry) LeafData() ([]byte, error) {
	if b, ok := appendCanonical(nil, &e, true); ok {
		return b, nil
	}
	return canon.Marshal(e)
}

// LeafHash returns e's RFC 9162 leaf hash, SHA-256(0x00 || LeafData).
func (e Entry) LeafHash() (tlog.Hash, error) {
	var buf [512]byte
	if b, ok := appendCanonical(append(buf[:0], 0x00), &e, true); ok {
		return sha256.Sum256(b), nil
	}
	data, err := canon.Marshal(e)
	if err != nil {
		return tlog.Hash{}, err
	}
	return tlog.RecordHash(data), nil
}

// Next builds the entry that follows head.
func Next(head Head, orgID string, r Record, at time.Time) (Entry, error) {
	prev := head.EntryHash
	if head.Seq == 0 {
		prev = Genesis
	}
	e := Entry{
		Seq:           head.Seq + 1,
		OrgID:         orgID,
		Kind:          r.Kind,
		SubjectID:     r.SubjectID,
		PayloadDigest: r.PayloadDigest,
		RecordedAt:    at.UTC().Format(time.RFC3339Nano),
		PrevEntryHash: prev,
	}
	h, err := e.ComputeHash()
	if err != nil {
		return Entry{}, err
	}
	e.EntryHash = h
	return e, nil
}

// Append writes the entry recording r after the org's current head.
// The caller's transaction must serialize appends per org.
func Append(ctx context.Context, tx Tx, orgID string, r Record, at time.Time) (Entry, error) {
	if r.Kind == "" || r.SubjectID == "" {
		return Entry{}, errors.New("ledger: record needs a kind and a subject")
	}
	head, err := tx.LedgerHead(ctx)
	if err != nil {
		return Entry{}, fmt.Errorf("ledger: read head: %w", err)
	}
	e, err := Next(head, orgID, r, at)
	if err != nil {
		return Entry{}, err
	}
	if err := tx.PutLedgerEntry(ctx, e); err != nil {
		return Entry{}, fmt.Errorf("ledger: append: %w", err)
	}
	return e, nil
}
