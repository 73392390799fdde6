#!/usr/bin/env bash
# python.sh - the Python binding (python/rdmem) against a real server and
# agent over the shm fabric, with the build tree's librdmem.so.0 (RDMEM_LIB):
# python/tests/test_rdmem.py and test_hostile.py through python/tests/tap.py, one TAP line per
# test method. On make asan the instrumented library runs inside python3
# with the ASan runtime preloaded and any ASan/UBSan error in it fails here.
# Leaks are not LSan's there (stale pointers in the interpreter's arenas keep
# an unfreed block reachable: a removed free() went unseen): test_no_leak
# counts the heap with mallinfo2 in the plain build instead. Needs RDMEM_BIN.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/tap.sh
. tests/tap.sh python stack

# The interpreter itself, not a wrapper script (pyenv's shim) that would run
# other programs under the preloaded runtime.
if ! py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || [ -z "$py" ]; then
	echo "not ok - python: python3 is not installed (scripts/install-deps.sh installs it)"
	exit 1
fi
if [ "${RDMEM_SANITIZER:-}" = tsan ]; then
	echo "ok - python: the binding under tsan # SKIP python3 cannot load a TSan-instrumented librdmem (the TSan runtime preloaded into it crashes it; make test and make asan run it)"
	exit 0
fi
so=$bdir/lib/librdmem.so.0
expect "build holds librdmem.so.0" [ -f "$so" ]
run_env=(RDMEM_LIB="$so" PYTHONDONTWRITEBYTECODE=1)
if [ "${RDMEM_SANITIZER:-}" = asan ]; then
	mkdir -p "$tmp/san"
	run_env+=(LD_PRELOAD="$(clang -print-file-name=libclang_rt.asan-x86_64.so)"
		ASAN_OPTIONS="log_path=$tmp/san/asan detect_leaks=0"
		UBSAN_OPTIONS="log_path=$tmp/san/ubsan print_stacktrace=1")
fi

shm=/rdmem-py-$$
mkdir -p "$tmp/run/img"
if ls_start_server "$tmp/run" --image-dir "$tmp/run/img" && ls_start_agent "$tmp/run" "$shm" --clients 8 --slots 8; then
	env "${run_env[@]}" RDMEM_TEST_SHM="$shm" RDMEM_TEST_SERVER_PID="$LS_SERVER_PID" \
		RDMEM_TEST_IMAGE_DIR="$tmp/run/img" \
		"$py" python/tests/tap.py "python: " python/tests/test_rdmem.py python/tests/test_hostile.py || failed=1
else
	echo "not ok - python: server and agent start" && failed=1
fi
ls_stop

if [ -d "$tmp/san" ]; then
	# Reports of python3 (the daemons' go where the caller's ASAN_OPTIONS say).
	errs=$(grep -lE 'ERROR: AddressSanitizer|runtime error' "$tmp"/san/* 2>/dev/null | tr '\n' ' ')
	expect "python: no ASan/UBSan error in python3 running librdmem${errs:+ (see $errs)}" [ -z "$errs" ]
	# shellcheck disable=SC2086 # a list of files
	cat $errs 2>/dev/null | sed 's/^/#   /' | head -60
fi
exit $failed
