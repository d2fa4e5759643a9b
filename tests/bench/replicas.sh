#!/usr/bin/env bash
# replicas.sh — gpucloudd replicas behind nginx (issue 15, part 5).
#
#  1. Throughput of a DB-bound read, GET /api/v1/me with a session cookie
#     (one session lookup in PostgreSQL per request), through nginx to two
#     replicas against nginx to one, in the same run, alternating, ROUNDS
#     rounds, best of each: wrk -t1 -c50 on LOAD_CPU.  Both replicas and
#     nginx share SERVER_CPU, as the one replica and nginx do: on a machine
#     with two cores (one for the load) a second replica adds no CPU, so the
#     honest expectation is "no loss", not "twice".  Each replica has its
#     own pool (8 connections): two replicas double PostgreSQL's backends,
#     so a third figure gives two replicas 4 each (8 in all, as one has).
#     Each run says how busy the cores were and the CPU seconds gpucloudd,
#     nginx and the database's backends took: that is the why.
#     replicas_rps_2v1: requests/s, ratio two/one, higher is better.
#     replicas_rps_2v1_pool4: two replicas with half the pool each.
#  2. Failover: two replicas (default leader settings: heartbeat 1 s,
#     takeover 5 s) on fixed ports behind nginx; KILLS times (default 10)
#     the leader is killed with SIGKILL and the time until the other logs
#     that it runs the scheduler is measured (from the kill to the log line's
#     own timestamp); the killed one is started again as the follower.  All
#     along, reads through nginx at a fixed rate (load.mjs) count errors.
#     replicas_failover_median_ms / _max_ms: against the 10 s bound (lower is
#     better).  replicas_failover_read_errors: failed reads, goal 0.
#
# BENCH_PARTS="rps failover" (default) runs both parts; BENCH_KILLS,
# BENCH_READ_RATE (200/s) size the second.
set -euo pipefail
BENCH=replicas
# shellcheck source=tests/bench/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

need wrk wrk
need nginx nginx-light
need node nodejs
KILLS=${BENCH_KILLS:-10}
READ_RATE=${BENCH_READ_RATE:-200}

# lb_start DIR PORT UPSTREAM_PORT...: nginx on SERVER_CPU balancing over the
# replicas as README "Replicas" sets it up; sets LB_PID.
lb_start() {
	local dir=$1 port=$2 i up=''
	shift 2
	for i in "$@"; do
		up+="		server 127.0.0.1:$i max_fails=1 fail_timeout=1s;"$'\n'
	done
	install -d -m 0755 "$dir" "$dir/logs" "$dir/tmp"
	cat >"$dir/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 4096; }
http {
	log_format lb '\$status \$upstream_addr \$upstream_status \$request_time';
	access_log ${LB_ACCESS:-off};
	client_body_temp_path $dir/tmp/body;
	proxy_temp_path $dir/tmp/proxy;
	fastcgi_temp_path $dir/tmp/fastcgi;
	uwsgi_temp_path $dir/tmp/uwsgi;
	scgi_temp_path $dir/tmp/scgi;
	keepalive_requests 1000000;
	map \$http_upgrade \$connection_upgrade { default upgrade; '' ''; }
	upstream gpucloud {
$up		keepalive 64;
	}
	server {
		listen 127.0.0.1:$port;
		server_name localhost *.localhost;
		location / {
			proxy_pass http://gpucloud;
			proxy_http_version 1.1;
			proxy_set_header Host \$http_host;
			proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
			proxy_set_header Upgrade \$http_upgrade;
			proxy_set_header Connection \$connection_upgrade;
			proxy_buffering off;
			proxy_connect_timeout 1s;
			proxy_read_timeout 1h;
			proxy_next_upstream error timeout http_502;
		}
	}
}
EOF
	taskset -c "$SERVER_CPU" nginx -p "$dir" -c "$dir/nginx.conf" </dev/null >>"$dir/logs/stderr.log" 2>&1 &
	LB_PID=$!
	PIDS+=("$LB_PID")
	for ((i = 0; i < 100; i++)); do
		curl -sS -m 2 -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null && return 0
		sleep 0.05
	done
	cat "$dir/logs/stderr.log" "$dir/logs/error.log" >&2 2>/dev/null || true
	die "nginx did not start on port $port"
}

