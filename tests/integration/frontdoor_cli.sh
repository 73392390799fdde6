#!/usr/bin/env bash
# frontdoor_cli.sh - every verb of the `rdmem` CLI against a real front door
# (tests/tools/fd_loopback: the agent's front door with a loopback responder
# instead of a server): outputs, exit codes, argument validation, bench.
# Prints one "ok - " / "not ok - " line per case. Needs RDMEM_BIN.
set -u
bin=${RDMEM_BIN:-build}
rdmem=$bin/rdmem
loop=$bin/tests/fd_loopback
if [ ! -x "$rdmem" ] || [ ! -x "$loop" ]; then
	# Both are built by make test: missing is a failure, not a skip.
	echo "not ok - frontdoor_cli: $rdmem or $loop not built (run make)"
	exit 1
fi
name=/rdmem-cli-$$
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh" frontdoor_cli # $tmp, $failed, check, expect
agent=
cleanup() {
	[ -n "$agent" ] && kill "$agent" 2>/dev/null && wait "$agent" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

r() { "$rdmem" --shm-name "$name" "$@"; }

"$loop" --shm-name "$name" --clients 2 --slots 32 --max-value 1m >"$tmp/agent.out" 2>"$tmp/agent.err" &
agent=$!
for _ in $(seq 100); do grep -q ready "$tmp/agent.out" 2>/dev/null && break; sleep 0.05; done
expect "fd_loopback is ready" grep -q ready "$tmp/agent.out"

check "ping" 0 r ping
check "local-ping" 0 r local-ping
check "echo" 0 r echo "hello world"
expect "echo prints the text" [ "$(cat "$tmp/out")" = "hello world" ]
check "put" 0 r put color blue
check "get" 0 r get color
expect "get writes the raw value" [ "$(cat "$tmp/out")" = "blue" ]
check "get --verbose" 0 r --verbose --path lazy get color
expect "--verbose names the path and latency" grep -q "path lazy, latency" "$tmp/err"
head -c 300000 /dev/urandom >"$tmp/blob"
check "put --file (binary, 300 kB)" 0 r put blob --file "$tmp/blob"
r get blob >"$tmp/blob.back" 2>/dev/null
expect "get returns the file byte-exact" cmp -s "$tmp/blob" "$tmp/blob.back"
check "mget" 0 r mget color,nothing,color
expect "mget marks missing keys" grep -q "nothing	(missing)" "$tmp/out"
check "profile" 0 r profile 1001
expect "profile decodes" grep -q "name: profile-1001" "$tmp/out"
check "large-get" 0 r large-get big:64k
expect "large-get verifies" grep -q "65536 bytes, verified" "$tmp/out"
head -c 100000 /dev/urandom >"$tmp/img"
check "image-put" 0 r image-put cat "$tmp/img" --chunk-size 7000
r get image:cat >"$tmp/img.back" 2>/dev/null
expect "image arrives byte-exact" cmp -s "$tmp/img" "$tmp/img.back"
check "stats --json" 0 r stats --json
expect "stats --json is JSON" grep -q '^{"served":' "$tmp/out"
check "agent-stats" 0 r agent-stats
expect "agent-stats shows the front door" grep -q "frontdoor.local_pings" "$tmp/out"
check "agent-ctl" 0 r agent-ctl "fault none"
check "del" 0 r del color
check "get after del: not found" 1 r get color
check "del again: not found" 1 r del color
check "bench get, window 32" 0 r bench --op get -n 5000 --window 32 --size 1k --json
expect "bench reports every op and no failure" grep -q '"ops":5000.*"failures":0,"timeouts":0,"wrong":0' "$tmp/out"
check "bench put" 0 r bench --op put -n 2000 --window 8
check "bench bigput" 0 r bench --op bigput -n 50 --window 4 --size 256k
check "bench large-get" 0 r bench --op large-get -n 200 --window 4 --size 64k
check "bench ping, forced tcp path" 0 r --path tcp bench --op ping -n 1000 --json
expect "bench counts the path taken" grep -q '"paths":{"tcp":1000}' "$tmp/out"
check "bench local-ping" 0 r bench --op local-ping -n 5000 --window 16
# --gap-us, both ends of 0..1000000: the pause is not timed, so a 100 ms gap
# leaves the p50 well under it, and three calls take at least 0.2 s.
check "bench --gap-us 0" 0 r bench --op get -n 200 --gap-us 0 --json
t0=$(date +%s%N)
check "bench --gap-us 100000" 0 r bench --op get -n 3 --gap-us 100000 --json
t1=$(date +%s%N)
expect "bench --gap-us pauses between calls" test $(((t1 - t0) / 1000000)) -ge 200
expect "bench --gap-us is not in the latency" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d["ops"] == 3 and d["p50_us"] < 50000))' "$tmp/out"
check "bench --gap-us 1000000 (the top)" 0 r bench --op ping -n 2 --gap-us 1000000
r agent-ctl "corrupt-get on" >/dev/null 2>&1
check "bench get catches wrong values" 3 r bench --op get -n 100 --window 4
expect "bench names the wrong values" grep -q "wrong value" "$tmp/err"
r agent-ctl "corrupt-get off" >/dev/null 2>&1

# Argument validation: exit 2 and a message, never a crash or a call.
check "no command" 2 r
check "unknown command" 2 r frobnicate
check "unknown option" 2 r --frob ping
check "bad path" 2 r --path warp ping
check "bad timeout" 2 r --timeout 0 ping
check "timeout needs a value" 2 r ping --timeout
check "put needs a value" 2 r put onlykey
check "get takes one key" 2 r get a b
check "--json is not for get" 2 r get a --json
check "empty key" 2 r get ""
check "profile needs a number" 2 r profile abc
check "large-get needs big:N" 2 r large-get small:3
check "bench needs --op" 2 r bench
check "bench unknown op" 2 r bench --op fly
check "bench window over the slots" 2 r bench --op ping --window 33
check "bench -n 0" 2 r bench --op ping -n 0
check "bench --size junk" 2 r bench --op get --size 12q
check "bench size over max value" 2 r bench --op get --size 2m
check "bench --gap-us over 1000000" 2 r bench --op ping --gap-us 1000001
expect "the refusal names the limit" grep -q "1000000" "$tmp/err"
check "bench --gap-us negative" 2 r bench --op ping --gap-us -1
check "bench --gap-us with calls in flight" 2 r bench --op ping --gap-us 10 --window 2
expect "the refusal says why" grep -q "needs --window 1" "$tmp/err"
check "--gap-us is for bench only" 2 r ping --gap-us 5
check "image-put chunk over max value" 2 r image-put k "$tmp/img" --chunk-size 2m
check "bad --shm-name" 2 "$rdmem" --shm-name a/b ping
check "put --file missing file" 3 r put k --file "$tmp/nope"
check "image-put of a directory" 3 r image-put k "$tmp"
head -c 1048577 /dev/zero >"$tmp/toobig"
check "value over max value" 3 r put k --file "$tmp/toobig"
expect "over max value says too big" grep -q "too big" "$tmp/err"

kill "$agent" && wait "$agent" 2>/dev/null
agent=
check "no agent: one-line error, exit 3" 3 r ping
expect "no agent: clear message" grep -q "no rdmem agent" "$tmp/err"
exit $failed
