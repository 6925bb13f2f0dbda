package apidoc

// What client generators need from the document, checked without running
// one (the generators themselves run in the apicheck module): numbers whose
// width a generated type keeps, names that stay unique once flattened into
// one namespace, and examples on every operation that match their schemas.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// parseNode parses spec into the mapping at its root.
func parseNode(spec []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("the document is not a mapping")
	}
	return doc.Content[0], nil
}

// member returns the value of key in mapping n, or nil.
func member(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// members calls fn for every key and value of mapping n, in order.
func members(n *yaml.Node, fn func(key string, v *yaml.Node)) {
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		fn(n.Content[i].Value, n.Content[i+1])
	}
}

// hasType reports whether schema node n declares type t, alone or in a
// type array such as [number, 'null'].
func hasType(n *yaml.Node, t string) bool {
	tn := member(n, "type")
	switch {
	case tn == nil:
		return false
	case tn.Kind == yaml.ScalarNode:
		return tn.Value == t
	case tn.Kind == yaml.SequenceNode:
		return slices.ContainsFunc(tn.Content, func(e *yaml.Node) bool { return e.Value == t })
	}
	return false
}

// numberProblems lists the schemas whose numbers a generated client would
// narrow: a number without `format: double` (oapi-codegen makes it a
// float32, which keeps about 7 digits: 1234567.89 comes back 1234567.9),
// and an integer that may exceed 2^31-1 without `format: int64`. Examples
// are skipped: they hold values, not schemas.
func numberProblems(root *yaml.Node) []string {
	var problems []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.MappingNode:
			format := ""
			if f := member(n, "format"); f != nil {
				format = f.Value
			}
			if hasType(n, "number") && format != "double" {
				problems = append(problems, fmt.Sprintf("line %d: a number needs `format: double`, has %q", n.Line, format))
			}
			if hasType(n, "integer") && format != "int64" {
				bounded := false
				if m := member(n, "maximum"); m != nil {
					if v, err := strconv.ParseInt(m.Value, 10, 64); err == nil && v <= math.MaxInt32 {
						bounded = true
					}
				}
				if !bounded || (format != "" && format != "int32") {
					problems = append(problems, fmt.Sprintf("line %d: an integer without a `maximum` of at most 2^31-1 needs `format: int64`, has %q", n.Line, format))
				}
			}
			members(n, func(key string, v *yaml.Node) {
				if key != "example" && key != "examples" {
					walk(v)
				}
			})
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c)
			}
		}
	}
	walk(root)
	return problems
}

