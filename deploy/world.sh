#!/usr/bin/env bash
# world.sh up|down|status|images|build-image — the test world under var/world/:
#   * PostgreSQL 15 on a unix socket only (var/world/pgsock, port 5433; under
#     /var/lib/gpucloud/pg-<hash> when user postgres cannot reach the checkout);
#   * two Docker engines, node1 and node2, acting as GPU nodes with declared
#     (simulated) GPUs: each has its own data root, exec root, bridge and
#     socket, and also listens on 127.0.0.1 with mutual TLS;
#   * a docker-registry on 127.0.0.1:5055 with htpasswd credentials, standing
#     in for nvcr.io (user '$oauthtoken', password an NGC-like API key);
#   * the images of the recipe table below, built locally: pushed to that
#     registry, or (the nvidia-smi stand-in) imported on each node.
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
	"$DOCKER_CLI" --config "$W/dockercfg" -H "${NODE_HOST[$n]:-unix://$(node_sock "$n")}" "$@"
}

# ---------------------------------------------------------------------------
# The image table: one recipe per image, built by image_build below.
#
# recipe NAME FIELD=VALUE... adds a row. Fields:
#   ref=REPO:TAG    the reference: under $REG_ADDR, or as is with to=nodes
#   to=WHERE        registry: built on node1, pushed, then removed from node1
#                   (each node has to pull it); nodes: imported on each node,
#                   never pushed
#   rootfs=HOW      busybox: Debian's busybox-static and its applet links;
#                   debootstrap:PKG,...: bookworm minbase plus those packages
#                   (slow: the tar is cached as $CACHE/NAME-rootfs-bookworm.tar);
#                   from:RECIPE: that recipe's root filesystem
#   add=FUNC        FUNC DIR NODE writes files for node NODE (to=nodes),
#                   added to the root filesystem (new paths only)
#   layers=N        N more layers of 4 MiB of random data (pulls show progress)
#   change=LINE     a `docker import --change` line (ENV, CMD, LABEL...);
#                   repeatable, kept in order
#   message=TEXT    the import's commit message (the image history's comment)
#   also=REPO:TAG   pushed under this name too: the same image
# Recipe names are the words `build-image` takes; var/world/env names the
# references (write_env).
IMAGES=()
declare -A RECIPE=()

recipe() {
	local name=$1 kv k
	shift
	IMAGES+=("$name")
	for kv; do
		k=${kv%%=*}
		case $k in
		change) RECIPE[$name.change]+=${RECIPE[$name.change]:+$'\n'}${kv#*=} ;;
		ref | to | rootfs | add | layers | message | also) RECIPE[$name.$k]=${kv#*=} ;;
		*) die "recipe '$name': unknown field '$k'" ;;
		esac
	done
	[[ -n ${RECIPE[$name.ref]:-} && -n ${RECIPE[$name.rootfs]:-} ]] ||
		die "recipe '$name' needs ref= and rootfs="
	[[ ${RECIPE[$name.to]:=registry} == @(registry|nodes) ]] ||
		die "recipe '$name': to= is registry or nodes"
}

PATH_ENV='ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

recipe busybox ref=nvidia/busybox:1.36 rootfs=busybox \
	change='CMD ["sh"]' change="$PATH_ENV" change='ENV GPUCLOUD_TEST_IMAGE=busybox' \
	change='LABEL org.opencontainers.image.title=gpucloud-test-busybox' \
	message='gpucloud test world image (busybox-static)'

# A framework-like image that declares its CUDA (as NVIDIA's images do) and
# has three layers, so pulls show progress.
recipe cuda ref=nvidia/pytorch:24.08-py3 rootfs=from:busybox layers=2 \
	change='CMD ["sh"]' change="$PATH_ENV" change='ENV CUDA_VERSION=12.6.0' \
	change='LABEL com.nvidia.cuda.version=12.6.0' \
	message='gpucloud test world CUDA-labelled image (busybox-static)'

