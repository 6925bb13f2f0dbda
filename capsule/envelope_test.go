package capsule_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/clearancehq/clearance/capsule"
)

// testKey is the draft's public test key (seed bytes 0x00..0x1f): test
// material only.
func testKey() ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

// vectorID is the Capsule ID of the envelope vectors: bytes 0x20..0x3f.
func vectorID() capsule.ID {
	var id capsule.ID
	for i := range id {
		id[i] = byte(0x20 + i)
	}
	return id
}

func TestSignVerifiesWithTheKeyInKid(t *testing.T) {
	key := testKey()
	built, err := capsule.Build(buildCases[10].ev)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range built {
		env, err := capsule.Sign(s.ID, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(env) != 181 {
			t.Errorf("envelope is %d bytes, want 181", len(env))
		}
		pub, err := capsule.VerifyEnvelope(env, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !pub.Equal(key.Public()) {
			t.Fatalf("key %x, want %x", pub, key.Public())
		}
		// The kid is the raw key, in the protected header, in sorted order.
		wantPrefix := "d284584ca301270378236170706c69636174696f6e2f6167656e742d616374696f6e2d63617073756c652d6964045820" + hex.EncodeToString(pub) + "a05820" + s.ID.String() + "5840"
		if got := hex.EncodeToString(env); got[:len(wantPrefix)] != wantPrefix {
			t.Errorf("envelope layout\n got %s\nwant %s…", got, wantPrefix)
		}
		again, _ := capsule.Sign(s.ID, key)
		if !bytes.Equal(env, again) {
			t.Error("Sign is not deterministic")
		}
		// An envelope never changes the capsule: it still verifies with its id.
		if res := capsule.Verify(s.JSON); res.IDRecomputed == nil || *res.IDRecomputed != s.ID {
			t.Error("capsule id changed")
		}
		// Another ID: payload mismatch.
		other := s.ID
		other[0] ^= 1
		if _, err := capsule.VerifyEnvelope(env, other); !errors.Is(err, capsule.ErrEnvelopePayload) {
			t.Errorf("other id: %v", err)
		}
	}
}

// TestIndependentEnvelopes: two keys over one ID verify independently, and
// an invalid one does not affect the other.
func TestIndependentEnvelopes(t *testing.T) {
	id := vectorID()
	a, _ := capsule.Sign(id, testKey())
	b, _ := capsule.Sign(id, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)))
	bad := bytes.Clone(b)
	bad[len(bad)-1] ^= 1
	pa, errA := capsule.VerifyEnvelope(a, id)
	pb, errB := capsule.VerifyEnvelope(b, id)
	_, errBad := capsule.VerifyEnvelope(bad, id)
	if errA != nil || errB != nil || pa.Equal(pb) {
		t.Fatalf("independent envelopes: %v %v", errA, errB)
	}
	if !errors.Is(errBad, capsule.ErrEnvelopeSignature) {
		t.Fatalf("tampered signature: %v", errBad)
	}
}

// TestEnvelopeEveryBitFlipRejected: no single-bit change of a valid
// envelope verifies.
func TestEnvelopeEveryBitFlipRejected(t *testing.T) {
	id := vectorID()
	env, err := capsule.Sign(id, testKey())
	if err != nil {
		t.Fatal(err)
	}
	for i := range env {
		for bit := range 8 {
			m := bytes.Clone(env)
			m[i] ^= 1 << bit
			if pub, err := capsule.VerifyEnvelope(m, id); err == nil {
				t.Fatalf("byte %d bit %d: accepted, key %x", i, bit, pub)
			}
		}
	}
}

