#!/usr/bin/env bash
# ways_in.sh - the "three ways in" figure of `make bench` (scripts/bench.sh
# runs it; it also runs alone): one 32-byte GET at a time (window 1) against
# ONE rdmem-server and ONE rdmem-agent, through each way an app can reach
# the agent: libclient (C, `rdmem bench`), the Redis protocol (the agent's
# --resp-port, with redis-benchmark and with redis-py) and Python (`import
# rdmem`, ctypes over librdmem.so). Only the client side differs: same
# server, agent, one key of the same value size, call count, warm-up and CPU
# placement. redis-server
# with the same two Redis clients is the reference row. Writes
# OUT/ways_in.md and OUT/ways_in.json; prints the table.
#
#   bench/ways_in.sh OUT_DIR [BIN_DIR] [N]   (N: GETs per row, default 20000)
#
# CPU_SERVER / CPU_AGENT / CPU_CLIENT (defaults 1 / 0 / 0, as make bench):
# rdmem-server and redis-server on CPU_SERVER, the agent on CPU_AGENT, every
# client on CPU_CLIENT.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/ways_in.sh OUT_DIR [BIN_DIR] [N]}
export RDMEM_BIN=${2:-${RDMEM_BIN:-build}}
n=${3:-20000}
size=32
cpu_s=${CPU_SERVER:-1} cpu_a=${CPU_AGENT:-0} cpu_c=${CPU_CLIENT:-0}
export RDMEM_LIB=${RDMEM_LIB:-$RDMEM_BIN/lib/librdmem.so.0}
mkdir -p "$out"
have_redis=1 have_redispy=1
for t in redis-server redis-benchmark; do
	command -v $t >/dev/null || have_redis=0
done
# Debian's python3 (where python3-redis lives), not a pyenv shim; the same
# interpreter for both Python clients.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
"$py" -c "import redis" 2>/dev/null || have_redispy=0
# shellcheck source=scripts/local-stack.sh
. scripts/local-stack.sh
work=$(mktemp -d /tmp/rdmem-ways-in.XXXXXX)
redis_pid=
cleanup() {
	[ -z "$redis_pid" ] || kill "$redis_pid" 2>/dev/null || true
	ls_stop
	rm -rf "$work"
}
trap cleanup EXIT

shm="/rdmem-ways-in-$$"
read -r rport aport <<<"$(ls_free_ports 2)"
ls_start_server "$work"
ls_start_agent "$work" "$shm" --resp-port "$aport"
taskset -pc "$cpu_s" "$LS_SERVER_PID" >/dev/null
taskset -apc "$cpu_s" "$LS_SERVER_PID" >/dev/null
taskset -apc "$cpu_a" "$LS_AGENT_PID" >/dev/null
if [ "$have_redis" = 1 ]; then
	taskset -c "$cpu_s" redis-server --port "$rport" --bind 127.0.0.1 --save "" \
		--appendonly no --dir "$work" --daemonize no >"$work/redis.log" 2>&1 &
	redis_pid=$!
	ls_wait_log "$work/redis.log" "Ready to accept connections" 10
fi

# Each row prints "p50_us p99_us ops_per_s".
# One key, as every row; 1000 calls of warm-up first, as the Python rows.
row_libclient() {
	taskset -c "$cpu_c" "$RDMEM_BIN/rdmem" --shm-name "$shm" bench --op get --size "$size" \
		--window 1 --keys 1 -n 1000 >/dev/null
	taskset -c "$cpu_c" "$RDMEM_BIN/rdmem" --shm-name "$shm" bench --op get --size "$size" \
		--window 1 --keys 1 -n "$n" | python3 -c '
import re, sys
t = sys.stdin.read()
print(re.search(r"p50 ([\d.]+)", t).group(1), re.search(r"p99 ([\d.]+)", t).group(1),
      re.search(r"([\d.]+) ops/s", t).group(1))'
}

# redis-benchmark's own client, one connection, no pipelining, one key
# (without -r, "key:__rand_int__" is a literal key); its figures are in ms
# with three decimals.
row_redis_benchmark() {
	local port=$1
	taskset -c "$cpu_c" redis-benchmark -p "$port" -t set -n "$n" -c 1 -P 1 -d "$size" -q \
		>/dev/null
	taskset -c "$cpu_c" redis-benchmark -p "$port" -t get -n "$n" -c 1 -P 1 -d "$size" --csv |
		awk -F, '/^"GET"/ { gsub(/"/, ""); printf "%.1f %.1f %.0f\n", $5 * 1000, $7 * 1000, $2 }'
}

