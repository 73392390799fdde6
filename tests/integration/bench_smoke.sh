#!/usr/bin/env bash
# bench_smoke.sh - part of `make test`: runs the benchmark harness
# (scripts/bench.sh --smoke: one round, a few hundred calls per run) and checks
# that it runs and that every value came back right. Timings are not checked.
# A system whose packages or programs are absent is skipped with the reason.
# Prints "ok - ..." / "not ok - ..." / "ok - ... # SKIP ..." lines.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=${RDMEM_BIN:-$root/build}
out=$(mktemp -d /tmp/rdmem-bench-smoke.XXXXXX)
trap 'rm -rf "$out"' EXIT
# Diagnostics: a file's last lines as comments, or nothing when it is absent
# (never a failure of this script: set -e must not end it before its checks).
show() { # FILE [LINES]
	{ sed 's/^/#   /' "$1" 2>/dev/null | tail -n "${2:-20}"; } || true
}

systems=(rdmem-shm rdmem-tcp grpc redis ucx-shm ucx-tcp frontdoor)
# Under a sanitizer only RDMemRPC's own systems run: the comparison systems'
# programs are not instrumented, so running them there tests nothing of
# ours, and they took most of this script's 104-146 s in each sanitizer
# suite. The plain suite runs them all.
comparisons=(grpc redis ucx-shm ucx-tcp)
if [ -n "${RDMEM_SANITIZER:-}" ]; then
	systems=(rdmem-shm rdmem-tcp frontdoor)
	for s in "${comparisons[@]}"; do
		echo "ok - bench smoke under a sanitizer: $s # SKIP a comparison system: not instrumented, so under $RDMEM_SANITIZER it checks nothing of ours (the plain suite runs it)"
	done
fi

# Runs per system in one smoke round: 5 op/size pairs x 2 windows
# (frontdoor: local-ping through the front door + the UDS echo).
expected_runs() { [ "$1" = frontdoor ] && echo 2 || echo 10; }

# The comparison programs build only with their packages; without them the
# systems are skipped (bench.sh says why).
tools_deps() {
	command -v protoc >/dev/null && command -v grpc_cpp_plugin >/dev/null &&
		pkg-config --exists grpc++ protobuf hiredis
}
if tools_deps; then
	if MAKEFLAGS= make -s -C "$root" bench-tools >"$out/build.log" 2>&1; then
		echo "ok - bench-tools build"
	else
		show "$out/build.log" 30
		echo "not ok - bench-tools build"
	fi
else
	echo "ok - bench-tools build # SKIP gRPC/hiredis dev packages absent (libgrpc++-dev protobuf-compiler-grpc libhiredis-dev)"
fi

# The UCX store builds with libucx-dev alone (bench-tools-ucx).
if pkg-config --exists ucx; then
	if MAKEFLAGS= make -s -C "$root" bench-tools-ucx >"$out/build-ucx.log" 2>&1; then
		echo "ok - bench-tools-ucx build"
	else
		show "$out/build-ucx.log" 30
		echo "not ok - bench-tools-ucx build"
	fi
else
	echo "ok - bench-tools-ucx build # SKIP libucx-dev absent"
fi

rc=0
scripts/bench.sh --smoke --systems "$(IFS=,; echo "${systems[*]}")" --bin "$bin" \
	--out "$out/res" >"$out/bench.log" 2>&1 || rc=$?
if [ "$rc" -eq 0 ]; then
	echo "ok - bench.sh --smoke exits 0"
else
	# The failed parts first (CI's summary keeps a few lines after a
	# "not ok"), then each one's own log, then bench.sh's.
	echo "not ok - bench.sh --smoke exits 0 (exit $rc)"
	{ sed 's/^/#   /' "$out/res/failed.txt" 2>/dev/null | head -n 20; } || true
	while read -r log; do # each log once: every failed run of a system names the same
		echo "#   --- $log"
		show "$log" 15
	done < <(grep -o '(log: [^)]*)' "$out/res/failed.txt" 2>/dev/null |
		sed 's/^(log: //; s/)$//' | awk '!seen[$0]++')
	{ grep -v '^bench: r1 ' "$out/bench.log" 2>/dev/null | sed 's/^/#   /' | tail -n 40; } || true
