#!/usr/bin/env bash
# proxy.sh — the app proxy against nginx as a reverse proxy and
# configurable-http-proxy (JupyterHub's), all in front of the same upstream
# (a private nginx serving 1 KiB and 1 MiB files), keep-alive on both sides.
#
# gpucloudd serves a route (an instance row pointing at the upstream, opened
# through the real handshake; every request is checked against its route
# cookie, cached for 1 s); nginx is tuned as one would (one worker,
# proxy_http_version 1.1, upstream keepalive, buffering on with buffers big
# enough that a 1 MiB response never spills to a temporary file, like ours
# never does); chp runs as
# Debian ships it (NODE_PATH=/usr/share/nodejs), when installed.
# Servers on CPU 0 (the upstream too), wrk on CPU 1.
#
# Figures:
#   small_rps / big_rps    requests/s for 1 KiB / 1 MiB, ratio ours/nginx (and
#                          ours/chp on the *_vs_chp lines), higher is better
#   small_syscalls_per_req system calls per 1 KiB request (strace -c over one
#                          keep-alive connection), ours/nginx's worker
#   added_p50_ms           p50 at one connection minus the upstream's own p50
#   ws_msgs_per_s          1,000 websockets each echoing 1 KiB frames in a
#                          closed loop, messages/s (best of ROUNDS, taken
#                          alternately), ratio ours/nginx
#   ws_cpu_us_per_msg      CPU time each proxy spent per echoed message over
#                          those rounds, ratio ours/nginx, lower is better
#   soak_rss_growth_pct, soak_fds_growth   RSS and open descriptors of
#                          gpucloudd at the end of BENCH_SOAK_SECONDS (default
#                          120, at least 40) of mixed HTTP and websocket load,
#                          against the same under load after the first 20 s
set -euo pipefail
BENCH=proxy
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

need wrk wrk
need nginx nginx-light
SOAK=${BENCH_SOAK_SECONDS:-120}
WS_CONNS=${BENCH_WS_CONNS:-1000}
WS_SECONDS=${BENCH_WS_SECONDS:-8}
PSQL=("$PG_BIN/psql" -qAtX -v ON_ERROR_STOP=1)

