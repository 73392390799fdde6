#!/usr/bin/env bash
# test-rxe.sh - runs the real-verbs checks on Soft-RoCE: stages the build
# directory, boots one VM with scripts/rxe-vm.sh (-m both: a dummy rxe device
# and a veth pair with one rxe device per end) and runs scripts/rxe-suite.sh
# there: the fabric checks, then the integration suite (rdmem-server and
# rdmem-agent over --fabric verbs). Prints the suite's case lines and closes
# with "N passed, N failed".
#
# Usage: scripts/test-rxe.sh [-b BUILD_DIR] [-t SECS] [CHECK...]
#   -b DIR   build directory to stage (default build; `make` builds it)
#   -t SECS  limit for the suite inside the VM (default 2400)
#   CHECK    run only these checks of scripts/rxe-suite.sh (default: all)
# Exit status: 0 when every case passed.
#
# Time here (2 shared cores, qemu TCG, no KVM): about 6 minutes wall on a quiet
# host with the image cached (boot ~10 s), about 15 minutes when other work
# keeps the load average near 10; the first run adds ~30 s to build the image.
# Soft-RoCE under TCG is a correctness check: no figure from it is a
# performance figure.
set -u
cd "$(dirname "$0")/.."
B=build TMO=2400
while getopts "b:t:h" o; do
	case $o in
	b) B=$OPTARG ;;
	t) TMO=$OPTARG ;;
	*) sed -n '2,18p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))

for f in tests/fabric_check tests/test_agent_paths tests/memlock_exec rdmem-server rdmem-agent rdmem; do
	[ -x "$B/$f" ] || { echo "test-rxe: $B/$f missing (run make first)" >&2; exit 2; }
done
stage=$(mktemp -d "${TMPDIR:-/tmp}/rdmem-rxe-stage.XXXXXX")
out=$(mktemp "${TMPDIR:-/tmp}/rdmem-rxe-out.XXXXXX")
trap 'rm -rf "$stage" "$out"' EXIT

# the build's programs and tests (not objects or archives), and the suite
mkdir -p "$stage/scripts"
cp -a "$B/tests" "$stage/"
find "$B" -maxdepth 1 -type f -perm -u+x -exec cp -a {} "$stage/" \;
cp scripts/rxe-suite.sh "$stage/scripts/"

# Agents' front-door segments are RAM (one test runs two agents of 137 MiB).
export RDMEM_RXE_MEM=${RDMEM_RXE_MEM:-2048}
t0=$SECONDS
scripts/rxe-vm.sh -m both -t "$TMO" -d "$stage" -- bash scripts/rxe-suite.sh "$@" | tee "$out"
rc=${PIPESTATUS[0]}
pass=$(grep -c '^ok - ' "$out")
skip=$(grep -c '^ok - .*# SKIP' "$out")
fail=$(grep -c '^not ok - ' "$out")
case $rc in
0) ;;
124) echo "not ok - rxe: the suite hit its ${TMO}s limit inside the VM"; fail=$((fail + 1)) ;;
125) echo "not ok - rxe: the VM failed (see [rxe-vm] lines above)"; fail=$((fail + 1)) ;;
*) [ "$fail" -gt 0 ] || { echo "not ok - rxe: the suite exited $rc"; fail=$((fail + 1)); } ;;
esac
echo "# test-rxe took $((SECONDS - t0)) s wall"
echo "$((pass - skip)) passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
