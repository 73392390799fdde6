#!/usr/bin/env bash
# fuzz.sh - runs every libFuzzer target (tests/fuzz/fuzz_*.c, built by
# `make fuzz` into build/fuzz/) for a bounded time.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
#
# Per target: first the regression inputs under tests/fuzz/regressions/<name>/
# are replayed (each must pass), then the fuzzer runs on the checked-in seed
# corpus tests/fuzz/corpus/<name>/ plus a scratch corpus where it keeps the new
# inputs it finds (build/fuzz/work/corpus/<name>/; the repository's corpus is
# only read). One line per target, "ok - ..." or "not ok - ...", with the
# executions and executions per second; a crash leaves its input in
# build/fuzz/work/crashes/<name>/ and makes the script exit 1.
#
# Environment: RDMEM_FUZZ_WORK (scratch directory), RDMEM_FUZZ_TARGETS (names,
# e.g. "frame blob"; default all), RDMEM_FUZZ_NOBUILD=1 (use what is built).
set -u
cd "$(dirname "$0")/.."
secs=${1:-60}
work=${RDMEM_FUZZ_WORK:-build/fuzz/work}
case $secs in '' | *[!0-9]*) echo "usage: $0 [SECONDS_PER_TARGET]" >&2; exit 2 ;; esac

if [ -z "${RDMEM_FUZZ_NOBUILD:-}" ] && ! make -s fuzz >/dev/null; then
	echo "not ok - fuzz: make fuzz failed"
	exit 1
fi
names=${RDMEM_FUZZ_TARGETS:-$(for f in tests/fuzz/fuzz_*.c; do f=${f##*/fuzz_}; echo "${f%.c}"; done)}

# What harnesses that crashed left behind (their cleanup never ran): segments
# and temp dirs named rdmem-fuzz-<pid>[-*], in /dev/shm or /tmp.
sweep() {
	local f pid
	for f in /dev/shm/rdmem-fuzz-* /tmp/rdmem-fuzz-*; do
		[ -e "$f" ] || continue
		pid=${f##*/rdmem-fuzz-}
		pid=${pid%%-*}
		case $pid in '' | *[!0-9]*) continue ;; esac
		kill -0 "$pid" 2>/dev/null || rm -rf "$f"
	done
}

status=0 total=0
for name in $names; do
	bin=build/fuzz/fuzz_$name
	seeds=tests/fuzz/corpus/$name
	scratch=$work/corpus/$name
	crashes=$work/crashes/$name
	log=$work/$name.log
	mkdir -p "$scratch" "$crashes"
	if [ ! -x "$bin" ] || [ ! -d "$seeds" ]; then
		echo "not ok - fuzz_$name: no $bin or no $seeds"
		status=1
		continue
	fi

	regs=$(find "tests/fuzz/regressions/$name" -type f ! -name 'README*' 2>/dev/null | sort)
	if [ -n "$regs" ]; then
		# shellcheck disable=SC2086
		if "$bin" -runs=1 $regs >"$log" 2>&1; then
			echo "ok - fuzz_$name: $(echo "$regs" | wc -l) regression inputs replayed"
		else
			echo "not ok - fuzz_$name: a regression input fails again:"
			grep -E 'ERROR|invariant|runtime error|Running:' "$log" | tail -5 | sed 's/^/#   /'
			status=1
		fi
	fi

	# -timeout: one input may take 10 s (a hang is a bug); -rss_limit_mb: the
	# harnesses stay far below it, a leak does not.
	"$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$crashes/" "$scratch" "$seeds" >"$log" 2>&1
	rc=$?
	sweep
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	added=$(sed -n 's/^stat::new_units_added: *//p' "$log")
	cov=$(grep -Eo "cov: [0-9]+" "$log" | tail -1 | cut -d" " -f2)
	if [ "$rc" -eq 0 ] && [ -n "$execs" ]; then
		echo "ok - fuzz_$name: ${secs} s, ${execs} executions, ${rate}/s, ${cov:-?} edges, ${added} new inputs"
		total=$((total + execs))
	else
		echo "not ok - fuzz_$name: exit $rc after ${execs:-?} executions; input kept in $crashes/:"
		ls -t "$crashes" 2>/dev/null | head -3 | sed "s|^|#   $crashes/|"
		grep -E 'ERROR|invariant failed|runtime error|SUMMARY' "$log" | head -5 | sed 's/^/#   /'
		echo "#   log: $log"
		status=1
	fi
done
echo "# fuzz: $total executions in all"
exit $status
