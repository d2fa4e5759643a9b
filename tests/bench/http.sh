#!/usr/bin/env bash
# http.sh — the HTTP layer alone: gpucloudd's GET /healthz and a 1 KiB static
# file against a private nginx (one worker, keep-alive, access log off)
# serving the same file and the same /healthz body, in the same run.
#
# Server on CPU 0, wrk on CPU 1: wrk -t1 -c50 -d10s --latency, no
# Accept-Encoding. gpucloudd runs with --log-level=warn for the headline
# figures; the *_loginfo figures repeat the run at the default level, info,
# where every request is logged, against nginx with its access log on, so the
# cost of logging shows next to the headline figure.
#
# Figures: *_rps is requests/s, ratio ours/nginx, higher is better;
# *_p99_ms is wrk's p99 latency at saturation (50 connections), ratio
# ours/nginx, lower is better.
set -euo pipefail
BENCH=http
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

need wrk wrk
need nginx nginx-light

WEB=$TMP/web
install -d -m 0755 "$WEB"
# 1 KiB of text, as a small frontend asset would be.
head -c 768 /dev/urandom | base64 -w 64 | head -c 1024 >"$WEB/bench.txt"
chmod 0644 "$WEB/bench.txt"
[[ $(stat -c %s "$WEB/bench.txt") -eq 1024 ]] || die "could not make the 1 KiB file"

db=$(db_new)

# measure NAME URL: wrk against URL; sets <NAME>_RPS and <NAME>_P99.
measure() {
	local name=$1 url=$2 bytes
	bytes=$(curl -fsS -m 5 -o /dev/null -w '%{size_download}' "$url") ||
		die "$url does not answer"
	wrk_run "$TMP/wrk-$name.txt" "$url"
	printf -v "${name}_RPS" '%s' "$RPS"
	printf -v "${name}_P99" '%s' "$P99_MS"
	say "$name: $RPS req/s, p50 $P50_MS ms, p99 $P99_MS ms ($bytes-byte body)"
}

# gpucloudd at warn.
gc_start "$db" "$TMP/gpucloudd-warn.log" --web-root="$WEB" --log-level=warn
measure gc_healthz "http://127.0.0.1:$GC_PORT/healthz"
measure gc_static "http://127.0.0.1:$GC_PORT/bench.txt"
stop "$GC_PID"

# nginx, access log off.
port=$(free_port)
nginx_start "$TMP/nginx" "$port" "$WEB" off
measure ng_healthz "http://127.0.0.1:$port/healthz"
measure ng_static "http://127.0.0.1:$port/bench.txt"
stop "$NGINX_PID"

# Both again, logging every request: gpucloudd at info (its default) to a
# file, nginx with its access log on to a file.
gc_start "$db" "$TMP/gpucloudd-info.log" --web-root="$WEB" --log-level=info
measure gc_static_info "http://127.0.0.1:$GC_PORT/bench.txt"
stop "$GC_PID"
port=$(free_port)
nginx_start "$TMP/nginx-log" "$port" "$WEB" "$TMP/nginx-log/logs/access.log"
measure ng_static_log "http://127.0.0.1:$port/bench.txt"
stop "$NGINX_PID"
say "logging every request at info costs gpucloudd $(awk -v a="$gc_static_info_RPS" -v b="$gc_static_RPS" \
	'BEGIN { printf "%.0f%%", 100 * (1 - a / b) }') of its static throughput" \
	"(nginx's access log: $(awk -v a="$ng_static_log_RPS" -v b="$ng_static_RPS" \
		'BEGIN { printf "%.0f%%", 100 * (1 - a / b) }'))"

bench_line healthz_rps "$gc_healthz_RPS" "$ng_healthz_RPS" '>=0.7'
bench_line healthz_p99_ms "$gc_healthz_P99" "$ng_healthz_P99" '<=1.5'
bench_line static_rps "$gc_static_RPS" "$ng_static_RPS" '>=0.7'
bench_line static_p99_ms "$gc_static_P99" "$ng_static_P99" '<=1.5'
bench_line static_loginfo_rps "$gc_static_info_RPS" "$ng_static_log_RPS" '>=0.7'
