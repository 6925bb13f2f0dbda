package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

const (
	orgA = "org_store_a"
	orgB = "org_store_b"
)

// base is the first timestamp handed to the backend (whole microseconds).
var base = time.Date(2026, 3, 1, 12, 0, 0, 654321000, time.UTC)

var errBoom = errors.New("storetest: fn failed on purpose")

var equalTimes = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

// Run runs the suite; open returns a fresh, empty backend. Close must be
// idempotent: one subtest closes the backend before open's own cleanup does.
func Run(t *testing.T, open func(t *testing.T) store.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b store.Backend)
	}{
		{"Orgs", testOrgs},
		{"OrgListing", testOrgListing},
		{"APIKeys", testAPIKeys},
		{"Bundles", testBundles},
		{"BundleVersionPublishedOnce", testBundleOnce},
		{"Activations", testActivations},
		{"Idempotency", testIdempotency},
		{"ReadsSeeOwnWrites", testOwnWrites},
		{"WritesStayInTheTxOrg", testTxOrg},
		{"CancelledContext", testCancelled},
		{"PingSync", testPingSync},
		{"GrantKeyRevocations", testGrantKeyRevocations},
		{"TxUnusableAfterUpdate", testTxAfterUpdate},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func update(t *testing.T, b store.Backend, orgID string, fn func(ctx context.Context, tx store.Tx) error) {
	t.Helper()
	if err := b.Update(t.Context(), orgID, func(tx store.Tx) error { return fn(t.Context(), tx) }); err != nil {
		t.Fatalf("Update(%s): %v", orgID, err)
	}
}

func appendRecord(ctx context.Context, tx store.Tx, kind, subject string, payload []byte) error {
	_, err := ledger.Append(ctx, tx, tx.OrgID(), ledger.Record{Kind: kind, SubjectID: subject, PayloadDigest: canon.Digest(payload)}, base)
	return err
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s: error %v, want store.ErrNotFound", what, err)
	}
}

func wantEqual[T any](t *testing.T, what string, got T, err error, want T) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if diff := cmp.Diff(want, got, equalTimes, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("%s (-want +got):\n%s", what, diff)
	}
}

func testOrgs(t *testing.T, b store.Backend) {
	org := tenant.Org{ID: orgA, Name: "Acme Payments", CreatedAt: base}
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error {
		if tx.OrgID() != orgA {
			return fmt.Errorf("tx.OrgID() = %q, want %q", tx.OrgID(), orgA)
		}
		if err := tx.PutOrg(ctx, org); err != nil {
			return err
		}
		return appendRecord(ctx, tx, ledger.KindOrgCreated, orgA, []byte(org.Name))
	})
	got, err := b.Org(t.Context(), orgA)
	wantEqual(t, "Org", got, err, org)
	_, err = b.Org(t.Context(), orgB)
	wantNotFound(t, "Org(missing)", err)
}

// testOrgListing pages through every org, a page at a time: each once,
// none of the platform's records, the same order twice.
func testOrgListing(t *testing.T, b store.Backend) {
	want := map[string]tenant.Org{}
	for i, id := range []string{orgA, orgB, "org_z", "org_long_identifier_" + strings.Repeat("x", 40), "a"} {
		o := tenant.Org{ID: id, Name: "org " + id, CreatedAt: base.Add(time.Duration(i) * time.Second)}
		want[id] = o
		update(t, b, id, func(ctx context.Context, tx store.Tx) error {
			if err := tx.PutOrg(ctx, o); err != nil {
				return err
			}
			return appendRecord(ctx, tx, ledger.KindOrgCreated, id, []byte(o.Name))
		})
	}
	update(t, b, tenant.PlatformOrgID, func(ctx context.Context, tx store.Tx) error {
		return tx.PutArtifact(ctx, artifact.Record{OrgID: tenant.PlatformOrgID, Kind: "platform_note", ID: "n1", CreatedAt: base, Body: []byte("{}")})
	})
	page := func(limit int) []string {
		var ids []string
		after := ""
		for range 20 {
			got, err := b.Orgs(t.Context(), after, limit)
			if err != nil {
				t.Fatalf("Orgs(%q, %d): %v", after, limit, err)
			}
			if len(got) > limit {
				t.Fatalf("Orgs(%q, %d) returned %d orgs", after, limit, len(got))
			}
			for _, o := range got {
				wantEqual(t, "Orgs: "+o.ID, o, nil, want[o.ID])
				ids = append(ids, o.ID)
			}
			if len(got) < limit {
				return ids
			}
			after = got[len(got)-1].ID
		}
		t.Fatal("Orgs never reached the end")
		return nil
	}
	all := page(100)
	if len(all) != len(want) {
		t.Fatalf("Orgs listed %v, want the %d orgs", all, len(want))
	}
	if got := page(2); !slices.Equal(got, all) {
		t.Fatalf("pages of 2 listed %v, one page %v", got, all)
	}
	if got, err := b.Orgs(t.Context(), "", 0); err != nil || len(got) != 0 {
		t.Fatalf("Orgs(limit 0) = %v, %v; want none", got, err)
	}
}

