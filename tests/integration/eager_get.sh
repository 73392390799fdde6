#!/usr/bin/env bash
# eager_get.sh - scripts/run_eager_get_regression.sh at CI size: forced EAGER
# GET over the value-size sweep (one "ok - " line per size), and the script
# must fail loudly when it cannot run its GETs. Needs RDMEM_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
export RDMEM_BIN=${RDMEM_BIN:-build}
if [ ! -x "$RDMEM_BIN/rdmem" ] || ! command -v python3 >/dev/null; then
	# Built by make test; python3 is a dependency: missing is a failure.
	echo "not ok - eager_get: $RDMEM_BIN/rdmem not built or no python3 (run make; scripts/install-deps.sh)"
	exit 1
fi
tmp=$(mktemp -d /tmp/rdmem-eager-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
scripts/run_eager_get_regression.sh -n 200 --window 8 --out "$tmp/run" --tap || failed=1
if python3 -c "import json,sys; d=json.load(open('$tmp/run/report.json')); sys.exit(0 if d['largest_eager'] == d['reply_slot_bytes'] else 1)"; then
	echo "ok - the largest EAGER value is the reply slot (16 KiB)"
else
	echo "not ok - the largest EAGER value is not the reply slot" && failed=1
fi
set +e
scripts/run_eager_get_regression.sh -n 10 --use-agent /rdmem-eager-none-$$ --out "$tmp/none" --tap >"$tmp/none.out" 2>&1
rc=$?
set -e
if [ "$rc" = 1 ] && grep -q "^not ok - eager get 1 B" "$tmp/none.out"; then
	echo "ok - no agent: every size fails and the script exits 1"
else
	echo "not ok - no agent: exit $rc" && failed=1
fi
exit $failed
