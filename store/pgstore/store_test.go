package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pgstore"
	"github.com/clearancehq/clearance/store/storetest"
	"github.com/clearancehq/clearance/tenant"
)

// schemas maps each backend the suites open to its schema, for the raw
// tamper hooks.
var schemas sync.Map // store.Backend -> string

func openBackend(t *testing.T, opts pgstore.Options) store.Backend {
	t.Helper()
	s, schema := open(t, opts)
	schemas.Store(store.Backend(s), schema)
	t.Cleanup(func() { schemas.Delete(store.Backend(s)) })
	return s
}

func schemaOf(t *testing.T, b store.Backend) string {
	t.Helper()
	v, ok := schemas.Load(b)
	if !ok {
		t.Fatal("backend not opened by openBackend")
	}
	return v.(string)
}

// TestConformance runs every storage conformance suite, in parallel.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.All(t, storetest.Harness{
		Open: func(t *testing.T, now func() time.Time) store.Backend {
			opts := pgstore.Options{}
			if now != nil {
				// Only the claim suite sets a clock; its concurrent
				// claimers get a larger pool.
				opts = pgstore.Options{Now: now, MaxConns: 8}
			}
			return openBackend(t, opts)
		},
		Reopen: func(t *testing.T, b store.Backend, now func() time.Time) store.Backend {
			schema := schemaOf(t, b)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			s := openIn(t, schema, pgstore.Options{Now: now, MaxConns: 8})
			schemas.Store(store.Backend(s), schema)
			t.Cleanup(func() { schemas.Delete(store.Backend(s)) })
			return s
		},
		Parallel: true,
		OverwriteEntry: func(t *testing.T, b store.Backend, orgID string, seq uint64, e ledger.Entry) {
			t.Helper()
			raw(t, schemaOf(t, b), `
				INSERT INTO ledger_entries (org_id, seq, kind, subject_id, payload_digest, recorded_at, prev_entry_hash, entry_hash)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
				ON CONFLICT (org_id, seq) DO UPDATE SET kind = excluded.kind, subject_id = excluded.subject_id,
					payload_digest = excluded.payload_digest, recorded_at = excluded.recorded_at,
					prev_entry_hash = excluded.prev_entry_hash, entry_hash = excluded.entry_hash`,
				orgID, int64(seq), e.Kind, e.SubjectID, e.PayloadDigest, e.RecordedAt, e.PrevEntryHash, e.EntryHash)
		},
		DeleteEntry: func(t *testing.T, b store.Backend, orgID string, seq uint64) {
			t.Helper()
			raw(t, schemaOf(t, b), `DELETE FROM ledger_entries WHERE org_id = $1 AND seq = $2`, orgID, int64(seq))
		},
		SetHead: func(t *testing.T, b store.Backend, orgID string, h ledger.Head) {
			t.Helper()
			raw(t, schemaOf(t, b), `
				INSERT INTO ledger_heads (org_id, seq, entry_hash) VALUES ($1, $2, $3)
				ON CONFLICT (org_id) DO UPDATE SET seq = excluded.seq, entry_hash = excluded.entry_hash`,
				orgID, int64(h.Seq), h.EntryHash)
		},
		DeleteCheckpoint: func(t *testing.T, b store.Backend, orgID string, size uint64) {
			t.Helper()
			raw(t, schemaOf(t, b), `DELETE FROM ledger_checkpoints WHERE org_id = $1 AND tree_size = $2`, orgID, int64(size))
		},
		DeleteScope: func(t *testing.T, b store.Backend, orgID, scope string) {
			t.Helper()
			raw(t, schemaOf(t, b), `DELETE FROM scope_claims WHERE org_id = $1 AND scope = $2`, orgID, scope)
		},
	})
}

