#!/usr/bin/env bash
# scripts/soak.sh [DURATION [INTERVAL [FLAGS...]]] — the soak: `clearance
# serve` under a steady mixed load for DURATION (default 1h), sampled every
# INTERVAL (default 1m), judged for leaks, in one command, on loopback only.
#
# Builds `clearance` (or uses $CLEARANCE_BIN) and the harness of bench/soak
# (its own module), then runs it: a fresh server on a temporary data dir
# (embedded Pebble; STORE=postgres://… for a scratch PostgreSQL database or
# schema instead), `clearance loadtest --scenario mixed` at RATE operations
# per second (default 200) plus the harness's rounds of exports, ledger
# checkpoints, proof packets, share links, console reads, dry runs and
# callbacks. Every INTERVAL it records the server's RSS, Go heap in use,
# goroutines, open file descriptors, requests, 5xx and p50/p99 latency.
# Writes soak.csv, soak.png and verdict.txt to $OUT (default: a new
# temporary directory) and prints where they are. Further FLAGS go to the
# harness (go run ./cmd/soak -h in bench/soak lists them). Exits 0 when the
# run was flat with no errors, 1 when not, 2 when it could not run.
# Linux only (/proc). The data dir is removed at the end.
set -euo pipefail

duration=${1:-1h}
interval=${2:-1m}
shift 2 || shift $#

cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d -t soak.XXXXXX)
out=${OUT:-$(mktemp -d -t soak-results.XXXXXX)}
mkdir -p "$out"
trap 'rm -rf "$work"' EXIT

# shellcheck source=lib.sh
source "$root/scripts/lib.sh"
bin=$(clearance_bin "$work")
echo "building the soak harness (bench/soak) ..." >&2
(cd bench/soak && go build -o "$work/soak" ./cmd/soak)

args=(-bin "$bin" -duration "$duration" -interval "$interval" -out "$out" -rate "${RATE:-200}")
[[ -n ${STORE:-} ]] && args+=(-store "$STORE")
echo "soak: $duration, a sample every $interval, results in $out" >&2
rc=0
"$work/soak" "${args[@]}" "$@" || rc=$?
if [[ -f $out/soak.csv ]]; then
	echo
	echo "results in $out: soak.csv, soak.png, verdict.txt (exit $rc)"
fi
exit "$rc"
