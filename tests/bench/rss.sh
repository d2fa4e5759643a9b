#!/usr/bin/env bash
# rss.sh — memory of an idle server: peak resident set (VmHWM in
# /proc/PID/status) of gpucloudd with its default settings, after start-up
# and ~2 s idle, and again after 1000 GET /healthz over 10 keep-alive
# connections. Baseline: a private nginx (one worker, access log off), the
# master's and the worker's VmHWM added up, after the same steps.
#
# gpucloudd is measured on a fresh database, where start-up seeds the admin
# account (and hashes its password), then restarted on that database. The
# last figure is its peak after one login as well: a login verifies a
# scrypt hash, whose working memory is 128 * 2^scrypt_ln * 8 bytes (128 MiB
# at the default ln 17), and VmHWM keeps that peak for good.
#
# Figures in MiB; ratio ours/nginx, lower is better; the goal is an absolute
# bound on ours: < 20 MiB. *_vmrss_mib is the resident set at the end.
set -euo pipefail
BENCH=rss
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

need nginx nginx-light
need node nodejs
IDLE=${BENCH_IDLE:-2}

WEB=$TMP/web
install -d -m 0755 "$WEB"
printf 'gpucloud\n' >"$WEB/index.html"

# hwm PID...: the sum of their VmHWM, in MiB.
hwm() {
	local pid kb=0
	for pid in "$@"; do
		kb=$((kb + $(vm_kb "$pid" VmHWM)))
	done
	awk -v k="$kb" 'BEGIN { printf "%.1f", k / 1024 }'
}

hit() {
	load_run --url="$1" --rate=1000 --count=1000 --conns=10 >"$TMP/load.json" ||
		die "load.mjs failed against $1: $(cat "$TMP/load.json")"
	(($(json_field "$(cat "$TMP/load.json")" ok) == 1000)) ||
		die "not every request to $1 succeeded: $(cat "$TMP/load.json")"
}

db_new
db=$DB_NAME
gc_start "$db" "$TMP/gpucloudd.log"
sleep "$IDLE"
gc_seed=$(hwm "$GC_PID")
stop "$GC_PID"
gc_start "$db" "$TMP/gpucloudd.log"
sleep "$IDLE"
gc_idle=$(hwm "$GC_PID")
hit "http://127.0.0.1:$GC_PORT/healthz"
gc_after=$(hwm "$GC_PID")
gc_rss=$(awk -v k="$(vm_kb "$GC_PID" VmRSS)" 'BEGIN { printf "%.1f", k / 1024 }')
gc_login "$GC_PORT" >/dev/null
gc_login_hwm=$(hwm "$GC_PID")
say "gpucloudd: $(awk '/^Threads:/ { print $2 }' "/proc/$GC_PID/status") threads"

port=$(free_port)
nginx_start "$TMP/nginx" "$port" "$WEB" off
workers=$(pgrep -P "$NGINX_PID" || true)
[[ -n $workers ]] || die "no nginx worker under master $NGINX_PID"
sleep "$IDLE"
# shellcheck disable=SC2086 # one pid per word
ng_idle=$(hwm "$NGINX_PID" $workers)
hit "http://127.0.0.1:$port/healthz"
# shellcheck disable=SC2086
ng_after=$(hwm "$NGINX_PID" $workers)
ng_rss=0
# shellcheck disable=SC2086
for pid in "$NGINX_PID" $workers; do
	ng_rss=$((ng_rss + $(vm_kb "$pid" VmRSS)))
done
ng_rss=$(awk -v k="$ng_rss" 'BEGIN { printf "%.1f", k / 1024 }')

bench_line firststart_idle_vmhwm_mib "$gc_seed" "$ng_idle" '<20'
bench_line idle_vmhwm_mib "$gc_idle" "$ng_idle" '<20'
bench_line healthz1000_vmhwm_mib "$gc_after" "$ng_after" '<20'
bench_line healthz1000_vmrss_mib "$gc_rss" "$ng_rss" '<20'
bench_line afterlogin_vmhwm_mib "$gc_login_hwm" "$ng_after" '<20'
