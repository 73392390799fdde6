#!/usr/bin/env bash
# idle.sh - what an idle rdmem-agent and rdmem-server cost (issue 15, "idle
# is free"): a real server and agent over the shm fabric with their default
# options, one call through the front door, then SECONDS with no call in
# flight. Per thread: wake-ups (voluntary + involuntary context switches,
# /proc/PID/task/TID/status) and CPU time (utime + stime, /proc/.../stat);
# for the agent, the RDMA operations it started (agent-stats rdma.posted +
# rdma.ctrl_reads + rdma.lazy_reads + rdma.reclaim_msgs, less the READ
# the closing agent-stats query makes itself). A measurement,
# not a test: it prints what it sees and fails only when it cannot measure.
#   bench/idle.sh OUT BIN [SECONDS]   writes OUT/idle.md and OUT/idle.json
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=$1 secs=${3:-60}
export RDMEM_BIN=$2 # local-stack.sh runs the binaries it names (as ways_in.sh, resp.sh)
[[ $secs =~ ^[1-9][0-9]*$ ]] || { echo "idle.sh: SECONDS must be a positive number" >&2; exit 2; }
work=$(mktemp -d)
# shellcheck source=scripts/local-stack.sh
. "$here/scripts/local-stack.sh"
trap 'ls_stop; rm -rf "$work"' EXIT
shm=/rdmem-idle-$$

# "PROCESS TID COMM SWITCHES TICKS" for every thread of the server and agent.
threads() {
	local p t name
	for p in "server:$LS_SERVER_PID" "agent:$LS_AGENT_PID"; do
		for t in /proc/"${p#*:}"/task/*; do
			name=$(cat "$t/comm")
			echo "${p%%:*} ${t##*/} $name" \
				"$(awk '/^(non)?voluntary_ctxt_switches/ { s += $2 } END { print s }' "$t/status")" \
				"$(awk '{ print $14 + $15 }' "$t/stat")"
		done
	done
}

rdma_ops() {
	"$LS_BIN/rdmem" --shm-name "$shm" agent-stats |
		awk '$1 ~ /^rdma\.(posted|ctrl_reads|lazy_reads|reclaim_msgs)$/ { s += $2 } END { print s + 0 }'
}

ls_start_server "$work" >/dev/null
ls_start_agent "$work" "$shm" >/dev/null
"$LS_BIN/rdmem" --shm-name "$shm" ping >/dev/null
sleep 2 # the call's after-effects (replies, the next control-page READ) settle
ops0=$(rdma_ops)
sleep 0.5 # that query is ring activity: the front-door actor scans for 200 ms after it
threads >"$work/t0"
sleep "$secs"
threads >"$work/t1"
ops1=$(rdma_ops)
# agent-stats answers with a freshly read control page: its own READ is in
# ops1. A second query right after shows what one query adds.
per_query=$(($(rdma_ops) - ops1))
hz=$(getconf CLK_TCK)

python3 - "$work/t0" "$work/t1" "$secs" "$hz" "$((ops1 - ops0 - per_query))" "$out" <<'EOF'
import json, sys
t0, t1, secs, hz, ops, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
def rows(path):
    d = {}
    for line in open(path):
        proc, tid, name, sw, ticks = line.split()
        d[(proc, tid)] = (name, int(sw), int(ticks))
    return d
a, b = rows(t0), rows(t1)
threads = []
for k in sorted(b):
    if k in a:
        name, sw, ticks = b[k]
        threads.append({"process": k[0], "thread": name, "wakeups_per_s": (sw - a[k][1]) / secs,
                        "cpu_pct": 100.0 * (ticks - a[k][2]) / hz / secs})
total_w = sum(t["wakeups_per_s"] for t in threads)
total_cpu = sum(t["cpu_pct"] for t in threads)
json.dump({"seconds": secs, "threads": threads, "wakeups_per_s": total_w, "cpu_pct": total_cpu,
           "agent_rdma_ops": ops}, open(out + "/idle.json", "w"), indent=1)
md = ["## Idle: agent and server with no call in flight (%g s)" % secs, "",
      "After one call, default options, shm fabric (bench/idle.sh). Target (issue 15): "
      "no periodic wake-up of any thread, no RDMA operation, < 0.5 % CPU.", "",
      "| process | thread | wake-ups/s | CPU % |", "|---|---|---:|---:|"]
for t in threads:
    md.append("| %s | %s | %.1f | %.2f |" % (t["process"], t["thread"], t["wakeups_per_s"], t["cpu_pct"]))
md += ["| **all** | | **%.1f** | **%.2f** |" % (total_w, total_cpu), "",
       "RDMA operations the idle agent started in %g s: %d." % (secs, ops), ""]
open(out + "/idle.md", "w").write("\n".join(md))
print("\n".join(md))
EOF