# A real Jupyter (Debian's python3-notebook) for the proxy's end-to-end tests.
# TensorBoard is not packaged in Debian: its stand-in is the same image under
# another name (catalog references are unique), run with Python's http.server
# over the log directory.
recipe jupyter ref=nvidia/jupyter:1 rootfs=debootstrap:python3-notebook,python3-numpy \
	change='CMD ["python3", "-m", "notebook", "--ip=0.0.0.0", "--port=8888", "--no-browser"]' \
	change="$PATH_ENV" change='ENV LANG=C.UTF-8' change='EXPOSE 8888' \
	change='LABEL org.opencontainers.image.title=gpucloud-test-jupyter' \
	message='gpucloud test world Jupyter image (Debian bookworm python3-notebook)' \
	also=nvidia/tensorboard-standin:1

# A stand-in for GPU discovery: its nvidia-smi prints output captured from
# real hosts (tests/fixtures/nvidia-smi), run by the engines' "nvidia" runtime
# (plain runc here: there is no GPU). It is never pulled. The :3 prints plain
# nvidia-smi (CUDA header).
recipe discovery ref=gpucloud/nvidia-smi-standin:3 to=nodes rootfs=from:busybox \
	add=nvidia_smi_files change='CMD ["nvidia-smi"]' change="$PATH_ENV"

# node1 reports two A100s in MIG mode (7 + 3 instances), node2 eight whole
# A100s; plain nvidia-smi's header says CUDA 12.4 on node1, 12.2 on node2.
nvidia_smi_files() {
	local d=$1 n=$2 fx=$ROOT/tests/fixtures/nvidia-smi
	install -d -m 0755 "$d/fixture" "$d/usr" "$d/usr/bin"
	if [[ $n == 1 ]]; then
		install -m 0644 "$fx/a100-mig-query.csv" "$d/fixture/query.csv"
		install -m 0644 "$fx/a100-mig-list.txt" "$d/fixture/list.txt"
		install -m 0644 "$fx/a100-mig-smi.txt" "$d/fixture/smi.txt"
	else
		install -m 0644 "$fx/a100x8-query.csv" "$d/fixture/query.csv"
		: >"$d/fixture/list.txt"
		chmod 0644 "$d/fixture/list.txt"
		install -m 0644 "$fx/a100x8-smi.txt" "$d/fixture/smi.txt"
	fi
	printf '%s\n' '#!/bin/sh' \
		'# prints captured nvidia-smi output: the test world has no GPU' \
		'case "$*" in' \
		'*--query-gpu*) cat /fixture/query.csv ;;' \
		'-L) cat /fixture/list.txt ;;' \
		"'') cat /fixture/smi.txt ;;" \
		'*) echo "nvidia-smi stand-in: unsupported arguments: $*" >&2; exit 2 ;;' \
		'esac' >"$d/usr/bin/nvidia-smi"
	chmod 0755 "$d/usr/bin/nvidia-smi"
}

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

registry_answers() {
	local code
	code=$(curl -s -m 3 -o /dev/null -w '%{http_code}' "http://$REG_ADDR/v2/" 2>/dev/null || true)
	[[ $code == 401 ]]
}