func TestSignRefusesBadKeys(t *testing.T) {
	key := testKey()
	mismatched := bytes.Clone(key)
	mismatched[40] ^= 1
	for name, k := range map[string]ed25519.PrivateKey{"short": key[:32], "empty": nil, "mismatched public half": mismatched} {
		if _, err := capsule.Sign(vectorID(), k); !errors.Is(err, capsule.ErrInvalidKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// CBOR helpers for hand-made envelopes.
func head(major byte, n int) []byte {
	switch {
	case n < 24:
		return []byte{major<<5 | byte(n)}
	case n < 256:
		return []byte{major<<5 | 24, byte(n)}
	default:
		return []byte{major<<5 | 25, byte(n >> 8), byte(n)}
	}
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
func bstr(b []byte) []byte       { return cat(head(2, len(b)), b) }
func tstr(s string) []byte       { return cat(head(3, len(s)), []byte(s)) }

var (
	algEdDSA = []byte{0x01, 0x27}
	ctID     = cat([]byte{0x03}, tstr(capsule.IDMediaType))
)

func kidOf(pub []byte) []byte { return cat([]byte{0x04}, bstr(pub)) }

// envelope assembles tag 18 [protected map bytes, unprotected, payload, sig].
func envelope(protectedMap, unprotected, payload, sig []byte) []byte {
	return cat([]byte{0xd2, 0x84}, bstr(protectedMap), unprotected, payload, sig)
}

func TestVerifyEnvelopeRejectsMalformed(t *testing.T) {
	id := vectorID()
	pub := testKey().Public().(ed25519.PublicKey)
	good := cat([]byte{0xa3}, algEdDSA, ctID, kidOf(pub))
	payload := bstr(id[:])
	sig := bstr(make([]byte, 64))
	valid, _ := capsule.Sign(id, testKey())
	identity := make([]byte, 32)
	identity[0] = 1 // the identity point: verifies forged signatures
	cases := map[string]struct {
		env  []byte
		want error
	}{
		"empty":                {nil, capsule.ErrEnvelopeMalformed},
		"too large":            {make([]byte, capsule.MaxEnvelopeSize+1), capsule.ErrEnvelopeTooLarge},
		"untagged":             {valid[1:], capsule.ErrEnvelopeMalformed},
		"tag 98":               {cat([]byte{0xd8, 0x62}, valid[1:]), capsule.ErrEnvelopeMalformed},
		"nested tag":           {cat([]byte{0xd2}, valid), capsule.ErrEnvelopeMalformed},
		"trailing byte":        {cat(valid, []byte{0x00}), capsule.ErrEnvelopeMalformed},
		"two envelopes":        {cat(valid, valid), capsule.ErrEnvelopeMalformed},
		"three elements":       {cat([]byte{0xd2, 0x83}, bstr(good), []byte{0xa0}, payload), capsule.ErrEnvelopeMalformed},
		"indefinite array":     {cat([]byte{0xd2, 0x9f}, bstr(good), []byte{0xa0}, payload, sig, []byte{0xff}), capsule.ErrEnvelopeMalformed},
		"tag content is a map": {cat([]byte{0xd2, 0xa0}), capsule.ErrEnvelopeMalformed},
		"detached payload":     {envelope(good, []byte{0xa0}, []byte{0xf6}, sig), capsule.ErrEnvelopeMalformed},
		"text payload":         {envelope(good, []byte{0xa0}, tstr(id.String()), sig), capsule.ErrEnvelopeMalformed},
		"text signature":       {envelope(good, []byte{0xa0}, payload, tstr("sig")), capsule.ErrEnvelopeMalformed},
		"tagged payload":       {envelope(good, []byte{0xa0}, cat([]byte{0xd8, 0x40}, payload), sig), capsule.ErrEnvelopeMalformed},
		"empty protected":      {cat([]byte{0xd2, 0x84, 0x40, 0xa0}, payload, sig), capsule.ErrEnvelopeMalformed},
		"protected not a bstr": {cat([]byte{0xd2, 0x84}, good, []byte{0xa0}, payload, sig), capsule.ErrEnvelopeMalformed},
		"protected array":      {envelope(cat([]byte{0x83}, []byte{0x01, 0x03, 0x04}), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeMalformed},
		"protected trailing":   {envelope(cat(good, []byte{0x00}), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeMalformed},
		"protected indefinite": {envelope(cat([]byte{0xbf}, algEdDSA, ctID, kidOf(pub), []byte{0xff}), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeMalformed},
		"text label":           {envelope(cat([]byte{0xa3}, tstr("alg"), []byte{0x27}, ctID, kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeMalformed},
		"bool label false":     {envelope(cat([]byte{0xa3, 0xf4, 0x27}, ctID, kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeMalformed},
		"null label":           {envelope(cat([]byte{0xa4, 0xf6, 0x27}, algEdDSA, ctID, kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeMalformed},
		"tagged kid":           {envelope(cat([]byte{0xa3}, algEdDSA, ctID, []byte{0x04, 0xd8, 0x40}, bstr(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeMalformed},
		"simple value 0x18":    {envelope(cat([]byte{0xa3, 0x01, 0xf8, 0x18}, ctID, kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeMalformed},
		"reserved ai 30":       {envelope(cat([]byte{0xa3, 0x01, 0xfe}, ctID, kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeMalformed},
		"unprotected is bstr":  {envelope(good, []byte{0x40}, payload, sig), capsule.ErrEnvelopeMalformed},
		"unprotected kid":      {envelope(good, cat([]byte{0xa1}, kidOf(pub)), payload, sig), capsule.ErrEnvelopeMalformed},
		"unprotected dup":      {envelope(good, []byte{0xa2, 0x09, 0x01, 0x09, 0x01}, payload, sig), capsule.ErrEnvelopeMalformed},
		"no alg":               {envelope(cat([]byte{0xa2}, ctID, kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeAlgorithm},
		"alg as text":          {envelope(cat([]byte{0xa3, 0x01}, tstr("EdDSA"), ctID, kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeAlgorithm},
		"alg -19 (Ed25519)":    {envelope(cat([]byte{0xa3, 0x01, 0x32}, ctID, kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeAlgorithm},
		"alg float32 -8":       {envelope(cat([]byte{0xa3, 0x01, 0xfa, 0xc1, 0x00, 0x00, 0x00}, ctID, kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeAlgorithm},
		"alg true":             {envelope(cat([]byte{0xa3, 0x01, 0xf5}, ctID, kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeAlgorithm},
		"no content type":      {envelope(cat([]byte{0xa2}, algEdDSA, kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeContentType},
		"content type uint":    {envelope(cat([]byte{0xa3}, algEdDSA, []byte{0x03, 0x00}, kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeContentType},
		"content type bytes":   {envelope(cat([]byte{0xa3}, algEdDSA, []byte{0x03}, bstr([]byte(capsule.IDMediaType)), kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeContentType},
		"content type space":   {envelope(cat([]byte{0xa3}, algEdDSA, []byte{0x03}, tstr(capsule.IDMediaType+" "), kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeContentType},
		"content type case":    {envelope(cat([]byte{0xa3}, algEdDSA, []byte{0x03}, tstr("Application/agent-action-capsule-id"), kidOf(pub)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeContentType},
		"no kid":               {envelope(cat([]byte{0xa2}, algEdDSA, ctID), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeKID},
		"kid 33 bytes":         {envelope(cat([]byte{0xa3}, algEdDSA, ctID, kidOf(append(bytes.Clone(pub), 0))), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeKID},
		"kid as text":          {envelope(cat([]byte{0xa3}, algEdDSA, ctID, []byte{0x04}, tstr(hex.EncodeToString(pub)[:32])), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeKID},
		"kid low-order point":  {envelope(cat([]byte{0xa3}, algEdDSA, ctID, kidOf(identity)), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeKID},
		"extra label -1":       {envelope(cat([]byte{0xa4}, algEdDSA, ctID, kidOf(pub), []byte{0x20, 0x00}), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeProtectedHeaders},
		"crit label":           {envelope(cat([]byte{0xa4}, algEdDSA, ctID, kidOf(pub), []byte{0x02, 0x81, 0x01}), []byte{0xa0}, payload, sig), capsule.ErrEnvelopeProtectedHeaders},
		"payload 31 bytes":     {envelope(good, []byte{0xa0}, bstr(id[:31]), sig), capsule.ErrEnvelopePayload},
		"payload hex text":     {envelope(good, []byte{0xa0}, bstr([]byte(id.String())), sig), capsule.ErrEnvelopePayload},
		"signature 63 bytes":   {envelope(good, []byte{0xa0}, payload, bstr(make([]byte, 63))), capsule.ErrEnvelopeSignature},
		"signature zero":       {envelope(good, []byte{0xa0}, payload, sig), capsule.ErrEnvelopeSignature},
	}
	for name, c := range cases {
		pub, err := capsule.VerifyEnvelope(c.env, id)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
			continue
		}
		var ee *capsule.EnvelopeError
		if !errors.As(err, &ee) || ee.Code() == "" || pub != nil {
			t.Errorf("%s: %T %v, key %x", name, err, err, pub)
		}
	}
}

// TestForgedSignatureUnderIdentityKey: the identity point as kid with the
// classic forgery (R = identity, S = 0) is refused at the kid, before any
// signature math could accept it.
func TestForgedSignatureUnderIdentityKey(t *testing.T) {
	id := vectorID()
	identity := make([]byte, 32)
	identity[0] = 1
	forged := make([]byte, 64)
	forged[0] = 1 // R = identity, S = 0
	env := envelope(cat([]byte{0xa3}, algEdDSA, ctID, kidOf(identity)), []byte{0xa0}, bstr(id[:]), bstr(forged))
	if !ed25519.Verify(identity, []byte("anything"), forged) {
		t.Skip("this Go version already refuses the forgery")
	}
	if _, err := capsule.VerifyEnvelope(env, id); !errors.Is(err, capsule.ErrEnvelopeKID) {
		t.Fatalf("forged envelope: %v", err)
	}
}
