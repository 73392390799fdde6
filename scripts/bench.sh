#!/usr/bin/env bash
# bench.sh - `make bench`: RDMemRPC side by side with gRPC, Redis, a GET/SET
# store on UCX active messages (shared memory and TCP), and a
# Unix-domain-socket round trip and UCX's ping-pong, on this host, in one run.
#
# It starts every server itself on free loopback ports (rdmem-server, one
# rdmem-agent on the shm fabric and one forced onto TCP, each with a private
# front-door segment, the gRPC server, redis-server without persistence),
# measures in rounds where the systems take turns (A B C D, A B C D, ...; the
# starting system rotates per round), then counts instructions per GET with
# callgrind, and writes JSON, a Markdown table and a PNG chart. Last,
# bench/resp.sh: redis-benchmark GET against redis-server and against
# rdmem-agent --resp-port at equal settings, and bench/ways_in.sh: one GET at
# a time through libclient, Python and the Redis protocol against one agent,
# bench/servers.sh: one agent with one server vs three, and the keys a
# fourth server moves; and bench/idle.sh: what an idle agent and server cost (wake-ups per
# thread, CPU, RDMA operations), all appended to results.md.
#
# Placement (the same for every system; override with --cpu-*):
#   servers (rdmem-server, grpc_server, redis-server)  CPU 1
#   clients and rdmem-agent                            CPU 0
# The agent sits with its apps, as it would on a client host; the server is
# alone on the other core, as a remote node would be.
#
# Every client checks every value it gets back; a wrong value or a failed
# call makes that run fail, and the whole benchmark exits non-zero at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	cat <<'EOF'
usage: scripts/bench.sh [options]
  --rounds N         rounds of every measurement (default 5)
  -n N               calls per small-value run at window 1 (default 10000; larger
                     values get fewer calls, window-32 runs get 4x)
  --systems LIST     comma list of rdmem-shm,rdmem-tcp,grpc,redis,ucx-shm,ucx-tcp,frontdoor
                     (default: all; ones whose programs are missing are skipped
                     with a reason in the report)
  --out DIR          results directory (default bench-out)
  --docs DIR         also copy results.md, chart.png and summary.json there
                     (default docs/bench; --no-docs to skip)
  --no-docs
  --callgrind-calls N  GETs counted by callgrind per process (default 2000)
  --no-callgrind     skip instruction counts
  --no-chart         skip the PNG chart
  --smoke            a check that the harness runs and values are right:
                     1 round, -n 300, no callgrind, no chart, no docs copy
  --cpu-server C     CPU list for servers (default 1)
  --cpu-client C     CPU list for clients (default 0)
  --cpu-agent C      CPU list for rdmem-agent (default 0)
  --bin DIR          RDMemRPC binaries (default $RDMEM_BIN or build)
  --tools DIR        comparison programs (default build/bench)
  --timeout S        one client run's time limit (default 300)
  --server-opt OPT   one more rdmem-server option (repeatable), e.g. --busy-poll
  --agent-opt OPT    one more rdmem-agent option (repeatable)
  --no-placement     skip the placement check (GET under three placements)
  --skip S:OP:SIZE:W one measurement not to take (repeatable), e.g.
                     rdmem-shm:large-get:1048576:32; listed in the report
EOF
}

ROUNDS=5 N=10000 OUT=bench-out DOCS=docs/bench SYSTEMS=rdmem-shm,rdmem-tcp,grpc,redis,ucx-shm,ucx-tcp,frontdoor
CG_CALLS=2000 CALLGRIND=1 CHART=1 CPU_SERVER=1 CPU_CLIENT=0 CPU_AGENT=0
BIN=${RDMEM_BIN:-build} TOOLS=build/bench RUN_TIMEOUT=300 SMOKE=0 OPS_ONLY= PLACEMENT=1
EXTRA_SERVER_OPTS=() EXTRA_AGENT_OPTS=() SKIP_CELLS=()

