package lincheck

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/clearancehq/clearance/claim"
)

// memSys is an in-memory lifecycle behind one mutex. It honours cancelled
// contexts the way a real server may: a call cancelled before it starts
// does nothing, one cancelled while it runs may have taken effect, and
// either way its answer is lost. claimsAllowed > 1 makes it deliberately
// wrong: a grant may then be claimed that many times.
type memSys struct {
	claimsAllowed int
	mu            sync.Mutex
	seq           atomic.Int64
	grants        map[string]*memGrant
}

type memGrant struct {
	state  claim.State
	claims int
	tokens map[string]bool
}

func newMemSys(claimsAllowed int) *memSys {
	return &memSys{claimsAllowed: claimsAllowed, grants: map[string]*memGrant{}}
}

func (m *memSys) issue(_ testing.TB, n int) []grantRef {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]grantRef, n)
	for i := range out {
		id := fmt.Sprintf("grant-%d", m.seq.Add(1))
		m.grants[id] = &memGrant{state: claim.StateIssued, tokens: map[string]bool{}}
		out[i] = grantRef{ID: id}
	}
	return out
}

// apply runs fn under the lock unless ctx is already done, and answers
// unknown when ctx is done afterwards (the answer was lost).
func (m *memSys) apply(ctx context.Context, fn func() result) result {
	if ctx.Err() != nil {
		return result{Answer: answerUnknown}
	}
	time.Sleep(time.Duration(m.seq.Add(1)%3) * 50 * time.Microsecond) // widen the window for cancellation
	m.mu.Lock()
	res := fn()
	m.mu.Unlock()
	if ctx.Err() != nil {
		return result{Answer: answerUnknown}
	}
	return res
}

func (m *memSys) claim(ctx context.Context, g grantRef) result {
	return m.apply(ctx, func() result {
		mg := m.grants[g.ID]
		if mg.claims >= m.claimsAllowed || (mg.state != claim.StateIssued && mg.state != claim.StateClaimed) {
			return result{Answer: answerRefused}
		}
		mg.claims++
		tok := "clr_claim_" + randHex(16)
		mg.state, mg.tokens[tok] = claim.StateClaimed, true
		return result{Answer: answerOK, Token: tok}
	})
}

func (m *memSys) finalize(ctx context.Context, g grantRef, token string, outcome claim.Outcome) result {
	return m.apply(ctx, func() result {
		mg := m.grants[g.ID]
		if mg.state != claim.StateClaimed || !mg.tokens[token] {
			return result{Answer: answerRefused}
		}
		mg.state = claim.State(outcome)
		return result{Answer: answerOK}
	})
}

// TestLinMemory records and checks histories against a correct in-memory
// lifecycle, with cancellations: the harness and the model agree.
func TestLinMemory(t *testing.T) {
	cfg := defaultConfig(t)
	cfg.cancelP, cfg.cancelMax = 0.3, 150*time.Microsecond
	s := runLin(t, newMemSys(1), cfg)
	if s.claimsOK == 0 || s.finalizesOK == 0 {
		t.Errorf("a degenerate recording: %s", s)
	}
}

// TestLinCatchesDoubleClaim shows that the checker catches a broken store:
// a lifecycle that lets a grant be claimed twice is not linearizable, and
// the failing history is saved with its visualization.
func TestLinCatchesDoubleClaim(t *testing.T) {
	cfg := defaultConfig(t)
	cfg.cancelP = 0 // every answer known: each grant is claimed twice
	ops, s := record(t, newMemSys(2), cfg, seedOf(t), 0)
	if s.claimsOK <= s.grants { // no grant was claimed twice
		t.Fatalf("the broken store was not exercised: %s", s)
	}
	res, paths := check(t, grantModel, "double-claim", ops)
	if res != porcupine.Illegal {
		t.Fatalf("a history with %d successful claims of %d grants checked %s, want Illegal", s.claimsOK, s.grants, res)
	}
	if len(paths) == 0 {
		t.Fatal("no visualization written")
	}
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("visualization %s: %v", p, err)
		}
	}
	t.Logf("caught: %d operations, %d successful claims of %d grants → %s", s.ops, s.claimsOK, s.grants, res)
}
