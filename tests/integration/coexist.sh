#!/usr/bin/env bash
# coexist.sh DIR — `make run`'s private engine and a test-world engine side
# by side, each started with the network settings deploy/lib.sh gives it
# (run_engine_net_args, world_engine_net_args), the world's one restarted as
# `make world` after `make world-down` restarts it.  Then each must still
# create and start a container on its default bridge network.  Prints one
# line per check ("ok ..." or "FAIL ..."); exits 1 when one failed.
#
# Its engines are its own (data and exec roots under DIR and /run/gct-*,
# world node number 7: bridge gcbr7) and run with --iptables=false, so the
# shared world's iptables chains are not rebuilt under it (see engine9.sh).
# Everything it made goes at exit.
set -uo pipefail
DIR=${1:?directory}
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
PROG=coexist
# shellcheck source=deploy/lib.sh
. "$ROOT/deploy/lib.sh"

N=7 # world node number of the world-style engine
fails=0
ok() { printf 'ok %s\n' "$*"; }
ko() {
	printf 'FAIL %s\n' "$*"
	fails=$((fails + 1))
}

install -d -m 0711 "$DIR"
# What dockerd deletes is the bridge named docker0: when there is none on the
# machine, the run-style engine (when it uses docker0) makes it and it goes at
# exit; one that was there before is another engine's and stays.
had_docker0=0
ip link show docker0 >/dev/null 2>&1 && had_docker0=1

engine() { # NAME ARGS... : start engine NAME and wait for it
	local name=$1
	shift
	dockerd_start "$DIR/$name.pid" "$DIR/$name.log" \
		--data-root "$DIR/$name/data" --exec-root "/run/gct-$name" \
		-H "unix://$DIR/$name.sock" --iptables=false \
		--containerd-namespace "gct-$name" --containerd-plugins-namespace "gct-$name-plugins" \
		--shutdown-timeout 2 "$@"
	dockerd_wait "$DIR/$name.sock" "$DIR/$name.pid" "$DIR/$name.log" 60 "$name"
}

stop() { # NAME
	dockerd_stop "$DIR/$1.sock" "$DIR/$1.pid" "/run/gct-$1" "$DIR/$1/data" "$1"
}

cleanup() {
	stop run
	stop world
	[[ -n $RUN_BRIDGE ]] && bridge_down "$RUN_BRIDGE" '10\.230\.0\.'
	bridge_down "$(world_bridge "$N")" "10\.231\.$N\."
	if ((!had_docker0)) && ip link show docker0 >/dev/null 2>&1; then
		ip link del docker0 2>/dev/null || true
	fi
	rm -rf -- "/run/gct-run" "/run/gct-world"
	umount_under "$DIR"
	rm -rf -- "$DIR"
}
trap cleanup EXIT

dk() { # NAME ARGS...
	local name=$1
	shift
	timeout 60 "$DOCKER_CLI" -H "unix://$DIR/$name.sock" "$@"
}

# A busybox image, imported (nothing is pulled).
image() { # NAME
	local r=$DIR/rootfs
	if [[ ! -d $r ]]; then
		install -d "$r/bin"
		cp /bin/busybox "$r/bin/busybox"
		ln -s busybox "$r/bin/sh"
	fi
	tar -C "$r" -c . | dk "$1" import - gct/busybox:1 >/dev/null
}

# A container on the engine's default bridge network: created, started, and
# it exits 0 having seen its own address on eth0.
bridged() { # NAME
	local name=$1 out
	if ! out=$(dk "$name" run --rm --network bridge gct/busybox:1 \
		/bin/sh -c '/bin/busybox ip -4 -o addr show dev eth0' 2>&1); then
		ko "$name: a container on the bridge network failed: $out"
		return 1
	fi
	if [[ $out != *inet* ]]; then
		ko "$name: the container had no address on eth0: $out"
		return 1
	fi
	ok "$name: a container ran on the bridge network (${out//$'\n'/ })"
}

# make run's private engine, as run.sh starts it
mapfile -t run_net < <(run_engine_net_args)
if [[ -n $RUN_BRIDGE ]]; then bridge_up "$RUN_BRIDGE" "$RUN_BRIDGE_ADDR"; fi
engine run "${run_net[@]}" || exit 1
image run
bridged run

# a world engine, as world.sh starts it: up, down, up again (a world that was
# made before keeps its data root)
mapfile -t world_net < <(world_engine_net_args "$N")
bridge_up "$(world_bridge "$N")" "$(world_bridge_addr "$N")"
engine world "${world_net[@]}" || exit 1
stop world
engine world "${world_net[@]}" || exit 1
image world
bridged world

# ... and make run's engine still works
bridged run
if [[ -n $RUN_BRIDGE ]]; then
	if ip link show "$RUN_BRIDGE" >/dev/null 2>&1; then ok "bridge $RUN_BRIDGE is there"; else ko "bridge $RUN_BRIDGE is gone"; fi
fi
if ((had_docker0)); then
	if ip link show docker0 >/dev/null 2>&1; then ok "docker0 (not ours) is there"; else ko "docker0 (not ours) was deleted"; fi
fi
((fails == 0))
