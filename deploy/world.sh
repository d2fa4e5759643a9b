#!/usr/bin/env bash
# world.sh up|down|status — the test world under var/world/:
#   * PostgreSQL 15 on a unix socket only (var/world/pgsock, port 5433);
#   * two Docker engines, node1 and node2, acting as GPU nodes with declared
#     (simulated) GPUs: each has its own data root, exec root, bridge and
#     socket, and also listens on 127.0.0.1 with mutual TLS;
#   * a docker-registry on 127.0.0.1:5055 with htpasswd credentials, standing
#     in for nvcr.io (user '$oauthtoken', password an NGC-like API key);
#   * a small busybox image built locally and pushed to that registry.
# Addresses and credentials go to var/world/env, a sourceable shell file.
# `up` is idempotent; `down` stops everything but keeps the data for a fast
# next `up`. Needs root (dockerd, bridges, initdb as postgres).
set -euo pipefail

PROG=world
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=deploy/lib.sh
. "$ROOT/deploy/lib.sh"

W=$ROOT/var/world
PG_PORT=5433
REG_ADDR=127.0.0.1:5055
# shellcheck disable=SC2016 # the NGC user name is literally $oauthtoken
REG_USER='$oauthtoken'
IMAGE_REPO=nvidia/busybox
IMAGE_TAG=1.36
IMAGE=$REG_ADDR/$IMAGE_REPO:$IMAGE_TAG
DISCOVERY_IMAGE=gpucloud/nvidia-smi-standin:3 # :3 prints plain nvidia-smi (CUDA header)
# A framework-like image that declares its CUDA (as NVIDIA's images do) and
# has a few layers, so pulls show progress.
CUDA_IMAGE_REPO=nvidia/pytorch
CUDA_IMAGE_TAG=24.08-py3
CUDA_IMAGE=$REG_ADDR/$CUDA_IMAGE_REPO:$CUDA_IMAGE_TAG
# A real Jupyter (Debian's python3-notebook) for the proxy's end-to-end tests.
JUPYTER_IMAGE_REPO=nvidia/jupyter
JUPYTER_IMAGE_TAG=1
JUPYTER_IMAGE=$REG_ADDR/$JUPYTER_IMAGE_REPO:$JUPYTER_IMAGE_TAG
# The debootstrapped root filesystem is cached outside var/world (kept by
# world down; rebuilt only when missing).
JUPYTER_ROOTFS_CACHE=$ROOT/var/cache/jupyter-rootfs-bookworm.tar
# TensorBoard is not packaged in Debian: its stand-in is the same image under
# another name (catalog references are unique), run with Python's http.server
# over the log directory.
TENSORBOARD_IMAGE_REPO=nvidia/tensorboard-standin
TENSORBOARD_IMAGE=$REG_ADDR/$TENSORBOARD_IMAGE_REPO:$JUPYTER_IMAGE_TAG
NODES=(1 2)
GPUS_PER_NODE=4
TLS_PORT_BASE=23760 # node N listens with mTLS on 127.0.0.1:$((TLS_PORT_BASE + N))

node_sock() { printf '%s\n' "$W/docker/node$1.sock"; }
node_pidfile() { printf '%s\n' "$W/docker/node$1.pid"; }
node_log() { printf '%s\n' "$W/docker/node$1.log"; }
# Kept short: containerd and shim sockets live below it (108-byte limit).
node_execroot() { printf '/run/gcw-node%s\n' "$1"; }
node_bridge() { printf 'gcbr%s\n' "$1"; }

dk() {
	local n=$1
	shift
	"$DOCKER_CLI" --config "$W/dockercfg" -H "unix://$(node_sock "$n")" "$@"
}

# ---------------------------------------------------------------------------
# PostgreSQL

postgres_up() {
	pg_up "$W/pg" "$W/pgsock" "$PG_PORT" "$W/pg.log" 300
	pg_bootstrap "$W/pgsock" "$PG_PORT" gpucloud root
}

# ---------------------------------------------------------------------------
# Docker engines

