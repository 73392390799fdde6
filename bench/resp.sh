#!/usr/bin/env bash
# resp.sh - the Redis-protocol figure of `make bench` (scripts/bench.sh runs
# it; it also runs alone): redis-benchmark GET against redis-server and
# against rdmem-agent --resp-port (over rdmem-server on the shm fabric), at
# equal settings (same -n, -c, -P and value size), side by side. Writes
# OUT/resp.md and OUT/resp.json; prints the table.
#
#   bench/resp.sh OUT_DIR [BIN_DIR] [N]     (N: requests per run, default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/resp.sh OUT_DIR [BIN_DIR] [N]}
export RDMEM_BIN=${2:-${RDMEM_BIN:-build}}
n=${3:-100000}
clients=4 size=32
mkdir -p "$out"
for t in redis-server redis-benchmark; do
	if ! command -v $t >/dev/null; then
		echo "resp bench: skipped, $t is not installed (apt-get install redis-server redis-tools)" |
			tee "$out/resp.md" >&2
		exit 0
	fi
done
# shellcheck source=scripts/local-stack.sh
. scripts/local-stack.sh
work=$(mktemp -d /tmp/rdmem-resp-bench.XXXXXX)
redis_pid=
cleanup() {
	[ -z "$redis_pid" ] || kill "$redis_pid" 2>/dev/null || true
	ls_stop
	rm -rf "$work"
}
trap cleanup EXIT

read -r rport aport <<<"$(ls_free_ports 2)"
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
	--daemonize no >"$work/redis.log" 2>&1 &
redis_pid=$!
ls_wait_log "$work/redis.log" "Ready to accept connections" 10
ls_start_server "$work"
ls_start_agent "$work" "/rdmem-resp-bench-$$" --resp-port "$aport"

# run NAME PORT P: one redis-benchmark GET run; prints "rps p50_ms p99_ms".
run() {
	local port=$2 p=$3
	# The keys GET reads exist on both sides (one SET pass first).
	redis-benchmark -p "$port" -t set -n "$n" -c "$clients" -P "$p" -d "$size" -q >/dev/null
	redis-benchmark -p "$port" -t get -n "$n" -c "$clients" -P "$p" -d "$size" --csv |
		awk -F, '/^"GET"/ { gsub(/"/, ""); print $2, $5, $7 }'
}

{
	echo "### Redis clients: redis-benchmark GET, redis-server vs rdmem-agent --resp-port"
	echo
	echo "redis-benchmark -t get -n $n -c $clients -d $size, the same for both; the agent"
	echo "carries each GET to rdmem-server over the shm fabric (RDMA emulation)."
	echo
	echo "| pipeline | redis-server QPS | p50 ms | p99 ms | rdmem-agent RESP QPS | p50 ms | p99 ms |"
	echo "|---|---|---|---|---|---|---|"
} >"$out/resp.md"
echo "[" >"$out/resp.json"
sep=
for p in 32 1; do
	read -r r_qps r_p50 r_p99 <<<"$(run redis "$rport" "$p")"
	read -r a_qps a_p50 a_p99 <<<"$(run agent "$aport" "$p")"
	echo "| -P $p | $r_qps | $r_p50 | $r_p99 | $a_qps | $a_p50 | $a_p99 |" >>"$out/resp.md"
	printf '%s{"pipeline": %s, "redis": {"qps": %s, "p50_ms": %s, "p99_ms": %s}, "agent": {"qps": %s, "p50_ms": %s, "p99_ms": %s}}\n' \
		"$sep" "$p" "$r_qps" "$r_p50" "$r_p99" "$a_qps" "$a_p50" "$a_p99" >>"$out/resp.json"
	sep=,
done
echo "]" >>"$out/resp.json"
cat "$out/resp.md"
