#!/usr/bin/env bash
# scripts/pg-failover-clusters.sh COMMAND — a PostgreSQL primary and a
# synchronous hot standby on this machine, made with Debian's
# postgresql-common tools, for the failover test
# (cmd/clearance/failover_test.go) and for trying a promotion by hand.
#
#   up            make the pair, unless it is there as made: a pair that is
#                 not (after a promotion, or a rejoin that swapped the roles)
#                 is dropped and made again, so the test can run any number
#                 of times
#   down          stop and drop both clusters
#   reset         down, then up
#   status        each cluster's port, role and replication; exits 0 only
#                 for a healthy pair (a primary and its synchronous standby)
#   fail NAME     stop cluster NAME in immediate mode: no shutdown
#                 checkpoint, every connection cut (what a crash looks like
#                 to clients)
#   promote NAME  promote the standby NAME (pg_ctlcluster promote waits for it)
#   rejoin        rebuild the stopped cluster as the synchronous standby of
#                 the running primary (pg_basebackup from it): the failed
#                 primary never comes back with its own history
#
# The clusters are clr_primary (port $CLEARANCE_PG_PRIMARY_PORT, default
# 5433) and clr_standby ($CLEARANCE_PG_STANDBY_PORT, default 5434) of the
# newest installed PostgreSQL ($PG_VERSION to choose), listening on
# 127.0.0.1 only with trust authentication there, with a database `test`.
# The standby streams from a replication slot named after it and is made by
# `pg_basebackup -R`; the primary names it in synchronous_standby_names with
# synchronous_commit = on, so a COMMIT is acknowledged only once the
# standby has flushed it to disk, and a promotion replays all of it. The
# standby carries no synchronous_standby_names: once promoted it commits
# alone (no standby left to wait for) instead of blocking every write.
# Other clusters (such as `main` on 5432) are never touched. Needs root (or
# passwordless sudo): the tools run as root or, where they must, as postgres.
set -euo pipefail

primary=clr_primary
standby=clr_standby
primary_port=${CLEARANCE_PG_PRIMARY_PORT:-5433}
standby_port=${CLEARANCE_PG_STANDBY_PORT:-5434}

die() {
	echo "pg-failover-clusters: $*" >&2
	exit 1
}

