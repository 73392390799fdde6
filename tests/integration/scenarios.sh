#!/usr/bin/env bash
# scenarios.sh - the seven business scenarios at CI size (N=200) against a
# server + agent this script's runner starts over the shm fabric, one
# "ok - " line per scenario check; then the report parser on records it
# must refuse or fail (a failed check, a malformed line, a missing scenario).
# Needs RDMEM_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
export RDMEM_BIN=${RDMEM_BIN:-build}
if [ ! -x "$RDMEM_BIN/tests/rdmem_scenarios" ] || ! command -v python3 >/dev/null; then
	# Built by make test; python3 is a dependency: missing is a failure.
	echo "not ok - scenarios: $RDMEM_BIN/tests/rdmem_scenarios not built or no python3 (run make; scripts/install-deps.sh)"
	exit 1
fi
# shellcheck source=tests/tap.sh
. tests/tap.sh scenarios

# The run itself: its TAP lines are this test's lines. Here the agent dials a
# local server over the shm fabric: RDMA is guaranteed, so a check needing it
# fails rather than skips when the link is missing.
export RDMEM_SCENARIOS_REQUIRE_RDMA=1
if ! scripts/run_business_scenarios.sh 127.0.0.1 0 200 --window 16 --out "$tmp/run" --tap; then
	failed=1
	sed 's/^/#   /' "$tmp/run/driver.log" "$tmp/run/agent.log" 2>/dev/null | tail -20
fi
expect "report.md has the seven-row table" \
	bash -c "[ \$(grep -c '^| [1-7] | \*\*' '$tmp/run/report.md') = 7 ]"
expect "report.json parses and says ok" \
	python3 -c "import json,sys; d=json.load(open('$tmp/run/report.json')); sys.exit(0 if d['ok'] and d['summary']['scenarios']==7 else 1)"

# The parser must not be fooled: a record claiming ok with a failed check,
# a malformed line, and a scenario that never reported all fail the report.
good=$(head -1 "$tmp/run/results.jsonl")
python3 - "$tmp/bad.jsonl" <<PY
import json, sys
rec = json.loads('''$good''')
rec["checks"][0]["status"] = "fail"   # "ok": true stays: the parser must recompute
open(sys.argv[1], "w").write(json.dumps(rec) + "\n{not json\n")
PY
set +e
python3 scripts/scenario_report.py "$tmp/bad.jsonl" --expect ycsb,profile --tap >"$tmp/bad.out"
rc=$?
set -e
expect "parser exits 1 on a failed check" [ "$rc" = 1 ]
expect "parser recomputes the verdict from the checks" grep -q "^not ok - ycsb: " "$tmp/bad.out"
expect "parser reports the malformed line" grep -q "^not ok - results: line 2: not JSON" "$tmp/bad.out"
expect "parser reports the missing scenario" grep -q "^not ok - profile: scenario missing" "$tmp/bad.out"
set +e
python3 scripts/scenario_report.py "$tmp/nothing.jsonl" >/dev/null 2>&1
rc=$?
set -e
expect "parser refuses a file that does not exist" [ "$rc" != 0 ]
exit $failed
