#!/usr/bin/env bash
# run.sh [NAME] — runs every benchmark in tests/bench/ (or only NAME.sh), one
# after the other, and repeats their BENCH lines together at the end.
# Run through `make bench [NAME=...] [RUNS=3]`, which starts the test world
# first.
#
# RUNS (BENCH_RUNS) > 1 runs each benchmark that many times, one run after
# the other, and the summary gives each figure as the median over the runs:
#   BENCH <name> <metric>=<median> baseline=<median> ratio=<median of the
#   runs' ratios> goal=<goal> runs=<n> ratios=<r1>/<r2>/... load=<l1>/<l2>/...
# where load is the 1-minute load average when each run began (this machine
# is shared: a run under load says so beside its figure).
# Exits non-zero when a benchmark failed to run; the figures themselves
# never fail anything.
set -euo pipefail

DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
RUNS=${BENCH_RUNS:-1}
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || {
	printf 'run.sh: RUNS must be a positive number, not %s\n' "$RUNS" >&2
	exit 2
}
declare -a names=() failed=()
summary=$(mktemp "${TMPDIR:-/tmp}/gcbench-summary.XXXXXX")
trap 'rm -f -- "$summary"' EXIT

if [[ $# -gt 0 && -n $1 ]]; then
	[[ -f $DIR/$1.sh && $1 != run && $1 != lib && $1 != profile ]] || {
		printf 'run.sh: no benchmark %s (tests/bench/%s.sh)\n' "$1" "$1" >&2
		exit 2
	}
	names=("$1")
else
	for f in "$DIR"/*.sh; do
		n=$(basename -- "$f" .sh)
		[[ $n == run || $n == lib || $n == profile ]] || names+=("$n")
	done
fi

for n in "${names[@]}"; do
	for ((run = 1; run <= RUNS; run++)); do
		load=$(cut -d' ' -f1 /proc/loadavg)
		if ((RUNS > 1)); then
			printf '== %s (run %d of %d, load average %s)\n' "$n" "$run" "$RUNS" "$load"
		else
			printf '== %s (load average %s)\n' "$n" "$load"
		fi
		if ! bash "$DIR/$n.sh" | tee >(sed "s|\$| load=$load|" >>"$summary"); then
			failed+=("$n")
			break
		fi
	done
done
# the tee's process substitution may still be writing
wait

printf '== summary (ratio = ours/baseline; goal says which way is better)\n'
if ((RUNS == 1)); then
	grep '^BENCH ' "$summary" || true
else
	# median per figure over the runs, in the order the figures came
	grep '^BENCH ' "$summary" | awk -v runs="$RUNS" '
	function median(s,   a, n, i, j, t) {
		n = split(s, a, " ")
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
			}
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{
		key = $2 " " $3; sub(/=.*/, "", key)
		if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
		for (i = 3; i <= NF; i++) {
			split($i, kv, "=")
			if (i == 3) f = "value"; else f = kv[1]
			v = substr($i, length(kv[1]) + 2)
			if (f == "value" || f == "baseline" || f == "ratio") {
				all[key, f] = all[key, f] " " v
				if (f == "ratio") rl[key] = rl[key] (rl[key] == "" ? "" : "/") v
			} else if (f == "load") {
				ld[key] = ld[key] (ld[key] == "" ? "" : "/") v
			} else if (f == "goal") goal[key] = v
		}
		n[key]++
	}
	END {
		for (k = 1; k <= nk; k++) {
			key = order[k]; split(key, nm, " ")
			r = all[key, "ratio"] ~ /n\/a/ ? "n/a" : sprintf("%.2f", median(all[key, "ratio"]))
			printf "BENCH %s %s=%s baseline=%s ratio=%s goal=%s runs=%d ratios=%s load=%s\n",
				nm[1], nm[2], median(all[key, "value"]) "", median(all[key, "baseline"]) "",
				r, goal[key], n[key], rl[key], ld[key]
		}
	}'
fi
if [[ ${#failed[@]} -gt 0 ]]; then
	printf 'run.sh: failed to run: %s\n' "${failed[*]}" >&2
	exit 1
fi