bridge_up() {
	local n=$1 br addrs
	br=$(node_bridge "$n")
	ip link show "$br" >/dev/null 2>&1 || ip link add "$br" type bridge
	addrs=$(ip -4 -o addr show dev "$br")
	[[ $addrs == *" 10.231.$n.1/24 "* ]] || ip addr add "10.231.$n.1/24" dev "$br"
	ip link set "$br" up
}

bridge_down() {
	local n=$1 br table rule
	local -a words
	br=$(node_bridge "$n")
	if ip link show "$br" >/dev/null 2>&1; then
		ip link del "$br" || warn "could not delete bridge $br"
	fi
	# dockerd leaves its rules for the bridge behind; drop exactly those
	# (they name the bridge or its subnet) so no stale rule outlives the world.
	command -v iptables >/dev/null || return 0
	for table in filter nat; do
		while read -r rule; do
			read -ra words <<<"$rule"
			words[0]=-D
			iptables -w -t "$table" "${words[@]}" 2>/dev/null || true
		done < <(iptables -w -t "$table" -S 2>/dev/null |
			grep -E -- "^-A .*( $br( |$)| 10\.231\.$n\.)" || true)
	done
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
	sock=$(node_sock "$n")
	pidfile=$(node_pidfile "$n")
	install -d -m 0711 "$W/docker/node$n"
	bridge_up "$n"
	gpus_up "$n"
	if engine_answers "$sock"; then
		return 0
	fi
	pid=$(pid_from_file "$pidfile")
	if [[ -n $pid ]] && pid_is "$pid" dockerd; then
		return 0 # still starting; node_wait decides
	fi
	say "starting Docker engine node$n"
	dockerd_start "$pidfile" "$(node_log "$n")" \
		--data-root "$W/docker/node$n/data" \
		--exec-root "$(node_execroot "$n")" \
		-H "unix://$sock" \
		-H "tcp://127.0.0.1:$((TLS_PORT_BASE + n))" \
		--tlsverify --tlscacert "$W/pki/ca.pem" \
		--tlscert "$W/pki/server-cert.pem" --tlskey "$W/pki/server-key.pem" \
		--bridge "$(node_bridge "$n")" \
		--default-address-pool "base=10.24$n.0.0/16,size=24" \
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

reg_key() { cat "$W/registry/key"; }

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
# Test image

image_in_registry() {
	local code
	code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -u "$REG_USER:$(reg_key)" \
		-H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
		"http://$REG_ADDR/v2/$IMAGE_REPO/manifests/$IMAGE_TAG" || true)
	[[ $code == 200 ]]
}

# A root filesystem of Debian's static busybox and its applet links.
make_rootfs() {
	local r=$1 p
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

image_up() {
	local tmp
	if image_in_registry; then
		return 0
	fi
	say "building $IMAGE from busybox-static and pushing it"
	[[ -x /bin/busybox ]] || die "/bin/busybox is missing; run deploy/deps.sh (busybox-static)"
	tmp=$W/image
	rm -rf -- "$tmp"
	install -d -m 0700 "$tmp" "$W/dockercfg"
	make_rootfs "$tmp/rootfs"
	tar --numeric-owner -C "$tmp/rootfs" -cf "$tmp/rootfs.tar" .
	dk 1 import \
		--change 'CMD ["sh"]' \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV GPUCLOUD_TEST_IMAGE=busybox' \
		--change 'LABEL org.opencontainers.image.title=gpucloud-test-busybox' \
		--message 'gpucloud test world image (busybox-static)' \
		"$tmp/rootfs.tar" "$IMAGE" >/dev/null
	reg_key | dk 1 login -u "$REG_USER" --password-stdin "$REG_ADDR" >/dev/null 2>&1 ||
		die "docker login to $REG_ADDR failed"
	dk 1 push -q "$IMAGE" >/dev/null || die "could not push $IMAGE"
	# Leave both nodes alike: each has to pull the image from the registry.
	dk 1 rmi "$IMAGE" >/dev/null
	rm -rf -- "$tmp"
	image_in_registry || die "$IMAGE was pushed but the registry does not list it"
}

cuda_image_in_registry() {
	local code
	code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -u "$REG_USER:$(reg_key)" \
		-H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
		"http://$REG_ADDR/v2/$CUDA_IMAGE_REPO/manifests/$CUDA_IMAGE_TAG" || true)
	[[ $code == 200 ]]
}

