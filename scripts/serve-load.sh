#!/usr/bin/env bash
# scripts/serve-load.sh [DURATION [CLIENTS [ORGS...]]] — `clearance serve`
# on the embedded default (Pebble, fsync'd) under the load tool, in one
# command, on loopback only.
#
# For each ORGS value (default 1 and 64), starts a fresh `clearance serve`
# (its own temporary data dir, rate limit off; `clearance` built here, or
# $CLEARANCE_BIN), runs `clearance loadtest --scenario $SCENARIO` (default
# evaluate; cycle for enforce-and-bind → claim → finalize) with CLIENTS
# workers (default 64) for DURATION (default 12s, after a 2s warmup) spread
# over that many fresh orgs, and stops the server. Prints ops/s, p99, the
# server's CPU time per operation and its peak resident memory. Server and
# load tool share the machine's CPUs. Needs curl; Linux for the CPU and
# memory columns.
set -euo pipefail

duration=${1:-12s}
clients=${2:-64}
shift 2 || shift $#
orgs=("$@")
[[ ${#orgs[@]} -gt 0 ]] || orgs=(1 64)
warmup=${WARMUP:-2s}
scenario=${SCENARIO:-evaluate}

cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d -t serve-load.XXXXXX)
pids=()
cleanup() {
	for p in ${pids[@]+"${pids[@]}"}; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=lib.sh
source "$root/scripts/lib.sh"
bin=$(clearance_bin "$work")


ticks() { [[ -r /proc/$1/stat ]] && sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}' || echo 0; }
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
field() { awk -v k="\"$2\":" '$1 == k { gsub(/[^0-9.]/, "", $2); print $2; exit }' "$1"; }

status=0
printf '%-9s %-5s %-7s %10s %8s %12s %9s\n' scenario orgs clients ops/s p99_ms cpu_us/op rss_mb
for n in "${orgs[@]}"; do
	port=$(free_port)
	data=$work/data-$n
	"$bin" serve --data "$data" --addr "127.0.0.1:$port" --rate-limit -1 >"$work/server-$n.log" 2>&1 &
	pid=$!
	pids+=("$pid")
	wait_up "http://127.0.0.1:$port/v1/health" "$pid" "$work/server-$n.log"
	before=$(ticks "$pid")
	out=$work/run-$n.json
	"$bin" loadtest --target "http://127.0.0.1:$port" --platform-key "$(cat "$data/platform.key")" --orgs "$n" \
		--scenario "$scenario" --concurrency "$clients" --duration "$duration" --warmup "$warmup" --quiet --json >"$out" || status=1
	after=$(ticks "$pid")
	rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	[[ -s $out ]] || { echo "the load tool failed" >&2; status=1; continue; }
	awk -v s="$scenario" -v n="$n" -v c="$clients" -v o="$(field "$out" ops_per_second)" -v p99="$(field "$out" p99_us)" \
		-v t=$((after - before)) -v hz="$hz" -v el="$(field "$out" elapsed_seconds)" -v wu="$(field "$out" warmup_seconds)" -v rss="$rss" 'BEGIN {
			printf "%-9s %-5s %-7s %10.1f %8.2f %12.0f %9.0f\n", s, n, c, o, p99 / 1000, t / hz * 1e6 / (o * (el + wu)), rss / 1024
		}'
done
exit "$status"
