#!/usr/bin/env bash
# test-rxe.sh - runs the real-verbs checks on Soft-RoCE: stages the build
# directory, boots one VM with scripts/rxe-vm.sh (-m both: a dummy rxe device
# and a veth pair with one rxe device per end) and runs scripts/rxe-suite.sh
# there. Prints the suite's case lines and closes with "N passed, N failed".
#
# Usage: scripts/test-rxe.sh [-b BUILD_DIR] [-t SECS]
#   -b DIR   build directory to stage (default build); needs tests/fabric_check
#   -t SECS  limit for the suite inside the VM (default 900)
# Exit status: 0 when every case passed.
#
# Time here (2 shared cores, qemu TCG, no KVM): ~25 s wall with the image
# cached (boot ~10 s; fabric_check dummy, veth and the broken-detail run a few
# seconds each); the first run adds ~15 s to build the image. Soft-RoCE under
# TCG is a correctness check: no figure from it is a performance figure.
set -u
cd "$(dirname "$0")/.."
B=build TMO=900
while getopts "b:t:h" o; do
	case $o in
	b) B=$OPTARG ;;
	t) TMO=$OPTARG ;;
	*) sed -n '2,16p' "$0"; exit 2 ;;
	esac
done

[ -x "$B/tests/fabric_check" ] || { echo "test-rxe: $B/tests/fabric_check missing (make $B/tests/fabric_check)" >&2; exit 2; }
stage=$(mktemp -d "${TMPDIR:-/tmp}/rdmem-rxe-stage.XXXXXX")
out=$(mktemp "${TMPDIR:-/tmp}/rdmem-rxe-out.XXXXXX")
trap 'rm -rf "$stage" "$out"' EXIT

# the build's programs and tests (not objects or archives), and the suite
mkdir -p "$stage/scripts"
cp -a "$B/tests" "$stage/"
find "$B" -maxdepth 1 -type f -perm -u+x -exec cp -a {} "$stage/" \;
cp scripts/rxe-suite.sh "$stage/scripts/"

t0=$SECONDS
scripts/rxe-vm.sh -m both -t "$TMO" -d "$stage" -- bash scripts/rxe-suite.sh | tee "$out"
rc=${PIPESTATUS[0]}
pass=$(grep -c '^ok - ' "$out")
fail=$(grep -c '^not ok - ' "$out")
case $rc in
0) ;;
124) echo "not ok - rxe: the suite hit its ${TMO}s limit inside the VM"; fail=$((fail + 1)) ;;
125) echo "not ok - rxe: the VM failed (see [rxe-vm] lines above)"; fail=$((fail + 1)) ;;
*) [ "$fail" -gt 0 ] || { echo "not ok - rxe: the suite exited $rc"; fail=$((fail + 1)); } ;;
esac
echo "# test-rxe took $((SECONDS - t0)) s"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