# A Python loop timing each call, the same for both Python clients.
row_python() {
	taskset -c "$cpu_c" "$py" - "$1" "$2" "$n" "$size" <<'EOF'
import os, sys, time
sys.path.insert(0, "python")
kind, where, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
want = bytes(range(size))
if kind == "rdmem":
    import rdmem
    c = rdmem.Client(where)
    c.put("ways-in", want)
    get = c.get
else:
    import redis
    c = redis.Redis(host="127.0.0.1", port=int(where))
    c.set("ways-in", want)
    get = c.get
for _ in range(min(n, 1000)):  # warm up
    get("ways-in")
clock, lat = time.perf_counter_ns, []
t0 = clock()
for _ in range(n):
    s = clock()
    v = get("ways-in")
    lat.append(clock() - s)
secs = (clock() - t0) / 1e9
if v != want:
    sys.exit("ways_in: %s returned a wrong value" % kind)
c.close()
lat.sort()
print("%.1f %.1f %.0f" % (lat[len(lat) // 2] / 1000, lat[len(lat) * 99 // 100] / 1000, n / secs))
EOF
}

rows=()
# add LABEL CLIENT SERVES FN ARGS...: one row; a row whose client fails (a
# wrong value, an error) fails the script (the assignment carries the status).
add() {
	local label=$1 client=$2 serves=$3 figs
	shift 3
	figs=$("$@")
	[[ $figs =~ ^[0-9.]+\ [0-9.]+\ [0-9.]+$ ]] || {
		echo "ways_in: $label / $client gave '$figs'" >&2
		return 1
	}
	rows+=("$label|$client|$serves|$figs")
}
# shellcheck disable=SC2016 # the backquotes are Markdown's code marks
add "libclient (C, rdmem.h)" '`rdmem bench --op get --window 1 --keys 1`' rdmem-agent row_libclient
# A sanitizer build's librdmem needs its runtime loaded first: not in python3.
[ -n "${RDMEM_SANITIZER:-}" ] ||
	add "Python (import rdmem)" '`rdmem.Client.get`' rdmem-agent row_python rdmem "$shm"
if [ "$have_redis" = 1 ]; then
	add "Redis protocol (--resp-port)" "redis-benchmark -c 1 -P 1" rdmem-agent \
		row_redis_benchmark "$aport"
fi
if [ "$have_redispy" = 1 ]; then
	add "Redis protocol (--resp-port)" 'redis-py `get`' rdmem-agent row_python redis "$aport"
fi
if [ "$have_redis" = 1 ]; then
	add "reference: redis-server" "redis-benchmark -c 1 -P 1" redis-server \
		row_redis_benchmark "$rport"
	if [ "$have_redispy" = 1 ]; then
		add "reference: redis-server" 'redis-py `get`' redis-server row_python redis "$rport"
	fi
fi

{
	echo "### Three ways in: one 32-byte GET at a time, the same agent and server"
	echo
	echo "$n GETs per row, window 1; rdmem-server (shm fabric) and redis-server on CPU $cpu_s,"
	echo "the agent on CPU $cpu_a, every client on CPU $cpu_c. Only the client differs;"
	echo "the Python rows run $("$py" -V 2>&1)."
	[ "$have_redis" = 1 ] || echo "(Redis rows skipped: redis-server/redis-benchmark not installed.)"
	[ "$have_redispy" = 1 ] || echo "(redis-py rows skipped: python3-redis not installed.)"
	[ -z "${RDMEM_SANITIZER:-}" ] ||
		echo "(Python rdmem row skipped: a $RDMEM_SANITIZER build's librdmem cannot load into python3.)"
	echo
	echo "| way in | client | serves | p50 us | p99 us | ops/s |"
	echo "|---|---|---|---:|---:|---:|"
} >"$out/ways_in.md"
echo "[" >"$out/ways_in.json"
sep=
for r in "${rows[@]}"; do
	IFS='|' read -r way client target figs <<<"$r"
	read -r p50 p99 ops <<<"$figs"
	echo "| $way | $client | $target | $p50 | $p99 | $ops |" >>"$out/ways_in.md"
	printf '%s{"way": "%s", "client": "%s", "serves": "%s", "p50_us": %s, "p99_us": %s, "ops": %s}\n' \
		"$sep" "$way" "${client//\`/}" "$target" "$p50" "$p99" "$ops" >>"$out/ways_in.json"
	sep=,
done
echo "]" >>"$out/ways_in.json"
cat "$out/ways_in.md"
