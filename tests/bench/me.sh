#!/usr/bin/env bash
# me.sh — an authenticated API call end to end: GET /api/v1/me with a session
# cookie (one session lookup in PostgreSQL per request) against what the same
# PostgreSQL does with no HTTP server in front: pgbench -S (one primary-key
# SELECT per transaction) at the same concurrency, in a database of its own
# made with pgbench -i -s 1.
#
# gpucloudd runs on CPU 0 with --log-level=warn; wrk, pgbench and openloop on
# CPU 1; PostgreSQL is not pinned, for either side.
#
#  1. Pool sweep: --db-pool-size over POOLS (default 1 2 4 8 16), wrk -c50,
#     one run each; the best size is used for the rest and reported.
#  2. Throughput: wrk -t1 -cN -d10s vs pgbench -S -cN -j1 -T10 for N in 16
#     and 50, alternating, ROUNDS rounds, best of each counts.
#     me_rps_cN: requests/s vs transactions/s, ratio ours/pgbench, higher is
#     better, goal >= 0.5.
#  3. Latency at a fixed rate: 2,000 req/s for 10 s over 20 keep-alive
#     connections (openloop.c: Debian's wrk has no rate option) vs pgbench -S
#     -R 2000 -c 20 -j1 -T10; both measure from the scheduled start.
#     me_p99_ms_at2000: p99 in ms, ratio ours/pgbench, lower is better; the
#     goal is an absolute bound, p99 < 3 ms; measured at the best pool size
#     and again at BENCH_LATENCY_POOL (default 2): me_p99_ms_at2000_pool2.
#
# Also said (not a BENCH line): PostgreSQL transactions per /me over the pool
# sweep, from pg_stat_database (backends flush their counters when they exit,
# and each sweep step restarts gpucloudd). The design is one: the caller
# lookup reads the session, the user and the version of /me's quotas, usage
# and storage (0041) in one query; those are read again, in a second one,
# only after something they read changed, which nothing does here: this
# measures the steady case. Background work (scheduler ticks, the storage
# scanner) adds a little.
set -euo pipefail
BENCH=me
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

need wrk wrk
need node nodejs
PGBENCH=$PG_BIN/pgbench
[[ -x $PGBENCH ]] || die "$PGBENCH is missing; run deploy/deps.sh (postgresql-15)"
read -ra POOLS <<<"${BENCH_POOLS:-1 2 4 8 16}"
RATE=${BENCH_RATE:-2000}
secs=${DURATION%s}

db_new
db=$DB_NAME
db_new
pgb=$DB_NAME
"$PGBENCH" -i -s 1 -q "$(db_url "$pgb")" >"$TMP/pgbench-init.log" 2>&1 || {
	cat "$TMP/pgbench-init.log" >&2
	die "pgbench -i failed"
}

# me_server POOL: (re)starts gpucloudd with that pool size; sets URL.
me_server() {
	[[ -n ${GC_PID:-} ]] && stop "$GC_PID"
	gc_start "$db" "$TMP/gpucloudd.log" --log-level=warn --db-pool-size="$1"
	URL=http://127.0.0.1:$GC_PORT/api/v1/me
}

me_server 8
# Sessions live in the database: one login serves every restart.
cookie=$(gc_login "$GC_PORT")
COOKIE="Cookie: gc_session=$cookie"
code=$(curl -sS -m 5 -o /dev/null -w '%{http_code}' -H "$COOKIE" "$URL")
[[ $code == 200 ]] || die "GET /api/v1/me with the session answered $code"

# pgbench_run OUT CLIENTS [ARG...]: pgbench -S on LOAD_CPU; sets TPS.
pgbench_run() {
	local out=$1 c=$2
	shift 2
	taskset -c "$LOAD_CPU" "$PGBENCH" -n -S -c "$c" -j 1 -T "$secs" "$@" "$(db_url "$pgb")" \
		>"$out" 2>&1 || {
		cat "$out" >&2
		die "pgbench failed"
	}
	TPS=$(awk '/^tps = / { printf "%.0f", $3 }' "$out")
	[[ -n $TPS ]] || die "no figures from pgbench (see $out)"
}

# xacts: commits + rollbacks so far in gpucloudd's database (this psql's own
# transaction included).
xacts() {
	"$PG_BIN/psql" -qAtX "$(db_url "$db")" -c "SELECT xact_commit + xact_rollback
		FROM pg_stat_database WHERE datname = current_database()"
}

