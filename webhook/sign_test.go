package webhook

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestVerifyRefuses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"a":1}`)
	secret, other := []byte("secret-one-0123456"), []byte("secret-two-0123456")
	good := Sign(body, now, secret)
	if err := Verify(good, body, secret, now.Add(DefaultTolerance), 0); err != nil {
		t.Fatalf("at the tolerance's edge: %v", err)
	}
	// Rotation: either secret verifies a header signed with both.
	both := Sign(body, now, other, secret)
	if strings.Count(both, "v1=") != 2 || Verify(both, body, secret, now, 0) != nil || Verify(both, body, other, now, 0) != nil {
		t.Fatalf("rotation header %q", both)
	}
	sig := good[strings.Index(good, "v1=")+3:]
	for name, c := range map[string]struct {
		header string
		body   []byte
		secret []byte
		at     time.Time
		want   error
	}{
		"other secret":    {good, body, other, now, ErrSignatureMismatch},
		"changed body":    {good, []byte(`{"a":2}`), secret, now, ErrSignatureMismatch},
		"too old":         {good, body, secret, now.Add(DefaultTolerance + time.Second), ErrSignatureTimestamp},
		"from the future": {good, body, secret, now.Add(-DefaultTolerance - time.Second), ErrSignatureTimestamp},
		"other t":         {"t=1800000001,v1=" + sig, body, secret, now, ErrSignatureMismatch},
		"empty":           {"", body, secret, now, ErrMalformedSignature},
		"no v1":           {"t=1800000000", body, secret, now, ErrMalformedSignature},
		"no t":            {"v1=" + sig, body, secret, now, ErrMalformedSignature},
		"t twice":         {"t=1800000000,t=1800000000,v1=" + sig, body, secret, now, ErrMalformedSignature},
		"signed t":        {"t=+1800000000,v1=" + sig, body, secret, now, ErrMalformedSignature},
		"short v1":        {"t=1800000000,v1=abcd", body, secret, now, ErrMalformedSignature},
		"not hex":         {"t=1800000000,v1=" + strings.Repeat("z", 64), body, secret, now, ErrMalformedSignature},
		"no equals":       {"t=1800000000,v1", body, secret, now, ErrMalformedSignature},
	} {
		if err := Verify(c.header, c.body, c.secret, c.at, 0); !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", name, err, c.want)
		}
	}
	// Unknown schemes are ignored, as receivers should.
	if err := Verify(good+",v2=whatever", body, secret, now, 0); err != nil {
		t.Fatalf("with a v2: %v", err)
	}
}

func TestJitter(t *testing.T) {
	for range 1000 {
		if j := jitter(10 * time.Second); j < 8*time.Second || j > 12*time.Second {
			t.Fatalf("jitter(10s) = %v, outside ±20%%", j)
		}
	}
	if jitter(0) != 0 {
		t.Fatal("jitter(0) != 0")
	}
}
