package main

import (
	"context"
	"log/slog"

	"github.com/clearancehq/clearance"
)

// exportSecretFile is where serve keeps the validation-pack secret inside
// the data dir.
const exportSecretFile = "export.secret"

// loadExportSecret returns the secret that keys the HMAC of validation
// packs: the operator's file (which must exist), or the one in the data
// dir, created on first start (0600, 32 random bytes as base64url). Servers
// sharing one database must share it (shared: warn when the data dir's is
// used).
func loadExportSecret(log *slog.Logger, dataDir, file string, shared bool) ([]byte, error) {
	if file == "" && shared {
		log.Warn("several servers on one database must share the validation-pack secret: pass the same --export-secret-file to each, or packs built by one carry signatures the others' secret does not verify")
	}
	return loadOrCreateSecret(log, dataDir, exportSecretFile, file, "validation-pack secret")
}

// startExportWorker runs the engine's validation-pack worker until the
// returned stop is called; stop hands a build in progress back (PENDING)
// and returns once the worker has.
func startExportWorker(ctx context.Context, engine *clearance.Engine) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); engine.RunExports(ctx, clearance.ExportWorkerOptions{}) }()
	return func() { cancel(); <-done }
}
