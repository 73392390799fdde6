#!/usr/bin/env bash
# run_business_scenarios.sh - the seven business scenarios against a server,
# with explicit pass/fail checks and latency/QPS figures, reported as
# Markdown and JSON.
#
#   scripts/run_business_scenarios.sh SERVER PORT N [options]
#     SERVER   rdmem-server address; 127.0.0.1 / localhost / ::1 means "this host"
#     PORT     its RDMA port (TCP fallback: PORT+1); 0 picks a free one (local only)
#     N        operations per scenario (each scenario scales its own set-up from it)
#   options:
#     --out DIR         where results go (default logs/scenarios_<host>_<time>)
#     --window W        calls in flight in the pipelined scenarios (default 16)
#     --use-agent SHM   drive an agent you already run (its --shm-name), start nothing
#     --image-dir DIR   the server's --image-dir, to check stored files byte-exact
#                       (set automatically when this script starts the server)
#     --fabric F        verbs | shm | tcp for the agent this script starts
#     --tap             print "ok - "/"not ok - " lines instead of the Markdown
#
# Local SERVER, no --use-agent: starts its own rdmem-server (-b 127.0.0.1 -p
# PORT --fabric shm --image-dir OUT/images) and rdmem-agent (--fabric shm
# --shm-name /rdmem-scen-PID --clients 4 --slots 32), the real data plane over
# shared memory. Remote SERVER: starts only an agent dialling SERVER:PORT
# (fabric: verbs when this host has an RDMA device, else TCP), on a private
# segment; the server must run with --image-dir. Scenario 6 injects faults
# with `rdmem agent-ctl`, so use an agent of your own only if that is fine.
#
# Files in OUT: results.jsonl (one line per scenario), report.md, report.json,
# server.log / agent.log for what this script started.
# Exit status: 0 every check passed or was skipped, 1 a check failed, 2 usage.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}
[ $# -ge 3 ] || usage
server=$1 port=$2 n=$3
shift 3
out= window=16 use_agent= image_dir= fabric= tap=0
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=${2:?}; shift 2 ;;
	--window) window=${2:?}; shift 2 ;;
	--use-agent) use_agent=${2:?}; shift 2 ;;
	--image-dir) image_dir=${2:?}; shift 2 ;;
	--fabric) fabric=${2:?}; shift 2 ;;
	--tap) tap=1; shift ;;
	*) echo "run_business_scenarios: unknown option '$1'" >&2; usage ;;
	esac
done
[[ $port =~ ^[0-9]+$ ]] && [ "$port" -le 65534 ] || { echo "run_business_scenarios: PORT must be 0..65534" >&2; exit 2; }
[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 10000000 ] || { echo "run_business_scenarios: N must be 1..10000000" >&2; exit 2; }
[[ $window =~ ^[0-9]+$ ]] && [ "$window" -ge 1 ] && [ "$window" -le 64 ] || { echo "run_business_scenarios: --window must be 1..64" >&2; exit 2; }
case $fabric in "" | verbs | shm | tcp) ;; *) echo "run_business_scenarios: --fabric verbs|shm|tcp" >&2; exit 2 ;; esac

export RDMEM_BIN=${RDMEM_BIN:-build}
driver=$RDMEM_BIN/tests/rdmem_scenarios
if [ ! -x "$driver" ] || [ ! -x "$RDMEM_BIN/rdmem-agent" ]; then
	echo "run_business_scenarios: $driver or the daemons are missing; run make first" >&2
	exit 2
fi
# shellcheck source=scripts/local-stack.sh
. scripts/local-stack.sh
out=${out:-logs/scenarios_$(hostname -s)_$(date +%Y%m%d_%H%M%S)}
mkdir -p "$out"
trap ls_stop EXIT

local=0
case $server in 127.0.0.1 | localhost | ::1) local=1 ;; esac
shm=$use_agent
if [ -z "$use_agent" ]; then
	shm=/rdmem-scen-$$
	if [ "$local" = 1 ]; then
		mkdir -p "$out/images"
		image_dir=$(cd "$out/images" && pwd)
		[ "$port" != 0 ] && export LS_FIXED_PORT=$port
		ls_start_server "$out" --image-dir "$image_dir"
		ls_start_agent "$out" "$shm" --clients 4 --slots 32 ${fabric:+--fabric "$fabric"}
		port=$LS_PORT
	else
		[ "$port" != 0 ] || { echo "run_business_scenarios: a remote server needs its PORT" >&2; exit 2; }
		"$RDMEM_BIN/rdmem-agent" -s "$server" -p "$port" --shm-name "$shm" --clients 4 --slots 32 \
			${fabric:+--fabric "$fabric"} >"$out/agent.log" 2>&1 &
		LS_AGENT_PID=$!
		ls_wait_log "$out/agent.log" "ready:" 10
		[ "$fabric" = tcp ] || ls_wait_log "$out/agent.log" "rdma: session" 10 ||
			echo "run_business_scenarios: no RDMA session yet; scenarios run on what the agent has" >&2
	fi
fi

set +e
"$driver" --shm-name "$shm" -n "$n" --window "$window" ${image_dir:+--image-dir "$image_dir"} \
	>"$out/results.jsonl" 2>"$out/driver.log"
drc=$?
set -e
[ "$drc" -le 1 ] || { echo "run_business_scenarios: driver exited $drc:" >&2; sed 's/^/  /' "$out/driver.log" >&2; }
report=(python3 scripts/scenario_report.py "$out/results.jsonl" --md "$out/report.md"
	--json "$out/report.json" --expect ycsb,profile,cdn,image,tcp,faults,async
	--meta "server=$server:$port" --meta "N=$n" --meta "window=$window"
	--meta "agent=${use_agent:-started here${fabric:+ ($fabric)}}" --meta "host=$(hostname -s)")
[ "$tap" = 1 ] && report+=(--tap)
set +e
"${report[@]}"
rc=$?
set -e
[ "$tap" = 1 ] || echo "run_business_scenarios: report in $out/report.md and $out/report.json" >&2
[ "$drc" -le 1 ] || rc=1
exit "$rc"
