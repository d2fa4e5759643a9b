#!/usr/bin/env bash
# node-setup.sh — turns a Docker host into a gpucloud node.  Run it as root on
# the node (dockerd and, where there are GPUs, the NVIDIA container toolkit
# installed).  It
#   1. makes mutual-TLS certificates with OpenSSL (a CA, the engine's server
#      certificate with the node's address as subjectAltName, a client
#      certificate for the control plane), or installs given ones;
#   2. writes dockerd's daemon.json: TLS with client verification on
#      tcp://ADDR:2376 (plus the local socket), live-restore, icc=false,
#      default ulimits, bounded logs, the nvidia runtime when the toolkit is
#      there (keys of an existing daemon.json are kept; a backup is left);
#   3. writes and applies the firewall rule that lets only the control plane
#      reach containers' published (app) ports: a chain GPUCLOUD-APPS jumped
#      to from Docker's DOCKER-USER chain, and a systemd drop-in that applies
#      it again whenever docker.service starts;
#   4. restarts dockerd (or prints how), and prints the registration command:
#      a curl POST to the control plane's /api/v1/nodes with a JSON body
#      (register.json, mode 0600: it holds the client key) that carries the
#      CA, the client certificate and key.
#
# Usage: node-setup.sh --control-plane ADDR [options]
#   --control-plane ADDR  address (or CIDR) gpucloudd connects from; the only
#                         source allowed to reach published app ports (several
#                         replicas: comma-separated)
#   --address ADDR        address (IP or DNS name) gpucloudd reaches this
#                         engine at (default: the first global IPv4 address)
#   --san SAN             another subjectAltName (IP:x or DNS:x; repeatable)
#   --name NAME           node name (default: the short host name)
#   --port PORT           the engine's TLS port (default 2376)
#   --api URL             gpucloudd's URL, for the printed command
#                         (default https://gpucloud.example.edu)
#   --target DIR          write everything under DIR instead of the system
#                         places (TLS files, daemon.json, firewall script,
#                         drop-in, register.json); implies --no-restart
#   --tls-dir DIR         certificates (default /etc/docker/gpucloud-tls)
#   --daemon-json FILE    (default /etc/docker/daemon.json)
#   --unix-socket PATH    the local socket dockerd keeps (default
#                         /var/run/docker.sock)
#   --ca-cert F --ca-key F  sign with this CA (one CA for all nodes)
#   --server-cert F --server-key F --client-cert F --client-key F  (with
#                         --ca-cert) install these instead of making any
#   --days N              validity of new leaf certificates (default 825)
#   --chain NAME          Docker's user chain to hook into (default
#                         DOCKER-USER; tests use a chain of their own)
#   --apps-chain NAME     the chain of the rule (default GPUCLOUD-APPS)
#   --firewall apply|print|none  apply the rule (default), only print it, or
#                         skip it
#   --dry-run             same as --firewall print --no-restart
#   --no-restart          do not restart dockerd; print how instead
set -euo pipefail
umask 077
PROG=node-setup

say() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
	printf '%s: error: %s\n' "$PROG" "$*" >&2
	exit 1
}
usage() {
	sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit "${1:-0}"
}

control_plane='' address='' name='' port=2376 api=https://gpucloud.example.edu
target='' tls_dir='' daemon_json='' unix_socket=/var/run/docker.sock
ca_cert='' ca_key='' server_cert='' server_key='' client_cert='' client_key=''
days=825 chain=DOCKER-USER apps_chain=GPUCLOUD-APPS firewall=apply restart=1
sans=()
while (($#)); do
	opt=$1
	case $opt in
	-h | --help) usage 0 ;;
	--dry-run)
		firewall=print restart=0
		shift
		continue
		;;
	--no-restart)
		restart=0
		shift
		continue
		;;
	--*=*)
		set -- "${opt%%=*}" "${opt#*=}" "${@:2}"
		continue
		;;
	esac
	(($# >= 2)) || die "$opt needs a value (see --help)"
	val=$2
	case $opt in
	--control-plane) control_plane=$val ;;
	--address) address=$val ;;
	--san) sans+=("$val") ;;
	--name) name=$val ;;
	--port) port=$val ;;
	--api) api=${val%/} ;;
	--target) target=$val ;;
	--tls-dir) tls_dir=$val ;;
	--daemon-json) daemon_json=$val ;;
	--unix-socket) unix_socket=$val ;;
	--ca-cert) ca_cert=$val ;;
	--ca-key) ca_key=$val ;;
	--server-cert) server_cert=$val ;;
	--server-key) server_key=$val ;;
	--client-cert) client_cert=$val ;;
	--client-key) client_key=$val ;;
	--days) days=$val ;;
	--chain) chain=$val ;;
	--apps-chain) apps_chain=$val ;;
	--firewall) firewall=$val ;;
	*) die "unknown option $opt (see --help)" ;;
	esac
	shift 2
