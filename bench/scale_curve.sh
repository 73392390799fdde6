#!/usr/bin/env bash
# scale_curve.sh - the scaling curve at equal configuration, one run: 1, 2, 4,
# ..., 64 sessions (tests/scale_bench: one process, a real link per session,
# GET at window 4, every reply byte-checked) against a fresh rdmem-server
# --fabric shm each point, with connection grouping on and off and every other
# flag equal. Side by side: QPS, p50/p99, and the bytes the server registered
# per session (its own STATS count, asked while every session is open).
# Then the registered bytes of one session with --shared-pool on and off, at
# the flags above and at the server's defaults: they are deterministic, and
# are what README's memory claims must match.
#
#   bench/scale_curve.sh [OUT] [SECONDS] [MAX_SESSIONS]   (defaults: bench-out/scale-curve 2 64)
#
# Timed figures from a shared 2-vCPU host are indicative only (client and
# server share the cores; shm has no NIC cache for grouping to spare). On shm
# grouping can only cost or save CPU locality: the NIC-side benefit needs a NIC.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/scale-curve}
secs=${2:-2}
max=${3:-64}
B=${RDMEM_BIN:-build}
mkdir -p "$out"
json="$out/curve.jsonl"
: >"$json"
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null || true' EXIT

# Equal in both designs: pool geometry, workers, group size, slice.
COMMON=(--fabric shm --ring-slots 64 --objpool-slabs 8 --max-sessions $((max + 16))
	--workers 1 --group-size 8 --slice-us 500)

start_server() { # LOG ARGS...: sets server and port
	local log=$1 i
	shift
	port=$((20000 + RANDOM % 20000))
	"$B/rdmem-server" -b 127.0.0.1 -p "$port" --tcp-port $((port + 1)) "$@" >"$log" 2>&1 &
	server=$!
	for i in $(seq 200); do grep -q "listening tcp" "$log" && return 0; sleep 0.05; done
	echo "scale_curve: rdmem-server did not start (see $log)" >&2
	exit 1
}

stop_server() {
	kill "$server"
	wait "$server" 2>/dev/null || true
	server=
}

point() { # DESIGN SESSIONS SECONDS SERVER_ARGS...
	local design=$1 n=$2 s=$3 line
	shift 3
	start_server "$out/server-$design-$n.log" "$@"
	if ! line=$(timeout 300 "$B/tests/scale_bench" --port "$port" --stats-port $((port + 1)) \
		-n "$n" --window 4 --seconds "$s" --server-pid "$server"); then
		echo "scale_curve: $design at $n sessions failed" >&2
		exit 1
	fi
	echo "{\"design\":\"$design\",${line#\{}" >>"$json"
	stop_server
}

n=1
while [ "$n" -le "$max" ]; do
	point grouped "$n" "$secs" "${COMMON[@]}" --group-threshold 1
	point ungrouped "$n" "$secs" "${COMMON[@]}" --group-threshold 1048576
	n=$((n * 2))
done
# Registered bytes only (1 s): the pool on and off, at COMMON and at defaults.
point pool-on-equal 1 1 "${COMMON[@]}" --shared-pool on
point pool-off-equal 1 1 "${COMMON[@]}" --shared-pool off
point pool-on-default 1 1 --fabric shm --shared-pool on
point pool-off-default 1 1 --fabric shm --shared-pool off

python3 - "$json" <<'PY' | tee "$out/curve.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["design"], r["sessions"]): r for r in rows}
ns = sorted({r["sessions"] for r in rows if r["design"] == "grouped"})
print("| sessions | grouped QPS | p50 µs | p99 µs | reg. B/session | yields "
      "| ungrouped QPS | p50 µs | p99 µs | reg. B/session |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for n in ns:
    g, u = by[("grouped", n)], by[("ungrouped", n)]
    print(f'| {n} | {g["qps"]:.0f} | {g["p50_us"]:.0f} | {g["p99_us"]:.0f} '
          f'| {g["registered_bytes_per_session"]} | {g["yields"]} '
          f'| {u["qps"]:.0f} | {u["p50_us"]:.0f} | {u["p99_us"]:.0f} '
          f'| {u["registered_bytes_per_session"]} |')
bad = [r for r in rows if r["wrong"] or r["errors"]]
print(f'\nwrong replies {sum(r["wrong"] for r in rows)}, errors {sum(r["errors"] for r in rows)}'
      + (" (FAILED)" if bad else ""))
print("\n| one session | registered B (server STATS) | reachable B (peer's regions) |")
print("|---|---:|---:|")
for d in ("pool-on-equal", "pool-off-equal", "pool-on-default", "pool-off-default"):
    r = by[(d, 1)]
    print(f'| {d} | {r["registered_bytes_per_session"]} | {r["reach_bytes_per_session"]} |')
on, off = by[("pool-on-equal", 1)], by[("pool-off-equal", 1)]
print(f'\n--shared-pool on/off at equal flags: {on["registered_bytes_per_session"]} / '
      f'{off["registered_bytes_per_session"]} B '
      f'({on["registered_bytes_per_session"] / off["registered_bytes_per_session"]:.3f}x)')
sys.exit(1 if bad else 0)
PY
