#!/usr/bin/env bash
# class_storm.sh — a lab start storm in a class (issue 14): 60 students of a
# class request instances within one second (class context: the class's
# pool, its allocation, one slice each), against the raw Docker Engine API
# creating and starting 60 of the same containers on the same engines in
# the same run (figures by class_storm.mjs; see there):
#   all_running_ms   the first request → the last student's instance
#                    running, vs raw create+start of 60 (goal <= 1.15)
#   slowest_wait_ms  the slowest student's request → running
#   failures         refused or never running (goal 0)
# Needs the world (both engines, the registry and its busybox image).
set -euo pipefail
# shellcheck disable=SC2034 # read by lib.sh
BENCH=class_storm
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

for v in GPUCLOUD_WORLD_DOCKER1 GPUCLOUD_WORLD_DOCKER2 GPUCLOUD_WORLD_IMAGE GPUCLOUD_WORLD_REGISTRY; do
	[[ -n ${!v:-} ]] || die "$v is not set: run through make bench (it starts the world)"
done

db_new
LOG=$TMP/gc.log
# fast password hashing: 60 students sign in
gc_start "$DB_NAME" "$LOG" --scrypt-ln=10 --node-check-interval=1 --sched-interval-ms=200 \
	--instance-tick-ms=250 --instance-stop-grace=0 --reconcile-interval-ms=2000 --log-level="${BENCH_LOG_LEVEL:-info}"
say "gpucloudd on port $GC_PORT"
BENCH_BASE="http://127.0.0.1:$GC_PORT" BENCH_ADMIN_PASSWORD=$ADMIN_PASSWORD BENCH_LOG=$LOG \
	BENCH_DB_URL=$(db_url "$DB_NAME") node "$ROOT/tests/bench/class_storm.mjs"
