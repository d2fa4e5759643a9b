#!/usr/bin/env bash
# instances.sh — instance start overhead and the lab start storm, each side
# by side with the raw Docker Engine API on the same engines and image in
# the same run (the figures are made by instances.mjs; see there):
#   start_p50_ms       create → running through gpucloudd (p50 of
#                      BENCH_START_ROUNDS, default 21) vs curl create+start
#   start_overhead_ms  gpucloudd's own time per launch: the whole less the
#                      engine calls it made (p50; goal < 25 ms, or < 5%)
#   storm_total_s      BENCH_STORM (50) users create at once → all running,
#                      vs 50 raw create+start at once (goal <= 1.3x)
#   storm_failures     goal 0
# Needs the world (both engines, the registry and its image).
set -euo pipefail
# shellcheck disable=SC2034 # read by lib.sh
BENCH=instances
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

for v in GPUCLOUD_WORLD_DOCKER1 GPUCLOUD_WORLD_DOCKER2 GPUCLOUD_WORLD_IMAGE GPUCLOUD_WORLD_REGISTRY; do
	[[ -n ${!v:-} ]] || die "$v is not set: run through make bench (it starts the world)"
done

db_new
LOG=$TMP/gc.log
# fast password hashing: 50 students sign in; a short scheduler period as a
# lab would run it (requests also nudge a pass at once)
# (BENCH_LOG_LEVEL=debug BENCH_KEEP_TMP=1: every engine call's time in the kept log)
gc_start "$DB_NAME" "$LOG" --scrypt-ln=10 --node-check-interval=1 --sched-interval-ms=200 \
	--instance-tick-ms=250 --instance-stop-grace=0 --reconcile-interval-ms=2000 --log-level="${BENCH_LOG_LEVEL:-info}"
say "gpucloudd on port $GC_PORT"
BENCH_BASE="http://127.0.0.1:$GC_PORT" BENCH_ADMIN_PASSWORD=$ADMIN_PASSWORD BENCH_LOG=$LOG \
	BENCH_DB_URL=$(db_url "$DB_NAME") node "$ROOT/tests/bench/instances.mjs"
