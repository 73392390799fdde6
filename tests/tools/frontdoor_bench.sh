#!/usr/bin/env bash
# frontdoor_bench.sh - the front door's round trip alone (rdmem bench --op
# local-ping against fd_loopback) next to a Unix-domain-socket echo round
# trip, in one run, unpinned, on two cores and on one core.
#   tests/tools/frontdoor_bench.sh [BUILD_DIR] [N]
# A measurement, not a test: numbers depend on the machine and its load.
set -eu
bin=${1:-build}
n=${2:-100000}
name=/rdmem-bench-$$
ncpu=$(nproc)
two=$((ncpu > 1 ? 1 : 0))

run_case() { # run_case LABEL AGENT_CPU CLIENT_CPU [AGENT_FLAGS]
	local label=$1 acpu=$2 ccpu=$3 flags=${4:-} apin= cpin= upin=
	if [ "$acpu" != "-" ]; then
		apin="taskset -c $acpu" cpin="taskset -c $ccpu"
		upin="--server-cpu $acpu --client-cpu $ccpu"
	fi
	$apin "$bin/tests/fd_loopback" --shm-name "$name" --clients 4 --slots 32 --max-value 64k \
		$flags >/dev/null 2>&1 &
	local agent=$!
	for _ in $(seq 100); do [ -S "${RDMEM_RUNTIME_DIR:-/run/rdmem}${name}.sock" ] && break; sleep 0.05; done
	sleep 0.2
	echo "== $label"
	for w in 1 32; do
		$cpin "$bin/rdmem" --shm-name "$name" bench --op local-ping -n "$n" --window "$w" |
			awk -v w="$w" '/ops\/s/ {q=$3} /latency/ {printf "  front door  window %-2s %9.0f ops/s  avg %7s  p50 %7s  p99 %7s  p99.9 %7s us\n", w, q, $4, $6, $8, $10}'
		# shellcheck disable=SC2086
		"$bin/tests/uds_echo" -n "$n" --window "$w" $upin |
			awk -v w="$w" '{printf "  uds echo    window %-2s %9.0f ops/s  avg %7s  p50 %7s  p99 %7s  p99.9 %7s us\n", w, $10, $15, $17, $19, $21}'
	done
	kill "$agent"
	wait "$agent" 2>/dev/null || true
}

run_case "unpinned" - -
run_case "agent cpu $two, client cpu 0" "$two" 0
run_case "agent and client on cpu 0" 0 0
run_case "agent --busy-poll, cpu $two; client cpu 0" "$two" 0 --busy-poll
