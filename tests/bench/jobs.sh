#!/usr/bin/env bash
# jobs.sh — training jobs: start overhead and the log path, each side by side
# with the raw Docker Engine API on the same engine and image in the same run
# (the figures are made by jobs.mjs; see there):
#   start_p50_ms          submit → running through gpucloudd (p50 of
#                         BENCH_JOB_ROUNDS, default 15) vs curl create+start
#                         of the very container gpucloudd made (goal < 1.05)
#   follow_p50_ms         a line the container writes → the SSE client
#                         (gpucloudd's /jobs/{id}/logs?follow=1) vs the
#                         engine's own logs?follow=1 stream (goal < 100 ms)
#   follow200_p50_ms      the same with 200 followers of that one log
#   chatty_runtime_s      a job writing 20 MB of lines, with 200 followers
#                         vs with none (the job must not slow down: goal
#                         <= 1.1)
#   log50mb_hwm_mib       gpucloudd's peak resident set after a job wrote
#                         50 MB of log vs before it (goal < 64 MiB)
# Needs the world (engine 1, the registry and its busybox image).
set -euo pipefail
# shellcheck disable=SC2034 # read by lib.sh
BENCH=jobs
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

for v in GPUCLOUD_WORLD_DOCKER1 GPUCLOUD_WORLD_DOCKER2 GPUCLOUD_WORLD_IMAGE GPUCLOUD_WORLD_REGISTRY; do
	[[ -n ${!v:-} ]] || die "$v is not set: run through make bench (it starts the world)"
done

db_new
LOG=$TMP/gc.log
gc_start "$DB_NAME" "$LOG" --scrypt-ln=10 --node-check-interval=1 --sched-interval-ms=200 \
	--instance-tick-ms=250 --reconcile-interval-ms=2000 --log-level="${BENCH_LOG_LEVEL:-info}"
say "gpucloudd on port $GC_PORT"
BENCH_BASE="http://127.0.0.1:$GC_PORT" BENCH_ADMIN_PASSWORD=$ADMIN_PASSWORD BENCH_LOG=$LOG \
	BENCH_GC_PID=$GC_PID BENCH_DB_URL=$(db_url "$DB_NAME") node "$ROOT/tests/bench/jobs.mjs"
