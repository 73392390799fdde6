#!/usr/bin/env bash
# python.sh - the Python binding (python/rdmem) against a real server and
# agent over the shm fabric, with the build tree's librdmem.so.0 (RDMEM_LIB):
# python/tests/test_rdmem.py through python/tests/tap.py, one TAP line per
# test method. On a sanitizer build the library needs its runtime in the
# interpreter (LD_PRELOAD of the one matching the build). Needs RDMEM_BIN.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/tap.sh
. tests/tap.sh python stack

if ! command -v python3 >/dev/null; then
	echo "not ok - python: python3 is not installed (scripts/install-deps.sh installs it)"
	exit 1
fi
so=$bdir/lib/librdmem.so.0
expect "build holds librdmem.so.0" [ -f "$so" ]
preload=
case "${RDMEM_SANITIZER:-}" in
asan) preload=$(clang -print-file-name=libclang_rt.asan-x86_64.so) ;;
tsan) preload=$(clang -print-file-name=libclang_rt.tsan-x86_64.so) ;;
esac

shm=/rdmem-py-$$
mkdir -p "$tmp/run"
mkdir -p "$tmp/run/img"
if ls_start_server "$tmp/run" --image-dir "$tmp/run/img" && ls_start_agent "$tmp/run" "$shm" --clients 8 --slots 8; then
	RDMEM_LIB=$so RDMEM_TEST_SHM=$shm RDMEM_TEST_SERVER_PID=$LS_SERVER_PID \
		RDMEM_TEST_IMAGE_DIR=$tmp/run/img \
		LD_PRELOAD=$preload PYTHONDONTWRITEBYTECODE=1 \
		python3 python/tests/tap.py "python: " python/tests/test_rdmem.py || failed=1
else
	echo "not ok - python: server and agent start" && failed=1
fi
ls_stop
exit $failed
