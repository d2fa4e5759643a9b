#!/usr/bin/env bash
# place.sh — the placement engine (server/sched/place.c) on a synthetic cluster:
# 1,000 nodes x 8 exclusive A100 slices plus 100 nodes x 8 GPUs x 7 shared
# slots, ~30% held, 10,000 queued requests of mixed sizes and priorities
# (tests/bench/place_bench.c says exactly what). Baseline: a deliberately
# naive placement in the same program on the same input (same order; per
# request a scan of every slice and every node, first fit; no quota, reasons,
# reservations or preemption).
#
#   pass_ms           one full pass, median of 5; lower is better, goal < 1000 ms
#   placements_per_s  placed / pass time; higher is better, goal >= 10,000
#   decision_p99_us   p99 time per request decision (a build-time hook times
#                     each decision in a separate pass); goal < 100 us
#   idle_pass_ms      a pass where nothing is placeable (every slice held);
#                     goal < 50 ms
#   rss_mib           peak resident set of the whole program; baseline: after
#                     building the inputs, before any pass; goal < 50 MiB
#
# Ratios are ours/baseline. Needs only a C compiler: no test world.
set -euo pipefail
BENCH=place
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
CC=${CC:-cc}
CPU=${BENCH_SERVER_CPU:-0}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/gcbench-$BENCH.XXXXXX")
trap 'rm -rf -- "$TMP"' EXIT

bench_line() {
	local metric=$1 value=$2 baseline=$3 goal=$4 ratio
	ratio=$(awk -v a="$value" -v b="$baseline" 'BEGIN {
		if (b + 0 == 0) print "n/a"; else printf "%.2f", a / b }')
	printf 'BENCH %s %s=%s baseline=%s ratio=%s goal=%s\n' \
		"$BENCH" "$metric" "$value" "$baseline" "$ratio" "$goal"
}

"$CC" -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I"$ROOT/server" \
	-o "$TMP/place_bench" "$ROOT/tests/bench/place_bench.c"

pin=()
if command -v taskset >/dev/null 2>&1 && taskset -c "$CPU" true 2>/dev/null; then
	pin=(taskset -c "$CPU")
fi
"${pin[@]}" "$TMP/place_bench" >"$TMP/out"
while read -r metric value baseline goal; do
	bench_line "$metric" "$value" "$baseline" "$goal"
done <"$TMP/out"