fi

ran=0
# Per system: skipped with its reason, or every run present, exit 0, no failures.
for s in "${systems[@]}"; do
	why=$(awk -F'\t' -v s="$s" '$1 == s { print $2; exit }' "$out/res/skipped.txt" 2>/dev/null || true)
	if [ -n "$why" ]; then
		# Only the comparison systems depend on optional packages; RDMemRPC's
		# own programs are built by `make` and must run.
		case "$s" in
		grpc | redis | ucx-*) echo "ok - bench smoke: $s # SKIP $why" ;;
		*) echo "not ok - bench smoke: $s: $why" ;;
		esac
		continue
	fi
	verdict=$(python3 - "$out/res/raw.jsonl" "$s" "$(expected_runs "$s")" <<'EOF'
import json, sys
path, system, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
names = {system} | ({"uds"} if system == "frontdoor" else set())
try:
    runs = [json.loads(l) for l in open(path) if l.strip()]
except OSError:
    runs = []
runs = [r for r in runs if r["bench_system"] in names]
bad = [r for r in runs if r["rc"] != 0 or r["record"].get("failures") != 0
       or r["record"].get("n") != r["req_n"]]
if len(runs) != want or bad:
    print("%d of %d runs recorded, %d bad" % (len(runs), want, len(bad)))
EOF
	)
	ran=$((ran + 1))
	if [ -z "$verdict" ]; then
		echo "ok - bench smoke: $s (every value verified)"
	else
		echo "not ok - bench smoke: $s: $verdict"
	fi
done

# The three ways in: libclient and Python always (RDMemRPC's own; Python
# not under a sanitizer, whose librdmem python3 cannot load), every row with
# figures (ways_in.sh fails on a wrong value or a row without them).
row() { grep -q "^| $1 .* | [0-9.]* | [0-9.]* | [0-9]* |\$" "$out/res/ways_in.md" 2>/dev/null; }
if [ "$rc" -eq 0 ] && row 'libclient (C, rdmem.h)' &&
	{ [ -n "${RDMEM_SANITIZER:-}" ] || row 'Python (import rdmem)'; } &&
	grep -q '^### Three ways in' "$out/res/results.md"; then
	echo "ok - bench smoke: three ways in ($(row 'Python (import rdmem)' && echo 'Python, ')libclient$(
		row 'Redis protocol (--resp-port)' && echo ', RESP')) in results.md"
else
	show "$out/res/ways_in.md"
	echo "not ok - bench smoke: three ways in (libclient, Python) in results.md"
fi

# The idle measurement (bench/idle.sh): a row with figures for every thread
# of the agent and the server, and the agent's RDMA operations counted.
idle_rows() { grep -cE "^\| (agent|server) \| rdmem-[a-z]+ \| [0-9.]+ \| [0-9.]+ \|\$" "$out/res/results.md" 2>/dev/null; }
if [ "$rc" -eq 0 ] && [ "$(idle_rows)" -ge 6 ] &&
	grep -qE '^RDMA operations the idle agent started in [0-9.]+ s: [0-9]+\.$' "$out/res/results.md"; then
	echo "ok - bench smoke: idle agent and server measured ($(idle_rows) threads)"
else
	show "$out/res/idle.md"
	echo "not ok - bench smoke: idle agent and server measured"
fi

# Many servers (bench/servers.sh): four rows of figures for one and three
# servers (it fails on a wrong value), and a fourth server that took some
# keys while none moved between the old three.
srv_rows() { grep -cE "^\| m?get \| [0-9]+ \| [0-9]+ \| [0-9.]+ \| [0-9.]+ \| [0-9]+ \| [0-9.]+ \| [0-9.]+ \|\$" "$out/res/results.md" 2>/dev/null; }
moved_ok() {
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (0 < d["moved"] < d["keys"] and d["old_servers_unchanged"]))' "$out/res/servers.json" 2>/dev/null
}
if [ "$rc" -eq 0 ] && [ "$(srv_rows)" -eq 4 ] && moved_ok; then
	echo "ok - bench smoke: one server against three, and the keys a fourth moves"
else
	show "$out/res/servers.md"
	echo "not ok - bench smoke: one server against three, and the keys a fourth moves"
fi

