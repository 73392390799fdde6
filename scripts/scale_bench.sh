#!/usr/bin/env bash
# scale_bench.sh - the scaling curve of issue 14 (ScaleRPC), at equal
# configuration: 1, 4, 16, 64, 256 and 1024 sessions on one rdmem-server
# (--fabric shm), each session running GET at window 4
# (tests/tools/scale_bench: one process, one real link per session, every
# reply byte-checked), two designs side by side, every other flag equal:
#   pooled   --shared-pool on  --group-threshold 64: leases of one pool,
#            connection grouping above 64 sessions per worker (the default)
#   classic  --shared-pool off --group-threshold 1048576: private regions
#            per session, no grouping
# Both run --ring-slots 16 --objpool-slabs 2 --max-sessions 1040 (small
# leases, so 1024 sessions fit in memory twice over; the registered bytes
# scale with these flags, the ratios between the designs do not).
# Columns: QPS, p50/p99, server RSS, and what the server says its sessions
# hold (STATS resources.*): registered bytes, registrations (MRs), QPs, CQs
# and receive WQEs posted. Memory windows: none yet (the virtualized mapping
# is not built). Then fairness at the largest count: one quiet session
# (window 1, on a thread of its own, as a client elsewhere would be) among
# flooders (window 16, the whole ring), its p99 against 3 slices
# (--slice-us 500), with the server's quiet lane and without it. Then a
# partial load at the largest count: an eighth of the sessions busy, the
# rest idle, both designs. Then the issue's targets, met or not.
# Prints Markdown; writes OUT/scale.jsonl, OUT/scale.md and, with gnuplot,
# OUT/scale.png. Timed figures from a shared 2-vCPU host are indicative only.
#   scripts/scale_bench.sh [OUT] [SECONDS] [SESSION_COUNTS]
#   (defaults: bench-out/scale 3 "1 4 16 64 256 1024")
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/scale}
secs=${2:-3}
counts=${3:-"1 4 16 64 256 1024"}
B=${RDMEM_BIN:-build}
mkdir -p "$out"
json="$out/scale.jsonl"
: >"$json"
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null || true' EXIT

COMMON=(--fabric shm --ring-slots 16 --objpool-slabs 2 --max-sessions 1040)

SB_LOAD=(--window 4) # scale_bench's load at each point

point() { # DESIGN SESSIONS server options...
	local name=$1 n=$2 port line i
	shift 2
	port=$((20000 + RANDOM % 20000))
	"$B/rdmem-server" -b 127.0.0.1 -p "$port" --tcp-port $((port + 1)) "${COMMON[@]}" "$@" \
		>"$out/server-$name-$n.log" 2>&1 &
	server=$!
	for i in $(seq 200); do grep -q "listening tcp" "$out/server-$name-$n.log" && break; sleep 0.05; done
	grep -q "listening tcp" "$out/server-$name-$n.log" || {
		echo "scale_bench: rdmem-server ($name) did not start (see $out/server-$name-$n.log)" >&2
		exit 1
	}
	if line=$(timeout 300 "$B/tests/scale_bench" --port "$port" --stats-port $((port + 1)) \
		-n "$n" "${SB_LOAD[@]}" --seconds "$secs" --server-pid "$server"); then
		echo "{\"design\":\"$name\",${line#\{}" >>"$json"
	else
		echo "scale_bench: $name at $n sessions failed (see $out/server-$name-$n.log)" >&2
		exit 1
	fi
	kill "$server"
	wait "$server" 2>/dev/null || true
	server=
}

# The designs take turns at each count: a machine that drifts during the
# run moves both, not one.
for n in $counts; do
	point pooled "$n" --shared-pool on --group-threshold 64
	point classic "$n" --shared-pool off --group-threshold 1048576
done
# Fairness: session 0 at window 1, every other at window 16; each design
# with the quiet lane (the default --quiet-lane 8) and without (0).
most=$(printf '%s\n' $counts | sort -n | tail -1)
if [ "$most" -ge 2 ]; then
	SB_LOAD=(--window 16 --flood 1)
	point pooled-quiet "$most" --shared-pool on --group-threshold 64
	point pooled-nolane-quiet "$most" --shared-pool on --group-threshold 64 --quiet-lane 0
	point classic-quiet "$most" --shared-pool off --group-threshold 1048576
	point classic-nolane-quiet "$most" --shared-pool off --group-threshold 1048576 \
		--quiet-lane 0
fi
# Partial load: an eighth of the sessions busy (window 4), the rest open and
# idle: groups are made of busy sessions, so the idle must cost nothing.
if [ "$most" -ge 8 ]; then
	SB_LOAD=(--window 4 --busy $((most / 8)))
	point pooled-partial "$most" --shared-pool on --group-threshold 64
	point classic-partial "$most" --shared-pool off --group-threshold 1048576
