# shellcheck shell=bash
# Helpers shared by the benchmarks in tests/bench/: a private temp directory
# cleaned up on exit, a fresh database per run, gpucloudd and nginx started on
# loopback and pinned to a CPU, wrk and pgbench runs with their figures parsed
# out, and the BENCH line every benchmark ends with.
#
# Sourced, never run. The caller sets BENCH (its name) and runs with
# `set -euo pipefail`. Needs GPUCLOUD_TEST_DB_URL (from var/world/env when run
# through `make bench`).
#
# Pinning: servers run on SERVER_CPU, load generators on LOAD_CPU, so the
# two never compete for one core. PostgreSQL is not pinned: it is shared with
# the rest of the machine, for us and for the baselines alike.

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
BIN=${GPUCLOUD_BIN:-$ROOT/build/gpucloudd}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
SERVER_CPU=${BENCH_SERVER_CPU:-0}
LOAD_CPU=${BENCH_LOAD_CPU:-1}
DURATION=${BENCH_DURATION:-10s}
# Other work shares this machine: each side is measured ROUNDS times,
# alternating with its baseline, and the best round of each counts.
# shellcheck disable=SC2034 # used by the benchmarks that source this
ROUNDS=${BENCH_ROUNDS:-2}
ADMIN_PASSWORD=bench-admin-password-1

say() { printf '%s: %s\n' "$BENCH" "$*" >&2; }
die() {
	printf '%s: error: %s\n' "$BENCH" "$*" >&2
	exit 1
}

# The one output line per figure. Throughput ratios are ours/baseline and
# higher is better; for latency and memory the ratio is also ours/baseline but
# lower is better: GOAL carries the direction (">=0.7", "<=1.5", "<5").
bench_line() {
	local metric=$1 value=$2 baseline=$3 goal=$4 ratio
	ratio=$(awk -v a="$value" -v b="$baseline" 'BEGIN {
		if (b + 0 == 0) print "n/a"; else printf "%.2f", a / b }')
	printf 'BENCH %s %s=%s baseline=%s ratio=%s goal=%s\n' \
		"$BENCH" "$metric" "$value" "$baseline" "$ratio" "$goal"
}

[[ -n ${GPUCLOUD_TEST_DB_URL:-} ]] ||
	die "GPUCLOUD_TEST_DB_URL is not set: run the benchmarks through make bench (it starts the test world)"

# ---------------------------------------------------------------------------
# Temp directory, processes and clean-up

TMP=$(mktemp -d "${TMPDIR:-/tmp}/gcbench-$BENCH.XXXXXX")
# nginx workers drop to nobody and must read the web root below TMP.
chmod 0755 "$TMP"
declare -a PIDS=()
declare -a DBS=()