while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) ROUNDS=$2; shift ;;
	-n) N=$2; shift ;;
	--systems) SYSTEMS=$2; shift ;;
	--ops) OPS_ONLY=$2; shift ;;
	--out) OUT=$2; shift ;;
	--docs) DOCS=$2; shift ;;
	--no-docs) DOCS= ;;
	--callgrind-calls) CG_CALLS=$2; shift ;;
	--no-callgrind) CALLGRIND=0 ;;
	--no-chart) CHART=0 ;;
	--smoke) SMOKE=1 ROUNDS=1 N=300 CALLGRIND=0 CHART=0 DOCS= PLACEMENT=0 ;;
	--cpu-server) CPU_SERVER=$2; shift ;;
	--cpu-client) CPU_CLIENT=$2; shift ;;
	--cpu-agent) CPU_AGENT=$2; shift ;;
	--bin) BIN=$2; shift ;;
	--tools) TOOLS=$2; shift ;;
	--timeout) RUN_TIMEOUT=$2; shift ;;
	--server-opt) EXTRA_SERVER_OPTS+=("$2"); shift ;;
	--agent-opt) EXTRA_AGENT_OPTS+=("$2"); shift ;;
	--no-placement) PLACEMENT=0 ;;
	--skip) SKIP_CELLS+=("$2"); shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done
for v in ROUNDS N CG_CALLS RUN_TIMEOUT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "bench: $v must be a positive number" >&2; exit 2; }
done

BIN=$(cd "$BIN" 2>/dev/null && pwd || echo "$BIN")
TOOLS=$(cd "$TOOLS" 2>/dev/null && pwd || echo "$TOOLS")
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOGS=$OUT/logs
RAW=$OUT/raw.jsonl
rm -rf "$LOGS" "$OUT/callgrind"
mkdir -p "$LOGS"
: >"$RAW"
: >"$OUT/skipped.txt"
: >"$OUT/failed.txt"

# shellcheck source=bench/procs.sh
. bench/procs.sh
# shellcheck source=bench/systems.sh
. bench/systems.sh

trap procs_cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# Ops and sizes measured for every system that has them: "op size".
OPS=("get 32" "put 32" "large-get 65536" "large-get 1048576" "bigput 16384")
WINDOWS=(1 32)

# Calls for one run: big objects get fewer calls so every run takes a few
# seconds at most; window 32 gets more so its QPS is not a blip.
calls_for() {
	local size=$1 window=$2 n=$N
	if [ "$size" -ge 1048576 ]; then
		n=$((N / 10))
	elif [ "$size" -ge 16384 ]; then
		n=$((N / 2))
	fi
	[ "$window" -gt 1 ] && n=$((n * 4))
	[ "$n" -lt 50 ] && n=50
	echo "$n"
}

write_meta() {
	python3 - "$OUT/meta.json" <<EOF
import json, os, platform, subprocess, sys, time
def sh(c):
    try: return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception: return ""
cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
json.dump({
  "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
  "host": platform.node(), "kernel": platform.release(), "cpu": cpu,
  "nproc": os.cpu_count(), "mem_gib": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1),
  "git": sh("git rev-parse --short HEAD"), "git_dirty": bool(sh("git status --porcelain -uno")),
  "rounds": $ROUNDS, "n": $N, "smoke": bool($SMOKE),
  "placement": {"server": "$CPU_SERVER", "client": "$CPU_CLIENT", "agent": "$CPU_AGENT"},
  "loadavg_start": "$LOAD_START", "loadavg_end": open("/proc/loadavg").read().strip(),
  "grpc": sh("pkg-config --modversion grpc++"), "redis": sh("redis-server --version | cut -d' ' -f3"),
  "callgrind_calls": $CG_CALLS if $CALLGRIND else 0,
  "server_extra": "${EXTRA_SERVER_OPTS[*]}", "agent_extra": "${EXTRA_AGENT_OPTS[*]}",
}, open(sys.argv[1], "w"), indent=1)
EOF
}

