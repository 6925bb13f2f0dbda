package pebblestore

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/registry"
)

var (
	powerLossRounds = flag.Int("powerloss.rounds", 3, "power-loss rounds of TestPowerLossKeepsAcknowledgedCycles")
	powerLossSeed   = flag.Uint64("powerloss.seed", 0, "seed of the crash points; 0 picks one (logged, to replay a failure)")
)

const (
	plWorkers  = 8   // concurrent workers, split over the orgs
	plOrgs     = 2   // orgs under load
	plCrashMin = 20  // acknowledgements before the crash, drawn per round
	plCrashMax = 200 // in [plCrashMin, plCrashMax]
	plAfter    = 20  // acknowledgements the workers add after the crash point
)

const plBundle = `{"bundle_id":"pl","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

type plOrg struct {
	id    string
	agent grant.Key
	base  uint64 // ledger entries before the load
}

// plDecision is an acknowledged decision (Evaluate or EnforceAndBind).
type plDecision struct {
	org             int
	dossier, digest string
	seq             uint64
}

// plGrant is an acknowledged grant with what was acknowledged of its claim
// and finalization.
type plGrant struct {
	org                            int
	id, token, intentHash, dossier string
	claimToken                     string
	final                          claim.State
}

// plBook is what the engine acknowledged.
type plBook struct {
	decisions []plDecision
	grants    []*plGrant
}

func (b *plBook) clone() *plBook {
	c := &plBook{decisions: append([]plDecision(nil), b.decisions...)}
	for _, g := range b.grants {
		cp := *g
		c.grants = append(c.grants, &cp)
	}
	return c
}

// plStats are the counts the test reports.
type plStats struct {
	decisions, grants, claims, finals int // acknowledged before a crash point
	after, afterLost                  int // decisions acknowledged after a crash point, and of those not on disk
	lateClaims, lateFinals, refused   int
}

// TestPowerLossKeepsAcknowledgedCycles runs the engine on Pebble's crashable
// in-memory filesystem under a mix of decisions and full cycles (bind, two
// racing claims, finalize) from concurrent workers of two orgs, and cuts the
// power at a random acknowledgement while work is in flight:
// CrashClone(UnsyncedDataPercent: 0) keeps only synced data. The store
// reopened from the clone must hold every decision, grant, claim and
// finalization acknowledged before the cut, unchanged; repeated claims and
// finalizations are refused; each ledger verifies and records them. Work
// continues on the clone for the next of -powerloss.rounds rounds. A last
// cut at rest shows the crash is real: an unsynced write is lost.
func TestPowerLossKeepsAcknowledgedCycles(t *testing.T) {
	seed := *powerLossSeed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	t.Logf("seed %d (replay with -powerloss.seed=%d)", seed, seed)
	rng := mrand.New(mrand.NewPCG(seed, seed))
	ctx := context.Background()
	start := time.Now()

	signing, err := grant.KeyFromSeed(plSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	// Long lifetimes: what was acknowledged before a cut can still be
	// claimed or finalized after it.
	opts := clearance.Options{GrantKeys: grant.NewKeyRing(signing), GrantTTL: time.Hour, ClaimLease: time.Hour}
	fs := vfs.NewCrashableMem()
	s, e := plOpen(t, fs, opts)
	orgs := plSetup(t, s, e)

	book := &plBook{}
	var st plStats
	for round := range *powerLossRounds {
		crashAt := plCrashMin + rng.IntN(plCrashMax-plCrashMin+1)
		prevD, prevG := len(book.decisions), len(book.grants)
		snap, crashed := plLoad(t, e, fs, orgs, book, round, crashAt)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		st.decisions += len(snap.decisions) - prevD
		for _, g := range snap.grants[prevG:] {
			st.grants++
			if g.claimToken != "" {
				st.claims++
			}
			if g.final != "" {
				st.finals++
			}
		}
		full := book // everything acknowledged, before and after the cut
		fs = crashed
		s, e = plOpen(t, fs, opts)
		book = plSettle(t, ctx, s, e, orgs, snap, full, &st)
		t.Logf("round %d: cut at %d acknowledgements; %d decisions and %d grants acknowledged before it survive",
			round, crashAt, len(snap.decisions), len(snap.grants))
	}
	// A cut at rest: everything acknowledged survives, an unsynced write
	// does not (the crash drops what was not synced).
	probe := []byte("powerloss-unsynced-probe")
	if err := s.db.Set(probe, []byte("x"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, e = plOpen(t, crashed, opts)
	if ok, err := has(s.db, probe); err != nil || ok {
		t.Fatalf("an unsynced write survived the cut (%v, %v): the crash test proves nothing", ok, err)
	}
	var rest plStats
	plSettle(t, ctx, s, e, orgs, book, book, &rest)
	if rest.lateClaims+rest.lateFinals != 0 {
		t.Fatalf("at rest every grant was final, yet %d claims and %d finalizations were left", rest.lateClaims, rest.lateFinals)
	}

	t.Logf("%d rounds in %v: acknowledged before the cuts %d decisions, %d grants, %d claims, %d finalizations; "+
		"0 lost; 0 double claims; %d decisions acknowledged after a cut, %d of them not on disk; "+
		"after reopening %d claims and %d finalizations completed, %d replays refused",
		*powerLossRounds, time.Since(start).Round(time.Millisecond), st.decisions, st.grants, st.claims, st.finals,
		st.after, st.afterLost, st.lateClaims, st.lateFinals, st.refused+rest.refused)
}

func plSeed(b byte) []byte {
	s := make([]byte, 32)
	s[0] = b
	return s
}

func plOpen(t *testing.T, fs vfs.FS, opts clearance.Options) (*Store, *clearance.Engine) {
	t.Helper()
	s, err := Open("db", Options{FS: fs, Logger: quiet{}})
	if err != nil {
		t.Fatalf("open after the cut: %v", err)
	}
	e, err := clearance.Open(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, e
}

// plSetup creates the orgs, each with an agent key and the bundle.
func plSetup(t *testing.T, s *Store, e *clearance.Engine) []plOrg {
	t.Helper()
	ctx := context.Background()
	var orgs []plOrg
	for i := range plOrgs {
		o, err := e.Admin.CreateOrg(ctx, fmt.Sprintf("Power %d", i))
		if err != nil {
			t.Fatal(err)
		}
		agent, err := grant.KeyFromSeed(plSeed(byte(10 + i)))
		if err != nil {
			t.Fatal(err)
		}
		jwk, err := json.Marshal(agent.PublicJWK())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.Admin.RegisterKey(ctx, o.Org.ID, registry.KindAgent, registry.Registration{KID: agent.KID(), PublicJWK: jwk}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Policies.PublishBundle(ctx, o.Org.ID, []byte(plBundle)); err != nil {
			t.Fatal(err)
		}
		head, err := s.LedgerHeadOf(ctx, o.Org.ID)
		if err != nil {
			t.Fatal(err)
		}
		orgs = append(orgs, plOrg{id: o.Org.ID, agent: agent, base: head.Seq})
	}
	return orgs
}

// plLoad runs the workers, cuts the power after crashAt acknowledgements
// (the book, as of the cut, is the snapshot), lets them acknowledge plAfter
// more on the running store and stops them. Everything acknowledged is
// appended to book.
func plLoad(t *testing.T, e *clearance.Engine, fs *vfs.MemFS, orgs []plOrg, book *plBook, round, crashAt int) (*plBook, *vfs.MemFS) {
	t.Helper()
	var (
		mu    sync.Mutex // guards book and acks
		acks  int
		cut   = make(chan struct{})
		after = make(chan struct{})
		stop  atomic.Bool
		wg    sync.WaitGroup
		bad   = make(chan struct{})
		once  sync.Once
	)
	ack := func(rec func()) {
		mu.Lock()
		defer mu.Unlock()
		rec()
		acks++
		switch acks {
		case crashAt:
			close(cut)
		case crashAt + plAfter:
			close(after)
		}
	}
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
		once.Do(func() { close(bad) })
	}
	w := &plWorker{e: e, orgs: orgs, ack: ack, fail: fail, book: book}
	for c := range plWorkers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("r%d-w%d-i%d", round, c, i)
				var ok bool
				if i%2 == 0 {
					ok = w.decide(c%plOrgs, id, (c*1000+i*37)%20000)
				} else {
					ok = w.cycle(c%plOrgs, id, i%4 == 3)
				}
				if !ok {
					return
				}
			}
		})
	}
	var (
		snap    *plBook
		crashed *vfs.MemFS
	)
	select {
	case <-cut:
		// The cut happens under the book's lock: what is in the snapshot was
		// acknowledged (synced) before it.
		mu.Lock()
		snap = book.clone()
		crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		mu.Unlock()
		select {
		case <-after:
		case <-bad:
		}
	case <-bad:
	}
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return snap, crashed
}

type plWorker struct {
	e    *clearance.Engine
	orgs []plOrg
	book *plBook
	ack  func(func())
	fail func(string, ...any)
}

func (w *plWorker) decide(org int, id string, amount int) bool {
	body := fmt.Sprintf(`{"decision_type":"PAYMENT","workflow_key":"power","amount":%d,"context":{"id":%q}}`, amount, id)
	d, err := w.e.Evaluate(context.Background(), clearance.EvaluateRequest{OrgID: w.orgs[org].id, Route: clearance.RouteEvaluateDecision, Body: []byte(body)})
	if err != nil {
		w.fail("evaluate %s: %v", id, err)
		return false
	}
	w.ack(func() {
		w.book.decisions = append(w.book.decisions, plDecision{org: org, dossier: d.DossierID, digest: d.DossierDigest, seq: d.LedgerSeq})
	})
	return true
}

// cycle binds a signed intent, claims the grant twice at once (exactly one
// claim wins) and finalizes the winning claim.
func (w *plWorker) cycle(org int, id string, failed bool) bool {
	ctx := context.Background()
	o := w.orgs[org]
	payload, err := canon.Marshal(map[string]any{
		"intent_id": "intent-" + id, "org_id": o.id, "actor": map[string]any{"id": "agent-7", "type": "agent"},
		"action":       map[string]any{"type": "refund", "amount": 100, "currency": "EUR", "target": "order-" + id},
		"workflow_key": "refunds", "decision_type": "REFUND", "nonce": "nonce-" + id, "concurrency_scope": "scope-" + id,
		"escalation": map[string]any{"mode": "NONE"}, "issued_at": time.Now().UTC().Format(time.RFC3339),
	})
	if err != nil {
		w.fail("intent: %v", err)
		return false
	}
	jws, err := grant.SignIntent(o.agent, payload)
	if err != nil {
		w.fail("sign intent: %v", err)
		return false
	}
	d, err := w.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: o.id, SignedIntent: jws})
	if err != nil || d.ExecutionToken == "" {
		w.fail("bind %s: %+v %v", id, d, err)
		return false
	}
	g := &plGrant{org: org, id: d.GrantID, token: d.ExecutionToken, intentHash: d.IntentHash, dossier: d.DossierID}
	w.ack(func() {
		w.book.decisions = append(w.book.decisions, plDecision{org: org, dossier: d.DossierID, digest: d.DossierDigest, seq: d.LedgerSeq})
		w.book.grants = append(w.book.grants, g)
	})

	var (
		res  [2]clearance.ClaimResult
		errs [2]error
		wg   sync.WaitGroup
	)
	for k := range res {
		wg.Go(func() {
			res[k], errs[k] = w.e.Claim(ctx, clearance.ClaimRequest{OrgID: o.id, ExecutionToken: g.token, IntentHash: g.intentHash})
		})
	}
	wg.Wait()
	win := -1
	for k := range res {
		switch {
		case errs[k] == nil && res[k].ShouldExecute && res[k].ClaimToken != "":
			if win >= 0 {
				w.fail("grant %s: both racing claims won", g.id)
				return false
			}
			win = k
		case plCode(errs[k]) != claim.CodeReplay:
			w.fail("grant %s: claim: %+v %v", g.id, res[k], errs[k])
			return false
		}
	}
	if win < 0 {
		w.fail("grant %s: both racing claims were refused: %v / %v", g.id, errs[0], errs[1])
		return false
	}
	token := res[win].ClaimToken
	w.ack(func() { g.claimToken = token })

	outcome := claim.OutcomeCommitted
	if failed {
		outcome = claim.OutcomeFailed
	}
	f, err := w.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: o.id, ExecutionToken: g.token, ClaimToken: token, Outcome: outcome})
	if err != nil || string(f.Outcome) != string(outcome) {
		w.fail("grant %s: finalize %s: %+v %v", g.id, outcome, f, err)
		return false
	}
	w.ack(func() { g.final = f.Outcome })
	return true
}

func plCode(err error) string {
	var ce *clearance.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

func plFinal(s claim.State) bool { return s == claim.StateCommitted || s == claim.StateFailed }

// plSettle checks the reopened store against snap (what was acknowledged
// before the cut); full is everything acknowledged, including after the
// cut, and supplies the claim tokens of claims that may have survived
// unrecorded in snap. Read only first, then replays (refused) and the
// completion of every open grant, which shows its record survived intact.
// It returns the book of the reopened store: snap with every grant final.
func plSettle(t *testing.T, ctx context.Context, s *Store, e *clearance.Engine, orgs []plOrg, snap, full *plBook, st *plStats) *plBook {
	t.Helper()
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	// Records acknowledged after the cut may or may not be on disk.
	inSnap := map[string]bool{}
	for _, d := range snap.decisions {
		inSnap[d.dossier] = true
	}
	for _, d := range full.decisions {
		if inSnap[d.dossier] {
			continue
		}
		st.after++
		if _, err := e.Evidence.Dossier(ctx, orgs[d.org].id, d.dossier); err != nil {
			st.afterLost++
		}
	}
	tokens := map[string]string{} // grant id -> claim token, from every answer
	for _, g := range full.grants {
		if g.claimToken != "" {
			tokens[g.id] = g.claimToken
		}
	}

	for _, d := range snap.decisions {
		r, err := e.Evidence.Dossier(ctx, orgs[d.org].id, d.dossier)
		if err != nil {
			add("dossier %s (seq %d) lost: %v", d.dossier, d.seq, err)
			continue
		}
		var body struct {
			Seq uint64 `json:"ledger_seq"`
		}
		if r.Digest != d.digest || canon.Digest(r.Body) != d.digest || json.Unmarshal(r.Body, &body) != nil || body.Seq != d.seq {
			add("dossier %s: digest %s seq %d, acknowledged %s seq %d", d.dossier, r.Digest, body.Seq, d.digest, d.seq)
		}
	}
	states := make([]claim.State, len(snap.grants))
	for i, g := range snap.grants {
		org := orgs[g.org].id
		sg, err := s.GrantOf(ctx, org, g.id)
		if err != nil {
			add("grant %s lost: %v", g.id, err)
			continue
		}
		states[i] = sg.State
		if sg.TokenDigest != canon.Digest([]byte(g.token)) || sg.IntentHash != g.intentHash || sg.DossierID != g.dossier {
			add("grant %s changed: %+v", g.id, sg)
		}
		// verify-token agrees: valid while ISSUED, spent once claimed.
		v, err := e.VerifyGrant(ctx, org, g.token, g.intentHash)
		switch {
		case sg.State == claim.StateIssued && (err != nil || v.State != sg.State || v.GrantID != g.id):
			add("grant %s: verify %+v %v, stored state %s", g.id, v, err, sg.State)
		case sg.State != claim.StateIssued && plCode(err) != clearance.CodeGrantAlreadyClaimed:
			add("grant %s: verify %+v %v, stored state %s", g.id, v, err, sg.State)
		}
		switch {
		case g.final != "" && sg.State != g.final:
			add("grant %s: finalized %s acknowledged, state %s", g.id, g.final, sg.State)
		case g.claimToken != "" && sg.State == claim.StateIssued:
			add("grant %s: claim acknowledged, state %s", g.id, sg.State)
		case sg.State != claim.StateIssued && sg.ClaimTokenDigest != canon.Digest([]byte(tokens[g.id])):
			add("grant %s is %s, but not by the claim that won", g.id, sg.State)
		}
	}
	for o := range orgs {
		plCheckLedger(ctx, s, e, orgs, o, snap, states, add)
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("after the cut: %d problems, first:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}

	// Replays, then complete every open grant.
	next := snap.clone()
	for i, g := range next.grants {
		org := orgs[g.org].id
		if states[i] != claim.StateIssued {
			_, err := e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: g.token, IntentHash: g.intentHash})
			if plCode(err) != claim.CodeReplay {
				add("grant %s (%s): a replayed claim was not refused: %v", g.id, states[i], err)
			}
			st.refused++
		}
		switch {
		case plFinal(states[i]):
			_, err := e.Finalize(ctx, clearance.FinalizeRequest{OrgID: org, ExecutionToken: g.token, ClaimToken: tokens[g.id], Outcome: claim.OutcomeCommitted})
			if plCode(err) != claim.CodeAlreadyFinalized {
				add("grant %s (%s): a replayed finalization was not refused: %v", g.id, states[i], err)
			}
			st.refused++
			g.claimToken, g.final = tokens[g.id], states[i]
		case states[i] == claim.StateIssued:
			c, err := e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: g.token, IntentHash: g.intentHash})
			if err != nil || !c.ShouldExecute {
				add("grant %s: ISSUED after the cut, but its claim failed: %v", g.id, err)
				continue
			}
			st.lateClaims++
			tokens[g.id] = c.ClaimToken
			fallthrough
		default: // CLAIMED: the claim token that won still finalizes
			f, err := e.Finalize(ctx, clearance.FinalizeRequest{OrgID: org, ExecutionToken: g.token, ClaimToken: tokens[g.id], Outcome: claim.OutcomeCommitted})
			if err != nil || f.Outcome != claim.StateCommitted {
				add("grant %s: finalizing its claim after the cut: %+v %v", g.id, f, err)
				continue
			}
			st.lateFinals++
			g.claimToken, g.final = tokens[g.id], f.Outcome
		}
	}
	if len(bad) > 0 {
		t.Fatalf("replays after the cut: %d problems, first:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
	return next
}

// plCheckLedger verifies org o's ledger and reads it whole: each
// acknowledged decision is the entry at its seq, each grant has one
// grant.issued entry, and its claim and finalization entries agree with its
// state (one transaction writes both), never twice.
func plCheckLedger(ctx context.Context, s *Store, e *clearance.Engine, orgs []plOrg, o int, snap *plBook, states []claim.State, add func(string, ...any)) {
	org := orgs[o].id
	rep, err := e.Audit.VerifyLedger(ctx, org)
	if err != nil || !rep.Valid {
		add("org %d: ledger does not verify after the cut: %+v %v", o, rep, err)
		return
	}
	bySeq := map[uint64]ledger.Entry{}
	count := map[string]int{} // kind + " " + subject
	var after uint64
	for {
		page, err := s.LedgerEntries(ctx, org, after, clearance.MaxLedgerPage)
		if err != nil {
			add("org %d: read ledger: %v", o, err)
			return
		}
		for _, en := range page {
			bySeq[en.Seq] = en
			count[en.Kind+" "+en.SubjectID]++
		}
		if len(page) < clearance.MaxLedgerPage {
			break
		}
		after = page[len(page)-1].Seq
	}
	if uint64(len(bySeq)) != rep.HeadSeq {
		add("org %d: %d ledger entries, head %d", o, len(bySeq), rep.HeadSeq)
	}
	acked := orgs[o].base
	for _, d := range snap.decisions {
		if d.org != o {
			continue
		}
		acked++
		if en := bySeq[d.seq]; en.Kind != ledger.KindDecision || en.SubjectID != d.dossier || en.PayloadDigest != d.digest {
			add("org %d: seq %d is %+v, acknowledged decision %s %s", o, d.seq, en, d.dossier, d.digest)
		}
	}
	for i, g := range snap.grants {
		if g.org != o {
			continue
		}
		acked++
		if g.claimToken != "" {
			acked++
		}
		if g.final != "" {
			acked++
		}
		if n := count[ledger.KindGrantIssued+" "+g.id]; n != 1 {
			add("org %d: grant %s has %d grant.issued entries", o, g.id, n)
		}
		claimed, finalized := count[ledger.KindClaimed+" "+g.id], count[ledger.KindFinalized+" "+g.id]
		if claimed > 1 || (claimed == 1) != (states[i] != claim.StateIssued) {
			add("org %d: grant %s is %s with %d execution.claimed entries", o, g.id, states[i], claimed)
		}
		if finalized > 1 || (finalized == 1) != plFinal(states[i]) {
			add("org %d: grant %s is %s with %d execution.finalized entries", o, g.id, states[i], finalized)
		}
	}
	for k, n := range count {
		if strings.HasPrefix(k, ledger.KindClaimed+" ") && n > 1 {
			add("org %d: %s recorded %d times", o, k, n)
		}
	}
	if rep.HeadSeq < acked {
		add("org %d: ledger head %d < %d acknowledged records", o, rep.HeadSeq, acked)
	}
}
