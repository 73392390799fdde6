#!/usr/bin/env bash
# run-tests.sh - runs every test program given (unit binaries and integration
# scripts), echoes their case lines, and closes with "N passed, N failed,
# N skipped". Nothing may fail or vanish silently:
#  - a program that exits non-zero without reporting a failed case (a crash,
#    a timeout) counts as one failed case of its own;
#  - a program that reports no case line at all fails (a test that ran
#    nothing proves nothing);
#  - every skipped case is counted on its own and listed, with its reason,
#    before the closing line;
#  - with RDMEM_EXPECTED_SKIPS=FILE (CI sets tests/expected-skips.txt), a
#    skip that the file does not list fails, and a listed skip of a program
#    that ran but did not skip is reported ("expected skip ran").
#    FILE: one "program: case" per line ('*' globs allowed), "#" comments.
set -u
pass=0 fail=0 skip=0
# The tests' files go to a directory of this run's own (tests/tmpdir.h reads
# TMPDIR), not /tmp: a name a test makes from its pid could be created first
# there by another user. 0711: processes a test runs as another user reach a
# path in it, and nobody else creates anything in it. Kept when a test failed:
# the daemons' logs and a failed torture case's directory are in it.
run_tmp=$(mktemp -d /tmp/rdmem-tests-XXXXXX) || exit 1
chmod 0711 "$run_tmp"
export TMPDIR=$run_tmp
trap 'if [ "$fail" -eq 0 ]; then rm -rf "$run_tmp"; else echo "# the tests'"'"' files are kept in $run_tmp"; fi' EXIT
per_test_timeout=${RDMEM_TEST_TIMEOUT:-600}
expected=${RDMEM_EXPECTED_SKIPS:-}
skipped=() ran=()

for t in "$@"; do
	name=$(basename "$t")
	ran+=("$name")
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
	if [ $((p + f)) -eq 0 ]; then
		echo "not ok - $name reported no case (no 'ok - ' or 'not ok - ' line)"
		f=1
	fi
	while IFS= read -r line; do
		skipped+=("$name: $line")
	done < <(sed -n 's/^ok - \(.*\)$/\1/p' "$out" | grep '# SKIP')
	pass=$((pass + p - s)) fail=$((fail + f)) skip=$((skip + s))
	awk -v n="$name" -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "#   %s: %.1fs\n", n, b - a }'
	rm -f "$out"
done

# The listed patterns, without comments and blank lines.
patterns=()
if [ -n "$expected" ]; then
	if [ ! -r "$expected" ]; then
		echo "not ok - RDMEM_EXPECTED_SKIPS=$expected cannot be read"
		fail=$((fail + 1))
	else
		while IFS= read -r line; do
			line=${line%%#*}
			line=${line%"${line##*[![:space:]]}"} # trailing blanks
			[ -n "$line" ] && patterns+=("$line")
		done <"$expected"
	fi
fi

# "program: case # SKIP reason" -> "program: case"
skip_key() { echo "${1%% # SKIP*}"; }

if [ ${#skipped[@]} -gt 0 ]; then
	echo "# skipped cases (${#skipped[@]}):"
	for s in "${skipped[@]}"; do
		echo "#   $s"
	done
fi
if [ -n "$expected" ]; then
	for s in "${skipped[@]+"${skipped[@]}"}"; do
		key=$(skip_key "$s") hit=0
		for pat in "${patterns[@]+"${patterns[@]}"}"; do
			# shellcheck disable=SC2053 # the pattern is a glob on purpose
			[[ $key == $pat ]] && hit=1 && break
		done
		if [ "$hit" = 0 ]; then
			echo "not ok - unexpected skip (not in $expected): $s"
			fail=$((fail + 1))
		fi
	done
	for pat in "${patterns[@]+"${patterns[@]}"}"; do
		prog=${pat%%: *} prog_ran=0 hit=0
		for n in "${ran[@]+"${ran[@]}"}"; do
			[ "$n" = "$prog" ] && prog_ran=1
		done
		[ "$prog_ran" = 1 ] || continue
		for s in "${skipped[@]+"${skipped[@]}"}"; do
			# shellcheck disable=SC2053
			[[ $(skip_key "$s") == $pat ]] && hit=1 && break
		done
		[ "$hit" = 1 ] || echo "# expected skip ran: $pat"
	done
fi

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
