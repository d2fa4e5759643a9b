#!/usr/bin/env bash
# with-world.sh CMD [ARG...] — run CMD inside the test world: start it
# (deploy/world.sh up), export its addresses from var/world/env, run CMD, and
# stop the world afterwards whatever happened (set GPUCLOUD_WORLD_KEEP=1 to
# leave it running). Exits with CMD's status.
set -euo pipefail

PROG=with-world
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=deploy/lib.sh
. "$ROOT/deploy/lib.sh"

WORLD=$ROOT/deploy/world.sh
child=

if [[ $# -eq 0 ]]; then
	printf 'usage: %s CMD [ARG...]\n' "$0" >&2
	exit 2
fi

# shellcheck disable=SC2317 # called from a trap
teardown() {
	local rc=$?
	if [[ -n $child ]] && pid_alive "$child"; then
		stop_pid "$child" 10 "the command"
	fi
	if [[ ${GPUCLOUD_WORLD_KEEP:-0} == 1 ]]; then
		say "leaving the world up (GPUCLOUD_WORLD_KEEP=1); stop it with: $WORLD down"
	else
		"$WORLD" down || warn "world.sh down failed; check with: $WORLD status"
	fi
	return "$rc"
}
trap teardown EXIT
# Pass a stop request on to the command; the EXIT trap then stops the world.
# shellcheck disable=SC2317 # called from a trap
on_signal() {
	[[ -n $child ]] && kill "-$1" "$child" 2>/dev/null
	trap - INT TERM
	[[ $1 == INT ]] && exit 130
	exit 143
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM

"$WORLD" up
set -a
# shellcheck source=/dev/null
. "$ROOT/var/world/env"
set +a

# In the background so that a signal to this script is handled at once;
# stdin is passed on explicitly (background jobs would get /dev/null).
"$@" <&0 &
child=$!
set +e
wait "$child"
rc=$?
set -e
child=
exit "$rc"
