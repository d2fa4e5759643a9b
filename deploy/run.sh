#!/usr/bin/env bash
# run.sh — what `make run` starts: gpucloudd on one machine with nothing
# configured. Unless told otherwise it brings its own PostgreSQL (a private
# cluster under var/run/pg — or, when user postgres cannot reach the checkout,
# under /var/lib/gpucloud/pg-<hash> — unix socket only) and uses the local Docker engine,
# or, as root with no engine answering, a private dockerd under var/run/docker
# on a bridge of its own (gcrun0: the test world's engines and the system's
# docker0 are left alone, so `make world` may run beside it).
# gpucloudd runs in the foreground; Ctrl-C stops it, then whatever this
# script started (and the registry of `make demo`, which it starts again when
# a demo was set up). An engine it found running is left alone.
#
# Environment:
#   GPUCLOUD_PORT         HTTP port (default 8080)
#   GPUCLOUD_DB_URL       use this database instead of the private cluster
#   GPUCLOUD_DOCKER_HOST  use this engine (unix:///path or tcp://host:port)
#   GPUCLOUD_RUN_PG_PORT  port number of the private cluster's socket (5434)
#   GPUCLOUD_BIN          server command (default build/gpucloudd)
# Every other GPUCLOUD_* setting passes through to gpucloudd.
set -euo pipefail

PROG=run
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=deploy/lib.sh
. "$ROOT/deploy/lib.sh"

R=$ROOT/var/run
RPG=$(pg_place "$R") # the PostgreSQL cluster: in $R unless postgres cannot reach it
PG_PORT=${GPUCLOUD_RUN_PG_PORT:-5434}
DOCKER_DIR=$R/docker
DOCKER_SOCK=$DOCKER_DIR/docker.sock
DOCKER_PIDFILE=$DOCKER_DIR/docker.pid
DOCKER_EXEC_ROOT=/run/gcr-docker # short: socket paths below it are limited
SYSTEM_DOCKER_SOCK=/var/run/docker.sock

started_pg=0
started_docker=0
made_bridge=0
stopping=0
srv=

# shellcheck disable=SC2317 # called from a trap
cleanup() {
	local rc=$?
	trap - INT TERM
	if [[ -n $srv ]] && pid_alive "$srv"; then
		stop_pid "$srv" 30 gpucloudd
	fi
	if ((started_docker)); then
		say "stopping the private Docker engine"
		dockerd_stop "$DOCKER_SOCK" "$DOCKER_PIDFILE" "$DOCKER_EXEC_ROOT" "$DOCKER_DIR/data" \
			private graceful
		# dockerd leaves its bridge behind; drop it if it came with us.
		if ((made_bridge)); then
			bridge_down "$RUN_BRIDGE" '10\.230\.0\.'
		fi
	fi
	# the registry of `make demo`, which its pulls need while we run
	if [[ -d $R/demo/registry ]]; then
		GPUCLOUD_DEMO_DIR=$R/demo bash "$ROOT/deploy/demo.sh" down || true
	fi
	if ((started_pg)); then
		say "stopping PostgreSQL"
		pg_down "$RPG/pg"
	fi
	return "$rc"
}

# shellcheck disable=SC2317 # called from a trap
on_signal() {
	stopping=1
	if [[ -n $srv ]]; then
		kill -TERM "$srv" 2>/dev/null || true
	else
		exit 130 # still starting: the EXIT trap undoes what was started
	fi
}

trap cleanup EXIT
trap on_signal INT TERM

