#!/usr/bin/env bash
# hotpath.sh - what the steady-state call path costs in heap allocations and
# system calls, per call, in the client, the agent and the server (issue:
# "no allocation, no syscall and no lock on the steady-state path at window
# >= 8; one wake-up per batch at most").
#
#   bench/hotpath.sh [BIN_DIR] [WINDOWS] [N] [OP]
#   (defaults: build, "1 8 32", 20000, get; OP: get, put or mget, 32 B values,
#   an MGET asks for 16 keys)
#
# One rdmem-server and one rdmem-agent (shm fabric), both under
# bench/alloc_count.so (LD_PRELOAD: counts malloc & co.) and `strace -c -f`
# attached. For each window, `rdmem bench --op get --size 32` runs twice,
# with N and 2N calls. Allocations per call are the difference of the two
# runs divided by N: attach, detach and start-up cancel, and what is left is
# exactly what N more calls cost. System calls per call are the 2N run's
# count divided by 2N (an upper bound: its attach and detach, ~100 calls,
# are in it): the spin loops' sched_yield counts vary too much from run to
# run for a difference to mean anything. strace slows every system call,
# so a traced process spins (and yields) more than an untraced one. Prints
# a table; writes nothing else. Needs strace and a C compiler (the shim is
# built into BIN_DIR/bench/).
set -euo pipefail
cd "$(dirname "$0")/.."
export RDMEM_BIN=${1:-${RDMEM_BIN:-build}}
windows=${2:-"1 8 32"}
n=${3:-20000}
op=${4:-get}
case $op in get | put | mget) ;; *)
	echo "hotpath: OP must be get, put or mget" >&2
	exit 2
	;;
esac
command -v strace >/dev/null || {
	echo "hotpath: strace is not installed (apt-get install strace)" >&2
	exit 2
}
strace -o /dev/null true 2>/dev/null || {
	echo "hotpath: strace cannot trace here (ptrace refused)" >&2
	exit 2
}
mkdir -p "$RDMEM_BIN/bench"
shim=$RDMEM_BIN/bench/alloc_count.so
cc -std=c11 -O2 -Wall -Wextra -shared -fPIC bench/alloc_count.c -ldl -pthread -o "$shim"
shim=$(realpath "$shim")
# shellcheck source=scripts/local-stack.sh
. scripts/local-stack.sh
work=$(mktemp -d /tmp/rdmem-hotpath.XXXXXX)
tracers=()
cleanup() {
	local p
	for p in "${tracers[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	ls_stop
	rm -rf "$work"
}
trap cleanup EXIT
export ALLOC_COUNT_FILE=$work/allocs
shm="/rdmem-hotpath-$$"
LD_PRELOAD=$shim ls_start_server "$work"
LD_PRELOAD=$shim ls_start_agent "$work" "$shm" --clients 4 --slots 32

# The running count of process PID; no file is an error, not a zero.
allocs() {
	local v
	v=$(cat "$ALLOC_COUNT_FILE.$1") && [[ $v =~ ^[0-9]+$ ]] || {
		echo "hotpath: no allocation count for pid $1" >&2
		return 1
	}
	echo "$v"
}

