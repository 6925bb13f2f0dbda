# scripts/lib.sh — helpers the load scripts share; source it.

# free_port prints a 127.0.0.1 port nobody listens on (racy, but the
# server's own bind failure is then reported). It stays below Linux's
# default ephemeral range (32768 and up), where a load tool's own
# connections could take the port before the server binds it.
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "no free port found" >&2
	return 1
}

# wait_up URL PID LOG: until URL answers 2xx, while PID lives (60s).
wait_up() {
	for _ in $(seq 300); do
		if ! kill -0 "$2" 2>/dev/null; then
			echo "server exited:" >&2
			cat "$3" >&2
			return 1
		fi
		curl -sf -o /dev/null "$1" && return 0
		sleep 0.2
	done
	echo "$1 did not come up within 60s" >&2
	return 1
}

# clearance_bin WORKDIR prints the clearance binary to run: $CLEARANCE_BIN,
# or one built from this tree into WORKDIR.
clearance_bin() {
	if [[ -n ${CLEARANCE_BIN:-} ]]; then
		echo "$CLEARANCE_BIN"
		return
	fi
	echo "building clearance ..." >&2
	go build -o "$1/clearance" ./cmd/clearance
	echo "$1/clearance"
}
