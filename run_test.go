package clearance_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/export"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// Run starts every worker and returns once they have stopped: a pack queued
// before Run is built by the worker it started, and the build it finished is
// recorded even though ctx ends right after.
func TestRunBuildsQueuedPacksAndStops(t *testing.T) {
	b, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	k, err := ledger.NewKey("clearance-test-ledger", bytes.Repeat([]byte{0x4c}, 32))
	if err != nil {
		t.Fatal(err)
	}
	built := make(chan struct{}, 1)
	e, err := clearance.Open(b, clearance.Options{LedgerKey: k, ExportSecret: []byte("export secret"),
		ExportWorker: export.WorkerOptions{Hook: func(s export.Stage) {
			if s.Stage == "built" {
				select {
				case built <- struct{}{}:
				default:
				}
			}
		}}})
	if err != nil {
		t.Fatal(err)
	}
	o := newOrg(t, e)
	ctx := context.Background()
	x, _, err := e.Exports.Create(ctx, export.Request{OrgID: o.Org.ID, Format: "json", IncludeEvents: true})
	if err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.Run(runCtx) }()
	<-built
	stop()
	<-done

	got, err := e.Exports.Get(ctx, o.Org.ID, x.ExportID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != export.Succeeded || got.LedgerSize == 0 {
		t.Fatalf("after Run: %s, ledger size %d (%s)", got.Status, got.LedgerSize, got.LastError)
	}
}
