#!/usr/bin/env bash
# spin.sh - what the spin policy buys (issue 15, "a spin policy that pays on
# 2 vCPUs"). GET 32 B at window 1 through one rdmem-agent and rdmem-server
# over the shm fabric, placed as `make bench` places them (server on
# CPU_SERVER, agent and client on CPU_AGENT / CPU_CLIENT, set at exec so each
# process knows its affinity), under three loads: back to back (--gap-us 0),
# and a call every 200 us and every 2 ms, when an idle server and agent go to
# sleep between calls. Each load runs with the defaults, with the server
# --busy-poll, and with server and agent --busy-poll; the configurations
# take turns, ROUNDS times, and the table gives the median of the rounds.
# With BEFORE_BIN it also runs the same back-to-back GET at window 1 and 16
# with that tree's binaries against BIN's, alternating (the spin phase
# before and after a change).
# A measurement, not a test: it fails only when it cannot measure (or a
# value comes back wrong, which rdmem bench checks).
#   bench/spin.sh OUT BIN [ROUNDS] [BEFORE_BIN]   writes OUT/spin.md, OUT/spin.json
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=$1 bin=$2 rounds=${3:-3} before=${4:-}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "spin.sh: ROUNDS must be a positive number" >&2; exit 2; }
cpu_s=${CPU_SERVER:-1} cpu_a=${CPU_AGENT:-0} cpu_c=${CPU_CLIENT:-0}
work=$(mktemp -d)
export RDMEM_RUNTIME_DIR=$work
pids=()
# shellcheck source=scripts/local-stack.sh
. "$here/scripts/local-stack.sh"
stop_all() {
	local p
	for p in "${pids[@]}"; do ls_stop_pid "$p"; done # TERM, then KILL after 5 s
	pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT

# One run on a fresh server and agent; sets res="qps p50 p99". Not in a
# subshell, so that set -e stops the script on any failure (a process that
# does not start, a failed call, a wrong value) and the EXIT trap knows pids.
# run BIN SERVER_BUSY AGENT_BUSY GAP_US WINDOW COUNT [OP]   (OP: get, 32 B, or local-ping)
run() {
	local b=$1 sflag=() aflag=() gap=() op=(--op get --size 32 --keys 256) port
	[ "$2" = 1 ] && sflag=(--busy-poll)
	[ "$3" = 1 ] && aflag=(--busy-poll)
	[ "$4" = 0 ] || gap=(--gap-us "$4") # a BEFORE tree may not know the option
	[ "${7:-get}" = get ] || op=(--op "$7")
	port=$(ls_free_ports 1)
	# The logs are emptied here, not by the child's redirection: that may
	# run after ls_wait_log has read the previous run's line from the same
	# file, and the client would then call an agent not yet listening.
	: >"$work/server.log"
	: >"$work/agent.log"
	taskset -c "$cpu_s" "$b/rdmem-server" -b 127.0.0.1 -p "$port" --tcp-port $((port + 1)) \
		--fabric shm "${sflag[@]}" >>"$work/server.log" 2>&1 &
	pids+=($!)
	ls_wait_log "$work/server.log" "listening tcp" 10
	taskset -c "$cpu_a" "$b/rdmem-agent" -s "127.0.0.1:$port" --fabric shm --shm-name /spin \
		--slots 32 "${aflag[@]}" >>"$work/agent.log" 2>&1 &
	pids+=($!)
	ls_wait_log "$work/agent.log" "ready:" 10
	ls_wait_log "$work/agent.log" "rdma: session" 10
	taskset -c "$cpu_c" "$b/rdmem" --shm-name /spin bench "${op[@]}" --window "$5" \
		-n "$6" "${gap[@]}" --json >"$work/run.json"
	res=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["wrong"] == 0 and d["failures"] == 0, d; print("%.0f %.1f %.1f" % (d["qps"], d["p50_us"], d["p99_us"]))' "$work/run.json")
	stop_all
}
# The median of the arguments (the mean of the middle two for an even count).
median() {
	(($# > 0)) || { echo "spin.sh: no figures to take a median of" >&2; exit 1; }
	printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {m=int((NR+1)/2); if (NR % 2) print v[m]; else printf "%.1f\n", (v[m] + v[m + 1]) / 2}'
}

declare -A p50 p99
gaps=(0 200 2000)
count() { case $1 in 0) echo 20000 ;; 200) echo 2000 ;; *) echo 400 ;; esac; }
confs=("0 0" "1 0" "1 1")
for ((r = 0; r < rounds; r++)); do
	for gap in "${gaps[@]}"; do
		for conf in "${confs[@]}"; do
			read -r sb ab <<<"$conf"
			run "$bin" "$sb" "$ab" "$gap" 1 "$(count "$gap")"
			read -r _ a b <<<"$res"
			p50[$gap,$sb$ab]+="$a " p99[$gap,$sb$ab]+="$b "
		done
	done