# 1. Pool sweep.
best_pool='' best_pool_rps=0 sweep_reqs=0
sweep_xacts=$(xacts)
declare -A pool_rps=()
for pool in "${POOLS[@]}"; do
	me_server "$pool"
	wrk_run "$TMP/wrk-pool$pool.txt" "$URL" -H "$COOKIE"
	pool_rps[$pool]=$RPS
	sweep_reqs=$((sweep_reqs + $(awk '/ requests in / { print $1; exit }' "$TMP/wrk-pool$pool.txt")))
	say "pool $pool: $RPS req/s, p50 $P50_MS ms, p99 $P99_MS ms (wrk -c50)"
	if ((RPS > best_pool_rps)); then
		best_pool=$pool best_pool_rps=$RPS
	fi
done
say "best --db-pool-size here: $best_pool (the throughput and latency runs use it)"
me_server "$best_pool"
# the sweep's last server has exited and flushed its counters
sweep_xacts=$(($(xacts) - sweep_xacts))
say "SQL transactions per /me over the pool sweep: $(awk -v x="$sweep_xacts" -v n="$sweep_reqs" \
	'BEGIN { if (n > 0) printf "%.2f", x / n; else print "n/a" }') ($sweep_xacts for $sweep_reqs requests)"

# 2. Throughput, alternating with pgbench -S.
declare -A best_tps=()
for ((round = 1; round <= ROUNDS; round++)); do
	for c in 16 50; do
		WRK_CONNS=$c wrk_best "me_c$c" "$URL" -H "$COOKIE"
		pgbench_run "$TMP/pgbench-c$c.txt" "$c"
		say "pgbench -S -c$c: $TPS tps"
		((TPS > ${best_tps[$c]:-0})) && best_tps[$c]=$TPS
	done
done

# 3. p99 at a fixed rate.
# openloop.c, not load.mjs: Node's HTTP client alone measures p50 ~0.9 ms
# and p99 ~2.3 ms at this rate here, more than the figure being judged.
"${CC:-cc}" -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$TMP/openloop" \
	"$ROOT/tests/bench/openloop.c" || die "cannot build tests/bench/openloop.c"
# openloop_run PATH: that path at RATE over 20 connections; prints openloop's JSON.
openloop_run() {
	taskset -c "$LOAD_CPU" "$TMP/openloop" 127.0.0.1 "$GC_PORT" "$1" "$RATE" "$secs" 20 "$COOKIE"
}
report=$(openloop_run /api/v1/me) || die "openloop failed: $report"
say "fixed rate, ours: $report"
me_p99=$(json_field "$report" p99_ms)
((  $(json_field "$report" errors) == 0 )) || say "warning: errors at the fixed rate: $report"
# The same client on /healthz (no database, no session): what is not /me's.
floor=$(openloop_run /healthz) || die "openloop failed: $floor"
say "fixed rate, the client and HTTP alone (GET /healthz): $floor"
# The tail depends on the pool: on a machine this small, bursts spread over
# eight backends wake cold ones (p99 ~3 ms at 8, ~1.5 ms at 2 here), so the
# fixed rate is also measured with a pool of LATENCY_POOL.
LATENCY_POOL=${BENCH_LATENCY_POOL:-2}
me_server "$LATENCY_POOL"
report=$(openloop_run /api/v1/me) || die "openloop failed: $report"
say "fixed rate, ours with --db-pool-size=$LATENCY_POOL: $report"
me_p99_small=$(json_field "$report" p99_ms)
pgbench_run "$TMP/pgbench-rate.txt" 20 -R "$RATE" -l --log-prefix="$TMP/pgbench-rate"
# Per-transaction log: the third column is the latency in µs, counted from
# the scheduled start when -R is given.
pg_p99=$(cat "$TMP"/pgbench-rate.* | awk '{ print $3 }' | sort -n |
	awk '{ v[NR] = $1 } END { i = int(NR * 0.99 + 0.999); printf "%.2f", v[i] / 1000 }')
say "fixed rate, pgbench -S -R $RATE: p99 $pg_p99 ms, $TPS tps"

for pool in "${POOLS[@]}"; do
	bench_line "me_rps_c50_pool$pool" "${pool_rps[$pool]}" "${best_tps[50]}" '>=0.5'
done
bench_line me_rps_c16 "${BEST_RPS[me_c16]}" "${best_tps[16]}" '>=0.5'
bench_line me_rps_c50 "${BEST_RPS[me_c50]}" "${best_tps[50]}" '>=0.5'
bench_line "me_p99_ms_at$RATE" "$me_p99" "$pg_p99" '<3'
bench_line "me_p99_ms_at${RATE}_pool$LATENCY_POOL" "$me_p99_small" "$pg_p99" '<3'
