#!/usr/bin/env bash
# run-tests.sh - runs every test program given (unit binaries and integration
# scripts), echoes their case lines, and closes with "N passed, N failed".
# A program that exits non-zero without reporting a failed case (a crash, a
# timeout) counts as one failed case of its own, so nothing fails silently.
set -u
pass=0 fail=0 skip=0
per_test_timeout=${RDMEM_TEST_TIMEOUT:-600}

for t in "$@"; do
	name=$(basename "$t")
	echo "# $name"
	out=$(mktemp)
	start=$(date +%s.%N)
	timeout --kill-after=10 "$per_test_timeout" "$t" >"$out" 2> >(sed "s/^/#   /" >&2)
	rc=$?
	wait
	cat "$out"
	p=$(grep -c '^ok - ' "$out")
	s=$(grep -c '^ok - .*# SKIP' "$out")
	f=$(grep -c '^not ok - ' "$out")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $name exited with status $rc"
		f=1
	fi
	pass=$((pass + p - s)) fail=$((fail + f)) skip=$((skip + s))
	awk -v n="$name" -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "#   %s: %.1fs\n", n, b - a }'
	rm -f "$out"
done

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
