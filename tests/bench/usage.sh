#!/usr/bin/env bash
# usage.sh — the accounting reports (GET /api/v1/usage, /usage/waste) over a
# year of history for 5,000 users, against the very same SQL run straight
# with pgbench.
#
# The history is made with generate_series in a database of its own
# (0034_usage.sql's tables): a few allocation intervals per user per week
# over 365 days (1 to 8 hours; whole GPUs, half GPUs of a shared pool,
# declared GPUs that are never sampled, CPU-only work), 4 pools, 20 images,
# 100 classes (about 40 % of the work in a class's context), utilisation
# samples every SAMPLE_MIN minutes for the measured GPUs (written first:
# usage_days' trigger reads them when an ended interval is written), idle periods on
# about one instance in eight, a storage figure per home per day.
# gpucloudd runs as a replica without the scheduler lead (the bench holds the
# leader's advisory lock), so nothing else writes.
#
# Requests, as an admin, over the whole year, each N times at a fixed rate
# (load.mjs: latency from the scheduled start):
#   user_month   ?group_by=user&period=month   — goal p99 < 200 ms
#   class_month  ?group_by=class&period=month  — goal p99 < 200 ms
#   pool_month   ?group_by=pool&period=month   — goal p99 < 200 ms
#   waste_user   /usage/waste?group_by=user    — goal p99 < 200 ms
# Baseline: the statements gpucloudd sent for each request (captured from
# PostgreSQL's log with log_min_duration_statement=0 set on this database
# only, its parameters put in, only this database's backends), run by
# pgbench as one transaction at the same rate; p50/p99 from pgbench's
# per-transaction log. BENCH lines: p99 ms, ratio ours/pgbench (lower is
# better), goal the absolute bound. When a p99 is over the goal, the slowest
# statement's EXPLAIN (ANALYZE, BUFFERS) is printed.
#
# Needs only PostgreSQL and gpucloudd (GPUCLOUD_TEST_DB_URL,
# GPUCLOUD_TEST_PG_LOG from var/world/env); drops its database at the end.
set -euo pipefail
BENCH=usage
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

need node nodejs
need python3 python3
PGBENCH=$PG_BIN/pgbench
[[ -x $PGBENCH ]] || die "$PGBENCH is missing; run deploy/deps.sh (postgresql-15)"
PG_LOG=${GPUCLOUD_TEST_PG_LOG:-}
[[ -r $PG_LOG ]] || die "GPUCLOUD_TEST_PG_LOG (PostgreSQL's log file) is not readable: source var/world/env"
USERS=${BENCH_USERS:-5000}
PER_WEEK=${BENCH_PER_WEEK:-3}      # intervals per user per week
SAMPLE_MIN=${BENCH_SAMPLE_MIN:-10}  # minutes between utilisation samples
MEASURED=${BENCH_MEASURED_GPUS:-32}
COUNT=${BENCH_COUNT:-40}           # requests per measurement
RATE=${BENCH_RATE:-4}              # requests per second
CONNS=${BENCH_CONNS:-2}
GOAL_MS=200
# gpucloudd resets a connection whose statement runs past
# --db-statement-timeout (5 s by default) and answers 503: the bench lifts it
# so a slow report is measured rather than cut off (the first request of each
# kind says whether the default would have cut it off)
DB_TIMEOUT=${BENCH_DB_TIMEOUT:-600}

db_new
db=$DB_NAME
sql() { "$PG_BIN/psql" -qAtX -v ON_ERROR_STOP=1 "$(db_url "$db")" "$@"; }

hold_leader_lock "$db"

gc_start "$db" "$TMP/gpucloudd.log" --log-level=warn --leader-takeover-ms=3600000 --db-statement-timeout="$DB_TIMEOUT"
BASE=http://127.0.0.1:$GC_PORT
COOKIE=$(gc_login "$GC_PORT")
ADMIN="Cookie: gc_session=$COOKIE"

say "making a year of history: $USERS users, $PER_WEEK intervals per user per week"
t0=$(date +%s)
sql <<EOF
INSERT INTO users (username, role, password_hash)
SELECT 'u' || i, CASE WHEN i % 50 = 0 THEN 'teacher' WHEN i % 5 = 0 THEN 'researcher' ELSE 'student' END::user_role,
       '\$scrypt\$none'
