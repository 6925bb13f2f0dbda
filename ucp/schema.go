package ucp

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

//go:embed schemas/2026-04-08 schemas/2026-08-25
var schemaFS embed.FS

// checkoutSchemaID is the root every release validates a response against.
const checkoutSchemaID = "https://ucp.dev/schemas/shopping/checkout.json"

// releaseRules is one release's compiled validator and the prose rules the
// schema does not carry.
type releaseRules struct {
	once   sync.Once
	dir    string
	schema *jsonschema.Schema
	// optionalPaymentHandlers: validate as if an empty ucp.payment_handlers
	// were present when it is absent (our interface relaxes the official
	// 2026-04-08 schema, which requires it).
	optionalPaymentHandlers bool
}

var (
	rules20260408 = releaseRules{dir: "schemas/2026-04-08", optionalPaymentHandlers: true}
	rules20260825 = releaseRules{dir: "schemas/2026-08-25"}
)

// rulesFor is the one place a release selects its validator; a release not
// listed here is unsupported and never falls through to another.
func rulesFor(r Release) (*releaseRules, bool) {
	var rr *releaseRules
	switch r {
	case Release20260408:
		rr = &rules20260408
	case Release20260825:
		rr = &rules20260825
	default:
		return nil, false
	}
	rr.once.Do(func() {
		s, err := compileTree(rr.dir)
		if err != nil {
			// The trees are embedded and fixed: a failure is a build
			// defect, which TestSchemasCompile catches.
			panic(fmt.Sprintf("ucp: compile %s: %v", rr.dir, err))
		}
		rr.schema = s
	})
	return rr, true
}

// noLoader refuses every load: all schemas are added as resources, so a
// reference outside them is a defect, never a reason to touch a network or
// a file system.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("ucp: schema %s is not embedded", url)
}

func compileTree(dir string) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertVocabs()
	c.RegisterVocabulary(exactIntegerVocabulary())
	err := fs.WalkDir(schemaFS, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".json" {
			return err
		}
		raw, err := schemaFS.ReadFile(p)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		obj, _ := doc.(map[string]any)
		id, _ := obj["$id"].(string)
		if id == "" {
			return fmt.Errorf("%s: no $id", p)
		}
		return c.AddResource(id, doc)
	})
	if err != nil {
		return nil, err
	}
	return c.Compile(checkoutSchemaID)
}

// The exact-integer vocabulary. jsonschema (like the JSON Schema spec)
// counts 2.0 and 2e0 as integers; money and quantities here must be
// written as integers. The vocabulary's Compile sees every schema object
// of the release; it attaches a check to each one whose "type" admits
// "integer" but not "number". The check runs wherever validation applies
// that schema object, so it covers exactly the instance locations the
// schema types as integer (including inside $ref, allOf, if/then) and no
// other: an anyOf branch allowing "number" still accepts fractions, and
// open members no schema governs are never checked.
const exactIntegerURL = "urn:clearance:ucp:vocab:exact-integer"

func exactIntegerVocabulary() *jsonschema.Vocabulary {
	return &jsonschema.Vocabulary{
		URL: exactIntegerURL,
		Compile: func(_ *jsonschema.CompilerContext, obj map[string]any) (jsonschema.SchemaExt, error) {
			var types []string
			switch t := obj["type"].(type) {
			case string:
				types = []string{t}
			case []any:
				for _, e := range t {
					if s, ok := e.(string); ok {
						types = append(types, s)
					}
				}
			}
			if slices.Contains(types, "integer") && !slices.Contains(types, "number") {
				return exactInteger{}, nil
			}
			return nil, nil
		},
	}
}

type exactInteger struct{}

func (exactInteger) Validate(ctx *jsonschema.ValidatorContext, v any) {
	n, ok := v.(json.Number)
	if ok && !isExactInteger(string(n)) {
		ctx.AddError(&inexactInteger{kind.Type{Got: string(n), Want: []string{"integer"}}})
	}
}

// inexactInteger reuses kind.Type for its message plumbing; its own type
// lets schemaError name the rule.
type inexactInteger struct{ kind.Type }

// maxExactInteger is 2^53−1, the largest integer every JSON reader holds exactly.
const maxExactInteger = 1<<53 - 1

// isExactInteger reports whether the JSON number literal lit is written
// as an integer (no fraction, no exponent) within ±(2^53−1).
func isExactInteger(lit string) bool {
	if strings.ContainsAny(lit, ".eE") {
		return false
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	return err == nil && n >= -maxExactInteger && n <= maxExactInteger
}

// schemaError reduces a validation error tree to its deepest cause: the
// leaf whose instance location is longest (a missing member counts at the
// member's own location), ties broken by pointer then detail so the answer
// does not depend on map order.
func schemaError(err error, instance any) *Error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return envelopeError("", err.Error())
	}
	type cause struct {
		depth           int
		pointer, detail string
	}
	var best *cause
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		switch e.ErrorKind.(type) {
		case *kind.Contains, *kind.MinContains, *kind.MaxContains:
			// Its causes say why each element does not match, which is
			// no cause at all: the array is at fault.
		default:
			if len(e.Causes) == 0 {
				break
			}
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		tokens := slices.Clone(e.InstanceLocation)
		var detail string
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			if len(k.Missing) > 0 {
				tokens = append(tokens, k.Missing[0])
				detail = "missing required member " + strconv.Quote(k.Missing[0])
			}
		case *inexactInteger:
			detail = "an integer must be written without fraction or exponent and lie within ±(2^53−1); got " + k.Got
		case *kind.Contains, *kind.MinContains, *kind.MaxContains:
			detail = containsDetail(valueAt(instance, tokens))
		}
		if detail == "" {
			detail = leafMessage(e)
		}
		c := &cause{len(tokens), pointerOf(tokens...), detail}
		if best == nil || c.depth > best.depth ||
			(c.depth == best.depth && (c.pointer < best.pointer || (c.pointer == best.pointer && c.detail < best.detail))) {
			best = c
		}
	}
	walk(ve)
	if best == nil {
		return envelopeError("", "does not match the checkout schema")
	}
	return envelopeError(best.pointer, best.detail)
}

// containsDetail names the totals rule when the array is a totals list.
func containsDetail(v any) string {
	arr, ok := v.([]any)
	if !ok {
		return ""
	}
	counts := map[string]int{}
	for _, e := range arr {
		if m, ok := e.(map[string]any); ok {
			if t, ok := m["type"].(string); ok {
				counts[t]++
			}
		}
	}
	for _, t := range []string{"subtotal", "total"} {
		if counts[t] != 1 {
			return fmt.Sprintf("totals must hold exactly one entry of type %q; found %d", t, counts[t])
		}
	}
	return ""
}

// leafMessage is jsonschema's message for one leaf without its location prefix.
func leafMessage(e *jsonschema.ValidationError) string {
	msg := e.Error()
	if rest, ok := strings.CutPrefix(msg, "at "+quoteLikeJSONSchema(pointerOf(e.InstanceLocation...))+": "); ok {
		return rest
	}
	return msg
}

// quoteLikeJSONSchema mirrors how jsonschema quotes a location.
func quoteLikeJSONSchema(s string) string {
	s = fmt.Sprintf("%q", s)
	s = strings.ReplaceAll(s, `\"`, `"`)
	s = strings.ReplaceAll(s, `'`, `\'`)
	return "'" + s[1:len(s)-1] + "'"
}

// valueAt returns the value at tokens in a decoded tree, or nil.
func valueAt(v any, tokens []string) any {
	for _, t := range tokens {
		switch c := v.(type) {
		case map[string]any:
			v = c[t]
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}