# ---------------------------------------------------------------------------
# 1. Throughput
if [[ ${BENCH_PARTS:-rps failover} == *rps* ]]; then

db_new
db=$DB_NAME
gc_start "$db" "$TMP/r1.log" --log-level=warn
p1=$GC_PORT GCPIDS=$GC_PID
gc_start "$db" "$TMP/r2.log" --log-level=warn
p2=$GC_PORT GCPIDS+=" $GC_PID"
gc_start "$db" "$TMP/r3.log" --log-level=warn --db-pool-size=4
p3=$GC_PORT GCPIDS+=" $GC_PID"
gc_start "$db" "$TMP/r4.log" --log-level=warn --db-pool-size=4
p4=$GC_PORT GCPIDS+=" $GC_PID"
cookie=$(gc_login "$p1")
COOKIE="Cookie: gc_session=$cookie"
lb1=$(free_port)
lb_start "$TMP/lb1" "$lb1" "$p1"
LBPIDS=$LB_PID
lb2=$(free_port)
lb_start "$TMP/lb2" "$lb2" "$p1" "$p2"
LBPIDS+=" $LB_PID"
lb3=$(free_port)
lb_start "$TMP/lb3" "$lb3" "$p3" "$p4"
LBPIDS+=" $LB_PID"
for port in "$lb1" "$lb2" "$lb3"; do
	code=$(curl -sS -m 5 -o /dev/null -w '%{http_code}' -H "$COOKIE" "http://127.0.0.1:$port/api/v1/me")
	[[ $code == 200 ]] || die "GET /api/v1/me through nginx on $port answered $code"
done
# cpu_ticks: "busy total" jiffies per CPU, one CPU a line (/proc/stat)
cpu_ticks() { awk '/^cpu[0-9]/ { b = $2 + $3 + $4 + $7 + $8; t = b + $5 + $6; print b, t }' /proc/stat; }
# proc_ticks PID...: their CPU time (user + system, in clock ticks; nginx:
# the master and its worker)
proc_ticks() {
	local pid t=0 c
	for pid in "$@"; do
		for c in "$pid" $(pgrep -P "$pid" 2>/dev/null); do
			t=$((t + $(awk '{ print $14 + $15 }' "/proc/$c/stat" 2>/dev/null || echo 0)))
		done
	done
	echo "$t"
}
# measured NAME URL: wrk_best, and how busy each core was meanwhile, and
# what the replicas and nginx took of it
measured() {
	local before after g0 n0 p0 hz pgpids
	hz=$(getconf CLK_TCK)
	# the database's backends (the replicas' pools): PostgreSQL's share
	pgpids=$("$PG_BIN/psql" -qAtX "$(db_url "$db")" -c \
		"SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()" | tr '\n' ' ')
	before=$(cpu_ticks)
	# shellcheck disable=SC2086 # lists of pids
	g0=$(proc_ticks $GCPIDS) n0=$(proc_ticks $LBPIDS) p0=$(proc_ticks $pgpids)
	wrk_best "$@" -H "$COOKIE"
	after=$(cpu_ticks)
	# shellcheck disable=SC2086
	say "$1: cores busy $(paste <(echo "$before") <(echo "$after") |
		awk '{ printf "%s%d%%", (NR > 1 ? ", " : ""), 100 * ($3 - $1) / ($4 - $2) }'); CPU seconds: gpucloudd $(
		awk -v a="$g0" -v b="$(proc_ticks $GCPIDS)" -v hz="$hz" 'BEGIN { printf "%.1f", (b - a) / hz }'), nginx $(
		awk -v a="$n0" -v b="$(proc_ticks $LBPIDS)" -v hz="$hz" 'BEGIN { printf "%.1f", (b - a) / hz }'), PostgreSQL backends $(
		awk -v a="$p0" -v b="$(proc_ticks $pgpids)" -v hz="$hz" 'BEGIN { printf "%.1f", (b - a) / hz }') (of ${DURATION%s} s)"
}
for ((round = 1; round <= ROUNDS; round++)); do
	measured one "http://127.0.0.1:$lb1/api/v1/me"
	measured two "http://127.0.0.1:$lb2/api/v1/me"
	measured pool4 "http://127.0.0.1:$lb3/api/v1/me"