func TestNumbersKeepTheirWidth(t *testing.T) {
	spec, _ := loadSpec(t)
	root, err := parseNode(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range numberProblems(root) {
		t.Error(p)
	}
}

// TestNarrowNumbersAreCaught proves numberProblems fails on each narrowing.
func TestNarrowNumbersAreCaught(t *testing.T) {
	root, err := parseNode([]byte(`
components:
  schemas:
    Bare: {type: number}
    Float: {type: number, format: float}
    Nullable: {type: [number, 'null']}
    Count: {type: integer}
    Big: {type: integer, maximum: 10000000000}
    Narrow: {type: integer, format: int32}
    Double: {type: number, format: double}
    Wide: {type: integer, format: int64}
    Small: {type: integer, minimum: 1, maximum: 500}
    Described:
      type: object
      properties:
        amount: {type: number}
      example: {amount: 1.5, type: number}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := numberProblems(root)
	if len(got) != 7 {
		t.Errorf("numberProblems found %d problems, want 7 (Bare, Float, Nullable, Count, Big, Narrow, amount):\n%s", len(got), strings.Join(got, "\n"))
	}
}

// componentSections are the component maps whose names a generator turns
// into type names in one namespace.
var componentSections = []string{"schemas", "responses", "requestBodies", "parameters", "headers", "examples", "callbacks", "pathItems"}

// TestComponentNamesAreUnique: a name used in two sections (a schema and a
// response both called BundleList) becomes two types of one name in a
// generated client.
func TestComponentNamesAreUnique(t *testing.T) {
	spec, _ := loadSpec(t)
	root, err := parseNode(spec)
	if err != nil {
		t.Fatal(err)
	}
	comps := member(root, "components")
	if comps == nil {
		t.Fatal("no components")
	}
	seen := map[string]string{}
	for _, section := range componentSections {
		members(member(comps, section), func(name string, _ *yaml.Node) {
			if prev, dup := seen[name]; dup {
				t.Errorf("components.%s.%s: the name is also used in components.%s", section, name, prev)
			}
			seen[name] = section
		})
	}
}

// operation is one operation of the document: a path's or a callback's.
type operation struct {
	where   string     // "POST /v1/x" or "callback …"
	pointer string     // JSON pointer of the operation object
	node    *yaml.Node // the operation object
}

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// escapePointer escapes one JSON pointer token.
func escapePointer(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// operations lists every operation, the callbacks' included.
func operations(root *yaml.Node) []operation {
	var out []operation
	var pathItems func(items *yaml.Node, pointer, prefix string)
	pathItems = func(items *yaml.Node, pointer, prefix string) {
		members(items, func(path string, item *yaml.Node) {
			for _, m := range methods {
				op := member(item, m)
				if op == nil {
					continue
				}
				p := pointer + "/" + escapePointer(path) + "/" + m
				o := operation{where: prefix + strings.ToUpper(m) + " " + path, pointer: p, node: op}
				out = append(out, o)
				members(member(op, "callbacks"), func(name string, cb *yaml.Node) {
					pathItems(cb, p+"/callbacks/"+escapePointer(name), "callback "+name+" of "+o.where+": ")
				})
			}
		})
	}
	pathItems(member(root, "paths"), "/paths", "")
	pathItems(member(root, "webhooks"), "/webhooks", "webhook ")
	return out
}

// TestOperationIDsAreUnique, callbacks included: generators name a
// callback without an operationId after its key, so two callbacks of the
// same key (both decisionResolved) become one name twice.
func TestOperationIDsAreUnique(t *testing.T) {
	spec, _ := loadSpec(t)
	root, err := parseNode(spec)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, op := range operations(root) {
		id := member(op.node, "operationId")
		if id == nil || id.Value == "" {
			t.Errorf("%s: operationId missing", op.where)
			continue
		}
		if prev, dup := ids[id.Value]; dup {
			t.Errorf("%s: operationId %q already used by %s", op.where, id.Value, prev)
		}
		ids[id.Value] = op.where
	}
}

// resolve follows $ref from n (at pointer) to the object it names.
func resolve(root *yaml.Node, n *yaml.Node, pointer string) (*yaml.Node, string) {
	for range 10 {
		ref := member(n, "$ref")
		if ref == nil {
			return n, pointer
		}
		target, ok := strings.CutPrefix(ref.Value, "#")
		if !ok {
			return nil, ref.Value
		}
		next := root
		for _, tok := range strings.Split(strings.TrimPrefix(target, "/"), "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			next = member(next, tok)
		}
		if next == nil {
			return nil, target
		}
		n, pointer = next, target
	}
	return nil, pointer
}

// mediaType is one media type of a request body or response.
type mediaType struct {
	where   string // for messages
	pointer string // JSON pointer of the media type object
	node    *yaml.Node
	name    string // e.g. application/json
}

// bodies returns the media types of op's request body and those of its
// responses, each response's status with it.
func bodies(root *yaml.Node, op operation) (request []mediaType, responses map[string][]mediaType) {
	responses = map[string][]mediaType{}
	if rb := member(op.node, "requestBody"); rb != nil {
		rb, p := resolve(root, rb, op.pointer+"/requestBody")
		members(member(rb, "content"), func(name string, m *yaml.Node) {
			request = append(request, mediaType{op.where + " request " + name, p + "/content/" + escapePointer(name), m, name})
		})
	}
	members(member(op.node, "responses"), func(status string, r *yaml.Node) {
		r, p := resolve(root, r, op.pointer+"/responses/"+escapePointer(status))
		members(member(r, "content"), func(name string, m *yaml.Node) {
			responses[status] = append(responses[status], mediaType{op.where + " " + status + " " + name, p + "/content/" + escapePointer(name), m, name})
		})
	})
	return request, responses
}

func hasExample(m *yaml.Node) bool {
	if member(m, "example") != nil {
		return true
	}
	ex := member(m, "examples")
	return ex != nil && ex.Kind == yaml.MappingNode && len(ex.Content) > 0
}

// binary reports whether a media type's body is bytes an example cannot
// show (an archive).
func binary(m *yaml.Node) bool {
	f := member(member(m, "schema"), "format")
	return f != nil && f.Value == "binary"
}

// exampleProblems lists the operations that lack an example of their
// request body or of a success answer: every media type of the body and of
// every 2xx response with content carries one (bytes excepted).
func exampleProblems(root *yaml.Node) []string {
	var problems []string
	for _, op := range operations(root) {
		request, responses := bodies(root, op)
		for _, m := range request {
			if !hasExample(m.node) {
				problems = append(problems, m.where+": no example")
			}
		}
		for status, ms := range responses {
			if !strings.HasPrefix(status, "2") {
				continue
			}
			for _, m := range ms {
				if !binary(m.node) && !hasExample(m.node) {
					problems = append(problems, m.where+": no example")
				}
			}
		}
	}
	slices.Sort(problems)
	return problems
}

func TestEveryOperationHasExamples(t *testing.T) {
	spec, _ := loadSpec(t)
	root, err := parseNode(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range exampleProblems(root) {
		t.Error(p)
	}
}

// TestMissingExamplesAreCaught proves exampleProblems fails on an operation
// without a request example, one without a response example (also through
// a $ref and in a callback), and passes the rest.
func TestMissingExamplesAreCaught(t *testing.T) {
	root, err := parseNode([]byte(`
paths:
  /a:
    post:
      operationId: a
      requestBody:
        content:
          application/json: {schema: {type: object}}
      responses:
        '201':
          content:
            application/json: {schema: {type: object}, example: {}}
      callbacks:
        done:
          '{$request.body#/url}':
            post:
              operationId: aDone
              requestBody:
                content:
                  application/json: {schema: {type: object}}
              responses:
                '204': {description: ok}
  /b:
    get:
      operationId: b
      responses:
        '200': {$ref: '#/components/responses/B'}
        '400':
          content:
            application/problem+json: {schema: {type: object}}
  /c:
    get:
      operationId: c
      responses:
        '200':
          content:
            application/json: {schema: {type: object}, examples: {one: {value: {}}}}
            application/zip: {schema: {type: string, format: binary}}
components:
  responses:
    B:
      content:
        application/json: {schema: {type: object}}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := exampleProblems(root)
	want := []string{
		"GET /b 200 application/json: no example",
		"POST /a request application/json: no example",
		"callback done of POST /a: POST {$request.body#/url} request application/json: no example",
	}
	if !slices.Equal(got, want) {
		t.Errorf("exampleProblems:\n got %q\nwant %q", got, want)
	}
}

// jsonValue turns a YAML node into the value encoding/json would make of
// the same JSON (numbers as json.Number), so examples are checked as a
// client would send or receive them.
func jsonValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		return jsonValue(n.Content[0])
	case yaml.AliasNode:
		return jsonValue(n.Alias)
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			v, err := jsonValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			out[n.Content[i].Value] = v
		}
		return out, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := jsonValue(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		err := n.Decode(&b)
		return b, err
	case "!!int", "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, err
		}
		return json.Number(n.Value), nil
	}
	return n.Value, nil
}

