#!/usr/bin/env bash
# run_basic_tests.sh [--fabric verbs|shm|tcp] [--tcp-port N] HOST PORT
#
# The basic checks against a live rdmem-server (remote or on this host),
# through the rdmem CLI and an rdmem-agent of our own (private socket and
# temp directory, removed on exit or interrupt): ping/echo, put/get/mget,
# profile, large-get, every forced path byte-exact, fallback to TCP when
# RDMA goes down, and the LAZY object lifecycle (rdmem lifecycle N, stale,
# repeat-reclaim, timeout; timeout waits for the server's --object-ttl).
# One line per check (PASS/FAIL/SKIP), then "N passed, N failed"; exit 1 if
# any failed, 2 on bad usage. RDMA-only checks are skipped on fabric tcp.
# Environment: see scripts/ops_agent.sh (RDMEM_BIN, RDMEM_FABRIC,
# RDMEM_AGENT_ARGS); RDMEM_SKIP_TTL=1 leaves out lifecycle timeout.
set -u
# shellcheck source=scripts/ops_agent.sh
. "$(dirname "$0")/ops_agent.sh"
trap ops_cleanup EXIT
trap 'exit 130' INT TERM HUP
ops_parse_args "$@"
[ ${#OPS_REST[@]} -eq 0 ] || ops_usage

passed=0 failed=0 skipped=0
t=$OPS_TMP
k="basic:$$" # our keys, removed at the end

pass() { echo "PASS $1" && passed=$((passed + 1)); }
fail() { echo "FAIL $1${2:+: $2}" && failed=$((failed + 1)); }
skip() { echo "SKIP $1: $2" && skipped=$((skipped + 1)); }
# check NAME CMD...: passes when CMD exits 0; a failure shows its stderr.
# CMD's stdout lands in $t/out, which expect's conditions read.
check() { check_to "$t/out" "$@"; }
expect() { check_to "$t/expect.out" "$@"; }
check_to() {
	local to=$1 name=$2
	shift 2
	if ops_wait "$@" >"$to" 2>"$t/err"; then
		pass "$name"
	else
		fail "$name" "$(tr '\n' ' ' <"$t/err" | cut -c1-300)"
	fi
}
r() { ops_rdmem "$@"; }
# same_bytes FILE CMD...: CMD's stdout is FILE's bytes.
same_bytes() {
	local f=$1
	shift
	"$@" >"$t/back" || return 1
	cmp -s "$f" "$t/back" || {
		echo "reply differs from what was stored ($(wc -c <"$t/back") of $(wc -c <"$f") bytes)" >&2
		return 1
	}
}
# path_is PATH CMD...: CMD (run with --verbose) took PATH.
path_is() {
	local want=$1
	shift
	"$@" 2>"$t/verbose" >/dev/null || { cat "$t/verbose" >&2 && return 1; }
	grep -q "path $want," "$t/verbose" || {
		echo "took $(grep -o 'path [a-z]*' "$t/verbose") instead of path $want" >&2
		return 1
	}
}
profile_ok() {
	if [ "$(sed -n 1p "$t/out")" = "id: 1001" ] && sed -n 2p "$t/out" | grep -q "^name: ." &&
		sed -n 3p "$t/out" | grep -q "^tags:" && grep -qx "counters:" "$t/out"; then
		return 0
	fi
	echo "got '$(head -c 200 "$t/out")'" >&2
	return 1
}
out_is() { [ "$(cat "$t/out")" = "$1" ] || { echo "got '$(head -c 200 "$t/out")'" >&2 && return 1; }; }

ops_start_agent --clients 4 || exit 1
rdma=1
[ "$OPS_FABRIC" = tcp ] && rdma=0

# ---- ping / echo -------------------------------------------------------------
check "ping" r ping
check "echo" r echo "hello rdmem"
expect "echo returns the text" out_is "hello rdmem"

# ---- put / get / mget --------------------------------------------------------
head -c 100000 /dev/urandom >"$t/v100k"
check "put 100 kB binary" r put "$k:a" --file "$t/v100k"
check "get 100 kB byte-exact" same_bytes "$t/v100k" r get "$k:a"
check "put short value" r put "$k:b" "blue"
check "mget" r mget "$k:b,$k:missing,$k:b"
expect "mget values and missing keys in order" out_is "$(printf '%s\tblue\n%s\t(missing)\n%s\tblue' "$k:b" "$k:missing" "$k:b")"
check "del" r del "$k:b"
r get "$k:b" >/dev/null 2>&1
if [ $? -eq 1 ]; then pass "get after del: not found (exit 1)"; else fail "get after del: not found (exit 1)"; fi

# ---- profile / large-get -----------------------------------------------------
check "profile 1001" r profile 1001
expect "profile decodes (id, name, tags, counters)" profile_ok
check "large-get big:512k verified" r large-get big:512k

# ---- every forced path, byte-exact ---------------------------------------------
head -c 8000 /dev/urandom >"$t/v8k"
head -c 65536 /dev/urandom >"$t/v64k"
forced() { # PATH FILE WANT_PUT WANT_GET
	local p=$1 f=$2 name
	name="path $p: put $(wc -c <"$f") B"
	check "$name (took $3)" path_is "$3" r --verbose --path "$p" put "$k:$p" --file "$f"
	check "path $p: get byte-exact" same_bytes "$f" r --path "$p" get "$k:$p"
	check "path $p: get took $4" path_is "$4" r --verbose --path "$p" get "$k:$p"
}
if [ $rdma = 1 ]; then
	forced eager "$t/v8k" eager eager
	forced lazy "$t/v64k" lazy lazy
	forced bulk "$t/v64k" bulk lazy # BULK carries requests; a 64 kB reply is LAZY
	check "path bulk: large-get big:256k" r --path bulk large-get big:256k
else
	for p in eager lazy bulk; do skip "path $p" "fabric tcp has no RDMA paths"; done
fi
forced tcp "$t/v64k" tcp tcp

# ---- fallback: RDMA down, calls still work over TCP ------------------------------
if [ $rdma = 1 ]; then
	check "agent-ctl simulate-rdma-down on" r agent-ctl "simulate-rdma-down on"
	check "RDMA down: ping still answers" r ping
	check "RDMA down: get byte-exact" same_bytes "$t/v100k" r get "$k:a"
	check "RDMA down: the get went over TCP" path_is tcp r --verbose get "$k:a"
	check "RDMA down: put" r put "$k:c" "after the fall"
	check "RDMA down: put's value reads back" same_bytes <(printf 'after the fall') r get "$k:c"
	check "agent-ctl simulate-rdma-down off" r agent-ctl "simulate-rdma-down off"
	check "RDMA back: forced lazy get byte-exact" same_bytes "$t/v100k" r --path lazy get "$k:a"
else
	skip "fallback" "fabric tcp: no RDMA to lose"
fi

# ---- the LAZY object lifecycle -----------------------------------------------------
if [ $rdma = 1 ]; then
	check "lifecycle 200" r lifecycle 200
	check "lifecycle stale" r lifecycle stale
	check "lifecycle repeat-reclaim" r lifecycle repeat-reclaim
	if [ "${RDMEM_SKIP_TTL:-0}" = 1 ]; then
		skip "lifecycle timeout" "RDMEM_SKIP_TTL=1"
	else
		check "lifecycle timeout (waits for the server's --object-ttl)" r lifecycle timeout
	fi
else
	skip "lifecycle" "fabric tcp: no LAZY objects"
fi

for key in "$k:a" "$k:c" "$k:eager" "$k:lazy" "$k:bulk" "$k:tcp"; do
	r del "$key" >/dev/null 2>&1
done
[ $skipped -gt 0 ] && echo "# $skipped skipped"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