func testAPIKeys(t *testing.T, b store.Backend) {
	platform := tenant.APIKey{ID: "key_plat", OrgID: tenant.PlatformOrgID, Kind: tenant.KindPlatform,
		Hash: tenant.HashSecret("clr_plat_secret"), CreatedAt: base}
	keyA := tenant.APIKey{ID: "key_a", OrgID: orgA, Kind: tenant.KindOrg, Hash: tenant.HashSecret("clr_org_a"),
		Scopes: []tenant.Scope{tenant.ScopeDecisionWrite, tenant.ScopeAuditRead}, CreatedAt: base.Add(time.Second)}
	keyB := tenant.APIKey{ID: "key_b", OrgID: orgB, Kind: tenant.KindOrg, Hash: tenant.HashSecret("clr_org_b"),
		Scopes: []tenant.Scope{tenant.ScopeOrgAll}, CreatedAt: base.Add(2 * time.Second)}

	update(t, b, tenant.PlatformOrgID, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutAPIKey(ctx, platform); err != nil {
			return err
		}
		// The platform may issue an org's key in its own transaction.
		return tx.PutAPIKey(ctx, keyB)
	})
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutAPIKey(ctx, keyA); err != nil {
			return err
		}
		return appendRecord(ctx, tx, ledger.KindAPIKeyCreated, keyA.ID, []byte(keyA.Hash))
	})
	for _, want := range []tenant.APIKey{platform, keyA, keyB} {
		got, err := b.APIKeyByHash(t.Context(), want.Hash)
		wantEqual(t, "APIKeyByHash("+want.ID+")", got, err, want)
	}
	_, err := b.APIKeyByHash(t.Context(), tenant.HashSecret("clr_org_unknown"))
	wantNotFound(t, "APIKeyByHash(unknown)", err)

	// A key's lifetime is kept, and a later write (its revocation) replaces
	// the stored key.
	grant := tenant.APIKey{ID: "key_onb", OrgID: orgA, Kind: tenant.KindOnboarding, Hash: tenant.HashSecret("clr_onb_a"),
		Scopes: []tenant.Scope{tenant.ScopeOrgAll}, CreatedAt: base, ExpiresAt: base.Add(30 * time.Minute)}
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error { return tx.PutAPIKey(ctx, grant) })
	got, err := b.APIKeyByHash(t.Context(), grant.Hash)
	wantEqual(t, "APIKeyByHash(onboarding grant)", got, err, grant)
	if !got.Usable(base.Add(time.Minute)) || got.Usable(grant.ExpiresAt) {
		t.Errorf("grant usable a minute in = %v, at its expiry = %v; want true, false",
			got.Usable(base.Add(time.Minute)), got.Usable(grant.ExpiresAt))
	}
	grant.RevokedAt = base.Add(time.Minute)
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error { return tx.PutAPIKey(ctx, grant) })
	got, err = b.APIKeyByHash(t.Context(), grant.Hash)
	wantEqual(t, "APIKeyByHash(revoked grant)", got, err, grant)
	if got.Usable(base.Add(2 * time.Minute)) {
		t.Error("a revoked grant is usable")
	}

	// An org's credentials, revoked ones included, by CreatedAt then ID.
	for org, want := range map[string][]tenant.APIKey{orgA: {grant, keyA}, orgB: {keyB}, "org_none": {}} {
		got, err := b.APIKeysOf(t.Context(), org)
		wantEqual(t, "APIKeysOf("+org+")", got, err, want)
	}
}

