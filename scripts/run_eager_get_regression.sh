#!/usr/bin/env bash
# run_eager_get_regression.sh - forced EAGER GET over a sweep of value sizes
# up to the reply-slot limit and just past it. Every size must finish with
# failed=0 and wrong=0 (values are compared byte for byte by `rdmem bench`);
# a value that fits the EAGER reply slot must come back EAGER, one that does
# not must come back LAZY (the server turns it), so the sweep shows where.
#
#   scripts/run_eager_get_regression.sh [-n N] [--window W] [--resp-bytes B]
#                                       [--use-agent SHM] [--out DIR] [--tap]
#     -n N            GETs per size (default 2000)
#     --window W      calls in flight (default 8)
#     --resp-bytes B  the agent's --resp-bytes, the EAGER reply slot (default 16k)
#     --use-agent SHM an agent you run (its --shm-name); default: start a server
#                     and agent on this host over the shm fabric
#     --out DIR       results (default logs/eager_get_<host>_<time>): sweep.jsonl,
#                     report.md, report.json
#     --tap           "ok - "/"not ok - " lines instead of the Markdown table
# Exit status: 0 every size passed, 1 a size failed, 2 usage.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}
n=2000 window=8 resp=16k use_agent= out= tap=0
while [ $# -gt 0 ]; do
	case $1 in
	-n) n=${2:?}; shift 2 ;;
	--window) window=${2:?}; shift 2 ;;
	--resp-bytes) resp=${2:?}; shift 2 ;;
	--use-agent) use_agent=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--tap) tap=1; shift ;;
	*) usage ;;
	esac
done
[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] || usage
[[ $window =~ ^[0-9]+$ ]] && [ "$window" -ge 1 ] && [ "$window" -le 64 ] || usage
case $resp in
*k) rb=$((${resp%k} * 1024)) ;;
*) rb=$resp ;;
esac
[[ $rb =~ ^[0-9]+$ ]] && [ "$rb" -ge 64 ] || usage

export RDMEM_BIN=${RDMEM_BIN:-build}
# shellcheck source=scripts/local-stack.sh
. scripts/local-stack.sh
out=${out:-logs/eager_get_$(hostname -s)_$(date +%Y%m%d_%H%M%S)}
mkdir -p "$out"
trap ls_stop EXIT
shm=$use_agent
if [ -z "$shm" ]; then
	shm=/rdmem-eager-$$
	ls_start_server "$out"
	ls_start_agent "$out" "$shm" --clients 2 --slots "$((window > 16 ? window : 16))" \
		--resp-bytes "$rb"
fi

# Sizes: small ones, then the bytes around the slot limit, then past it.
sizes=(1 16 64 256 1024 2048 4096 8192 12288 $((rb - 64)) $((rb - 1)) "$rb" $((rb + 1))
	$((rb + rb / 2)) $((rb * 2)))
: >"$out/sweep.jsonl"
for s in "${sizes[@]}"; do
	[ "$s" -ge 1 ] || continue
	set +e
	line=$("$RDMEM_BIN/rdmem" --shm-name "$shm" --path eager bench --op get --size "$s" \
		-n "$n" --window "$window" --keys 16 --json 2>"$out/bench.err")
	rc=$?
	set -e
	[ -n "$line" ] || line="{\"size\":$s,\"ops\":0,\"failures\":$n,\"wrong\":0,\"paths\":{},\"error\":\"exit $rc: $(head -c 200 "$out/bench.err" | tr -d '"\\\n')\"}"
	echo "$line" >>"$out/sweep.jsonl"
done

python3 - "$out" "$rb" "$n" "$tap" <<'EOF'
import json, sys
out, limit, n, tap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
rows, bad = [], 0
for line in open(f"{out}/sweep.jsonl"):
    r = json.loads(line)
    size, paths = r["size"], r.get("paths", {})
    want = "eager" if size <= limit else "lazy"
    problems = []
    if r.get("ops") != n:
        problems.append(f"{r.get('ops')} of {n} ops ran")
    if r.get("failures") or r.get("timeouts"):
        problems.append(f"failed={r.get('failures')} timeouts={r.get('timeouts')}")
    if r.get("wrong"):
        problems.append(f"wrong={r['wrong']}")
    if paths.get(want) != n:
        problems.append(f"paths {paths}, expected all {want}")
    if r.get("error"):
        problems.append(r["error"])
    r["expected_path"], r["ok"], r["problems"] = want, not problems, problems
    bad += bool(problems)
    rows.append(r)
eager = [r["size"] for r in rows if r.get("paths", {}).get("eager") == n]
doc = {"reply_slot_bytes": limit, "gets_per_size": n, "largest_eager": max(eager) if eager else 0,
       "failed_sizes": bad, "ok": bad == 0, "sweep": rows}
json.dump(doc, open(f"{out}/report.json", "w"), indent=2)
md = ["# Forced EAGER GET regression", "",
      f"Reply slot {limit} B; {n} GETs per size; largest value carried EAGER: {doc['largest_eager']} B.", "",
      "| value B | expected | paths | failed | wrong | QPS | p50 µs | p99 µs | result |",
      "|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    p = ", ".join(f"{k} {v}" for k, v in r.get("paths", {}).items()) or "-"
    md.append(f"| {r['size']} | {r['expected_path']} | {p} | {r.get('failures', '-')} | {r.get('wrong', '-')} | "
              f"{r.get('qps', 0):,.0f} | {r.get('p50_us', 0):.1f} | {r.get('p99_us', 0):.1f} | "
              f"{'PASS' if r['ok'] else 'FAIL: ' + '; '.join(r['problems'])} |")
open(f"{out}/report.md", "w").write("\n".join(md) + "\n")
if tap:
    for r in rows:
        what = f"eager get {r['size']} B: failed=0, wrong=0, {r['expected_path']}"
        print(f"ok - {what}" if r["ok"] else f"not ok - {what} ({'; '.join(r['problems'])})")
else:
    print("\n".join(md))
sys.exit(1 if bad else 0)
EOF
