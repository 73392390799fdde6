#!/usr/bin/env bash
# sanitizer-reports.sh DIR - the verdict of a sanitizer run (make asan / make
# tsan): every process of it (tests, and the servers and agents they start,
# whose stderr the tests may not show) writes its reports to DIR/<tool>.<pid>
# (log_path). Prints them and exits 1 if there is any, else one ok line.
set -u
dir=$1
# An empty file holds no report: the runtime opens its log file before the
# first write, and a process the tests SIGKILL in between (a daemon at
# teardown) leaves it empty. Listed, not counted; any byte in it counts.
for f in $(find "$dir" -type f -empty 2>/dev/null | sort); do
	echo "# empty sanitizer log file $f (opened, nothing written: likely killed before it wrote)"
done
reports=$(find "$dir" -type f ! -empty 2>/dev/null | sort)
if [ -z "$reports" ]; then
	echo "ok - no sanitizer report from any process ($dir)"
	exit 0
fi
echo "not ok - sanitizer reports from $(echo "$reports" | wc -l) processes:"
for f in $reports; do
	echo "# ---- $f"
	grep -E 'WARNING|ERROR|SUMMARY|runtime error|^ +#[0-9] ' "$f" | head -30 | sed 's/^/#   /'
done
# One line a report, what and where, for summaries that keep "not ok" lines.
for f in $reports; do
	what=$(grep -m1 -E 'ERROR:|WARNING:|runtime error' "$f" | sed -E 's/^==[0-9]+==//' | cut -c1-160)
	where=$(grep -m1 -E '^ +#[0-9]+ .* in rdmem|^ +#[0-9]+ .* in (main|test_)' "$f" | sed -E 's/^ +#[0-9]+ 0x[0-9a-f]+ in //' | cut -c1-120)
	echo "not ok - sanitizer $(basename "$f"): ${what:-report} at ${where:-?}"
done
exit 1