func bundle(orgID string, seq uint64, version string) store.BundleRecord {
	body := fmt.Sprintf(`{"bundle_id":"payments","mode":"ENFORCE","rules":[],"version":%q}`, version)
	return store.BundleRecord{
		OrgID:       orgID,
		BundleID:    "payments",
		Version:     version,
		Seq:         seq,
		Digest:      canon.Digest([]byte(body)),
		Mode:        "ENFORCE",
		RuleCount:   int(seq),
		PublishedAt: base.Add(time.Duration(seq) * time.Hour),
		Body:        []byte(body),
	}
}

// publish stores the bundle version after the org's latest, with its
// ledger entry, and returns it.
func publish(t *testing.T, b store.Backend, orgID, version string) store.BundleRecord {
	t.Helper()
	var rec store.BundleRecord
	update(t, b, orgID, func(ctx context.Context, tx store.Tx) error {
		var next uint64 = 1
		latest, err := tx.LatestBundleInTx(ctx)
		switch {
		case err == nil:
			next = latest.Seq + 1
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		rec = bundle(orgID, next, version)
		if err := tx.PutBundle(ctx, rec); err != nil {
			return err
		}
		return appendRecord(ctx, tx, ledger.KindPolicyPublished, version, rec.Body)
	})
	return rec
}

func testBundles(t *testing.T, b store.Backend) {
	_, err := b.LatestBundle(t.Context(), orgA)
	wantNotFound(t, "LatestBundle(none)", err)
	list, err := b.Bundles(t.Context(), orgA)
	wantEqual(t, "Bundles(none)", list, err, nil)

	// Versions that do not sort in publish order.
	var want []store.BundleRecord
	for _, v := range []string{"v9", "v10", "v2", "2026-01"} {
		want = append(want, publish(t, b, orgA, v))
		got, err := b.LatestBundle(t.Context(), orgA)
		wantEqual(t, "LatestBundle after publishing "+v, got, err, want[len(want)-1])
	}
	otherB := publish(t, b, orgB, "v1")

	for i, w := range want {
		if w.Seq != uint64(i+1) {
			t.Fatalf("bundle %s got seq %d, want %d", w.Version, w.Seq, i+1)
		}
		got, err := b.Bundle(t.Context(), orgA, w.Version)
		wantEqual(t, "Bundle("+w.Version+")", got, err, w)
	}
	list, err = b.Bundles(t.Context(), orgA)
	wantEqual(t, "Bundles", list, err, want)
	list, err = b.Bundles(t.Context(), orgB)
	wantEqual(t, "Bundles(org B)", list, err, []store.BundleRecord{otherB})

	_, err = b.Bundle(t.Context(), orgA, "v404")
	wantNotFound(t, "Bundle(missing)", err)
	_, err = b.Bundle(t.Context(), orgB, "v9")
	wantNotFound(t, "Bundle(other org's version)", err)

	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.BundleInTx(ctx, "v2")
		wantEqual(t, "BundleInTx", got, err, want[2])
		got, err = tx.LatestBundleInTx(ctx)
		wantEqual(t, "LatestBundleInTx", got, err, want[3])
		_, err = tx.BundleInTx(ctx, "v1")
		wantNotFound(t, "BundleInTx(org B's version)", err)
		return nil
	})
}

