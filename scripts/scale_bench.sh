#!/usr/bin/env bash
# scale_bench.sh - hundreds of sessions on one rdmem-server (issue: ScaleRPC).
# For 1, 8, 32, 128 and 512 concurrent sessions, each running GET at window 4
# (tests/tools/scale_bench: one process, one real link per session), in one
# run, two server designs side by side:
#   pooled   --shared-pool on, leases of 64 slots + 8 slabs, grouping above 64
#   private  --shared-pool off, full per-session regions of the server's
#            defaults (256 slots, 256 slabs), no grouping: the classic RC design
# Prints a Markdown table, writes JSON and a PNG chart (gnuplot) to OUT.
#   scripts/scale_bench.sh [OUT] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/scale}
secs=${2:-3}
B=${RDMEM_BIN:-build}
mkdir -p "$out"
json="$out/scale.jsonl"
: >"$json"
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null || true' EXIT

run_design() { # name, server options...
	local name=$1
	shift
	for n in 1 8 32 128 512; do
		local port=$((20000 + RANDOM % 20000))
		"$B/rdmem-server" -b 127.0.0.1 -p "$port" --fabric shm --no-tcp --max-sessions 600 \
			"$@" >"$out/server-$name-$n.log" 2>&1 &
		server=$!
		for _ in $(seq 100); do grep -q "listening shm" "$out/server-$name-$n.log" && break; sleep 0.05; done
		if line=$(timeout 300 "$B/tests/scale_bench" --port "$port" -n "$n" --window 4 \
			--seconds "$secs" --server-pid "$server"); then
			echo "{\"design\":\"$name\",${line#\{}" >>"$json"
		else
			echo "scale_bench: $name at $n sessions failed" >&2
			exit 1
		fi
		kill "$server"
		wait "$server" 2>/dev/null || true
		server=
	done
}

run_design pooled --shared-pool on --ring-slots 64 --objpool-slabs 8 --group-threshold 64
run_design private --shared-pool off --group-threshold 1000000

python3 - "$json" "$out" <<'PY' | tee "$out/scale.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
best = max(r["qps"] for r in rows if r["design"] == "pooled")
print("| design | sessions | QPS | p50 µs | p99 µs | server RSS MiB | reachable MiB / session |")
print("|---|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f'| {r["design"]} | {r["sessions"]} | {r["qps"]:.0f} | {r["p50_us"]:.0f} | {r["p99_us"]:.0f} '
          f'| {r["server_rss_kb"]/1024:.1f} | {r["reach_bytes_per_session"]/2**20:.1f} |')
p512 = [r for r in rows if r["sessions"] == 512]
pooled = next(r for r in p512 if r["design"] == "pooled")
private = next(r for r in p512 if r["design"] == "private")
print(f'\npooled at 512 sessions: {100*pooled["qps"]/best:.0f} % of its best QPS; registered '
      f'bytes per session {pooled["reach_bytes_per_session"]/private["reach_bytes_per_session"]:.3f} '
      f'of the per-session design\'s')
with open(sys.argv[2] + "/scale.dat", "w") as f:
    for d in ("pooled", "private"):
        for r in rows:
            if r["design"] == d:
                f.write(f'{r["sessions"]} {r["qps"]:.0f} {r["reach_bytes_per_session"]/2**20:.2f}\n')
        f.write("\n\n")
PY
if command -v gnuplot >/dev/null; then
	gnuplot <<EOF2
set terminal png size 900,420
set output "$out/scale.png"
set multiplot layout 1,2
set logscale x 2
set xlabel "sessions"
set ylabel "aggregate GET QPS (window 4)"
set key bottom left
set yrange [0:*]
plot "$out/scale.dat" index 0 using 1:2 with linespoints title "pooled + grouping", \
     "" index 1 using 1:2 with linespoints title "per-session regions"
set ylabel "MiB registered per session"
set logscale y 2
set yrange [*:*]
set key center right
plot "$out/scale.dat" index 0 using 1:3 with linespoints title "pooled (lease)", \
     "" index 1 using 1:3 with linespoints title "per-session regions"
unset multiplot
EOF2
	echo "chart: $out/scale.png"
fi
