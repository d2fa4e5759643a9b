#!/usr/bin/env bash
# deps.sh — install what gpucloud needs to build, run and test on Debian 12:
# compilers and libraries, PostgreSQL 15, Docker Engine and registry, the
# browser and tools the tests drive, and the web tests' npm packages.
# Idempotent: returns at once when everything is present.
set -euo pipefail

PROG=deps
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=deploy/lib.sh
. "$ROOT/deploy/lib.sh"

PACKAGES=(
	# build
	build-essential pkg-config clang clang-format cppcheck git xz-utils
	# libraries
	libevent-dev libhttp-parser-dev libpq-dev libcurl4-openssl-dev
	libjansson-dev libssl-dev
	# the test world and `make run`
	postgresql-15 postgresql-client-15 docker.io docker-registry apache2-utils
	busybox-static iproute2 iptables openssl curl ca-certificates procps psmisc
	debootstrap jq
	# end-to-end tests and benchmarks
	chromium fonts-wqy-microhei nginx-light wrk
	# the benchmarks' counting tools (system calls, instructions)
	strace valgrind
	# the proxy benchmark's baseline (JupyterHub's proxy)
	node-configurable-http-proxy
	# operations: promtool checks /metrics, systemd-analyze the unit, an SMTP
	# sink receives notification mail, libyaml reads the CLI's job files
	prometheus systemd python3-aiosmtpd libyaml-dev
)
# Node.js may come from elsewhere; only install Debian's when there is none.
if ! command -v node >/dev/null 2>&1; then
	PACKAGES+=(nodejs npm)
fi

missing_packages() {
	local -A installed=()
	local name status p
	while read -r name status; do
		[[ $status == ii* ]] && installed[$name]=1
	done < <(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${PACKAGES[@]}" 2>/dev/null || true)
	for p in "${PACKAGES[@]}"; do
		[[ -n ${installed[$p]:-} ]] || printf '%s\n' "$p"
	done
}

as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "installing packages needs root; run $0 as root"
	fi
}

install_packages() {
	local -a missing
	mapfile -t missing < <(missing_packages)
	if [[ ${#missing[@]} -eq 0 ]]; then
		say "Debian packages: all ${#PACKAGES[@]} present"
		return 0
	fi
	say "installing: ${missing[*]}"
	as_root apt-get update -q || die "apt-get update failed"
	as_root env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends "${missing[@]}" ||
		die "apt-get install failed for: ${missing[*]}"
	mapfile -t missing < <(missing_packages)
	[[ ${#missing[@]} -eq 0 ]] || die "still missing after install: ${missing[*]}"
}

# The web tests' packages (playwright-core drives Debian's chromium).
install_node_modules() {
	local lock=$ROOT/package-lock.json stamp=$ROOT/node_modules/.package-lock.json
	[[ -f $ROOT/package.json ]] || return 0
	command -v npm >/dev/null 2>&1 || die "npm is missing; install Debian's npm package"
	if [[ ! -f $lock ]]; then
		warn "package-lock.json is missing; running npm install, which creates it (commit it)"
		(cd "$ROOT" && npm install --no-audit --no-fund) || die "npm install failed"
	elif [[ ! -f $stamp || $lock -nt $stamp ]]; then
		say "installing node modules from package-lock.json"
		(cd "$ROOT" && npm ci --no-audit --no-fund) || die "npm ci failed"
	else
		say "node modules: up to date"
	fi
}

# xterm.js for the web terminal, served from web/vendor/ (no CDN; generated,
# not committed).
install_vendor() {
	local src=$ROOT/node_modules/@xterm dst=$ROOT/web/vendor
	[[ -f $src/xterm/lib/xterm.js ]] || die "node_modules/@xterm/xterm is missing (npm ci failed?)"
	install -d -m 0755 "$dst"
	install -m 0644 "$src/xterm/lib/xterm.js" "$dst/xterm.js"
	install -m 0644 "$src/xterm/css/xterm.css" "$dst/xterm.css"
	install -m 0644 "$src/addon-fit/lib/addon-fit.js" "$dst/addon-fit.js"
}

install_packages
install_node_modules
install_vendor