// exampleValues returns the examples of a media type by name ("example"
// for the single one), a named one's $ref followed.
func exampleValues(root, m *yaml.Node) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if ex := member(m, "example"); ex != nil {
		out["example"] = ex
	}
	members(member(m, "examples"), func(name string, ex *yaml.Node) {
		ex, _ = resolve(root, ex, "")
		if v := member(ex, "value"); v != nil {
			out["examples."+name] = v
		}
	})
	return out
}

// docURL names the document as a JSON Schema resource, so a media type's
// schema compiles as docURL + "#" + its pointer.
const docURL = "https://clearance.invalid/openapi.json"

// compilerFor makes a JSON Schema 2020-12 compiler (the dialect of OpenAPI
// 3.1) that knows the whole document and asserts formats, so an example's
// date-time or uuid is checked too.
func compilerFor(root *yaml.Node) (*jsonschema.Compiler, error) {
	v, err := jsonValue(root)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(docURL, doc); err != nil {
		return nil, err
	}
	return c, nil
}

// fragment percent-encodes a JSON pointer for a URL fragment (callback
// keys hold '{', '$' and '#').
func fragment(pointer string) string {
	return (&url.URL{Fragment: pointer}).EscapedFragment()
}

// examplesAgainstSchemas checks every example of every media type (the
// requests and every response, errors too) against the media type's
// schema; text bodies (their schema is a string) are checked the same way.
func examplesAgainstSchemas(root *yaml.Node) (checked int, problems []string, err error) {
	c, err := compilerFor(root)
	if err != nil {
		return 0, nil, err
	}
	seen := map[string]bool{}
	for _, op := range operations(root) {
		request, responses := bodies(root, op)
		all := slices.Clone(request)
		for _, ms := range responses {
			all = append(all, ms...)
		}
		for _, m := range all {
			if seen[m.pointer] {
				continue // a shared component, checked once
			}
			seen[m.pointer] = true
			examples := exampleValues(root, m.node)
			if len(examples) == 0 || member(m.node, "schema") == nil {
				continue
			}
			schema, err := c.Compile(docURL + "#" + fragment(m.pointer+"/schema"))
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: schema does not compile: %v", m.where, err))
				continue
			}
			for name, ex := range examples {
				v, err := jsonValue(ex)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s %s (line %d): %v", m.where, name, ex.Line, err))
					continue
				}
				checked++
				if err := schema.Validate(v); err != nil {
					problems = append(problems, fmt.Sprintf("%s %s (line %d) does not match its schema: %v", m.where, name, ex.Line, err))
				}
			}
		}
	}
	return checked, problems, nil
}

