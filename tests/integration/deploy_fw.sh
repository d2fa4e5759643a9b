#!/usr/bin/env bash
# deploy_fw.sh DIR — the app-port firewall node-setup.sh writes, tried on real
# packets in network namespaces of its own (nothing of the machine's own
# rules or interfaces is touched): a "node" namespace that forwards and
# DNATs its port 8080 to a "container" namespace's web server as Docker does
# for a published port, with the rule applied inside it; a "control plane"
# and an "outsider" namespace each on a link of its own.  Prints "ok ..." or
# "FAIL ..." per check; exits 1 when one failed.  Everything goes at exit.
set -uo pipefail
DIR=${1:?directory}
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
tag=gf$$ # interface names: at most 15 characters
N=$tag-n C=$tag-c P=$tag-p K=$tag-k
fails=0
ok() { printf 'ok %s\n' "$*"; }
ko() {
	printf 'FAIL %s\n' "$*"
	fails=$((fails + 1))
}
nsx() {
	local ns=$1
	shift
	ip netns exec "$ns" "$@"
}
cleanup() {
	local ns pid
	# every process in our namespaces (the web servers) goes first
	for ns in "$N" "$C" "$P" "$K"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null; done
	done
	for ns in "$N" "$C" "$P" "$K"; do ip netns del "$ns" 2>/dev/null; done
	rm -rf -- "$DIR"
}
trap cleanup EXIT
set -e
install -d -m 0711 "$DIR/www"
printf 'app\n' >"$DIR/www/index.html"
for ns in "$N" "$C" "$P" "$K"; do ip netns add "$ns"; done
# link NS SUBNET : a veth from the node to NS, the node .1, NS .2 (its gateway)
link() {
	local ns=$1 net=$2
	ip link add "$ns-a" type veth peer name "$ns-b"
	ip link set "$ns-a" netns "$N"
	ip link set "$ns-b" netns "$ns"
	nsx "$N" ip addr add "$net.1/24" dev "$ns-a"
	nsx "$N" ip link set "$ns-a" up
	nsx "$ns" ip addr add "$net.2/24" dev "$ns-b"
	nsx "$ns" ip link set "$ns-b" up
	nsx "$ns" ip link set lo up
	nsx "$ns" ip route add default via "$net.1"
}
link "$C" 10.99.1
link "$P" 10.99.2
link "$K" 10.99.3
nsx "$N" ip link set lo up
nsx "$N" sysctl -qw net.ipv4.ip_forward=1
# what dockerd does for a published port 8080 -> container :80
nsx "$N" iptables -w -t nat -A PREROUTING -p tcp --dport 8080 -j DNAT --to-destination 10.99.3.2:80
nsx "$N" iptables -w -N DOCKER-USER
nsx "$N" iptables -w -A FORWARD -j DOCKER-USER
# web servers: ip netns exec becomes busybox (same pid), and holds no pipe
# of the caller's open
ip netns exec "$K" busybox httpd -f -p 80 -h "$DIR/www" </dev/null >/dev/null 2>&1 &
ip netns exec "$C" busybox httpd -f -p 81 -h "$DIR/www" </dev/null >/dev/null 2>&1 &
set +e
get() { nsx "$1" curl -s -m 3 "$2"; }
check() { # DESCRIPTION COMMAND... : ok when COMMAND succeeds
	local what=$1
	shift
	if "$@"; then ok "$what"; else ko "$what"; fi
}
is() { [[ $1 == "$2" ]]; }
isnt() { [[ $1 != "$2" ]]; }
for _ in $(seq 50); do nsx "$C" curl -s -m 1 -o /dev/null http://10.99.1.1:8080/ && break; sleep 0.1; done
check "without the rule, any address reaches the published port" is "$(get "$C" http://10.99.1.1:8080/)" app

# node-setup.sh's rule, written for control plane 10.99.2.2 and run in the node
bash "$ROOT/deploy/node-setup.sh" --control-plane 10.99.2.2 --address 10.99.1.1 --name fw \
	--target "$DIR/t" --firewall none >/dev/null 2>&1 || ko "node-setup.sh failed"
nsx "$N" "$DIR/t/usr/local/sbin/gpucloud-node-firewall" || ko "the firewall script failed"
check "the control plane reaches the published port" is "$(get "$P" http://10.99.2.1:8080/)" app
check "another address cannot reach it" isnt "$(get "$C" http://10.99.1.1:8080/)" app
check "traffic Docker did not DNAT is not the rule's" is "$(get "$C" http://10.99.3.2:80/)" app
check "the container's own outgoing connections pass" is "$(get "$K" http://10.99.1.2:81/)" app
# applied twice: the same rules
before=$(nsx "$N" iptables -w -S)
nsx "$N" "$DIR/t/usr/local/sbin/gpucloud-node-firewall"
check "applying it again changes nothing" is "$(nsx "$N" iptables -w -S)" "$before"
((fails == 0))
