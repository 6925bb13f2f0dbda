package policy

import (
	"errors"
	"fmt"
	"testing"
	"time"
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
		var i Intent
		set(&i, "remboursé\u00a0返金")
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
