package clearance_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// shareSecret is a fixed share-link secret for tests.
var shareSecret = bytes.Repeat([]byte("s"), clearance.MinShareSecretLen)

// shareEngine is an engine with a share secret, a ledger key and a clock
// the test moves.
type shareEngine struct {
	*clearance.Engine
	now *atomic.Int64
}

func (s shareEngine) advance(d time.Duration) { s.now.Add(int64(d)) }

func newShareEngine(t *testing.T, secret []byte) shareEngine {
	t.Helper()
	now := &atomic.Int64{}
	now.Store(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	b, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	lk, err := ledger.NewKey("clearance-test-ledger", bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	e, err := clearance.Open(b, clearance.Options{Now: clock, ShareSecret: secret, LedgerKey: lk})
	if err != nil {
		t.Fatal(err)
	}
	return shareEngine{e, now}
}

// decide records one decision of o and returns it.
func decide(t *testing.T, e *clearance.Engine, o clearance.CreatedOrg) clearance.Decision {
	t.Helper()
	d, err := e.Evaluate(context.Background(), request(t, o, `{"decision_type":"PAYMENT","workflow_key":"ap","amount":2500}`))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// wantInvalid fails unless err is the one share-link refusal.
func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	var ce *clearance.Error
	if !errors.As(err, &ce) || !errors.Is(err, clearance.ErrNotFound) || ce.Code != clearance.CodeShareLinkInvalid {
		t.Fatalf("%s: want %s, got %v", what, clearance.CodeShareLinkInvalid, err)
	}
}

func TestShareLinkVerifies(t *testing.T) {
	ctx := context.Background()
	e := newShareEngine(t, shareSecret)
	o := newOrg(t, e.Engine)
	d := decide(t, e.Engine, o)

	l, err := e.ShareLinks.CreateShareLink(ctx, o.Org.ID, d.DossierID, clearance.ShareLinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "2026-11-08T12:00:00Z"; l.ExpiresAt != want {
		t.Fatalf("default expiry %s, want %s", l.ExpiresAt, want)
	}
	if l.URL != "/v1/public/decision-dossiers/"+d.DossierID+"/verify?sig="+l.Sig {
		t.Fatalf("url %s", l.URL)
	}
	opened, err := e.ShareLinks.OpenShareLink(ctx, d.DossierID, l.Sig)
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.ShareLinks.VerifySharedDossier(ctx, opened)
	if err != nil {
		t.Fatal(err)
	}
	if v.DossierID != d.DossierID || v.Outcome != d.Outcome || v.Mode != d.Mode || v.DossierDigest != d.DossierDigest ||
		!v.RecomputedDigestMatches || v.Ledger.Seq != d.LedgerSeq || !v.Ledger.EntryHashValid || !v.Ledger.ChainValid ||
		v.Ledger.AnchoredCheckpointValid != nil || !v.Verified || v.LinkExpiresAt != l.ExpiresAt {
		t.Fatalf("verification %+v of decision %+v", v, d)
	}

	// Once a signed checkpoint covers the entry, its anchor is checked too.
	if _, err := e.Audit.SealLedger(ctx, o.Org.ID); err != nil {
		t.Fatal(err)
	}
	if v, err = e.ShareLinks.VerifySharedDossier(ctx, opened); err != nil {
		t.Fatal(err)
	}
	if v.Ledger.AnchoredCheckpointValid == nil || !*v.Ledger.AnchoredCheckpointValid || !v.Verified {
		t.Fatalf("after sealing: %+v", v)
	}

	// The answer names nothing of the org's artifact.
	raw, _ := json.Marshal(v)
	for _, leak := range []string{o.Org.ID, "intent", "actor", "reason", "policy", "PAYMENT", "org_id"} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("the answer holds %q: %s", leak, raw)
		}
	}
}

func TestShareLinkRefusals(t *testing.T) {
	ctx := context.Background()
	e := newShareEngine(t, shareSecret)
	o := newOrg(t, e.Engine)
	d := decide(t, e.Engine, o)
	d2 := decide(t, e.Engine, o)
	other := newOrg(t, e.Engine)
	od := decide(t, e.Engine, other)
	l, err := e.ShareLinks.CreateShareLink(ctx, o.Org.ID, d.DossierID, clearance.ShareLinkOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ol, err := e.ShareLinks.CreateShareLink(ctx, other.Org.ID, od.DossierID, clearance.ShareLinkOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	payload, mac, _ := strings.Cut(l.Sig, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	reencode := func(p []byte) string { return base64.RawURLEncoding.EncodeToString(p) + "." + mac }
	withOrg := append(append([]byte{}, raw[:18]...), other.Org.ID...)
	laterExp := append([]byte{}, raw...)
	laterExp[8]++
	flip := func(s string) string {
		last := s[len(s)-1]
		if last == 'A' {
			return s[:len(s)-1] + "B"
		}
		return s[:len(s)-1] + "A"
	}
	for _, c := range []struct{ name, dossier, sig string }{
		{"empty", d.DossierID, ""},
		{"no dot", d.DossierID, payload + mac},
		{"tampered mac", d.DossierID, flip(l.Sig)},
		{"mac of another dossier's link", d.DossierID, payload + "." + strings.SplitN(ol.Sig, ".", 2)[1]},
		{"later expiry", d.DossierID, reencode(laterExp)},
		{"another org in the payload", d.DossierID, reencode(withOrg)},
		{"padded base64", d.DossierID, l.Sig + "="},
		{"standard base64", d.DossierID, strings.NewReplacer("-", "+", "_", "/").Replace(l.Sig) + "+"},
		{"other dossier of the org", d2.DossierID, l.Sig},
		{"other org's dossier", od.DossierID, l.Sig},
		{"this org's dossier with the other org's link", d.DossierID, ol.Sig},
		{"uppercase dossier", strings.ToUpper(d.DossierID), l.Sig},
		{"overlong", d.DossierID, l.Sig + strings.Repeat("A", clearance.MaxShareTokenLen)},
		{"three parts", d.DossierID, l.Sig + ".x"},
	} {
		_, err := e.ShareLinks.OpenShareLink(ctx, c.dossier, c.sig)
		wantInvalid(t, c.name, err)
	}

	// A link made up by the caller, not opened, is refused too.
	_, err = e.ShareLinks.VerifySharedDossier(ctx, clearance.ShareLink{DossierID: d.DossierID, OrgID: o.Org.ID})
	wantInvalid(t, "unopened link", err)

	// Expiry: valid until the second it names.
	e.advance(time.Hour - time.Second)
	if _, err := e.ShareLinks.OpenShareLink(ctx, d.DossierID, l.Sig); err != nil {
		t.Fatalf("a second before expiry: %v", err)
	}
	e.advance(time.Second)
	_, err = e.ShareLinks.OpenShareLink(ctx, d.DossierID, l.Sig)
	wantInvalid(t, "expired", err)
}

func TestShareLinkRevocation(t *testing.T) {
	ctx := context.Background()
	e := newShareEngine(t, shareSecret)
	o := newOrg(t, e.Engine)
	other := newOrg(t, e.Engine)
	d := decide(t, e.Engine, o)
	od := decide(t, e.Engine, other)
	old, _ := e.ShareLinks.CreateShareLink(ctx, o.Org.ID, d.DossierID, clearance.ShareLinkOptions{})
	otherLink, _ := e.ShareLinks.CreateShareLink(ctx, other.Org.ID, od.DossierID, clearance.ShareLinkOptions{})
	head := func(org string) ledger.Head {
		p, err := e.Audit.Ledger(ctx, org, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		return p.Head
	}
	before := head(o.Org.ID)

	for want := uint64(1); want <= 2; want++ {
		rev, err := e.ShareLinks.RevokeShareLinks(ctx, o.Org.ID)
		if err != nil || rev.Epoch != want || rev.RevokedAt == "" {
			t.Fatalf("revocation %d: %+v %v", want, rev, err)
		}
	}
	if h := head(o.Org.ID); h.Seq != before.Seq+2 {
		t.Fatalf("revocations are not ledgered: head %d, was %d", h.Seq, before.Seq)
	}
	p, _ := e.Audit.Ledger(ctx, o.Org.ID, before.Seq, 10)
	if p.Entries[0].Kind != ledger.KindShareLinksRevoked {
		t.Fatalf("entry %+v", p.Entries[0])
	}
	if rep, err := e.Audit.VerifyLedger(ctx, o.Org.ID); err != nil || !rep.Valid {
		t.Fatalf("ledger after revocations: %+v %v", rep, err)
	}

	_, err := e.ShareLinks.OpenShareLink(ctx, d.DossierID, old.Sig)
	wantInvalid(t, "revoked", err)
	fresh, err := e.ShareLinks.CreateShareLink(ctx, o.Org.ID, d.DossierID, clearance.ShareLinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ShareLinks.OpenShareLink(ctx, d.DossierID, fresh.Sig); err != nil {
		t.Fatalf("a link made after the revocation: %v", err)
	}
	// Another org's links are untouched.
	if _, err := e.ShareLinks.OpenShareLink(ctx, od.DossierID, otherLink.Sig); err != nil {
		t.Fatalf("the other org's link: %v", err)
	}
}

func TestShareLinkCreation(t *testing.T) {
	ctx := context.Background()
	e := newShareEngine(t, shareSecret)
	o := newOrg(t, e.Engine)
	other := newOrg(t, e.Engine)
	d := decide(t, e.Engine, o)

	for _, ttl := range []time.Duration{-time.Second, time.Millisecond, 1500 * time.Millisecond, clearance.MaxShareLinkTTL + time.Second} {
		_, err := e.ShareLinks.CreateShareLink(ctx, o.Org.ID, d.DossierID, clearance.ShareLinkOptions{TTL: ttl})
		var ce *clearance.Error
		if !errors.As(err, &ce) || ce.Code != clearance.CodeShareLinkExpiry || !errors.Is(err, clearance.ErrInvalidRequest) {
			t.Errorf("ttl %v: %v", ttl, err)
		}
	}
	if l, err := e.ShareLinks.CreateShareLink(ctx, o.Org.ID, d.DossierID, clearance.ShareLinkOptions{TTL: clearance.MaxShareLinkTTL}); err != nil || l.ExpiresAt != "2026-12-01T12:00:00Z" {
		t.Errorf("longest link: %+v %v", l, err)
	}
	for _, c := range []struct{ name, org, dossier string }{
		{"another org's dossier", other.Org.ID, d.DossierID},
		{"unknown dossier", o.Org.ID, "01900000-0000-7000-8000-000000000000"},
		{"not an id", o.Org.ID, "x"},
	} {
		_, err := e.ShareLinks.CreateShareLink(ctx, c.org, c.dossier, clearance.ShareLinkOptions{})
		var ce *clearance.Error
		if !errors.As(err, &ce) || ce.Code != clearance.CodeDossierNotFound {
			t.Errorf("%s: %v", c.name, err)
		}
	}

	// Without a secret no link is made and none verifies.
	plain := newShareEngine(t, nil)
	po := newOrg(t, plain.Engine)
	pd := decide(t, plain.Engine, po)
	_, err := plain.ShareLinks.CreateShareLink(ctx, po.Org.ID, pd.DossierID, clearance.ShareLinkOptions{})
	var ce *clearance.Error
	if !errors.As(err, &ce) || ce.Code != clearance.CodeShareLinksNotConfigured || !errors.Is(err, clearance.ErrUnavailable) {
		t.Fatalf("without a secret: %v", err)
	}
	l, _ := e.ShareLinks.CreateShareLink(ctx, o.Org.ID, d.DossierID, clearance.ShareLinkOptions{})
	_, err = plain.ShareLinks.OpenShareLink(ctx, d.DossierID, l.Sig)
	wantInvalid(t, "no secret", err)

	// Another secret does not accept the link.
	otherSecret := newShareEngine(t, bytes.Repeat([]byte("t"), clearance.MinShareSecretLen))
	_, err = otherSecret.ShareLinks.OpenShareLink(ctx, d.DossierID, l.Sig)
	wantInvalid(t, "another secret", err)
}

func TestShareSecretTooShort(t *testing.T) {
	b, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := clearance.Open(b, clearance.Options{ShareSecret: []byte("short")}); err == nil {
		t.Fatal("a 5-byte share secret was accepted")
	}
}

func TestSharedVerificationIgnoresLaterEntries(t *testing.T) {
	ctx := context.Background()
	e := newShareEngine(t, shareSecret)
	o := newOrg(t, e.Engine)
	d := decide(t, e.Engine, o)
	l, _ := e.ShareLinks.CreateShareLink(ctx, o.Org.ID, d.DossierID, clearance.ShareLinkOptions{})
	opened, err := e.ShareLinks.OpenShareLink(ctx, d.DossierID, l.Sig)
	if err != nil {
		t.Fatal(err)
	}
	// The chain is checked up to the dossier's entry: appends do not matter.
	for range 3 {
		decide(t, e.Engine, o)
	}
	v, err := e.ShareLinks.VerifySharedDossier(ctx, opened)
	if err != nil || !v.Verified || !v.Ledger.ChainValid {
		t.Fatalf("later entries change nothing: %+v %v", v, err)
	}
}