func testBundleOnce(t *testing.T, b store.Backend) {
	first := publish(t, b, orgA, "v1")
	again := bundle(orgA, 2, "v1")
	again.Mode = "SHADOW"
	err := b.Update(t.Context(), orgA, func(tx store.Tx) error { return tx.PutBundle(t.Context(), again) })
	if err == nil {
		t.Fatal("publishing version v1 twice succeeded")
	}
	got, err := b.Bundle(t.Context(), orgA, "v1")
	wantEqual(t, "Bundle(v1)", got, err, first)
	list, err := b.Bundles(t.Context(), orgA)
	wantEqual(t, "Bundles", list, err, []store.BundleRecord{first})
}

func testActivations(t *testing.T, b store.Backend) {
	_, err := b.Activation(t.Context(), orgA)
	wantNotFound(t, "Activation(none)", err)
	publish(t, b, orgA, "v1")
	publish(t, b, orgA, "v2")
	publish(t, b, orgB, "b1")
	_, err = b.Activation(t.Context(), orgA)
	wantNotFound(t, "Activation(published, none activated)", err)

	first := store.Activation{OrgID: orgA, Version: "v1", ActivatedAt: base.Add(time.Minute), LedgerSeq: 4}
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.ActivationInTx(ctx)
		wantNotFound(t, "ActivationInTx(before put)", err)
		if err := tx.PutActivation(ctx, first); err != nil {
			return err
		}
		got, err := tx.ActivationInTx(ctx)
		wantEqual(t, "ActivationInTx(own write)", got, err, first)
		return nil
	})
	got, err := b.Activation(t.Context(), orgA)
	wantEqual(t, "Activation", got, err, first)
	_, err = b.Activation(t.Context(), orgB)
	wantNotFound(t, "Activation(org B)", err)

	// Versions the org has not published are refused, and the refusal does
	// not spoil the transaction.
	second := store.Activation{OrgID: orgA, Version: "v2", ActivatedAt: base.Add(2 * time.Minute), LedgerSeq: 9}
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error {
		for _, v := range []string{"v404", "b1"} {
			bad := second
			bad.Version = v
			if err := tx.PutActivation(ctx, bad); err == nil {
				t.Errorf("PutActivation(%s) of a version org A has not published succeeded", v)
			}
		}
		got, err := tx.ActivationInTx(ctx)
		wantEqual(t, "ActivationInTx(after refusals)", got, err, first)
		return tx.PutActivation(ctx, second)
	})
	got, err = b.Activation(t.Context(), orgA)
	wantEqual(t, "Activation(replaced)", got, err, second)

	// A failed Update leaves the activation as it was.
	err = b.Update(t.Context(), orgA, func(tx store.Tx) error {
		if err := tx.PutActivation(t.Context(), first); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want the fn's error", err)
	}
	got, err = b.Activation(t.Context(), orgA)
	wantEqual(t, "Activation(after failed Update)", got, err, second)
}

func idem(orgID, scope, key, response string) store.IdempotencyRecord {
	return store.IdempotencyRecord{
		OrgID:         orgID,
		Scope:         scope,
		Key:           key,
		RequestDigest: canon.Digest([]byte(scope + key + response)),
		Response:      []byte(response),
		CreatedAt:     base,
	}
}

func testIdempotency(t *testing.T, b store.Backend) {
	rec := idem(orgA, "decision.evaluate", "key-1", `{"decision_id":"dec_1"}`)
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.Idempotency(ctx, rec.Scope, rec.Key)
		wantNotFound(t, "Idempotency(before put)", err)
		return tx.PutIdempotency(ctx, rec)
	})
	otherScope := idem(orgA, "grant.claim", "key-1", `{"should_execute":true}`)
	otherOrg := idem(orgB, "decision.evaluate", "key-1", `{"decision_id":"dec_b"}`)
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.Idempotency(ctx, rec.Scope, rec.Key)
		wantEqual(t, "Idempotency", got, err, rec)
		_, err = tx.Idempotency(ctx, otherScope.Scope, rec.Key)
		wantNotFound(t, "Idempotency(other scope)", err)
		_, err = tx.Idempotency(ctx, rec.Scope, "key-2")
		wantNotFound(t, "Idempotency(other key)", err)
		return tx.PutIdempotency(ctx, otherScope)
	})
	update(t, b, orgB, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.Idempotency(ctx, rec.Scope, rec.Key)
		wantNotFound(t, "Idempotency(other org)", err)
		return tx.PutIdempotency(ctx, otherOrg)
	})
	for org, want := range map[string][]store.IdempotencyRecord{orgA: {rec, otherScope}, orgB: {otherOrg}} {
		update(t, b, org, func(ctx context.Context, tx store.Tx) error {
			for _, w := range want {
				got, err := tx.Idempotency(ctx, w.Scope, w.Key)
				wantEqual(t, "Idempotency("+org+", "+w.Scope+")", got, err, w)
			}
			return nil
		})
	}
}

