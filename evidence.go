package clearance

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// DossierRecord is a stored dossier: Body is its canonical JSON and Digest
// the SHA-256 the ledger recorded.
type DossierRecord struct {
	DossierID  string
	DecisionID string
	Body       []byte
	Digest     string
}

// Dossier returns the org's dossier by dossier id; another org's is ErrNotFound.
func (e *Engine) Dossier(ctx context.Context, orgID, dossierID string) (DossierRecord, error) {
	if !ValidID(dossierID) {
		return DossierRecord{}, newError(ErrNotFound, CodeDossierNotFound, "dossier not found")
	}
	return e.dossierResult(e.store.Dossier(ctx, orgID, dossierID))
}

// DossierByDecision returns the org's dossier of a decision id.
func (e *Engine) DossierByDecision(ctx context.Context, orgID, decisionID string) (DossierRecord, error) {
	if !ValidID(decisionID) {
		return DossierRecord{}, newError(ErrNotFound, CodeDossierNotFound, "dossier not found")
	}
	return e.dossierResult(e.store.DossierByDecision(ctx, orgID, decisionID))
}

func (e *Engine) dossierResult(r dossier.Stored, err error) (DossierRecord, error) {
	if isNotFound(err) {
		return DossierRecord{}, newError(ErrNotFound, CodeDossierNotFound, "dossier not found")
	}
	if err != nil {
		return DossierRecord{}, unavailable("read dossier", err)
	}
	return DossierRecord{DossierID: r.DossierID, DecisionID: r.DecisionID, Body: r.Body, Digest: digestOf(r.Body)}, nil
}

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
func (e *Engine) Ledger(ctx context.Context, orgID string, afterSeq uint64, limit int) (LedgerPage, error) {
	if limit <= 0 {
		limit = DefaultLedgerPage
	}
	if limit > MaxLedgerPage {
		return LedgerPage{}, invalid(CodeInvalidRequest, "limit", "limit must be 1 to %d", MaxLedgerPage)
	}
	// A committed entry is visible before its fsync; show only durable
	// ones, so that no answer names an entry a power cut could still undo.
	if err := e.store.Sync(ctx); err != nil {
		return LedgerPage{}, unavailable("sync ledger", err)
	}
	head, err := e.store.LedgerHeadOf(ctx, orgID)
	if err != nil {
		return LedgerPage{}, unavailable("read ledger", err)
	}
	entries, err := e.store.LedgerEntries(ctx, orgID, afterSeq, limit)
	if err != nil {
		return LedgerPage{}, unavailable("read ledger", err)
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
func (e *Engine) VerifyLedger(ctx context.Context, orgID string) (ledger.Report, error) {
	return e.VerifyLedgerAgainst(ctx, orgID, nil)
}

// VerifyLedgerAgainst is VerifyLedger that also checks the ledger against
// the org's latest signed checkpoint (when a ledger key is configured) and
// against checkpoint, a signed checkpoint an auditor kept (when not nil):
// truncation, rewrites and reordering before a checkpoint are reported.
func (e *Engine) VerifyLedgerAgainst(ctx context.Context, orgID string, checkpoint []byte) (ledger.Report, error) {
	if err := e.store.Sync(ctx); err != nil {
		return ledger.Report{OrgID: orgID}, unavailable("sync ledger", err)
	}
	var opts ledger.VerifyOptions
	if k := e.opts.LedgerKey; k != nil {
		opts = ledger.VerifyOptions{VerifierKey: k.VerifierKey(), Origin: e.LedgerOrigin(orgID), Checkpoint: checkpoint}
	} else if checkpoint != nil {
		return ledger.Report{OrgID: orgID}, newError(ErrUnavailable, CodeLedgerKeyNotConfigured, "no ledger key is configured to check the checkpoint with")
	}
	rep, err := ledger.VerifyWith(ctx, e.store, orgID, opts)
	if err != nil {
		return rep, unavailable("verify ledger", err)
	}
	if !rep.Valid {
		return rep, nil
	}
	var after uint64
	for {
		page, err := e.store.LedgerEntries(ctx, orgID, after, MaxLedgerPage)
		if err != nil {
			return rep, unavailable("verify ledger", err)
		}
		for _, en := range page {
			what, got, err := e.storedDigest(ctx, orgID, en)
			if errors.Is(err, store.ErrCorrupt) {
				rep.Valid, rep.FirstBrokenSeq, rep.Reason = false, en.Seq, ReasonRecordUnreadable
				rep.Detail = "the record " + en.SubjectID + " of entry " + strconv.FormatUint(en.Seq, 10) + " cannot be decoded: " + err.Error()
				return rep, nil
			}
			if err != nil {
				return rep, unavailable("verify ledger", err)
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

// ShadowReport aggregates an org's SHADOW decisions over [From, To).
type ShadowReport struct {
	OrgID      string                 `json:"org_id"`
	From       time.Time              `json:"from"`
	To         time.Time              `json:"to"`
	Total      int                    `json:"total"`
	ByOutcome  map[policy.Outcome]int `json:"by_outcome"`
	ByWorkflow []WorkflowShadow       `json:"by_workflow"`
}

// WorkflowShadow is one workflow's share of a ShadowReport.
type WorkflowShadow struct {
	WorkflowKey string                 `json:"workflow_key"`
	Total       int                    `json:"total"`
	ByOutcome   map[policy.Outcome]int `json:"by_outcome"`
}

// MaxShadowWindow bounds a shadow report's time window.
const MaxShadowWindow = 366 * 24 * time.Hour

// DefaultShadowWindow is a shadow report's window when the request bounds
// only one end, or neither (which ends now).
const DefaultShadowWindow = 24 * time.Hour

// Window is a report's time window [From, To). A nil end is defaulted: To
// is the engine's now, From is To minus DefaultShadowWindow. Optional ends
// are pointers so that the zero time stays a time a caller may name.
type Window struct {
	From *time.Time
	To   *time.Time
}

// Between is the window [from, to).
func Between(from, to time.Time) Window { return Window{From: &from, To: &to} }

// ShadowReport counts the org's SHADOW decisions in the window by outcome
// and by workflow (workflows sorted by key).
func (e *Engine) ShadowReport(ctx context.Context, orgID string, w Window) (ShadowReport, error) {
	to := e.now()
	if w.To != nil {
		to = *w.To
	}
	from := to.Add(-DefaultShadowWindow)
	if w.From != nil {
		from = *w.From
	}
	if !from.Before(to) {
		return ShadowReport{}, invalid(CodeInvalidRequest, "from", "from must be before to")
	}
	if to.Sub(from) > MaxShadowWindow {
		return ShadowReport{}, invalid(CodeInvalidRequest, "from", "the window may span at most 366 days")
	}
	rep := ShadowReport{OrgID: orgID, From: from.UTC(), To: to.UTC(), ByOutcome: zeroOutcomes(), ByWorkflow: []WorkflowShadow{}}
	byWF := map[string]*WorkflowShadow{}
	err := e.store.DossierSummaries(ctx, orgID, from, to, func(s dossier.Summary) bool {
		if s.Mode != string(policy.ModeShadow) {
			return true
		}
		o := policy.Outcome(s.Outcome)
		rep.Total++
		rep.ByOutcome[o]++
		w := byWF[s.WorkflowKey]
		if w == nil {
			w = &WorkflowShadow{WorkflowKey: s.WorkflowKey, ByOutcome: zeroOutcomes()}
			byWF[s.WorkflowKey] = w
		}
		w.Total++
		w.ByOutcome[o]++
		return true
	})
	if err != nil {
		return ShadowReport{}, unavailable("shadow report", err)
	}
	for _, w := range byWF {
		rep.ByWorkflow = append(rep.ByWorkflow, *w)
	}
	sort.Slice(rep.ByWorkflow, func(i, j int) bool { return rep.ByWorkflow[i].WorkflowKey < rep.ByWorkflow[j].WorkflowKey })
	return rep, nil
}

func zeroOutcomes() map[policy.Outcome]int {
	return map[policy.Outcome]int{policy.OutcomeAllow: 0, policy.OutcomeEscalate: 0, policy.OutcomeReviewRequired: 0, policy.OutcomeBlock: 0}
}

// ReasonCodes is the stable reason-code vocabulary.
func ReasonCodes() []policy.ReasonCode { return policy.ReasonCodes() }
