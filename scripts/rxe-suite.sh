#!/usr/bin/env bash
# rxe-suite.sh - the checks that scripts/test-rxe.sh runs inside one boot of the
# Soft-RoCE VM (scripts/rxe-vm.sh -m both). Not meant for the host: it needs
# the VM's rxe devices and environment (RXE_DUMMY_IP, RXE_VETH_*).
#
# Each check is a function check_NAME listed in CHECKS, run in order. A check
# prints "ok - NAME: ..." / "not ok - NAME: ..." lines (the programs' own case
# lines, prefixed) and '#' comments for everything else; test-rxe.sh counts
# them. Every figure printed here is functional (Soft-RoCE under TCG costs
# ~50 us an operation): never a performance figure.
#
#   fabric-level   fabric_check over rxe0 (dummy) and rxe_c -> rxe_s (veth), and
#                  its --break run, which must fail
#   integration    the real rdmem-server and rdmem-agent over --fabric verbs:
#                  test_agent_paths (dummy, and veth with the agent on rxe_c via
#                  --source), test_pin_budget, test_rdma_server, test_agent_clients,
#                  test_link_cycles (40 link cycles, no fd/session/QP leak),
#                  test_agent_rdma_loss (the server's RDMA listener gone, and
#                  the veth black-holed by tc netem and healed), memlock (agent,
#                  then server, under a low `ulimit -l`), lease_fits (a session
#                  lease past the VM's memory refused at start), many_sessions (256, the
#                  device's resource table against the server's gauges;
#                  grouped, so the turn word is written over verbs),
#                  session_flood (a hog holding sessions that never send),
#                  lease_hygiene, session_fence (forged rkeys and addresses
#                  against another session), session_reap, group_yield (two real agents
#                  grouped: turn words and turns that wake, over verbs)
#   mw             tests/mw_probe on rxe0: what the device says of memory
#                  windows, and type-2 windows bound, read through, invalidated
#                  (LOCAL_INV and SEND_WITH_INV) and refused after (issue 14)
#   torture        tests/torture over verbs on rxe0: a few random legal
#                  configurations, op mixes and faults, every call checked
#
# No check skips: a case line with "# SKIP" fails test-rxe.sh unless it is
# listed in RDMEM_RXE_EXPECTED_SKIPS (none is, today).
#
# Usage inside the VM: bash scripts/rxe-suite.sh [CHECK...]   (default: all)
# Env: RDMEM_RXE_PROG_TIMEOUT (seconds per program, default 900: generous,
# for a host whose 2 cores are shared; the slowest, test_agent_clients, takes
# ~75 s on a quiet host and ~300 s under a load average of 10).
set -u
BIN=$(cd "$(dirname "$0")/.." && pwd) # the staged build directory (/extra)
T=${RDMEM_RXE_PROG_TIMEOUT:-900}
FC=$BIN/tests/fabric_check
CHECKS="dummy veth broken_detail paths_dummy paths_veth pin_budget inline_calls rdma_server lease_fits clients link_cycles
 rdma_loss_veth memlock memlock_server many_sessions session_flood lease_hygiene session_fence session_reap
 group_yield mw torture"
export RDMEM_BIN=$BIN

# Prefixes a program's case lines with the check's name; the rest become comments.
relabel() {
	sed -e "s/^\(ok\|not ok\) - /\1 - $1: /" -e '/^\(ok\|not ok\) - /!s/^/# /'
}

# Everything counts as a comment (for runs that are meant to fail).
comment() {
	sed "s/^/# $1: /"
}