FROM generate_series(1, $USERS) i;
INSERT INTO pools (name) VALUES ('a100'), ('h100'), ('t4');
INSERT INTO pools (name, sharing, slots_per_gpu, memory_per_slot_mib) VALUES ('shared', 'shared', 2, 20480);
INSERT INTO images (reference, display_name)
SELECT 'reg.local/img' || i || ':1', 'Image ' || i FROM generate_series(1, 20) i;
INSERT INTO classes (name, teacher_id, code, term)
SELECT 'Class ' || i, (SELECT id FROM users WHERE username = 'u' || (i * 50)), 'C' || i, '2026'
FROM generate_series(1, 100) i;
CREATE TEMP TABLE ids AS
SELECT (SELECT array_agg(id ORDER BY id) FROM users WHERE username LIKE 'u%') AS u,
       (SELECT array_agg(id ORDER BY id) FROM classes) AS c,
       (SELECT array_agg(id ORDER BY id) FROM pools) AS p,
       (SELECT array_agg(name ORDER BY id) FROM pools) AS pn,
       (SELECT array_agg(id ORDER BY id) FROM images) AS im,
       (SELECT array_agg(reference ORDER BY id) FROM images) AS imr;
-- the indexes are made again after the rows (from their own definitions):
-- a bulk insert through a GiST index row by row is slow
CREATE TEMP TABLE idx AS SELECT indexname, indexdef FROM pg_indexes i
 WHERE tablename IN ('usage_intervals', 'gpu_samples', 'usage_idle_periods', 'usage_storage_days', 'usage_days')
   AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname);
DO \$\$ DECLARE n text; BEGIN
  FOR n IN SELECT indexname FROM idx LOOP EXECUTE 'DROP INDEX ' || quote_ident(n); END LOOP; END \$\$;
