#!/usr/bin/env bash
# world_smoke.sh [--read-only] [--env=FILE] — checks that a running test world
# keeps what `deploy/world.sh up` promises: its env file defines every address
# the tests read; PostgreSQL answers; each engine answers on its socket, and on
# its TLS port only to a client with the certificate; each node's GPU device
# files exist; the registry refuses a client without the key and accepts one
# with it; every image of world.sh's recipe table is in the registry (or on
# each node).
# Without --read-only it also changes the engines as a client would: each node
# pulls the busybox image through the Engine API (a wrong key refused, the key
# accepted) and both serve a published port at the same time. Leave that out
# on a world that other tests are using.
# FILE defaults to this checkout's var/world/env. Prints one line per check;
# exits 1 when any failed.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
ENV_FILE=$ROOT/var/world/env
READ_ONLY=0
for arg; do
	case $arg in
	--read-only) READ_ONLY=1 ;;
	--env=*) ENV_FILE=${arg#--env=} ;;
	*)
		printf 'usage: %s [--read-only] [--env=FILE]\n' "$0" >&2
		exit 2
		;;
	esac
done

fail=0
ok() { printf 'ok   %s\n' "$*"; }
ko() {
	printf 'FAIL %s\n' "$*"
	fail=1
}
check() { # check DESCRIPTION COMMAND... : ok when COMMAND succeeds
	local what=$1
	shift
	if "$@"; then ok "$what"; else ko "$what"; fi
}

# --- the env file -----------------------------------------------------------
[[ -r $ENV_FILE ]] || {
	ko "env file $ENV_FILE: missing (run deploy/world.sh up)"
	exit 1
}
check "env file $ENV_FILE is private (0600)" test "$(stat -c %a "$ENV_FILE")" = 600
set -a
# shellcheck source=/dev/null
. "$ENV_FILE"
set +a
# The names the tests and benchmarks read (grep GPUCLOUD_WORLD_ tests/).
missing=()
for v in GPUCLOUD_WORLD_DIR PG_BIN GPUCLOUD_TEST_PG_HOST GPUCLOUD_TEST_PG_PORT \
	GPUCLOUD_TEST_PG_DATA GPUCLOUD_TEST_PG_LOG GPUCLOUD_TEST_PG_RESTART_CMD GPUCLOUD_TEST_DB_URL \
	GPUCLOUD_WORLD_NODES GPUCLOUD_WORLD_TLS_CA GPUCLOUD_WORLD_TLS_CERT GPUCLOUD_WORLD_TLS_KEY \
	GPUCLOUD_WORLD_REGISTRY GPUCLOUD_WORLD_REGISTRY_USER GPUCLOUD_WORLD_REGISTRY_KEY \
	GPUCLOUD_WORLD_IMAGE GPUCLOUD_WORLD_DISCOVERY_IMAGE GPUCLOUD_WORLD_CUDA_IMAGE \
	GPUCLOUD_WORLD_JUPYTER_IMAGE GPUCLOUD_WORLD_TENSORBOARD_IMAGE; do
	[[ -n ${!v:-} ]] || missing+=("$v")