WEB=$TMP/web
install -d -m 0755 "$WEB"
head -c 768 /dev/urandom | base64 -w 64 | head -c 1024 >"$WEB/small.txt"
head -c 1048576 /dev/urandom >"$WEB/big.bin"
chmod 0644 "$WEB"/*

# the upstream
up=$(free_port)
nginx_start "$TMP/upstream" "$up" "$WEB" off
ws_up=$(free_port)
taskset -c "$SERVER_CPU" node "$ROOT/tests/bench/proxy_ws.mjs" echo "$ws_up" &
PIDS+=("$!")

# nginx as a reverse proxy, tuned
ngp=$(free_port)
install -d -m 0755 "$TMP/ngproxy/logs" "$TMP/ngproxy/tmp"
cat >"$TMP/ngproxy/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $TMP/ngproxy/nginx.pid;
error_log $TMP/ngproxy/logs/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $TMP/ngproxy/tmp/body;
	proxy_temp_path $TMP/ngproxy/tmp/proxy;
	fastcgi_temp_path $TMP/ngproxy/tmp/fastcgi;
	uwsgi_temp_path $TMP/ngproxy/tmp/uwsgi;
	scgi_temp_path $TMP/ngproxy/tmp/scgi;
	keepalive_timeout 60;
	keepalive_requests 1000000;
	upstream app { server 127.0.0.1:$up; keepalive 64; }
	upstream ws { server 127.0.0.1:$ws_up; }
	map \$http_upgrade \$connection_upgrade { default upgrade; '' close; }
	server {
		listen 127.0.0.1:$ngp;
		location = /healthz { return 200 'ok'; }
		location /ws {
			proxy_pass http://ws;
			proxy_http_version 1.1;
			proxy_set_header Upgrade \$http_upgrade;
			proxy_set_header Connection \$connection_upgrade;
			proxy_read_timeout 3600s;
		}
		location / {
			proxy_pass http://app;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host \$host;
			proxy_set_header X-Forwarded-For \$remote_addr;
			proxy_buffers 16 64k;
			proxy_busy_buffers_size 128k;
			proxy_max_temp_file_size 0;
		}
	}
}
EOF
taskset -c "$SERVER_CPU" nginx -p "$TMP/ngproxy" -c "$TMP/ngproxy/nginx.conf" </dev/null \
	>>"$TMP/ngproxy/logs/stderr.log" 2>&1 &
NG_PID=$!
PIDS+=("$NG_PID")

# configurable-http-proxy, when installed (Debian's needs NODE_PATH)
chp=
if command -v configurable-http-proxy >/dev/null 2>&1; then
	chp=$(free_port)
	NODE_PATH=/usr/share/nodejs taskset -c "$SERVER_CPU" configurable-http-proxy --ip 127.0.0.1 \
		--port "$chp" --api-port "$(free_port)" --default-target "http://127.0.0.1:$up" \
		--log-level error >"$TMP/chp.log" 2>&1 &
	PIDS+=("$!")
else
	say "configurable-http-proxy is not installed: no chp baseline (apt-get install configurable-http-proxy)"
fi

# gpucloudd with one route to the upstream, opened by the admin
db_new
gc_start "$DB_NAME" "$TMP/gpucloudd.log" --log-level=warn --proxy-cache-ms=1000
gc=$GC_PORT
dbu=$(db_url "$DB_NAME")
gc_route "$gc" "$dbu" "$up"
# the route websocket goes to the echo upstream too: a second port of the instance
"${PSQL[@]}" "$dbu" -c "INSERT INTO instance_ports VALUES ($inst, 'ws', 81, '127.0.0.1', $ws_up)" >/dev/null
wsroute=$("${PSQL[@]}" "$dbu" -c "SELECT id FROM routes WHERE instance_id = $inst AND port_name = 'ws'")
wshost="$wsroute.localhost:$gc"
wscookie=$(route_cookie "$gc" "$wsroute")
[[ -n $wscookie ]] || die "the handshake gave no route cookie for the websocket route"

H=(-H "Host: $rhost" -H "Cookie: $rcookie")
for f in small.txt big.bin; do
	cmp -s "$WEB/$f" <(curl -fsS -m 10 "${H[@]}" "http://127.0.0.1:$gc/$f") ||
		die "gpucloudd does not proxy /$f"
	cmp -s "$WEB/$f" <(curl -fsS -m 10 "http://127.0.0.1:$ngp/$f") || die "nginx does not proxy /$f"
	[[ -z $chp ]] || cmp -s "$WEB/$f" <(curl -fsS -m 10 "http://127.0.0.1:$chp/$f") ||
		die "chp does not proxy /$f"
done

# System calls per proxied 1 KiB request, gpucloudd's process against nginx's
# worker: counted by strace over a few seconds of one keep-alive connection.
# Counts do not swing with the machine's load as rates do.
# BENCH_PROXY_SYSCALLS_ONLY=1 stops after this figure (a quick A/B of a
# change with GPUCLOUD_BIN=).
syscalls_per_req() {
	local pid=$1 url=$2 out=$TMP/strace-$1.txt spid n calls
	shift 2
	strace -c -f -o "$out" -p "$pid" 2>/dev/null &
	spid=$!
	sleep 1 # attached
	WRK_CONNS=1 DURATION=3s wrk_run "$TMP/wrk-strace-$pid.txt" "$url" "$@"
	kill -INT "$spid"
	wait "$spid" 2>/dev/null || true
	n=$(awk '/requests in/ { print $1 }' "$TMP/wrk-strace-$pid.txt")
	calls=$(awk '$NF == "total" { print $4 }' "$out")
	awk -v c="$calls" -v n="$n" 'BEGIN { if (n > 0) printf "%.2f", c / n; else print 0 }'
}
if command -v strace >/dev/null 2>&1; then
	ng_worker=$(pgrep -P "$NG_PID" | head -1)
	gc_sys=$(syscalls_per_req "$GC_PID" "http://127.0.0.1:$gc/small.txt" "${H[@]}")
	ng_sys=$(syscalls_per_req "$ng_worker" "http://127.0.0.1:$ngp/small.txt")
	say "system calls per 1 KiB request: gpucloudd $gc_sys, nginx $ng_sys (strace -c)"
	syscall_line() { bench_line small_syscalls_per_req "$gc_sys" "$ng_sys" '<=1.0'; }
	if [[ ${BENCH_PROXY_SYSCALLS_ONLY:-0} == 1 ]]; then
		syscall_line
		exit 0
	fi
else
	say "strace is not installed: no system call figure (apt-get install strace)"
	syscall_line() { :; }
fi

for ((round = 1; round <= ROUNDS; round++)); do
	wrk_best gc_small "http://127.0.0.1:$gc/small.txt" "${H[@]}"
	wrk_best ng_small "http://127.0.0.1:$ngp/small.txt"
	[[ -z $chp ]] || wrk_best chp_small "http://127.0.0.1:$chp/small.txt"
	WRK_CONNS=10 wrk_best gc_big "http://127.0.0.1:$gc/big.bin" "${H[@]}"
	WRK_CONNS=10 wrk_best ng_big "http://127.0.0.1:$ngp/big.bin"
	[[ -z $chp ]] || WRK_CONNS=10 wrk_best chp_big "http://127.0.0.1:$chp/big.bin"
done

# added latency: one connection, p50 through each proxy minus direct
lat() {
	WRK_CONNS=1 DURATION=5s wrk_run "$TMP/lat-$1.txt" "$2" "${@:3}"
	printf '%s\n' "$P50_MS"
}
direct=$(lat direct "http://127.0.0.1:$up/small.txt")
gc_lat=$(lat gc "http://127.0.0.1:$gc/small.txt" "${H[@]}")
ng_lat=$(lat ng "http://127.0.0.1:$ngp/small.txt")
added() { awk -v a="$1" -v b="$direct" 'BEGIN { printf "%.3f", a - b }'; }
say "p50 at one connection: direct $direct ms, gpucloudd $gc_lat ms, nginx $ng_lat ms"

# websockets: WS_CONNS echoing 1 KiB frames
ws_load() {
	taskset -c "$LOAD_CPU" node "$ROOT/tests/bench/proxy_ws.mjs" load "$@" "$WS_CONNS" "$WS_SECONDS" 1024
}
# alternating, best of ROUNDS each (like the HTTP figures)
# Also the CPU each proxy spends per message (user + system time of the
# process and its children, over all rounds): on a shared, busy machine this
# is steadier than a rate, which other work sways.
cpu_ticks() {
	local p t=0
	for p in "$1" $(pgrep -P "$1" || true); do
		t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	printf '%s\n' "$t"
}
best_gc_ws=0 best_ng_ws=0 gc_ticks=0 ng_ticks=0 gc_msgs=0 ng_msgs=0
for ((round = 1; round <= ROUNDS; round++)); do
	t0=$(cpu_ticks "$GC_PID")
	gc_ws=$(ws_load "$gc" "$wshost" "$wscookie")
	t1=$(cpu_ticks "$GC_PID")
	gc_ticks=$((gc_ticks + t1 - t0))
	t0=$(cpu_ticks "$NG_PID")
	ng_ws=$(ws_load "$ngp" "127.0.0.1:$ngp" "")
	t1=$(cpu_ticks "$NG_PID")
	ng_ticks=$((ng_ticks + t1 - t0))
	say "websockets: gpucloudd $gc_ws; nginx $ng_ws"
	v=$(json_field "$gc_ws" msgs_per_s)
	((v > best_gc_ws)) && best_gc_ws=$v
	gc_msgs=$((gc_msgs + $(json_field "$gc_ws" msgs)))
	v=$(json_field "$ng_ws" msgs_per_s)
	((v > best_ng_ws)) && best_ng_ws=$v
	ng_msgs=$((ng_msgs + $(json_field "$ng_ws" msgs)))
done
hz=$(getconf CLK_TCK)
us_per() { awk -v t="$1" -v m="$2" -v hz="$hz" 'BEGIN { printf "%.2f", m ? t * 1e6 / hz / m : 0 }'; }
gc_ws_us=$(us_per "$gc_ticks" "$gc_msgs")
ng_ws_us=$(us_per "$ng_ticks" "$ng_msgs")
say "websocket CPU per message: gpucloudd $gc_ws_us us, nginx $ng_ws_us us"

# soak: mixed HTTP and websocket load on gpucloudd; RSS and descriptors
fds() { find "/proc/$GC_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
say "soak for ${SOAK}s; the first 20 s warm up (pools fill), then RSS and fds are taken"
soak_end=$((SECONDS + SOAK))
rss0=
while ((SECONDS < soak_end)); do
	if [[ -z $rss0 && $((soak_end - SECONDS)) -lt $((SOAK - 15)) ]]; then
		rss0=$(vm_kb "$GC_PID" VmRSS)
		fd0=$(fds)
		say "after warm-up: RSS $rss0 kB, $fd0 fds"
	fi
	left=$((soak_end - SECONDS))
	((left > 20)) && left=20
	((left < 2)) && break
	DURATION=${left}s wrk_run "$TMP/soak.txt" "http://127.0.0.1:$gc/small.txt" "${H[@]}" &
	WS_CONNS=200 WS_SECONDS=$((left / 2 > 1 ? left / 2 : 1)) ws_load "$gc" "$wshost" "$wscookie" >/dev/null
	wait "$!"
done
[[ -n $rss0 ]] || die "BENCH_SOAK_SECONDS must be at least 40"
rss1=$(vm_kb "$GC_PID" VmRSS)
fd1=$(fds)
say "after soak: RSS $rss1 kB, $fd1 fds"

bench_line small_rps "${BEST_RPS[gc_small]}" "${BEST_RPS[ng_small]}" '>=0.9'
bench_line big_rps "${BEST_RPS[gc_big]}" "${BEST_RPS[ng_big]}" '>=1.0'
if [[ -n $chp ]]; then
	bench_line small_rps_vs_chp "${BEST_RPS[gc_small]}" "${BEST_RPS[chp_small]}" '>=3'
	bench_line big_rps_vs_chp "${BEST_RPS[gc_big]}" "${BEST_RPS[chp_big]}" '>=3'
fi
syscall_line
bench_line added_p50_ms "$(added "$gc_lat")" "$(added "$ng_lat")" '<=0.2ms'
bench_line ws_msgs_per_s "$best_gc_ws" "$best_ng_ws" '>=1.0'
bench_line ws_cpu_us_per_msg "$gc_ws_us" "$ng_ws_us" '<=1.0'
bench_line soak_rss_growth_pct "$(awk -v a="$rss1" -v b="$rss0" 'BEGIN { printf "%.1f", 100 * (a - b) / b }')" 5 '<5'
bench_line soak_fds_growth "$((fd1 - fd0))" "$fd0" 'flat'
