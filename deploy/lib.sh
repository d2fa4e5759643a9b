# shellcheck shell=bash
# Helpers shared by the deploy scripts: messages, process handling, a private
# PostgreSQL cluster and private Docker engines. Sourced, never run; the caller
# sets PROG (message prefix) and runs with `set -euo pipefail`.

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

say() { printf '%s: %s\n' "${PROG:-deploy}" "$*" >&2; }
warn() { printf '%s: warning: %s\n' "${PROG:-deploy}" "$*" >&2; }
die() {
	printf '%s: error: %s\n' "${PROG:-deploy}" "$*" >&2
	exit 1
}

# Print the last lines of a log file, indented, to help explain a failure.
show_log() {
	local file=$1 lines=${2:-30}
	[[ -r $file ]] || return 0
	printf '%s: --- last %s lines of %s ---\n' "${PROG:-deploy}" "$lines" "$file" >&2
	tail -n "$lines" -- "$file" | sed 's/^/    /' >&2 || true
	printf '%s: ---\n' "${PROG:-deploy}" >&2
}

need_root() {
	[[ $(id -u) -eq 0 ]] || die "$1 needs root (run it as root or with sudo)"
}

# Single-quote a value for a sourceable shell file.
shquote() {
	local s=${1//\'/\'\\\'\'}
	printf "'%s'" "$s"
}

# A random secret of 64 URL-safe characters (the shape of an NGC API key).
rand_key() {
	openssl rand -base64 48 | tr -d '\n=' | tr '+/' '-_'
}

# True when PID is alive (not a zombie) and its command name is NAME: guards
# against reuse of a pid recorded in a stale pid file, and against a killed
# daemon that nobody has reaped yet.
pid_is() {
	local pid=$1 name=$2 stat comm state
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
	comm=${stat#*(}
	comm=${comm%)*}
	state=${stat##*) }
	state=${state%% *}
	[[ $comm == "$name" && $state != Z ]]
}

# True when PID exists and is not a zombie.
pid_alive() {
	local stat state
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	state=${stat##*) }
	[[ ${state%% *} != Z ]]
}

# The pid recorded in FILE, or nothing.
pid_from_file() {
	local file=$1 pid=
	[[ -r $file ]] && read -r pid <"$file" 2>/dev/null
	[[ $pid =~ ^[0-9]+$ ]] && printf '%s\n' "$pid"
	return 0
}

# Wait up to SECONDS for PID to exit; true when it did.
wait_exit() {
	local pid=$1 secs=$2 i
	for ((i = 0; i < secs * 10; i++)); do
		pid_alive "$pid" || return 0
		sleep 0.1
	done
	! pid_alive "$pid"
}

# SIGTERM, then SIGKILL after SECONDS. Only ever called with pids this
# project started (read from its own pid files or found by its own paths).
stop_pid() {
	local pid=$1 secs=${2:-10} what=${3:-process}
	pid_alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || true
	if ! wait_exit "$pid" "$secs"; then
		warn "$what (pid $pid) ignored SIGTERM for ${secs}s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
		wait_exit "$pid" 5 || warn "$what (pid $pid) survived SIGKILL"
	fi
}

# Pids of processes whose command line contains STRING (our own paths only).
pids_with_arg() {
	local needle=$1 d pid cmd
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		[[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
		cmd=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
		[[ $cmd == *"$needle"* ]] && printf '%s\n' "$pid"
	done
	return 0
}

# Children of PID, recursively (deepest last).
descendants() {
	local pid=$1 child
	for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do
		printf '%s\n' "$child"
		descendants "$child"
	done
}

# Unmount whatever is still mounted under DIR (deepest first), lazily.
umount_under() {
	local dir=$1 mnt
	[[ -n $dir && $dir == /* ]] || return 0
	awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo |
		sort -r | while read -r mnt; do
		umount -l "$mnt" 2>/dev/null || warn "could not unmount '$mnt'"
	done
}

# ---------------------------------------------------------------------------
# PostgreSQL: a private cluster reached only through a unix socket directory.

# Run a PostgreSQL server program as the cluster owner: user postgres when we
# are root (initdb and postgres refuse to run as root), else ourselves.
as_pg() {
	if [[ $(id -u) -eq 0 ]]; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

# pg_place DIR: the folder a private cluster for DIR lives in (its data
# directory pg/, socket directory pgsock/ and pg.log): DIR itself when the
# cluster owner can reach it, else a folder of its own under
# /var/lib/gpucloud named after DIR.  As root the owner is postgres, who
# cannot enter a 0700 folder such as root's home, where root's clone lands.
pg_place() {
	local dir=$1 near=$1
	while [[ ! -e $near && $near == /* && $near != / ]]; do near=$(dirname -- "$near"); done
	if [[ $(id -u) -ne 0 ]] || (cd / && runuser -u postgres -- test -x "$near") 2>/dev/null; then
		printf '%s\n' "$dir"
		return
	fi
	printf '/var/lib/gpucloud/pg-%s\n' "$(printf '%s' "$dir" | sha256sum | cut -c1-16)"
}

# Create a directory owned by the cluster owner.
pg_dir() {
	local mode=$1 dir=$2
	if [[ $(id -u) -eq 0 ]]; then
		install -d -o postgres -g postgres -m "$mode" "$dir"
	else
		install -d -m "$mode" "$dir"
	fi
}

# pg_running SOCKDIR PORT
pg_running() {
	"$PG_BIN/pg_isready" -q -h "$1" -p "$2" >/dev/null 2>&1
}

# pg_up DATADIR SOCKDIR PORT LOGFILE MAXCONN
# Creates the cluster when missing, then starts it unless it already answers.
# Settings live in world.conf, rewritten on every start, so edits here take
# effect without a new initdb.
pg_up() {
	local data=$1 sock=$2 port=$3 log=$4 maxconn=$5 pid
	[[ -x $PG_BIN/initdb ]] || die "PostgreSQL 15 is not installed ($PG_BIN/initdb missing); run deploy/deps.sh"
	if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
		die "user 'postgres' is missing; run deploy/deps.sh"
	fi
	pg_dir 0755 "$sock"
	if pg_running "$sock" "$port"; then
		return 0
	fi
	if [[ ! -s $data/PG_VERSION ]]; then
		say "initialising PostgreSQL cluster in $data"
		rm -rf -- "$data"
		pg_dir 0700 "$data"
		if ! as_pg "$PG_BIN/initdb" -D "$data" -U postgres -A trust -E UTF8 \
			--locale=C.UTF-8 --no-sync >"$log.initdb" 2>&1; then
			show_log "$log.initdb"
			die "initdb failed for '$data'"
		fi
		printf "\ninclude_if_exists = 'world.conf'\n" >>"$data/postgresql.conf"
	fi
	cat >"$data/world.conf" <<EOF
# Written by the deploy scripts on every start; local settings, not for production.
listen_addresses = ''
port = $port
unix_socket_directories = '$sock'
max_connections = $maxconn
fsync = off
synchronous_commit = off
full_page_writes = off
log_min_messages = warning
log_line_prefix = '%m [%p] '
EOF
	# A pid file left by a crash whose pid now belongs to something else
	# would make the postmaster refuse to start.
	pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)
	if [[ -n $pid ]] && ! pid_is "$pid" postgres; then
		rm -f -- "$data/postmaster.pid"
	fi
	say "starting PostgreSQL on $sock port $port"
	touch "$log"
	if [[ $(id -u) -eq 0 ]]; then
		chown postgres:postgres "$data/world.conf" "$log"
	fi
	# pg_ctl puts the postmaster in its own session: a terminal's Ctrl-C
	# does not reach it.
	if ! as_pg "$PG_BIN/pg_ctl" -D "$data" -l "$log" -w -t 60 start >/dev/null 2>&1 9>&-; then
		show_log "$log"
		die "PostgreSQL did not start from '$data'"
	fi
}

# pg_sql SOCKDIR PORT ARGS... : psql as the bootstrap superuser.
pg_sql() {
	local sock=$1 port=$2
	shift 2
	"$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$port" -U postgres -d postgres "$@"
}

# pg_bootstrap SOCKDIR PORT DBNAME ROLE : a superuser ROLE that can log in,
# and database DBNAME owned by it.
pg_bootstrap() {
	local sock=$1 port=$2 db=$3 role=$4 have
	have=$(pg_sql "$sock" "$port" -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$role'")
	[[ $have == 1 ]] || pg_sql "$sock" "$port" -c "CREATE ROLE \"$role\" SUPERUSER LOGIN"
	have=$(pg_sql "$sock" "$port" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'")
	[[ $have == 1 ]] || pg_sql "$sock" "$port" -c "CREATE DATABASE \"$db\" OWNER \"$role\""
}

# pg_down DATADIR : fast shutdown; a no-op when the cluster is not running.
pg_down() {
	local data=$1 pid
	[[ -s $data/PG_VERSION ]] || return 0
	pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)
	[[ -n $pid ]] && pid_is "$pid" postgres || return 0
	if ! as_pg "$PG_BIN/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null 2>&1; then
		warn "pg_ctl stop failed for '$data'; signalling the postmaster"
		stop_pid "$pid" 10 postgres
	fi
}

# ---------------------------------------------------------------------------
# Docker engines started by these scripts.

DOCKER_CLI=${DOCKER_CLI:-}
if [[ -z $DOCKER_CLI ]]; then
	# The CLI packaged with the engine; any other docker CLI on PATH works too.
	if [[ -x /usr/bin/docker ]]; then DOCKER_CLI=/usr/bin/docker; else DOCKER_CLI=docker; fi
fi

# engine_answers SOCKET : the engine behind a unix socket answers /_ping.
engine_answers() {
	[[ -S $1 ]] && curl -fsS -m 5 --unix-socket "$1" -o /dev/null http://engine/_ping 2>/dev/null
}

# dockerd_start PIDFILE LOG ARGS... : start dockerd detached (own session, so
# a terminal's Ctrl-C does not reach it). Removes a stale pid file first.
declare -A DOCKERD_LAUNCHED=()
dockerd_start() {
	local pidfile=$1 log=$2 pid
	shift 2
	pid=$(pid_from_file "$pidfile")
	if [[ -n $pid ]] && ! pid_is "$pid" dockerd; then
		rm -f -- "$pidfile"
	fi
	: >"$log"
	setsid dockerd --pidfile "$pidfile" "$@" </dev/null >>"$log" 2>&1 9>&- &
	# dockerd removes its pid file when it fails; remember the pid ourselves.
	DOCKERD_LAUNCHED[$pidfile]=$!
}

# dockerd_wait SOCKET PIDFILE LOG SECONDS NAME : wait until the engine answers.
dockerd_wait() {
	local sock=$1 pidfile=$2 log=$3 secs=$4 name=$5 i pid
	pid=${DOCKERD_LAUNCHED[$pidfile]:-$(pid_from_file "$pidfile")}
	for ((i = 0; i < secs * 5; i++)); do
		engine_answers "$sock" && return 0
		if [[ -n $pid ]] && ! pid_alive "$pid"; then
			# One last look: it may have answered just before exiting.
			engine_answers "$sock" && return 0
			show_log "$log"
			die "Docker engine '$name' exited during start-up (log: $log)"
		fi
		sleep 0.2
	done
	show_log "$log"
	die "Docker engine '$name' did not answer on $sock within ${secs}s (log: $log)"
}

# dockerd_stop SOCKET PIDFILE EXECROOT DATAROOT NAME [kill|graceful] : with
# `kill` (the default), kill running containers first (a container whose PID 1
# ignores SIGTERM would otherwise hold shutdown for its stop timeout); with
# `graceful`, let dockerd stop them. Then stop dockerd and clean up any
# containerd or shim that outlived it, and the mounts dockerd leaves behind
# (it bind-mounts its data root onto itself).
dockerd_stop() {
	local sock=$1 pidfile=$2 execroot=$3 dataroot=$4 name=$5 mode=${6:-kill} pid p c ids
	pid=$(pid_from_file "$pidfile")
	if [[ $mode == kill ]] && engine_answers "$sock"; then
		ids=$(timeout 20 "$DOCKER_CLI" -H "unix://$sock" ps -q 2>/dev/null || true)
		if [[ -n $ids ]]; then
			# shellcheck disable=SC2086 # one id per word
			timeout 30 "$DOCKER_CLI" -H "unix://$sock" kill $ids >/dev/null 2>&1 || true
		fi
	fi
	if [[ -n $pid ]] && pid_is "$pid" dockerd; then
		stop_pid "$pid" 60 "dockerd $name"
	fi
	rm -f -- "$pidfile"
	# containerd and its shims name the exec root on their command lines.
	for p in $(pids_with_arg "$execroot/"); do
		for c in $(descendants "$p"); do kill -KILL "$c" 2>/dev/null || true; done
		stop_pid "$p" 5 "leftover process of engine $name"
	done
	umount_under "$execroot"
	umount_under "$dataroot"
	rm -f -- "$sock"
}

# ---------------------------------------------------------------------------
# A private docker-registry with htpasswd credentials.

# registry_answers_at HOST:PORT : a registry there asks for credentials.
registry_answers_at() {
	local code
	code=$(curl -s -m 3 -o /dev/null -w '%{http_code}' "http://$1/v2/" 2>/dev/null || true)
	[[ $code == 401 ]]
}

# registry_serve DIR HOST:PORT USER NAME WHAT : a docker-registry serving
# DIR/data on HOST:PORT, started unless it already runs there. Its password
# is DIR/key (made once, 64 random characters), checked through DIR/htpasswd
# for USER; NAME is its realm, WHAT goes in its config's first line. It runs
# detached (own session, pid in DIR/pid) until registry_stop DIR.
registry_serve() {
	local d=$1 addr=$2 user=$3 name=$4 what=$5 pid i
	install -d -m 0700 "$d" "$d/data"
	if [[ ! -s $d/key ]]; then
		(umask 077 && rand_key >"$d/key.tmp" && mv "$d/key.tmp" "$d/key")
	fi
	if [[ ! -s $d/htpasswd || $d/key -nt $d/htpasswd ]]; then
		(umask 077 && htpasswd -Bbn "$user" "$(cat "$d/key")" >"$d/htpasswd.tmp" &&
			mv "$d/htpasswd.tmp" "$d/htpasswd")
	fi
	cat >"$d/config.yml" <<EOF
# Written by deploy/$PROG.sh: $what.
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
  addr: $addr
  secret: $name
auth:
  htpasswd:
    realm: $name
    path: $d/htpasswd
EOF
	pid=$(pid_from_file "$d/pid")
	if [[ -n $pid ]] && pid_is "$pid" docker-registry && registry_answers_at "$addr"; then
		return 0
	fi
	[[ -n $pid ]] && pid_is "$pid" docker-registry && stop_pid "$pid" 5 docker-registry
	rm -f -- "$d/pid"
	if registry_answers_at "$addr"; then
		die "something else already serves $addr; stop it first"
	fi
	command -v docker-registry >/dev/null 2>&1 || die "docker-registry is missing; run deploy/deps.sh"
	say "starting registry on $addr"
	: >"$d/registry.log"
	setsid docker-registry serve "$d/config.yml" </dev/null >>"$d/registry.log" 2>&1 9>&- &
	echo $! >"$d/pid"
	for ((i = 0; i < 100; i++)); do
		registry_answers_at "$addr" && return 0
		pid_alive "$(pid_from_file "$d/pid")" || break
		sleep 0.1
	done
	show_log "$d/registry.log"
	die "registry did not start on $addr"
}

# registry_stop DIR : stops the registry registry_serve DIR started, if it runs.
registry_stop() {
	local d=$1 pid
	pid=$(pid_from_file "$d/pid")
	if [[ -n $pid ]] && pid_is "$pid" docker-registry; then
		stop_pid "$pid" 10 docker-registry
	fi
	rm -f -- "$d/pid"
}

# ---------------------------------------------------------------------------
# Bridges and network settings of the engines these scripts start.

# bridge_up NAME ADDR/PREFIX : a bridge of our own for an engine, addressed
# and up (kept when it is there already).
bridge_up() {
	local br=$1 addr=$2 addrs
	ip link show "$br" >/dev/null 2>&1 || ip link add "$br" type bridge
	addrs=$(ip -4 -o addr show dev "$br")
	[[ $addrs == *" $addr "* ]] || ip addr add "$addr" dev "$br"
	ip link set "$br" up
}

# bridge_down NAME SUBNET_PREFIX : deletes the bridge and exactly the
# iptables rules dockerd left for it (they name the bridge or start with
# SUBNET_PREFIX, a regular expression such as 10\.231\.1\.), so no stale
# rule outlives the engine.
bridge_down() {
	local br=$1 subnet=$2 table rule
	local -a words
	if ip link show "$br" >/dev/null 2>&1; then
		ip link del "$br" || warn "could not delete bridge $br"
	fi
	command -v iptables >/dev/null || return 0
	for table in filter nat; do
		while read -r rule; do
			read -ra words <<<"$rule"
			words[0]=-D
			iptables -w -t "$table" "${words[@]}" 2>/dev/null || true
		done < <(iptables -w -t "$table" -S 2>/dev/null |
			grep -E -- "^-A .*( $br( |$)| $subnet)" || true)
	done
}

# Engines side by side.  dockerd 20.10 deletes the host's bridge named
# docker0 at start-up, whichever bridge it is told to use itself, in two
# cases: started with --bridge=none, and started with --default-address-pool
# when its data root holds the default network of an earlier run (every
# restart) unless live restore is on.  A world engine restarted by `make
# world` after `make world-down` (or by a test) was the second case, and
# took the docker0 of `make run`'s private engine (or of the system's
# engine) away: every container start there then failed with "could not
# find bridge docker0" (gpucloud issue 12).  So every engine started here
# has a bridge of its own, never docker0, and those with address pools run
# with --live-restore (containers outlive a stop of the engine; `world.sh
# down` kills them first).  tests/integration/coexist.test.mjs checks it.

# make run's private engine: its own bridge gcrun0 (10.230.0.1/24).  No
# address pools (its networks come from dockerd's default ones, which the
# world's pools do not overlap), so no live restore: a stop stops its
# containers.
RUN_BRIDGE=gcrun0
# shellcheck disable=SC2034 # used by run.sh and the coexistence test
RUN_BRIDGE_ADDR=10.230.0.1/24
run_engine_net_args() {
	printf '%s\n' --bridge "$RUN_BRIDGE"
}

# World node N: its bridge (gcbrN, 10.231.N.1/24) and network arguments:
# address pools of its own (10.24N.0.0/16: the nodes' user networks never
# overlap), hence live restore.
world_bridge() { printf 'gcbr%s\n' "$1"; }
world_bridge_addr() { printf '10.231.%s.1/24\n' "$1"; }
world_engine_net_args() {
	local n=$1
	printf '%s\n' --bridge "$(world_bridge "$n")" \
		--default-address-pool "base=10.24$n.0.0/16,size=24" --live-restore
}
