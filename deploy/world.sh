#!/usr/bin/env bash
# world.sh up|down|status|images|build-image — the test world under var/world/:
#   * PostgreSQL 15 on a unix socket only (var/world/pgsock, port 5433; under
#     /var/lib/gpucloud/pg-<hash> when user postgres cannot reach the checkout);
#   * two Docker engines, node1 and node2, acting as GPU nodes with declared
#     (simulated) GPUs: each has its own data root, exec root, bridge and
#     socket, and also listens on 127.0.0.1 with mutual TLS;
#   * a docker-registry on 127.0.0.1:5055 with htpasswd credentials, standing
#     in for nvcr.io (user '$oauthtoken', password an NGC-like API key);
#   * the images of the recipe table (deploy/images.sh, shared with `make
#     demo`), built locally: pushed to that registry, or (the nvidia-smi
#     stand-in) imported on each node.
# Addresses and credentials go to var/world/env, a sourceable shell file.
# `up` is idempotent; `down` stops everything but keeps the data for a fast
# next `up`. Needs root (dockerd, bridges, initdb as postgres).
#
# `images` prints each recipe's references; `build-image [--suffix=S]
# [RECIPE...]` builds recipes (all when none is named), skipping those already
# there, with S appended to every tag (a throw-away build: --suffix=-verify).
# Both act on the world whose env file is sourced in the environment
# (GPUCLOUD_WORLD_REGISTRY, _REGISTRY_USER, _REGISTRY_KEY, _DOCKER1, _DOCKER2),
# else on this checkout's; GPUCLOUD_WORLD_CACHE names another debootstrap
# cache folder. The smoke test of a running world is tests/world_smoke.sh.
set -euo pipefail

PROG=world
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=deploy/lib.sh
. "$ROOT/deploy/lib.sh"

W=$ROOT/var/world
WPG=$(pg_place "$W") # the PostgreSQL cluster: in $W unless postgres cannot reach it
PG_PORT=5433
REG_ADDR=127.0.0.1:5055
# shellcheck disable=SC2016 # the NGC user name is literally $oauthtoken
REG_USER='$oauthtoken'
REG_KEY= # empty: read $W/registry/key
NODES=(1 2)
GPUS_PER_NODE=4
TLS_PORT_BASE=23760 # node N listens with mTLS on 127.0.0.1:$((TLS_PORT_BASE + N))
# Debootstrapped root filesystems are cached outside var/world (kept by
# `down`; rebuilt only when missing).
CACHE=${GPUCLOUD_WORLD_CACHE:-$ROOT/var/cache}
BUILD=$W/build     # scratch space of the image builder
DOCKERCFG=$W/dockercfg # the docker CLI's config (the registry login)
TAG_SUFFIX=        # build-image --suffix
declare -A NODE_HOST=() # build-image: engines of another world

node_sock() { printf '%s\n' "$W/docker/node$1.sock"; }
node_pidfile() { printf '%s\n' "$W/docker/node$1.pid"; }
node_log() { printf '%s\n' "$W/docker/node$1.log"; }
# Kept short: containerd and shim sockets live below it (108-byte limit).
node_execroot() { printf '/run/gcw-node%s\n' "$1"; }

dk() {
	local n=$1
	shift
	"$DOCKER_CLI" --config "$DOCKERCFG" -H "${NODE_HOST[$n]:-unix://$(node_sock "$n")}" "$@"
}

# ---------------------------------------------------------------------------
# The image table and its builder (shared with deploy/demo.sh).
# shellcheck source=deploy/images.sh
. "$ROOT/deploy/images.sh"

# ---------------------------------------------------------------------------
# PostgreSQL

postgres_up() {
	pg_up "$WPG/pg" "$WPG/pgsock" "$PG_PORT" "$WPG/pg.log" 300
	pg_bootstrap "$WPG/pgsock" "$PG_PORT" gpucloud root
}

# ---------------------------------------------------------------------------
# Docker engines

node_bridge_up() {
	bridge_up "$(world_bridge "$1")" "$(world_bridge_addr "$1")"
}

node_bridge_down() {
	bridge_down "$(world_bridge "$1")" "10\\.231\\.$1\\."
}

