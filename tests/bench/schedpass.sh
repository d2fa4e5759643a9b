#!/usr/bin/env bash
# schedpass.sh — one full scheduling pass end to end, in the real server
# against the real database: 1,000 nodes x 8 GPUs (one exclusive pool,
# 8,000 slices) and 10,000 queued requests of mixed sizes (70% 1 slice, 20%
# 2, 7% 4, 2% 8, 1% gangs of 2 nodes x 8) and priorities (5% exam, ~14%
# scavenger, the rest normal) from 100 users, seeded with SQL.  The pass
# reads the snapshot, places, and commits every allocation and every
# request's reason and position in one transaction; the server logs its
# duration.  A second pass, with the pool full, places nothing.
#
# The queue arrives at a running scheduler: the cluster is seeded first,
# gpucloudd starts on it, and the 10,000 requests are committed at once
# after its start-up checks of the 1,000 nodes are written.  (When they were
# seeded before the start, the first pass shared the database with those
# 1,000 writes and paid the leader session's first statements: 150 ms of
# its queue read, against 26 ms in the pass after it.)
#
# Baseline: the database floor for the same writes — one psql statement that
# inserts as many allocation rows and updates the 10,000 requests the same
# way the pass does (no snapshot, no placement).  ratio = ours / floor.
# Goals from the issue: pass < 1 s, nothing placeable < 50 ms, RSS < 50 MB.
set -euo pipefail
# shellcheck disable=SC2034 # read by lib.sh
BENCH=schedpass
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

PSQL() { "$PG_BIN/psql" -qAtX -v ON_ERROR_STOP=1 "$(db_url "$DB_NAME")" "$@"; }

db_new
LOG=$TMP/gc.log
# first start: migrations and the admin; then the synthetic cluster
gc_start "$DB_NAME" "$LOG" --sched-interval-ms=600000 --log-level=warn
kill -TERM "$GC_PID"
wait "$GC_PID" 2>/dev/null || true

say "seeding 1,000 nodes x 8 GPUs"
PSQL <<'SQL'
INSERT INTO users (username, role, password_hash)
SELECT 'u' || i, 'student', '$scrypt$bench' FROM generate_series(1, 100) i;
INSERT INTO nodes (name, url, health, admin_state, ncpu, memory_bytes)
SELECT 'n' || i, 'unix:///nonexistent/n' || i || '.sock', 'up', 'active', 64, 549755813888
FROM generate_series(1, 1000) i;
INSERT INTO pools (name) VALUES ('a100');
-- quotas deny by default: the students may use the whole pool
INSERT INTO quota_defaults (role, pool_id) VALUES ('student', (SELECT id FROM pools));
INSERT INTO gpus (node_id, idx, uuid, model, memory_mib, simulated, devices, pool_id)
SELECT n.id, g, 'GPU-bench-' || n.id || '-' || g, 'NVIDIA A100-SXM4-80GB', 81920, true,
       ARRAY['/dev/null'], (SELECT id FROM pools)
FROM nodes n, generate_series(0, 7) g;
INSERT INTO slices (pool_id, gpu_id, slot) SELECT pool_id, id, 0 FROM gpus;
ANALYZE;
SQL

# the node check would mark these unreachable nodes down: not within the run
gc_start "$DB_NAME" "$LOG" --sched-interval-ms=2000 --log-level=debug \
	--node-check-interval=3600 --node-down-after=86400
# its first check of every node is written (each an error: no engine there)
for ((i = 0; i < 600; i++)); do
	[[ $(PSQL -c "SELECT count(*) FROM nodes WHERE last_error <> ''") -ge 1000 ]] && break
	sleep 0.1
done
say "the queue arrives: 10,000 requests in one transaction"
PSQL <<'SQL'
BEGIN;
INSERT INTO alloc_requests (user_id, pool_id, priority, slices, nodes, cpu_millis, mem_mib, created_at)
SELECT (SELECT id FROM users WHERE username = 'u' || (1 + i % 100)), (SELECT id FROM pools),
       (CASE WHEN i % 20 = 0 THEN 'exam' WHEN i % 7 = 0 THEN 'scavenger' ELSE 'normal' END)::alloc_priority,
       CASE WHEN i % 100 < 70 THEN 1 WHEN i % 100 < 90 THEN 2 WHEN i % 100 < 97 THEN 4 ELSE 8 END,
       CASE WHEN i % 100 = 99 THEN 2 ELSE 1 END, 100, 1024,
       now() - make_interval(secs => 10000 - i)
