package analytics

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"regexp"
	"time"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// ReportStatus is what a frozen report awaits: an editor's review. Freezing
// publishes nothing.
const ReportStatus = "PENDING_EDITORIAL_REVIEW"

// Report is the signed payload of a blast-radius report.
type Report struct {
	Issuer      string `json:"iss"`
	Audience    string `json:"aud"` // grant.AudGrowthReport
	ID          string `json:"report_id"`
	Kind        string `json:"report"` // "blast_radius"
	Month       string `json:"month"`
	PeriodStart string `json:"period_start"` // RFC 3339 UTC, inclusive
	PeriodEnd   string `json:"period_end"`   // RFC 3339 UTC, exclusive
	FrozenAt    string `json:"frozen_at"`
	IssuedAt    int64  `json:"iat"`
	Status      string `json:"status"`     // ReportStatus
	Population  string `json:"population"` // who is counted, in words
	// MinOrgsPerCell is the publication threshold of a cell.
	MinOrgsPerCell int `json:"min_orgs_per_cell"`
	// CrossCellTotals is always "SUPPRESSED": no sum over cells is given.
	CrossCellTotals string       `json:"cross_cell_totals"`
	Cells           []ReportCell `json:"cells"`
}

// ReportCell is one mode × outcome cell. A suppressed cell carries no
// number at all.
type ReportCell struct {
	Mode          string `json:"mode"`
	Outcome       string `json:"outcome"`
	Published     bool   `json:"published"`
	Organizations *int   `json:"organizations,omitempty"` // distinct orgs with a decision in the cell
	Decisions     *int64 `json:"decisions,omitempty"`
}

// FrozenReport is what the route answers, byte for byte the same each time
// the month is asked for.
type FrozenReport struct {
	Month string `json:"month"`
	// Artifact is the compact JWS of the report: typ
	// grant.TypGrowthReport, signed by the reporting key KeyID.
	Artifact string `json:"artifact"`
	KeyID    string `json:"kid"`
	Report   Report `json:"report"`
}

var monthRE = regexp.MustCompile(`^20[0-9]{2}-(0[1-9]|1[0-2])$`)

const reportKind = "blast_radius"

// FreezeBlastRadius returns the blast-radius report of month ("YYYY-MM", a
// 20xx year, a completed UTC month): the one frozen before (created false),
// or one computed, signed and frozen now (created true). Two servers
// racing both compute; the first to commit freezes it and the other
// answers that one.
func (s *Service) FreezeBlastRadius(ctx context.Context, month string) (body []byte, created bool, err error) {
	start, err := time.Parse("2006-01", month)
	if !monthRE.MatchString(month) || err != nil {
		return nil, false, &core.Error{Kind: core.ErrInvalidRequest, Code: CodeInvalidMonth,
			Detail: "month is YYYY-MM with a 20xx year", Fields: []core.FieldError{{Field: "month", Message: "must be YYYY-MM with a 20xx year"}}}
	}
	end := start.AddDate(0, 1, 0)
	now := s.d.Now().UTC()
	// A month is complete once every decision stamped in it has committed:
	// MaxClockSkew after its end, for servers whose clocks run behind and
	// transactions still committing.
	if now.Before(end.Add(s.d.MaxClockSkew)) {
		return nil, false, &core.Error{Kind: core.ErrInvalidRequest, Code: CodeMonthNotComplete,
			Detail: "month " + month + " is not a completed UTC month", Fields: []core.FieldError{{Field: "month", Message: "must be a completed UTC month"}}}
	}
	switch r, err := s.d.Store.Artifact(ctx, tenant.PlatformOrgID, kindReport, month); {
	case err == nil:
		return r.Body, false, nil
	case !core.IsNotFound(err):
		return nil, false, unavailable("read report", err)
	}
	if s.cfg.ReportingKey.IsZero() {
		return nil, false, core.New(core.ErrUnavailable, CodeReportingKeyNotConfigured, "the server has no reporting key, so no report can be signed")
	}
	for range freezeTries {
		body, created, err = s.freeze(ctx, month, start, end, now)
		if !errors.Is(err, errStale) {
			return body, created, err
		}
	}
	return nil, false, core.New(core.ErrConflict, CodeCohortChanged, "consents or classifications kept changing while %s was being frozen: ask again", month)
}

// freezeTries is how often a freeze is computed again when consents or
// classifications changed under it.
const freezeTries = 3

// errStale: a profile changed after the freeze read them.
var errStale = errors.New("analytics: profiles changed during the freeze")

