package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	KindDecision        = "decision.recorded"
	KindGrantIssued     = "grant.issued"
	KindClaimed         = "execution.claimed"
	KindFinalized       = "execution.finalized"
	KindReconciled      = "execution.reconciled"
	KindKeyRegistered   = "key.registered"
	KindKeyRevoked      = "key.revoked"
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
	return canon.DigestValue(hashable{e.Seq, e.OrgID, e.Kind, e.SubjectID, e.PayloadDigest, e.RecordedAt, e.PrevEntryHash})
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