wait_for_line() { # FILE REGEX SECS
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# Runs a fabric_check server and client; sets SRV_RC and CLI_RC and leaves
# their output in $OUT.{server,client}.{out,err}.
run_fabric_check() { # NAME PORT SERVER_ADDR [client options...]
	local name=$1 port=$2 addr=$3 spid
	shift 3
	OUT=/tmp/rxe-$name
	timeout -k 5 "$T" "$FC" --fabric verbs server "$addr" "$port" \
		>"$OUT.server.out" 2>"$OUT.server.err" &
	spid=$!
	if ! wait_for_line "$OUT.server.out" '^# listening' 60; then
		echo "not ok - $name: fabric_check server did not start listening on $addr:$port"
		kill "$spid" 2>/dev/null
	fi
	timeout -k 5 "$T" "$FC" --fabric verbs client "$addr" "$port" "$@" \
		>"$OUT.client.out" 2>"$OUT.client.err"
	CLI_RC=$?
	wait "$spid"
	SRV_RC=$?
}

show_run() { # NAME FILTER
	"$2" "$1" <"$OUT.client.out"
	"$2" "$1" <"$OUT.server.out"
	sed "s/^/#   client: /" "$OUT.client.err"
	sed "s/^/#   server: /" "$OUT.server.err"
	echo "# $1: client exit $CLI_RC, server exit $SRV_RC"
}

status_line() { # NAME RC TEXT
	if [ "$2" = 0 ]; then echo "ok - $1: $3"; else echo "not ok - $1: $3 (exit $2)"; fi
}

# One host: client and server on rxe0 (dummy0); rxe loops the packets internally.
check_dummy() {
	run_fabric_check dummy 7471 "$RXE_DUMMY_IP"
	show_run dummy relabel
	status_line dummy "$CLI_RC" "fabric_check client exits 0"
	status_line dummy "$SRV_RC" "fabric_check server exits 0"
}

veth_pkts() { cat "/sys/class/net/$RXE_VETH_CLI_NETDEV/statistics/tx_packets"; }

# "Two hosts": server on rxe_s (veth0), client bound to rxe_c (veth1); the
# packet counter of veth1 proves the traffic crossed the veth.
check_veth() {
	local before after
	RXE_VETH_CLI_NETDEV=veth1
	before=$(veth_pkts)
	run_fabric_check veth 7472 "$RXE_VETH_SRV_IP" --src "$RXE_VETH_CLI_IP"
	after=$(veth_pkts)
	show_run veth relabel
	status_line veth "$CLI_RC" "fabric_check client (on $RXE_VETH_CLI_DEV) exits 0"
	status_line veth "$SRV_RC" "fabric_check server (on $RXE_VETH_SRV_DEV) exits 0"
	[ $((after - before)) -gt 1000 ]
	status_line veth $? "traffic crossed the veth: $((after - before)) packets out of veth1"
}

# A deliberately broken verbs detail (READs posted before the peer's region is
# known: rkey 0, address 0) must make the check fail, and say where.
check_broken_detail() {
	run_fabric_check broken 7473 "$RXE_DUMMY_IP" --break read-before-exchange \
		--iters 20 --cycles 2
	show_run broken comment
	[ "$CLI_RC" != 0 ] && grep -q '^not ok - read' "$OUT.client.out"
	status_line broken_detail $? "a READ posted before the region exchange fails fabric_check"
}

# ---- integration over --fabric verbs -----------------------------------------

# 256 sessions on one verbs server (leased message pool, worker threads; small
# leases: --ring-slots 16 --objpool-slabs 1 --max-value 4096, so 256 of them
# and the client's regions fit the VM): every session connects, runs GETs with
# every reply checked, and disconnects; while all are open, the device's own
# resource table (`rdma -j res show qp|cq|mr`, the server's pid) holds exactly
# what the server's resources.* gauges say (QPs, CQs, MRs, registered bytes);
# the server ends with every lease back and no session left.
# The server's open-session gauge from its /metrics (python3: the guest has no curl).
server_metric() { # METRICS_PORT NAME: the sample's value, or "?"
	python3 - "$1" "$2" <<'EOF' 2>/dev/null || echo "?"
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=2).read().decode()
print(next((l.split()[1] for l in text.splitlines() if l.startswith(sys.argv[2] + " ")), "?"))
EOF
}
server_sessions_open() { server_metric "$1" rdmem_server_sessions; }
# The server's resources gauges, one read: "QPS CQS MRS BYTES", or "? ? ? ?".
server_holds() { # METRICS_PORT
	python3 - "$1" <<'EOF' 2>/dev/null || echo "? ? ? ?"
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
v = {l.split()[0]: l.split()[1] for l in text.splitlines() if l and not l.startswith("#")}
print(" ".join(v["rdmem_server_resources_" + k] for k in ("qps", "cqs", "mrs", "registered_bytes")))
EOF
}

# The pid of the child of PID (the program a `timeout` runs), or PID.
child_of() { # PID
	python3 - "$1" <<'EOF' 2>/dev/null || echo "$1"
import os, sys
def ppid(p):
    try:
        return open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[1]
    except OSError:  # gone meanwhile
        return None
kids = [p for p in os.listdir("/proc") if p.isdigit() and ppid(p) == sys.argv[1]]
print(kids[0] if len(kids) == 1 else sys.argv[1])
EOF
}

