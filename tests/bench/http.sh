#!/usr/bin/env bash
# http.sh — the HTTP layer alone: gpucloudd's GET /healthz and a 1 KiB static
# file against a private nginx (one worker, keep-alive, access log off)
# serving the same file and the same /healthz body, in the same run.
#
# Servers on CPU 0, wrk on CPU 1: wrk -t1 -c50 -d10s --latency, no
# Accept-Encoding. gpucloudd runs with --log-level=warn for the headline
# figures; static_loginfo repeats the static run at the default level, info,
# where every request is logged (to a file), against nginx with its access
# log on (to a file), so the cost of logging shows next to the headline.
# All four servers are up at once, idle but for the one under load, and the
# measurements alternate between ours and nginx's for ROUNDS rounds; the
# best round of each counts.
#
# Figures: *_rps is requests/s, ratio ours/nginx, higher is better;
# *_p99_ms is wrk's p99 latency at saturation (50 connections) in the best
# round, ratio ours/nginx, lower is better.
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

db_new
db=$DB_NAME
gc_start "$db" "$TMP/gpucloudd-warn.log" --web-root="$WEB" --log-level=warn
gc_warn=$GC_PORT
gc_start "$db" "$TMP/gpucloudd-info.log" --web-root="$WEB" --log-level=info
gc_info=$GC_PORT
ng_off=$(free_port)
nginx_start "$TMP/nginx" "$ng_off" "$WEB" off
ng_log=$(free_port)
nginx_start "$TMP/nginx-log" "$ng_log" "$WEB" "$TMP/nginx-log/logs/access.log"

# The same bytes from both, and no compression asked for.
for url in "http://127.0.0.1:$gc_warn/bench.txt" "http://127.0.0.1:$ng_off/bench.txt"; do
	cmp -s "$WEB/bench.txt" <(curl -fsS -m 5 "$url") || die "$url does not serve the 1 KiB file"
done

for ((round = 1; round <= ROUNDS; round++)); do
	wrk_best gc_healthz "http://127.0.0.1:$gc_warn/healthz"
	wrk_best ng_healthz "http://127.0.0.1:$ng_off/healthz"
	wrk_best gc_static "http://127.0.0.1:$gc_warn/bench.txt"
	wrk_best ng_static "http://127.0.0.1:$ng_off/bench.txt"
	wrk_best gc_static_info "http://127.0.0.1:$gc_info/bench.txt"
	wrk_best ng_static_log "http://127.0.0.1:$ng_log/bench.txt"
done

cost() { awk -v a="${BEST_RPS[$1]}" -v b="${BEST_RPS[$2]}" 'BEGIN { printf "%.0f%%", 100 * (1 - a / b) }'; }
say "logging every request costs gpucloudd $(cost gc_static_info gc_static) of its static" \
	"throughput at info (nginx's access log costs it $(cost ng_static_log ng_static))"

bench_line healthz_rps "${BEST_RPS[gc_healthz]}" "${BEST_RPS[ng_healthz]}" '>=0.9'
bench_line healthz_p99_ms "${BEST_P99[gc_healthz]}" "${BEST_P99[ng_healthz]}" '<=1.5'
bench_line static_rps "${BEST_RPS[gc_static]}" "${BEST_RPS[ng_static]}" '>=1.0'
bench_line static_p99_ms "${BEST_P99[gc_static]}" "${BEST_P99[ng_static]}" '<=1.5'
bench_line static_loginfo_rps "${BEST_RPS[gc_static_info]}" "${BEST_RPS[ng_static_log]}" '>=0.7'
