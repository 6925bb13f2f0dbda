package policy

import (
	"sync"
	"testing"
)

// TestCelEnvConcurrentChecks compiles, at once on one fresh environment, an
// expression with an undeclared name (the checker looks up its catalog)
// and one with a comprehension (the checker copies its scope). Under -race
// this fails if the environment is shared before the catalog is filled.
func TestCelEnvConcurrentChecks(t *testing.T) {
	for range 20 {
		env, err := newCelEnv()
		if err != nil {
			t.Fatal(err)
		}
		exprs := []string{
			"intent.amount > 1 && undeclared_name.x > 1",
			"intent.context.tags.exists(t, t == 'x')",
			"nope > 1",
			"[1, 2].all(x, x > 0)",
		}
		var wg sync.WaitGroup
		for _, e := range exprs {
			wg.Go(func() { env.Compile(e) })
		}
		wg.Wait()
	}
}