# What the device holds for process PID: "QPS CQS MRS BYTES" from rdma(8),
# whose "pid" is the thread that made the object (the server's listener).
device_holds() { # PID
	local d=/tmp/rxe-holds
	rdma -j res show qp >$d.qp 2>/dev/null && rdma -j res show cq >$d.cq 2>/dev/null &&
		rdma -j res show mr >$d.mr 2>/dev/null || { echo "? ? ? ?"; return; }
	python3 - "$1" $d.qp $d.cq $d.mr <<'EOF' 2>/dev/null || echo "? ? ? ?"
import json, os, sys
tids = {int(t) for t in os.listdir("/proc/%s/task" % sys.argv[1])}
mine = [[r for r in json.load(open(f)) if r.get("pid") in tids] for f in sys.argv[2:5]]
print(len(mine[0]), len(mine[1]), len(mine[2]), sum(r.get("mrlen", 0) for r in mine[2]))
EOF
}

check_many_sessions() {
	local port=7480 n=256 log=/tmp/rxe-many.server.log err=/tmp/rxe-many.err spid bpid rc out
	local dev gauges srv hold=/tmp/rxe-many.hold
	timeout -k 5 "$T" "$BIN/rdmem-server" -b "$RXE_DUMMY_IP" -p "$port" --fabric verbs --no-tcp \
		--ring-slots 16 --objpool-slabs 1 --max-value 4096 --max-sessions $((n + 16)) \
		--group-threshold 16 --group-size 16 --slice-us 20000 --metrics-port $((port + 10)) \
		>"$log" 2>&1 &
	spid=$!
	if ! wait_for_line "$log" 'listening verbs' 60; then
		echo "not ok - many_sessions: rdmem-server did not start"
		sed 's/^/#   many_sessions: | /' "$log"
		kill "$spid" 2>/dev/null
		return
	fi
	srv=$(child_of "$spid") # the server itself, not its timeout
	: >"$hold" # scale_bench holds every session open while this exists
	timeout -k 5 "$T" "$BIN/tests/scale_bench" --fabric verbs --addr "$RXE_DUMMY_IP" \
		--port "$port" -n "$n" --window 2 --seconds 3 --server-pid "$srv" --hold-file "$hold" \
		>/tmp/rxe-many.out 2>"$err" &
	bpid=$!
	# Until all are open, or scale_bench gave up (a refused session ends it).
	while ! grep -q "$n sessions open" "$err" 2>/dev/null && kill -0 "$bpid" 2>/dev/null; do
		sleep 0.1
	done
	if grep -q "$n sessions open" "$err"; then
		dev=$(device_holds "$srv")
		gauges=$(server_holds $((port + 10)))
		rm -f "$hold"
		echo "# many_sessions: $n sessions open; the device holds for rdmem-server (QPs CQs MRs bytes): $dev; its gauges: $gauges"
		[ "$dev" = "$gauges" ] && [ "${dev%% *}" = "$n" ]
		status_line many_sessions $? "the device holds exactly what the server's resources gauges say ($n QPs)"
	else
		echo "not ok - many_sessions: $n sessions never all open"
	fi
	rm -f "$hold"
	wait "$bpid"
	rc=$?
	out=$(cat /tmp/rxe-many.out)
	echo "# many_sessions: $out"
	grep -v ': info: ' "$err" | sed 's/^/#   many_sessions: /'
	status_line many_sessions "$rc" "$n sessions connect, run GETs with every reply checked, disconnect"
	# Grouped (groups of 16; slices of 20 ms, so that a round under TCG,
	# which takes milliseconds, can fall in a slice's last quarter): the
	# turn word, an RDMA WRITE into each session's region, reached them
	# over verbs and they held.
	local yields
	yields=$(sed -n 's/.*"yields":\([0-9]*\).*/\1/p' /tmp/rxe-many.out)
	[ "${yields:-0}" -gt 0 ]
	status_line many_sessions $? "grouped: sessions were told to hold in their turn words ($yields holds)"
	# The closes reach the server: every session ends (no lease, no worker
	# slot held). Read from its sessions gauge: the "closed" log line is
	# rate-limited (a peer can provoke it), so its count is not the number.
	local open=? left=?
	for _ in $(seq 300); do
		open=$(server_sessions_open $((port + 10)))
		left=$(device_holds "$srv")
		[ "$open" = 0 ] && [ "$left" = "0 0 0 0" ] && break
		sleep 0.1
	done
	[ "$open" = 0 ] && [ "$left" = "0 0 0 0" ]
	status_line many_sessions $? "the server closed all $n sessions and the device holds nothing of them (sessions $open; QPs CQs MRs bytes $left)"
	kill "$spid" 2>/dev/null
	wait "$spid"
	status_line many_sessions $? "rdmem-server stops cleanly afterwards"
}

