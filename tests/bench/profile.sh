#!/usr/bin/env bash
# profile.sh PATH [REQUESTS] — where gpucloudd's instructions go on one hot
# HTTP path, counted by valgrind's callgrind: instruction counts are stable on
# a noisy shared machine where times are not.
#
#   PATH      healthz   GET /healthz
#             static    GET /bench.txt, a 1 KiB file from the web root
#             me        GET /api/v1/me with the admin's session cookie
#             proxy     GET /bench.txt through an app route (proxy.sh's
#                       setup: an instance row whose port is a private
#                       nginx serving the web root, its route cookie)
#             ws        1 KiB websocket messages echoed through an app
#                       route (proxy_ws.mjs's echo upstream) over 50
#                       sockets; REQUESTS is then the seconds of load, and
#                       the figure is instructions per message
#   REQUESTS  how many requests are counted (default 2000), after 200 of
#             warm-up that are not
#
# gpucloudd runs under callgrind against a fresh database (migrated by a
# plain start first); the counters are zeroed after the warm-up and dumped
# after the counted requests, which go over 10 keep-alive connections.
# Prints instructions per request and the 25 functions that spent the most
# (callgrind_annotate, inclusive of nothing: self cost). The profile itself
# is kept: open it with callgrind_annotate or kcachegrind (its path is
# printed; BENCH_KEEP_TMP=1 is set for this script).
# Not a benchmark: `make bench` does not run it. Run it inside the world:
#   bash deploy/with-world.sh bash tests/bench/profile.sh static
set -euo pipefail
BENCH=profile
BENCH_KEEP_TMP=1
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

what=${1:-}
count=${2:-2000}
[[ $count =~ ^[1-9][0-9]*$ ]] || die "REQUESTS must be a positive number, not '$count'"
need valgrind valgrind
need callgrind_control valgrind

WEB=$TMP/web
install -d -m 0755 "$WEB"
head -c 768 /dev/urandom | base64 -w 64 | head -c 1024 >"$WEB/bench.txt"
chmod 0644 "$WEB/bench.txt"

db_new
db=$DB_NAME
# a plain start migrates the database and seeds the admin (slow under
# valgrind), then stops
gc_start "$db" "$TMP/gpucloudd-plain.log" --web-root="$WEB" --log-level=warn --scrypt-ln=10
stop "$GC_PID"

REAL_BIN=$BIN
BIN=$TMP/gpucloudd-callgrind
OUT=$TMP/callgrind.out
cat >"$BIN" <<SH
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file=$OUT --dump-instr=no --compress-strings=no --compress-pos=no \
	--collect-atstart=yes $REAL_BIN "\$@"
SH
chmod 0755 "$BIN"
gc_start "$db" "$TMP/gpucloudd.log" --web-root="$WEB" --log-level=warn --scrypt-ln=10 \
	--proxy-cache-ms=1000
url=http://127.0.0.1:$GC_PORT
declare -a hdr=()
case $what in
healthz) url+=/healthz ;;
static) url+=/bench.txt ;;
me)
	url+=/api/v1/me
	hdr=(--header="Cookie: gc_session=$(gc_login "$GC_PORT")")
	;;
proxy)
	up=$(free_port)
	nginx_start "$TMP/upstream" "$up" "$WEB" off
	gc_route "$GC_PORT" "$(db_url "$db")" "$up"
	url+=/bench.txt
	hdr=(--header="Host: $rhost" --header="Cookie: $rcookie")
	;;
ws)
	up=$(free_port)
	node "$ROOT/tests/bench/proxy_ws.mjs" echo "$up" &
	PIDS+=("$!")
	gc_route "$GC_PORT" "$(db_url "$db")" "$up"
	;;
*) die "usage: profile.sh healthz|static|me|proxy|ws [REQUESTS]" ;;
esac

if [[ $what == ws ]]; then
	ws_run() { node "$ROOT/tests/bench/proxy_ws.mjs" load "$GC_PORT" "$rhost" "$rcookie" 50 "$1" 1024; }
	ws_run 2 >/dev/null || die "the warm-up websockets failed"
	callgrind_control -z "$GC_PID" >/dev/null
	report=$(ws_run "$count") || die "the counted websockets failed: $report"
	callgrind_control -d "$GC_PID" >/dev/null
	(($(json_field "$report" failed) == 0)) || die "websockets failed: $report"
	# per message, and the sockets' opening is in the count too (50 of them)
	count=$(json_field "$report" msgs)
else
	load_run --url="$url" "${hdr[@]}" --rate=500 --count=200 --conns=10 >/dev/null ||
		die "the warm-up against $url failed"
	callgrind_control -z "$GC_PID" >/dev/null
	report=$(load_run --url="$url" "${hdr[@]}" --rate=500 --count="$count" --conns=10) ||
		die "the counted requests against $url failed: $report"
	callgrind_control -d "$GC_PID" >/dev/null
	(($(json_field "$report" errors) == 0)) || die "errors in the counted requests: $report"
fi
# the dump made on request is the newest file next to OUT
dump=$(find "$TMP" -maxdepth 1 -name 'callgrind.out*' -newer "$TMP/gpucloudd.log" -printf '%T@ %p\n' |
	sort -n | tail -n 1 | cut -d' ' -f2-)
[[ -n $dump && -s $dump ]] || die "callgrind wrote no dump"
ir=$(awk '/^summary:/ { print $2 } /^totals:/ { t = $2 } END { if (t) print t }' "$dump" | head -n 1)
unit=request
[[ $what == ws ]] && unit=message
say "$what: $(awk -v i="$ir" -v n="$count" 'BEGIN { printf "%.0f", i / n }') instructions per $unit ($ir over $count)"
callgrind_annotate --auto=no "$dump" 2>/dev/null | sed -n "/file:function/,\$p" | head -n 28
say "profile: $dump"