// freeze computes, signs and freezes the month's report once, or answers
// the one frozen first.
func (s *Service) freeze(ctx context.Context, month string, start, end, now time.Time) (body []byte, created bool, err error) {
	seen, err := s.readEpoch(ctx)
	if err != nil {
		return nil, false, err
	}
	rep, v, err := s.blastRadius(ctx, month, start, end, now)
	if err != nil {
		return nil, false, err
	}
	payload, err := canon.Marshal(rep)
	if err != nil {
		return nil, false, err
	}
	jws, err := grant.SignGrowthReport(s.cfg.ReportingKey, payload)
	if err != nil {
		return nil, false, core.Unavailable("sign report", err)
	}
	body, err = json.Marshal(FrozenReport{Month: month, Artifact: jws, KeyID: s.cfg.ReportingKey.KID(), Report: rep})
	if err != nil {
		return nil, false, err
	}
	var frozen []byte
	err = s.platformUpdate(ctx, func(tx store.Tx) error {
		frozen = nil
		switch r, err := tx.ArtifactInTx(ctx, kindReport, month); {
		case err == nil:
			frozen = r.Body
			return nil
		case !core.IsNotFound(err):
			return err
		}
		var e epoch
		if err := core.ReadRecord(ctx, tx, kindEpoch, epochProfiles, &e); err != nil && !core.IsNotFound(err) {
			return err
		}
		if e != seen {
			return errStale
		}
		if err := s.keep(ctx, tx, v); err != nil {
			return err
		}
		if err := s.putRecord(ctx, tx, kindKey, s.cfg.ReportingKey.KID(), refKey, s.cfg.ReportingKey.PublicJWK()); err != nil {
			return err
		}
		return tx.PutArtifact(ctx, artifactOf(kindReport, month, now, body))
	})
	switch {
	case errors.Is(err, errStale):
		return nil, false, err
	case err != nil:
		return nil, false, unavailable("freeze report", err)
	case frozen != nil:
		return frozen, false, nil
	}
	return body, true, nil
}

// blastRadius computes the month's report over consented external
// production orgs, counting every decision committed before it began; it
// writes nothing, and returns what it counted past the stored rollups.
func (s *Service) blastRadius(ctx context.Context, month string, start, end, now time.Time) (Report, view, error) {
	profiles, err := listRecords[profile](ctx, s, kindProfile, refOrg)
	if err != nil {
		return Report{}, view{}, err
	}
	eligible := map[string]bool{}
	var orgs []string
	for id, p := range profiles {
		if p.consented() && p.reviewed() {
			eligible[id] = true
			orgs = append(orgs, id)
		}
	}
	v, err := s.caughtUp(ctx, orgs)
	if err != nil {
		return Report{}, view{}, err
	}
	months, err := listRecords[monthCells](ctx, s, kindMonth, month)
	if err != nil {
		return Report{}, view{}, err
	}
	// Add what the stored month cells do not hold yet. They were read after
	// the rollups, so a rollup stored in between may already hold part of
	// what the view counted: only decisions past the cells' own seq count.
	for _, p := range v.pending {
		id := month + "/" + p.org
		stored := months[id]
		merged := monthCells{OrgID: p.org, Month: month, Cells: map[string]int64{}, LedgerSeq: stored.LedgerSeq}
		for k, n := range stored.Cells {
			merged.Cells[k] += n
		}
		added := false
		for _, ev := range p.events {
			if ev.month == month && ev.seq > stored.LedgerSeq {
				merged.Cells[ev.cell]++
				added = true
			}
		}
		if added {
			months[id] = merged
		}
	}
	type tally struct {
		orgs      int
		decisions int64
	}
	tallies := map[string]*tally{}
	cohort := 0
	for _, m := range months {
		if !eligible[m.OrgID] {
			continue
		}
		counted := false
		for k, n := range m.Cells {
			if n <= 0 {
				continue
			}
			t := tallies[k]
			if t == nil {
				t = &tally{}
				tallies[k] = t
			}
			t.orgs++
			t.decisions += n
			counted = true
		}
		if counted {
			cohort++
		}
	}
	if cohort < MinOrgsPerCell {
		return Report{}, view{}, core.New(core.ErrConflict, CodeInsufficientCohort,
			"fewer than %d consented external production organizations made a durable decision in %s: no cell could be published, so nothing is", MinOrgsPerCell, month)
	}
	id, err := s.d.IDs.New()
	if err != nil {
		return Report{}, view{}, core.Unavailable("report id", err)
	}
	rep := Report{Issuer: s.d.Issuer, Audience: grant.AudGrowthReport, ID: id, Kind: reportKind, Month: month,
		PeriodStart: start.Format(time.RFC3339), PeriodEnd: end.Format(time.RFC3339),
		FrozenAt: now.Format(core.TimeFormat), IssuedAt: now.Unix(), Status: ReportStatus,
		Population:     "organizations that consented to growth reports, classified prod and external, with a durable decision in the month",
		MinOrgsPerCell: MinOrgsPerCell, CrossCellTotals: "SUPPRESSED", Cells: make([]ReportCell, 0, len(cells))}
	for _, c := range cells {
		rc := ReportCell{Mode: c.Mode, Outcome: c.Outcome}
		if t := tallies[c.key()]; t != nil && t.orgs >= MinOrgsPerCell {
			n, d := t.orgs, t.decisions
			rc.Published, rc.Organizations, rc.Decisions = true, &n, &d
		}
		rep.Cells = append(rep.Cells, rc)
	}
	return rep, v, nil
}

// VerifyReport checks a blast-radius artifact against the reporting key pub
// and returns its report. Only a growth report verifies: any other token
// kind is refused whatever key signed it.
func VerifyReport(artifact string, pub ed25519.PublicKey) (Report, error) {
	payload, _, err := grant.VerifyGrowthReport(artifact, func(string) (ed25519.PublicKey, error) { return pub, nil })
	if err != nil {
		return Report{}, err
	}
	var r Report
	if err := strictjson.Decode(payload, &r, strictjson.Options{RejectUnknown: true}); err != nil {
		return Report{}, err
	}
	return r, nil
}
