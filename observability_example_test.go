package clearance_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// An embedder traces the engine with a tracer provider of its own (here
// one recording in memory; in production an OTLP exporter's) and watches
// the store's commits, e.g. for its metrics.
func ExampleEngine_ObserveStoreCommits() {
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	check(err)
	defer backend.Close()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	engine, err := clearance.Open(backend, clearance.Options{TracerProvider: tp})
	check(err)
	var commits, updates atomic.Int64
	engine.ObserveStoreCommits(func(_ context.Context, c store.Commit) {
		updates.Add(1)
		if c.Lead { // count each commit once, whatever its batch
			commits.Add(1)
		}
	})

	_, err = engine.Admin.CreateOrg(context.Background(), "Acme")
	check(err)
	fmt.Println("commits:", commits.Load(), "updates:", updates.Load())
	for _, s := range spans.Ended() {
		fmt.Println(s.Name())
	}
	// Output:
	// commits: 1 updates: 1
	// clearance.store.commit
}

// A scrape reads the job queues with a bounded count, and how long the
// oldest ledger entry has waited for a signed checkpoint.
func ExampleEngine_QueueDepth() {
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	check(err)
	defer backend.Close()
	engine, err := clearance.Open(backend, clearance.Options{})
	check(err)
	ctx := context.Background()
	for _, queue := range clearance.JobQueues() {
		n, err := engine.QueueDepth(ctx, queue, clearance.MaxQueueDepth)
		check(err)
		fmt.Println(queue, n)
	}
	_, err = engine.Admin.CreateOrg(ctx, "Acme") // its ledger grows; nothing seals it here
	check(err)
	_, waiting := engine.OldestUnsealed()
	fmt.Println("an entry waits for a checkpoint:", waiting)
	// Output:
	// outbox 0
	// webhook.delivery 0
	// export 0
	// policy.replay 0
	// policy.source.pull 0
	// an entry waits for a checkpoint: true
}
