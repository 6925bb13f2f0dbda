package policy

import (
	"unicode"
	"unicode/utf8"
)

// The names a policy selects on have grammars of printable ASCII, so that a
// name that looks like another one (a zero-width space, a bidi override, a
// trailing space, a homoglyph, another case) is refused instead of being
// evaluated as a different name that no rule selects. The checks are byte
// loops: they run on every decision and allocate nothing.

// Longest valid names, in bytes.
const (
	MaxDecisionTypeLen = 64
	MaxWorkflowKeyLen  = 128
	MaxSurfaceLen      = 80
)

// ValidDecisionType reports whether s is a decision type: upper snake case,
// ^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$, at most MaxDecisionTypeLen bytes
// ("PAYMENT", "REFUND_V2").
func ValidDecisionType(s string) bool {
	if s == "" || len(s) > MaxDecisionTypeLen || !isUpper(s[0]) || s[len(s)-1] == '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c == '_' && s[i-1] != '_' {
			continue
		}
		if !isUpper(c) && !isDigit(c) {
			return false
		}
	}
	return true
}

// ValidWorkflowKey reports whether s is a workflow key:
// ^[A-Za-z0-9][A-Za-z0-9._:/-]*$, at most MaxWorkflowKeyLen bytes
// ("payments.refund", "crm:deal/close").
func ValidWorkflowKey(s string) bool {
	if s == "" || len(s) > MaxWorkflowKeyLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case isAlnum(c), c == '.', c == '_', c == ':', c == '/', c == '-':
		default:
			return false
		}
	}
	return true
}

// ValidSurface reports whether s is a surface: a lowercase letter, then
// lowercase letters, digits or underscores, at most MaxSurfaceLen bytes in
// all ("crm", "workspace_app"), the spec's rule for surfaces.
func ValidSurface(s string) bool {
	if s == "" || len(s) > MaxSurfaceLen || !isLower(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isLower(c) && !isDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

// VisibleName reports whether s, a name of free text (actor.id,
// action.type, vertical_pack, …), shows every character it holds: valid
// UTF-8 without control characters, format characters (zero-width, bidi
// overrides, byte-order marks: Unicode Cf), white space other than the
// ASCII space, and without white space at either end. Any script is
// allowed, so unlike the grammars above it does not stop homoglyphs; it
// stops the invisible differences a policy rule would not see.
func VisibleName(s string) bool {
	if s == "" {
		return true
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) ||
			unicode.In(r, unicode.Variation_Selector) {
			return false
		}
		i += n
	}
	return true
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool { return isUpper(c) || isLower(c) || isDigit(c) }

// grammar is the rule of one selected name, as checkIdentifiers and the
// bundle's selectors apply it.
type grammar struct {
	valid func(string) bool
	rule  string // for messages
}

var (
	decisionTypeGrammar = grammar{ValidDecisionType, "upper snake case (^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$), at most 64 bytes"}
	workflowKeyGrammar  = grammar{ValidWorkflowKey, "^[A-Za-z0-9][A-Za-z0-9._:/-]*$, at most 128 bytes"}
	surfaceGrammar      = grammar{ValidSurface, "^[a-z][a-z0-9_]*$, at most 80 bytes"}
)
