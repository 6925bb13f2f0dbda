package secretbox

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

var key = bytes.Repeat([]byte("k"), MinKeyLen)

func TestSealOpen(t *testing.T) {
	b, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := b.Seal([]byte("whsec_abc"), "webhook/org_1/d1")
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := b.Seal([]byte("whsec_abc"), "webhook/org_1/d1")
	if s1 == s2 {
		t.Fatal("two seals of one secret are equal: the nonce is not fresh")
	}
	if strings.Contains(s1, "whsec_abc") {
		t.Fatal("sealed value shows the secret")
	}
	got, err := b.Open(s1, "webhook/org_1/d1")
	if err != nil || string(got) != "whsec_abc" {
		t.Fatalf("Open = %q, %v", got, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	b, _ := New(key)
	other, _ := New(bytes.Repeat([]byte("o"), MinKeyLen))
	sealed, _ := b.Seal([]byte("secret"), "ctx")
	flipped := []byte(sealed)
	flipped[len(flipped)-3] ^= 1
	for name, c := range map[string]struct {
		box    *Box
		sealed string
		ctx    string
	}{
		"other context": {b, sealed, "ctx2"},
		"other key":     {other, sealed, "ctx"},
		"tampered":      {b, string(flipped), "ctx"},
		"no prefix":     {b, strings.TrimPrefix(sealed, "v1."), "ctx"},
		"short":         {b, "v1.AAAA", "ctx"},
		"not base64":    {b, "v1.!!!!", "ctx"},
		"empty":         {b, "", "ctx"},
	} {
		if got, err := c.box.Open(c.sealed, c.ctx); !errors.Is(err, ErrOpen) || got != nil {
			t.Errorf("%s: Open = %q, %v; want ErrOpen", name, got, err)
		}
	}
}

func TestShortKey(t *testing.T) {
	if _, err := New(key[:MinKeyLen-1]); !errors.Is(err, ErrKey) {
		t.Fatalf("New(short) = %v, want ErrKey", err)
	}
}

func TestMAC(t *testing.T) {
	b, _ := New(key)
	other, _ := New(bytes.Repeat([]byte("o"), MinKeyLen))
	m := b.MAC([]byte("123456"), "otp/a@example.com")
	if len(m) != 32 {
		t.Fatalf("MAC is %d bytes, want 32", len(m))
	}
	if !bytes.Equal(m, b.MAC([]byte("123456"), "otp/a@example.com")) {
		t.Fatal("MAC of equal inputs differs")
	}
	for name, got := range map[string][]byte{
		"another secret":      b.MAC([]byte("123457"), "otp/a@example.com"),
		"another context":     b.MAC([]byte("123456"), "otp/b@example.com"),
		"shifted boundary":    b.MAC([]byte("3456"), "otp/a@example.com12"),
		"another data key":    other.MAC([]byte("123456"), "otp/a@example.com"),
		"the seal key's HMAC": hmacOf(t, []byte("123456")),
	} {
		if bytes.Equal(m, got) {
			t.Errorf("%s: same MAC", name)
		}
	}
}

// hmacOf is HMAC-SHA256 keyed by the data key itself: what MAC must not be.
func hmacOf(t *testing.T, msg []byte) []byte {
	t.Helper()
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return h.Sum(nil)
}