# Runs one test program with the given environment; its case lines become
# "ok - NAME: case", stderr and the rest become comments.
run_test() { # NAME ENV... -- PROGRAM ARGS...
	local name=$1 rc envs=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	touch "/tmp/rxe-$name.start"
	env "${envs[@]}" timeout -k 5 "$T" "$@" >"/tmp/rxe-$name.out" 2>"/tmp/rxe-$name.err"
	rc=$?
	# On failure, the tail of every server/agent log the program wrote.
	if [ "$rc" != 0 ]; then
		find /tmp -maxdepth 1 -name 'rdmem-test-*.log' -newer "/tmp/rxe-$name.start" |
			while read -r f; do
				echo "#   $name: --- $f"
				tail -n 40 "$f" | sed "s/^/#   $name: | /"
			done
	fi
	relabel "$name" <"/tmp/rxe-$name.out"
	# info lines stay in the file; warnings, errors and failed checks are shown
	grep -v ': info: ' "/tmp/rxe-$name.err" | sed "s/^/#   $name: /"
	[ "$rc" = 0 ] || grep -q '^not ok - ' "/tmp/rxe-$name.out" ||
		echo "not ok - $name: $(basename "$1") exited $rc$([ "$rc" = 124 ] && echo " (timed out after ${T}s)")"
	return "$rc"
}

dummy_env() { echo "RDMEM_TEST_ADDR=$RXE_DUMMY_IP"; }
veth_env() { echo "RDMEM_TEST_ADDR=$RXE_VETH_SRV_IP RDMEM_TEST_SOURCE=$RXE_VETH_CLI_IP"; }

# Every op on every path, AUTO by the path counters, lifecycle, fallbacks,
# READ depth, async window 32: server and agent on rxe0.
check_paths_dummy() {
	run_test paths_dummy $(dummy_env) -- "$BIN/tests/test_agent_paths" verbs
}

# The same with the agent on rxe_c (--source) and the server on rxe_s: the
# packets leaving veth1 prove the traffic crossed the veth pair.
check_paths_veth() {
	local before after
	RXE_VETH_CLI_NETDEV=veth1
	before=$(veth_pkts)
	run_test paths_veth $(veth_env) -- "$BIN/tests/test_agent_paths" verbs
	after=$(veth_pkts)
	[ $((after - before)) -gt 10000 ]
	status_line paths_veth $? "agent on $RXE_VETH_CLI_DEV, server on $RXE_VETH_SRV_DEV: $((after - before)) packets out of veth1"
	grep -h "connected to .* via $RXE_VETH_CLI_DEV" /tmp/rdmem-test-*-agent.log 2>/dev/null |
		tail -1 | sed 's/^/#   paths_veth: /'
}

# The pinned-memory budget over real registrations: one slot pinned (VmPin),
# not the whole area; eviction, -ENOMEM, and TCP for AUTO past the budget.
check_pin_budget() {
	run_test pin_budget $(dummy_env) -- "$BIN/tests/test_pin_budget" verbs
}

# The front door taking calls itself (agent/session.c), over verbs: a slot's
# registration left to the session thread, a post that breaks the link.
check_inline_calls() {
	run_test inline_calls $(dummy_env) -- "$BIN/tests/test_inline_calls" verbs
}

# The server's data plane against a hand-driven peer: forged descriptors,
# RECLAIM repeat/stale/unknown, TTL, control page, an access violation.
check_rdma_server() {
	run_test rdma_server $(dummy_env) -- "$BIN/tests/test_rdma_server" verbs
}

# A reused lease shows nothing of its previous tenant (registered fresh
# memory); the control page's tcp_state with and without --no-tcp.
check_lease_hygiene() {
	run_test lease_hygiene $(dummy_env) -- "$BIN/tests/test_lease_hygiene" verbs
}

# One session cannot read or write another's areas with forged rkeys and
# addresses (the device's own checks: one PD per session), grouped and not.
check_session_fence() {
	run_test session_fence $(dummy_env) -- "$BIN/tests/test_session_fence" verbs
}

