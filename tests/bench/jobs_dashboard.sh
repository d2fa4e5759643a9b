#!/usr/bin/env bash
# jobs_dashboard.sh — the jobs dashboard (GET /api/v1/jobs) on a million jobs
# over 5,000 users, against the very same SQL run straight with pgbench.
#
# The history is made with generate_series in a database of its own: 90 days
# of jobs, every state (mostly ended), tags, commands, reasons on the failed
# ones.  gpucloudd runs as a replica without the scheduler lead (the bench
# holds the leader's advisory lock), so no driver touches the rows.
#
# Three requests, each at a fixed rate (load.mjs: latency from the scheduled
# start) for DURATION:
#   first_page  a student's first page: ?state=failed&since=7d (their own
#               jobs, the default sort, with counts per state) — goal p99 < 10 ms
#   counts      an admin's ?limit=1: counts per state over all million jobs
#               (and the newest job) — goal p99 < 50 ms
#   search      an admin's text search ?q=<rare word> over all million
#               (pg_trgm, 0025) — goal p99 < 100 ms
# Baseline: the statement gpucloudd sent for each (captured from PostgreSQL's
# log with log_min_duration_statement=0 set on this database only, its
# parameters put in), run by pgbench -f at the same rate and concurrency; its
# p99 from pgbench's per-transaction log.  BENCH lines: p99 ms, ratio
# ours/pgbench (lower is better), goal the absolute bound.
#
# Needs only PostgreSQL and gpucloudd: it may run against the test world's
# PostgreSQL directly (GPUCLOUD_TEST_DB_URL, GPUCLOUD_TEST_PG_LOG from
# var/world/env); it starts nothing else and drops its database at the end.
set -euo pipefail
BENCH=jobs_dashboard
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

need node nodejs
need python3 python3
PGBENCH=$PG_BIN/pgbench
[[ -x $PGBENCH ]] || die "$PGBENCH is missing; run deploy/deps.sh (postgresql-15)"
PG_LOG=${GPUCLOUD_TEST_PG_LOG:-}
[[ -r $PG_LOG ]] || die "GPUCLOUD_TEST_PG_LOG (PostgreSQL's log file) is not readable: source var/world/env"
JOBS=${BENCH_JOBS:-1000000}
USERS=${BENCH_USERS:-5000}
RATE=${BENCH_RATE:-50}
CONNS=${BENCH_CONNS:-4}
secs=${DURATION%s}

db_new
db=$DB_NAME
sql() { "$PG_BIN/psql" -qAtX -v ON_ERROR_STOP=1 "$(db_url "$db")" "$@"; }

hold_leader_lock "$db"

gc_start "$db" "$TMP/gpucloudd.log" --log-level=warn --leader-takeover-ms=3600000
BASE=http://127.0.0.1:$GC_PORT
# login USER PASSWORD: sets COOKIE and CSRF (the session and its token).
login() {
	local out
	out=$(curl -fsS -m 30 -D "$TMP/login.h" -H 'Content-Type: application/json' -H "Origin: $BASE" \
		--data "{\"username\":\"$1\",\"password\":\"$2\"}" "$BASE/api/v1/auth/login") ||
		die "login as $1 failed"
	COOKIE=$(sed -n 's/^[Ss]et-[Cc]ookie: gc_session=\([^;]*\).*/\1/p' "$TMP/login.h" | tr -d '\r')
	CSRF=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["csrf_token"])')
}
login admin "$ADMIN_PASSWORD"
ADMIN="Cookie: gc_session=$COOKIE"
# one student through the API (a real password), the rest straight in SQL
curl -fsS -m 30 -o /dev/null -H "$ADMIN" -H "X-CSRF-Token: $CSRF" -H 'Content-Type: application/json' \
	-H "Origin: $BASE" --data '{"username":"student1","role":"student","password":"student-pass-1"}' \
	"$BASE/api/v1/users" || die "could not create the student"
login student1 student-pass-1
student=$COOKIE
STUDENT="Cookie: gc_session=$student"