# The spin policy (bench/spin.sh): three loads, each with p50 / p99 figures
# for the defaults, a busy-polling server, and a busy-polling agent too; and
# the front door's round trip on one CPU beside the floor of two processes.
spin_rows() { grep -cE "^\| [0-9]+ us( \| [0-9.]+ / [0-9.]+){3} \|\$" "$out/res/results.md" 2>/dev/null; }
if [ "$rc" -eq 0 ] && [ "$(spin_rows)" -eq 3 ] &&
	grep -qE 'local-ping`\) [0-9.]+; .* \(`bench/yield_floor.c`, the floor\) [0-9.]+\.$' "$out/res/results.md"; then
	echo "ok - bench smoke: the spin policy measured at three loads, and the one-CPU floor"
else
	show "$out/res/spin.md"
	echo "not ok - bench smoke: the spin policy measured at three loads, and the one-CPU floor"
fi

# The hot-path audit (bench/hotpath.sh): no heap allocation per call in the
# client, the agent or the server once calls flow (window 8; fewer than one
# in 100 calls, so a periodic housekeeping allocation is not a failure), for
# GET, PUT (32 B values that replace values of their size) and MGET of 16
# keys. Its malloc-counting LD_PRELOAD shim cannot sit beside a sanitizer's
# allocator. (Each figure is a difference of two runs: a housekeeping
# allocation that lands in one of them may make it slightly negative;
# |figure| < 0.01.)
if [ -n "${RDMEM_SANITIZER:-}" ]; then
	echo "ok - bench smoke: hot path allocation count under a sanitizer # SKIP the counting shim cannot replace $RDMEM_SANITIZER's allocator"
else
	for op in get put mget; do
		hp_rc=0
		bench/hotpath.sh "$bin" 8 2000 "$op" >"$out/hotpath-$op.md" 2>&1 || hp_rc=$?
		what="hot path allocates nothing per ${op^^} (client, agent, server at window 8)"
		if [ "$hp_rc" = 2 ]; then
			echo "ok - bench smoke: $what # SKIP $(tail -1 "$out/hotpath-$op.md")"
		elif [ "$hp_rc" = 0 ] && [ "$(awk -F'|' '$2 == " 8 " && $3 ~ /^ (client|agent|server) $/ {
				v = $4 + 0; if (v < 0) v = -v; if (v < 0.01) n++ } END { print n + 0 }' \
			"$out/hotpath-$op.md")" = 3 ]; then
			echo "ok - bench smoke: $what"
		else
			show "$out/hotpath-$op.md" 12
			echo "not ok - bench smoke: $what"
		fi
	done
fi

for f in results.md summary.json raw.jsonl; do
	if [ "$ran" -eq 0 ]; then
		echo "ok - bench smoke writes $f # SKIP no system could run"
	elif [ -s "$out/res/$f" ]; then
		echo "ok - bench smoke writes $f"
	else
		echo "not ok - bench smoke writes $f"
	fi
done

# UCX's ping-pong (bench/ucx_ping.py) runs only in the placement check, which
# --smoke leaves out: run it here once, peer and client on CPUs of their own.
if [ -n "${RDMEM_SANITIZER:-}" ]; then
	echo "ok - bench smoke under a sanitizer: ucx ping-pong # SKIP a comparison system: not run under $RDMEM_SANITIZER"
elif ! command -v ucx_perftest >/dev/null; then
	echo "ok - bench smoke: ucx ping-pong # SKIP no ucx_perftest (apt-get install ucx-utils)"
elif [ "$(nproc)" -lt 2 ]; then
	echo "ok - bench smoke: ucx ping-pong # SKIP one CPU: UCX busy-polls and needs two"
else
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	rec=$(taskset -c 0 bench/ucx_ping.py --peer-cpu 1 --port "$port" -n 300 --timeout 60 2>"$out/ucx.log" || true)
	if python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(not (r["n"] == 300 and r["p50_us"] > 0 and r["p99_us"] is None))' "$rec" 2>/dev/null; then
		echo "ok - bench smoke: ucx ping-pong record ($rec)"
	else
		show "$out/ucx.log" 20
		echo "not ok - bench smoke: ucx ping-pong record: ${rec:-none}"
	fi
fi