# Two real agents in two groups of one, over verbs: told to hold in their
# turn words, and woken by turns that carry an immediate (layout 6), whose
# credit must be exact: a wake with no receive is retried forever (RNR)
# and stalls the session, and calls fail.
check_group_yield() {
	run_test group_yield $(dummy_env) -- "$BIN/tests/test_group_yield" verbs
	run_test turn_wake $(dummy_env) -- "$BIN/tests/test_turn_wake" verbs
}

# A kill -9'd agent's session closes within 1 s (CM DISCONNECTED, read by the
# workers' sweep) under grouping, busy-poll and two workers.
check_session_reap() {
	run_test session_reap $(dummy_env) -- "$BIN/tests/test_session_reap" verbs
}

# 32 client processes, a killed client, agent restart and kill, server restart,
# over verbs: the path counters must show every call of the 32 went RDMA.
check_clients() {
	run_test clients $(dummy_env) -- "$BIN/tests/test_agent_clients" verbs
}

# 40 rdmem_link_open/close cycles: fds, server sessions, kernel QP/CQ/MR/PD/cm_id.
check_link_cycles() {
	run_test link_cycles $(dummy_env) -- "$BIN/tests/test_link_cycles" verbs
}

# test_agent_rdma_loss runs across the veth only (agent on rxe_c): its
# network-cut case needs a wire to cut, and rxe on the dummy device loops its
# packets inside the driver (rxe_loopback), where no qdisc sees them, so a
# dummy variant could only skip that case. The veth run covers both cases: the
# server back without its RDMA listener, and the cut: netem
# drops every packet leaving either veth end, which carry only RoCE here (TCP
# between the two addresses of this host goes through lo). On rxe such a
# black hole never fails a WR (no retry-exceeded within 60 s), so it is the
# agent's own liveness check (--rdma-stall-ms) that finds the path dead,
# moves calls to TCP and redials until the heal.
# Full path: the test runs them with system(), and /bin/sh here is busybox,
# whose own tc applet would win and knows no netem.
TC=$(command -v tc || echo /sbin/tc)
RXE_CUT="$TC qdisc add dev veth1 root netem loss 100% && $TC qdisc add dev veth0 root netem loss 100%"
RXE_HEAL="$TC qdisc del dev veth1 root; $TC qdisc del dev veth0 root"
check_rdma_loss_veth() {
	local rc
	RDMEM_TEST_CUT=$RXE_CUT RDMEM_TEST_HEAL=$RXE_HEAL \
		run_test rdma_loss_veth $(veth_env) -- "$BIN/tests/test_agent_rdma_loss" verbs
	rc=$?
	# Healed whatever happened, for the checks after this one.
	eval "$RXE_HEAL" 2>/dev/null
	return "$rc"
}

# Type-2 memory windows on rxe0 (groundwork for per-slice pool mapping): the
# probe reports max_mw and the TYPE_2A/2B bits, then binds, READs through,
# invalidates and is refused. A device without type-2 windows is a skip with
# the probe's reason (a failure here unless RDMEM_RXE_EXPECTED_SKIPS lists it).
check_mw() {
	run_test mw -- "$BIN/tests/mw_probe" --dev "$RXE_DUMMY_DEV" --iters 200
}

# tests/torture over verbs: server and agents on rxe0, quick cases (random
# legal flags within the verbs draw's memory caps, op mixes, kill -9 and
# restart of clients, agents and server, simulated RDMA faults; no netns cut:
# the guest has one rxe device per netdev). Every call is checked (byte-exact
# values, per-key linearizability, no duplicate, no leak). A random base seed,
# printed; RDMEM_RXE_TORTURE_SEED pins it. Bounded: cases start only within
# the first RDMEM_RXE_TORTURE_MIN minutes (default 0.75), 8 at most; a case
# running 90 s past that is killed (a failure).
check_torture() {
	local out=/tmp/rxe-torture.out rc n rdma lim=${RDMEM_RXE_TORTURE_MIN:-0.75}
	RDMEM_BIN=$BIN timeout -k 5 $(awk "BEGIN{print int($lim * 60 + 90)}") python3 \
		"$BIN/torture/torture.py" --fabric verbs --addr "$RXE_DUMMY_IP" --quick --cases 8 \
		--minutes "$lim" --no-help-check ${RDMEM_RXE_TORTURE_SEED:+--seed "$RDMEM_RXE_TORTURE_SEED"} \
		>"$out" 2>&1
	rc=$?
	relabel torture <"$out"
	n=$(grep -c '^\(ok\|not ok\) - torture case ' "$out")
	[ "$rc" = 0 ] && [ "$n" -ge 1 ]
	status_line torture $? "$n random configurations over verbs ran and found nothing (torture.py exit $rc)"
	# RDMA carried calls, not only the TCP fallback (a draw may turn RDMA off).
	rdma=$(sed -n 's/^# torture replies by path: .*eager \([0-9]*\), lazy \([0-9]*\), bulk \([0-9]*\),.*/\1 \2 \3/p' "$out" |
		awk '{print $1 + $2 + $3}')
	[ "${rdma:-0}" -gt 0 ]
	status_line torture $? "replies carried over RDMA (eager, lazy, bulk): ${rdma:-none}"
}