registry_up() {
	local d=$W/registry pid i
	install -d -m 0700 "$d" "$d/data"
	if [[ ! -s $d/key ]]; then
		(umask 077 && rand_key >"$d/key.tmp" && mv "$d/key.tmp" "$d/key")
	fi
	if [[ ! -s $d/htpasswd || $d/key -nt $d/htpasswd ]]; then
		(umask 077 && htpasswd -Bbn "$REG_USER" "$(reg_key)" >"$d/htpasswd.tmp" &&
			mv "$d/htpasswd.tmp" "$d/htpasswd")
	fi
	cat >"$d/config.yml" <<EOF
# Written by deploy/world.sh: a local registry standing in for nvcr.io.
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $d/data
  delete:
    enabled: true
http:
  addr: $REG_ADDR
  secret: gpucloud-test-world
auth:
  htpasswd:
    realm: gpucloud-test-registry
    path: $d/htpasswd
EOF
	pid=$(pid_from_file "$d/pid")
	if [[ -n $pid ]] && pid_is "$pid" docker-registry && registry_answers; then
		return 0
	fi
	[[ -n $pid ]] && pid_is "$pid" docker-registry && stop_pid "$pid" 5 docker-registry
	rm -f -- "$d/pid"
	if registry_answers; then
		die "something else already serves $REG_ADDR; stop it first"
	fi
	say "starting registry on $REG_ADDR"
	: >"$d/registry.log"
	setsid docker-registry serve "$d/config.yml" </dev/null >>"$d/registry.log" 2>&1 9>&- &
	echo $! >"$d/pid"
	for ((i = 0; i < 100; i++)); do
		registry_answers && return 0
		pid_alive "$(pid_from_file "$d/pid")" || break
		sleep 0.1
	done
	show_log "$d/registry.log"
	die "registry did not start on $REG_ADDR"
}

registry_down() {
	local pid
	pid=$(pid_from_file "$W/registry/pid")
	if [[ -n $pid ]] && pid_is "$pid" docker-registry; then
		stop_pid "$pid" 10 docker-registry
	fi
	rm -f -- "$W/registry/pid"
}

# ---------------------------------------------------------------------------
# The image builder

# image_ref RECIPE / image_also RECIPE : its references (tags carry the
# suffix); image_also prints nothing when the recipe has no second name.
image_ref() {
	local r=${RECIPE[$1.ref]}$TAG_SUFFIX
	[[ ${RECIPE[$1.to]} == nodes ]] || r=$REG_ADDR/$r
	printf '%s\n' "$r"
}

image_also() {
	[[ -n ${RECIPE[$1.also]:-} ]] || return 0
	printf '%s\n' "$REG_ADDR/${RECIPE[$1.also]}$TAG_SUFFIX"
}

image_in_registry() {
	local ref=${1#"$REG_ADDR"/} code
	code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -u "$REG_USER:$(reg_key)" \
		-H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
		"http://$REG_ADDR/v2/${ref%:*}/manifests/${ref##*:}" || true)
	[[ $code == 200 ]]
}

registry_login() {
	install -d -m 0700 "$W/dockercfg"
	reg_key | dk 1 login -u "$REG_USER" --password-stdin "$REG_ADDR" >/dev/null 2>&1 ||
		die "docker login to $REG_ADDR failed"
}

# A root filesystem of Debian's static busybox and its applet links.
busybox_rootfs() {
	local r=$1 p
	[[ -x /bin/busybox ]] || die "/bin/busybox is missing; run deploy/deps.sh (busybox-static)"
	install -d -m 0755 "$r"/{bin,sbin,usr/bin,usr/sbin,etc,root,home,var/www,dev,proc,sys}
	install -d -m 1777 "$r/tmp"
	install -m 0755 /bin/busybox "$r/bin/busybox"
	while read -r p; do
		[[ -z $p || $p == bin/busybox ]] && continue
		install -d -m 0755 "$r/$(dirname -- "$p")"
		ln -sfn /bin/busybox "$r/$p"
	done < <(/bin/busybox --list-full)
	cat >"$r/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
user:x:1000:1000:user:/home/user:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
	cat >"$r/etc/group" <<'EOF'
root:x:0:
users:x:100:user
user:x:1000:
nogroup:x:65534:
EOF
	install -d -m 0750 -o 1000 -g 1000 "$r/home/user"
	chmod 0700 "$r/root"
	printf 'gpucloud test image\n' >"$r/var/www/index.html"
}

