#!/usr/bin/env bash
# ops_scripts.sh - the operator tooling against real local servers (shm
# fabric, free ports): scripts/run_basic_tests.sh on shm and tcp (and that
# a failing check fails it), scripts/run_benchmarks.sh with a small N and
# matrix, cleanup of both on exit and on SIGTERM, every `rdmem lifecycle`
# verb, the too-big messages naming limits and flags, and image-put's
# progress only on a terminal. One "ok - " / "not ok - " line per case.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
export RDMEM_BIN=${RDMEM_BIN:-build}
case $RDMEM_BIN in /*) ;; *) RDMEM_BIN=$here/$RDMEM_BIN ;; esac
# shellcheck source=scripts/local-stack.sh
. "$here/scripts/local-stack.sh"
tmp=$(mktemp -d)
chmod 700 "$tmp"
export TMPDIR=$tmp/ops # where the scripts make their private directories
mkdir -p "$TMPDIR" "$tmp/a" "$tmp/b" "$tmp/img" "$tmp/ag1" "$tmp/ag2" "$tmp/ag3" "$tmp/ag4"
a_pid='' a_port='' b_pid='' b_port='' bg=''
cleanup() {
	[ -n "$bg" ] && kill "$bg" 2>/dev/null && wait "$bg" 2>/dev/null
	ls_stop
	ls_stop_pid "$a_pid"
	ls_stop_pid "$b_pid"
	rm -rf "$tmp"
}
trap cleanup EXIT

failed=0
expect() { # expect NAME CONDITION...
	local what=$1
	shift
	if "$@"; then echo "ok - $what"; else echo "not ok - $what" && failed=1; fi
}
run() { # run NAME WANT_STATUS CMD... ; stdout in $tmp/out, stderr in $tmp/err
	local what=$1 want=$2 got
	shift 2
	"$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	if [ "$got" -eq "$want" ]; then
		echo "ok - $what"
	else
		echo "not ok - $what (exit $got, expected $want)"
		grep -v '^PASS\|^ok' "$tmp/out" | sed 's/^/#   /' | head -20
		sed 's/^/#   /' "$tmp/err" | head -10
		failed=1
	fi
}
not() { ! "$@"; }
gone() { [ -n "$1" ] && ! kill -0 "$1" 2>/dev/null; }
scripts_left() { [ -z "$(ls -A "$TMPDIR")" ]; }

# Server A: the defaults, a short --object-ttl (lifecycle timeout waits for
# it) and an image directory. Server B: small limits, for the too-big cases.
ls_start_server "$tmp/a" --object-ttl 1000 --image-dir "$tmp/img" || exit 1
a_pid=$LS_SERVER_PID a_port=$LS_PORT
ls_start_server "$tmp/b" --max-value 128k --max-image 1m --image-dir "$tmp/img" || exit 1
b_pid=$LS_SERVER_PID b_port=$LS_PORT
LS_SERVER_PID=

# ---- run_basic_tests.sh ----------------------------------------------------------
run "run_basic_tests.sh over shm: every check passes" 0 \
	"$here/scripts/run_basic_tests.sh" 127.0.0.1 "$a_port"
expect "  ... it ran on the shm fabric" grep -q "^# agent on fabric shm" "$tmp/out"
expect "  ... it reports N passed, 0 failed" grep -qE "^[0-9]+ passed, 0 failed$" "$tmp/out"
for c in "path eager: get byte-exact" "path lazy: get took lazy" "path bulk: put 65536 B" \
	"path tcp: get byte-exact" "RDMA down: the get went over TCP" "lifecycle 200" \
	"lifecycle stale" "lifecycle repeat-reclaim" "lifecycle timeout"; do
	expect "  ... PASS $c" grep -q "^PASS $c" "$tmp/out"
done
expect "  ... its agent and temp files are gone" scripts_left

run "run_basic_tests.sh over tcp: every check passes" 0 \
	"$here/scripts/run_basic_tests.sh" --fabric tcp 127.0.0.1 "$a_port"
expect "  ... RDMA-only checks skipped, not failed" grep -q "^SKIP lifecycle: fabric tcp" "$tmp/out"
expect "  ... byte-exact over the tcp path" grep -q "^PASS path tcp: get byte-exact" "$tmp/out"

# Server B refuses big:512k (--max-value 128k): the script must fail.
run "run_basic_tests.sh fails when a check fails" 1 \
	env RDMEM_SKIP_TTL=1 "$here/scripts/run_basic_tests.sh" 127.0.0.1 "$b_port"
expect "  ... names the failed check" grep -q "^FAIL large-get big:512k" "$tmp/out"
expect "  ... and counts it" grep -qE "^[0-9]+ passed, [1-9][0-9]* failed$" "$tmp/out"
run "run_basic_tests.sh: bad usage exits 2" 2 "$here/scripts/run_basic_tests.sh" 127.0.0.1
expect "  ... temp files gone after every run" scripts_left

# ---- run_benchmarks.sh -----------------------------------------------------------------
run "run_benchmarks.sh: a small matrix, every cell ok" 0 \
	env RDMEM_BENCH_SIZES="32 4k" "$here/scripts/run_benchmarks.sh" 127.0.0.1 "$a_port" 50
# ping 5 paths + local-ping 1 + get/put 2 sizes x 5 + large-get/bigput 1 size x 5, x 2 windows
expect "  ... one table row per cell (72)" [ "$(grep -c ' ok$' "$tmp/out")" -eq 72 ]
expect "  ... the table has ops/s, p50, p99" grep -q "ops/s *p50 us *p99 us" "$tmp/out"
expect "  ... forced lazy get at window 32 went LAZY" \
	grep -qE "^get +4k lazy +32 .* lazy:50 +ok$" "$tmp/out"
run "run_benchmarks.sh: a failing cell fails the run" 1 \
	env RDMEM_BENCH_OPS=get RDMEM_BENCH_SIZES=256k RDMEM_BENCH_PATHS=auto \
	RDMEM_BENCH_WINDOWS=1 "$here/scripts/run_benchmarks.sh" 127.0.0.1 "$b_port" 5
expect "  ... the cell says why" grep -q "FAILED: .*max value" "$tmp/out"

# SIGTERM mid-run: the trap stops its agent and removes its directory.
RDMEM_BENCH_OPS=ping RDMEM_BENCH_PATHS=tcp "$here/scripts/run_benchmarks.sh" 127.0.0.1 \
	"$a_port" 50000000 >"$tmp/bg.out" 2>&1 &
bg=$!
ls_wait_log "$tmp/bg.out" "^op " 10 >/dev/null 2>&1
agent_of_bg=$(pgrep -f "rdmem-agent .*--socket $TMPDIR/" | head -1)
kill -TERM "$bg"
wait "$bg" 2>/dev/null
bg=
expect "run_benchmarks.sh stopped by SIGTERM: its agent is gone" gone "$agent_of_bg"
expect "  ... and its temp files" scripts_left

# Each agent logs in a directory of its own: ls_start_agent waits for
# "ready:" in its log, which must not be an earlier agent's.
# ---- rdmem lifecycle, on an agent of our own ---------------------------------------------
LS_PORT=$a_port
ls_start_agent "$tmp/ag1" "/rdmem-ops-$$" || exit 1
r() { "$RDMEM_BIN/rdmem" --shm-name "/rdmem-ops-$$" "$@"; }
run "lifecycle 500" 0 r lifecycle 500
expect "  ... 500 objects made, READ and RECLAIMed" \
	grep -q "^ok - server.obj_reclaim +500 (want +500)" "$tmp/out"
run "lifecycle stale" 0 r lifecycle stale
expect "  ... the stale generation refused" grep -q "^ok - server.obj_stale +1 (want +1)" "$tmp/out"
run "lifecycle repeat-reclaim" 0 r lifecycle repeat-reclaim
expect "  ... the repeat answered harmlessly" \
	grep -q "^ok - server.obj_repeat +1 (want +1)" "$tmp/out"
run "lifecycle timeout" 0 r lifecycle timeout
expect "  ... freed by the TTL scan" grep -q "^ok - server.obj_timeout +1 (want +1)" "$tmp/out"
expect "  ... and a late RECLAIM refused" grep -q "lifecycle timeout: passed" "$tmp/out"
run "lifecycle bad argument: usage" 2 r lifecycle sometimes
run "lifecycle 0: usage" 2 r lifecycle 0
run "agent-ctl simulate-reclaim junk refused" 3 r agent-ctl "simulate-reclaim junk"
run "agent-ctl simulate-reclaim release with none withheld" 1 r agent-ctl "simulate-reclaim release"
ls_stop_pid "$LS_AGENT_PID"
ls_start_agent "$tmp/ag2" "/rdmem-ops-$$" --fabric tcp || exit 1
run "lifecycle on a tcp-fabric agent fails clearly" 3 r lifecycle 10
expect "  ... saying why" grep -q "no RDMA session" "$tmp/err"
ls_stop_pid "$LS_AGENT_PID"

# ---- too-big messages name the limit and its flag ----------------------------------------
LS_PORT=$b_port
ls_start_agent "$tmp/ag3" "/rdmem-ops-$$" --max-value 256k || exit 1
head -c 300000 /dev/urandom >"$tmp/v300k"
head -c 200000 /dev/urandom >"$tmp/v200k"
head -c 2000000 /dev/urandom >"$tmp/img2m"
run "put over the agent's max value" 3 r put k --file "$tmp/v300k"
expect "  ... names 262144 and rdmem-agent --max-value" \
	grep -q "300000 bytes, over the agent's max value of 262144 bytes (raise it with rdmem-agent --max-value" "$tmp/err"
run "put over the server's max value" 3 r put k --file "$tmp/v200k"
expect "  ... names rdmem-server --max-value and its value" \
	grep -q "but over the server's --max-value of 131072 bytes (rdmem-server --max-value)" "$tmp/err"
run "image-put over the server's --max-image" 3 r image-put cat "$tmp/img2m" --chunk-size 64k
expect "  ... names rdmem-server --max-image and its value" \
	grep -q "2000000-byte image: the server's --max-image of 1048576 bytes (rdmem-server --max-image)" "$tmp/err"
run "image-put chunk over the agent's max value" 2 r image-put cat "$tmp/img2m" --chunk-size 300k
expect "  ... names --chunk-size and rdmem-agent --max-value" \
	grep -q "lower --chunk-size, or raise rdmem-agent --max-value" "$tmp/err"
run "large-get over the agent's max value" 3 r large-get big:300k
expect "  ... names the reply's size and the flag" grep -q "the reply is 307200 bytes.*rdmem-agent --max-value" "$tmp/err"
run "large-get over the server's max value" 3 r large-get big:200k
expect "  ... names the server's flag" grep -q "rdmem-server --max-value" "$tmp/err"
run "bench size over the agent's max value" 2 r bench --op get --size 300k -n 5
expect "  ... names the flag" grep -q "rdmem-agent --max-value raises it" "$tmp/err"
ls_stop_pid "$LS_AGENT_PID"

# ---- image-put progress: on a terminal only -------------------------------------------------
LS_PORT=$a_port
ls_start_agent "$tmp/ag4" "/rdmem-ops-$$" || exit 1
head -c 6000000 /dev/urandom >"$tmp/img6m"
run "image-put 6 MB, piped" 0 r image-put dog "$tmp/img6m"
expect "  ... no progress when piped" not grep -q "%" "$tmp/err"
if command -v script >/dev/null; then
	run "image-put 6 MB on a terminal (script)" 0 \
		script -qec "$RDMEM_BIN/rdmem --shm-name /rdmem-ops-$$ image-put dog $tmp/img6m" /dev/null
	expect "  ... shows progress to 100%" grep -q "100% 5.7/5.7 MiB" "$tmp/out"
	run "image-put 2 MB on a terminal (script)" 0 \
		script -qec "$RDMEM_BIN/rdmem --shm-name /rdmem-ops-$$ image-put pup $tmp/img2m" /dev/null
	expect "  ... no progress under 4 MiB" not grep -q "%" "$tmp/out"
else
	echo "ok - # SKIP image-put on a terminal: no script(1)"
fi
expect "  ... the image arrived byte-exact" cmp -s "$tmp/img6m" "$tmp/img/dog"
exit $failed