var at = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// decide records dossier n of orgID and its ledger entry in one Update.
func decide(ctx context.Context, s store.Backend, orgID string, n int) error {
	id := fmt.Sprintf("dos_%s_%d", orgID, n)
	body := fmt.Appendf(nil, `{"dossier_id":%q,"n":%d}`, id, n)
	return s.Update(ctx, orgID, func(tx store.Tx) error {
		err := tx.PutDossier(ctx, dossier.Stored{
			OrgID: orgID, DossierID: id, DecisionID: "dec_" + id[4:],
			CreatedAt: at.Add(time.Duration(n) * time.Millisecond), Outcome: "ALLOW", Body: body,
		})
		if err != nil {
			return err
		}
		_, err = ledger.Append(ctx, tx, orgID, ledger.Record{
			Kind: ledger.KindDecision, SubjectID: id, PayloadDigest: canon.Digest(body),
		}, at)
		return err
	})
}

func wantValid(t *testing.T, r ledger.Reader, orgID string, n uint64) {
	t.Helper()
	rep, err := ledger.Verify(t.Context(), r, orgID)
	if err != nil || !rep.Valid || rep.HeadSeq != n || rep.EntriesChecked != n {
		t.Fatalf("Verify(%s) = %+v, %v; want valid with %d entries", orgID, rep, err, n)
	}
}

// TestLeaseJudgedByDatabaseClock claims with a short lease on a store
// without Options.Now, waits (polling the database, not sleeping) until
// the DATABASE clock is past the lease end, and finalizes: the database's
// clock says the lease expired.
func TestLeaseJudgedByDatabaseClock(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{})
	ctx := t.Context()
	const org = "org_dbclock"
	start := dbNow(t)
	g := claim.Grant{
		OrgID: org, GrantID: "g1", IntentHash: "sha256:intent", Nonce: "n1", Scope: "s1",
		Intent: []byte(`{}`), ExpiresAt: start.Add(time.Hour), // IssuedAt zero: the store's now
	}
	if err := s.Update(ctx, org, func(tx store.Tx) error { return claim.Issue(ctx, tx, g) }); err != nil {
		t.Fatal(err)
	}
	var c claim.Grant
	err := s.Update(ctx, org, func(tx store.Tx) error {
		// Tx.Now is clock_timestamp(), read at each call: it moves inside
		// one transaction, which now() would not.
		a, b := tx.Now(), tx.Now()
		if !b.After(a) || a.Before(start) {
			return fmt.Errorf("Tx.Now = %s then %s (database clock was %s before): not clock_timestamp()", a, b, start)
		}
		var err error
		c, err = claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: "g1", IntentHash: g.IntentHash, ClaimTokenDigest: "sha256:tok", Lease: claim.MinLease})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The lease ends on the whole second after the claim (now + 1 s, truncated).
	if got := c.LeaseExpiresAt.Sub(c.ClaimedAt); got <= 0 || got > claim.MinLease || c.LeaseExpiresAt.Nanosecond() != 0 || c.ClaimedAt.Before(start) {
		t.Fatalf("claimed at %s with lease until %s", c.ClaimedAt, c.LeaseExpiresAt)
	}

	deadline := time.Now().Add(10 * time.Second)
	for !dbNow(t).After(c.LeaseExpiresAt) {
		if time.Now().After(deadline) {
			t.Fatal("the database clock never passed the lease end")
		}
	}
	var f claim.Finalization
	err = s.Update(ctx, org, func(tx store.Tx) error {
		var err error
		f, err = claim.Finalize(ctx, tx, claim.FinalizeRequest{GrantID: "g1", ClaimTokenDigest: "sha256:tok", Outcome: claim.OutcomeCommitted})
		return err
	})
	if err != nil {
		t.Fatalf("Finalize: %v (want a committed refusal)", err)
	}
	if !errors.Is(f.Refusal, claim.ErrLeaseExpired) {
		t.Fatalf("Finalize after the database clock passed the lease: refusal %v, want %v", f.Refusal, claim.ErrLeaseExpired)
	}
	var ce *claim.Error
	if !errors.As(f.Refusal, &ce) || ce.Code() != claim.CodeLeaseExpired {
		t.Fatalf("refusal %v has no code %s", f.Refusal, claim.CodeLeaseExpired)
	}
	got, err := s.GrantOf(ctx, org, "g1")
	if err != nil || got.State != claim.StateIndeterminate || got.FinalCode != claim.CodeLeaseExpired {
		t.Fatalf("stored grant %+v, %v; want INDETERMINATE with %s", got, err, claim.CodeLeaseExpired)
	}
	if !got.FinalizedAt.After(c.LeaseExpiresAt) {
		t.Fatalf("finalized at %s, not after the lease end %s", got.FinalizedAt, c.LeaseExpiresAt)
	}
}