done
wrk_best direct "http://127.0.0.1:$p1/api/v1/me" -H "$COOKIE"
say "for reference, one replica without nginx: ${BEST_RPS[direct]} req/s"
say "cores here: $(nproc); replicas and nginx on CPU $SERVER_CPU, wrk on CPU $LOAD_CPU, PostgreSQL unpinned"
for pid in "${PIDS[@]}"; do stop "$pid"; done
fi

# ---------------------------------------------------------------------------
# 2. Failover
[[ ${BENCH_PARTS:-rps failover} == *failover* ]] || exit 0

db_new
db=$DB_NAME
pa=$(free_port)
pb=$(free_port)
declare -A RPID=() RLOG=()
# rep_start NAME PORT: (re)starts a replica on a fixed port.
rep_start() {
	RLOG[$1]=$TMP/fo-$1-$(date +%s%N).log
	gc_start "$db" "${RLOG[$1]}" --log-level=info --port="$2"
	RPID[$1]=$GC_PID
}
# leads NAME: 0 when the replica's log says it runs the scheduler.
leads() { grep -q 'now runs the scheduler' "${RLOG[$1]}"; }
# lead_ms NAME: the timestamp (unix ms) of its log line saying so.
lead_ms() {
	local ts
	ts=$(grep -m1 'now runs the scheduler' "${RLOG[$1]}" | sed -n 's/^ts=\([^ ]*\) .*/\1/p')
	date -d "$ts" +%s%3N
}

rep_start a "$pa"
for ((i = 0; i < 100; i++)); do leads a && break; sleep 0.05; done
leads a || die "the first replica did not take the lead"
rep_start b "$pb"
cookie=$(gc_login "$pa")
COOKIE="Cookie: gc_session=$cookie"
lbf=$(free_port)
LB_ACCESS="$TMP/lbf-access.log lb" lb_start "$TMP/lbf" "$lbf" "$pa" "$pb"

# reads all along, through nginx
secs=$((KILLS * 5 + 5))
load_run --url="http://127.0.0.1:$lbf/api/v1/me" --header="$COOKIE" --rate="$READ_RATE" \
	--duration="$secs" --conns=10 >"$TMP/reads.json" 2>&1 &
LOAD_PID=$!
sleep 2
leader=a follower=b
declare -a times=()
for ((k = 1; k <= KILLS; k++)); do
	# nginx takes a refused replica out for fail_timeout (1 s): the one
	# started again must be back in before the next kill
	sleep 2.5
	t0=$(date +%s%3N)
	kill -KILL "${RPID[$leader]}"
	wait "${RPID[$leader]}" 2>/dev/null || true
	for ((i = 0; i < 1500; i++)); do
		leads "$follower" && break
		sleep 0.01
	done
	leads "$follower" || die "kill $k: $follower did not take over within 15 s"
	ms=$(($(lead_ms "$follower") - t0))
	((ms >= 0)) || ms=0
	times+=("$ms")
	say "kill $k: $leader killed, $follower leads after $ms ms"
	port=$pa
	[[ $leader == b ]] && port=$pb
	rep_start "$leader" "$port"
	tmp=$leader leader=$follower follower=$tmp
done
wait "$LOAD_PID" || true
reads=$(tail -n 1 "$TMP/reads.json")
say "reads through nginx during the kills: $reads"
errors=$(json_field "$reads" errors)
sent=$(json_field "$reads" sent)

sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(printf '%s\n' "$sorted" | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
max=$(printf '%s\n' "$sorted" | tail -n 1)
say "failover times (ms): $(printf '%s ' "${times[@]}")"

if [[ -n ${BEST_RPS[two]:-} ]]; then
	bench_line replicas_rps_2v1 "${BEST_RPS[two]}" "${BEST_RPS[one]}" '>=0.9'
	bench_line replicas_rps_2v1_pool4 "${BEST_RPS[pool4]}" "${BEST_RPS[one]}" '>=0.9'
fi
bench_line replicas_failover_median_ms "$median" 10000 '<10000'
bench_line replicas_failover_max_ms "$max" 10000 '<10000'
bench_line replicas_failover_read_errors "$errors" "$sent" '=0'
