// Package jsonw appends JSON exactly as encoding/json writes it with HTML
// escaping off (json.Encoder with SetEscapeHTML(false)), for the few
// records written on every decision, where reflection was a visible share
// of the cost. Its contract is byte equality with encoding/json, checked
// by tests and a fuzz target; anything not on the hot path uses
// encoding/json itself.
package jsonw

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// String appends s as a JSON string. Invalid UTF-8 (which no validated
// input holds) is left to encoding/json, which replaces it.
func String(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	orig := len(b)
	b = append(b, '"')
	start := 0 // s[start:i] is still to be copied as is
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				return quoteInvalid(b[:orig], s)
			case r == '\u2028' || r == '\u2029':
				b = append(b, s[start:i]...)
				b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
				start = i + size
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// quoteInvalid appends s, which holds invalid UTF-8, as encoding/json
// writes it.
func quoteInvalid(b []byte, s string) []byte {
	q, _ := Reference(s) // a string always encodes
	return append(b, q...)
}

// Reference returns what this package's contract is held to: v as
// json.Encoder writes it with HTML escaping off, without the newline it
// adds. Tests of hand-written appenders compare with it.
func Reference(v any) ([]byte, error) {
	var q bytes.Buffer
	enc := json.NewEncoder(&q)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(q.Bytes(), []byte("\n")), nil
}

// Strings appends ss as a JSON array of strings; nil is null, as
// encoding/json writes a nil slice.
func Strings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = String(b, s)
	}
	return append(b, ']')
}

// Object appends the members of one JSON object in the order they are
// added, as encoding/json writes a struct's fields.
type Object struct {
	B     []byte
	count int
}

// Open starts an object at the end of b.
func Open(b []byte) Object { return Object{B: append(b, '{')} }

// name appends the separator and the member's name.
func (o *Object) name(n string) {
	if o.count > 0 {
		o.B = append(o.B, ',')
	}
	o.count++
	o.B = append(o.B, '"')
	o.B = append(o.B, n...) // names are plain ASCII identifiers
	o.B = append(o.B, '"', ':')
}

// String appends member n with string value v.
func (o *Object) String(n, v string) {
	o.name(n)
	o.B = String(o.B, v)
}

// OmitEmpty appends member n with string value v unless v is empty (the
// omitempty option).
func (o *Object) OmitEmpty(n, v string) {
	if v != "" {
		o.String(n, v)
	}
}

// Strings appends member n with the string array v.
func (o *Object) Strings(n string, v []string) {
	o.name(n)
	o.B = Strings(o.B, v)
}

// Uint appends member n with the number v.
func (o *Object) Uint(n string, v uint64) {
	o.name(n)
	o.B = strconv.AppendUint(o.B, v, 10)
}

// Member appends the name of member n; the caller appends its value to
// o.B.
func (o *Object) Member(n string) { o.name(n) }

// Close ends the object and returns the bytes.
func (o *Object) Close() []byte { return append(o.B, '}') }