# Total syscalls strace counted so far for one traced process: strace -c
# prints only at detach, so each measurement attaches and detaches.
trace_start() { # PID OUT
	strace -c -f -q -p "$1" -o "$2" 2>/dev/null &
	tracers+=($!)
}
trace_stop() {
	local p
	for p in "${tracers[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${tracers[@]}"; do wait "$p" 2>/dev/null || true; done
	tracers=()
}
# run W CALLS TAG: one client run, everything traced; leaves TAG.{cli,agt,srv}.
run() {
	local w=$1 calls=$2 tag=$3 a0 s0
	sleep 0.5 # the counts settle (written every 200 ms) before the baseline
	a0=$(allocs "$LS_AGENT_PID")
	s0=$(allocs "$LS_SERVER_PID")
	trace_start "$LS_AGENT_PID" "$work/$tag.agt"
	trace_start "$LS_SERVER_PID" "$work/$tag.srv"
	sleep 0.3 # strace attached to every thread
	# The shim goes into the client only (strace -E), not into strace.
	strace -E LD_PRELOAD="$shim" -E ALLOC_COUNT_FILE="$work/$tag.cli-allocs" -c -f -q \
		-o "$work/$tag.cli" "$RDMEM_BIN/rdmem" --shm-name "$shm" \
		bench --op "$op" --size 32 --window "$w" -n "$calls" >"$work/$tag.out"
	sleep 0.5 # the last counts written (every 200 ms)
	trace_stop
	# NAME.<pid>; not NAME.<pid>.tmp, which the shim's reporter thread may
	# leave when exit cuts it off between its open and its rename.
	local files=() f c a s
	for f in "$work/$tag.cli-allocs".*; do
		[[ $f =~ \.[0-9]+$ ]] && files+=("$f")
	done
	[ ${#files[@]} -eq 1 ] && [ -f "${files[0]}" ] || {
		echo "hotpath: expected one client count file, found: ${files[*]}" >&2
		return 1
	}
	c=$(cat "${files[0]}")
	a=$(allocs "$LS_AGENT_PID")
	s=$(allocs "$LS_SERVER_PID")
	echo "$c $((a - a0)) $((s - s0))" >"$work/$tag.allocs"
	rm -f "$work/$tag.cli-allocs".*
}

# syscalls PROC: "syscalls/call|top syscalls" of the 2N run.
syscalls() {
	local p=$1
	python3 - "$work" "$p" "$n" <<'EOF'
import os, sys
work, p, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def parse(tag):
    c = {}
    for line in open(os.path.join(work, "%s.%s" % (tag, p))):
        t = line.split()
        if len(t) >= 5 and t[-1] not in ("syscall", "total") and t[3].isdigit():
            c[t[-1]] = int(t[3])
    return c
d, calls = parse("b"), 2 * n
top = sorted(((v, k) for k, v in d.items() if v > 0), reverse=True)[:4]
print("%.3f|%s" % (sum(d.values()) / calls,
                   ", ".join("%s %.3f" % (k, v / calls) for v, k in top) or "none"))
EOF
}

printf '%s\n' "${op^^} 32 B, shm fabric; allocations: difference of runs of $n and $((2 * n)) calls, per call;" \
	"system calls: the $((2 * n))-call run's, per call (attach included)"
printf '| window | process | allocations/call | syscalls/call | most frequent (per call) |\n'
printf '|---:|---|---:|---:|---|\n'
for w in $windows; do
	# A warm-up run first: the agent's lazily made resources exist before we count.
	"$RDMEM_BIN/rdmem" --shm-name "$shm" bench --op "$op" --size 32 --window "$w" -n 2000 >/dev/null
	run "$w" "$n" a
	run "$w" "$((2 * n))" b
	read -r ac aa as <"$work/a.allocs"
	read -r bc ba bs <"$work/b.allocs"
	for v in "$ac" "$aa" "$as" "$bc" "$ba" "$bs"; do
		[[ $v =~ ^-?[0-9]+$ ]] || {
			echo "hotpath: bad allocation counts: $(cat "$work/a.allocs" "$work/b.allocs")" >&2
			exit 1
		}
	done
	for proc in cli agt srv; do
		case $proc in
		cli) name=client d=$((bc - ac)) ;;
		agt) name=agent d=$((ba - aa)) ;;
		srv) name=server d=$((bs - as)) ;;
		esac
		al=$(python3 -c "print('%.3f' % ($d / $n))")
		sys=$(syscalls $proc)
		IFS='|' read -r sc top <<<"$sys"
		printf '| %s | %s | %s | %s | %s |\n' "$w" "$name" "$al" "$sc" "$top"
	done
done
