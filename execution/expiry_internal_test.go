package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/tenant"
)

const expiryOrg = "01941234-5678-7abc-8def-000000000001"

var expiryT0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// movingClock is the engine's and the store's clock: tests move it.
type movingClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *movingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *movingClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type expiryEnv struct {
	s   *Service
	b   store.Backend
	clk *movingClock
}

// newExpiryEnv is a service over an in-memory Pebble store with one org.
// Grants are written with the claim package directly: expiry reads and
// writes nothing else.
func newExpiryEnv(t *testing.T) *expiryEnv {
	t.Helper()
	clk := &movingClock{now: expiryT0}
	b, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	d := core.Deps{Store: core.NewStore(b), Clock: clk.Now, Logger: slog.New(slog.DiscardHandler), Issuer: "clearance.example"}
	err = d.Store.UpdateNew(t.Context(), expiryOrg, func(tx store.Tx) error {
		o := tenant.Org{ID: expiryOrg, Name: "Acme", CreatedAt: expiryT0}
		if err := tx.PutOrg(t.Context(), o); err != nil {
			return err
		}
		return core.AppendRecord(t.Context(), tx, ledger.KindOrgCreated, expiryOrg, o, expiryT0)
	})
	if err != nil {
		t.Fatal(err)
	}
	return &expiryEnv{s: New(d, Config{}), b: b, clk: clk}
}

func (e *expiryEnv) update(t *testing.T, fn func(ctx context.Context, tx store.Tx) error) {
	t.Helper()
	if err := e.b.Update(t.Context(), expiryOrg, func(tx store.Tx) error { return fn(t.Context(), tx) }); err != nil {
		t.Fatal(err)
	}
}

// claimed issues grant id at issuedAt (from expiryT0) and claims it now
// with lease.
func (e *expiryEnv) claimed(t *testing.T, id string, issuedAt, lease time.Duration) claim.Grant {
	t.Helper()
	var c claim.Grant
	e.update(t, func(ctx context.Context, tx store.Tx) error {
		err := claim.Issue(ctx, tx, claim.Grant{OrgID: expiryOrg, GrantID: id, IntentHash: "sha256:" + id, Nonce: "n-" + id,
			Scope: "s-" + id, IssuedAt: expiryT0.Add(issuedAt), ExpiresAt: expiryT0.Add(time.Hour), TokenDigest: "sha256:token-" + id})
		if err != nil {
			return err
		}
		c, err = claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: id, IntentHash: "sha256:" + id, ClaimTokenDigest: "sha256:claim-" + id, Lease: lease})
		return err
	})
	return c
}