fi

python3 - "$json" "$out" "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" <<'PY' | tee "$out/scale.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
quiet = [r for r in rows if r["design"].endswith("-quiet")]
partial = [r for r in rows if r["design"].endswith("-partial")]
rows = [r for r in rows if not r["design"].endswith(("-quiet", "-partial"))]
rows.sort(key=lambda r: (r["design"] != "pooled", r["sessions"]))
out, rev = sys.argv[2], sys.argv[3]
for r in rows + quiet + partial:
    if r["wrong"] or r["errors"]:
        sys.exit("scale_bench: %s at %d sessions: %d wrong, %d errors"
                 % (r["design"], r["sessions"], r["wrong"], r["errors"]))
    # -1: the server's STATS could not be asked; no figure is made of that.
    for k in ("registered_bytes", "mrs", "qps_held", "cqs", "recv_wqes"):
        if r[k] < 0:
            sys.exit("scale_bench: %s at %d sessions: no %s from the server's STATS"
                     % (r["design"], r["sessions"], k))
print("GET 32 B at window 4 per session, shm fabric, git %s; every reply checked." % rev)
print()
print("| design | sessions | QPS | p50 µs | p99 µs | server RSS MiB | registered MiB | MRs | QPs | CQs | receive WQEs |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f'| {r["design"]} | {r["sessions"]} | {r["qps"]:.0f} | {r["p50_us"]:.0f} | {r["p99_us"]:.0f} '
          f'| {r["server_rss_kb"]/1024:.1f} | {r["registered_bytes"]/2**20:.1f} | {r["mrs"]} '
          f'| {r["qps_held"]} | {r["cqs"]} | {r["recv_wqes"]} |')
print()
by = {(r["design"], r["sessions"]): r for r in rows}
ns = sorted({r["sessions"] for r in rows})
lo, hi = (64, 1024) if 64 in ns and 1024 in ns else (ns[0], ns[-1])
for d in ("pooled", "classic"):
    a, b = by.get((d, lo)), by.get((d, hi))
    if not a or not b:
        continue
    grow = b["registered_bytes"] / a["registered_bytes"]
    peak = max(r["qps"] for r in rows if r["design"] == d)
    print(f'- {d}: registered bytes at {hi} sessions are {grow:.1f}x those at {lo} '
          f'(target <= 1.1x: {"met" if grow <= 1.1 else "not met"}); QPS at {hi} sessions is '
          f'{100 * b["qps"] / peak:.0f} % of its peak (target >= 80 %: '
          f'{"met" if b["qps"] >= 0.8 * peak else "not met"})')
for r in quiet:
    if r["first_ops"] <= 0:
        sys.exit("scale_bench: %s: the quiet session completed no GET" % r["design"])
    limit = 3 * 500
    print(f'- {r["design"][:-6]}, fairness: one session at window 1 among {r["sessions"] - 1} '
          f'at window 16: its p99 {r["first_p99_us"]:.0f} µs ({r["first_ops"]} GETs; the '
          f'flooders\' p99 {r["others_p99_us"]:.0f} µs, {r["qps"]:.0f} QPS in all); '
          f'target <= 3 slices ({limit} µs): {"met" if r["first_p99_us"] <= limit else "not met"}')
for r in partial:
    print(f'- {r["design"][:-8]}, partial load: {r["busy"]} of {r["sessions"]} sessions busy '
          f'(window 4), the rest idle: {r["qps"]:.0f} QPS, p50 {r["p50_us"]:.0f} µs, '
          f'p99 {r["p99_us"]:.0f} µs')
with open(out + "/scale.dat", "w") as f:
    for d in ("pooled", "classic"):
        for r in rows:
            if r["design"] == d:
                f.write(f'{r["sessions"]} {r["qps"]:.0f} {r["registered_bytes"]/2**20:.2f}\n')
        f.write("\n\n")
PY
if command -v gnuplot >/dev/null; then
	gnuplot <<EOF2
set terminal png size 900,420
set output "$out/scale.png"
set multiplot layout 1,2
set logscale x 2
set xlabel "sessions"
set ylabel "aggregate GET QPS (window 4 each)"
set key bottom left
set yrange [0:*]
plot "$out/scale.dat" index 0 using 1:2 with linespoints title "pooled + grouping", \
     "" index 1 using 1:2 with linespoints title "classic (private regions)"
set ylabel "MiB registered by the server"
set logscale y 2
set yrange [*:*]
set key top left
plot "$out/scale.dat" index 0 using 1:3 with linespoints title "pooled + grouping", \
     "" index 1 using 1:3 with linespoints title "classic (private regions)"
unset multiplot
EOF2
	echo "chart: $out/scale.png"
fi
