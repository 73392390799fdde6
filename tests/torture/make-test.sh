#!/bin/sh
# make-test.sh - the torture harness's fixed budget inside `make test`: the
# checker's self-test (histories with known answers), the flag-table check,
# then quick random cases for about 100 seconds (at most 60).
# The base seed is random (printed); each failing case prints the one command
# that replays it. TORTURE_SEED pins the base seed; TORTURE_MINUTES sets the
# time for cases (default 1.7; .ci/run shortens it where its own torture
# suite follows).
dir=$(dirname "$0")
python3 "$dir/checker.py" || exit 1
exec python3 "$dir/torture.py" --quick --minutes "${TORTURE_MINUTES:-1.7}" --cases 60 ${TORTURE_SEED:+--seed "$TORTURE_SEED"}
