package policyfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/clearancehq/clearance/policy"
)

// SyntaxError is a bundle file that cannot be read as JSON: YAML that does
// not parse, or uses a feature JSON has no form for, or a file name with an
// unknown extension. Line and Column are 1-based, 0 when unknown.
type SyntaxError struct {
	Name         string
	Line, Column int
	Message      string
}

func (e *SyntaxError) Error() string {
	var b strings.Builder
	b.WriteString(e.Name)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// ReadBundle compiles the bundle file name holding data: JSON (.json) or
// YAML (.yaml, .yml). Errors are a *SyntaxError from the YAML conversion, or
// policy.Load's *strictjson.Error or *policy.ValidationError unchanged.
func ReadBundle(name string, data []byte) (*policy.Compiled, error) {
	raw, err := BundleJSON(name, data)
	if err != nil {
		return nil, err
	}
	return policy.Load(raw)
}

// BundleJSON returns the JSON form of the bundle file name holding data:
// data itself for .json, the converted document for .yaml and .yml. It
// does not validate the bundle.
func BundleJSON(name string, data []byte) ([]byte, error) {
	switch strings.ToLower(path.Ext(name)) {
	case ".json":
		return data, nil
	case ".yaml", ".yml":
		return yamlToJSON(name, data)
	}
	return nil, &SyntaxError{Name: name, Message: "unknown bundle file type: name it .json, .yaml or .yml"}
}

// jsonNumber is the grammar of a JSON number literal (RFC 8259 §6).
var jsonNumber = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$`)

func yamlToJSON(name string, data []byte) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &SyntaxError{Name: name, Message: "empty document"}
		}
		return nil, &SyntaxError{Name: name, Message: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		line := more.Line
		if err != nil {
			return nil, &SyntaxError{Name: name, Message: strings.TrimPrefix(err.Error(), "yaml: ")}
		}
		return nil, &SyntaxError{Name: name, Line: line, Message: "more than one YAML document"}
	}
	c := converter{name: name}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &SyntaxError{Name: name, Message: "empty document"}
	}
	if err := c.value(doc.Content[0]); err != nil {
		return nil, err
	}
	return c.buf.Bytes(), nil
}

type converter struct {
	name string
	buf  bytes.Buffer
}

func (c *converter) fail(n *yaml.Node, format string, args ...any) error {
	return &SyntaxError{Name: c.name, Line: n.Line, Column: n.Column, Message: fmt.Sprintf(format, args...)}
}

func (c *converter) value(n *yaml.Node) error {
	if n.Anchor != "" {
		return c.fail(n, "anchor &%s: anchors and aliases have no JSON form", n.Anchor)
	}
	switch n.Kind {
	case yaml.AliasNode:
		return c.fail(n, "alias *%s: anchors and aliases have no JSON form", n.Value)
	case yaml.MappingNode:
		if n.ShortTag() != "!!map" {
			return c.fail(n, "tag %s has no JSON form", n.Tag)
		}
		c.buf.WriteByte('{')
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.AliasNode {
				return c.fail(k, "alias *%s: anchors and aliases have no JSON form", k.Value)
			}
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				what := k.ShortTag()
				if k.ShortTag() == "!!merge" {
					return c.fail(k, "merge key <<: has no JSON form")
				}
				if k.Kind == yaml.ScalarNode {
					return c.fail(k, "mapping key %s is not a string (%s): quote it", k.Value, what)
				}
				return c.fail(k, "mapping key is not a string")
			}
			if k.Anchor != "" {
				return c.fail(k, "anchor &%s: anchors and aliases have no JSON form", k.Anchor)
			}
			if seen[k.Value] {
				return c.fail(k, "duplicate key %q", k.Value)
			}
			seen[k.Value] = true
			if i > 0 {
				c.buf.WriteByte(',')
			}
			c.str(k.Value)
			c.buf.WriteByte(':')
			if err := c.value(v); err != nil {
				return err
			}
		}
		c.buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		if n.ShortTag() != "!!seq" {
			return c.fail(n, "tag %s has no JSON form", n.Tag)
		}
		c.buf.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				c.buf.WriteByte(',')
			}
			if err := c.value(e); err != nil {
				return err
			}
		}
		c.buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	return c.fail(n, "unexpected YAML node")
}

func (c *converter) scalar(n *yaml.Node) error {
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!timestamp":
		c.str(n.Value)
	case "!!int", "!!float":
		if !jsonNumber.MatchString(n.Value) {
			return c.fail(n, "number %s has no exact JSON form: write it as a decimal like 1000 or 12.5", n.Value)
		}
		c.buf.WriteString(n.Value)
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return c.fail(n, "boolean %s: %v", n.Value, err)
		}
		if b {
			c.buf.WriteString("true")
		} else {
			c.buf.WriteString("false")
		}
	case "!!null":
		c.buf.WriteString("null")
	default:
		return c.fail(n, "tag %s has no JSON form", n.Tag)
	}
	return nil
}

// str writes s as a JSON string, without HTML escaping.
func (c *converter) str(s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes (invalid UTF-8 becomes U+FFFD)
	c.buf.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