# $CUDA_IMAGE: the busybox rootfs with CUDA_VERSION and NVIDIA's CUDA label,
# plus two layers of 4 MiB of random data (three layers in all).
cuda_image_up() {
	local tmp base=gpucloud/cuda-base:world
	if cuda_image_in_registry; then
		return 0
	fi
	say "building $CUDA_IMAGE and pushing it"
	tmp=$W/cuda-image
	rm -rf -- "$tmp"
	install -d -m 0700 "$tmp" "$tmp/ctx" "$W/dockercfg"
	make_rootfs "$tmp/rootfs"
	tar --numeric-owner -C "$tmp/rootfs" -cf "$tmp/rootfs.tar" .
	dk 1 import \
		--change 'CMD ["sh"]' \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV CUDA_VERSION=12.6.0' \
		--change 'LABEL com.nvidia.cuda.version=12.6.0' \
		--message 'gpucloud test world CUDA-labelled image (busybox-static)' \
		"$tmp/rootfs.tar" "$base" >/dev/null
	head -c 4194304 /dev/urandom >"$tmp/ctx/blob1"
	head -c 4194304 /dev/urandom >"$tmp/ctx/blob2"
	printf '%s\n' "FROM $base" 'COPY blob1 /opt/blob1' 'COPY blob2 /opt/blob2' >"$tmp/ctx/Dockerfile"
	DOCKER_BUILDKIT=0 dk 1 build -q -t "$CUDA_IMAGE" "$tmp/ctx" >/dev/null ||
		die "could not build $CUDA_IMAGE"
	reg_key | dk 1 login -u "$REG_USER" --password-stdin "$REG_ADDR" >/dev/null 2>&1 ||
		die "docker login to $REG_ADDR failed"
	dk 1 push -q "$CUDA_IMAGE" >/dev/null || die "could not push $CUDA_IMAGE"
	# Leave both nodes alike: each has to pull the image from the registry.
	dk 1 rmi "$CUDA_IMAGE" "$base" >/dev/null
	rm -rf -- "$tmp"
	cuda_image_in_registry || die "$CUDA_IMAGE was pushed but the registry does not list it"
}

jupyter_image_in_registry() {
	local code
	code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -u "$REG_USER:$(reg_key)" \
		-H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
		"http://$REG_ADDR/v2/$JUPYTER_IMAGE_REPO/manifests/$JUPYTER_IMAGE_TAG" || true)
	[[ $code == 200 ]]
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

# Debian bookworm (minbase) with python3-notebook and python3-numpy, as a tar.
jupyter_rootfs() {
	local tmp=$W/jupyter-rootfs r mirror
	r=$tmp/rootfs
	mirror=$(apt_mirror)
	rm -rf -- "$tmp"
	install -d -m 0700 "$tmp"
	say "debootstrapping bookworm from $mirror for $JUPYTER_IMAGE"
	debootstrap --variant=minbase bookworm "$r" "$mirror" >"$tmp/debootstrap.log" 2>&1 ||
		die "debootstrap failed; see $tmp/debootstrap.log"
	cp /etc/apt/apt.conf.d/99* "$r/etc/apt/apt.conf.d/" 2>/dev/null || true
	cp /etc/resolv.conf "$r/etc/resolv.conf"
	mount -t proc proc "$r/proc"
	if ! chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends python3-notebook python3-numpy >"$tmp/apt.log" 2>&1; then
		umount "$r/proc"
		die "installing python3-notebook in the rootfs failed; see $tmp/apt.log"
	fi
	umount "$r/proc"
	chroot "$r" apt-get clean
	rm -rf -- "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin "$r/etc/resolv.conf"
	install -d -m 0755 "$(dirname -- "$JUPYTER_ROOTFS_CACHE")"
	tar --numeric-owner -C "$r" -cf "$JUPYTER_ROOTFS_CACHE.tmp" .
	mv -- "$JUPYTER_ROOTFS_CACHE.tmp" "$JUPYTER_ROOTFS_CACHE"
	rm -rf -- "$tmp"
}

