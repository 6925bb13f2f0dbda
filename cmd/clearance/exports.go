package main

import (
	"log/slog"
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
