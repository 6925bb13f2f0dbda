package decide

import (
	"cmp"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
)

// readEvaluateBody is the one-pass reading of an evaluate-decision body: it
// fills the decisionBody that strictjson.Decode would and writes the
// canonical form that canon.Transform would, in a single scan of the bytes.
//
// ok is false for every body they refuse, and for the few they accept that
// it leaves to them: a member set to null, an unknown member (when opts
// allow one), a member name that RFC 8785 writes with escapes (", \ or a
// control character). The caller then takes the strictjson path, which
// also gives a refused body its error; this reading never reports one.
func readEvaluateBody(body []byte, opts strictjson.Options) (b decisionBody, canonical []byte, ok bool) {
	// The canonical form is at most as long as the body, but for numbers
	// written longer (1E2 is 100).
	r := wireReader{in: body, out: make([]byte, 0, len(body)+16)}
	r.maxMembers, r.maxElements = opts.Limits()
	r.text = string(body)
	r.skipSpace()
	if r.peek() != '{' {
		return decisionBody{}, nil, false
	}
	ok = r.readObject(func(name string) bool {
		var ok bool
		switch name {
		case "org_id":
			b.OrgID, ok = r.readString()
		case "parent_decision_id":
			b.ParentDecisionID, ok = r.readString()
		case "decision_type":
			b.DecisionType, ok = r.readString()
		case "workflow_key":
			b.WorkflowKey, ok = r.readString()
		case "vertical_pack":
			b.VerticalPack, ok = r.readString()
		case "amount":
			b.Amount, ok = r.readAmount()
		case "risk_score":
			b.RiskScore, ok = r.readScore()
		case "objective_profile":
			b.ObjectiveProfile, ok = r.readString()
		case "mode":
			var s string
			s, ok = r.readString()
			b.Mode = policy.Mode(s)
		case "context":
			b.Context, ok = r.readAnyObject()
		case "surface":
			b.Surface, ok = r.readString()
		case "actor":
			b.Actor, ok = r.readActor()
		case "action":
			b.Action, ok = r.readAction()
		}
		return ok
	})
	r.skipSpace()
	if !ok || r.pos != len(r.in) {
		return decisionBody{}, nil, false
	}
	return b, r.out, true
}

// wireReader reads strict JSON from in and appends its RFC 8785 form to out
// as it goes. Its read methods return false, having read an unknown amount,
// for anything they do not handle exactly as strictjson and canon do.
type wireReader struct {
	in                      []byte
	text                    string // in as a string: the decoded strings without escapes are cut from it
	pos                     int
	out                     []byte
	depth                   int
	maxMembers, maxElements int
}

