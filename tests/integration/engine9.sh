#!/usr/bin/env bash
# engine9.sh — a throw-away Docker engine for the reconciliation test, so the
# test can stop and restart an engine without touching the shared world's.
# Own data root, exec root, socket, pid file, containerd namespace and
# bridge (gcbr9, 10.231.9.1/24: not used by the world's gcbr1/gcbr2).
# It runs with --iptables=false: a dockerd starting with iptables on rebuilds
# the host's shared DOCKER-ISOLATION chains and so drops the rules that keep
# the world engines' per-user networks apart (netiso.test.mjs) until those
# networks are made again.  Its published ports still work on loopback
# through docker-proxy, and its containers need no way out.
# Like the world's engines it has address pools, so it runs with
# --live-restore (else each restart would delete the host's docker0: see
# deploy/lib.sh); `stop` kills its containers first, as an engine without
# live restore stops them on the way out.
#   engine9.sh start DIR   start (or keep) it; prints unix://DIR/node9.sock
#   engine9.sh stop DIR    stop dockerd (containers stop with it)
#   engine9.sh crash DIR   kill -9 dockerd: its containers run on (live
#                          restore), unreachable, as on a node that crashed
#   engine9.sh down DIR    stop, remove its bridge, rules and DIR
set -euo pipefail
cmd=${1:?start|stop|crash|down} dir=${2:?directory}
sock=$dir/node9.sock pidfile=$dir/node9.pid br=gcbr9 execroot=/run/gcw-node9

answers() { curl -sf --unix-socket "$sock" http://x/_ping >/dev/null 2>&1; }

start() {
	install -d -m 0711 "$dir"
	ip link show "$br" >/dev/null 2>&1 || ip link add "$br" type bridge
	ip -4 -o addr show dev "$br" | grep -q ' 10.231.9.1/24 ' || ip addr add 10.231.9.1/24 dev "$br"
	ip link set "$br" up
	if ! answers; then
		setsid dockerd --pidfile "$pidfile" --data-root "$dir/data" --exec-root "$execroot" \
			-H "unix://$sock" --bridge "$br" --iptables=false --default-address-pool "base=10.249.0.0/16,size=24" \
			--containerd-namespace gcw-node9 --containerd-plugins-namespace gcw-node9-plugins \
			--add-runtime "nvidia=$(command -v runc)" --shutdown-timeout 2 --live-restore \
			</dev/null >>"$dir/node9.log" 2>&1 &
	fi
	for _ in $(seq 1 300); do answers && { echo "unix://$sock"; return 0; }; sleep 0.1; done
	echo "engine9 did not start; log:" >&2
	tail -20 "$dir/node9.log" >&2
	return 1
}

stop() {
	local pid ids
	pid=$(cat "$pidfile" 2>/dev/null || true)
	[[ -n $pid ]] || return 0
	if answers; then
		ids=$(timeout 20 docker -H "unix://$sock" ps -q 2>/dev/null || true)
		# shellcheck disable=SC2086 # one id per word
		[[ -z $ids ]] || timeout 30 docker -H "unix://$sock" kill $ids >/dev/null 2>&1 || true
	fi
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null || true
}

crash() {
	local pid
	pid=$(cat "$pidfile" 2>/dev/null || true)
	[[ -n $pid ]] || return 0
	kill -KILL "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
}

down() {
	# a crashed engine comes back first, so that its containers go with it
	[[ -e $sock ]] && ! answers && start >/dev/null 2>&1 || true
	stop
	if ip link show "$br" >/dev/null 2>&1; then ip link del "$br" || true; fi
	for table in filter nat; do
		{ iptables -w -t "$table" -S 2>/dev/null | grep -E -- "^-A .*( $br( |$)| 10\.231\.9\.)" || true; } |
			while read -r rule; do
				# shellcheck disable=SC2086
				iptables -w -t "$table" ${rule/-A/-D} 2>/dev/null || true
			done
	done
	# dockerd leaves its data root bind-mounted on itself (and an exec root)
	awk -v d="$dir" -v e="$execroot" 'index($2, d) == 1 || index($2, e) == 1 { print $2 }' /proc/mounts |
		sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	rm -rf -- "$execroot" 2>/dev/null || true
	rm -rf -- "$dir"
}

case $cmd in
start) start ;;
stop) stop ;;
crash) crash ;;
down) down ;;
*) echo "usage: $0 start|stop|crash|down DIR" >&2; exit 2 ;;
esac
