#!/usr/bin/env bash
# fuzz_smoke.sh - the CI-sized fuzz run: builds the libFuzzer targets (make
# fuzz), replays every kept regression input, and runs each target for a few
# seconds on its seed corpus (scripts/fuzz.sh). Skipped, with the reason, where
# clang's libFuzzer is not installed, and in the sanitizer runs (make asan /
# make tsan), whose builds are not the fuzz build; `make test` covers it.
#
# RDMEM_FUZZ_SMOKE_SECONDS sets the time per target (default 8).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${RDMEM_FUZZ_SMOKE_SECONDS:-8}

if [ -n "${RDMEM_SANITIZER:-}" ]; then
	echo "ok - fuzz smoke # SKIP sanitizer run ($RDMEM_SANITIZER): the fuzz targets run in plain make test"
	exit 0
fi
if ! command -v clang >/dev/null 2>&1; then
	# clang and its libFuzzer runtime are dependencies (scripts/install-deps.sh).
	echo "not ok - fuzz smoke: clang is not installed (apt-get install clang libclang-rt-dev)"
	exit 1
fi
probe=$(mktemp -d /tmp/rdmem-fuzz-probe.XXXXXX)
trap 'rm -rf "$probe" "${work:-}"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' >"$probe/p.c"
if ! clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>"$probe/err"; then
	echo "not ok - fuzz smoke: clang has no libFuzzer runtime ($(head -1 "$probe/err")); install libclang-rt-dev"
	exit 1
fi

# This runs under make test: the fuzz tree gets its own make, with none of the
# outer build's variables (a sanitizer's CFLAGS would not mix with the fuzzer's).
cd "$root" || exit 1
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u B -u CC -u CFLAGS -u LDFLAGS -u OPT \
	make -s -j"$(nproc)" fuzz >"$probe/build" 2>&1; then
	echo "not ok - fuzz smoke: make fuzz failed"
	tail -20 "$probe/build" | sed 's/^/#   /'
	exit 1
fi
# A scratch corpus per run; crashing inputs are copied to build/fuzz/crashes/.
work=$(mktemp -d /tmp/rdmem-fuzz-smoke.XXXXXX)
RDMEM_FUZZ_NOBUILD=1 RDMEM_FUZZ_WORK=$work scripts/fuzz.sh "$secs"
rc=$?
if [ "$rc" -ne 0 ]; then
	mkdir -p build/fuzz/crashes
	cp -r "$work/crashes/." build/fuzz/crashes/ 2>/dev/null
	cp "$work"/*.log build/fuzz/crashes/ 2>/dev/null
	echo "# crashing inputs and logs copied to build/fuzz/crashes/"
fi
exit "$rc"
