package policy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/strictjson"
)

// controls are one control character of each family: C0 (NUL, newline,
// escape), DEL and C1 (U+0080, NEL U+0085, CSI U+009B, U+009F).
var controls = []string{"\x00", "\n", "\x1b", "\x7f", "\u0080", "\u0085", "\u009b", "\u009f"}

func TestHasControl(t *testing.T) {
	for _, c := range controls {
		if !hasControl("a" + c + "b") {
			t.Errorf("hasControl(%q) = false", "a"+c+"b")
		}
	}
	// Printable text, non-ASCII included, and the neighbours of the C1
	// block (U+007E, U+00A0 no-break space, U+00A1).
	for _, s := range []string{"", "refunds", "remboursé", "返金", "~", "a\u00a0b", "\u00a1", "a b"} {
		if hasControl(s) {
			t.Errorf("hasControl(%q) = true", s)
		}
	}
}

func TestIdentifiersRefuseControls(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	members := map[string]func(i *Intent, v string){
		"decision_type":     func(i *Intent, v string) { i.DecisionType = v },
		"workflow_key":      func(i *Intent, v string) { i.WorkflowKey = v },
		"surface":           func(i *Intent, v string) { i.Surface = v },
		"vertical_pack":     func(i *Intent, v string) { i.VerticalPack = v },
		"objective_profile": func(i *Intent, v string) { i.ObjectiveProfile = v },
		"actor.id":          func(i *Intent, v string) { i.Actor = &Actor{ID: v} },
		"actor.type":        func(i *Intent, v string) { i.Actor = &Actor{ID: "a", Type: v} },
		"action.type":       func(i *Intent, v string) { i.Action = &Action{Type: v} },
		"action.currency":   func(i *Intent, v string) { i.Action = &Action{Type: "pay", Currency: v} },
		"action.target":     func(i *Intent, v string) { i.Action = &Action{Type: "pay", Target: v} },
	}
	for field, set := range members {
		for _, c := range controls {
			var i Intent
			set(&i, "x"+c+"y")
			_, err := i.Input(now)
			var ie *InputError
			if !errors.As(err, &ie) || ie.Code != CodeInvalidIdentifier || ie.Field != field || !errors.Is(err, ErrInvalidInput) {
				t.Errorf("%s %q: got %v; want %s on %s", field, c, err, CodeInvalidIdentifier, field)
			}
		}
		if slices.Contains([]string{"decision_type", "workflow_key", "surface"}, field) {
			continue // ASCII grammars: TestIntentRefusesLookAlikes
		}
		var i Intent
		set(&i, "remboursé 返金") // a no-break space would be a look-alike of this space
		if _, err := i.Input(now); err != nil {
			t.Errorf("%s: printable non-ASCII refused: %v", field, err)
		}
	}
}

func TestBundleIDsRefuseControls(t *testing.T) {
	for _, c := range controls {
		// Escaped in the JSON text, and raw where JSON allows it (not C0).
		forms := []string{fmt.Sprintf(`\u%04x`, []rune(c)[0])}
		if c[0] >= 0x20 {
			forms = append(forms, c)
		}
		for _, f := range forms {
			for _, tc := range []struct{ field, raw string }{
				{"bundle_id", `{"bundle_id":"b` + f + `","version":"v1","mode":"SHADOW","rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`},
				{"rules[0].id", `{"bundle_id":"b","version":"v1","mode":"SHADOW","rules":[{"id":"r` + f + `","outcome":"BLOCK","reason_codes":["X"]}],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`},
			} {
				_, err := Load([]byte(tc.raw))
				if c == "\x00" { // no JSON text Clearance reads may hold NUL
					var se *strictjson.Error
					if !errors.As(err, &se) || se.Code != strictjson.CodeNUL {
						t.Errorf("%s with %q: got %v; want %s", tc.field, f, err, strictjson.CodeNUL)
					}
					continue
				}
				var ve *ValidationError
				if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Field != tc.field {
					t.Errorf("%s with %q: got %v; want one problem on %s", tc.field, f, err, tc.field)
				}
			}
		}
	}
	if _, err := Load([]byte(`{"bundle_id":"remboursé\u00a0返金","version":"v1","mode":"SHADOW","rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`)); err != nil {
		t.Errorf("printable non-ASCII bundle_id refused: %v", err)
	}
}

// lookAlikes are values that render like a valid name, or nearly: a
// zero-width space, a right-to-left override, a trailing space, a no-break
// space and a Cyrillic "а" (U+0430) in place of the Latin "a".
var lookAlikes = []string{"\u200b", "\u202e", " ", "\u00a0", "\u0430"}

func TestIdentifierGrammars(t *testing.T) {
	for _, tc := range []struct {
		name  string
		valid func(string) bool
		good  []string
		bad   []string
	}{
		{"decision_type", ValidDecisionType,
			[]string{"PAYMENT", "T", "REFUND_V2", "A1_B2_C3", "PAYOUT_SECRET_TYPE", strings.Repeat("D", MaxDecisionTypeLen)},
			[]string{"", "payment", "Payment", "_PAYMENT", "PAYMENT_", "PAY__OUT", "1PAYMENT", "PAY-OUT", "PAY.OUT", "PAY OUT",
				strings.Repeat("D", MaxDecisionTypeLen+1)}},
		{"workflow_key", ValidWorkflowKey,
			[]string{"payments.refund", "ap.invoice", "wf-1", "Vendor_Onboarding", "crm:deal/close", "0", strings.Repeat("w", MaxWorkflowKeyLen)},
			[]string{"", ".hidden", "-x", "a b", "a+b", "a@b", "ap\\invoice", strings.Repeat("w", MaxWorkflowKeyLen+1)}},
		{"surface", ValidSurface,
			[]string{"http", "crm", "workspace_app", "cloud_agent", "slack2", "x", strings.Repeat("s", MaxSurfaceLen)},
			[]string{"", "Http", "2fa", "_x", "work-space", "a.b", "a b", strings.Repeat("s", MaxSurfaceLen+1)}},
	} {
		for _, s := range tc.good {
			if !tc.valid(s) {
				t.Errorf("%s: %q refused", tc.name, s)
			}
		}
		bad := slices.Clone(tc.bad)
		for _, c := range append(slices.Clone(controls), lookAlikes...) {
			bad = append(bad, tc.good[0]+c, c+tc.good[0], tc.good[0][:1]+c+tc.good[0][1:])
		}
		for _, s := range bad {
			if tc.valid(s) {
				t.Errorf("%s: %q accepted", tc.name, s)
			}
		}
	}
}