jupyter_image_up() {
	if jupyter_image_in_registry; then
		return 0
	fi
	command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing; run deploy/deps.sh"
	[[ -s $JUPYTER_ROOTFS_CACHE ]] || jupyter_rootfs
	say "importing $JUPYTER_IMAGE and pushing it"
	install -d -m 0700 "$W/dockercfg"
	dk 1 import \
		--change 'CMD ["python3", "-m", "notebook", "--ip=0.0.0.0", "--port=8888", "--no-browser"]' \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV LANG=C.UTF-8' \
		--change 'EXPOSE 8888' \
		--change 'LABEL org.opencontainers.image.title=gpucloud-test-jupyter' \
		--message 'gpucloud test world Jupyter image (Debian bookworm python3-notebook)' \
		"$JUPYTER_ROOTFS_CACHE" "$JUPYTER_IMAGE" >/dev/null
	reg_key | dk 1 login -u "$REG_USER" --password-stdin "$REG_ADDR" >/dev/null 2>&1 ||
		die "docker login to $REG_ADDR failed"
	dk 1 push -q "$JUPYTER_IMAGE" >/dev/null || die "could not push $JUPYTER_IMAGE"
	dk 1 rmi "$JUPYTER_IMAGE" >/dev/null
	jupyter_image_in_registry || die "$JUPYTER_IMAGE was pushed but the registry does not list it"
}

tensorboard_image_up() {
	local code had
	code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -u "$REG_USER:$(reg_key)" \
		-H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
		"http://$REG_ADDR/v2/$TENSORBOARD_IMAGE_REPO/manifests/$JUPYTER_IMAGE_TAG" || true)
	[[ $code == 200 ]] && return 0
	say "pushing $TENSORBOARD_IMAGE (the Jupyter image under another name)"
	install -d -m 0700 "$W/dockercfg"
	reg_key | dk 1 login -u "$REG_USER" --password-stdin "$REG_ADDR" >/dev/null 2>&1 ||
		die "docker login to $REG_ADDR failed"
	had=0
	dk 1 image inspect "$JUPYTER_IMAGE" >/dev/null 2>&1 && had=1
	dk 1 pull -q "$JUPYTER_IMAGE" >/dev/null || die "could not pull $JUPYTER_IMAGE"
	dk 1 tag "$JUPYTER_IMAGE" "$TENSORBOARD_IMAGE"
	dk 1 push -q "$TENSORBOARD_IMAGE" >/dev/null || die "could not push $TENSORBOARD_IMAGE"
	dk 1 rmi "$TENSORBOARD_IMAGE" >/dev/null
	# leave node1 as it was (tests pull images themselves)
	((had)) || dk 1 rmi "$JUPYTER_IMAGE" >/dev/null 2>&1 || true
}

