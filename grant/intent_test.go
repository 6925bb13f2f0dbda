package grant_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/grant"
)

var errStoreDown = errors.New("store unavailable")

// agentKeys is a registry of agent public keys, as the engine's lookup sees it.
func agentKeys(keys ...grant.Key) func(string) (ed25519.PublicKey, error) {
	return func(kid string) (ed25519.PublicKey, error) {
		for _, k := range keys {
			if k.KID() == kid {
				return k.Public(), nil
			}
		}
		return nil, fmt.Errorf("agent key %q: %w", kid, grant.ErrUnknownKey)
	}
}

const intentJSON = `{"action":{"amount":250,"type":"payment.send"},"actor":{"id":"agent-1","type":"agent"},"intent_id":"i-1","nonce":"n-1"}`

func TestVerifyIntent(t *testing.T) {
	agent, other := seedKey(t, 5), seedKey(t, 6)
	jws, err := grant.SignIntent(agent, []byte(intentJSON))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("good", func(t *testing.T) {
		payload, kid, err := grant.VerifyIntent(jws, agentKeys(agent, other))
		if err != nil {
			t.Fatal(err)
		}
		if string(payload) != intentJSON || kid != agent.KID() {
			t.Fatalf("payload %s, kid %s", payload, kid)
		}
	})
	t.Run("wrong typ", func(t *testing.T) {
		for _, h := range []string{
			header(agent, grant.TypGrant),
			header(agent, "JWT"),
			`{"alg":"EdDSA","kid":"` + agent.KID() + `"}`,
		} {
			_, _, err := grant.VerifyIntent(handSign(t, agent, h, intentJSON), agentKeys(agent))
			wantErr(t, err, grant.ErrTokenType)
		}
		_, _, err := grant.VerifyIntent(mustMint(t, agent, testClaims()), agentKeys(agent))
		wantErr(t, err, grant.ErrTokenType)
	})
	t.Run("unknown kid", func(t *testing.T) {
		payload, kid, err := grant.VerifyIntent(jws, agentKeys(other))
		wantErr(t, err, grant.ErrUnknownKey)
		if payload != nil || kid != agent.KID() {
			t.Fatalf("payload %q kid %q", payload, kid)
		}
		_, _, err = grant.VerifyIntent(jws, nil)
		wantErr(t, err, grant.ErrUnknownKey)
	})
	t.Run("lookup failure passes through", func(t *testing.T) {
		_, _, err := grant.VerifyIntent(jws, func(string) (ed25519.PublicKey, error) { return nil, errStoreDown })
		var te *grant.TokenError
		if !errors.Is(err, errStoreDown) || errors.As(err, &te) {
			t.Fatalf("err = %v, want the store error, not a *TokenError", err)
		}
	})
	t.Run("bad key from lookup", func(t *testing.T) {
		_, _, err := grant.VerifyIntent(jws, func(string) (ed25519.PublicKey, error) { return make(ed25519.PublicKey, 31), nil })
		wantErr(t, err, grant.ErrUnknownKey)
	})
	t.Run("signed by another key", func(t *testing.T) {
		forged := handSign(t, other, header(agent, grant.TypIntent), intentJSON)
		_, _, err := grant.VerifyIntent(forged, agentKeys(agent, other))
		wantErr(t, err, grant.ErrTokenSignature)
	})
	t.Run("tampered payload", func(t *testing.T) {
		parts := strings.Split(jws, ".")
		tampered := strings.Replace(intentJSON, `250`, `25000`, 1)
		_, _, err := grant.VerifyIntent(parts[0]+"."+b64.EncodeToString([]byte(tampered))+"."+parts[2], agentKeys(agent))
		wantErr(t, err, grant.ErrTokenSignature)
	})
	t.Run("alg none and forbidden headers", func(t *testing.T) {
		parts := strings.Split(jws, ".")
		_, _, err := grant.VerifyIntent(b64.EncodeToString([]byte(`{"alg":"none","kid":"`+agent.KID()+`","typ":"`+grant.TypIntent+`"}`))+"."+parts[1]+".", agentKeys(agent))
		wantErr(t, err, grant.ErrTokenAlgorithm)
		h := `{"alg":"EdDSA","kid":"` + agent.KID() + `","typ":"` + grant.TypIntent + `","jwk":{"kty":"OKP"}}`
		_, _, err = grant.VerifyIntent(handSign(t, agent, h, intentJSON), agentKeys(agent))
		wantErr(t, err, grant.ErrTokenHeader)
	})
	t.Run("payload bytes are returned as signed", func(t *testing.T) {
		// Not canonical, duplicate members: VerifyIntent does not interpret
		// the payload; the caller refuses it.
		raw := []byte("{ \"b\":1, \"b\":2 }")
		s, err := grant.SignIntent(agent, raw)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := grant.VerifyIntent(s, agentKeys(agent))
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("%q %v", got, err)
		}
	})
}

// FuzzVerifyIntent: only the signed intent verifies; nothing panics.
func FuzzVerifyIntent(f *testing.F) {
	agent := seedKey(f, 5)
	good, err := grant.SignIntent(agent, []byte(intentJSON))
	if err != nil {
		f.Fatal(err)
	}
	empty := handSign(f, agent, header(agent, grant.TypIntent), `{}`)
	f.Add(good)
	f.Add(empty)
	f.Add(strings.Replace(good, ".", "..", 1))
	f.Fuzz(func(t *testing.T, s string) {
		payload, _, err := grant.VerifyIntent(s, agentKeys(agent))
		if err == nil && s != good && s != empty {
			t.Fatalf("verified an intent that was never signed: %q → %q", s, payload)
		}
	})
}

func BenchmarkVerifyIntent(b *testing.B) {
	agent := seedKey(b, 5)
	jws, err := grant.SignIntent(agent, []byte(intentJSON))
	if err != nil {
		b.Fatal(err)
	}
	pub := agent.Public()
	lookup := func(string) (ed25519.PublicKey, error) { return pub, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := grant.VerifyIntent(jws, lookup); err != nil {
			b.Fatal(err)
		}
	}
}
