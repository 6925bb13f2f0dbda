package spend

import (
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/policy"
)

func TestTransitions(t *testing.T) {
	cases := []struct {
		from string
		to   claim.State
		want string
	}{
		{Reserved, claim.StateCommitted, Committed},
		{Reserved, claim.StateFailed, Released},
		{Reserved, claim.StateIndeterminate, Held},
		{Held, claim.StateCommitted, Committed},
		{Held, claim.StateFailed, Released},
		// Settled already: nothing moves, whatever is recorded again.
		{Held, claim.StateIndeterminate, ""},
		{Committed, claim.StateCommitted, ""},
		{Committed, claim.StateFailed, ""},
		{Released, claim.StateCommitted, ""},
		{Reserved, claim.StateClaimed, ""},
	}
	for _, c := range cases {
		if got := transition(c.from, c.to); got != c.want {
			t.Errorf("%s --%s--> %q, want %q", c.from, c.to, got, c.want)
		}
	}
}

func TestUsageIDsKeepPartitionsApart(t *testing.T) {
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	s := &Service{}
	ref := func(actor string) string { return s.partitionRef("org", actor) }
	id := func(gate, ref string, start time.Time) string {
		return usageID(gate, policy.WindowDay, "EUR", ref, start)
	}
	ids := map[string]bool{}
	for _, id := range []string{
		id("g", "", day), id("g", ref("agent-7"), day), id("g", ref("agent-8"), day),
		id("g", "", day.AddDate(0, 0, 1)), id("h", "", day), id("g", ref("-"), day),
		id("g", s.partitionRef("other-org", "agent-7"), day),
		usageID("g", policy.WindowHour, "EUR", "", day), usageID("g", policy.WindowDay, "USD", "", day),
	} {
		if ids[id] {
			t.Fatalf("usage id %q names two budgets", id)
		}
		ids[id] = true
	}
	if r := ref("agent-7"); len(r) != 32 || strings.Contains(r, "agent") {
		t.Fatalf("partition ref %q", r)
	}
}
