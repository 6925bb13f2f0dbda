package analytics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// DefaultRollupInterval is how often Run brings the rollups of the orgs
// this engine wrote up to date.
const DefaultRollupInterval = 5 * time.Second

// rollupBatch is the most ledger entries read at once.
const rollupBatch = 2000

// rollup is an org's durable decisions counted so far (kindRollup): every
// decision of its ledger up to LedgerSeq, and none after.
type rollup struct {
	OrgID                string     `json:"org_id"`
	LedgerSeq            uint64     `json:"ledger_seq"`
	Decisions            int64      `json:"decisions"`
	EnforcementDecisions int64      `json:"enforcement_decisions"`
	FirstDecisionAt      *time.Time `json:"first_decision_at,omitempty"`
	FirstEnforcementAt   *time.Time `json:"first_enforcement_at,omitempty"`
}

// monthCells is an org's decisions of one UTC month by mode/outcome
// (kindMonth, id month/org, ref month).
type monthCells struct {
	OrgID string           `json:"org_id"`
	Month string           `json:"month"`
	Cells map[string]int64 `json:"cells"`
	// LedgerSeq is the org's rollup seq when the record was written: the
	// cells hold every decision of the month up to it, and none after.
	LedgerSeq uint64 `json:"ledger_seq"`
}

// Run keeps the rollups of the reviewed orgs this engine writes up to date
// (each interval) until ctx ends. Only reviewed orgs (classified prod and
// external) are counted: no report covers another, and an org reviewed
// later is caught up from its first entry by the first report that covers
// it. Reports catch up the orgs they cover anyway: Run only keeps that
// work small.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultRollupInterval
	}
	core.EveryTick(ctx, interval, func() { s.rollChanged(ctx) })
}

// rollChanged is one pass of Run.
func (s *Service) rollChanged(ctx context.Context) {
	for _, org := range s.d.Store.TakeChanged() {
		var p profile
		err := core.ReadCommitted(ctx, s.d.Store, tenant.PlatformOrgID, kindProfile, org, &p)
		switch {
		case core.IsNotFound(err) || (err == nil && !p.reviewed()):
			continue
		case err == nil:
			err = s.CatchUp(ctx, org)
		}
		if err != nil && ctx.Err() == nil {
			s.d.Store.MarkChanged(org)
			s.d.Logger.Warn("analytics rollup failed", "org_id", org, "err", err)
		}
	}
}

// CatchUp counts the org's decisions its rollup has not counted yet: every
// one whose ledger entry is committed when it starts.
func (s *Service) CatchUp(ctx context.Context, orgID string) error {
	head, err := s.d.Store.LedgerHeadOf(ctx, orgID)
	if err != nil {
		return unavailable("read ledger head", err)
	}
	for {
		var base rollup
		if err := s.readRollup(ctx, orgID, &base); err != nil {
			return err
		}
		p, err := s.tail(ctx, orgID, base, head.Seq)
		if err != nil || !p.moves() {
			return err
		}
		err = s.platformUpdate(ctx, func(tx store.Tx) error { return s.apply(ctx, tx, p) })
		switch {
		case errors.Is(err, errMoved):
		case err != nil:
			return unavailable("write analytics rollup", err)
		default:
			return nil
		}
	}
}

// pending is what an org's ledger adds to its stored rollup: next
// replaces base, and months adds to the month cells.
type pending struct {
	org    string
	base   rollup
	next   rollup
	months map[string]map[string]int64 // month → cell → decisions
	events []event                     // the same, one by one in seq order
}

func (p pending) moves() bool { return p.next.LedgerSeq != p.base.LedgerSeq }

// tail counts, without writing, the org's ledger past base up to seq
// target (or its end, if that comes first).
func (s *Service) tail(ctx context.Context, orgID string, base rollup, target uint64) (pending, error) {
	p := pending{org: orgID, base: base, next: base, months: map[string]map[string]int64{}}
	for p.next.LedgerSeq < target {
		next, events, err := s.count(ctx, orgID, p.next)
		if err != nil {
			return pending{}, err
		}
		if next.LedgerSeq == p.next.LedgerSeq {
			break // the ledger ends before target (target was read earlier)
		}
		p.next = next
		for _, ev := range events {
			if p.months[ev.month] == nil {
				p.months[ev.month] = map[string]int64{}
			}
			p.months[ev.month][ev.cell]++
		}
		p.events = append(p.events, events...)
	}
	return p, nil
}

