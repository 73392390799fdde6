#!/usr/bin/env bash
# door_memory.sh - the front door of two trees side by side, in one run,
# alternating (issue 13's before/after): an idle agent's memory with the
# default geometry (its RSS plus the shared memory that came with it:
# /proc/meminfo Shmem, where memfd pages are counted), the same with 8
# clients attached that each made 16 echo calls of 4 KiB, then the same
# with one client that moved 1 MiB values; the attach + detach time; the
# front-door round trip alone (rdmem bench --op local-ping, window 1).
# Each tree runs a real rdmem-server and rdmem-agent over the shm fabric.
#   bench/door_memory.sh BEFORE_BIN AFTER_BIN [ROUNDS]
# A measurement, not a test: Shmem is machine-wide, so run it on a quiet host.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
before=$1 after=$2 rounds=${3:-3}
work=$(mktemp -d)
. "$here/scripts/local-stack.sh"
trap 'ls_stop; rm -rf "$work"' EXIT

kb() { awk -v k="$1" '$1 == k":" {print $2}' "${2:-/proc/meminfo}"; }
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# door_hold linked against each tree's own librdmem.a.
for b in "$before" "$after"; do
	cc -O2 -I"$here/libclient" -I"$here/include" -I"$here" "$here/bench/door_hold.c" \
		"$b/lib/librdmem.a" -lpthread -o "$work/door_hold.$(basename "$(dirname "$b")")-$(basename "$b")"
done

one() { # one LABEL BIN: prints a result line
	local label=$1 bin=$2 shm=/rdmem-mem-$$ hold sh0 idle held big att lp
	hold="$work/door_hold.$(basename "$(dirname "$bin")")-$(basename "$bin")"
	LS_BIN=$bin
	sh0=$(kb Shmem)
	ls_start_server "$work" >/dev/null
	ls_start_agent "$work" "$shm" >/dev/null
	sleep 1
	idle=$(($(rss "$LS_AGENT_PID") + $(kb Shmem) - sh0))
	coproc HOLD { "$hold" "$shm" 8 16 4096; }
	read -r _ <&"${HOLD[0]}"
	held=$(($(rss "$LS_AGENT_PID") + $(kb Shmem) - sh0))
	exec {HOLD[1]}>&-
	wait "$HOLD_PID" || true
	coproc HOLD { "$hold" "$shm" 1 16 1048576; }
	read -r _ <&"${HOLD[0]}"
	big=$(($(rss "$LS_AGENT_PID") + $(kb Shmem) - sh0))
	exec {HOLD[1]}>&-
	wait "$HOLD_PID" || true
	att=$("$hold" "$shm" --attach-loop 200 | awk '{print $2}')
	lp=$("$bin/rdmem" --shm-name "$shm" bench --op local-ping -n 20000 --window 1 |
		awk '/latency/ {print $6}')
	ls_stop
	printf '%-7s idle %7.1f MiB | 8 clients x 16 x 4 KiB %7.1f MiB | + 1 MiB values %7.1f MiB | attach+detach p50 %5s us | local-ping p50 %s us\n' \
		"$label" "$(echo "$idle/1024" | bc -l)" "$(echo "$held/1024" | bc -l)" \
		"$(echo "$big/1024" | bc -l)" "$att" "$lp"
}

echo "# agent defaults (32 clients x 16 slots, 1 MiB max value); memory = agent RSS + Shmem growth"
for ((r = 1; r <= rounds; r++)); do
	one before "$before"
	one after "$after"
done