done

[[ -n $control_plane ]] || die "--control-plane ADDR is needed: the address gpucloudd connects from"
cidr='[0-9A-Fa-f:.]+(/[0-9]{1,3})?'
[[ $control_plane =~ ^$cidr(,$cidr)*$ ]] ||
	die "--control-plane must be IP addresses or CIDRs, comma-separated, not '$control_plane'"
if ! [[ $port =~ ^[0-9]+$ ]] || ((port < 1 || port > 65535)); then die "--port must be 1-65535"; fi
[[ $days =~ ^[0-9]+$ ]] || die "--days must be a number"
[[ $firewall == apply || $firewall == print || $firewall == none ]] ||
	die "--firewall is apply, print or none"
[[ $chain =~ ^[A-Za-z0-9_-]{1,28}$ && $apps_chain =~ ^[A-Za-z0-9_-]{1,28}$ ]] ||
	die "--chain and --apps-chain must be iptables chain names"
command -v openssl >/dev/null || die "openssl is needed"

if [[ -n $target ]]; then
	install -d -m 0755 "$target"
	target=$(cd -- "$target" && pwd -P)
	restart=0
fi
root=${target:-}
tls_dir=${tls_dir:-$root/etc/docker/gpucloud-tls}
daemon_json=${daemon_json:-$root/etc/docker/daemon.json}
fw_script=$root/usr/local/sbin/gpucloud-node-firewall
dropin=$root/etc/systemd/system/docker.service.d/gpucloud-firewall.conf
hosts_dropin=$root/etc/systemd/system/docker.service.d/gpucloud-hosts.conf
register=$tls_dir/register.json

if [[ -z $address ]]; then
	address=$(ip -4 -o addr show scope global 2>/dev/null | awk '!a {sub(/\/.*/, "", $4); a = $4} END {print a}')
	[[ -n $address ]] || die "cannot tell this host's address: give --address"
fi
if [[ -z $name ]]; then
	name=$(hostname -s 2>/dev/null || hostname)
	name=${name,,}
fi
[[ $name =~ ^[a-z0-9][a-z0-9._-]{0,62}$ ]] || die "node name '$name' must be 1-63 of a-z 0-9 . _ - (give --name)"

# ---------------------------------------------------------------------------
# 1. certificates

install -d -m 0700 "$tls_dir"
ca=$tls_dir/ca.pem
srv_cert=$tls_dir/server-cert.pem srv_key=$tls_dir/server-key.pem
cli_cert=$tls_dir/client-cert.pem cli_key=$tls_dir/client-key.pem

ip_like() { [[ $1 =~ ^[0-9.]+$ || $1 == *:* ]]; }
san_list() {
	local s out
	if ip_like "$address"; then out="IP:$address"; else out="DNS:$address"; fi
	for s in "${sans[@]}"; do
		[[ $s == IP:* || $s == DNS:* ]] || die "--san must start with IP: or DNS: ('$s')"
		out+=",$s"
	done
	printf '%s\n' "$out"
}

newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# sign CN EXT_FILE KEY CERT : a leaf certificate signed by the CA
sign() {
	local cn=$1 ext=$2 key=$3 cert=$4 csr
	csr=$(mktemp)
	newkey "$key"
	openssl req -new -key "$key" -subj "/CN=$cn" -out "$csr"
	openssl x509 -req -in "$csr" -CA "$ca" -CAkey "$ca_key" -CAcreateserial \
		-CAserial "$tls_dir/ca.srl" -days "$days" -sha256 -extfile "$ext" -out "$cert" 2>/dev/null
	rm -f -- "$csr" "$ext"
}

if [[ -n $server_cert || -n $client_cert ]]; then
	# install given certificates
	for f in "$ca_cert" "$server_cert" "$server_key" "$client_cert" "$client_key"; do
		[[ -n $f && -r $f ]] || die "installing given certificates needs --ca-cert, --server-cert, --server-key, --client-cert and --client-key"
	done
	install -m 0644 "$ca_cert" "$ca"
	install -m 0644 "$server_cert" "$srv_cert"
	install -m 0600 "$server_key" "$srv_key"
	install -m 0644 "$client_cert" "$cli_cert"
	install -m 0600 "$client_key" "$cli_key"
	say "installed the given certificates in $tls_dir"