FROM generate_series(1, 10000) i;
ANALYZE alloc_requests;
COMMIT;
SQL
pass_line() {
	local i
	for ((i = 0; i < 600; i++)); do
		if grep -q "module=sched msg=\"pass: .* placed" "$LOG" &&
			[[ $(grep -c "module=sched msg=\"pass: " "$LOG") -ge $1 ]]; then
			grep "module=sched msg=\"pass: " "$LOG" | sed -n "${1}p"
			return 0
		fi
		sleep 0.1
	done
	tail -n 20 "$LOG" >&2
	die "no scheduler pass $1 in the log"
}
first=$(pass_line 1)
say "$first"
placed=$(sed -E 's/.*pass: ([0-9]+) placed.*/\1/' <<<"$first")
pass_ms=$(sed -E 's/.*waiting, ([0-9.]+) ms.*/\1/' <<<"$first")
engine_ms=$(sed -E 's/.*placement ([0-9.]+) ms.*/\1/' <<<"$first")
grants=$(PSQL -c 'SELECT count(*) FROM allocations WHERE released_at IS NULL')
[[ $grants -gt 0 ]] || die "the pass committed no allocation"
dup=$(PSQL -c 'SELECT count(*) - count(DISTINCT slice_id) FROM allocations WHERE released_at IS NULL')
[[ $dup -eq 0 ]] || die "a slice was granted twice"
# peak memory so far: start-up, 1,000 engine clients, the pass (a login
# later verifies a scrypt hash, which alone needs 128 MiB)
rss=$(awk -v k="$(vm_kb "$GC_PID" VmHWM)" 'BEGIN { printf "%.1f", k / 1024 }')

# a pass with the pool full: ask for one more slice through the API
cookie=$(gc_login "$GC_PORT")
csrf=$(json_field "$(curl -fsS -m 10 -H "Cookie: gc_session=$cookie" \
	"http://127.0.0.1:$GC_PORT/api/v1/me")" csrf_token)
curl -fsS -m 30 -o /dev/null -H "Cookie: gc_session=$cookie" -H 'Content-Type: application/json' \
	-H "Origin: http://127.0.0.1:$GC_PORT" -H "X-CSRF-Token: $csrf" \
	--data '{"pool":"a100","slices":1}' "http://127.0.0.1:$GC_PORT/api/v1/allocations"
second=$(pass_line 2)
say "$second"
idle_ms=$(sed -E 's/.*waiting, ([0-9.]+) ms.*/\1/' <<<"$second")
third=$(pass_line 3)
say "$third"
steady_ms=$(sed -E 's/.*waiting, ([0-9.]+) ms.*/\1/' <<<"$third")

# the floor: the same writes (as many allocation rows, each naming a slice
# and its node as the pass's do, so the same foreign keys are checked;
# every request's reason and position) as plain statements, rolled back.
# The rows are born released: the pool's slices are all held by now.
# Three times, the median kept: one run of it moved 470-790 ms here between
# runs of the bench.  (The 2nd and 3rd find warm caches, so the median is
# if anything a faster floor than the pass met.)
floor_once() {
	PSQL <<SQL | awk '/^Time:/ { t += $2 } END { printf "%.1f", t }'
\\timing on
BEGIN;
INSERT INTO allocations (request_id, slice_id, node_id, released_at)
SELECT r.id, s.id, s.node_id, now()
FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM alloc_requests LIMIT $grants) r
JOIN (SELECT s.id, g.node_id, row_number() OVER (ORDER BY s.id) AS n
      FROM slices s JOIN gpus g ON g.id = s.gpu_id) s ON s.n = r.n;
UPDATE alloc_requests SET reason_code = 'capacity', reason = 'waiting', position = id;
ROLLBACK;
SQL
}
floors=$(for _ in 1 2 3; do floor_once; echo; done)
floor_ms=$(sort -n <<<"$floors" | sed -n 2p)
floor_ms=${floor_ms:-0}
say "database floor, 3 runs: $(tr '\n' ' ' <<<"$floors")"
say "placed $placed requests ($grants slices); engine $engine_ms ms; database floor $floor_ms ms"

bench_line pass_ms "$pass_ms" "$floor_ms" "<1000"
bench_line placements_per_s "$(awk -v p="$placed" -v t="$pass_ms" 'BEGIN { printf "%.0f", p / (t / 1000) }')" \
	"$(awk -v p="$placed" -v t="$floor_ms" 'BEGIN { if (t > 0) printf "%.0f", p / (t / 1000); else print 0 }')" ">=10000"
bench_line placement_engine_ms "$engine_ms" "$pass_ms" "<1000"
bench_line full_pool_pass_ms "$idle_ms" "$floor_ms" "<50"
bench_line steady_pass_ms "$steady_ms" "$floor_ms" "<50"
bench_line rss_mib "$rss" "50" "<50"