// TestIntentRefusesLookAlikes: a name that only looks like one a policy
// selects on is refused, never evaluated as another name.
func TestIntentRefusesLookAlikes(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	members := map[string]struct {
		set  func(i *Intent, v string)
		good string
		bad  []string
	}{
		"decision_type": {func(i *Intent, v string) { i.DecisionType = v }, "PAYMENT", []string{"payment", "Payment", "PAY-MENT"}},
		"workflow_key":  {func(i *Intent, v string) { i.WorkflowKey = v }, "blocked.wf", []string{"blocked wf", ".blocked.wf"}},
		"surface":       {func(i *Intent, v string) { i.Surface = v }, "crm", []string{"CRM", "Crm", "c-r-m"}},
	}
	for field, m := range members {
		var ok Intent
		m.set(&ok, m.good)
		if _, err := ok.Input(now); err != nil {
			t.Errorf("%s %q refused: %v", field, m.good, err)
		}
		vals := append(slices.Clone(m.bad), strings.Repeat("a", 300))
		for _, c := range lookAlikes {
			vals = append(vals, m.good+c)
		}
		for _, v := range vals {
			var i Intent
			m.set(&i, v)
			_, err := i.Input(now)
			var ie *InputError
			if !errors.As(err, &ie) || ie.Code != CodeInvalidIdentifier || ie.Field != field {
				t.Errorf("%s %q: got %v; want %s on %s", field, v, err, CodeInvalidIdentifier, field)
			}
		}
	}
}

// TestFreeNamesRefuseInvisibleCharacters: names without a grammar (any
// script is welcome) still show every character they hold, so that a rule
// on action.type "wire_transfer" is not evaded by an invisible variant.
func TestFreeNamesRefuseInvisibleCharacters(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	members := map[string]func(i *Intent, v string){
		"actor.id":          func(i *Intent, v string) { i.Actor = &Actor{ID: v} },
		"actor.type":        func(i *Intent, v string) { i.Actor = &Actor{Type: v} },
		"action.type":       func(i *Intent, v string) { i.Action = &Action{Type: v} },
		"action.currency":   func(i *Intent, v string) { i.Action = &Action{Currency: v} },
		"action.target":     func(i *Intent, v string) { i.Action = &Action{Target: v} },
		"vertical_pack":     func(i *Intent, v string) { i.VerticalPack = v },
		"objective_profile": func(i *Intent, v string) { i.ObjectiveProfile = v },
	}
	for field, set := range members {
		for _, good := range []string{"wire_transfer", "Jane Doe", "Zoë Müller", "東京", "acct:42/ä"} {
			var i Intent
			set(&i, good)
			if _, err := i.Input(now); err != nil {
				t.Errorf("%s %q refused: %v", field, good, err)
			}
		}
		for _, bad := range []string{"wire_transfer\u200b", "\u202ewire_transfer", "wire_transfer ", " wire_transfer",
			"wire\u00a0transfer", "\ufeffwire_transfer", "wire\u2066transfer", "wire_transfer\ufe0f", "wire\x00", "wire\xff"} {
			var i Intent
			set(&i, bad)
			_, err := i.Input(now)
			var ie *InputError
			if !errors.As(err, &ie) || ie.Code != CodeInvalidIdentifier || ie.Field != field {
				t.Errorf("%s %q: got %v; want %s on %s", field, bad, err, CodeInvalidIdentifier, field)
			}
		}
	}
}

// TestBundleSelectorsFollowTheGrammars: a selector no valid request can
// carry is a bundle error, not a rule that silently never matches.
func TestBundleSelectorsFollowTheGrammars(t *testing.T) {
	for _, tc := range []struct{ member, value string }{
		{"decision_types", "payment"}, {"decision_types", "PAYMENT\u200b"}, {"decision_types", "PAY-OUT"},
		{"workflow_keys", "blocked.wf\u200b"}, {"workflow_keys", "blocked.wf "}, {"workflow_keys", ".wf"},
		{"surfaces", "CRM"}, {"surfaces", "crm\u202e"}, {"surfaces", "work-space"},
	} {
		raw := `{"bundle_id":"b","version":"v1","mode":"SHADOW","rules":[{"id":"r","` + tc.member + `":["ok",` +
			strconv.Quote(tc.value) + `],"outcome":"BLOCK","reason_codes":["X"]}],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
		raw = strings.Replace(raw, `"ok"`, map[string]string{"decision_types": `"OK"`, "workflow_keys": `"ok"`, "surfaces": `"ok"`}[tc.member], 1)
		_, err := Load([]byte(raw))
		var ve *ValidationError
		want := "rules[0]." + tc.member + "[1]"
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Field != want {
			t.Errorf("%s %q: got %v; want one problem on %s", tc.member, tc.value, err, want)
		}
	}
}