elif [[ -s $srv_cert && -s $cli_cert && -s $ca ]]; then
	say "keeping the certificates already in $tls_dir (remove them to make new ones)"
else
	if [[ -n $ca_cert ]]; then
		[[ -r $ca_cert && -r $ca_key ]] || die "--ca-cert needs --ca-key (to sign) or the leaf certificates (to install)"
		install -m 0644 "$ca_cert" "$ca"
	else
		ca_key=$tls_dir/ca-key.pem
		newkey "$ca_key"
		openssl req -x509 -new -key "$ca_key" -sha256 -days 3650 \
			-subj "/CN=gpucloud node CA ($name)" \
			-addext basicConstraints=critical,CA:TRUE \
			-addext keyUsage=critical,keyCertSign,cRLSign -out "$ca"
		chmod 0644 "$ca"
		say "made a CA: $ca (its key $ca_key signs nothing else; keep it or delete it)"
	fi
	ext=$(mktemp)
	printf '%s\n' "subjectAltName=$(san_list)" "extendedKeyUsage=serverAuth" \
		"keyUsage=critical,digitalSignature,keyEncipherment" "basicConstraints=CA:FALSE" >"$ext"
	sign "$name" "$ext" "$srv_key" "$srv_cert"
	ext=$(mktemp)
	printf '%s\n' "extendedKeyUsage=clientAuth" "keyUsage=critical,digitalSignature" \
		"basicConstraints=CA:FALSE" >"$ext"
	sign "gpucloud-control-plane" "$ext" "$cli_key" "$cli_cert"
	chmod 0644 "$srv_cert" "$cli_cert"
	say "made the engine's certificate ($(san_list)) and the control plane's client certificate"
fi
openssl verify -CAfile "$ca" "$srv_cert" "$cli_cert" >/dev/null ||
	die "the certificates in $tls_dir do not chain to $ca"

# ---------------------------------------------------------------------------
# 2. daemon.json

json_str() { # a JSON string of the file's or argument's text
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/\\n}
	printf '"%s"' "$s"
}

