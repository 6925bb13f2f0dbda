#!/usr/bin/env bash
# Installs the TypeScript SDK's locked dependencies, builds it and runs its
# tests against a real `clearance serve`: CLEARANCE_BIN, or a binary built
# once here from the repository (the tests would otherwise build it per file).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
if [[ -z "${CLEARANCE_BIN:-}" ]]; then
	bin_dir=$(mktemp -d)
	trap 'rm -rf "$bin_dir"' EXIT
	(cd ../.. && go build -o "$bin_dir/clearance" ./cmd/clearance)
	export CLEARANCE_BIN="$bin_dir/clearance"
fi
npm ci --no-audit --no-fund
npm test
