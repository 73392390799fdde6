#!/usr/bin/env bash
# test-rxe.sh - runs the real-verbs checks on Soft-RoCE: stages the build
# directory, boots one VM with scripts/rxe-vm.sh (-m both: a dummy rxe device
# and a veth pair with one rxe device per end) and runs scripts/rxe-suite.sh
# there: the fabric checks, then the integration suite (rdmem-server and
# rdmem-agent over --fabric verbs). Prints the suite's case lines and closes
# with "N passed, N failed, N skipped".
#
# Usage: scripts/test-rxe.sh [-b BUILD_DIR] [-t SECS] [CHECK...]
#   -b DIR   build directory to stage (default build; `make` builds it)
#   -t SECS  limit for the suite inside the VM (default 2400)
#   CHECK    run only these checks of scripts/rxe-suite.sh (default: all)
# Exit status: 0 when every case passed. A skipped case ("ok - ... # SKIP
# why") fails the run unless it matches a line "check: case" ('*' globs) of
# the file RDMEM_RXE_EXPECTED_SKIPS (default: none; every rxe case can run in
# the VM). RDMEM_RXE_TORTURE_SEED pins the torture check's base seed.
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
	*) sed -n '2,/^set -u$/p' "$0" | sed '$d'; exit 2 ;;
	esac
done
shift $((OPTIND - 1))

for f in tests/fabric_check tests/test_agent_paths tests/memlock_exec tests/torture_client \
	rdmem-server rdmem-agent rdmem; do
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
# the torture harness (python3 in the guest; its C client is in $B/tests)
mkdir -p "$stage/torture"
cp tests/torture/torture.py tests/torture/checker.py tests/torture/flags.py "$stage/torture/"

# Agents' front-door segments are RAM (one test runs two agents of 137 MiB).
export RDMEM_RXE_MEM=${RDMEM_RXE_MEM:-2048}
t0=$SECONDS
scripts/rxe-vm.sh -m both -t "$TMO" -d "$stage" -- \
	${RDMEM_RXE_TORTURE_SEED:+RDMEM_RXE_TORTURE_SEED=$RDMEM_RXE_TORTURE_SEED} \
	bash scripts/rxe-suite.sh "$@" | tee "$out"
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
# Skips: each must be listed with its reason, or it fails the run.
while IFS= read -r line; do
	name=${line#ok - }
	name=${name%% # SKIP*}
	if [ -n "${RDMEM_RXE_EXPECTED_SKIPS:-}" ] &&
		grep -v '^#' "$RDMEM_RXE_EXPECTED_SKIPS" | while IFS= read -r pat; do
			# shellcheck disable=SC2053 # pat is a glob on purpose
			[ -n "$pat" ] && [[ $name == $pat ]] && echo hit
		done | grep -q hit; then
		echo "# expected skip: $name"
	else
		echo "not ok - rxe: unexpected skip: ${line#ok - }"
		fail=$((fail + 1))
	fi
done < <(grep '^ok - .*# SKIP' "$out")
echo "# test-rxe took $((SECONDS - t0)) s wall"
echo "$((pass - skip)) passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
