package ucp

import (
	"bytes"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestExactIntegerVocabulary: the check applies where a schema object
// types the value integer (and not number), and nowhere else.
func TestExactIntegerVocabulary(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"properties": {
			"int": {"type": "integer"},
			"num": {"type": "number"},
			"either": {"anyOf": [{"type": "integer"}, {"type": "number"}]},
			"nullable": {"type": ["integer", "null"]},
			"viaRef": {"$ref": "#/$defs/amount"},
			"cond": {"if": {"type": "object"}, "then": {"properties": {"n": {"type": "integer"}}}}
		},
		"$defs": {"amount": {"type": "integer", "minimum": 0}}
	}`)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.AssertVocabs()
	c.RegisterVocabulary(exactIntegerVocabulary())
	if err := c.AddResource("urn:test:schema", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("urn:test:schema")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"int": 2}`, true},
		{`{"int": -9007199254740991}`, true},
		{`{"int": 2.0}`, false},
		{`{"int": 2e0}`, false},
		{`{"int": 9007199254740992}`, false},
		{`{"num": 2.0}`, true},
		{`{"num": 2.5}`, true},
		{`{"either": 2.0}`, true},
		{`{"either": 2.5}`, true},
		{`{"nullable": null}`, true},
		{`{"nullable": 3.0}`, false},
		{`{"viaRef": 1.0}`, false},
		{`{"cond": {"n": 1.0}}`, false},
		{`{"cond": {"n": 1}}`, true},
		{`{"open": 1.0, "deeper": {"x": [2.0, 1e300]}}`, true},
	} {
		v, serr := decodeTree([]byte(tc.body))
		if serr != nil {
			t.Fatal(serr.detail)
		}
		if err := s.Validate(v); (err == nil) != tc.ok {
			t.Errorf("%s: got %v, want ok=%v", tc.body, err, tc.ok)
		}
	}
}

func TestIsExactInteger(t *testing.T) {
	for lit, want := range map[string]bool{"0": true, "-0": true, "9007199254740991": true, "-9007199254740991": true,
		"9007199254740992": false, "-9007199254740992": false, "1.0": false, "1e2": false, "1E2": false, "99999999999999999999": false} {
		if isExactInteger(lit) != want {
			t.Errorf("%s: want %v", lit, want)
		}
	}
}

// TestParseConcurrent: the compiled validators are shared safely (run with -race).
func TestParseConcurrent(t *testing.T) {
	bodies := [][]byte{official(t, Release20260408), official(t, Release20260825), mandated(t, Release20260825)}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 10 {
				if _, err := Parse(bodies[(i+j)%len(bodies)]); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}
