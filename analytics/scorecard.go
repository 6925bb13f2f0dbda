package analytics

import (
	"context"
	"errors"
	"math"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// Scorecard is the growth scorecard: reviewed orgs (classified prod and
// external) by UTC month of creation, with what they did since.
type Scorecard struct {
	GeneratedAt  time.Time         `json:"generated_at"`
	Population   Population        `json:"population"`
	Cohorts      []Cohort          `json:"cohorts"`
	Unclassified Unclassified      `json:"unclassified"`
	Definitions  map[string]string `json:"definitions"`
}

// Population counts every org by classification.
type Population struct {
	Organizations   int `json:"organizations"`
	Reviewed        int `json:"reviewed"`         // prod and external: counted below
	OtherClassified int `json:"other_classified"` // classified, not prod/external: excluded
	Unclassified    int `json:"unclassified"`     // never classified: excluded, listed apart
}

// Cohort is the reviewed orgs created in one UTC month.
type Cohort struct {
	Cohort                 string    `json:"cohort"` // YYYY-MM
	Organizations          int       `json:"organizations"`
	Activated              int       `json:"activated"` // with a durable decision
	Enforcing              int       `json:"enforcing"` // with a durable ENFORCEMENT decision
	Decisions              int64     `json:"decisions"`
	EnforcementDecisions   int64     `json:"enforcement_decisions"`
	ActivationRate         *float64  `json:"activation_rate"`  // activated / organizations; null with none
	EnforcementRate        *float64  `json:"enforcement_rate"` // enforcing / organizations; null with none
	TimeToFirstDecision    Durations `json:"time_to_first_decision_seconds"`
	TimeToFirstEnforcement Durations `json:"time_to_first_enforcement_seconds"`
}

// Durations summarizes measured durations in seconds; null without any.
type Durations struct {
	Count  int      `json:"count"`
	Median *float64 `json:"median"`
	P90    *float64 `json:"p90"`
}

// Unclassified counts the orgs excluded for want of a classification, by
// UTC month of creation.
type Unclassified struct {
	Organizations int           `json:"organizations"`
	Cohorts       []CohortCount `json:"cohorts"`
}

// CohortCount is a number of orgs created in one UTC month.
type CohortCount struct {
	Cohort        string `json:"cohort"`
	Organizations int    `json:"organizations"`
}

var definitions = map[string]string{
	"cohort":                            "the UTC calendar month in which the organization was created",
	"reviewed":                          "classified with environment prod and audience external; only reviewed organizations are counted in cohorts",
	"decisions":                         "durable decisions: recorded in the organization's ledger, SHADOW and ENFORCEMENT",
	"activated":                         "reviewed organizations with at least one durable decision",
	"enforcing":                         "reviewed organizations with at least one durable decision in ENFORCEMENT mode",
	"activation_rate":                   "activated / organizations of the cohort; null when the cohort is empty",
	"enforcement_rate":                  "enforcing / organizations of the cohort; null when the cohort is empty",
	"time_to_first_decision_seconds":    "from the organization's creation to its first durable decision, over the organizations that made one (median and 90th percentile, nearest rank); null when none did",
	"time_to_first_enforcement_seconds": "from the organization's creation to its first durable ENFORCEMENT decision, over the organizations that made one; null when none did",
}

// Scorecard computes the growth scorecard now, counting every durable
// decision of the reviewed orgs committed before it began. It writes
// nothing.
func (s *Service) Scorecard(ctx context.Context) (Scorecard, error) {
	sc, _, err := s.scorecard(ctx)
	return sc, err
}

func (s *Service) scorecard(ctx context.Context) (Scorecard, view, error) {
	orgs, err := s.allOrgs(ctx)
	if err != nil {
		return Scorecard{}, view{}, err
	}
	profiles, err := listRecords[profile](ctx, s, kindProfile, refOrg)
	if err != nil {
		return Scorecard{}, view{}, err
	}
	var reviewed []string
	for _, o := range orgs {
		if profiles[o.ID].reviewed() {
			reviewed = append(reviewed, o.ID)
		}
	}
	v, err := s.caughtUp(ctx, reviewed)
	if err != nil {
		return Scorecard{}, view{}, err
	}
	rollups := v.rollups
	now := s.d.Now().UTC()
	sc := Scorecard{GeneratedAt: now, Cohorts: []Cohort{}, Unclassified: Unclassified{Cohorts: []CohortCount{}}, Definitions: definitions}
	sc.Population.Organizations = len(orgs)
	type acc struct {
		c          Cohort
		toDecision []float64
		toEnforce  []float64
	}
	cohorts := map[string]*acc{}
	unclassified := map[string]int{}
	first := ""
	for _, o := range orgs {
		m := monthOf(o.CreatedAt)
		if first == "" || m < first {
			first = m
		}
		p := profiles[o.ID]
		switch {
		case p.Classification == nil:
			sc.Population.Unclassified++
			unclassified[m]++
			continue
		case !p.reviewed():
			sc.Population.OtherClassified++
			continue
		}
		sc.Population.Reviewed++
		a := cohorts[m]
		if a == nil {
			a = &acc{}
			cohorts[m] = a
		}
		a.c.Organizations++
		r := rollups[o.ID]
		a.c.Decisions += r.Decisions
		a.c.EnforcementDecisions += r.EnforcementDecisions
		if r.FirstDecisionAt != nil {
			a.c.Activated++
			a.toDecision = append(a.toDecision, seconds(r.FirstDecisionAt.Sub(o.CreatedAt)))
		}
		if r.FirstEnforcementAt != nil {
			a.c.Enforcing++
			a.toEnforce = append(a.toEnforce, seconds(r.FirstEnforcementAt.Sub(o.CreatedAt)))
		}
	}
	if first == "" {
		return sc, v, nil
	}
	for m := first; m <= monthOf(now); m = nextMonth(m) {
		c := Cohort{Cohort: m}
		if a := cohorts[m]; a != nil {
			c = a.c
			c.Cohort = m
			c.TimeToFirstDecision, c.TimeToFirstEnforcement = summarize(a.toDecision), summarize(a.toEnforce)
		} else {
			c.TimeToFirstDecision, c.TimeToFirstEnforcement = summarize(nil), summarize(nil)
		}
		c.ActivationRate, c.EnforcementRate = rate(c.Activated, c.Organizations), rate(c.Enforcing, c.Organizations)
		sc.Cohorts = append(sc.Cohorts, c)
		if n := unclassified[m]; n > 0 {
			sc.Unclassified.Cohorts = append(sc.Unclassified.Cohorts, CohortCount{Cohort: m, Organizations: n})
		}
	}
	sc.Unclassified.Organizations = sc.Population.Unclassified
	return sc, v, nil
}

// Baseline is an immutable snapshot of the scorecard under a name.
type Baseline struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	Scorecard Scorecard `json:"scorecard"`
}

var baselineNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// FreezeBaseline snapshots the scorecard as baseline name (1 to
// MaxBaselineName ASCII letters, digits, '_' or '-'); a name already
// frozen is 409 BASELINE_EXISTS and the snapshot it names is unchanged.
func (s *Service) FreezeBaseline(ctx context.Context, name string) (Baseline, error) {
	if !baselineNameRE.MatchString(name) {
		return Baseline{}, &core.Error{Kind: core.ErrInvalidRequest, Code: CodeInvalidBaselineName,
			Detail: "a baseline name is 1 to 80 ASCII letters, digits, underscores or hyphens",
			Fields: []core.FieldError{{Field: "name", Message: "must be 1 to 80 of A-Z, a-z, 0-9, _ and -"}}}
	}
	exists := func() error {
		return core.New(core.ErrConflict, CodeBaselineExists, "the baseline %q is already frozen", name)
	}
	if _, err := s.d.Store.Artifact(ctx, tenant.PlatformOrgID, kindBaseline, name); err == nil {
		return Baseline{}, exists()
	} else if !core.IsNotFound(err) {
		return Baseline{}, unavailable("read baseline", err)
	}
	sc, v, err := s.scorecard(ctx)
	if err != nil {
		return Baseline{}, err
	}
	b := Baseline{Name: name, CreatedAt: sc.GeneratedAt, Scorecard: sc}
	taken := false
	err = s.platformUpdate(ctx, func(tx store.Tx) error {
		taken = false
		if _, err := tx.ArtifactInTx(ctx, kindBaseline, name); err == nil {
			taken = true
			return nil
		} else if !core.IsNotFound(err) {
			return err
		}
		if err := s.keep(ctx, tx, v); err != nil {
			return err
		}
		return s.putRecord(ctx, tx, kindBaseline, name, "", b)
	})
	switch {
	case err != nil:
		return Baseline{}, unavailable("write baseline", err)
	case taken:
		return Baseline{}, exists()
	}
	return b, nil
}