read -r -a server_cmd <<<"${GPUCLOUD_BIN:-$ROOT/build/gpucloudd}"
if [[ ${#server_cmd[@]} -eq 0 ]]; then
	die "GPUCLOUD_BIN is empty"
fi
if [[ ${server_cmd[0]} == */* ]]; then
	[[ -x ${server_cmd[0]} ]] || die "'${server_cmd[0]}' is missing; build it first: make"
elif ! command -v "${server_cmd[0]}" >/dev/null 2>&1; then
	die "'${server_cmd[0]}' is not on PATH"
fi

install -d -m 0755 "$R"
install -d -m 0700 "$R/state"

# --- database --------------------------------------------------------------
if [[ -n ${GPUCLOUD_DB_URL:-} ]]; then
	say "database: GPUCLOUD_DB_URL from the environment"
else
	# Ours to stop at exit, also when an earlier run left it running.
	started_pg=1
	pg_up "$RPG/pg" "$RPG/pgsock" "$PG_PORT" "$RPG/pg.log" 100
	role=$(id -un)
	pg_bootstrap "$RPG/pgsock" "$PG_PORT" gpucloud "$role"
	GPUCLOUD_DB_URL="postgresql:///gpucloud?host=$RPG/pgsock&port=$PG_PORT&user=$role"
	say "database: private PostgreSQL, $GPUCLOUD_DB_URL"
fi
export GPUCLOUD_DB_URL

# --- Docker engine ---------------------------------------------------------
if [[ -n ${GPUCLOUD_DOCKER_HOST:-} ]]; then
	say "Docker engine: GPUCLOUD_DOCKER_HOST from the environment ($GPUCLOUD_DOCKER_HOST)"
elif engine_answers "$SYSTEM_DOCKER_SOCK"; then
	GPUCLOUD_DOCKER_HOST=unix://$SYSTEM_DOCKER_SOCK
	say "Docker engine: the local one on $SYSTEM_DOCKER_SOCK"
elif [[ $(id -u) -eq 0 ]] && command -v dockerd >/dev/null 2>&1; then
	install -d -m 0711 "$DOCKER_DIR"
	((${#DOCKER_SOCK} < 100)) || warn "socket path '$DOCKER_SOCK' is long; unix socket paths are limited to 107 bytes"
	started_docker=1
	if ! engine_answers "$DOCKER_SOCK"; then
		ip link show "$RUN_BRIDGE" >/dev/null 2>&1 || made_bridge=1
		bridge_up "$RUN_BRIDGE" "$RUN_BRIDGE_ADDR"
		mapfile -t net_args < <(run_engine_net_args)
		say "Docker engine: starting a private one on bridge $RUN_BRIDGE (log: $DOCKER_DIR/docker.log)"
		dockerd_start "$DOCKER_PIDFILE" "$DOCKER_DIR/docker.log" \
			--data-root "$DOCKER_DIR/data" \
			--exec-root "$DOCKER_EXEC_ROOT" \
			-H "unix://$DOCKER_SOCK" \
			"${net_args[@]}" \
			--containerd-namespace gcr \
			--containerd-plugins-namespace gcr-plugins
		dockerd_wait "$DOCKER_SOCK" "$DOCKER_PIDFILE" "$DOCKER_DIR/docker.log" 90 private
	fi
	GPUCLOUD_DOCKER_HOST=unix://$DOCKER_SOCK
	say "Docker engine: private, $GPUCLOUD_DOCKER_HOST"
else
	warn "no Docker engine answers on $SYSTEM_DOCKER_SOCK and none can be started (needs root and dockerd); GPU nodes can be added later"
fi
if [[ -n ${GPUCLOUD_DOCKER_HOST:-} ]]; then
	export GPUCLOUD_DOCKER_HOST
fi

# --- the demo's registry (after `make demo`) -------------------------------
GPUCLOUD_DEMO_DIR=$R/demo bash "$ROOT/deploy/demo.sh" registry ||
	warn "the registry of \`make demo\` did not start; its image cannot be pulled"

# --- server ----------------------------------------------------------------
export GPUCLOUD_PORT=${GPUCLOUD_PORT:-8080}
export GPUCLOUD_STATE_DIR=${GPUCLOUD_STATE_DIR:-$R/state}
export GPUCLOUD_WEB_ROOT=${GPUCLOUD_WEB_ROOT:-$ROOT/web}
export GPUCLOUD_MIGRATIONS_DIR=${GPUCLOUD_MIGRATIONS_DIR:-$ROOT/db/migrations}

cd "$ROOT"
if ((stopping)); then exit 130; fi
say "starting ${server_cmd[*]} on port $GPUCLOUD_PORT (Ctrl-C stops everything)"
# In its own session, so that a terminal's Ctrl-C reaches only this script,
# which passes on exactly one SIGTERM (a second signal would cut short the
# server's graceful shutdown). In the background so that signals reach this
# script at once; stdin is passed on explicitly (background jobs get /dev/null).
setsid "${server_cmd[@]}" <&0 &
srv=$!

while :; do
	set +e
	wait "$srv"
	rc=$?
	set -e
	if pid_alive "$srv"; then
		# A signal interrupted the wait; on_signal has asked it to stop.
		if ((stopping)); then
			stop_pid "$srv" 30 gpucloudd
		fi
		continue
	fi
	break
done
srv=
if ((stopping)); then
	say "stopped"
	case $rc in 0 | 130 | 143) exit 0 ;; esac
else
	warn "gpucloudd exited with status $rc"
fi
exit "$rc"