json_path() { # JSON KEY SUBKEY: the number at "KEY":{..."SUBKEY":N
	sed -n "s/.*\"$2\":{[^}]*\"$3\":\([0-9]*\).*/\1/p" <<<"$1"
}
json_top() { sed -n "s/^{.*\"$2\":\([0-9]*\).*/\1/p" <<<"$1"; }

# Starts an agent on the dummy rxe under memlock_exec KIB; sets AGENT_PID.
memlock_agent() { # KIB SHM LOG
	"$BIN/tests/memlock_exec" "$1" "$BIN/rdmem-agent" -s "$RXE_DUMMY_IP" -p 7481 \
		--fabric verbs --clients 1 --slots 2 --shm-name "$2" >"$3" 2>&1 &
	AGENT_PID=$!
	wait_for_line "$3" 'ready:' 30
}

# The agent pins its front-door segment and link region. Under a limit too low
# for them (and without CAP_IPC_LOCK) it says `ulimit -l` once and carries
# every call over TCP; under a limit that holds them it links over RDMA.
check_memlock() {
	local cli="$BIN/rdmem --shm-name /rxe-memlock" st v n spid ok=0
	timeout -k 5 "$T" "$BIN/rdmem-server" -b "$RXE_DUMMY_IP" -p 7481 --tcp-port 7482 \
		--fabric verbs >/tmp/rxe-memlock-server.log 2>&1 &
	spid=$!
	wait_for_line /tmp/rxe-memlock-server.log 'listening tcp' 30 || echo "not ok - memlock: server did not start"
	if memlock_agent 1024 /rxe-memlock /tmp/rxe-memlock-agent.log; then
		$cli put mk hello >/dev/null 2>&1 && v=$($cli get mk 2>/dev/null) && [ "$v" = hello ]
		status_line memlock $? "limit 1024 KiB: AUTO put and get succeed"
		sleep 2 # room for redials, if the agent kept trying
		st=$($cli agent-stats --json 2>/dev/null)
		[ "$(json_top "$st" memlock_short)" = 1 ] && [ "$(json_top "$st" link_up)" = 0 ] &&
			[ "$(json_top "$st" link_opens)" = 0 ]
		status_line memlock $? "limit 1024 KiB: RDMA off (memlock_short 1, no link opened)"
		[ "$(json_path "$st" tcp ok)" -ge 2 ] 2>/dev/null
		status_line memlock $? "limit 1024 KiB: the calls went over TCP (tcp ok $(json_path "$st" tcp ok))"
		n=$(grep -c 'ulimit -l' /tmp/rxe-memlock-agent.log)
		[ "$n" = 1 ]
		status_line memlock $? "limit 1024 KiB: one error naming \`ulimit -l\` ($n)"
		grep 'ulimit -l' /tmp/rxe-memlock-agent.log | sed 's/^/#   memlock: /'
	else
		echo "not ok - memlock: agent under a 1024 KiB limit did not start"
		sed 's/^/#   memlock: /' /tmp/rxe-memlock-agent.log
	fi
	kill "$AGENT_PID" 2>/dev/null
	wait "$AGENT_PID" 2>/dev/null
	# Enough for the segment (~2.2 MiB) and the link region (~17 MiB): RDMA.
	if memlock_agent 65536 /rxe-memlock /tmp/rxe-memlock-agent2.log; then
		for _ in $(seq 100); do
			st=$($cli agent-stats --json 2>/dev/null)
			[ "$(json_top "$st" link_up)" = 1 ] && ok=1 && break
			sleep 0.1
		done
		$cli put mk2 world >/dev/null 2>&1 && [ "$ok" = 1 ]
		status_line memlock $? "limit 64 MiB: the agent links over RDMA"
	else
		echo "not ok - memlock: agent under a 64 MiB limit did not start"
	fi
	grep -h 'error' /tmp/rxe-memlock-agent2.log | sed 's/^/#   memlock (64 MiB): /'
	kill "$AGENT_PID" "$spid" 2>/dev/null
	wait 2>/dev/null
}