func testOwnWrites(t *testing.T, b store.Backend) {
	v1, v2 := bundle(orgA, 1, "v1"), bundle(orgA, 2, "v2")
	rec := idem(orgA, "decision.evaluate", "key-1", `{"n":1}`)
	replaced := idem(orgA, "decision.evaluate", "key-1", `{"n":2}`)
	write := func(ctx context.Context, tx store.Tx) error {
		_, err := tx.LatestBundleInTx(ctx)
		wantNotFound(t, "LatestBundleInTx(before put)", err)
		if err := tx.PutBundle(ctx, v1); err != nil {
			return err
		}
		got, err := tx.BundleInTx(ctx, "v1")
		wantEqual(t, "BundleInTx(own write)", got, err, v1)
		got, err = tx.LatestBundleInTx(ctx)
		wantEqual(t, "LatestBundleInTx(own write)", got, err, v1)
		if err := tx.PutBundle(ctx, v2); err != nil {
			return err
		}
		got, err = tx.LatestBundleInTx(ctx)
		wantEqual(t, "LatestBundleInTx(second own write)", got, err, v2)

		if err := tx.PutIdempotency(ctx, rec); err != nil {
			return err
		}
		gotRec, err := tx.Idempotency(ctx, rec.Scope, rec.Key)
		wantEqual(t, "Idempotency(own write)", gotRec, err, rec)
		if err := tx.PutIdempotency(ctx, replaced); err != nil {
			return err
		}
		gotRec, err = tx.Idempotency(ctx, rec.Scope, rec.Key)
		wantEqual(t, "Idempotency(replaced)", gotRec, err, replaced)

		if err := appendRecord(ctx, tx, ledger.KindPolicyPublished, "v1", v1.Body); err != nil {
			return err
		}
		h, err := tx.LedgerHead(ctx)
		if err != nil || h.Seq != 1 {
			return fmt.Errorf("LedgerHead after own append = %+v, %v", h, err)
		}
		return nil
	}

	// Failing after the writes leaves nothing behind.
	err := b.Update(t.Context(), orgA, func(tx store.Tx) error {
		if err := write(t.Context(), tx); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want the fn's error", err)
	}
	_, err = b.LatestBundle(t.Context(), orgA)
	wantNotFound(t, "LatestBundle(after failed Update)", err)
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.Idempotency(ctx, rec.Scope, rec.Key)
		wantNotFound(t, "Idempotency(after failed Update)", err)
		return nil
	})

	// Succeeding commits them all.
	update(t, b, orgA, write)
	list, err := b.Bundles(t.Context(), orgA)
	wantEqual(t, "Bundles", list, err, []store.BundleRecord{v1, v2})
	if h, err := b.LedgerHeadOf(t.Context(), orgA); err != nil || h.Seq != 1 {
		t.Fatalf("LedgerHeadOf = %+v, %v; want seq 1", h, err)
	}
}