done
read -ra NODES <<<"${GPUCLOUD_WORLD_NODES:-}"
for node in "${NODES[@]}"; do
	n=${node#node}
	for v in "GPUCLOUD_WORLD_DOCKER$n" "GPUCLOUD_WORLD_DOCKER${n}_TLS" "GPUCLOUD_WORLD_NODE${n}_GPUS"; do
		[[ -n ${!v:-} ]] || missing+=("$v")
	done
done
if ((${#missing[@]})); then ko "env file lacks ${missing[*]}"; else ok "env file defines every address"; fi
((${#NODES[@]} == 2)) || ko "two nodes expected, the env file names '${NODES[*]}'"

# --- PostgreSQL -------------------------------------------------------------
out=$("$PG_BIN/psql" -X -Atc 'SELECT current_user || current_database()' "$GPUCLOUD_TEST_DB_URL" 2>&1) || true
if [[ $out == rootgpucloud ]]; then ok "postgres: root@gpucloud"; else ko "postgres: $out"; fi

# --- engines ----------------------------------------------------------------
tls() { # tls PORT [CURL ARGS...] : /_ping on the engine's TLS port
	local port=$1
	shift
	curl -fsS -m 5 --cacert "$GPUCLOUD_WORLD_TLS_CA" "$@" "https://127.0.0.1:$port/_ping" 2>&1
}
for node in "${NODES[@]}"; do
	n=${node#node}
	sock_var=GPUCLOUD_WORLD_DOCKER$n
	tls_var=GPUCLOUD_WORLD_DOCKER${n}_TLS
	gpus_var=GPUCLOUD_WORLD_NODE${n}_GPUS
	sock=${!sock_var#unix://}
	out=$(curl -sS -m 5 --unix-socket "$sock" http://engine/_ping 2>&1 || true)
	if [[ $out == OK ]]; then ok "$node: engine answers on $sock"; else ko "$node: engine on $sock: $out"; fi
	port=${!tls_var##*:}
	out=$(tls "$port" --cert "$GPUCLOUD_WORLD_TLS_CERT" --key "$GPUCLOUD_WORLD_TLS_KEY" || true)
	if [[ $out != OK ]]; then
		ko "$node: mTLS: $out"
	elif tls "$port" >/dev/null; then
		ok "$node: mTLS with the client certificate"
		ko "$node: TLS port answered without a client certificate"
	else
		ok "$node: mTLS with the client certificate; refused without one"
	fi
	notdev=()
	IFS=, read -ra devs <<<"${!gpus_var}"
	for d in "${devs[@]}"; do [[ -c $d ]] || notdev+=("$d"); done
	if ((${#notdev[@]})); then ko "$node: not device files: ${notdev[*]}"; else ok "$node: ${#devs[@]} GPU device files"; fi
done

# --- registry ---------------------------------------------------------------
REG=$GPUCLOUD_WORLD_REGISTRY
reg_code() { # reg_code PATH [CURL ARGS...] : the HTTP status of GET PATH
	local path=$1
	shift
	curl -s -m 10 -o /dev/null -w '%{http_code}' "$@" \
		-H 'Accept: application/vnd.docker.distribution.manifest.v2+json' "http://$REG$path" || true
}
KEY_ARGS=(-u "$GPUCLOUD_WORLD_REGISTRY_USER:$GPUCLOUD_WORLD_REGISTRY_KEY")
check "registry: refuses a client without credentials" test "$(reg_code /v2/)" = 401
check "registry: refuses a wrong key" test "$(reg_code /v2/ -u "$GPUCLOUD_WORLD_REGISTRY_USER:wrong-key")" = 401
check "registry: accepts the key" test "$(reg_code /v2/ "${KEY_ARGS[@]}")" = 200

# --- images: every reference of the recipe table ----------------------------
images=$("$ROOT/deploy/world.sh" images 2>&1) || ko "world.sh images: $images"
refs=()
while read -r name where ref; do
	[[ -n $ref ]] || continue
	refs+=("$ref")
	if [[ $where == registry ]]; then
		path=/v2/${ref#"$REG"/}
		path=${path%:*}/manifests/${ref##*:}
		code=$(reg_code "$path" "${KEY_ARGS[@]}")
		if [[ $code == 200 ]]; then ok "$name: $ref is in the registry"; else ko "$name: $ref: registry says $code"; fi
		check "$name: $ref is refused without credentials" test "$(reg_code "$path")" = 401
	else
		for node in "${NODES[@]}"; do
			sock_var=GPUCLOUD_WORLD_DOCKER${node#node}
			code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' --unix-socket "${!sock_var#unix://}" \
				"http://engine/images/$ref/json" || true)
			if [[ $code == 200 ]]; then ok "$name: $ref is on $node"; else ko "$name: $ref on $node: engine says $code"; fi
		done
	fi
done <<<"$images"
for v in GPUCLOUD_WORLD_IMAGE GPUCLOUD_WORLD_DISCOVERY_IMAGE GPUCLOUD_WORLD_CUDA_IMAGE \
	GPUCLOUD_WORLD_JUPYTER_IMAGE GPUCLOUD_WORLD_TENSORBOARD_IMAGE; do
	[[ " ${refs[*]} " == *" ${!v} "* ]] || ko "$v=${!v} is not in world.sh's recipe table"
done

if ((READ_ONLY)); then
	exit "$fail"
fi

# --- as a client: pull with and without the key, serve a published port ----
IMAGE=$GPUCLOUD_WORLD_IMAGE
registry_auth() {
	printf '{"username":"%s","password":"%s","serveraddress":"%s"}' \
		"$GPUCLOUD_WORLD_REGISTRY_USER" "$1" "$REG" | base64 -w0 | tr '+/' '-_'
}
dk() {
	local v=GPUCLOUD_WORLD_DOCKER${1#node}
	shift
	docker --config "$GPUCLOUD_WORLD_DIR/dockercfg" -H "${!v}" "$@"
}
# shellcheck disable=SC2317 # called from a trap
cleanup() {
	for node in "${NODES[@]}"; do dk "$node" rm -f "gcw-check-$node" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
auth=$(registry_auth "$GPUCLOUD_WORLD_REGISTRY_KEY")
bad=$(registry_auth wrong-key)
ref=${IMAGE#"$REG"/}
for node in "${NODES[@]}"; do
	sock_var=GPUCLOUD_WORLD_DOCKER${node#node}
	sock=${!sock_var#unix://}
	dk "$node" rm -f "gcw-check-$node" >/dev/null 2>&1 || true
	dk "$node" rmi "$IMAGE" >/dev/null 2>&1 || true
	# The engine answers 200 either way and puts the error in the stream.
	out=$(curl -sS -m 60 --unix-socket "$sock" -X POST -H "X-Registry-Auth: $bad" \
		"http://engine/images/create?fromImage=$REG/${ref%:*}&tag=${ref##*:}" 2>&1 || true)
	if [[ $out == *unauthorized* ]]; then ok "$node: pull with a wrong key refused"; else ko "$node: pull with a wrong key: $out"; fi
	out=$(curl -sS -m 60 --unix-socket "$sock" -X POST -H "X-Registry-Auth: $auth" \
		"http://engine/images/create?fromImage=$REG/${ref%:*}&tag=${ref##*:}" 2>&1 || true)
	if [[ $out == *"Downloaded newer image"* || $out == *"Image is up to date"* ]]; then
		ok "$node: pull with the key"
	else
		ko "$node: pull with the key: $out"
	fi
	port=$((18180 + ${node#node}))
	if dk "$node" run -d --name "gcw-check-$node" -p "127.0.0.1:$port:80" "$IMAGE" \
		httpd -f -p 80 -h /var/www >/dev/null; then
		ok "$node: container started, port 127.0.0.1:$port"
	else
		ko "$node: could not start a container"
	fi
done
sleep 0.5
for node in "${NODES[@]}"; do
	port=$((18180 + ${node#node}))
	out=$(curl -sS -m 5 "http://127.0.0.1:$port/" 2>&1 || true)
	if [[ $out == "gpucloud test image" ]]; then ok "$node: published port answers"; else ko "$node: published port 127.0.0.1:$port: $out"; fi
done
exit "$fail"