# One round: every op and window, the systems taking turns.
run_round() {
	local round=$1 spec op size w sys n i k why
	local -a order=("${ACTIVE[@]}")
	# Rotate the order each round so no system always runs first.
	k=$(((round - 1) % ${#order[@]}))
	order=("${order[@]:k}" "${order[@]:0:k}")
	for spec in "${OPS[@]}"; do
		read -r op size <<<"$spec"
		[ -z "$OPS_ONLY" ] || [[ ,$OPS_ONLY, == *,$op,* ]] || continue
		for w in "${WINDOWS[@]}"; do
			n=$(calls_for "$size" "$w")
			for sys in "${order[@]}"; do
				[ "$sys" = frontdoor ] && continue
				sys_has_op "$sys" "$op" || continue
				if printf '%s\n' "${SKIP_CELLS[@]}" | grep -qx "$sys:$op:$size:$w"; then
					[ "$round" -gt 1 ] || skip "$sys:$op:$size:$w" "--skip given"
					continue
				fi
				run_client "$round" "$sys" "$op" "$size" "$w" "$n"
			done
		done
	done
	# UCX's own floor under the UCX store: ucx_perftest's tag ping-pong and
	# streaming, same transports, same sizes, the peer on the server's CPU.
	for sys in ucx-shm ucx-tcp; do
		printf '%s\n' "${order[@]}" | grep -qx "$sys" || continue
		if ! command -v ucx_perftest >/dev/null; then
			[ "$round" -gt 1 ] || skip "ucx-perf-${sys#ucx-}" "no ucx_perftest (apt-get install ucx-utils)"
			continue
		fi
		for size in 32 65536 1048576; do
			[ -z "$OPS_ONLY" ] || [ "$size" = 32 ] || continue
			for i in tag_lat tag_bw; do
				if printf '%s\n' "${SKIP_CELLS[@]}" | grep -qx "ucx-perf-${sys#ucx-}:$i:$size:1"; then
					[ "$round" -gt 1 ] || skip "ucx-perf-${sys#ucx-}:$i:$size:1" "--skip given"
					continue
				fi
				run_client "$round" "ucx-perf-${sys#ucx-}" "$i" "$size" 1 \
					"$(calls_for "$size" 32)"
			done
		done
	done
	# The front door alone against a Unix-socket echo and UCX's ping-pong,
	# same size, same window, same CPUs.
	if printf '%s\n' "${order[@]}" | grep -qx frontdoor; then
		for i in frontdoor uds ucx; do
			if [ "$i" = ucx ] && why=$(ucx_missing) && [ -n "$why" ]; then
				[ "$round" -gt 1 ] || skip ucx "$why"
				continue
			fi
			run_client "$round" "$i" local-ping 8 1 "$N"
		done
	fi
}

# GET 32 B under other placements, so the choice above is backed by figures:
# everything on one CPU, the agent on the server's CPU, and no pinning.
placement_check() {
	local spec name cs cc ca args=() o
	for o in "${EXTRA_SERVER_OPTS[@]}"; do args+=(--server-opt "$o"); done
	for o in "${EXTRA_AGENT_OPTS[@]}"; do args+=(--agent-opt "$o"); done
	for spec in "one-cpu 0 0 0" "agent-on-server-cpu 1 0 1" "unpinned 0-1 0-1 0-1"; do
		read -r name cs cc ca <<<"$spec"
		log "placement check: $name (servers $cs, clients $cc, agent $ca)"
		scripts/bench.sh --ops get --rounds 2 -n "$N" --no-callgrind --no-docs --no-chart \
			--no-placement --systems "$SYSTEMS" --cpu-server "$cs" --cpu-client "$cc" \
			--cpu-agent "$ca" --bin "$BIN" --tools "$TOOLS" --out "$OUT/placement/$name" \
			"${args[@]}" >"$LOGS/placement-$name.log" 2>&1 ||
			fail "placement check $name failed (log: $LOGS/placement-$name.log)"
	done
}

main() {
	LOAD_START=$(cat /proc/loadavg)
	log "load before: $LOAD_START ($(nproc) CPUs); placement: servers on CPU $CPU_SERVER," \
		"clients on CPU $CPU_CLIENT, agent on CPU $CPU_AGENT"
	select_systems
	if [ ${#ACTIVE[@]} -eq 0 ]; then
		# The smoke test runs everywhere; it reports the skipped systems itself.
		[ "$SMOKE" = 1 ] || die "no system can run (see $OUT/skipped.txt)"
		log "no system can run here: nothing measured"
		return 0
	fi
	start_servers
	local r
	for ((r = 1; r <= ROUNDS; r++)); do
		log "round $r of $ROUNDS"
		run_round "$r"
	done
	stop_all
	rm -rf "$OUT/placement"
	[ "$PLACEMENT" = 0 ] || placement_check
	if [ "$CALLGRIND" = 1 ]; then
		# shellcheck source=bench/callgrind.sh
		. bench/callgrind.sh
		callgrind_all
	fi
	write_meta
	python3 bench/report.py "$OUT" ${CHART:+--chart=$CHART}
	# The Redis-protocol figure: redis-benchmark against redis-server and
	# against rdmem-agent --resp-port, in the same run (bench/resp.sh).
	if bench/resp.sh "$OUT" "$BIN" "$([ "$SMOKE" = 1 ] && echo 2000 || echo $((N * 4)))" \
		>"$LOGS/resp.log" 2>&1; then
		{ echo; cat "$OUT/resp.md"; } >>"$OUT/results.md"
	else
		fail "bench/resp.sh failed (log: $LOGS/resp.log)"
	fi
	# The three ways in (libclient, Python, the Redis protocol) against one
	# agent and server, window 1, in the same run (bench/ways_in.sh).
	if CPU_SERVER=$CPU_SERVER CPU_AGENT=$CPU_AGENT CPU_CLIENT=$CPU_CLIENT \
		bench/ways_in.sh "$OUT" "$BIN" "$([ "$SMOKE" = 1 ] && echo 2000 || echo "$N")" \
		>"$LOGS/ways_in.log" 2>&1; then
		{ echo; cat "$OUT/ways_in.md"; } >>"$OUT/results.md"
	else
		fail "bench/ways_in.sh failed (log: $LOGS/ways_in.log)"
	fi
	# Many servers: one agent with one server vs three, and the keys a
	# fourth server moves (bench/servers.sh).
	if bench/servers.sh "$OUT" "$BIN" "$([ "$SMOKE" = 1 ] && echo 2000 || echo "$N")" \
		>"$LOGS/servers.log" 2>&1; then
		{ echo; cat "$OUT/servers.md"; } >>"$OUT/results.md"
	else
		fail "bench/servers.sh failed (log: $LOGS/servers.log)"
	fi
	# The spin policy: --busy-poll on the server (and agent) or not, back to
	# back and under a light load (bench/spin.sh).
	if CPU_SERVER=$CPU_SERVER CPU_AGENT=$CPU_AGENT CPU_CLIENT=$CPU_CLIENT \
		bench/spin.sh "$OUT" "$BIN" "$([ "$SMOKE" = 1 ] && echo 1 || echo 3)" \
		>"$LOGS/spin.log" 2>&1; then
		{ echo; cat "$OUT/spin.md"; } >>"$OUT/results.md"
	else
		fail "bench/spin.sh failed (log: $LOGS/spin.log)"
	fi
	# What an idle agent and server cost: wake-ups, CPU, RDMA operations
	# (bench/idle.sh; 60 s, or 3 s for --smoke).
	if bench/idle.sh "$OUT" "$BIN" "$([ "$SMOKE" = 1 ] && echo 3 || echo 60)" \
		>"$LOGS/idle.log" 2>&1; then
		{ echo; cat "$OUT/idle.md"; } >>"$OUT/results.md"
	else
		fail "bench/idle.sh failed (log: $LOGS/idle.log)"
	fi
	if [ -n "$DOCS" ]; then
		mkdir -p "$DOCS"
		cp "$OUT/results.md" "$OUT/summary.json" "$DOCS/"
		[ -f "$OUT/chart.png" ] && cp "$OUT/chart.png" "$DOCS/"
		log "copied the results to $DOCS/"
	fi
	log "results: $OUT/results.md"
	if [ -s "$OUT/failed.txt" ]; then
		log "FAILED runs:"
		sed 's/^/  /' "$OUT/failed.txt" >&2
		exit 1
	fi
}

main
