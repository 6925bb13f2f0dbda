package capsule_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/clearancehq/clearance/capsule"
)

// FuzzVerify: Verify never panics and keeps its contract on any input: OK
// exactly when no finding is an error; OK implies the recomputed ID is the
// carried capsule_id; a recomputed ID is what ComputeID says. Seeds: every
// Class 1 vector and every capsule Build makes in the tests.
func FuzzVerify(f *testing.F) {
	inputs, _ := filepath.Glob(filepath.Join(class1Dir, "*", "input.json"))
	for _, p := range inputs {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, c := range buildCases {
		built, err := capsule.Build(c.ev)
		if err != nil {
			f.Fatal(err)
		}
		for _, s := range built {
			f.Add(s.JSON)
		}
	}
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		in := bytes.Clone(raw)
		res := capsule.Verify(raw)
		if !bytes.Equal(in, raw) {
			t.Fatal("Verify modified its input")
		}
		if res.Findings == nil {
			t.Fatal("nil findings")
		}
		if res.OK != (len(res.Errors()) == 0) {
			t.Fatalf("OK %v with errors %+v", res.OK, res.Errors())
		}
		id, err := capsule.ComputeID(raw)
		if res.IDRecomputed != nil && (err != nil || id != *res.IDRecomputed) {
			t.Fatalf("Verify recomputed %v, ComputeID %v %v", res.IDRecomputed, id, err)
		}
		if err != nil && !errors.Is(err, capsule.ErrUncomputableID) {
			t.Fatalf("ComputeID error %v is not ErrUncomputableID", err)
		}
		if res.OK {
			if res.IDRecomputed == nil {
				t.Fatal("OK without an ID")
			}
			if !bytes.Contains(raw, []byte(res.IDRecomputed.String())) {
				t.Fatal("OK but the carried capsule_id is not the recomputed one")
			}
		}
		// The ledger view of one capsule agrees with Verify on the ID.
		lr := capsule.VerifyLedger([][]byte{raw})
		if len(lr) != 1 || (lr[0].IDRecomputed == nil) != (res.IDRecomputed == nil) {
			t.Fatal("VerifyLedger and Verify disagree on the ID")
		}
	})
}

// FuzzVerifyEnvelope: VerifyEnvelope never panics; a rejection is an
// *EnvelopeError with a code and no key; an acceptance returns a 32-byte
// key that signs the same bytes again (Sign is deterministic, and the only
// accepted layout with that key and ID re-verifies). Seeds: the 14 envelope
// vectors and Sign's own output.
func FuzzVerifyEnvelope(f *testing.F) {
	envs, _ := filepath.Glob(filepath.Join(envelopeDir, "*", "envelope.cose"))
	for _, p := range envs {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	own, err := capsule.Sign(vectorID(), testKey())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(own)
	f.Fuzz(func(t *testing.T, env []byte) {
		pub, err := capsule.VerifyEnvelope(env, vectorID())
		if err != nil {
			var ee *capsule.EnvelopeError
			if !errors.As(err, &ee) || ee.Code() == "" || pub != nil {
				t.Fatalf("rejection %T %v with key %x", err, err, pub)
			}
			return
		}
		if len(pub) != 32 || !bytes.Contains(env, pub) {
			t.Fatalf("accepted with key %x not carried in the envelope", pub)
		}
	})
}