// apply writes p in the platform transaction tx, if the stored rollup is
// still p.base; errMoved if another writer moved it on since.
func (s *Service) apply(ctx context.Context, tx store.Tx, p pending) error {
	var cur rollup
	if err := core.ReadRecord(ctx, tx, kindRollup, p.org, &cur); err != nil && !core.IsNotFound(err) {
		return err
	}
	if cur.LedgerSeq != p.base.LedgerSeq {
		return errMoved
	}
	for month, add := range p.months {
		id := month + "/" + p.org
		merged := monthCells{OrgID: p.org, Month: month, Cells: map[string]int64{}}
		if err := core.ReadRecord(ctx, tx, kindMonth, id, &merged); err != nil && !core.IsNotFound(err) {
			return err
		}
		if merged.Cells == nil {
			merged.Cells = map[string]int64{}
		}
		for k, v := range add {
			merged.Cells[k] += v
		}
		merged.LedgerSeq = p.next.LedgerSeq
		if err := s.putRecord(ctx, tx, kindMonth, id, month, merged); err != nil {
			return err
		}
	}
	return s.putRecord(ctx, tx, kindRollup, p.org, refOrg, p.next)
}

var errMoved = errors.New("analytics: the rollup moved on")

// event is one durable decision: its ledger seq, UTC month and cell.
type event struct {
	seq   uint64
	month string
	cell  string
}

// count reads the org's ledger past base (at most rollupBatch entries) and
// returns the rollup they make and the decisions among them. What it
// counts is the dossier the ledger entry's digest covers: a dossier that
// is missing, unreadable or not the one ledgered fails the count (503),
// so a broken record never turns into a wrong number.
func (s *Service) count(ctx context.Context, orgID string, base rollup) (rollup, []event, error) {
	entries, err := s.d.Store.LedgerEntries(ctx, orgID, base.LedgerSeq, rollupBatch)
	if err != nil {
		return base, nil, unavailable("read ledger", err)
	}
	next := base
	next.OrgID = orgID
	var events []event
	for _, e := range entries {
		next.LedgerSeq = e.Seq
		if e.Kind != ledger.KindDecision {
			continue
		}
		d, err := s.d.Store.Dossier(ctx, orgID, e.SubjectID)
		if err != nil {
			return base, nil, core.Unavailable("read the dossier of a ledgered decision", err)
		}
		var body struct {
			Mode      string `json:"mode"`
			Outcome   string `json:"outcome"`
			CreatedAt string `json:"created_at"`
		}
		if canon.Digest(d.Body) != e.PayloadDigest || json.Unmarshal(d.Body, &body) != nil {
			return base, nil, core.Unavailable("count a ledgered decision",
				fmt.Errorf("org %s ledger seq %d: the dossier is not the one the ledger records", orgID, e.Seq))
		}
		at, err := time.Parse(time.RFC3339Nano, body.CreatedAt)
		if err != nil {
			return base, nil, core.Unavailable("count a ledgered decision", fmt.Errorf("org %s ledger seq %d: created_at: %w", orgID, e.Seq, err))
		}
		at = at.UTC()
		next.Decisions++
		if next.FirstDecisionAt == nil || at.Before(*next.FirstDecisionAt) {
			next.FirstDecisionAt = &at
		}
		if body.Mode == string(policy.ModeEnforcement) {
			next.EnforcementDecisions++
			if next.FirstEnforcementAt == nil || at.Before(*next.FirstEnforcementAt) {
				next.FirstEnforcementAt = &at
			}
		}
		events = append(events, event{seq: e.Seq, month: monthOf(at), cell: body.Mode + "/" + body.Outcome})
	}
	return next, events, nil
}

// readRollup reads the org's committed rollup (the zero one before any).
func (s *Service) readRollup(ctx context.Context, orgID string, r *rollup) error {
	err := core.ReadCommitted(ctx, s.d.Store, tenant.PlatformOrgID, kindRollup, orgID, r)
	if err != nil && !core.IsNotFound(err) {
		return unavailable("read analytics rollup", err)
	}
	return nil
}

// putRecord stores v as the platform's record (kind, id) under ref.
func (s *Service) putRecord(ctx context.Context, tx store.Tx, kind, id, ref string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r := artifactOf(kind, id, s.d.Now(), body)
	r.Ref = ref
	return tx.PutArtifact(ctx, r)
}

// artifactOf is the platform's record (kind, id).
func artifactOf(kind, id string, at time.Time, body []byte) artifact.Record {
	return artifact.Record{OrgID: tenant.PlatformOrgID, Kind: kind, ID: id, CreatedAt: at, Body: body}
}

// listRecords decodes every platform record of kind under ref, by id.
func listRecords[T any](ctx context.Context, s *Service, kind, ref string) (map[string]T, error) {
	recs, err := s.d.Store.ArtifactsByRef(ctx, tenant.PlatformOrgID, kind, ref, 0)
	if err != nil {
		return nil, unavailable("list "+kind, err)
	}
	out := make(map[string]T, len(recs))
	for _, r := range recs {
		var v T
		if err := json.Unmarshal(r.Body, &v); err != nil {
			return nil, core.Unavailable("decode "+kind, err)
		}
		out[r.ID] = v
	}
	return out, nil
}