func testTxOrg(t *testing.T, b store.Backend) {
	foreign := []struct {
		name string
		put  func(ctx context.Context, tx store.Tx) error
	}{
		{"PutOrg", func(ctx context.Context, tx store.Tx) error {
			return tx.PutOrg(ctx, tenant.Org{ID: orgB, Name: "B", CreatedAt: base})
		}},
		{"PutBundle", func(ctx context.Context, tx store.Tx) error { return tx.PutBundle(ctx, bundle(orgB, 1, "v1")) }},
		{"PutActivation", func(ctx context.Context, tx store.Tx) error {
			if err := tx.PutBundle(ctx, bundle(orgA, 1, "v1")); err != nil {
				return err
			}
			return tx.PutActivation(ctx, store.Activation{OrgID: orgB, Version: "v1", ActivatedAt: base})
		}},
		{"PutIdempotency", func(ctx context.Context, tx store.Tx) error {
			return tx.PutIdempotency(ctx, idem(orgB, "s", "k", "{}"))
		}},
	}
	for _, f := range foreign {
		t.Run(f.name, func(t *testing.T) {
			err := b.Update(t.Context(), orgA, func(tx store.Tx) error { return f.put(t.Context(), tx) })
			if err == nil {
				t.Fatalf("%s of org B in a transaction of org A succeeded", f.name)
			}
		})
	}
	_, err := b.Org(t.Context(), orgB)
	wantNotFound(t, "Org(B)", err)
	_, err = b.LatestBundle(t.Context(), orgB)
	wantNotFound(t, "LatestBundle(B)", err)
	_, err = b.LatestBundle(t.Context(), orgA)
	wantNotFound(t, "LatestBundle(A)", err)
}

func testCancelled(t *testing.T, b store.Backend) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	err := b.Update(ctx, orgA, func(tx store.Tx) error {
		called = true
		return tx.PutOrg(ctx, tenant.Org{ID: orgA, Name: "A", CreatedAt: base})
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Update(cancelled ctx) = %v, want context.Canceled", err)
	}
	if called {
		t.Fatal("Update ran fn with a cancelled context")
	}
	_, err = b.Org(t.Context(), orgA)
	wantNotFound(t, "Org after refused Update", err)
}

// testGrantKeyRevocations: revocations are platform-wide, listed in kid
// order, and permanent; revoking again keeps the first revoked_at.
func testGrantKeyRevocations(t *testing.T, b store.Backend) {
	got, err := b.RevokedGrantKeys(t.Context())
	wantEqual(t, "RevokedGrantKeys(empty)", got, err, nil)
	if err := b.RevokeGrantKey(t.Context(), "", base); err == nil {
		t.Fatal("RevokeGrantKey(\"\"): nil error, want a refusal")
	}
	for _, r := range []store.KeyRevocation{
		{KID: "kid-b", RevokedAt: base},
		{KID: "kid-a", RevokedAt: base.Add(time.Second)},
		{KID: "kid-b", RevokedAt: base.Add(time.Hour)}, // again: the first stays
	} {
		if err := b.RevokeGrantKey(t.Context(), r.KID, r.RevokedAt); err != nil {
			t.Fatalf("RevokeGrantKey(%s): %v", r.KID, err)
		}
	}
	want := []store.KeyRevocation{{KID: "kid-a", RevokedAt: base.Add(time.Second)}, {KID: "kid-b", RevokedAt: base}}
	got, err = b.RevokedGrantKeys(t.Context())
	wantEqual(t, "RevokedGrantKeys", got, err, want)
	// They belong to no org: an org's data stays as it was.
	_, err = b.Org(t.Context(), orgA)
	wantNotFound(t, "Org after revocations", err)
}

