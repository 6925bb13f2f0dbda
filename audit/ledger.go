package audit

import (
	"context"
	"errors"
	"strconv"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// LedgerPage is one page of an org's ledger.
type LedgerPage struct {
	OrgID   string         `json:"org_id"`
	Entries []ledger.Entry `json:"entries"`
	Head    ledger.Head    `json:"head"`
	// NextAfterSeq is the after_seq of the next page; 0 when this is the last.
	NextAfterSeq uint64 `json:"next_after_seq,omitempty"`
}

// Ledger page limits.
const (
	DefaultLedgerPage = 100
	MaxLedgerPage     = 1000
)

// Ledger returns up to limit entries with seq > afterSeq.
func (s *Service) Ledger(ctx context.Context, orgID string, afterSeq uint64, limit int) (LedgerPage, error) {
	if limit <= 0 {
		limit = DefaultLedgerPage
	}
	if limit > MaxLedgerPage {
		return LedgerPage{}, core.Invalid(core.CodeInvalidRequest, "limit", "limit must be 1 to %d", MaxLedgerPage)
	}
	// A committed entry is visible before its fsync; show only durable
	// ones, so that no answer names an entry a power cut could still undo.
	if err := s.d.Store.Sync(ctx); err != nil {
		return LedgerPage{}, core.Unavailable("sync ledger", err)
	}
	head, err := s.d.Store.LedgerHeadOf(ctx, orgID)
	if err != nil {
		return LedgerPage{}, core.Unavailable("read ledger", err)
	}
	entries, err := s.d.Store.LedgerEntries(ctx, orgID, afterSeq, limit)
	if err != nil {
		return LedgerPage{}, core.Unavailable("read ledger", err)
	}
	p := LedgerPage{OrgID: orgID, Entries: entries, Head: head}
	if p.Entries == nil {
		p.Entries = []ledger.Entry{}
	}
	if n := len(entries); n == limit && entries[n-1].Seq < head.Seq {
		p.NextAfterSeq = entries[n-1].Seq
	}
	return p, nil
}

// Reasons reported by VerifyLedger when a ledgered record (dossier,
// override, dispatch) no longer matches, or no longer decodes.
const (
	ReasonRecordDigestMismatch = "RECORD_DIGEST_MISMATCH"
	ReasonRecordUnreadable     = "RECORD_UNREADABLE"
)

// VerifyLedger recomputes the org's hash chain and, for every decision,
// override and dispatch entry, checks that the stored record still has the
// digest the ledger recorded. The first problem is reported with its seq.
func (s *Service) VerifyLedger(ctx context.Context, orgID string) (ledger.Report, error) {
	return s.VerifyLedgerAgainst(ctx, orgID, nil)
}

// VerifyLedgerAgainst is VerifyLedger that also checks the ledger against
// the org's latest signed checkpoint (when a ledger key is configured) and
// against checkpoint, a signed checkpoint an auditor kept (when not nil):
// truncation, rewrites and reordering before a checkpoint are reported.
func (s *Service) VerifyLedgerAgainst(ctx context.Context, orgID string, checkpoint []byte) (ledger.Report, error) {
	if err := s.d.Store.Sync(ctx); err != nil {
		return ledger.Report{OrgID: orgID}, core.Unavailable("sync ledger", err)
	}
	var opts ledger.VerifyOptions
	if k := s.d.LedgerKey; k != nil {
		opts = ledger.VerifyOptions{VerifierKey: k.VerifierKey(), Origin: s.LedgerOrigin(orgID), Checkpoint: checkpoint}
	} else if checkpoint != nil {
		return ledger.Report{OrgID: orgID}, core.New(core.ErrUnavailable, CodeLedgerKeyNotConfigured, "no ledger key is configured to check the checkpoint with")
	}
	rep, err := ledger.VerifyWith(ctx, s.d.Store, orgID, opts)
	if err != nil {
		return rep, core.Unavailable("verify ledger", err)
	}
	if !rep.Valid {
		return rep, nil
	}
	var after uint64
	for {
		page, err := s.d.Store.LedgerEntries(ctx, orgID, after, MaxLedgerPage)
		if err != nil {
			return rep, core.Unavailable("verify ledger", err)
		}
		for _, en := range page {
			what, got, err := s.storedDigest(ctx, orgID, en)
			if errors.Is(err, store.ErrCorrupt) {
				rep.Valid, rep.FirstBrokenSeq, rep.Reason = false, en.Seq, ReasonRecordUnreadable
				rep.Detail = "the record " + en.SubjectID + " of entry " + strconv.FormatUint(en.Seq, 10) + " cannot be decoded: " + err.Error()
				return rep, nil
			}
			if err != nil {
				return rep, core.Unavailable("verify ledger", err)
			}
			if what != "" && got != en.PayloadDigest {
				rep.Valid, rep.FirstBrokenSeq, rep.Reason = false, en.Seq, ReasonRecordDigestMismatch
				rep.Detail = what + " " + en.SubjectID + " is " + got + ", the ledger recorded " + en.PayloadDigest
				return rep, nil
			}
		}
		if len(page) < MaxLedgerPage {
			return rep, nil
		}
		after = page[len(page)-1].Seq
	}
}

// Artifact kinds of the records that override and dispatch entries bind.
// They are the values of the root package's KindOverride and KindDispatch,
// under which those records are written; the root's ledger tests verify a
// ledger holding both, so a drift fails there.
const (
	artifactOverride = "override"
	artifactDispatch = "dispatch"
)

// storedDigest returns the digest of the stored record that a ledger entry
// binds by its payload digest — a decision's dossier, an override, a
// dispatch — with what names its kind; the digest is "missing" for a record
// that is gone, and what is "" for entries of other kinds.
func (s *Service) storedDigest(ctx context.Context, orgID string, en ledger.Entry) (what, digest string, err error) {
	var body []byte
	switch en.Kind {
	case ledger.KindDecision:
		what = "dossier"
		r, rerr := s.d.Store.Dossier(ctx, orgID, en.SubjectID)
		body, err = r.Body, rerr
	case ledger.KindOverride, ledger.KindDispatched:
		kind := artifactOverride
		what = "override"
		if en.Kind == ledger.KindDispatched {
			kind, what = artifactDispatch, "dispatch"
		}
		r, rerr := s.d.Store.Artifact(ctx, orgID, kind, en.SubjectID)
		if errors.Is(rerr, artifact.ErrInvalid) {
			rerr = store.ErrNotFound // no record can have that id: the entry was rewritten
		}
		body, err = r.Body, rerr
	default:
		return "", "", nil
	}
	switch {
	case core.IsNotFound(err):
		return what, "missing", nil
	case err != nil:
		return "", "", err
	}
	return what, canon.Digest(body), nil
}
