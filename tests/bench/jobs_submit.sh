#!/usr/bin/env bash
# jobs_submit.sh — job submissions accepted and durable per second: POST
# /api/v1/jobs with an Idempotency-Key each (submit_load.mjs, CONNS
# connections back to back for DURATION), against the same INSERT statement
# run straight by pgbench at the same concurrency.
#
# A 201 means the job and its allocation request are committed; after each
# run the bench checks that the database holds exactly as many jobs as 201s
# were answered (durable, none lost, none doubled).  gpucloudd runs without
# the scheduler lead (the bench holds the leader's advisory lock), so the
# jobs stay queued and no engine is needed.
#
#   submit_rps    201s per second vs pgbench's transactions per second of the
#                 insert alone; ratio ours/baseline, goal >= 1000/s absolute
#   submit_p99_ms p99 of a submit vs pgbench's p99; goal < 50 ms absolute
#
# The baseline statement is the one gpucloudd sent (captured from
# PostgreSQL's log with log_min_duration_statement=0 on this database only),
# with its Idempotency-Key made unique per transaction.  gpucloudd does more
# per submit (the session, the storage block, the quota admission, the audit
# row, the reply's document): the ratio says what that costs.
#
# Needs only PostgreSQL and gpucloudd (GPUCLOUD_TEST_DB_URL and
# GPUCLOUD_TEST_PG_LOG from var/world/env); it starts nothing else.
set -euo pipefail
BENCH=jobs_submit
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

need node nodejs
need python3 python3
PGBENCH=$PG_BIN/pgbench
[[ -x $PGBENCH ]] || die "$PGBENCH is missing; run deploy/deps.sh (postgresql-15)"
PG_LOG=${GPUCLOUD_TEST_PG_LOG:-}
[[ -r $PG_LOG ]] || die "GPUCLOUD_TEST_PG_LOG (PostgreSQL's log file) is not readable: source var/world/env"
CONNS=${BENCH_CONNS:-16}
POOL=${BENCH_POOL:-8}
secs=${DURATION%s}

db_new
db=$DB_NAME
sql() { "$PG_BIN/psql" -qAtX -v ON_ERROR_STOP=1 "$(db_url "$db")" "$@"; }

hold_leader_lock "$db"

start() {
	[[ -n ${GC_PID:-} ]] && stop "$GC_PID"
	gc_start "$db" "$TMP/gpucloudd.log" --log-level=warn --leader-takeover-ms=3600000 --db-pool-size="$POOL"
	BASE=http://127.0.0.1:$GC_PORT
}
start
out=$(curl -fsS -m 30 -D "$TMP/login.h" -H 'Content-Type: application/json' -H "Origin: $BASE" \
	--data "{\"username\":\"admin\",\"password\":\"$ADMIN_PASSWORD\"}" "$BASE/api/v1/auth/login") ||
	die "login failed"
COOKIE="gc_session=$(sed -n 's/^[Ss]et-[Cc]ookie: gc_session=\([^;]*\).*/\1/p' "$TMP/login.h" | tr -d '\r')"
CSRF=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["csrf_token"])')
image=$(sql -c "INSERT INTO images (reference, display_name) VALUES ('reg.local/tiny:1', 'Tiny') RETURNING id" | head -n 1)

# Capture the insert as gpucloudd sends it (one submit).
sql -c "ALTER DATABASE $db SET log_min_duration_statement = 0"
start
log_from=$(stat -c %s "$PG_LOG")
code=$(curl -sS -m 30 -o "$TMP/one.json" -w '%{http_code}' -H "Cookie: $COOKIE" -H "X-CSRF-Token: $CSRF" \
	-H "Origin: $BASE" -H 'Content-Type: application/json' -H 'Idempotency-Key: capture-1' \
	--data "{\"name\":\"bench\",\"image_id\":$image,\"command\":[\"true\"],\"cpu_millis\":100,\"mem_mib\":32,\"tags\":[\"bench\"]}" \
	"$BASE/api/v1/jobs")