# A CA, a server certificate for 127.0.0.1 and a client certificate, made
# once. The engines require the client certificate on their TCP listeners.
pki_up() {
	local d=$W/pki
	[[ -s $d/client-key.pem ]] && return 0
	say "making test CA and certificates in $d"
	rm -rf -- "$d"
	install -d -m 0700 "$d"
	(
		cd "$d"
		umask 077
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
			-keyout ca-key.pem -out ca.pem -days 3650 -subj '/CN=gpucloud test world CA'
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
			-keyout server-key.pem -out server.csr -subj '/CN=127.0.0.1'
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
			-days 3650 -extfile server.ext -out server-cert.pem
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
			-keyout client-key.tmp -out client.csr -subj '/CN=gpucloud'
		printf 'extendedKeyUsage=clientAuth\n' >client.ext
		openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
			-days 3650 -extfile client.ext -out client-cert.pem
		rm -f -- *.csr *.ext
		mv client-key.tmp client-key.pem
	) >"$W/pki.log" 2>&1 || {
		show_log "$W/pki.log"
		die "could not make the test certificates"
	}
}

# Fake GPU device nodes: NVIDIA's character major 195, minor = GPU index.
# Without a driver they cannot be opened, but they can be handed to
# containers as Devices and the device cgroup tells them apart.
gpus_up() {
	local n=$1 i dev
	install -d -m 0755 "$W/gpus/node$n"
	for ((i = 0; i < GPUS_PER_NODE; i++)); do
		dev=$W/gpus/node$n/nvidia$i
		[[ -c $dev ]] || mknod -m 0666 "$dev" c 195 "$i"
	done
}

node_gpus() {
	local n=$1 i out=
	for ((i = 0; i < GPUS_PER_NODE; i++)); do
		out+=${out:+,}$W/gpus/node$n/nvidia$i
	done
	printf '%s\n' "$out"
}

# Starts node N unless it already answers; does not wait (see node_wait).
node_start() {
	local n=$1 sock pidfile pid
	local -a net
	sock=$(node_sock "$n")
	pidfile=$(node_pidfile "$n")
	install -d -m 0711 "$W/docker/node$n"
	node_bridge_up "$n"
	gpus_up "$n"
	if engine_answers "$sock"; then
		return 0
	fi
	pid=$(pid_from_file "$pidfile")
	if [[ -n $pid ]] && pid_is "$pid" dockerd; then
		return 0 # still starting; node_wait decides
	fi
	mapfile -t net < <(world_engine_net_args "$n")
	say "starting Docker engine node$n"
	dockerd_start "$pidfile" "$(node_log "$n")" \
		--data-root "$W/docker/node$n/data" \
		--exec-root "$(node_execroot "$n")" \
		-H "unix://$sock" \
		-H "tcp://127.0.0.1:$((TLS_PORT_BASE + n))" \
		--tlsverify --tlscacert "$W/pki/ca.pem" \
		--tlscert "$W/pki/server-cert.pem" --tlskey "$W/pki/server-key.pem" \
		"${net[@]}" \
		--containerd-namespace "gcw-node$n" \
		--containerd-plugins-namespace "gcw-node$n-plugins" \
		--add-runtime "nvidia=$(command -v runc)" \
		--shutdown-timeout 5
}

node_wait() {
	local n=$1
	dockerd_wait "$(node_sock "$n")" "$(node_pidfile "$n")" "$(node_log "$n")" 90 "node$n"
}

node_stop() {
	local n=$1
	dockerd_stop "$(node_sock "$n")" "$(node_pidfile "$n")" "$(node_execroot "$n")" \
		"$W/docker/node$n/data" "node$n"
}

# ---------------------------------------------------------------------------
# Registry

reg_key() {
	if [[ -n $REG_KEY ]]; then printf '%s\n' "$REG_KEY"; else cat "$W/registry/key"; fi
}

registry_answers() { registry_answers_at "$REG_ADDR"; }

registry_up() {
	registry_serve "$W/registry" "$REG_ADDR" "$REG_USER" gpucloud-test-registry \
		'a local registry standing in for nvcr.io'
}

registry_down() { registry_stop "$W/registry"; }

# ---------------------------------------------------------------------------
# Environment file