// TestTwoServers runs two Stores (two pools, as two server processes
// would) on one schema: 64 goroutines split over both claim one grant and
// exactly one wins; 8 goroutines per store append to one org's ledger and
// the result is one gap-free chain.
func TestTwoServers(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	servers := []*pgstore.Store{
		openIn(t, schema, pgstore.Options{MaxConns: 8}),
		openIn(t, schema, pgstore.Options{MaxConns: 8}),
	}
	ctx := t.Context()

	t.Run("ClaimOneGrant", func(t *testing.T) {
		const org, claimers = "org_two_claim", 64
		start := dbNow(t)
		g := claim.Grant{OrgID: org, GrantID: "g1", IntentHash: "sha256:intent", Nonce: "n1", Scope: "s1",
			Intent: []byte(`{}`), IssuedAt: start, ExpiresAt: start.Add(time.Hour)}
		if err := servers[0].Update(ctx, org, func(tx store.Tx) error { return claim.Issue(ctx, tx, g) }); err != nil {
			t.Fatal(err)
		}
		var (
			wg        sync.WaitGroup
			begin     = make(chan struct{})
			won, lost atomic.Int64
			winners   = make([]string, claimers)
		)
		for i := range claimers {
			s := servers[i%2]
			wg.Go(func() {
				<-begin
				tok := fmt.Sprintf("sha256:tok_%d", i)
				err := s.Update(ctx, org, func(tx store.Tx) error {
					_, err := claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: "g1", IntentHash: g.IntentHash, ClaimTokenDigest: tok, Lease: time.Minute})
					return err
				})
				switch {
				case err == nil:
					won.Add(1)
					winners[i] = tok
				case errors.Is(err, claim.ErrReplay):
					lost.Add(1)
				default:
					t.Errorf("claimer %d: %v", i, err)
				}
			})
		}
		close(begin)
		wg.Wait()
		if won.Load() != 1 || lost.Load() != claimers-1 {
			t.Fatalf("%d claims won, %d replays; want exactly 1 and %d", won.Load(), lost.Load(), claimers-1)
		}
		got, err := servers[1].GrantOf(ctx, org, "g1")
		if err != nil || got.State != claim.StateClaimed {
			t.Fatalf("grant %+v, %v; want CLAIMED", got, err)
		}
		found := false
		for _, w := range winners {
			found = found || (w != "" && w == got.ClaimTokenDigest)
		}
		if !found {
			t.Fatalf("stored claim token %q is not the winner's", got.ClaimTokenDigest)
		}
	})

	t.Run("LedgerOneChain", func(t *testing.T) {
		const org, perStore, each = "org_two_ledger", 8, 25
		var wg sync.WaitGroup
		for si, s := range servers {
			for w := range perStore {
				wg.Go(func() {
					for i := range each {
						n := (si*perStore+w)*each + i
						if err := decide(ctx, s, org, n); err != nil {
							t.Errorf("store %d writer %d: %v", si, w, err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		const total = 2 * perStore * each
		wantValid(t, servers[0], org, total)
		entries, err := servers[1].LedgerEntries(ctx, org, 0, 2*total)
		if err != nil {
			t.Fatal(err)
		}
		seen := make(map[string]bool, total)
		for i, e := range entries {
			if e.Seq != uint64(i+1) || seen[e.SubjectID] {
				t.Fatalf("entry %d: seq %d subject %s (seen before: %v)", i, e.Seq, e.SubjectID, seen[e.SubjectID])
			}
			seen[e.SubjectID] = true
		}
		if len(seen) != total {
			t.Fatalf("%d distinct entries, want %d", len(seen), total)
		}
	})
}

// TestRetrySerializationFailure makes fn fail with 40001 after writing, the
// first time: Update rolls that attempt back, runs fn again, and only the
// second attempt's writes land.
func TestRetrySerializationFailure(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{})
	ctx := t.Context()
	const org = "org_retry"
	for _, code := range []string{"40001", "40P01"} {
		runs := 0
		err := s.Update(ctx, org, func(tx store.Tx) error {
			runs++
			if _, err := ledger.Append(ctx, tx, org, ledger.Record{Kind: ledger.KindDecision, SubjectID: fmt.Sprintf("dec_%s_%d", code, runs)}, at); err != nil {
				return err
			}
			if runs == 1 {
				return fmt.Errorf("a statement failed: %w", &pgconn.PgError{Code: code, Message: "could not serialize access"})
			}
			return nil
		})
		if err != nil || runs != 2 {
			t.Fatalf("Update with one %s = %v after %d runs; want success after 2", code, err, runs)
		}
	}
	entries, err := s.LedgerEntries(ctx, org, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].SubjectID != "dec_40001_2" || entries[1].SubjectID != "dec_40P01_2" {
		t.Fatalf("ledger = %+v; want only the second attempts' entries", entries)
	}
	wantValid(t, s, org, 2)

	// The retries are bounded, and the last failure is returned.
	bounded, _ := open(t, pgstore.Options{MaxAttempts: 3})
	runs := 0
	err = bounded.Update(ctx, org, func(tx store.Tx) error {
		runs++
		return &pgconn.PgError{Code: "40001"}
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "40001" || runs != 3 {
		t.Fatalf("always-40001 Update = %v after %d runs; want the 40001 after 3", err, runs)
	}

	// Other errors are not retried.
	runs = 0
	boom := errors.New("boom")
	if err := s.Update(ctx, org, func(store.Tx) error { runs++; return boom }); !errors.Is(err, boom) || runs != 1 {
		t.Fatalf("Update = %v after %d runs; want boom after 1", err, runs)
	}
}

// TestRealDeadlockRetried provokes a genuine deadlock between two Updates
// (of two orgs, each writing the same two API keys in the opposite order):
// PostgreSQL aborts one with 40P01, and Update runs that one's fn again, so
// both succeed.
func TestRealDeadlockRetried(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{})
	ctx := t.Context()
	key := func(id string) tenant.APIKey {
		return tenant.APIKey{ID: id, OrgID: "org_dl", Kind: tenant.KindOrg, Hash: "hash_" + id, CreatedAt: at}
	}
	var (
		runs         atomic.Int64
		aHolds       = make(chan struct{})
		bHolds       = make(chan struct{})
		onceA, onceB sync.Once
	)
	update := func(org string, first, second string, mine func(), theirs chan struct{}) error {
		return s.Update(ctx, org, func(tx store.Tx) error {
			runs.Add(1)
			if err := tx.PutAPIKey(ctx, key(first)); err != nil {
				return err
			}
			mine() // first run only: the other goes ahead
			select {
			case <-theirs:
			case <-ctx.Done():
				return ctx.Err()
			}
			return tx.PutAPIKey(ctx, key(second))
		})
	}
	errs := make(chan error, 2)
	go func() {
		errs <- update("org_a", "x", "y", func() { onceA.Do(func() { close(aHolds) }) }, bHolds)
	}()
	go func() {
		<-aHolds
		errs <- update("org_b", "y", "x", func() { onceB.Do(func() { close(bHolds) }) }, aHolds)
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	if n := runs.Load(); n != 3 {
		t.Fatalf("fn ran %d times; want 3 (the deadlock victim twice)", n)
	}
	for _, id := range []string{"x", "y"} {
		if _, err := s.APIKeyByHash(ctx, "hash_"+id); err != nil {
			t.Fatalf("key %s: %v", id, err)
		}
	}
}
