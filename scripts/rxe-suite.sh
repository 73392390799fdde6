#!/usr/bin/env bash
# rxe-suite.sh - the checks that scripts/test-rxe.sh runs inside one boot of the
# Soft-RoCE VM (scripts/rxe-vm.sh -m both). Not meant for the host: it needs
# the VM's rxe devices and environment (RXE_DUMMY_IP, RXE_VETH_*).
#
# Each check is a function check_NAME listed in CHECKS, run in order. A check
# prints "ok - NAME: ..." / "not ok - NAME: ..." lines (the programs' own case
# lines, prefixed) and '#' comments for everything else; test-rxe.sh counts
# them. To add the integration suite over --fabric verbs, write check_* functions
# that start rdmem-server / rdmem-agent from $BIN and append them to CHECKS.
#
# Env: RDMEM_RXE_PROG_TIMEOUT (seconds per program, default 240).
set -u
BIN=$(cd "$(dirname "$0")/.." && pwd) # the staged build directory (/extra)
T=${RDMEM_RXE_PROG_TIMEOUT:-240}
FC=$BIN/tests/fabric_check
CHECKS="dummy veth broken_detail"

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

main() {
	local c t0
	echo "# rxe suite in $(uname -r), devices: $(ls /sys/class/infiniband | tr '\n' ' ')"
	for c in $CHECKS; do
		t0=$SECONDS
		echo "# --- $c"
		"check_$c"
		echo "# $c took $((SECONDS - t0)) s"
	done
}

main
