#!/usr/bin/env bash
# scripts/fuzz.sh DURATION [FILTER] — run every Fuzz target of the module in
# turn for DURATION each (a go test -fuzztime value: 20s, 5m, 1000x), or only
# the targets whose "package Name" matches the extended regexp FILTER. Stops
# at the first crasher and prints where its input was saved. No network
# (GOPROXY=off): the module cache must already hold the dependencies.
#
# The corpus is kept: after each target, the inputs the fuzzer found
# interesting (Go keeps them in $GOCACHE/fuzz) are copied into the
# package's testdata/fuzz/<Name>/, where `go test` replays them as seeds and
# the next run starts from them. Commit them. Set FUZZ_KEEP_CORPUS=0 to skip.
# For a long run at low priority beside other work: nice -n 19 scripts/fuzz.sh 30m
#
# Each new interesting input is minimized for at most FUZZ_MINIMIZE_TIME
# (default 10s; Go's own default is 60s). Large inputs (a whole evidence
# pack) take that long at every find: with 60 s, pack FuzzExportVerify spent
# its minutes minimizing and ran 7 new inputs in 45 s.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
	echo "usage: $0 DURATION [FILTER]   (e.g. 20s, 5m, 10000x; FILTER: a regexp on \"package Name\")" >&2
	exit 2
fi
duration=$1
filter=${2:-}
keep=${FUZZ_KEEP_CORPUS:-1}
cd "$(dirname "$0")/.."
export GOPROXY=off GOFLAGS="${GOFLAGS:-} -mod=readonly"

# "pkg Name" pairs. go test -list prints a package's names, then
# "ok  <pkg> <time>" (or "?  <pkg> [no test files]").
listing=$(go test -list '^Fuzz' ./...)
targets=()
names=()
while read -r first pkg _; do
	case $first in
	Fuzz*) names+=("$first") ;;
	ok)
		for n in ${names[@]+"${names[@]}"}; do targets+=("$pkg $n"); done
		names=()
		;;
	*) names=() ;;
	esac
done <<<"$listing"

if [[ -n $filter ]]; then
	kept=()
	for t in "${targets[@]}"; do
		if [[ $t =~ $filter ]]; then kept+=("$t"); fi
	done
	targets=(${kept[@]+"${kept[@]}"})
fi
if [[ ${#targets[@]} -eq 0 ]]; then
	echo "no Fuzz targets found" >&2
	exit 1
fi
echo "fuzz: ${#targets[@]} targets, $duration each"

module=$(go list -m)
cache=$(go env GOCACHE)/fuzz
summary=()
for t in "${targets[@]}"; do
	pkg=${t% *}
	name=${t#* }
	dir=./${pkg#"$module"}
	dir=${dir/#.\/\//./}
	[[ $dir == "./" ]] && dir=.
	log=$(mktemp)
	start=$SECONDS
	ok=0
	for attempt in 1 2; do
		if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$duration" -fuzzminimizetime "${FUZZ_MINIMIZE_TIME:-10s}" "$dir" >"$log" 2>&1; then
			ok=1
			break
		fi
		# Go's fuzz coordinator sometimes ends a clean run with "context
		# deadline exceeded" and no crasher (a coordinator flake):
		# retry once; anything else is a real failure.
		if grep -q 'testdata/fuzz/' "$log" || ! grep -q 'context deadline exceeded' "$log"; then
			break
		fi
		echo "$dir $name: coordinator deadline flake without a crasher, retrying" >&2
	done
	if [[ $ok == 1 ]]; then
		added=0
		if [[ $keep == 1 && -d $cache/$pkg/$name ]]; then
			mkdir -p "$dir/testdata/fuzz/$name"
			for f in "$cache/$pkg/$name"/*; do
				[[ -e $f ]] || continue
				if [[ ! -e $dir/testdata/fuzz/$name/$(basename "$f") ]]; then
					cp "$f" "$dir/testdata/fuzz/$name/"
					added=$((added + 1))
				fi
			done
		fi
		corpus=0
		if [[ -d $dir/testdata/fuzz/$name ]]; then
			corpus=$(find "$dir/testdata/fuzz/$name" -type f | wc -l)
		fi
		line=$(printf '%-45s %-22s ok    %4ds' "$dir" "$name" $((SECONDS - start)))
		execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 || true)
		summary+=("$line ${execs:-} corpus: $corpus (+$added)")
		echo "$line ${execs:-} corpus: $corpus (+$added)"
		rm -f "$log"
	else
		cat "$log"
		printf '%-45s %-22s FAIL  %4ds\n' "$dir" "$name" $((SECONDS - start))
		crasher=$(grep -o 'testdata/fuzz/[^ ]*' "$log" | head -1 || true)
		if [[ -n $crasher ]]; then
			echo "crasher: $dir/$crasher"
			echo "reproduce: go test -run '^${name}\$/$(basename "$crasher")\$' $dir"
		else
			echo "no crasher file written (build or seed failure); log above"
		fi
		rm -f "$log"
		exit 1
	fi
done

echo
echo "summary: ${#summary[@]} targets, $duration each, 0 crashers"
printf '%s\n' "${summary[@]}"