// allOrgs lists every org.
func (s *Service) allOrgs(ctx context.Context) ([]tenant.Org, error) {
	var out []tenant.Org
	after := ""
	for {
		page, err := s.d.Store.Orgs(ctx, after, 1000)
		if err != nil {
			return nil, unavailable("list orgs", err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

// catchUpWorkers bounds the orgs read at once before a report.
const catchUpWorkers = 8

// view is every stored rollup with what each covered org's ledger adds
// to it as of now: what a report counts. Computing it writes nothing;
// keep (in a transaction that freezes something) writes what it found.
type view struct {
	rollups map[string]rollup // by org, pending counts included
	pending []pending
}

// caughtUp reads every stored rollup and counts, without writing, what the
// ledgers of orgs hold past theirs up to the heads read now.
func (s *Service) caughtUp(ctx context.Context, orgs []string) (view, error) {
	rollups, err := listRecords[rollup](ctx, s, kindRollup, refOrg)
	if err != nil {
		return view{}, err
	}
	var (
		mu    sync.Mutex
		first error
		found []pending
		wg    sync.WaitGroup
		work  = make(chan string)
	)
	for range min(catchUpWorkers, len(orgs)) {
		wg.Go(func() {
			for org := range work {
				head, err := s.d.Store.LedgerHeadOf(ctx, org)
				var p pending
				if err != nil {
					err = unavailable("read ledger head", err)
				} else if base := rollups[org]; head.Seq > base.LedgerSeq {
					p, err = s.tail(ctx, org, base, head.Seq)
				}
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil && p.moves() {
					found = append(found, p)
				}
				mu.Unlock()
			}
		})
	}
	for _, org := range orgs {
		work <- org
	}
	close(work)
	wg.Wait()
	if first != nil {
		return view{}, first
	}
	for _, p := range found {
		rollups[p.org] = p.next
	}
	return view{rollups: rollups, pending: found}, nil
}

// keep writes the view's pending counts in the platform transaction tx;
// those another writer stored first are already there.
func (s *Service) keep(ctx context.Context, tx store.Tx, v view) error {
	for _, p := range v.pending {
		if err := s.apply(ctx, tx, p); err != nil && !errors.Is(err, errMoved) {
			return err
		}
	}
	return nil
}

func seconds(d time.Duration) float64 { return d.Seconds() }

func rate(n, of int) *float64 {
	if of == 0 {
		return nil
	}
	r := float64(n) / float64(of)
	return &r
}

// summarize is the median and 90th percentile (nearest rank) of v.
func summarize(v []float64) Durations {
	d := Durations{Count: len(v)}
	if len(v) == 0 {
		return d
	}
	v = slices.Clone(v)
	slices.Sort(v)
	rank := func(p float64) *float64 {
		i := max(0, min(int(math.Ceil(p*float64(len(v))))-1, len(v)-1))
		x := v[i]
		return &x
	}
	d.Median, d.P90 = rank(0.5), rank(0.9)
	return d
}

// nextMonth is the month after m ("YYYY-MM").
func nextMonth(m string) string {
	t, _ := time.Parse("2006-01", m)
	return t.AddDate(0, 1, 0).Format("2006-01")
}
