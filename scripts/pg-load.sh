#!/usr/bin/env bash
# scripts/pg-load.sh [DURATION [CLIENTS [ORGS...]]] — Clearance on PostgreSQL
# under the load tool, in one command, on loopback only.
#
# Creates a fresh database on the PostgreSQL server of $PG_URL (default
# postgres://postgres@127.0.0.1:5432/test: the database named there is only
# used to create and drop the fresh one), builds `clearance` (or uses
# $CLEARANCE_BIN), makes shared key files, and starts $SERVERS servers
# (default 1) on it, each `clearance serve --store …` with its own data dir
# and rate limit off. Then, for each ORGS value (default 1 and 16), runs
# `clearance loadtest --scenario evaluate` with CLIENTS workers (default 64)
# for DURATION (default 12s, after a 2s warmup) spread over that many fresh
# orgs. With SERVERS=2, one load tool per server runs at the same time
# (CLIENTS/2 workers each, each on orgs of its own) and the line is their
# sum; a last line has both tools on ONE org, whose lock they share.
# Prints ops/s, p99 and the CPU seconds per decision of the servers and of
# PostgreSQL. Servers and the database are removed on exit. Needs psql and
# curl; Linux for the CPU columns.
set -euo pipefail

duration=${1:-12s}
clients=${2:-64}
shift 2 || shift $# || true
orgs=("$@")
[[ ${#orgs[@]} -gt 0 ]] || orgs=(1 16)
servers=${SERVERS:-1}
warmup=${WARMUP:-2s}
pg_url=${PG_URL:-postgres://postgres@127.0.0.1:5432/test}

cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d -t pg-load.XXXXXX)
db="clearance_load_$$_$RANDOM"
pids=()
cleanup() {
	for p in ${pids[@]+"${pids[@]}"}; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	psql -q "$pg_url" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=lib.sh
source "$root/scripts/lib.sh"
bin=$(clearance_bin "$work")
psql -q "$pg_url" -c "CREATE DATABASE $db" >/dev/null
store_url="${pg_url%/*}/$db"
"$bin" keys init --grant-key-file "$work/grant.json" --ledger-key-file "$work/ledger.json" >/dev/null
head -c 48 /dev/urandom | base64 | tr -d '\n' >"$work/share.secret"
head -c 48 /dev/urandom | base64 | tr -d '\n' >"$work/export.secret"
chmod 600 "$work/share.secret" "$work/export.secret"


urls=()
server_pids=()
for i in $(seq "$servers"); do
	port=$(free_port)
	"$bin" serve --store "$store_url" --data "$work/data$i" --addr "127.0.0.1:$port" --rate-limit -1 \
		--grant-key-file "$work/grant.json" --ledger-key-file "$work/ledger.json" \
		--share-secret-file "$work/share.secret" --export-secret-file "$work/export.secret" >"$work/server$i.log" 2>&1 &
	pids+=("$!")
	server_pids+=("$!")
	wait_up "http://127.0.0.1:$port/v1/health" "$!" "$work/server$i.log"
	urls+=("http://127.0.0.1:$port")
done
platform_key=$(cat "$work/data1/platform.key")

cpu_ticks() { # user + system ticks of the given PIDs (0 without /proc)
	local t=0 p
	for p in "$@"; do
		[[ -r /proc/$p/stat ]] && t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
	done
	echo "$t"
}
pg_ticks() { # every PostgreSQL process, ended backends included (the postmaster's cutime)
	local t=0 p
	for p in $(pgrep -u postgres 2>/dev/null); do
		[[ -r /proc/$p/stat ]] && t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13 + $14 + $15}')))
	done
	echo "$t"
}
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
field() { awk -v k="\"$2\":" '$1 == k { gsub(/[^0-9.]/, "", $2); print $2; exit }' "$1"; }

# run_load LABEL ORGS TOOLARGS...: one load tool per server at once (the
# workers split between them), each given TOOLARGS; prints one line.
run_load() {
	local label=$1 n=$2
	shift 2
	local per=$((clients / servers)) i before after pg_before pg_after
	before=$(cpu_ticks "${server_pids[@]}")
	pg_before=$(pg_ticks)
	local runs=()
	for i in $(seq "$servers"); do
		"$bin" loadtest --target "${urls[$((i - 1))]}" "$@" --scenario evaluate --concurrency "$per" \
			--duration "$duration" --warmup "$warmup" --quiet --json >"$work/run$i.json" &
		runs+=("$!")
	done
	for r in "${runs[@]}"; do
		wait "$r" || status=1
	done
	after=$(cpu_ticks "${server_pids[@]}")
	pg_after=$(pg_ticks)
	local total=0 p99=0 el=0 wu=0 f
	for i in $(seq "$servers"); do
		f=$work/run$i.json
		[[ -s $f ]] || { echo "a load tool failed" >&2; status=1; continue; }
		total=$(awk -v a="$total" -v b="$(field "$f" ops_per_second)" 'BEGIN { print a + b }')
		p99=$(awk -v a="$p99" -v b="$(field "$f" p99_us)" 'BEGIN { print (b > a) ? b : a }')
		el=$(field "$f" elapsed_seconds)
		wu=$(field "$f" warmup_seconds)
	done
	awk -v s="$servers" -v l="$label" -v n="$n" -v c="$clients" -v o="$total" -v p99="$p99" -v st=$((after - before)) \
		-v pt=$((pg_after - pg_before)) -v hz="$hz" -v el="$el" -v wu="$wu" 'BEGIN {
			ops = o * (el + wu)
			printf "%-8s %-7s %-5s %-7s %10.1f %8.2f %14.0f %14.0f\n", s, l, n, c, o, p99 / 1000, st / hz * 1e6 / ops, pt / hz * 1e6 / ops
		}'
}

status=0
printf '%-8s %-7s %-5s %-7s %10s %8s %14s %14s\n' servers orgs_of orgs clients ops/s p99_ms server_cpu_us pg_cpu_us
for n in "${orgs[@]}"; do
	# Each load tool creates its own n orgs (with two servers: 2n in all).
	run_load "own" "$n" --platform-key "$platform_key" --orgs "$n"
done
if [[ $servers -gt 1 ]]; then
	# One org that every server writes: its row lock is shared across them.
	key=$(curl -sf -X POST "${urls[0]}/v1/platform/orgs" -H "Authorization: Bearer $platform_key" \
		-H 'Content-Type: application/json' -d '{"name":"shared"}' | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p')
	[[ -n $key ]] || { echo "could not create the shared org" >&2; exit 1; }
	run_load "shared" 1 --key "$key"
fi
exit "$status"