func (e *expiryEnv) head(t *testing.T) ledger.Head {
	t.Helper()
	h, err := e.b.LedgerHeadOf(t.Context(), expiryOrg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (e *expiryEnv) state(t *testing.T, id string) claim.Grant {
	t.Helper()
	g, err := e.b.GrantOf(t.Context(), expiryOrg, id)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (e *expiryEnv) list(t *testing.T, limit int) []Execution {
	t.Helper()
	l, err := e.s.Indeterminate(t.Context(), expiryOrg, limit)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (e *expiryEnv) watched() bool {
	e.s.claimed.mu.Lock()
	defer e.s.claimed.mu.Unlock()
	_, ok := e.s.claimed.orgs[expiryOrg]
	return ok
}

func ids(l []Execution) string {
	var s []string
	for _, x := range l {
		s = append(s, fmt.Sprintf("%s:%s", x.GrantID, x.State))
	}
	return fmt.Sprint(s)
}

// TestIndeterminateDoesNotWrite: the listing shows a lapsed claim as it
// will be recorded and writes nothing; ExpireLapsed records it, ledgered,
// and the listing stays the same.
func TestIndeterminateDoesNotWrite(t *testing.T) {
	e := newExpiryEnv(t)
	g1 := e.claimed(t, "g1", 0, 30*time.Second)
	e.claimed(t, "g2", 1*time.Second, 30*time.Second)
	e.update(t, func(ctx context.Context, tx store.Tx) error {
		_, err := claim.Finalize(ctx, tx, claim.FinalizeRequest{GrantID: "g2", ClaimTokenDigest: "sha256:claim-g2", Outcome: claim.OutcomeIndeterminate})
		return err
	})
	e.claimed(t, "g3", 2*time.Second, 30*time.Second)
	e.claimed(t, "g4", -time.Second, 2*time.Minute) // live: not listed
	e.update(t, func(ctx context.Context, tx store.Tx) error {
		return claim.Issue(ctx, tx, claim.Grant{OrgID: expiryOrg, GrantID: "g5", IntentHash: "h", Nonce: "n5", Scope: "s5", ExpiresAt: expiryT0.Add(time.Hour)})
	})
	if l := e.list(t, 0); ids(l) != "[g2:INDETERMINATE]" {
		t.Fatalf("before any lease passed: %s", ids(l))
	}

	e.clk.advance(45 * time.Second) // g1's and g3's leases passed 15 s ago
	before := e.head(t)
	listed := e.list(t, 0)
	if ids(listed) != "[g1:INDETERMINATE g2:INDETERMINATE g3:INDETERMINATE]" {
		t.Fatalf("listing: %s", ids(listed))
	}
	if l := listed[0]; !l.FinalizedAt.Equal(g1.LeaseExpiresAt) || l.FinalCode != claim.CodeLeaseExpired || !l.Lapsed || l.EffectConfirmed {
		t.Fatalf("lapsed claim listed as %+v, want finalized at its lease end %s", l, g1.LeaseExpiresAt)
	}
	if l := e.list(t, 2); ids(l) != "[g1:INDETERMINATE g2:INDETERMINATE]" {
		t.Fatalf("listing cut at 2: %s", ids(l))
	}
	if after := e.head(t); after != before {
		t.Fatalf("listing moved the ledger head from %+v to %+v", before, after)
	}
	for _, id := range []string{"g1", "g3"} {
		if st := e.state(t, id).State; st != claim.StateClaimed {
			t.Fatalf("listing changed %s to %s", id, st)
		}
	}

	n, err := e.s.ExpireLapsed(t.Context(), expiryOrg)
	if err != nil || n != 2 {
		t.Fatalf("ExpireLapsed = %d, %v; want 2", n, err)
	}
	entries, err := e.b.LedgerEntries(t.Context(), expiryOrg, before.Seq, 10)
	if err != nil || len(entries) != 2 {
		t.Fatalf("ledger after ExpireLapsed: %d entries, %v", len(entries), err)
	}
	for i, id := range []string{"g1", "g3"} {
		if entries[i].Kind != ledger.KindFinalized || entries[i].SubjectID != id {
			t.Fatalf("entry %d: %s %s, want %s %s", i, entries[i].Kind, entries[i].SubjectID, ledger.KindFinalized, id)
		}
		if st := e.state(t, id); st.State != claim.StateIndeterminate || !st.Lapsed {
			t.Fatalf("%s after ExpireLapsed: %+v", id, st)
		}
	}
	if d := cmp.Diff(listed, e.list(t, 0)); d != "" {
		t.Fatalf("the listing changed when the lapsed claims were recorded (-before +after):\n%s", d)
	}
	if n, err := e.s.ExpireLapsed(t.Context(), expiryOrg); err != nil || n != 0 {
		t.Fatalf("second ExpireLapsed = %d, %v", n, err)
	}
	var ce *core.Error
	if _, err := e.s.ExpireLapsed(t.Context(), "01941234-5678-7abc-8def-000000000bad"); !errors.As(err, &ce) || ce.Code != core.CodeOrgNotFound {
		t.Fatalf("ExpireLapsed of an unknown org: %v", err)
	}
}

// TestExpiryTick: one tick of RunExpiry records the lapsed claims of the
// orgs it watches and stops watching an org with no claim left; an org
// whose expiry fails stays watched.
func TestExpiryTick(t *testing.T) {
	e := newExpiryEnv(t)
	g := e.claimed(t, "g1", 0, 30*time.Second)
	e.s.claimed.add(expiryOrg) // as Claim does
	if n := e.s.expireClaimed(t.Context()); n != 0 || !e.watched() {
		t.Fatalf("tick during the lease: %d recorded, watched %v", n, e.watched())
	}
	e.clk.advance(30 * time.Second)
	before := e.head(t)
	if n := e.s.expireClaimed(t.Context()); n != 1 || e.watched() {
		t.Fatalf("tick after the lease: %d recorded, watched %v", n, e.watched())
	}
	if st := e.state(t, "g1"); st.State != claim.StateIndeterminate || !st.FinalizedAt.Equal(g.LeaseExpiresAt) {
		t.Fatalf("after the tick: %+v", st)
	}
	if h := e.head(t); h.Seq != before.Seq+1 {
		t.Fatalf("ledger grew by %d, want 1", h.Seq-before.Seq)
	}
	if n := e.s.expireClaimed(t.Context()); n != 0 {
		t.Fatalf("tick with no org watched recorded %d", n)
	}

	e.claimed(t, "g2", time.Second, 30*time.Second)
	e.s.claimed.add(expiryOrg)
	e.clk.advance(time.Minute)
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := e.s.expireClaimed(t.Context()); n != 0 || !e.watched() {
		t.Fatalf("failed tick: %d recorded, watched %v; want the org kept for the next tick", n, e.watched())
	}
}

// TestExpiryConcurrent: ticks and explicit calls racing over the same
// lapsed claims record each exactly once.
func TestExpiryConcurrent(t *testing.T) {
	e := newExpiryEnv(t)
	const claims = 8
	for i := range claims {
		e.claimed(t, fmt.Sprintf("g%d", i), time.Duration(i)*time.Second, 30*time.Second)
	}
	e.clk.advance(time.Minute)
	before := e.head(t)
	counts := make(chan int, 8)
	var wg sync.WaitGroup
	for i := range cap(counts) {
		wg.Go(func() {
			if i%2 == 0 {
				e.s.claimed.add(expiryOrg)
				counts <- e.s.expireClaimed(t.Context())
				return
			}
			n, err := e.s.ExpireLapsed(t.Context(), expiryOrg)
			if err != nil {
				t.Error(err)
			}
			counts <- n
		})
	}
	wg.Wait()
	close(counts)
	total := 0
	for n := range counts {
		total += n
	}
	if h := e.head(t); total != claims || h.Seq != before.Seq+claims {
		t.Fatalf("recorded %d, ledger grew by %d; want %d each", total, h.Seq-before.Seq, claims)
	}
}

func TestRunExpiryStopsWithItsContext(t *testing.T) {
	e := newExpiryEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	e.s.RunExpiry(ctx, 0) // returns: the test would time out otherwise
}

// TestExecutionWireIsTheStoredMembers: the reconciliation routes answer
// with the members they did when they wrote the stored record itself, but
// token_digest and personal_data (shown opened: view); a change to either
// struct that would change the wire fails here and must be made on purpose.
func TestExecutionWireIsTheStoredMembers(t *testing.T) {
	at := time.Date(2026, 11, 1, 12, 0, 0, 123, time.UTC)
	full := claim.Grant{OrgID: "o", GrantID: "g", DecisionID: "d", DossierID: "x", DossierDigest: "sha256:x", IntentID: "i",
		IntentHash: "sha256:i", PayloadDigest: "sha256:p", ExpectedEffectDigest: "sha256:e", Nonce: "n", Scope: "s",
		Correlation: "c", ActorID: "a", ActionType: "pay", PolicyVersion: "v1", BundleDigest: "sha256:b",
		Intent: json.RawMessage(`{"amount":1}`), PersonalData: &claim.Sealed{KeyID: "k", Ciphertext: "v1.x"}, TokenDigest: "sha256:t", IssuedAt: at, ExpiresAt: at.Add(time.Hour),
		State: claim.StateCommitted, ClaimTokenDigest: "sha256:ct", ClaimCorrelation: "cc", ClaimedAt: at, LeaseExpiresAt: at,
		FinalizedAt: at, FinalCode: claim.CodeLeaseExpired, Lapsed: true,
		Evidence: &claim.Evidence{Kind: "k", Status: "CONFIRMED", EffectDigest: "sha256:e", Source: "effect_evidence"},
		Receipt:  &claim.Receipt{Profile: "VP-3", Token: "r", Verified: true}, EffectConfirmed: true,
		Reconciliation: &claim.Reconciliation{Resolution: claim.OutcomeCommitted, Note: "n", ReconciledAt: at}}
	for _, g := range []claim.Grant{full, {OrgID: "o", GrantID: "g", State: claim.StateIssued}} {
		stored, wire := members(t, g), members(t, executionOf(g))
		delete(stored, "token_digest")
		delete(stored, "personal_data")
		if d := cmp.Diff(stored, wire); d != "" {
			t.Errorf("wire differs from the stored members but token_digest and personal_data (-stored +wire):\n%s", d)
		}
	}
}

func members(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