func TestExamplesMatchSchemas(t *testing.T) {
	spec, _ := loadSpec(t)
	root, err := parseNode(spec)
	if err != nil {
		t.Fatal(err)
	}
	checked, problems, err := examplesAgainstSchemas(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("checked %d examples", checked)
	if checked < 150 {
		t.Errorf("checked only %d examples: is the walk right?", checked)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestWrongExamplesAreCaught proves examplesAgainstSchemas fails on an
// example of the wrong shape, through a $ref, and on a malformed format.
func TestWrongExamplesAreCaught(t *testing.T) {
	root, err := parseNode([]byte(`
paths:
  /a:
    post:
      requestBody:
        content:
          application/json:
            schema: {$ref: '#/components/schemas/A'}
            example: {id: 7}
      responses:
        '200':
          content:
            application/json:
              schema: {$ref: '#/components/schemas/A'}
              examples:
                good: {value: {id: 01900000-0000-7000-8000-000000000001}}
                notUUID: {value: {id: 01900000-0000-7000-8000-0000000000k1}}
      callbacks:
        done:
          '{$request.body#/url}':
            post:
              requestBody:
                content:
                  application/json:
                    schema: {$ref: '#/components/schemas/A'}
                    example: {}
              responses:
                '204': {description: ok}
components:
  schemas:
    A:
      type: object
      required: [id]
      properties:
        id: {type: string, format: uuid}
`))
	if err != nil {
		t.Fatal(err)
	}
	checked, problems, err := examplesAgainstSchemas(root)
	if err != nil {
		t.Fatal(err)
	}
	if checked != 4 || len(problems) != 3 {
		t.Errorf("checked %d examples with %d problems, want 4 with 3 (id 7, notUUID, missing id):\n%s", checked, len(problems), strings.Join(problems, "\n"))
	}
}