say "making $JOBS jobs over $USERS users"
t0=$(date +%s)
sql <<EOF
INSERT INTO users (username, role, password_hash)
SELECT 'u' || i, 'student', '\$scrypt\$none' FROM generate_series(2, $USERS) i;
INSERT INTO images (reference, display_name)
SELECT 'reg.local/img' || i || ':1', 'Image ' || i FROM generate_series(1, 20) i;
INSERT INTO pools (name) VALUES ('a100'), ('h100'), ('t4');
CREATE TEMP TABLE ids AS SELECT array_agg(id ORDER BY id) AS u FROM users;
-- the indexes are made again after the rows (as they are, from their own
-- definitions): a bulk insert through a trigram GIN index row by row is slow
CREATE TEMP TABLE idx AS SELECT indexdef FROM pg_indexes i
 WHERE tablename = 'jobs' AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname);
DO \$\$ DECLARE n text; BEGIN
  FOR n IN SELECT indexname FROM pg_indexes i WHERE tablename = 'jobs'
    AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname) LOOP
    EXECUTE 'DROP INDEX ' || quote_ident(n);
  END LOOP; END \$\$;
INSERT INTO jobs (user_id, name, tags, image_id, command, pool_id, slices, state, reason,
                  directory, created_at, started_at, finished_at)
SELECT u[1 + ((i::bigint * 7919) % cardinality(u))::int],
       (ARRAY['resnet', 'bert', 'vit', 'gpt2', 'unet', 'lstm'])[1 + i % 6] || '-' || (i % 1000),
       CASE i % 5 WHEN 0 THEN ARRAY['sweep-' || (i % 97)] WHEN 1 THEN ARRAY['baseline', 'v' || (i % 13)]
            WHEN 2 THEN ARRAY[]::text[] ELSE ARRAY['exp-' || (i % 501)] END,
       (SELECT min(id) FROM images) + i % 20,
       ARRAY['python3', 'train.py', '--lr=0.' || (i % 997), '--seed=' || i],
       CASE WHEN i % 4 = 3 THEN NULL ELSE (SELECT min(id) FROM pools) + i % 3 END,
       CASE WHEN i % 4 = 3 THEN 0 ELSE 1 END,
       s.state,
       CASE WHEN s.state = 'failed' THEN
            (ARRAY['exited with code 1: RuntimeError: CUDA out of memory',
                   'exited with code 2: ValueError: bad learning rate',
                   'killed for going over its memory limit of 1024 MiB (OOM)'])[1 + i % 3]
            WHEN s.state = 'lost' THEN 'the node could not be reached' ELSE '' END,
       'home/u/jobs/' || i,
       c.t, CASE WHEN s.state <> 'queued' THEN c.t + interval '1 minute' END,
       CASE WHEN s.state IN ('succeeded', 'failed', 'cancelled', 'lost')
            THEN c.t + interval '1 minute' + (i % 600) * interval '10 seconds' END
FROM generate_series(1, $JOBS) i, ids,
     LATERAL (SELECT now() - (($JOBS - i)::float8 / $JOBS) * interval '90 days' AS t) c,
     LATERAL (SELECT CASE WHEN i > $JOBS - 2000 AND i % 3 = 0 THEN 'running'
                          WHEN i > $JOBS - 2000 AND i % 3 = 1 THEN 'queued'
                          ELSE (ARRAY['succeeded', 'succeeded', 'succeeded', 'failed', 'cancelled',
                                      'succeeded', 'failed', 'lost'])[1 + i % 8] END AS state) s;
-- one rare word for the text search (about a hundred jobs)
UPDATE jobs SET reason = reason || ' zebracorn' WHERE id % 10007 = 0;
SET maintenance_work_mem = '256MB';
DO \$\$ DECLARE d text; BEGIN
  FOR d IN SELECT indexdef FROM idx LOOP EXECUTE d; END LOOP; END \$\$;
VACUUM ANALYZE jobs;
EOF
say "made in $(($(date +%s) - t0)) s ($(sql -c "SELECT pg_size_pretty(pg_total_relation_size('jobs'))") with indexes)"

declare -A PATHS=(
	[first_page]="/api/v1/jobs?state=failed&since=7d"
	[counts]="/api/v1/jobs?limit=1"
	[search]="/api/v1/jobs?q=zebracorn"
)
declare -A WHO=([first_page]=$STUDENT [counts]=$ADMIN [search]=$ADMIN)
declare -A GOAL=([first_page]='<10' [counts]='<50' [search]='<100')

