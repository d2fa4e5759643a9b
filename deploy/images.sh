# shellcheck shell=bash
# images.sh — the image recipe table and the builder that makes its images:
# one recipe per image, built from Debian packages on a Docker engine and
# pushed to a registry (or imported on each node). Sourced by deploy/world.sh
# (the test world) and deploy/demo.sh (`make demo`), never run.
#
# The caller sources deploy/lib.sh first and provides:
#   dk N ARGS...   the docker CLI for node N (node 1 builds and pushes);
#                  its --config is $DOCKERCFG
#   reg_key        prints the registry password
#   REG_ADDR, REG_USER   the registry (host:port) and its user
#   NODES          node numbers (to=nodes recipes are imported on each)
#   CACHE          where debootstrapped root filesystems are kept
#   BUILD          scratch space (images_build empties it)
#   TAG_SUFFIX     appended to every tag (empty: none)
#   DOCKERCFG      the docker CLI's config folder (registry_login)

# The image table: one recipe per image, built by image_build below.
#
# recipe NAME FIELD=VALUE... adds a row. Fields:
#   ref=REPO:TAG    the reference: under $REG_ADDR, or as is with to=nodes
#   to=WHERE        registry: built on node1, pushed, then removed from node1
#                   (each node has to pull it); nodes: imported on each node,
#                   never pushed
#   rootfs=HOW      busybox: Debian's busybox-static and its applet links;
#                   debootstrap:PKG,...: bookworm minbase plus those packages
#                   (slow: the tar is cached, see rootfs_cache);
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

# Real PyTorch (Debian's python3-torch: PyTorch 1.13, CPU) for training jobs:
# single-node runs and DDP over gloo across the engines.  Debian's torchrun
# fails on Python 3.11, so distributed members are started one process per
# rank with MASTER_ADDR/RANK/WORLD_SIZE set (what gpucloud gives each member).
recipe pytorch ref=nvidia/torch:1.13-cpu rootfs=debootstrap:python3-torch,python3-numpy \
	change='CMD ["python3"]' change="$PATH_ENV" change='ENV LANG=C.UTF-8' \
	change='ENV PYTHONUNBUFFERED=1' \
	change='LABEL org.opencontainers.image.title=gpucloud-test-pytorch' \
	message='gpucloud test world PyTorch image (Debian bookworm python3-torch)'

# A stand-in for GPU discovery: its nvidia-smi prints output captured from
# real hosts (tests/fixtures/nvidia-smi), run by the engines' "nvidia" runtime
# (plain runc here: there is no GPU). It is never pulled. The :3 prints plain
# nvidia-smi (CUDA header); the :4 also prints captured utilisation for the
# sampler's --query-gpu=uuid,utilization.gpu,memory.used.
recipe discovery ref=gpucloud/nvidia-smi-standin:4 to=nodes rootfs=from:busybox \
	add=nvidia_smi_files change='CMD ["nvidia-smi"]' change="$PATH_ENV"

# node1 reports two A100s in MIG mode (7 + 3 instances), node2 eight whole
# A100s; plain nvidia-smi's header says CUDA 12.4 on node1, 12.2 on node2.
# Utilisation: node1's MIG GPUs report none ([N/A]); node2's even-numbered
# GPUs are busy, the odd ones idle (a100x8-util.csv).
nvidia_smi_files() {
	local d=$1 n=$2 fx=$ROOT/tests/fixtures/nvidia-smi
	install -d -m 0755 "$d/fixture" "$d/usr" "$d/usr/bin"
	if [[ $n == 1 ]]; then
		install -m 0644 "$fx/a100-mig-query.csv" "$d/fixture/query.csv"
		install -m 0644 "$fx/a100-mig-list.txt" "$d/fixture/list.txt"
		install -m 0644 "$fx/a100-mig-smi.txt" "$d/fixture/smi.txt"
		install -m 0644 "$fx/a100-mig-util.csv" "$d/fixture/util.csv"
	else
		install -m 0644 "$fx/a100x8-query.csv" "$d/fixture/query.csv"
		: >"$d/fixture/list.txt"
		chmod 0644 "$d/fixture/list.txt"
		install -m 0644 "$fx/a100x8-smi.txt" "$d/fixture/smi.txt"
		install -m 0644 "$fx/a100x8-util.csv" "$d/fixture/util.csv"
	fi
	printf '%s\n' '#!/bin/sh' \
		'# prints captured nvidia-smi output: the test world has no GPU' \
		'case "$*" in' \
		'*--query-gpu=uuid,utilization.gpu*) cat /fixture/util.csv ;;' \
		'*--query-gpu*) cat /fixture/query.csv ;;' \
		'-L) cat /fixture/list.txt ;;' \
		"'') cat /fixture/smi.txt ;;" \
		'*) echo "nvidia-smi stand-in: unsupported arguments: $*" >&2; exit 2 ;;' \
		'esac' >"$d/usr/bin/nvidia-smi"
	chmod 0755 "$d/usr/bin/nvidia-smi"
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
	install -d -m 0700 "$DOCKERCFG"
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

# rootfs_cache RECIPE : where a debootstrap recipe's root filesystem is kept:
# named by the recipe and its package list, so a changed list is rebuilt.
rootfs_cache() {
	local pk=${RECIPE[$1.rootfs]#debootstrap:}
	printf '%s/%s-rootfs-bookworm-%s.tar\n' "$CACHE" "$1" "$(printf '%s' "$pk" | md5sum | cut -c1-8)"
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
		out=$(rootfs_cache "$name")
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