usage() {
	sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

[[ $# -ge 1 ]] || usage

for tool in pg_createcluster pg_ctlcluster pg_dropcluster pg_lsclusters pg_basebackup pg_isready psql; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool not found: install postgresql (Debian's postgresql-common tools)"
done

if [[ $(id -u) -ne 0 ]]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		exec sudo -n env PG_VERSION="${PG_VERSION:-}" CLEARANCE_PG_PRIMARY_PORT="$primary_port" \
			CLEARANCE_PG_STANDBY_PORT="$standby_port" "$0" "$@"
	fi
	die "needs root (or passwordless sudo) to create and drop clusters"
fi

version=${PG_VERSION:-}
if [[ -z $version ]]; then
	version=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n1)
	[[ -n $version ]] || die "no PostgreSQL server under /usr/lib/postgresql"
fi

as_postgres() { runuser -u postgres -- "$@"; }

# sql PORT QUERY: one value, unaligned, from the postgres database. Trust
# on 127.0.0.1 lets any OS user connect as postgres.
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d postgres -c "$2"; }

port_of() { [[ $1 == "$primary" ]] && echo "$primary_port" || echo "$standby_port"; }
other_of() { [[ $1 == "$primary" ]] && echo "$standby" || echo "$primary"; }

# cluster_field NAME COLUMN: a column of pg_lsclusters for NAME (3 port,
# 4 status, 6 data directory); empty when the cluster does not exist.
cluster_field() { pg_lsclusters -h 2>/dev/null | awk -v v="$version" -v n="$1" -v c="$2" '$1 == v && $2 == n { print $c }'; }
exists() { [[ -n $(cluster_field "$1" 2) ]]; }
online() { [[ $(cluster_field "$1" 4) == online* ]]; }

# role NAME: primary, standby or down (as the server itself reports it).
role() {
	local r
	if ! online "$1" || ! r=$(sql "$(port_of "$1")" "SELECT pg_is_in_recovery()" 2>/dev/null); then
		echo down
	elif [[ $r == t ]]; then
		echo standby
	else
		echo primary
	fi
}

# await DESCRIPTION SECONDS COMMAND...: until COMMAND succeeds (polled).
await() {
	local what=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "timed out after ${secs}s waiting for $what"
		sleep 0.1
	done
}

ready() { pg_isready -q -h 127.0.0.1 -p "$1"; }

# replication PRIMARY_PORT STANDBY_NAME: "state sync_state" of the standby's
# walsender on the primary.
replication() { sql "$1" "SELECT state || ' ' || sync_state FROM pg_stat_replication WHERE application_name = '$2'"; }
streaming() { [[ $(replication "$1" "$2") == streaming* ]]; }
synchronous() { [[ $(replication "$1" "$2") == "streaming sync" ]]; }

# configure NAME PORT: the settings both clusters share. Either may be
# promoted, so both are configured as primaries; which is the standby is
# decided by standby.signal (pg_basebackup -R).
configure() {
	local dir=/etc/postgresql/$version/$1
	cat >"$dir/pg_hba.conf" <<-'EOF'
		# Written by scripts/pg-failover-clusters.sh: a local test pair.
		local   all          postgres                 peer
		host    all          all         127.0.0.1/32 trust
		host    replication  all         127.0.0.1/32 trust
	EOF
	mkdir -p "$dir/conf.d"
	cat >"$dir/conf.d/failover.conf" <<-EOF
		# Written by scripts/pg-failover-clusters.sh.
		port = $2
		listen_addresses = '127.0.0.1'
		wal_level = replica
		max_wal_senders = 4
		max_replication_slots = 4
		hot_standby = on
		# A COMMIT waits for the standby's flush (synchronous_standby_names is
		# set on the primary with ALTER SYSTEM; see sync_standby).
		synchronous_commit = on
		# Lets pg_rewind bring a failed primary back as a standby.
		wal_log_hints = on
	EOF
	chown -R postgres:postgres "$dir"
}

# sync_standby PRIMARY STANDBY: the primary waits for STANDBY on every
# commit, once STANDBY streams (set before that, every write would block).
sync_standby() {
	local pport
	pport=$(port_of "$1")
	await "$2 to stream from $1" 60 streaming "$pport" "$2"
	sql "$pport" "ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 ($2)'" >/dev/null
	sql "$pport" "SELECT pg_reload_conf()" >/dev/null
	await "$2 to be the synchronous standby of $1" 60 synchronous "$pport" "$2"
}

# make_standby NAME FROM: NAME's data directory becomes a base backup of
# FROM (pg_basebackup -R: standby.signal and primary_conninfo), streaming
# from a slot named NAME, and NAME starts as a hot standby.
make_standby() {
	local name=$1 from=$2 port fport data
	port=$(port_of "$name")
	fport=$(port_of "$from")
	if ! exists "$name"; then
		pg_createcluster --start-conf=manual -p "$port" "$version" "$name" >/dev/null
	fi
	configure "$name" "$port"
	online "$name" && pg_ctlcluster --skip-systemctl-redirect "$version" "$name" stop -m immediate
	data=$(cluster_field "$name" 6)
	[[ -n $data && $data == /*/"$name" ]] || die "unexpected data directory for $name: '$data'"
	find "$data" -mindepth 1 -delete
	sql "$fport" "SELECT pg_drop_replication_slot('$name') FROM pg_replication_slots WHERE slot_name = '$name'" >/dev/null
	as_postgres pg_basebackup -h 127.0.0.1 -p "$fport" -U postgres -D "$data" -X stream -R -C -S "$name" --checkpoint=fast
	# The copy carries FROM's postgresql.auto.conf: drop its synchronous
	# standby (a promoted NAME must not wait for one), and name the
	# walreceiver after NAME so that the primary's setting matches it.
	sed -i '/^synchronous_standby_names/d' "$data/postgresql.auto.conf"
	echo "primary_conninfo = 'host=127.0.0.1 port=$fport user=postgres application_name=$name'" >>"$data/postgresql.auto.conf"
	pg_ctlcluster --skip-systemctl-redirect "$version" "$name" start
	await "$name to accept connections" 60 ready "$port"
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# healthy: one cluster is the primary and the other its synchronous
# standby, either way round (after a promotion and a rejoin).
healthy() {
	local rp rs
	rp=$(role "$primary")
	rs=$(role "$standby")
	if [[ $rp == primary && $rs == standby ]]; then
		synchronous "$primary_port" "$standby"
	elif [[ $rs == primary && $rp == standby ]]; then
		synchronous "$standby_port" "$primary"
	else
		return 1
	fi
}

# as_made: healthy, and clr_primary is the primary.
as_made() { healthy && [[ $(role "$primary") == primary ]]; }

cmd_down() {
	local name
	for name in "$primary" "$standby"; do
		if exists "$name"; then
			pg_dropcluster --stop "$version" "$name"
			echo "dropped $name"
		fi
	done
}

cmd_up() {
	if as_made; then
		echo "pair up: $primary (primary, port $primary_port), $standby (synchronous standby, port $standby_port)"
		return
	fi
	cmd_down
	local port
	for port in "$primary_port" "$standby_port"; do
		! port_taken "$port" || die "port $port is taken by another server"
	done
	pg_createcluster --start-conf=manual -p "$primary_port" "$version" "$primary" >/dev/null
	configure "$primary" "$primary_port"
	pg_ctlcluster --skip-systemctl-redirect "$version" "$primary" start
	await "$primary to accept connections" 60 ready "$primary_port"
	sql "$primary_port" "CREATE DATABASE test" >/dev/null
	make_standby "$standby" "$primary"
	sync_standby "$primary" "$standby"
	echo "pair up: $primary (primary, port $primary_port), $standby (synchronous standby, port $standby_port)"
}

cmd_status() {
	local name port r
	for name in "$primary" "$standby"; do
		port=$(port_of "$name")
		if ! exists "$name"; then
			printf '%-12s port %s  absent\n' "$name" "$port"
			continue
		fi
		r=$(role "$name")
		if [[ $r == primary ]]; then
			printf '%-12s port %s  primary  (synchronous_standby_names: %s; replication: %s)\n' "$name" "$port" \
				"$(sql "$port" "SHOW synchronous_standby_names")" "$(replication "$port" "$(other_of "$name")" || true)"
		else
			printf '%-12s port %s  %s\n' "$name" "$port" "$r"
		fi
	done
	if healthy; then
		echo "pair: healthy"
	else
		echo "pair: not healthy (scripts/pg-failover-clusters.sh up repairs it)"
		return 1
	fi
}

cmd_fail() {
	[[ ${1:-} == "$primary" || ${1:-} == "$standby" ]] || die "fail: name $primary or $standby"
	pg_ctlcluster --skip-systemctl-redirect "$version" "$1" stop -m immediate
	echo "stopped $1 (immediate)"
}

cmd_promote() {
	[[ ${1:-} == "$primary" || ${1:-} == "$standby" ]] || die "promote: name $primary or $standby"
	pg_ctlcluster --skip-systemctl-redirect "$version" "$1" promote
	echo "promoted $1"
}

cmd_rejoin() {
	local p s rp rs
	rp=$(role "$primary")
	rs=$(role "$standby")
	if [[ $rp == primary && $rs == down ]]; then
		p=$primary s=$standby
	elif [[ $rs == primary && $rp == down ]]; then
		p=$standby s=$primary
	else
		die "rejoin needs one running primary and one stopped cluster ($primary: $rp, $standby: $rs)"
	fi
	make_standby "$s" "$p"
	sync_standby "$p" "$s"
	echo "rejoined: $s is the synchronous standby of $p"
}

case $1 in
up) cmd_up ;;
down) cmd_down ;;
reset)
	cmd_down
	cmd_up
	;;
status) cmd_status ;;
fail) cmd_fail "${2:-}" ;;
promote) cmd_promote "${2:-}" ;;
rejoin) cmd_rejoin ;;
*) usage ;;
esac