# Capture each statement as gpucloudd sends it.
sql -c "ALTER DATABASE $db SET log_min_duration_statement = 0"
gc_start_again() {
	stop "$GC_PID"
	gc_start "$db" "$TMP/gpucloudd.log" --log-level=warn --leader-takeover-ms=3600000
	BASE=http://127.0.0.1:$GC_PORT
}
gc_start_again # its new connections take the setting
log_from=$(stat -c %s "$PG_LOG")
for k in first_page counts search; do
	code=$(curl -sS -m 30 -o "$TMP/$k.json" -w '%{http_code}' -H "${WHO[$k]}" "$BASE${PATHS[$k]}")
	[[ $code == 200 ]] || die "${PATHS[$k]} answered $code: $(head -c 300 "$TMP/$k.json")"
	say "$k: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["items"]), "items; counts", d["counts"])' "$TMP/$k.json")"
done
sleep 1
sql -c "ALTER DATABASE $db RESET log_min_duration_statement"
gc_start_again
tail -c +"$((log_from + 1))" "$PG_LOG" >"$TMP/pg-part.log"
python3 - "$TMP" <<'EOF'
import re, sys
tmp = sys.argv[1]
text = open(f"{tmp}/pg-part.log", encoding="utf-8", errors="replace").read()
# entries start with a timestamp; an execute line, then its parameters
entries = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", text)
found = {}
for i, e in enumerate(entries):
    m = re.search(r"execute [^:]*: (WITH pg AS \(SELECT j\.id.*)", e, re.S)
    if not m:
        continue
    stmt = m.group(1).strip()
    params = {}
    for j in range(i + 1, min(i + 3, len(entries))):
        d = re.search(r"DETAIL:  parameters: (.*)", entries[j], re.S)
        if d:
            for n, v in re.findall(r"\$(\d+) = (NULL|'(?:[^']|'')*')", d.group(1)):
                params[int(n)] = v
            break
    for n in sorted(params, reverse=True):
        stmt = stmt.replace(f"${n}", params[n])
    kind = ("search" if "zebracorn" in stmt else
            "first_page" if "{failed}" in stmt or "{\"failed\"}" in stmt else "counts")
    found.setdefault(kind, stmt)
for k in ("first_page", "counts", "search"):
    if k not in found:
        sys.exit(f"the {k} statement was not in PostgreSQL's log")
    open(f"{tmp}/{k}.sql", "w").write(found[k] + ";\n")
EOF

# pgbench_p99 NAME: the statement at RATE over CONNS connections; sets PG_P99.
pgbench_p99() {
	local k=$1
	rm -f "$TMP/pgb-$k".*
	taskset -c "$LOAD_CPU" "$PGBENCH" -n -f "$TMP/$k.sql" -c "$CONNS" -j 1 -R "$RATE" -T "$secs" \
		-l --log-prefix="$TMP/pgb-$k" "$(db_url "$db")" >"$TMP/pgbench-$k.txt" 2>&1 || {
		cat "$TMP/pgbench-$k.txt" >&2
		die "pgbench failed for $k"
	}
	PG_P99=$(cat "$TMP/pgb-$k".* | awk '{ print $3 }' | sort -n |
		awk '{ v[NR] = $1 } END { i = int(NR * 0.99 + 0.999); printf "%.2f", v[i] / 1000 }')
}

declare -A OURS=() BASE_P99=()
for ((round = 1; round <= ROUNDS; round++)); do
	for k in first_page counts search; do
		report=$(load_run --url="$BASE${PATHS[$k]}" --header="${WHO[$k]}" --rate="$RATE" \
			--duration="$secs" --conns="$CONNS") || die "load.mjs failed: $report"
		p99=$(json_field "$report" p99_ms)
		(($(json_field "$report" errors) == 0)) || say "warning: errors in $k: $report"
		pgbench_p99 "$k"
		say "round $round $k: ours $report; pgbench p99 $PG_P99 ms"
		if [[ -z ${OURS[$k]:-} ]] || awk -v a="$p99" -v b="${OURS[$k]}" 'BEGIN { exit !(a < b) }'; then
			OURS[$k]=$p99
		fi
		if [[ -z ${BASE_P99[$k]:-} ]] || awk -v a="$PG_P99" -v b="${BASE_P99[$k]}" 'BEGIN { exit !(a < b) }'; then
			BASE_P99[$k]=$PG_P99
		fi
	done
done

for k in first_page counts search; do
	bench_line "${k}_p99_ms_at$RATE" "${OURS[$k]}" "${BASE_P99[$k]}" "${GOAL[$k]}"
done