# The first Debian mirror apt uses (deb822 .sources or one-line lists).
apt_mirror() {
	local m
	m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '/^URIs:/ {for (i = 2; i <= NF; i++) if ($i !~ /security/) {print $i; exit}}')
	if [[ -z $m ]]; then
		m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}')
	fi
	printf '%s\n' "${m:-http://deb.debian.org/debian}"
}

# debootstrap_tar NAME PKG,... OUT : Debian bookworm (minbase) with those
# packages, as the tar OUT.
debootstrap_tar() {
	local name=$1 pkgs=$2 out=$3 tmp r mirror
	local -a pkgv
	command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing; run deploy/deps.sh"
	IFS=, read -ra pkgv <<<"$pkgs"
	tmp=$BUILD/$name-debootstrap
	r=$tmp/rootfs
	mirror=$(apt_mirror)
	rm -rf -- "$tmp"
	install -d -m 0700 "$tmp"
	say "debootstrapping bookworm from $mirror for $name (${pkgv[*]})"
	debootstrap --variant=minbase bookworm "$r" "$mirror" >"$tmp/debootstrap.log" 2>&1 ||
		die "debootstrap failed; see $tmp/debootstrap.log"
	cp /etc/apt/apt.conf.d/99* "$r/etc/apt/apt.conf.d/" 2>/dev/null || true
	cp /etc/resolv.conf "$r/etc/resolv.conf"
	mount -t proc proc "$r/proc"
	if ! chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends "${pkgv[@]}" >"$tmp/apt.log" 2>&1; then
		umount "$r/proc"
		die "installing ${pkgv[*]} in the rootfs failed; see $tmp/apt.log"
	fi
	umount "$r/proc"
	chroot "$r" apt-get clean
	rm -rf -- "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin "$r/etc/resolv.conf"
	install -d -m 0755 "$(dirname -- "$out")"
	tar --numeric-owner -C "$r" -cf "$out.tmp" .
	mv -- "$out.tmp" "$out"
	rm -rf -- "$tmp"
}