# A stand-in for GPU discovery: an image whose nvidia-smi prints output
# captured from real hosts (tests/fixtures/nvidia-smi), run by the engines'
# "nvidia" runtime (plain runc here: there is no GPU).  Imported on each
# node directly; it is never pulled.
discovery_image_up() {
	local n tmp
	for n in "${NODES[@]}"; do
		dk "$n" image inspect "$DISCOVERY_IMAGE" >/dev/null 2>&1 && continue
		tmp=$W/discovery-image
		rm -rf -- "$tmp"
		install -d -m 0700 "$tmp"
		make_rootfs "$tmp/rootfs"
		install -d -m 0755 "$tmp/rootfs/fixture"
		# node1 reports two A100s in MIG mode (7 + 3 instances), node2 eight whole A100s;
		# plain nvidia-smi's header says CUDA 12.4 on node1, 12.2 on node2
		if [[ $n == 1 ]]; then
			install -m 0644 "$ROOT/tests/fixtures/nvidia-smi/a100-mig-query.csv" "$tmp/rootfs/fixture/query.csv"
			install -m 0644 "$ROOT/tests/fixtures/nvidia-smi/a100-mig-list.txt" "$tmp/rootfs/fixture/list.txt"
			install -m 0644 "$ROOT/tests/fixtures/nvidia-smi/a100-mig-smi.txt" "$tmp/rootfs/fixture/smi.txt"
		else
			install -m 0644 "$ROOT/tests/fixtures/nvidia-smi/a100x8-query.csv" "$tmp/rootfs/fixture/query.csv"
			: >"$tmp/rootfs/fixture/list.txt"
			install -m 0644 "$ROOT/tests/fixtures/nvidia-smi/a100x8-smi.txt" "$tmp/rootfs/fixture/smi.txt"
		fi
		rm -f -- "$tmp/rootfs/usr/bin/nvidia-smi"
		printf '%s\n' '#!/bin/sh' \
			'# prints captured nvidia-smi output: the test world has no GPU' \
			'case "$*" in' \
			'*--query-gpu*) cat /fixture/query.csv ;;' \
			'-L) cat /fixture/list.txt ;;' \
			"'') cat /fixture/smi.txt ;;" \
			'*) echo "nvidia-smi stand-in: unsupported arguments: $*" >&2; exit 2 ;;' \
			'esac' >"$tmp/rootfs/usr/bin/nvidia-smi"
		chmod 0755 "$tmp/rootfs/usr/bin/nvidia-smi"
		tar --numeric-owner -C "$tmp/rootfs" -cf "$tmp/rootfs.tar" .
		dk "$n" import --change 'CMD ["nvidia-smi"]' \
			--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			"$tmp/rootfs.tar" "$DISCOVERY_IMAGE" >/dev/null
		rm -rf -- "$tmp"
	done
}

# ---------------------------------------------------------------------------
# Environment file