write_env() {
	local f=$W/env n
	{
		printf '# Test world addresses, written by deploy/world.sh up. Source it.\n'
		printf 'export GPUCLOUD_WORLD_DIR=%s\n' "$(shquote "$W")"
		printf 'export PG_BIN=%s\n' "$(shquote "$PG_BIN")"
		printf 'export GPUCLOUD_TEST_PG_HOST=%s\n' "$(shquote "$WPG/pgsock")"
		printf 'export GPUCLOUD_TEST_PG_PORT=%s\n' "$PG_PORT"
		printf 'export GPUCLOUD_TEST_PG_DATA=%s\n' "$(shquote "$WPG/pg")"
		printf 'export GPUCLOUD_TEST_PG_LOG=%s\n' "$(shquote "$WPG/pg.log")"
		# Restarts the cluster and returns once it accepts connections again.
		printf 'export GPUCLOUD_TEST_PG_RESTART_CMD=%s\n' "$(shquote "runuser -u postgres -- $PG_BIN/pg_ctl -D $WPG/pg -l $WPG/pg.log -m fast -w -t 60 restart")"
		printf 'export GPUCLOUD_TEST_DB_URL=%s\n' \
			"$(shquote "postgresql:///gpucloud?host=$WPG/pgsock&port=$PG_PORT&user=root")"
		printf 'export GPUCLOUD_WORLD_NODES=%s\n' "$(shquote "${NODES[*]/#/node}")"
		for n in "${NODES[@]}"; do
			printf 'export GPUCLOUD_WORLD_DOCKER%s=%s\n' "$n" "$(shquote "unix://$(node_sock "$n")")"
			printf 'export GPUCLOUD_WORLD_DOCKER%s_TLS=%s\n' "$n" \
				"$(shquote "tcp://127.0.0.1:$((TLS_PORT_BASE + n))")"
			printf 'export GPUCLOUD_WORLD_NODE%s_GPUS=%s\n' "$n" "$(shquote "$(node_gpus "$n")")"
		done
		printf 'export GPUCLOUD_WORLD_TLS_CA=%s\n' "$(shquote "$W/pki/ca.pem")"
		printf 'export GPUCLOUD_WORLD_TLS_CERT=%s\n' "$(shquote "$W/pki/client-cert.pem")"
		printf 'export GPUCLOUD_WORLD_TLS_KEY=%s\n' "$(shquote "$W/pki/client-key.pem")"
		printf 'export GPUCLOUD_WORLD_REGISTRY=%s\n' "$(shquote "$REG_ADDR")"
		printf 'export GPUCLOUD_WORLD_REGISTRY_USER=%s\n' "$(shquote "$REG_USER")"
		printf 'export GPUCLOUD_WORLD_REGISTRY_KEY=%s\n' "$(shquote "$(reg_key)")"
		printf 'export GPUCLOUD_WORLD_IMAGE=%s\n' "$(shquote "$(image_ref busybox)")"
		printf 'export GPUCLOUD_WORLD_DISCOVERY_IMAGE=%s\n' "$(shquote "$(image_ref discovery)")"
		printf 'export GPUCLOUD_WORLD_CUDA_IMAGE=%s\n' "$(shquote "$(image_ref cuda)")"
		printf 'export GPUCLOUD_WORLD_JUPYTER_IMAGE=%s\n' "$(shquote "$(image_ref jupyter)")"
		printf 'export GPUCLOUD_WORLD_TENSORBOARD_IMAGE=%s\n' "$(shquote "$(image_also jupyter)")"
		printf 'export GPUCLOUD_WORLD_PYTORCH_IMAGE=%s\n' "$(shquote "$(image_ref pytorch)")"
	} >"$W/env.tmp"
	chmod 0600 "$W/env.tmp"
	mv -- "$W/env.tmp" "$f"
}

# ---------------------------------------------------------------------------
# Commands

lock() {
	install -d -m 0755 "$W"
	exec 9>"$W/.lock"
	flock -w 300 9 || die "another world.sh holds $W/.lock"
}

# Dies when another checkout's world is up: the worlds share fixed names
# (exec roots, bridges, ports), and starting a second one would take them
# from under the first one's tests.
other_world_check() {
	local pid arg prev data
	for pid in $(pgrep -x dockerd || true); do
		prev= data=
		while IFS= read -r -d '' arg; do
			[[ $prev == --data-root ]] && data=$arg
			prev=$arg
		done <"/proc/$pid/cmdline" 2>/dev/null || continue
		if [[ $data == */var/world/docker/node* && $data != "$W/docker/"* ]]; then
			die "another checkout's test world is up (dockerd pid $pid, data root $data):" \
				"two worlds share ports and bridges; stop it first (make world-down in" \
				"${data%/var/world/*})"
		fi
	done
}

cmd_up() {
	local n
	need_root "world.sh up"
	other_world_check
	lock
	install -d -m 0711 "$W/docker"
	pki_up
	# Engines start one after the other: each sets up the shared iptables
	# chains at start-up, and two doing so at once race and fail. The first
	# starts while PostgreSQL initialises, the second while the registry does.
	node_start 1
	postgres_up
	node_wait 1
	node_start 2
	registry_up
	node_wait 2
	images_build
	write_env
	say "up; source $W/env"
}

cmd_down() {
	local n
	need_root "world.sh down"
	[[ -d $W ]] || return 0
	lock
	rm -f -- "$W/env"
	registry_down
	for n in "${NODES[@]}"; do node_stop "$n" & done
	wait
	for n in "${NODES[@]}"; do node_bridge_down "$n"; done
	pg_down "$WPG/pg"
	say "down"
}

cmd_status() {
	local n pid up=0 total=0
	show() {
		total=$((total + 1))
		if [[ $2 == running ]]; then up=$((up + 1)); fi
		printf '%-10s %-8s %s\n' "$1" "$2" "$3"
	}
	if pg_running "$WPG/pgsock" "$PG_PORT"; then
		show postgres running "$WPG/pgsock port $PG_PORT"
	else
		show postgres stopped ""
	fi
	for n in "${NODES[@]}"; do
		pid=$(pid_from_file "$(node_pidfile "$n")")
		if engine_answers "$(node_sock "$n")"; then
			show "node$n" running "unix://$(node_sock "$n") tcp://127.0.0.1:$((TLS_PORT_BASE + n)) pid $pid"
		elif [[ -n $pid ]] && pid_is "$pid" dockerd; then
			show "node$n" starting "pid $pid"
		else
			show "node$n" stopped ""
		fi
	done
	pid=$(pid_from_file "$W/registry/pid")
	if [[ -n $pid ]] && pid_is "$pid" docker-registry && registry_answers; then
		show registry running "http://$REG_ADDR pid $pid"
	else
		show registry stopped ""
	fi
	if ((up == total)); then
		[[ -s $W/env ]] && printf 'env        %s\n' "$W/env"
		return 0
	fi
	((up == 0)) && return 3
	return 1
}

# build-image and images act on the world whose env file is sourced in the
# environment, when there is one (its engines and registry; this checkout's
# var/world holds only the scratch space and the docker login).
use_env_world() {
	local n v
	[[ -n ${GPUCLOUD_WORLD_REGISTRY:-} ]] || return 0
	REG_ADDR=$GPUCLOUD_WORLD_REGISTRY
	REG_USER=${GPUCLOUD_WORLD_REGISTRY_USER:-$REG_USER}
	REG_KEY=${GPUCLOUD_WORLD_REGISTRY_KEY:?GPUCLOUD_WORLD_REGISTRY is set but GPUCLOUD_WORLD_REGISTRY_KEY is not}
	for n in "${NODES[@]}"; do
		v=GPUCLOUD_WORLD_DOCKER$n
		[[ -z ${!v:-} ]] || NODE_HOST[$n]=${!v}
	done
}

cmd_images() {
	local name
	use_env_world
	for name in "${IMAGES[@]}"; do
		printf '%-10s %-8s %s\n' "$name" "${RECIPE[$name.to]}" "$(image_ref "$name")"
		[[ -z ${RECIPE[$name.also]:-} ]] ||
			printf '%-10s %-8s %s\n' "$name" "${RECIPE[$name.to]}" "$(image_also "$name")"
	done
}

cmd_build_image() {
	need_root "world.sh build-image"
	while [[ ${1:-} == --* ]]; do
		case $1 in
		--suffix=*) TAG_SUFFIX=${1#--suffix=} ;;
		*) die "build-image: unknown option '$1'" ;;
		esac
		shift
	done
	[[ -z $TAG_SUFFIX || $TAG_SUFFIX =~ ^[A-Za-z0-9_.-]+$ ]] ||
		die "build-image: suffix '$TAG_SUFFIX' cannot go in a tag"
	use_env_world
	lock
	images_build "$@"
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
images) cmd_images ;;
build-image)
	shift
	cmd_build_image "$@"
	;;
*)
	printf 'usage: %s up|down|status|images|build-image [--suffix=S] [RECIPE...]\n' "$0" >&2
	exit 2
	;;
esac