-- students in their classes (each user in one class)
INSERT INTO class_members (class_id, user_id, role)
SELECT c[1 + (k % 100)], u[k + 1], 'student' FROM ids, generate_series(0, $USERS - 1) k
WHERE (k + 1) % 50 <> 0;
-- utilisation of the measured GPUs every SAMPLE_MIN minutes over the year
-- (before the intervals: usage_days works out an ended interval's day parts
-- from its GPU's samples when the interval is written)
INSERT INTO gpu_samples (at, node_id, gpu_uuid, util_pct, mem_used_mib)
SELECT t, 1 + g % 8, 'GPU-M' || g, (g * 37 + extract(epoch FROM t)::bigint / 60) % 101, 1000
FROM generate_series(0, $MEASURED - 1) g,
     generate_series(date_trunc('hour', now() - interval '366 days'), now(), interval '$SAMPLE_MIN minutes') t;
-- the intervals: n = users × weeks × per-week, spread evenly over the year
-- with a per-row jitter; kinds by i % 10: 0-5 a measured whole GPU, 6-7 a
-- declared GPU, 8 half a GPU of the shared pool (declared), 9 CPU only
INSERT INTO usage_intervals (allocation_id, request_id, user_id, username, class_id, class_name,
       pool_id, pool_name, image_id, image_ref, owner_kind, owner_id, node_id, gpu_uuid,
       gpu_declared, slots_per_gpu, gpus, cpu_millis, mem_mib, started_at, ended_at)
SELECT i, i, u[1 + k], 'u' || (1 + k),
       CASE WHEN i % 5 < 2 AND (1 + k) % 50 <> 0 THEN c[1 + (k % 100)] END,
       CASE WHEN i % 5 < 2 AND (1 + k) % 50 <> 0 THEN 'Class ' || (1 + (k % 100)) END,
       CASE WHEN i % 10 = 9 THEN NULL WHEN i % 10 = 8 THEN p[4] ELSE p[1 + (i % 3)] END,
       CASE WHEN i % 10 = 9 THEN NULL WHEN i % 10 = 8 THEN pn[4] ELSE pn[1 + (i % 3)] END,
       im[1 + (i % 20)], imr[1 + (i % 20)],
       CASE WHEN i % 3 = 0 THEN 'job' ELSE 'instance' END, (i / 3)::text, 1 + (i % 8),
       CASE WHEN i % 10 < 6 THEN 'GPU-M' || (i % $MEASURED) WHEN i % 10 < 9 THEN 'GPU-D' || (i % 64) END,
       CASE WHEN i % 10 < 6 THEN false WHEN i % 10 < 9 THEN true END,
       CASE WHEN i % 10 = 8 THEN 2 ELSE 1 END,
       CASE WHEN i % 10 = 9 THEN 0 WHEN i % 10 = 8 THEN 0.5 ELSE 1 END,
       1000 * (1 + i % 8), 4096 * (1 + i % 4),
       s.t, CASE WHEN i < $USERS * 52 * $PER_WEEK - 300 -- the last few hundred still running
                 THEN s.t + (1 + (i * 7) % 8) * interval '1 hour' - (i % 60) * interval '1 minute' END
FROM ids, generate_series(0::bigint, $USERS * 52 * $PER_WEEK - 1) i,
     LATERAL (SELECT (i % $USERS)::int AS k) kk,
     LATERAL (SELECT now() - interval '365 days'
                     + (i::float8 / ($USERS * 52 * $PER_WEEK)) * interval '364 days'
                     + ((i * 7919) % 1440) * interval '1 minute' AS t) s;
-- idle periods: the second half of about one instance interval in eight
INSERT INTO usage_idle_periods (instance_id, instance_name, request_id, user_id, username, class_id,
       class_name, started_at, warned_at, ended_at, end_reason)
SELECT v.allocation_id, 'notebook-' || v.allocation_id, v.request_id, v.user_id, v.username, v.class_id,
       v.class_name, v.started_at + (v.ended_at - v.started_at) / 2,
       v.started_at + (v.ended_at - v.started_at) * 3 / 4, v.ended_at,
       CASE WHEN v.allocation_id % 2 = 0 THEN 'reclaimed' ELSE 'active' END
FROM usage_intervals v
WHERE v.owner_kind = 'instance' AND v.allocation_id % 8 = 1 AND v.ended_at IS NOT NULL;
-- a storage figure per home per day
INSERT INTO usage_storage_days (area, day, user_id, username, bytes)
SELECT 'home:' || u[1 + k], d::date, u[1 + k], 'u' || (1 + k), (1 + k % 50)::bigint * 1073741824 / 4
FROM ids, generate_series(0, $USERS - 1) k,
     generate_series((now() - interval '365 days')::date, now()::date, interval '1 day') d
ON CONFLICT DO NOTHING;
SET maintenance_work_mem = '256MB';
DO \$\$ DECLARE d text; BEGIN
  FOR d IN SELECT indexdef FROM idx LOOP EXECUTE d; END LOOP; END \$\$;
VACUUM ANALYZE usage_intervals;
VACUUM ANALYZE gpu_samples;
VACUUM ANALYZE usage_idle_periods;
VACUUM ANALYZE usage_storage_days;
VACUUM ANALYZE usage_days;
EOF
say "made in $(($(date +%s) - t0)) s: $(sql -c "SELECT (SELECT count(*) FROM usage_intervals) || ' intervals, '
	|| (SELECT count(*) FROM gpu_samples) || ' samples, ' || (SELECT count(*) FROM usage_idle_periods) || ' idle periods, '
	|| (SELECT count(*) FROM usage_storage_days) || ' storage days, ' || (SELECT count(*) FROM usage_days) || ' interval days; '
	|| pg_size_pretty(pg_database_size(current_database()))")"

FROM=$(python3 -c 'import datetime as d; n = d.datetime.now(d.timezone.utc); print((n - d.timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ"))')
TO=$(python3 -c 'import datetime as d; print(d.datetime.now(d.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))')
KINDS=(user_month class_month pool_month waste_user)
declare -A PATHS=(
	[user_month]="/api/v1/usage?group_by=user&period=month&from=$FROM&to=$TO"
	[class_month]="/api/v1/usage?group_by=class&period=month&from=$FROM&to=$TO"
	[pool_month]="/api/v1/usage?group_by=pool&period=month&from=$FROM&to=$TO"
	[waste_user]="/api/v1/usage/waste?group_by=user&from=$FROM&to=$TO"
)

# Capture each request's statements as gpucloudd sends them: log every
# statement of this database, then keep the entries of its backends that
# name a usage table.
sql -c "ALTER DATABASE $db SET log_min_duration_statement = 0"
gc_start_again() {
	stop "$GC_PID"
	gc_start "$db" "$TMP/gpucloudd.log" --log-level=warn --leader-takeover-ms=3600000 --db-statement-timeout="$DB_TIMEOUT"
	BASE=http://127.0.0.1:$GC_PORT
}
gc_start_again # its new connections take the setting
declare -A FIRST=() N=() R=()
for k in "${KINDS[@]}"; do
	from=$(stat -c %s "$PG_LOG")
	t1=$(date +%s%N)
	code=$(curl -sS -m 900 -o "$TMP/$k.json" -w '%{http_code}' -H "$ADMIN" "$BASE${PATHS[$k]}")
	t2=$(date +%s%N)
	[[ $code == 200 ]] || die "${PATHS[$k]} answered $code: $(head -c 300 "$TMP/$k.json")"
	FIRST[$k]=$(((t2 - t1) / 1000000))
	# a report that would keep CONNS connections over half busy at RATE (a
	# queue, not latency, would be measured): a few requests, spaced out
	if awk -v ms="${FIRST[$k]}" -v r="$RATE" -v c="$CONNS" 'BEGIN { exit !(ms * r > 500 * c) }'; then
		N[$k]=${BENCH_SLOW_COUNT:-3}
		R[$k]=$(awk -v ms="${FIRST[$k]}" 'BEGIN { printf "%.3f", 1000 / (ms * 1.5) }')
	else
		N[$k]=$COUNT
		R[$k]=$RATE
	fi
	sleep 0.5
	"$PG_BIN/psql" -qAtX "$(db_url postgres)" -c "SELECT pid FROM pg_stat_activity WHERE datname = '$db'" >"$TMP/pids-$k"
	tail -c +"$((from + 1))" "$PG_LOG" >"$TMP/pg-$k.log"
	say "$k: first request ${FIRST[$k]} ms (over the default 5 s statement timeout: $( ((FIRST[$k] > 5000)) && echo yes || echo no)), $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["rows"]), "rows")' "$TMP/$k.json")"
done
sql -c "ALTER DATABASE $db RESET log_min_duration_statement"
gc_start_again
COOKIE=$(gc_login "$GC_PORT")
ADMIN="Cookie: gc_session=$COOKIE"

for k in "${KINDS[@]}"; do
	python3 - "$TMP" "$k" <<'EOF' || die "the $k statements were not in PostgreSQL's log"
import re, sys
tmp, kind = sys.argv[1], sys.argv[2]
pids = set(open(f"{tmp}/pids-{kind}").read().split())
text = open(f"{tmp}/pg-{kind}.log", encoding="utf-8", errors="replace").read()
entries = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", text)
out = []
for i, e in enumerate(entries):
    m = re.match(r"\S+ \S+ \S+ \[(\d+)\] LOG:  duration: [\d.]+ ms  (?:execute [^:]*|statement): (.*)", e, re.S)
    if not m or m.group(1) not in pids:
        continue
    stmt = m.group(2).strip()
    params = {}
    for j in range(i + 1, min(i + 3, len(entries))):
        d = re.search(r"DETAIL:  parameters: (.*)", entries[j], re.S)
        if d:
            for n, v in re.findall(r"\$(\d+) = (NULL|'(?:[^']|'')*')", d.group(1)):
                params[int(n)] = v
            break
    for n in sorted(params, reverse=True):
        stmt = re.sub(rf"\${n}(?!\d)", lambda _m: params[n], stmt)
    # the report's own statement (it may come as a parameter of gc_usage_exec)
    if not re.search(r"usage_(intervals|idle_periods|storage_days|days)", stmt):
        continue
    out.append(stmt.rstrip().rstrip(";"))
if not out:
    sys.exit(1)
open(f"{tmp}/{kind}.sql", "w").write("".join(s + ";\n" for s in out))
for n, s in enumerate(out):
    open(f"{tmp}/{kind}.{n}.sql", "w").write(s + ";\n")
print(len(out))
EOF
done

# pgbench_run KIND: the request's statements as one transaction, COUNT times
# at RATE over CONNS connections; sets PG_P50 and PG_P99.
pgbench_run() {
	local k=$1
	rm -f "$TMP/pgb-$k".*
	local conns=$CONNS
	((N[$k] >= CONNS)) || conns=1
	taskset -c "$LOAD_CPU" "$PGBENCH" -n -f "$TMP/$k.sql" -c "$conns" -j 1 -R "${R[$k]}" \
		-t "$(((N[$k] + conns - 1) / conns))" -l --log-prefix="$TMP/pgb-$k" "$(db_url "$db")" \
		>"$TMP/pgbench-$k.txt" 2>&1 || {
		cat "$TMP/pgbench-$k.txt" >&2
		die "pgbench failed for $k"
	}
	read -r PG_P50 PG_P99 < <(cat "$TMP/pgb-$k".* | awk '{ print $3 }' | sort -n |
		awk '{ v[NR] = $1 } END { a = int(NR * 0.5 + 0.999); b = int(NR * 0.99 + 0.999)
			printf "%.2f %.2f\n", v[a] / 1000, v[b] / 1000 }')
}

declare -A OURS=() OURS50=() BASE_P99=() BASE_P50=()
for ((round = 1; round <= ROUNDS; round++)); do
	for k in "${KINDS[@]}"; do
		[[ $round == 1 || ${N[$k]} == "$COUNT" ]] || continue # a slow one: one round
		report=$(load_run --url="$BASE${PATHS[$k]}" --header="$ADMIN" --rate="${R[$k]}" \
			--count="${N[$k]}" --conns="$CONNS") || die "load.mjs failed: $report"
		p99=$(json_field "$report" p99_ms)
		p50=$(json_field "$report" p50_ms)
		(($(json_field "$report" errors) == 0)) || say "warning: errors in $k: $report"
		pgbench_run "$k"
		say "round $round $k: ours $report; pgbench p50 $PG_P50 ms p99 $PG_P99 ms"
		if [[ -z ${OURS[$k]:-} ]] || awk -v a="$p99" -v b="${OURS[$k]}" 'BEGIN { exit !(a < b) }'; then
			OURS[$k]=$p99
			OURS50[$k]=$p50
		fi
		if [[ -z ${BASE_P99[$k]:-} ]] || awk -v a="$PG_P99" -v b="${BASE_P99[$k]}" 'BEGIN { exit !(a < b) }'; then
			BASE_P99[$k]=$PG_P99
			BASE_P50[$k]=$PG_P50
		fi
	done
done

# Over the goal: which statement, and its plan.
for k in "${KINDS[@]}"; do
	awk -v a="${OURS[$k]}" -v g="$GOAL_MS" 'BEGIN { exit !(a > g) }' || continue
	for f in "$TMP/$k".[0-9]*.sql; do
		say "$k over ${GOAL_MS} ms; EXPLAIN ANALYZE of $(basename "$f"):"
		head -c 2000 "$f" >&2
		printf '\n' >&2
		# a report run through gc_usage_exec(q, args...): explain q itself
		python3 - "$f" >"$f.explain" <<'PY'
import re, sys
stmt = open(sys.argv[1]).read().strip().rstrip(";")
m = re.match(r"SELECT st, body FROM gc_usage_exec\('((?:[^']|'')*)', (.*)\)$", stmt, re.S)
if m:
    q = m.group(1).replace("''", "'")
    args = [a + c for a, c in re.findall(r"(NULL|'(?:[^']|'')*')(::\w+)?", m.group(2))]
    for n in range(len(args), 0, -1):
        q = re.sub(rf"\${n}(?!\d)", lambda _m: args[n - 1], q)
    stmt = q
print("SET jit = off;")
print("EXPLAIN (ANALYZE, BUFFERS) " + stmt + ";")
PY
		sql -f "$f.explain" >&2 || true
	done
done

for k in "${KINDS[@]}"; do
	say "$k: p50 ours ${OURS50[$k]} ms, pgbench ${BASE_P50[$k]} ms"
	bench_line "${k}_p99_ms" "${OURS[$k]}" "${BASE_P99[$k]}" "<$GOAL_MS"
done
