#!/usr/bin/env bash
# resp_hostile.sh - rdmem-agent's Redis protocol front end against a hostile
# peer (tests/tools/resp_hostile.py), with a real server and agent (shm
# fabric): a pipeline of large SETs behind a stopped server stays within the
# per-connection bound (resp.paused counts the push-back) and is answered in
# full once the server runs; a DEL of 65535 keys does not keep the call slots
# from another connection; commands trickling in 2 KiB at a time (a
# 65536-argument one, binary keys and values) parse to exact replies; at
# --resp-max-conns, silent peers (half a command included) make way for new
# connections after --resp-idle-evict (resp.evicted), a talking one never.
# Needs RDMEM_BIN.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/tap.sh
. tests/tap.sh resp-hostile stack

shm=/rdmem-resph-$$
rport=$(ls_free_ports 1)
mkdir -p "$tmp/run"
if ! ls_start_server "$tmp/run" ||
	! ls_start_agent "$tmp/run" "$shm" --clients 4 --slots 16 --resp-port "$rport" \
		--resp-max-conns 6 --resp-idle-evict 2; then
	echo "not ok - server and agent with --resp-port start"
	exit 1
fi
python3 tests/tools/resp_hostile.py "$rport" "$LS_AGENT_PID" "$LS_SERVER_PID" \
	"$bdir/rdmem" --shm-name "$shm" agent-stats || failed=1
expect "the agent is still running" kill -0 "$LS_AGENT_PID"
exit $failed