done

{
	echo "### The spin policy: --busy-poll by load"
	echo
	echo "GET 32 B, window 1, server on CPU $cpu_s, agent on CPU $cpu_a, client on CPU $cpu_c;"
	echo "p50 / p99 in us, medians of $rounds rounds (\`bench/spin.sh\`, git" \
		"$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown))."
	echo
	echo "| gap between calls | defaults | server --busy-poll | server and agent --busy-poll |"
	echo "|---:|---:|---:|---:|"
	for gap in "${gaps[@]}"; do
		line="| $gap us"
		for conf in 00 10 11; do
			# shellcheck disable=SC2086
			line+=" | $(median ${p50[$gap,$conf]}) / $(median ${p99[$gap,$conf]})"
		done
		echo "$line |"
	done
} >"$out/spin.md"
{
	printf '{"rounds":%d,"p50_us":{' "$rounds"
	sep=
	for gap in "${gaps[@]}"; do
		for conf in 00 10 11; do
			# shellcheck disable=SC2086
			printf '%s"gap%s_%s":%s' "$sep" "$gap" "$conf" "$(median ${p50[$gap,$conf]})"
			sep=,
		done
	done
	printf '}}\n'
} >"$out/spin.json"

# The floor of a round trip between two processes on one CPU (two context
# switches, bench/yield_floor.c) beside the front door's own round trip
# with the app and the agent on one CPU.
if [ "$cpu_a" = "$cpu_c" ]; then
	mkdir -p "$bin/bench"
	cc -std=c11 -O2 -Wall -Wextra "$here/bench/yield_floor.c" -o "$bin/bench/yield_floor"
	fl=() lp=()
	for ((r = 0; r < rounds; r++)); do
		res=$(taskset -c "$cpu_c" "$bin/bench/yield_floor" 100000)
		fl+=("${res%% *}")
		run "$bin" 0 0 0 1 50000 local-ping
		read -r _ a _ <<<"$res"
		lp+=("$a")
	done
	{
		echo
		echo "One CPU for app and agent (CPU $cpu_c), p50 in us, median of $rounds rounds:" \
			"front door round trip (\`rdmem bench --op local-ping\`) $(median "${lp[@]}");" \
			"two processes passing a word with sched_yield (\`bench/yield_floor.c\`, the floor)" \
			"$(median "${fl[@]}")."
	} >>"$out/spin.md"
fi

if [ -n "$before" ]; then
	declare -A q l
	for ((r = 0; r < rounds; r++)); do
		for t in before after; do
			b=$bin
			[ "$t" = before ] && b=$before
			run "$b" 0 0 0 1 20000
			read -r _ a _ <<<"$res"
			run "$b" 0 0 0 16 100000
			read -r c _ _ <<<"$res"
			l[$t]+="$a " q[$t]+="$c "
		done
	done
	{
		echo
		echo "Back to back, defaults, $rounds rounds alternating:"
		echo
		echo "| tree | GET window 1 p50 (us), each round | median | window 16 ops/s, each round | median |"
		echo "|---|---|---:|---|---:|"
		for t in before after; do
			# shellcheck disable=SC2086
			echo "| $t | ${l[$t]% } | $(median ${l[$t]}) | ${q[$t]% } | $(median ${q[$t]}) |"
		done
	} >>"$out/spin.md"
fi
cat "$out/spin.md"