# The server pins a lease per session. Under a limit that holds none it says
# so once at start, naming `ulimit -l` and how many sessions fit; a session's
# failed registration is refused, and its agent's calls go over TCP.
check_memlock_server() {
	local cli="$BIN/rdmem --shm-name /rxe-memlock-srv" slog=/tmp/rxe-memlock-srv.log st v n spid
	timeout -k 5 "$T" "$BIN/tests/memlock_exec" 1024 "$BIN/rdmem-server" -b "$RXE_DUMMY_IP" \
		-p 7483 --tcp-port 7484 --fabric verbs --max-sessions 8 >"$slog" 2>&1 &
	spid=$!
	wait_for_line "$slog" 'listening tcp' 30 || echo "not ok - memlock_server: server did not start"
	n=$(grep -c 'ulimit -l' "$slog")
	grep -q '0 of --max-sessions 8 sessions can register' "$slog" && [ "$n" = 1 ]
	status_line memlock_server $? "limit 1024 KiB: one error at start naming \`ulimit -l\` and 0 of 8 sessions"
	grep 'ulimit -l' "$slog" | sed 's/^/#   memlock_server: /'
	"$BIN/rdmem-agent" -s "$RXE_DUMMY_IP" -p 7483 --tcp-port 7484 --fabric verbs --clients 1 \
		--slots 2 --shm-name /rxe-memlock-srv >/tmp/rxe-memlock-srv-agent.log 2>&1 &
	AGENT_PID=$!
	if wait_for_line /tmp/rxe-memlock-srv-agent.log 'ready:' 30; then
		$cli put ms hello >/dev/null 2>&1 && v=$($cli get ms 2>/dev/null) && [ "$v" = hello ]
		status_line memlock_server $? "AUTO put and get succeed"
		st=$($cli agent-stats --json 2>/dev/null)
		[ "$(json_top "$st" link_up)" = 0 ] && [ "$(json_path "$st" tcp ok)" -ge 2 ] 2>/dev/null
		status_line memlock_server $? "no RDMA link; the calls went over TCP (tcp ok $(json_path "$st" tcp ok))"
	else
		echo "not ok - memlock_server: agent did not start"
	fi
	grep -h 'error' "$slog" | tail -n +2 | head -3 | sed 's/^/#   memlock_server (server): /'
	kill "$AGENT_PID" "$spid" 2>/dev/null
	wait 2>/dev/null
}

