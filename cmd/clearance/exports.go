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

// secretsKeyFile is where serve keeps the secrets key inside the data dir.
const secretsKeyFile = "secrets.key"

// loadSecretsKey returns the key that seals callback and connector secrets
// at rest (DESIGN §10): the operator's file, or the one in the data dir,
// created on first start. Servers sharing a database must share it, or a
// secret sealed by one does not open on another.
func loadSecretsKey(log *slog.Logger, dataDir, file string, shared bool) ([]byte, error) {
	if file == "" && shared {
		log.Warn("several servers on one database must share the secrets key: pass the same --secrets-key-file to each, or callback and connector secrets stored by one cannot be used by the others")
	}
	return loadOrCreateSecret(log, dataDir, secretsKeyFile, file, "secrets key")
}
