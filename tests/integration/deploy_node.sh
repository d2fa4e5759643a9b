#!/usr/bin/env bash
# deploy_node.sh — a Docker engine configured by deploy/node-setup.sh, for
# deploy_node.test.mjs.  The engine is the test's own, started as world
# engines are (deploy/lib.sh): own data root, exec root, pid file, containerd
# namespace and bridge (world node number 6: gcbr6, 10.231.6.1/24, used by
# nothing else), with --iptables=false so the shared world's iptables chains
# are not rebuilt under other tests (see engine9.sh).  dockerd refuses
# icc=false without iptables, so its copy of daemon.json says icc=true; every
# other setting is node-setup.sh's.  Its firewall goes into test chains that
# nothing jumps to (GCT-DEPLOY-USER -> GCT-DEPLOY-APPS), never DOCKER-USER.
#   deploy_node.sh setup DIR PORT API   node-setup.sh into DIR/target, the
#                                       firewall applied to the test chains
#   deploy_node.sh start DIR            start the engine with that daemon.json
#   deploy_node.sh down DIR             stop it; remove bridge, chains, DIR
set -euo pipefail
cmd=${1:?setup|start|down} DIR=${2:?directory}
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
PROG=deploy_node
# shellcheck source=deploy/lib.sh
. "$ROOT/deploy/lib.sh"
N=6 NAME=gctdeploy
BR=$(world_bridge $N)
EXECROOT=/run/gct-$NAME
SOCK=$DIR/node.sock

case $cmd in
setup)
	port=${3:?port} api=${4:?api}
	install -d -m 0711 "$DIR"
	bash "$ROOT/deploy/node-setup.sh" --control-plane 127.0.0.1 --address 127.0.0.1 \
		--name "$NAME" --port "$port" --api "$api" --target "$DIR/target" \
		--unix-socket "$SOCK" --chain GCT-DEPLOY-USER --apps-chain GCT-DEPLOY-APPS
	;;
start)
	bridge_up "$BR" "$(world_bridge_addr $N)"
	sed 's/"icc": false/"icc": true/' "$DIR/target/etc/docker/daemon.json" >"$DIR/daemon.json"
	dockerd_start "$DIR/node.pid" "$DIR/node.log" --config-file "$DIR/daemon.json" \
		--data-root "$DIR/data" --exec-root "$EXECROOT" --iptables=false --bridge "$BR" \
		--containerd-namespace "gct-$NAME" --containerd-plugins-namespace "gct-$NAME-plugins" \
		--shutdown-timeout 2
	dockerd_wait "$SOCK" "$DIR/node.pid" "$DIR/node.log" 60 "$NAME"
	;;
down)
	dockerd_stop "$SOCK" "$DIR/node.pid" "$EXECROOT" "$DIR/data" "$NAME"
	bridge_down "$BR" "10\.231\.$N\."
	for c in GCT-DEPLOY-USER GCT-DEPLOY-APPS; do
		iptables -w -F "$c" 2>/dev/null || true
	done
	for c in GCT-DEPLOY-USER GCT-DEPLOY-APPS; do
		iptables -w -X "$c" 2>/dev/null || true
	done
	rm -rf -- "$EXECROOT"
	umount_under "$DIR"
	rm -rf -- "$DIR"
	;;
*) die "unknown command $cmd" ;;
esac
