#!/usr/bin/env bash
# resp_budget.sh - rdmem-agent's --resp-max-memory with a real server and
# agent (shm fabric), driven by tests/tools/resp_budget.py: twelve hostile
# connections, each holding what the per-connection bounds allow (unread
# replies of pipelined 1 MB GETs, most of a 4 MB MSET), against a 32 MiB
# budget (with --slots 2: the floor, what one connection may hold, is 27.3
# MiB there; 55.3 MiB at the default 16 slots): the agent stays alive, its VmRSS grows by less than the budget
# plus a stated slack, resp.evicted_memory counts the connections closed,
# the log line names the peer and the flag, resp.memory returns to 0 once
# every connection is gone, and an honest redis-cli sets and gets values
# byte for byte during and after. Then slow loris: 63 connections holding
# 512 KiB of a partial SET each (the budget but 256 KiB) dribble a byte
# every 200 ms while an honest connection SETs 1 MB at full speed past the
# budget: the lorises are closed (stalled), the honest SET and its GET are
# byte-exact; INFO shows the budget. Tools missing: "# SKIP". Needs RDMEM_BIN.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/tap.sh
. tests/tap.sh resp-budget stack

if ! command -v redis-cli >/dev/null; then
	echo "ok - --resp-max-memory against hostile peers # SKIP not installed: redis-cli (redis-tools)"
	exit 0
fi

shm=/rdmem-respb-$$
rport=$(ls_free_ports 1)
budget=32
mkdir -p "$tmp/run"
if ! ls_start_server "$tmp/run" ||
	! ls_start_agent "$tmp/run" "$shm" --clients 4 --slots 2 --resp-port "$rport" \
		--resp-max-memory "${budget}m"; then
	echo "not ok - server and agent with --resp-port and --resp-max-memory start"
	exit 1
fi
expect "the agent logs its budget at start" \
	grep -q -- "--resp-max-memory $((budget << 20)) B" "$tmp/run/agent.log"
python3 tests/tools/resp_budget.py "$rport" "$LS_AGENT_PID" "$budget" "$tmp/run/agent.log" \
	"$bdir/rdmem" --shm-name "$shm" agent-stats || failed=1
expect "the agent is still running" kill -0 "$LS_AGENT_PID"
expect "the agent logged no error" bash -c "! grep -q ': error:' '$tmp/run/agent.log'"
exit $failed
