package registry_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/registry"
)

func TestRegisterRefusesIssuer(t *testing.T) {
	s := open(t)
	for _, iss := range []string{"a\x00b", "a\nb", "\x1b[2J", "a\x7fb", "a\u0080b", "a\u0085b", "a\u009fb", "a\xffb",
		strings.Repeat("i", registry.MaxIssuerLength+1), strings.Repeat("é", registry.MaxIssuerLength/2) + "i"} {
		_, _, err := register(t, s, orgA, registry.KindProvider, registry.Registration{KID: "k", Issuer: iss, PublicJWK: jwk(key(1), "")}, t0)
		wantCode(t, "Register with iss "+strings.ToValidUTF8(iss[:min(len(iss), 16)], "?"), err, registry.ErrInvalidIssuer, "INVALID_REQUEST")
	}
	keys, err := s.RegisteredKeys(t.Context(), orgA, registry.KindProvider)
	if err != nil || len(keys) != 0 {
		t.Fatalf("refused registrations stored %v (%v)", keys, err)
	}
	// No iss, printable text and MaxIssuerLength bytes are accepted.
	for i, iss := range []string{"", "https://psp.example/v2", "Prestataire de paiement — 支付", strings.Repeat("é", registry.MaxIssuerLength/2)} {
		k, created, err := register(t, s, orgA, registry.KindProvider, registry.Registration{KID: "ok-" + string(rune('a'+i)), Issuer: iss, PublicJWK: jwk(key(byte(30+i)), "")}, t0)
		if err != nil || !created || k.Issuer != iss {
			t.Errorf("Register with iss %q = %+v, created %v, %v", iss, k, created, err)
		}
	}
}

// trap is a Reader and Tx that records every call and finds nothing.
type trap struct{ calls []string }

func (tr *trap) RegisteredKey(_ context.Context, _ registry.Kind, kid string) (registry.Key, error) {
	tr.calls = append(tr.calls, kid)
	return registry.Key{}, registry.ErrKeyNotFound
}

func (tr *trap) PutRegisteredKey(context.Context, registry.Key) error {
	tr.calls = append(tr.calls, "put")
	return errors.New("unexpected write")
}

func (tr *trap) RegisteredKeyOf(_ context.Context, _ string, _ registry.Kind, kid string) (registry.Key, error) {
	tr.calls = append(tr.calls, kid)
	return registry.Key{}, registry.ErrKeyNotFound
}

func (tr *trap) RegisteredKeys(context.Context, string, registry.Kind) ([]registry.Key, error) {
	return nil, errors.New("unexpected listing")
}

// A kid no key can have is answered without asking the store: PostgreSQL
// text cannot even hold NUL, so asking would be a storage failure (503) for
// what is bad input. Lookup finds no key (a signature names an unknown
// key); Revoke refuses the kid as Register would (400, not 404: the spec's
// "kid 1 to 200 chars").
func TestLookupAndRevokeRefuseImpossibleKIDs(t *testing.T) {
	ctx := t.Context()
	for _, kid := range []string{"", "a\x00b", "a\nb", "a\x7fb", "a\u0085b", "a\xffb", "k\u200b", "\u202ek", "k ", "clé",
		strings.Repeat("k", registry.MaxKIDLength+1)} {
		var tr trap
		_, err := registry.Lookup(ctx, &tr, orgA, registry.KindAgent, kid)
		wantCode(t, "Lookup", err, registry.ErrKeyNotFound, "KEY_NOT_FOUND")
		if !errors.Is(err, grant.ErrUnknownKey) {
			t.Errorf("Lookup(%q): %v does not wrap grant.ErrUnknownKey", kid, err)
		}
		_, err = registry.Revoke(ctx, &tr, registry.KindProvider, kid, t0)
		wantCode(t, "Revoke", err, registry.ErrInvalidKID, "INVALID_KID")
		if len(tr.calls) != 0 {
			t.Errorf("kid %q: the store was asked: %q", kid, tr.calls)
		}
		if registry.ValidKID(kid) {
			t.Errorf("ValidKID(%q) = true", kid)
		}
	}
	// A possible kid is asked for.
	var tr trap
	kid := strings.Repeat("k", registry.MaxKIDLength)
	if _, err := registry.Lookup(ctx, &tr, orgA, registry.KindAgent, kid); !errors.Is(err, registry.ErrKeyNotFound) {
		t.Errorf("Lookup: %v", err)
	}
	if _, err := registry.Revoke(ctx, &tr, registry.KindAgent, kid, t0); !errors.Is(err, registry.ErrKeyNotFound) {
		t.Errorf("Revoke: %v", err)
	}
	if len(tr.calls) != 2 {
		t.Errorf("the store was asked %d times, want 2", len(tr.calls))
	}
}

var (
	_ registry.Reader = (*trap)(nil)
	_ registry.Tx     = (*trap)(nil)
)
