# tap.sh - sourced by the shell tests in tests/integration/ from the top of
# the tree: `. tests/tap.sh NAME [stack]`. Gives a scratch directory $tmp
# (removed on exit), $failed, expect() and check() (one "ok - " or
# "not ok - " line per check; the test ends with `exit $failed`). With "stack": $RDMEM_BIN
# (default build), its absolute path $bdir, and scripts/local-stack.sh
# loaded, whose daemons are stopped on exit.
# shellcheck shell=bash
tmp=$(mktemp -d "/tmp/rdmem-$1-test.XXXXXX")
failed=0
if [ "${2:-}" = stack ]; then
	export RDMEM_BIN=${RDMEM_BIN:-build}
	bdir=$(cd "$RDMEM_BIN" && pwd)
	# shellcheck source=scripts/local-stack.sh
	. scripts/local-stack.sh
	trap 'ls_stop; rm -rf "$tmp"' EXIT
else
	trap 'rm -rf "$tmp"' EXIT
fi
expect() {
	local what=$1
	shift
	if "$@"; then echo "ok - $what"; else echo "not ok - $what" && failed=1; fi
}
# check NAME EXPECTED_STATUS CMD...: CMD exits with EXPECTED_STATUS; its
# output is left in $tmp/out and $tmp/err for the checks that follow.
check() {
	local what=$1 want=$2 got
	shift 2
	"$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	if [ "$got" -eq "$want" ]; then
		echo "ok - $what"
	else
		echo "not ok - $what (exit $got, expected $want)"
		sed 's/^/#   /' "$tmp/err" | head -5
		failed=1
	fi
}
