package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of every delivery.
const (
	// HeaderEvent names the event ("decision.resolved").
	HeaderEvent = "X-Clearance-Event"
	// HeaderDeliveryID is the delivery's id: the same on every attempt,
	// so that a receiver processes a delivery once.
	HeaderDeliveryID = "X-Clearance-Delivery-Id"
	// HeaderSignature is "t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
	// "<t>." + raw body)>", with one v1 per active secret (two while a
	// secret is being rotated).
	HeaderSignature = "X-Clearance-Signature"
)

// DefaultTolerance is how far a signature's t may be from the receiver's
// clock, either way.
const DefaultTolerance = 5 * time.Minute

// Refusals of Verify.
var (
	// ErrMalformedSignature: the header is not t=…,v1=… .
	ErrMalformedSignature = errors.New("webhook: malformed signature header")
	// ErrSignatureTimestamp: t is further than the tolerance from now: an
	// old delivery replayed, or a clock far off.
	ErrSignatureTimestamp = errors.New("webhook: signature timestamp outside the tolerance")
	// ErrSignatureMismatch: no v1 is the HMAC of the body with the secret.
	ErrSignatureMismatch = errors.New("webhook: no signature matches")
)

// Sign returns the X-Clearance-Signature value of body sent at t, with one
// v1 per secret.
func Sign(body []byte, t time.Time, secrets ...[]byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(ts)
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(mac(s, ts, body)))
	}
	return b.String()
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a delivery as a receiver should: header is the
// X-Clearance-Signature value, body the raw request body (before any
// decoding), secret the callback secret given to Clearance. It accepts
// when any v1 is the body's HMAC under secret and t is within tolerance
// of now (0 means DefaultTolerance). A receiver then dedupes on
// X-Clearance-Delivery-Id.
func Verify(header string, body []byte, secret []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%w: %q has no '='", ErrMalformedSignature, part)
		}
		switch k {
		case "t":
			if ts != "" {
				return fmt.Errorf("%w: t twice", ErrMalformedSignature)
			}
			ts = v
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				return fmt.Errorf("%w: v1 is not 64 hex digits", ErrMalformedSignature)
			}
			sigs = append(sigs, sig)
		default: // later schemes are ignored, as receivers should
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts == "" || ts[0] == '+' || ts[0] == '-' {
		return fmt.Errorf("%w: t is not unix seconds", ErrMalformedSignature)
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: no v1", ErrMalformedSignature)
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: t is %v from now", ErrSignatureTimestamp, d.Round(time.Second))
	}
	want := mac(secret, ts, body)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return ErrSignatureMismatch
}