write_env() {
	local f=$W/env n
	{
		printf '# Test world addresses, written by deploy/world.sh up. Source it.\n'
		printf 'export GPUCLOUD_WORLD_DIR=%s\n' "$(shquote "$W")"
		printf 'export PG_BIN=%s\n' "$(shquote "$PG_BIN")"
		printf 'export GPUCLOUD_TEST_PG_HOST=%s\n' "$(shquote "$W/pgsock")"
		printf 'export GPUCLOUD_TEST_PG_PORT=%s\n' "$PG_PORT"
		printf 'export GPUCLOUD_TEST_PG_DATA=%s\n' "$(shquote "$W/pg")"
		printf 'export GPUCLOUD_TEST_PG_LOG=%s\n' "$(shquote "$W/pg.log")"
		# Restarts the cluster and returns once it accepts connections again.
		printf 'export GPUCLOUD_TEST_PG_RESTART_CMD=%s\n' "$(shquote "runuser -u postgres -- $PG_BIN/pg_ctl -D $W/pg -l $W/pg.log -m fast -w -t 60 restart")"
		printf 'export GPUCLOUD_TEST_DB_URL=%s\n' \
			"$(shquote "postgresql:///gpucloud?host=$W/pgsock&port=$PG_PORT&user=root")"
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
		printf 'export GPUCLOUD_WORLD_IMAGE=%s\n' "$(shquote "$IMAGE")"
		printf 'export GPUCLOUD_WORLD_DISCOVERY_IMAGE=%s\n' "$(shquote "$DISCOVERY_IMAGE")"
		printf 'export GPUCLOUD_WORLD_CUDA_IMAGE=%s\n' "$(shquote "$CUDA_IMAGE")"
		printf 'export GPUCLOUD_WORLD_JUPYTER_IMAGE=%s\n' "$(shquote "$JUPYTER_IMAGE")"
		printf 'export GPUCLOUD_WORLD_TENSORBOARD_IMAGE=%s\n' "$(shquote "$TENSORBOARD_IMAGE")"
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
	image_up
	cuda_image_up
	jupyter_image_up
	tensorboard_image_up
	discovery_image_up
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
	for n in "${NODES[@]}"; do bridge_down "$n"; done
	pg_down "$W/pg"
	say "down"
}

cmd_status() {
	local n pid up=0 total=0
	show() {
		total=$((total + 1))
		if [[ $2 == running ]]; then up=$((up + 1)); fi
		printf '%-10s %-8s %s\n' "$1" "$2" "$3"
	}
	if pg_running "$W/pgsock" "$PG_PORT"; then
		show postgres running "$W/pgsock port $PG_PORT"
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

# Smoke test of a running world: the database answers; each engine pulls
# the image through the Engine API only with the right key, and both serve
# a published loopback port at the same time; mTLS wants the client cert.
cmd_check() {
	local n sock auth bad out port fail=0
	cmd_status >/dev/null || die "the world is not (fully) up; run: $0 up"
	ok() { printf 'ok   %s\n' "$*"; }
	ko() {
		printf 'FAIL %s\n' "$*"
		fail=1
	}
	registry_auth() {
		printf '{"username":"%s","password":"%s","serveraddress":"%s"}' \
			"$REG_USER" "$1" "$REG_ADDR" | base64 -w0 | tr '+/' '-_'
	}
	check_cleanup() {
		for n in "${NODES[@]}"; do
			dk "$n" rm -f "gcw-check-node$n" >/dev/null 2>&1 || true
		done
	}
	trap check_cleanup EXIT

	out=$("$PG_BIN/psql" -X -Atc 'SELECT current_user || current_database()' \
		"postgresql:///gpucloud?host=$W/pgsock&port=$PG_PORT&user=root" 2>&1) || true
	if [[ $out == rootgpucloud ]]; then ok "postgres: root@gpucloud"; else ko "postgres: $out"; fi

	auth=$(registry_auth "$(reg_key)")
	bad=$(registry_auth wrong-key)
	for n in "${NODES[@]}"; do
		sock=$(node_sock "$n")
		dk "$n" rm -f "gcw-check-node$n" >/dev/null 2>&1 || true
		dk "$n" rmi "$IMAGE" >/dev/null 2>&1 || true
		out=$(curl -sS -m 60 --unix-socket "$sock" -X POST -H "X-Registry-Auth: $bad" \
			"http://engine/images/create?fromImage=$REG_ADDR/$IMAGE_REPO&tag=$IMAGE_TAG" 2>&1 || true)
		if [[ $out == *unauthorized* ]]; then
			ok "node$n: pull with a wrong key refused"
		else
			ko "node$n: pull with a wrong key: $out"
		fi
		out=$(curl -sS -m 60 --unix-socket "$sock" -X POST -H "X-Registry-Auth: $auth" \
			"http://engine/images/create?fromImage=$REG_ADDR/$IMAGE_REPO&tag=$IMAGE_TAG" 2>&1 || true)
		if [[ $out == *"Downloaded newer image"* || $out == *"Image is up to date"* ]]; then
			ok "node$n: pull with the key"
		else
			ko "node$n: pull with the key: $out"
		fi
		port=$((18180 + n))
		if dk "$n" run -d --name "gcw-check-node$n" -p "127.0.0.1:$port:80" "$IMAGE" \
			httpd -f -p 80 -h /var/www >/dev/null; then
			ok "node$n: container started, port 127.0.0.1:$port"
		else
			ko "node$n: could not start a container"
		fi
	done
	sleep 0.5
	for n in "${NODES[@]}"; do
		port=$((18180 + n))
		out=$(curl -sS -m 5 "http://127.0.0.1:$port/" 2>&1 || true)
		if [[ $out == "gpucloud test image" ]]; then
			ok "node$n: published port answers"
		else
			ko "node$n: published port 127.0.0.1:$port: $out"
		fi
		port=$((TLS_PORT_BASE + n))
		out=$(curl -sS -m 5 --cacert "$W/pki/ca.pem" --cert "$W/pki/client-cert.pem" \
			--key "$W/pki/client-key.pem" "https://127.0.0.1:$port/_ping" 2>&1 || true)
		if [[ $out == OK ]]; then
			ok "node$n: mTLS with the client certificate"
		else
			ko "node$n: mTLS: $out"
		fi
		if curl -fsS -m 5 --cacert "$W/pki/ca.pem" "https://127.0.0.1:$port/_ping" >/dev/null 2>&1; then
			ko "node$n: TLS port answered without a client certificate"
		else
			ok "node$n: TLS port refuses a client without a certificate"
		fi
	done
	return "$fail"
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
check) cmd_check ;;
*)
	printf 'usage: %s up|down|status|check\n' "$0" >&2
	exit 2
	;;
esac
