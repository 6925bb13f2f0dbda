package policy

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/strictjson"
)

// FuzzLoad checks that any input either loads or fails with a documented
// error type, that a loaded bundle reloads from its canonical bytes with the
// same digest, and that evaluating it never panics.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(starterJSON))
	f.Add([]byte(celBenchBundle))
	for _, cf := range readCaseFiles(f) {
		if b := strings.TrimSpace(cf.Bundle); b != "" && b != "starter" {
			f.Add([]byte(b))
		}
	}
	inputs := []Input{
		{},
		{DecisionType: "REFUND", WorkflowKey: "wk", Surface: "slack", Amount: 5000, HasAmount: true, RiskScore: 0.9, HasRiskScore: true,
			Context: map[string]any{"channel": "email", "n": 3.0, "flag": true}, Approval: &Approval{Verified: true}},
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := Load(raw)
		if err != nil {
			var se *strictjson.Error
			var ve *ValidationError
			if !errors.As(err, &se) && !errors.As(err, &ve) {
				t.Fatalf("undocumented error %T: %v", err, err)
			}
			return
		}
		again, err := Load(c.Canonical())
		if err != nil {
			t.Fatalf("canonical form does not load: %v\n%s", err, c.Canonical())
		}
		if again.Digest() != c.Digest() || !bytes.Equal(again.Canonical(), c.Canonical()) {
			t.Fatalf("canonical form is not stable:\n%s\n%s", c.Canonical(), again.Canonical())
		}
		for i := range inputs {
			in := inputs[i]
			in.Now = time.Unix(1_700_000_000, 0)
			d := c.Evaluate(&in)
			if !d.Outcome.Valid() || len(d.ReasonCodes) < 2 || (d.Err != nil) != (d.ReasonCodes[1] == ReasonEvaluationError) {
				t.Fatalf("bad decision %+v", d)
			}
		}
	})
}

// FuzzParseAmount checks that accepted amounts are in range and literal.
func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"0", "999.99", "9999.999", "1e3", "-1", "null", `"5"`, "1000000000000000", "1.1234567", "01"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := ParseAmount(raw)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) || ie.Code != CodeInvalidAmount {
				t.Fatalf("error %v", err)
			}
			return
		}
		if math.IsNaN(v) || v < 0 || v > MaxAmount || bytes.ContainsAny(raw, "eE-+\"") {
			t.Fatalf("accepted %q as %v", raw, v)
		}
	})
}

// FuzzDecodeIntent checks that decoding never panics and that accepted
// intents map to an Input or an *InputError.
func FuzzDecodeIntent(f *testing.F) {
	for _, cf := range readCaseFiles(f) {
		for _, c := range cf.Cases {
			if c.Input != "" {
				f.Add([]byte(c.Input))
			}
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		i, err := DecodeIntent(raw)
		if err != nil {
			var se *strictjson.Error
			var ie *InputError
			if !errors.As(err, &se) && !errors.As(err, &ie) {
				t.Fatalf("undocumented error %T: %v", err, err)
			}
			return
		}
		in, err := i.Input(time.Time{})
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if d := Starter().Evaluate(&in); d.Err != nil {
			t.Fatalf("starter failed on a valid input: %v", d.Err)
		}
	})
}