# rootfs_tar RECIPE [NODE] : sets ROOTFS to a tar of RECIPE's root filesystem
# (for NODE when the recipe adds files per node), making it first when
# missing: once per build (busybox) or once for good (debootstrap). A variable,
# not output, so that set -e holds inside.
ROOTFS=
rootfs_tar() {
	local name=$1 node=${2:-} how=${RECIPE[$1.rootfs]} add=${RECIPE[$1.add]:-} out d clash
	case $how in
	busybox)
		out=$BUILD/$name.tar
		if [[ ! -s $out ]]; then
			d=$BUILD/$name-rootfs
			rm -rf -- "$d"
			busybox_rootfs "$d"
			tar --numeric-owner -C "$d" -cf "$out" .
			rm -rf -- "$d"
		fi
		;;
	debootstrap:*)
		out=$CACHE/$name-rootfs-bookworm.tar
		[[ -s $out ]] || debootstrap_tar "$name" "${how#debootstrap:}" "$out"
		;;
	from:*)
		[[ -n ${RECIPE[${how#from:}.rootfs]:-} ]] || die "recipe '$name': no recipe '${how#from:}'"
		rootfs_tar "${how#from:}"
		out=$ROOTFS
		;;
	*) die "recipe '$name': unknown rootfs '$how'" ;;
	esac
	if [[ -n $add ]]; then
		# Append the new paths to a copy: docker import refuses a tar that
		# names a path twice (folders such as ./usr included).
		d=$BUILD/$name-node$node
		rm -rf -- "$d" "$d.tar"
		install -d -m 0755 "$d"
		"$add" "$d" "$node"
		tar -tf "$out" | sed 's#/$##' | sort -u >"$d.have"
		clash=$(comm -12 "$d.have" <(cd "$d" && find . -mindepth 1 ! -type d | sort))
		[[ -z $clash ]] || die "recipe '$name': $add would replace ${clash//$'\n'/ }; it may only add"
		cp -- "$out" "$d.tar"
		(cd "$d" && find . -mindepth 1 | sort) | comm -13 "$d.have" - |
			tar --numeric-owner --no-recursion -C "$d" -rf "$d.tar" -T -
		out=$d.tar
	fi
	ROOTFS=$out
}

# image_import NODE RECIPE TAR REF : imports TAR on NODE as REF with the
# recipe's changes and message, then adds its random layers.
image_import() {
	local n=$1 name=$2 tar=$3 ref=$4 base=$4 layers=${RECIPE[$2.layers]:-0} line i ctx
	local -a args=()
	while IFS= read -r line; do
		if [[ -n $line ]]; then args+=(--change "$line"); fi
	done <<<"${RECIPE[$name.change]:-}"
	if [[ -n ${RECIPE[$name.message]:-} ]]; then
		args+=(--message "${RECIPE[$name.message]}")
	fi
	if ((layers > 0)); then base=gpucloud/world-base:$name$TAG_SUFFIX; fi
	dk "$n" import "${args[@]}" "$tar" "$base" >/dev/null || die "could not import $base"
	[[ $base != "$ref" ]] || return 0
	ctx=$BUILD/$name-layers
	rm -rf -- "$ctx"
	install -d -m 0700 "$ctx"
	printf 'FROM %s\n' "$base" >"$ctx/Dockerfile"
	for ((i = 1; i <= layers; i++)); do
		head -c 4194304 /dev/urandom >"$ctx/blob$i"
		printf 'COPY blob%s /opt/blob%s\n' "$i" "$i" >>"$ctx/Dockerfile"
	done
	DOCKER_BUILDKIT=0 dk "$n" build -q -t "$ref" "$ctx" >/dev/null || die "could not build $ref"
	dk "$n" rmi "$base" >/dev/null
	rm -rf -- "$ctx"
}

# image_build RECIPE : builds the recipe's image unless it is already there
# (on each node, or in the registry under every name it has: a world made
# before a second name existed gets the image again), so `up` stays fast.
image_build() {
	local name=$1 ref also n r
	ref=$(image_ref "$name")
	also=$(image_also "$name")
	if [[ ${RECIPE[$name.to]} == nodes ]]; then
		for n in "${NODES[@]}"; do
			dk "$n" image inspect "$ref" >/dev/null 2>&1 && continue
			say "building $ref on node$n"
			rootfs_tar "$name" "$n"
			image_import "$n" "$name" "$ROOTFS" "$ref"
		done
		return 0
	fi
	if image_in_registry "$ref" && { [[ -z $also ]] || image_in_registry "$also"; }; then
		return 0
	fi
	say "building $ref${also:+ (also $also)} and pushing it"
	rootfs_tar "$name"
	image_import 1 "$name" "$ROOTFS" "$ref"
	[[ -z $also ]] || dk 1 tag "$ref" "$also"
	registry_login
	for r in "$ref" ${also:+"$also"}; do
		dk 1 push -q "$r" >/dev/null || die "could not push $r"
	done
	# Leave both nodes alike: each has to pull the image from the registry.
	for r in ${also:+"$also"} "$ref"; do
		dk 1 rmi "$r" >/dev/null
		image_in_registry "$r" || die "$r was pushed but the registry does not list it"
	done
}

# images_build [RECIPE...] : builds the named recipes, or all, in table order.
images_build() {
	local name
	(($#)) || set -- "${IMAGES[@]}"
	for name; do
		[[ -n ${RECIPE[$name.ref]:-} ]] || die "no recipe '$name' (recipes: ${IMAGES[*]})"
	done
	rm -rf -- "$BUILD"
	install -d -m 0700 "$BUILD"
	for name; do image_build "$name"; done
	rm -rf -- "$BUILD"
}

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

cmd_up() {
	local n
	need_root "world.sh up"
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