# shellcheck disable=SC2317 # called from a trap
cleanup() {
	local rc=$? pid i db
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	done
	for db in "${DBS[@]}"; do
		"$PG_BIN/psql" -qAtX "$(db_url postgres)" \
			-c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
	done
	if [[ ${BENCH_KEEP_TMP:-0} == 1 ]]; then
		say "kept $TMP"
	else
		rm -rf -- "$TMP"
	fi
	return "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# stop PID: SIGTERM, wait up to 5 s, then SIGKILL; forgets the pid.
stop() {
	local pid=$1 i keep=()
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	for i in "${PIDS[@]}"; do
		[[ $i == "$pid" ]] || keep+=("$i")
	done
	PIDS=("${keep[@]}")
}

# A loopback TCP port nobody listens on right now.
free_port() {
	node -e 'const s = require("net").createServer();
		s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

need() {
	command -v "$1" >/dev/null 2>&1 || die "$1 is not installed; run deploy/deps.sh ($2)"
}

# ---------------------------------------------------------------------------
# Database

# db_url NAME: GPUCLOUD_TEST_DB_URL with its database name replaced by NAME.
db_url() {
	local base=$GPUCLOUD_TEST_DB_URL
	local pre=${base%%\?*}
	local query=${base#"$pre"}
	printf '%s/%s%s\n' "${pre%/*}" "$1" "$query"
}

# db_new: creates a database bench_<random>, dropped on exit; sets DB_NAME.
# (Not printed: a command substitution's subshell could not record it for
# the clean-up.)
db_new() {
	DB_NAME=bench_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
	"$PG_BIN/psql" -qAtX -v ON_ERROR_STOP=1 "$(db_url postgres)" \
		-c "CREATE DATABASE $DB_NAME" >/dev/null || die "cannot create database $DB_NAME"
	DBS+=("$DB_NAME")
}

# hold_leader_lock DB: holds the scheduler lead in database DB for the rest
# of the run (a psql waiting on its stdin, on fd 7), so a gpucloudd started
# there serves requests but drives nothing.  Such a holder runs no
# statements and so looks frozen: start gpucloudd with
# --leader-takeover-ms=3600000 or it ends the holder and takes the lead.
LEADER_LOCK=1735553635 # server/db/leader.h LEADER_LOCK_SCHED
hold_leader_lock() {
	local url i
	url=$(db_url "$1")
	mkfifo "$TMP/lock.fifo"
	"$PG_BIN/psql" -qAtX "$url" <"$TMP/lock.fifo" >/dev/null 2>&1 &
	PIDS+=($!)
	exec 7>"$TMP/lock.fifo"
	printf 'SELECT pg_advisory_lock(%s);\n' "$LEADER_LOCK" >&7
	for ((i = 0; i < 100; i++)); do
		[[ $("$PG_BIN/psql" -qAtX "$url" -c "SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND objid = $LEADER_LOCK AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())") == 1 ]] && return 0
		sleep 0.1
	done
	die "could not take the leader's lock in $1"
}

# ---------------------------------------------------------------------------
# gpucloudd

# gc_start DB LOGFILE [FLAG...]: starts gpucloudd on SERVER_CPU on a free
# loopback port, against database DB; sets GC_PID and GC_PORT. The seeded
# admin's password is ADMIN_PASSWORD.
gc_start() {
	local db=$1 log=$2 i port_file state
	shift 2
	[[ -x $BIN ]] || die "$BIN is missing; run make all"
	state=$(mktemp -d "$TMP/state.XXXXXX")
	port_file=$state/port
	GPUCLOUD_ADMIN_PASSWORD=$ADMIN_PASSWORD taskset -c "$SERVER_CPU" "$BIN" \
		--listen=127.0.0.1 --port=0 --port-file="$port_file" \
		--db-url="$(db_url "$db")" --state-dir="$state" \
		--migrations-dir="$ROOT/db/migrations" --openapi-file="$ROOT/server/api/openapi.yaml" \
		--web-root="$ROOT/web" "$@" </dev/null >>"$log" 2>&1 &
	GC_PID=$!
	PIDS+=("$GC_PID")
	GC_PORT=
	for ((i = 0; i < 300; i++)); do
		[[ -s $port_file ]] && GC_PORT=$(<"$port_file")
		[[ -n $GC_PORT ]] && break
		kill -0 "$GC_PID" 2>/dev/null || break
		sleep 0.05
	done
	if [[ -z $GC_PORT ]]; then
		tail -n 20 "$log" >&2
		die "gpucloudd did not start"
	fi
	# Ready means the database pool is up as well.
	for ((i = 0; i < 100; i++)); do
		curl -fsS -m 2 -o /dev/null "http://127.0.0.1:$GC_PORT/readyz" 2>/dev/null && return 0
		sleep 0.05
	done
	tail -n 20 "$log" >&2
	die "gpucloudd on port $GC_PORT did not become ready"
}

# gc_login PORT: logs the seeded admin in; prints the gc_session cookie value.
gc_login() {
	local port=$1 cookie
	cookie=$(curl -fsS -m 30 -o /dev/null -D - -H 'Content-Type: application/json' \
		-H "Origin: http://127.0.0.1:$port" \
		--data "{\"username\":\"admin\",\"password\":\"$ADMIN_PASSWORD\"}" \
		"http://127.0.0.1:$port/api/v1/auth/login" |
		sed -n 's/^[Ss]et-[Cc]ookie: gc_session=\([^;]*\).*/\1/p' | tr -d '\r')
	[[ -n $cookie ]] || die "login as admin failed"
	printf '%s\n' "$cookie"
}

# gc_route PORT DB_URL UPSTREAM_PORT: an app route on gpucloudd (PORT) to a
# server on 127.0.0.1:UPSTREAM_PORT (a running instance's port, as rows),
# opened by the admin through the real handshake.  Sets inst (the
# instance's id), route, rhost (its Host) and rcookie (its gc_route cookie);
# route_cookie opens more routes with the same login.
gc_route() {
	local port=$1 dbu=$2 up=$3 img login
	local -a psql=("$PG_BIN/psql" -qAtX -v ON_ERROR_STOP=1 "$dbu")
	img=$("${psql[@]}" -c "INSERT INTO images (reference, app_ports) VALUES ('bench/static:1', '[{\"name\":\"web\",\"port\":80}]') RETURNING id" | head -1)
	inst=$("${psql[@]}" -c "INSERT INTO instances (user_id, name, image_id, state) SELECT id, 'bench', $img, 'running' FROM users WHERE username = 'admin' RETURNING id" | head -1)
	"${psql[@]}" -c "INSERT INTO instance_ports VALUES ($inst, 'web', 80, '127.0.0.1', $up)" >/dev/null
	route=$("${psql[@]}" -c "SELECT id FROM routes WHERE instance_id = $inst")
	# The admin signs in, mints a ticket bound to a state secret (POST with
	# the CSRF token) and redeems it on the route's origin with that secret.
	login=$(curl -fsS -m 30 -D "$TMP/login.h" -H 'Content-Type: application/json' \
		-H "Origin: http://127.0.0.1:$port" \
		--data "{\"username\":\"admin\",\"password\":\"$ADMIN_PASSWORD\"}" \
		"http://127.0.0.1:$port/api/v1/auth/login")
	ROUTE_SESSION=$(sed -n 's/^[Ss]et-[Cc]ookie: gc_session=\([^;]*\).*/\1/p' "$TMP/login.h" | tr -d '\r')
	ROUTE_CSRF=$(printf '%s' "$login" | sed -n 's/.*"csrf_token":"\([^"]*\)".*/\1/p')
	[[ -n $ROUTE_SESSION && -n $ROUTE_CSRF ]] || die "login as admin failed"
	# shellcheck disable=SC2034 # read by the benchmarks that source this
	rhost="$route.localhost:$port"
	rcookie=$(route_cookie "$port" "$route")
	[[ -n $rcookie ]] || die "the handshake gave no route cookie"
}

# route_cookie PORT ROUTE: prints a gc_route cookie ("gc_route=...") for
# that route, opened with gc_route's login.
route_cookie() {
	local port=$1 r=$2 state hash url rh
	state=$(openssl rand -hex 32)
	hash=$(printf '%s' "$state" | sha256sum | cut -d' ' -f1)
	url=$(curl -fsS -m 10 -H "Cookie: gc_session=$ROUTE_SESSION" -H "X-CSRF-Token: $ROUTE_CSRF" \
		-H "Origin: http://127.0.0.1:$port" -H 'Content-Type: application/json' \
		--data "{\"path\":\"/\",\"state\":\"$hash\"}" \
		"http://127.0.0.1:$port/api/v1/routes/$r/open" | sed -n 's/.*"url":"\([^"]*\)".*/\1/p')
	rh="$r.localhost:$port"
	curl -sS -m 10 -o /dev/null -D - -H "Host: $rh" -H "Cookie: gc_state=$state" \
		"http://127.0.0.1:$port${url#*"$rh"}" |
		sed -n 's/^[Ss]et-[Cc]ookie: \(gc_route=[^;]*\).*/\1/p' | tr -d '\r'
}

# ---------------------------------------------------------------------------
# nginx, as a private instance: its own prefix, configuration and pid file.

# nginx_start DIR PORT ROOT ACCESS_LOG: one worker on SERVER_CPU serving ROOT
# on 127.0.0.1:PORT, keep-alive on. ACCESS_LOG is "off" or a file. /healthz
# answers like gpucloudd's, from the configuration. Sets NGINX_PID (master).
nginx_start() {
	local dir=$1 port=$2 root=$3 access=$4 i
	need nginx nginx-light
	install -d -m 0755 "$dir" "$dir/logs" "$dir/tmp"
	cat >"$dir/nginx.conf" <<EOF
# Written by tests/bench: a private nginx as the baseline.
daemon off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 1024; }
http {
	access_log $access;
	client_body_temp_path $dir/tmp/body;
	proxy_temp_path $dir/tmp/proxy;
	fastcgi_temp_path $dir/tmp/fastcgi;
	uwsgi_temp_path $dir/tmp/uwsgi;
	scgi_temp_path $dir/tmp/scgi;
	types { text/plain txt; text/html html; }
	default_type application/octet-stream;
	sendfile on;
	tcp_nopush on;
	keepalive_timeout 60;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:$port;
		root $root;
		location = /healthz {
			default_type application/json;
			return 200 '{"status":"ok"}';
		}
	}
}
EOF
	[[ $access == off ]] || touch "$access"
	taskset -c "$SERVER_CPU" nginx -p "$dir" -c "$dir/nginx.conf" \
		</dev/null >>"$dir/logs/stderr.log" 2>&1 &
	NGINX_PID=$!
	PIDS+=("$NGINX_PID")
	for ((i = 0; i < 100; i++)); do
		curl -fsS -m 2 -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null && return 0
		kill -0 "$NGINX_PID" 2>/dev/null || break
		sleep 0.05
	done
	cat "$dir/logs/stderr.log" "$dir/logs/error.log" >&2 2>/dev/null || true
	die "nginx did not start on port $port"
}

# ---------------------------------------------------------------------------
# Load

# wrk_run OUT URL [WRK ARG...]: wrk -t1 -c50 on LOAD_CPU for DURATION; its
# report goes to OUT. Sets RPS and P99_MS (and P50_MS); warns about errors.
wrk_run() {
	local out=$1 url=$2
	shift 2
	need wrk wrk
	taskset -c "$LOAD_CPU" wrk -t1 -c"${WRK_CONNS:-50}" -d"$DURATION" --latency "$@" "$url" \
		>"$out" 2>&1 || {
		cat "$out" >&2
		die "wrk failed against $url"
	}
	RPS=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$out")
	P50_MS=$(wrk_pct "$out" 50%)
	P99_MS=$(wrk_pct "$out" 99%)
	[[ -n $RPS ]] || {
		cat "$out" >&2
		die "no figures from wrk against $url"
	}
	if grep -Eq 'Non-2xx|Socket errors' "$out"; then
		say "warning: errors against $url: $(grep -E 'Non-2xx|Socket errors' "$out" | tr -s ' ' | tr '\n' ';')"
	fi
}

# wrk_best NAME URL: wrk_run ROUNDS times is too slow to do back to back
# with the baseline's rounds, so callers interleave calls to wrk_best, which
# keeps the best requests/s seen for NAME (and that round's p99) in
# BEST_RPS[NAME] and BEST_P99[NAME].
# shellcheck disable=SC2034 # read by the benchmarks that source this
declare -A BEST_RPS=() BEST_P99=()
wrk_best() {
	local name=$1 url=$2
	shift 2
	wrk_run "$TMP/wrk-$name.txt" "$url" "$@"
	say "$name: $RPS req/s, p50 $P50_MS ms, p99 $P99_MS ms"
	if [[ -z ${BEST_RPS[$name]:-} ]] || ((RPS > BEST_RPS[$name])); then
		BEST_RPS[$name]=$RPS
		# shellcheck disable=SC2034 # read by the benchmarks
		BEST_P99[$name]=$P99_MS
	fi
}

# wrk_pct FILE PCT: a latency percentile of wrk's report, in milliseconds.
wrk_pct() {
	awk -v p="$2" '$1 == p && /(us|ms|s)$/ {
		v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
		if (u == "us") v /= 1000; else if (u == "s") v *= 1000; else if (u == "m") v *= 60000
		printf "%.2f", v; exit }' "$1"
}

# load_run ARG...: the fixed-rate load generator (load.mjs) on LOAD_CPU; its
# one-line JSON report goes to stdout.
load_run() {
	taskset -c "$LOAD_CPU" node "$ROOT/tests/bench/load.mjs" "$@"
}

# json_field JSON NAME: a number from load.mjs's flat JSON report.
json_field() {
	node -e 'console.log(JSON.parse(process.argv[1])[process.argv[2]])' "$1" "$2"
}

# vm_kb PID FIELD: a /proc/PID/status figure (VmHWM, VmRSS) in kB.
vm_kb() {
	awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"
}