host_addr=$address
[[ $host_addr == *:* && $host_addr != \[* ]] && host_addr="[$host_addr]"
# listen on the address gpucloudd uses when it is one of ours, else on all
listen=0.0.0.0
addrs=$(ip -o addr show 2>/dev/null || true)
if ip_like "$address" && [[ $addrs == *" $address/"* ]]; then
	listen=$host_addr
fi
runtimes=''
if command -v nvidia-container-runtime >/dev/null 2>&1; then
	runtimes=$(printf ',\n  "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}}')
	say "found the NVIDIA container toolkit: the nvidia runtime is configured"
fi
ours=$(
	cat <<EOF
{
  "hosts": [$(json_str "unix://$unix_socket"), $(json_str "tcp://$listen:$port")],
  "tls": true,
  "tlsverify": true,
  "tlscacert": $(json_str "$ca"),
  "tlscert": $(json_str "$srv_cert"),
  "tlskey": $(json_str "$srv_key"),
  "live-restore": true,
  "icc": false,
  "default-ulimits": {
    "nofile": {"Name": "nofile", "Soft": 65536, "Hard": 65536},
    "nproc": {"Name": "nproc", "Soft": 65536, "Hard": 65536}
  },
  "log-driver": "json-file",
  "log-opts": {"max-size": "50m", "max-file": "3"}$runtimes
}
EOF
)
install -d -m 0755 "$(dirname -- "$daemon_json")"
if [[ -s $daemon_json ]]; then
	cp -p -- "$daemon_json" "$daemon_json.bak.$(date +%Y%m%d%H%M%S)"
	command -v python3 >/dev/null || die "$daemon_json exists: python3 is needed to merge into it"
	# keep the existing keys (e.g. the toolkit's runtimes), ours win
	OURS=$ours python3 - "$daemon_json" <<'PY'
import json, os, sys
path = sys.argv[1]
with open(path) as f:
    old = json.load(f)
new = json.loads(os.environ["OURS"])
if "runtimes" in new and isinstance(old.get("runtimes"), dict):
    new["runtimes"] = {**old["runtimes"], **new["runtimes"]}
old.update(new)
with open(path + ".new", "w") as f:
    json.dump(old, f, indent=2)
    f.write("\n")
os.replace(path + ".new", path)
PY
	say "merged gpucloud's settings into $daemon_json (backup beside it)"
else
	printf '%s\n' "$ours" >"$daemon_json"
	say "wrote $daemon_json"
fi
chmod 0644 "$daemon_json"

# ---------------------------------------------------------------------------
# 3. firewall: containers' published ports answer the control plane only.
# Docker DNATs published ports in PREROUTING and passes the packets through
# FORWARD, where DOCKER-USER comes first and survives dockerd's restarts.
# Connections whose destination Docker rewrote (ctstate DNAT, original
# direction) from anywhere else are dropped; replies, containers' own
# outgoing traffic and traffic between containers are not DNATed.

install -d -m 0755 "$(dirname -- "$fw_script")"
cat >"$fw_script" <<EOF
#!/bin/sh
# gpucloud-node-firewall — written by node-setup.sh; idempotent.  Only
# $control_plane may open connections to containers' published ports.
set -e
ipt() { iptables -w "\$@"; }
ipt -N $apps_chain 2>/dev/null || ipt -F $apps_chain
ipt -A $apps_chain -s $control_plane -j RETURN
ipt -A $apps_chain -m conntrack --ctstate DNAT --ctdir ORIGINAL -j DROP
ipt -N $chain 2>/dev/null || true
ipt -C $chain -j $apps_chain 2>/dev/null || ipt -I $chain 1 -j $apps_chain
EOF
chmod 0755 "$fw_script"
install -d -m 0755 "$(dirname -- "$dropin")"
cat >"$dropin" <<EOF
# written by gpucloud's node-setup.sh: the app-port firewall, again after
# every start of dockerd (which makes DOCKER-USER when it is missing)
[Service]
ExecStartPost=$fw_script
EOF
chmod 0644 "$dropin"
# docker.service's ExecStart (-H fd:// on Debian) would conflict with "hosts"
# in daemon.json: start dockerd without -H.
dockerd_bin=$(command -v dockerd || echo /usr/bin/dockerd)
[[ -S /run/containerd/containerd.sock ]] && dockerd_bin+=" --containerd=/run/containerd/containerd.sock"
printf '%s\n' '# written by gpucloud'"'"'s node-setup.sh: daemon.json names the hosts' \
	'[Service]' 'ExecStart=' "ExecStart=$dockerd_bin" >"$hosts_dropin"
chmod 0644 "$hosts_dropin"
case $firewall in
apply)
	command -v iptables >/dev/null || die "iptables is needed to apply the firewall (or use --firewall print)"
	"$fw_script"
	say "applied the firewall ($chain -> $apps_chain: only $control_plane reaches published ports)"
	;;
print)
	say "the firewall rules (not applied; run $fw_script as root):"
	sed -n '/^ipt -/p' "$fw_script" | sed 's/\bipt /iptables -w /g; s/^/    /' >&2
	;;
none) say "firewall skipped: published app ports stay reachable from anywhere" ;;
esac

# ---------------------------------------------------------------------------
# 4. restart and registration

if ((restart)); then
	if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
		systemctl daemon-reload
		systemctl restart docker
		say "restarted docker.service"
	else
		say "no systemd here: restart dockerd yourself, without -H flags (daemon.json names the hosts)"
	fi
else
	say "not restarted. Restart dockerd so it reads $daemon_json, e.g.:"
	say "    systemctl daemon-reload && systemctl restart docker"
	say "(docker.service must not pass -H: $hosts_dropin sees to that)"
fi

printf '{"name": %s, "url": %s, "tls_ca": %s, "tls_cert": %s, "tls_key": %s, "labels": {}}\n' \
	"$(json_str "$name")" "$(json_str "tcp://$host_addr:$port")" "$(json_str "$(cat "$ca")")" \
	"$(json_str "$(cat "$cli_cert")")" "$(json_str "$(cat "$cli_key")")" >"$register"
chmod 0600 "$register"

say "register the node with gpucloud (an admin's API token in GPUCLOUD_TOKEN; GPUs are"
say "discovered through discovery_image, or add \"gpus\": [...] to $register to declare them):"
# shellcheck disable=SC2016 # $GPUCLOUD_TOKEN is for the reader's shell
printf 'curl --fail-with-body -sS -H "Authorization: Bearer $GPUCLOUD_TOKEN" -H "Content-Type: application/json" --data-binary @%q %q\n' \
	"$register" "$api/api/v1/nodes"