func (r *wireReader) skipSpace() {
	for r.pos < len(r.in) {
		switch r.in[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// peek returns the byte at r.pos, 0 at the end.
func (r *wireReader) peek() byte {
	if r.pos < len(r.in) {
		return r.in[r.pos]
	}
	return 0
}

func (r *wireReader) readActor() (*policy.Actor, bool) {
	if r.peek() != '{' {
		return nil, false
	}
	a := new(policy.Actor)
	ok := r.readObject(func(name string) bool {
		var ok bool
		switch name {
		case "id":
			a.ID, ok = r.readString()
		case "type":
			a.Type, ok = r.readString()
		}
		return ok
	})
	return a, ok
}

func (r *wireReader) readAction() (*policy.Action, bool) {
	if r.peek() != '{' {
		return nil, false
	}
	a := new(policy.Action)
	ok := r.readObject(func(name string) bool {
		var ok bool
		switch name {
		case "type":
			a.Type, ok = r.readString()
		case "amount":
			a.Amount, ok = r.readAmount()
		case "currency":
			a.Currency, ok = r.readString()
		case "target":
			a.Target, ok = r.readString()
		case "parameters":
			a.Parameters, ok = r.readAnyObject()
		}
		return ok
	})
	return a, ok
}

// readAmount reads an amount as policy.Amount's UnmarshalJSON does; an
// amount it refuses is left to strictjson, which reports it.
func (r *wireReader) readAmount() (policy.Amount, bool) {
	start := r.pos
	lit, ok := r.readNumber()
	if !ok {
		return policy.Amount{}, false
	}
	v, err := policy.ParseAmount(lit)
	if err != nil {
		return policy.Amount{}, false
	}
	return policy.Amount{Value: v, Set: true, Raw: r.text[start:r.pos]}, true
}

func (r *wireReader) readScore() (policy.Score, bool) {
	lit, ok := r.readNumber()
	if !ok {
		return policy.Score{}, false
	}
	var s policy.Score
	if err := s.UnmarshalJSON(lit); err != nil {
		return policy.Score{}, false
	}
	return s, true
}

// objectMember is a member of the object being read, by where it is in
// r.out: its name (between the quotes) and its whole "name":value. It
// holds no pointer, so that ordering members costs no write barrier.
type objectMember struct {
	nameStart, nameEnd int
	start, end         int
}

// readObject reads the object at r.pos (whose '{' the caller has seen),
// calling readValue for each member with r.pos at the member's value
// (readValue reads it, or returns false), and writes the object with its
// members in RFC 8785 order. Duplicate names, more than maxMembers
// members, nesting deeper than strictjson.MaxDepth and names that need
// escaping (", \ or a control character) return false.
func (r *wireReader) readObject(readValue func(name string) bool) bool {
	if r.depth == strictjson.MaxDepth {
		return false
	}
	r.depth++
	r.pos++ // '{'
	r.out = append(r.out, '{')
	first := len(r.out)
	var stack [16]objectMember
	members := stack[:0]
	r.skipSpace()
	if r.peek() == '}' {
		r.pos++
		r.out = append(r.out, '}')
		r.depth--
		return true
	}
	for {
		if len(members) == r.maxMembers {
			return false
		}
		if len(members) > 0 {
			r.out = append(r.out, ',')
		}
		start := len(r.out)
		name, ok := r.readString()
		if !ok {
			return false
		}
		nameEnd := len(r.out) - 1
		if len(name) != nameEnd-start-1 {
			return false // written with escapes: its bytes in r.out are not the name's
		}
		r.skipSpace()
		if r.peek() != ':' {
			return false
		}
		r.pos++
		r.out = append(r.out, ':')
		r.skipSpace()
		if !readValue(name) {
			return false
		}
		members = append(members, objectMember{nameStart: start + 1, nameEnd: nameEnd, start: start, end: len(r.out)})
		r.skipSpace()
		switch r.peek() {
		case ',':
			r.pos++
			r.skipSpace()
			continue
		case '}':
			r.pos++
		default:
			return false
		}
		break
	}
	r.depth--
	if !r.putInOrder(first, members) {
		return false
	}
	r.out = append(r.out, '}')
	return true
}

// putInOrder rewrites the members written from r.out[first:] in RFC 8785
// order (their names' UTF-16 code units); false if two share a name.
func (r *wireReader) putInOrder(first int, members []objectMember) bool {
	inOrder := true
	for i := 1; i < len(members); i++ {
		switch r.compareNames(members[i-1], members[i]) {
		case 0:
			return false
		case 1:
			inOrder = false
		}
	}
	if inOrder {
		return true
	}
	if len(members) <= 16 {
		// Insertion sort: most objects are small. A member meets any other
		// of the same name on its way to its place.
		for i := 1; i < len(members); i++ {
			for j := i; j > 0; j-- {
				c := r.compareNames(members[j-1], members[j])
				if c == 0 {
					return false
				}
				if c < 0 {
					break
				}
				members[j-1], members[j] = members[j], members[j-1]
			}
		}
	} else {
		slices.SortFunc(members, r.compareNames)
		for i := 1; i < len(members); i++ {
			if r.compareNames(members[i-1], members[i]) == 0 {
				return false
			}
		}
	}
	// The members are copied aside (on the stack, unless the object is
	// large), then back in order.
	var small [512]byte
	aside := append(small[:0], r.out[first:]...)
	at := first
	for i, m := range members {
		if i > 0 {
			r.out[at] = ','
			at++
		}
		at += copy(r.out[at:], aside[m.start-first:m.end-first])
	}
	return true
}

// compareNames orders members by their names.
func (r *wireReader) compareNames(a, b objectMember) int {
	return compareUTF16(r.out[a.nameStart:a.nameEnd], r.out[b.nameStart:b.nameEnd])
}

// compareUTF16 orders valid UTF-8 strings by their UTF-16 code units, the
// member order of RFC 8785. It is the order of their bytes except where a
// character beyond U+FFFF (a surrogate pair, 0xD800–0xDFFF) meets one in
// U+E000–U+FFFF.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return cmp.Compare(a[i], b[i])
	}
	for i > 0 && !utf8.RuneStart(a[i]) {
		i-- // both differ inside the same character: back to its first byte
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	if (ra > 0xFFFF) != (rb > 0xFFFF) {
		// One is a surrogate pair in UTF-16; its first unit is what counts.
		if ra > 0xFFFF {
			ra = 0xD800
		} else {
			rb = 0xD800
		}
	}
	return cmp.Compare(ra, rb)
}

// readAnyObject reads an object as strictjson decodes it into a
// map[string]any (its values as readAny).
func (r *wireReader) readAnyObject() (map[string]any, bool) {
	if r.peek() != '{' {
		return nil, false
	}
	m := make(map[string]any)
	ok := r.readObject(func(name string) bool {
		v, ok := r.readAny()
		m[name] = v
		return ok
	})
	return m, ok
}

// readAny reads a value as strictjson decodes it into an any: objects as
// map[string]any, arrays as []any, numbers as float64.
func (r *wireReader) readAny() (any, bool) {
	switch c := r.peek(); c {
	case '{':
		return r.readAnyObject()
	case '[':
		return r.readAnyArray()
	case '"':
		return r.readString()
	case 't':
		return true, r.readLiteral("true")
	case 'f':
		return false, r.readLiteral("false")
	case 'n':
		return nil, r.readLiteral("null")
	}
	lit, ok := r.readNumber()
	if !ok {
		return nil, false
	}
	v, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil, false // out of the float64 range: strictjson refuses it
	}
	return v, true
}

func (r *wireReader) readAnyArray() ([]any, bool) {
	if r.depth == strictjson.MaxDepth {
		return nil, false
	}
	r.depth++
	r.pos++ // '['
	r.out = append(r.out, '[')
	elems := []any{} // an empty array is an empty slice, not nil
	r.skipSpace()
	if r.peek() == ']' {
		r.pos++
		r.out = append(r.out, ']')
		r.depth--
		return elems, true
	}
	for {
		if len(elems) == r.maxElements {
			return nil, false
		}
		if len(elems) > 0 {
			r.out = append(r.out, ',')
		}
		v, ok := r.readAny()
		if !ok {
			return nil, false
		}
		elems = append(elems, v)
		r.skipSpace()
		switch r.peek() {
		case ',':
			r.pos++
			r.skipSpace()
			continue
		case ']':
			r.pos++
		default:
			return nil, false
		}
		break
	}
	r.depth--
	r.out = append(r.out, ']')
	return elems, true
}

func (r *wireReader) readLiteral(lit string) bool {
	if len(r.in)-r.pos < len(lit) || string(r.in[r.pos:r.pos+len(lit)]) != lit {
		return false
	}
	r.pos += len(lit)
	r.out = append(r.out, lit...)
	return true
}

// readNumber reads a number (RFC 8259 grammar), writes its canonical form
// and returns its literal. What follows it is the caller's to check.
func (r *wireReader) readNumber() ([]byte, bool) {
	start := r.pos
	if r.peek() == '-' {
		r.pos++
	}
	switch c := r.peek(); {
	case c == '0':
		r.pos++
	case c >= '1' && c <= '9':
		r.skipDigits()
	default:
		return nil, false
	}
	if r.peek() == '.' {
		r.pos++
		if r.skipDigits() == 0 {
			return nil, false
		}
	}
	if c := r.peek(); c == 'e' || c == 'E' {
		r.pos++
		if c := r.peek(); c == '+' || c == '-' {
			r.pos++
		}
		if r.skipDigits() == 0 {
			return nil, false
		}
	}
	lit := r.in[start:r.pos]
	r.out = canon.AppendNumber(r.out, lit)
	return lit, true
}

func (r *wireReader) skipDigits() int {
	start := r.pos
	for r.pos < len(r.in) && r.in[r.pos] >= '0' && r.in[r.pos] <= '9' {
		r.pos++
	}
	return r.pos - start
}

// readString reads a string, writes its canonical form and returns its
// value. A string that holds U+0000, which strictjson refuses, returns
// false.
func (r *wireReader) readString() (string, bool) {
	if r.peek() != '"' {
		return "", false
	}
	start := r.pos + 1
	i := start
	for i < len(r.in) && plainASCII[r.in[i]] {
		i++
	}
	if i < len(r.in) && r.in[i] >= utf8.RuneSelf {
		// Not ASCII: find the end, then check it is UTF-8.
		for i < len(r.in) && (plainASCII[r.in[i]] || r.in[i] >= utf8.RuneSelf) {
			i++
		}
		if !utf8.Valid(r.in[start:i]) {
			return "", false
		}
	}
	switch {
	case i == len(r.in) || r.in[i] < 0x20:
		return "", false
	case r.in[i] == '\\':
		return r.readEscapedString()
	}
	// The closing quote. Without escapes, the string as written is its
	// canonical form.
	r.out = append(r.out, r.in[r.pos:i+1]...)
	r.pos = i + 1
	return r.text[start:i], true
}

// plainASCII holds the bytes a string may hold as they are and writes as
// they are in RFC 8785: ASCII but the controls, '"' and '\\'.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// readEscapedString is readString for a string with escapes: its value is
// unescaped into a new string and written back with canon.AppendString.
func (r *wireReader) readEscapedString() (string, bool) {
	i := r.pos + 1
	var s []byte
	for i < len(r.in) {
		c := r.in[i]
		switch {
		case c == '"':
			if !utf8.Valid(s) {
				return "", false
			}
			r.pos = i + 1
			value := string(s)
			r.out = canon.AppendString(r.out, value)
			return value, true
		case c < 0x20:
			return "", false
		case c != '\\':
			s = append(s, c)
			i++
			continue
		}
		if i+1 >= len(r.in) {
			return "", false
		}
		switch e := r.in[i+1]; e {
		case '"', '\\', '/':
			s = append(s, e)
		case 'b':
			s = append(s, '\b')
		case 'f':
			s = append(s, '\f')
		case 'n':
			s = append(s, '\n')
		case 'r':
			s = append(s, '\r')
		case 't':
			s = append(s, '\t')
		case 'u':
			u, ok := hex4(r.in[i+2:])
			if !ok || u == 0 {
				return "", false
			}
			rn := rune(u)
			if utf16IsSurrogate(rn) {
				// Only a high surrogate escape followed by a low one.
				lo, ok := hex4(r.in[min(i+8, len(r.in)):])
				if !ok || u >= 0xDC00 || r.in[i+6] != '\\' || r.in[i+7] != 'u' || lo < 0xDC00 || lo > 0xDFFF {
					return "", false
				}
				rn = 0x10000 + (rune(u)-0xD800)<<10 + (rune(lo) - 0xDC00)
				i += 6
			}
			s = utf8.AppendRune(s, rn)
			i += 4
		default:
			return "", false
		}
		i += 2
	}
	return "", false
}

func utf16IsSurrogate(r rune) bool { return r >= 0xD800 && r <= 0xDFFF }

// hex4 decodes the four hex digits at the start of b.
func hex4(b []byte) (uint16, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var u uint16
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		u = u<<4 | uint16(c)
	}
	return u, true
}
