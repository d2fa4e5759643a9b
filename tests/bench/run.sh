#!/usr/bin/env bash
# run.sh [NAME] — runs every benchmark in tests/bench/ (or only NAME.sh), one
# after the other, and repeats their BENCH lines together at the end.
# Run through `make bench [NAME=...]`, which starts the test world first.
# Exits non-zero when a benchmark failed to run; the figures themselves
# never fail anything.
set -euo pipefail

DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
declare -a names=() failed=()
summary=$(mktemp "${TMPDIR:-/tmp}/gcbench-summary.XXXXXX")
trap 'rm -f -- "$summary"' EXIT

if [[ $# -gt 0 && -n $1 ]]; then
	[[ -f $DIR/$1.sh && $1 != run && $1 != lib ]] || {
		printf 'run.sh: no benchmark %s (tests/bench/%s.sh)\n' "$1" "$1" >&2
		exit 2
	}
	names=("$1")
else
	for f in "$DIR"/*.sh; do
		n=$(basename -- "$f" .sh)
		[[ $n == run || $n == lib ]] || names+=("$n")
	done
fi

for n in "${names[@]}"; do
	printf '== %s\n' "$n"
	if ! bash "$DIR/$n.sh" | tee -a "$summary"; then
		failed+=("$n")
	fi
done

printf '== summary (ratio = ours/baseline; goal says which way is better)\n'
grep '^BENCH ' "$summary" || true
if [[ ${#failed[@]} -gt 0 ]]; then
	printf 'run.sh: failed to run: %s\n' "${failed[*]}" >&2
	exit 1
fi