[[ $code == 201 ]] || die "a submit answered $code: $(head -c 300 "$TMP/one.json")"
sleep 1
sql -c "ALTER DATABASE $db RESET log_min_duration_statement"
start
tail -c +"$((log_from + 1))" "$PG_LOG" >"$TMP/pg-part.log"
python3 - "$TMP" <<'EOF'
import re, sys
tmp = sys.argv[1]
text = open(f"{tmp}/pg-part.log", encoding="utf-8", errors="replace").read()
entries = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", text)
for i, e in enumerate(entries):
    m = re.search(r"execute [^:]*: (WITH prev AS .*INSERT INTO jobs.*)", e, re.S)
    if not m:
        continue
    stmt = m.group(1).strip()
    for j in range(i + 1, min(i + 3, len(entries))):
        d = re.search(r"DETAIL:  parameters: (.*)", entries[j], re.S)
        if d:
            params = dict((int(n), v) for n, v in re.findall(r"\$(\d+) = (NULL|'(?:[^']|'')*')", d.group(1)))
            break
    else:
        sys.exit("no parameters for the insert")
    # a new key per transaction (pgbench puts :client_id and :r in)
    params[12] = "('k-' || :client_id || '-' || :r)"
    for n in sorted(params, reverse=True):
        stmt = stmt.replace(f"${n}", params[n])
    open(f"{tmp}/insert.sql", "w").write("\\set r random(1, 2000000000)\n" + stmt + ";\n")
    break
else:
    sys.exit("the insert was not in PostgreSQL's log")
EOF

jobs_now() { sql -c "SELECT count(*) FROM jobs"; }
best_rps=0 best_p99='' base_tps=0 base_p99=''
for ((round = 1; round <= ROUNDS; round++)); do
	before=$(jobs_now)
	report=$(taskset -c "$LOAD_CPU" node "$ROOT/tests/bench/submit_load.mjs" --url="$BASE" \
		--cookie="$COOKIE" --csrf="$CSRF" --image="$image" --conns="$CONNS" --duration="$secs") ||
		die "submit_load.mjs failed: $report"
	made=$(($(jobs_now) - before))
	created=$(json_field "$report" created)
	((made == created)) || die "the API answered $created 201s but $made jobs were written"
	rps=$(json_field "$report" rps) p99=$(json_field "$report" p99_ms)
	say "round $round ours: $report (all $made durable)"
	((rps > best_rps)) && best_rps=$rps
	if [[ -z $best_p99 ]] || awk -v a="$p99" -v b="$best_p99" 'BEGIN { exit !(a < b) }'; then best_p99=$p99; fi
	rm -f "$TMP"/pgb.*
	taskset -c "$LOAD_CPU" "$PGBENCH" -n -f "$TMP/insert.sql" -c "$CONNS" -j 1 -T "$secs" \
		-l --log-prefix="$TMP/pgb" "$(db_url "$db")" >"$TMP/pgbench.txt" 2>&1 || {
		cat "$TMP/pgbench.txt" >&2
		die "pgbench failed"
	}
	tps=$(awk '/^tps = / { printf "%.0f", $3 }' "$TMP/pgbench.txt")
	pp99=$(cat "$TMP"/pgb.* | awk '{ print $3 }' | sort -n |
		awk '{ v[NR] = $1 } END { i = int(NR * 0.99 + 0.999); printf "%.2f", v[i] / 1000 }')
	say "round $round pgbench (the insert alone): $tps tps, p99 $pp99 ms"
	((tps > base_tps)) && base_tps=$tps
	if [[ -z $base_p99 ]] || awk -v a="$pp99" -v b="$base_p99" 'BEGIN { exit !(a < b) }'; then base_p99=$pp99; fi
done

bench_line submit_rps "$best_rps" "$base_tps" '>=1000'
bench_line submit_p99_ms "$best_p99" "$base_p99" '<50'