# A session's lease is pinned whole: one larger than the VM's memory can
# never register, and trying stalled every connect (a 2.2 GiB lease in the
# 2 GiB VM). Refused at start, with the flags named. The lease here (~0.5
# TiB: 65,536 slabs with 8,192 objects of 64 MiB, 4,096 slots of 1 MiB
# requests and 1 MiB replies) is past any VM's RDMEM_RXE_MEM.
check_lease_fits() {
	local slog=/tmp/rxe-lease-fits.log rc
	timeout -k 5 60 "$BIN/rdmem-server" -b "$RXE_DUMMY_IP" -p 7485 --no-tcp --fabric verbs \
		--ring-slots 4096 --slot-bytes 1048576 --stage-bytes 1048576 --objpool-slabs 65536 \
		--max-value 64m >"$slog" 2>&1
	rc=$?
	[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q 'no session could ever register' "$slog" &&
		grep -q -- '--stage-bytes 1048576; objects [0-9]* MiB: --objpool-slabs 65536, --max-value 67108864' "$slog"
	status_line lease_fits $? "a lease past the VM's memory is refused at start (exit $rc)"
	grep 'pins' "$slog" | sed 's/^/#   lease_fits: /'
}

# The RDMA listener against a session flood over real verbs. A hog takes 8
# sessions from the agent's own address and never sends: 4 are refused by
# --max-sessions-per-addr, and each refusal makes sessions that never sent
# past --session-grace-ms reclaimable, so the hog's are reclaimed. The grace
# (5 s) outlasts the hog's eight dials even under TCG on a loaded host: with
# 500 ms a slow hog's later refusals reclaimed its first sessions and it got
# a fifth. An honest
# agent from that address (a NAT shared with the hog) gets an RDMA session;
# its calls work.
check_session_flood() {
	local port=7493 slog=/tmp/rxe-flood.server.log hlog=/tmp/rxe-flood.hog.log
	local alog=/tmp/rxe-flood.agent.log cli="$BIN/rdmem --shm-name /rxe-flood" spid hpid v n r
	timeout -k 5 "$T" "$BIN/rdmem-server" -b "$RXE_DUMMY_IP" -p "$port" --tcp-port $((port + 1)) \
		--fabric verbs --max-sessions 8 --max-sessions-per-addr 4 --session-grace-ms 5000 \
		--metrics-port $((port + 10)) >"$slog" 2>&1 &
	spid=$!
	if ! wait_for_line "$slog" 'listening tcp' 60; then
		echo "not ok - session_flood: rdmem-server did not start"
		sed 's/^/#   session_flood: | /' "$slog"
		kill "$spid" 2>/dev/null
		return
	fi
	timeout -k 5 "$T" "$BIN/tests/session_hog" verbs "$RXE_DUMMY_IP" "$port" 8 >"$hlog" 2>&1 &
	hpid=$!
	wait_for_line "$hlog" '^holding' 120
	grep -q '^holding 4 of 8 sessions' "$hlog"
	status_line session_flood $? "the hog holds $(grep -o '[0-9]* of 8' "$hlog") sessions (--max-sessions-per-addr 4)"
	sleep 6 # past --session-grace-ms: the hog's sessions never sent
	"$BIN/rdmem-agent" -s "$RXE_DUMMY_IP" -p "$port" --tcp-port $((port + 1)) --fabric verbs \
		--clients 1 --slots 2 --shm-name /rxe-flood >"$alog" 2>&1 &
	AGENT_PID=$!
	wait_for_line "$alog" 'rdma: session' 120
	status_line session_flood $? "an honest agent from the hog's address gets an RDMA session"
	$cli put flood hello >/dev/null 2>&1 && v=$($cli --path eager get flood 2>/dev/null) &&
		[ "$v" = hello ]
	status_line session_flood $? "its PUT and an EAGER GET succeed while the hog runs"
	n=$(server_metric $((port + 10)) rdmem_server_net_rdma_refused_addr_total)
	r=$(server_metric $((port + 10)) rdmem_server_net_rdma_reclaimed_total)
	# The hog's own refusals already make its older sessions reclaimable
	# (its dials take a while under TCG): how many by the agent's turn varies.
	[ "$n" -ge 4 ] 2>/dev/null && [ "$r" -ge 1 ] 2>/dev/null
	status_line session_flood $? "refused by address $n (>= 4), idle sessions reclaimed $r (>= 1)"
	kill "$AGENT_PID" "$hpid" "$spid" 2>/dev/null
	wait 2>/dev/null
}

# Programs a check left running would load the VM (and the next checks' timing).
leftovers() {
	local p f
	p=$(for f in /proc/[0-9]*/cmdline; do
		{ tr '\0' ' ' <"$f"; } 2>/dev/null | grep -E '^[^ ]*(rdmem-(server|agent)|tests/(test_|fabric_check))' |
			sed "s|^|${f//[^0-9]/} |"
	done)
	[ -z "$p" ] || { echo "not ok - $1: left processes running:"; sed 's/^/#   /' <<<"$p"; }
}

main() {
	local c t0 t_all=$SECONDS
	echo "# rxe suite in $(uname -r), devices: $(ls /sys/class/infiniband | tr '\n' ' ')"
	ibv_devinfo -d "$RXE_DUMMY_DEV" -v 2>/dev/null |
		grep -E 'max_qp_wr|max_sge:|max_cqe:|max_qp_rd_atom|max_qp_init_rd_atom|active_mtu' |
		tr -s ' \t' ' ' | sed "s/^/# $RXE_DUMMY_DEV:/"
	for c in ${*:-$CHECKS}; do
		t0=$SECONDS
		echo "# --- $c"
		"check_$c"
		echo "# $c took $((SECONDS - t0)) s"
		leftovers "$c"
	done
	echo "# rxe suite took $((SECONDS - t_all)) s in the VM"
}

main "$@"