func testPingSync(t *testing.T, b store.Backend) {
	if err := b.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error {
		return tx.PutOrg(ctx, tenant.Org{ID: orgA, Name: "A", CreatedAt: base})
	})
	if err := b.Sync(t.Context()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// testTxAfterUpdate: a Tx kept past its Update must not work.
func testTxAfterUpdate(t *testing.T, b store.Backend) {
	var kept store.Tx
	if err := b.Update(t.Context(), "org_a", func(tx store.Tx) error { kept = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.LedgerHead(t.Context()); err == nil {
		t.Fatal("a Tx worked after its Update returned")
	}
}

// testClosed: after Close (twice is fine) every call is ErrClosed.
func testClosed(t *testing.T, b store.Backend) {
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	err := b.Update(t.Context(), "org_a", func(store.Tx) error { return nil })
	if !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Update after Close = %v, want ErrClosed", err)
	}
	if _, err := b.Org(t.Context(), "org_a"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Org after Close = %v, want ErrClosed", err)
	}
	for name, err := range map[string]error{"Ping": b.Ping(t.Context()), "Sync": b.Sync(t.Context())} {
		if !errors.Is(err, store.ErrClosed) {
			t.Fatalf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// SeedBundles creates each org of published and publishes its versions in
// order (seq 1, 2, … an hour apart from at) with an empty body and no
// activation: the data a backend held before activations were recorded,
// for the tests of its upgrade.
func SeedBundles(t *testing.T, b store.Backend, at time.Time, published map[string][]string) {
	t.Helper()
	ctx := t.Context()
	for org, versions := range published {
		if err := b.Update(ctx, org, func(tx store.Tx) error {
			if err := tx.PutOrg(ctx, tenant.Org{ID: org, Name: org, CreatedAt: at}); err != nil {
				return err
			}
			for i, v := range versions {
				if err := tx.PutBundle(ctx, store.BundleRecord{OrgID: org, Version: v, Seq: uint64(i + 1),
					PublishedAt: at.Add(time.Duration(i) * time.Hour), Body: []byte("{}")}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// LegacyExport is a validation pack as builds before jobs queued it: an
// artifact of kind "export" whose Ref is its status and whose JSON body
// counts its attempts.
type LegacyExport struct {
	OrgID, ID, Status string
	Attempts          int
	CreatedAt         time.Time
}

// SeedLegacyExports writes each pack's record as those builds did (without
// the all-orgs index entries a backend may also have kept: the backend's
// own test adds them), for the tests of the upgrade that gives the packs
// still PENDING or RUNNING their jobs. It returns the jobs the upgrade
// must create: queued, due at creation, with the attempts carried over.
func SeedLegacyExports(t *testing.T, b store.Backend, exports []LegacyExport) []jobs.Job {
	t.Helper()
	ctx := t.Context()
	var want []jobs.Job
	for _, x := range exports {
		body := fmt.Appendf(nil, `{"export_id":%q,"org_id":%q,"status":%q,"attempts":%d,"worker":"w","lease_expires_at":"2026-01-01T00:00:00Z"}`,
			x.ID, x.OrgID, x.Status, x.Attempts)
		if err := b.Update(ctx, x.OrgID, func(tx store.Tx) error {
			return tx.PutArtifact(ctx, artifact.Record{OrgID: x.OrgID, Kind: "export", ID: x.ID, Ref: x.Status, CreatedAt: x.CreatedAt, Body: body})
		}); err != nil {
			t.Fatal(err)
		}
		if x.Status == "PENDING" || x.Status == "RUNNING" {
			want = append(want, jobs.Job{OrgID: x.OrgID, Kind: "export", ID: x.ID, State: jobs.Queued, Attempts: x.Attempts,
				Due: x.CreatedAt, CreatedAt: x.CreatedAt, UpdatedAt: x.CreatedAt})
		}
	}
	return want
}

// CheckLegacyExportJobs fails unless every job of want is stored as
// given and nothing else of kind "export" is due at a clock past them all.
func CheckLegacyExportJobs(t *testing.T, b store.Backend, want []jobs.Job) {
	t.Helper()
	for _, w := range want {
		got, err := b.Job(t.Context(), w.OrgID, w.Kind, w.ID)
		if err != nil {
			t.Fatalf("Job(%s/%s) after the upgrade: %v", w.OrgID, w.ID, err)
		}
		if d := cmp.Diff(w, got, equalTimes, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("Job(%s/%s) after the upgrade (-want +got):\n%s", w.OrgID, w.ID, d)
		}
	}
	due, err := b.DueJobs(t.Context(), "export", 0)
	if err != nil || len(due) != len(want) {
		t.Fatalf("DueJobs after the upgrade = %d jobs, %v; want %d", len(due), err, len(want))
	}
}
