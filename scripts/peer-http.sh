#!/usr/bin/env bash
# scripts/peer-http.sh [DURATION [CLIENTS...]] — the HTTP comparison against
# OPA, in one command, on loopback only.
#
# Builds `clearance` and an OPA server from the OPA Go module pinned in
# bench/peers/go.mod, starts on free 127.0.0.1 ports
#   - OPA: `opa run --server` holding bench/peers/starter.rego (no evidence),
#   - Clearance: `clearance serve` on a temporary data dir (embedded Pebble,
#     default durable settings: dossier + ledger entry fsync'd per decision;
#     rate limit off),
# then, for each client count (default 32 and 64), runs the same load tool,
# `clearance loadtest --scenario evaluate`, for DURATION (default 20s, after
# a 2s warmup) against OPA (--peer opa) and then Clearance (a fresh org on
# the starter policy: the same decisions). Prints one line per run, the
# Clearance/OPA ratios, and each server's CPU time per decision; keeps the
# JSON documents in $OUT (default: a new temporary directory, printed).
# Servers and data dirs are removed on exit. Needs curl; Linux for the CPU
# column. Server and load tool share the machine's CPUs: compare ratios.
set -euo pipefail

duration=${1:-20s}
shift || true
clients=("$@")
[[ ${#clients[@]} -gt 0 ]] || clients=(32 64)
warmup=${WARMUP:-2s}

cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d -t peer-http.XXXXXX)
out=${OUT:-$(mktemp -d -t peer-http-results.XXXXXX)}
mkdir -p "$out"
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

echo "building clearance and opa (bench/peers' pinned module) ..." >&2
go build -o "$work/clearance" ./cmd/clearance
(cd bench/peers && go build -o "$work/opa" github.com/open-policy-agent/opa)

# shellcheck source=lib.sh
source "$root/scripts/lib.sh"

opa_port=$(free_port)
"$work/opa" run --server --addr "127.0.0.1:$opa_port" --log-level error "$root/bench/peers/starter.rego" >"$work/opa.log" 2>&1 &
opa_pid=$!
pids+=("$opa_pid")
cl_port=$(free_port)
"$work/clearance" serve --data "$work/data" --addr "127.0.0.1:$cl_port" --rate-limit -1 >"$work/clearance.log" 2>&1 &
cl_pid=$!
pids+=("$cl_pid")
wait_up "http://127.0.0.1:$opa_port/health" "$opa_pid" "$work/opa.log"
wait_up "http://127.0.0.1:$cl_port/v1/health" "$cl_pid" "$work/clearance.log"
platform_key=$(cat "$work/data/platform.key")

# cpu_ticks PID: user + system clock ticks of PID so far (0 without /proc).
cpu_ticks() {
	if [[ -r /proc/$1/stat ]]; then
		# Fields after the ")" that ends the command name: utime is the 12th, stime the 13th.
		sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
	else
		echo 0
	fi
}
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)

# field FILE NAME: the first "NAME": number in a load tool JSON document
# (for latencies, the first is the overall one).
field() { awk -v k="\"$2\":" '$1 == k { gsub(/[^0-9.]/, "", $2); print $2; exit }' "$1"; }

status=0
declare -A ops
printf '%-7s %-9s %10s %8s %8s %9s %7s %6s %12s\n' clients server ops/s p50_ms p99_ms p99.9_ms errors pass cpu_us/op
for n in "${clients[@]}"; do
	for server in opa clearance; do
		file="$out/$server-c$n.json"
		if [[ $server == opa ]]; then
			pid=$opa_pid
			args=(--peer opa --target "http://127.0.0.1:$opa_port")
		else
			pid=$cl_pid
			args=(--target "http://127.0.0.1:$cl_port" --platform-key "$platform_key")
		fi
		before=$(cpu_ticks "$pid")
		rc=0
		"$work/clearance" loadtest "${args[@]}" --scenario evaluate --concurrency "$n" \
			--duration "$duration" --warmup "$warmup" --quiet --json >"$file" || rc=$?
		after=$(cpu_ticks "$pid")
		if [[ ! -s $file ]]; then
			echo "$server at $n clients: the load tool failed (exit $rc)" >&2
			status=1
			continue
		fi
		[[ $rc -eq 0 ]] || status=1
		o=$(field "$file" ops_per_second)
		ops[$server-$n]=$o
		# Server CPU per decision, approximate: the ticks cover the warmup
		# too, so divide by ops/s × (measured + warmup seconds).
		awk -v srv="$server" -v n="$n" -v o="$o" -v p50="$(field "$file" p50_us)" -v p99="$(field "$file" p99_us)" \
			-v p999="$(field "$file" p999_us)" -v e="$(awk '$1 == "\"total\":" { gsub(/[^0-9]/, "", $2); print $2; exit }' "$file")" \
			-v pass="$(awk '$1 == "\"pass\":" { gsub(/[^a-z]/, "", $2); print $2; exit }' "$file")" \
			-v ticks=$((after - before)) -v hz="$hz" -v el="$(field "$file" elapsed_seconds)" -v wu="$(field "$file" warmup_seconds)" 'BEGIN {
				total = o * (el + wu)
				cpu = (ticks > 0 && total > 0) ? sprintf("%.0f", ticks / hz * 1e6 / total) : "-"
				printf "%-7s %-9s %10.1f %8.2f %8.2f %9.2f %7d %6s %12s\n", n, srv, o, p50 / 1000, p99 / 1000, p999 / 1000, e, pass, cpu
			}'
	done
done
echo
for n in "${clients[@]}"; do
	if [[ -n ${ops[opa-$n]:-} && -n ${ops[clearance-$n]:-} ]]; then
		awk -v n="$n" -v c="${ops[clearance-$n]}" -v o="${ops[opa-$n]}" \
			'BEGIN { printf "%d clients: Clearance/OPA throughput %.2f\n", n, (o > 0 ? c / o : 0) }'
	fi
done
echo "JSON documents: $out"
exit $status
