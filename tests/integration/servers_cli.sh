#!/usr/bin/env bash
# servers_cli.sh - an agent with several servers, from the command line: a
# bad -s list or --servers-file is refused at start with the entry and the
# limit named (exit 2); with two servers, `rdmem get` of a key whose server
# is down fails (exit 3) naming that server, a key on the other still
# answers; stats have a section per server; a reload with a bad file keeps
# the running list. Prints "ok - " / "not ok - " lines. Needs RDMEM_BIN.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=tests/tap.sh
. tests/tap.sh servers_cli stack
bin=$bdir
export RDMEM_RUNTIME_DIR=$tmp
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
agent() { "$bin/rdmem-agent" --fabric shm --shm-name /srvcli "$@"; }
r() { "$bin/rdmem" --shm-name /srvcli "$@"; }

# ---- refused at start -------------------------------------------------------------
check "-s with an empty entry is refused" 2 agent -s a,,b
expect "... naming it" grep -q "empty server" "$tmp/err"
check "-s with port 65535 is refused" 2 agent -s h:65535
expect "... naming the range" grep -q "1..65534" "$tmp/err"
check "-s with a quote in a host is refused" 2 agent -s 'a"b'
check "-s naming a server twice is refused" 2 agent -s h,h:7471
expect "... saying so" grep -q "listed twice" "$tmp/err"
hosts=$(seq -f 'h%g' 1 65 | paste -sd,)
check "-s with 65 servers is refused" 2 agent -s "$hosts"
expect "... naming the limit" grep -q "more than 64" "$tmp/err"
check "-s and --servers-file together are refused" 2 agent -s h --servers-file /dev/null
mkfifo "$tmp/fifo"
check "a FIFO as --servers-file is refused (not blocked on)" 2 timeout 10 "$bin/rdmem-agent" --fabric shm --shm-name /srvcli --servers-file "$tmp/fifo"
expect "... as not a regular file" grep -q "not a regular file" "$tmp/err"

# ---- two servers -----------------------------------------------------------------
read -r p1 p2 <<<"$(ls_free_ports 2)"
for p in "$p1" "$p2"; do
	"$bin/rdmem-server" -b 127.0.0.1 -p "$p" --tcp-port $((p + 1)) --fabric shm >"$tmp/server$p.log" 2>&1 &
	pids+=($!)
	ls_wait_log "$tmp/server$p.log" "listening tcp" 10
done
dead_pid=${pids[1]}
printf '127.0.0.1:%s\n127.0.0.1:%s\n' "$p1" "$p2" >"$tmp/servers"
read -r mport <<<"$(ls_free_ports 1)"
"$bin/rdmem-agent" --fabric shm --shm-name /srvcli --servers-file "$tmp/servers" \
	--metrics-port "$mport" >"$tmp/agent.log" 2>&1 &
pids+=($!) # the agent itself, not a subshell: cleanup's kill must reach it
ls_wait_log "$tmp/agent.log" "ready:" 10
expect "the ready line names both servers" grep -q "servers 127.0.0.1:$p1,127.0.0.1:$p2" "$tmp/agent.log"
for i in $(seq 1 40); do r put "key$i" "value$i" >/dev/null || failed=1; done
check "stats answer" 0 r stats
expect "stats have a section per server" test "$(grep -c '^server 127.0.0.1:' "$tmp/out")" -eq 2
# /metrics: one family each, a sample per server labelled with its name.
probe="python3 $root/tests/tools/http_probe.py"
$probe get "$mport" /metrics | awk 'body { print } /^$/ && !body { body = 1 }' >"$tmp/metrics"
fmt_ok() { $probe format "$1" >"$1.format" || { sed 's/^/#   /' "$1.format"; false; }; }
expect "/metrics is valid exposition format" fmt_ok "$tmp/metrics"
expect "/metrics: link_up of each server, labelled" \
	test "$(grep -cE "^rdmem_agent_link_up\{server=\"127.0.0.1:($p1|$p2)\"\} 1$" "$tmp/metrics")" -eq 2
expect "/metrics: each family's TYPE once" \
	test "$(grep -c '^# TYPE rdmem_agent_link_up ' "$tmp/metrics")" -eq 1
expect "/metrics: a label counter keeps its value label" \
	grep -qE "^rdmem_agent_fabric\{server=\"127.0.0.1:$p1\",value=\"shm\"\} 1$" "$tmp/metrics"
printf 'h:0\n' >"$tmp/servers.bad"
cp "$tmp/servers" "$tmp/servers.good"
cp "$tmp/servers.bad" "$tmp/servers"
check "a reload of a bad file is refused" 3 r agent-ctl reload
cp "$tmp/servers.good" "$tmp/servers"
check "... and the running list stays" 0 r agent-stats
expect "... (two sections)" test "$(grep -c '^server 127.0.0.1:' "$tmp/out")" -eq 2

kill -9 "$dead_pid"
# One key on each server (the hash decides; the CLI names the owner).
on_dead= on_live=
for i in $(seq 1 40); do
	if r --timeout 6000 get "key$i" >"$tmp/out" 2>"$tmp/err"; then
		[ -z "$on_live" ] && [ "$(cat "$tmp/out")" = "value$i" ] && on_live=key$i
	elif [ -z "$on_dead" ]; then
		on_dead=key$i
		cp "$tmp/err" "$tmp/dead.err"
	fi
	[ -n "$on_dead" ] && [ -n "$on_live" ] && break
done
expect "a key on the live server still answers, byte-exact" test -n "$on_live"
expect "a key on the killed server fails" test -n "$on_dead"
expect "... with no path to the server" grep -q "no path to the server" "$tmp/dead.err"
expect "... naming the killed server as down" grep -q "key is on server 127.0.0.1:$p2, which is down" "$tmp/dead.err"
check "stats with a server down still answer" 0 r --timeout 6000 stats
expect "... the live server's section" grep -q "^server 127.0.0.1:$p1\$" "$tmp/out"
dead_says() { grep -A1 "^server 127.0.0.1:$p2\$" "$tmp/out" | grep -q "^error unreachable"; }
expect "... and the dead one's says why" dead_says
check "mget over both fails whole" 3 r --timeout 6000 mget "$on_live,$on_dead"
expect "... naming the server that is down" grep -q "server 127.0.0.1:$p2 is down" "$tmp/err"

# Down for over 3 s, then back: the first call after its restart finds it
# (a dial of its own within 100 ms), not up to 2 s of backoff later.
sleep 1
"$bin/rdmem-server" -b 127.0.0.1 -p "$p2" --tcp-port $((p2 + 1)) --fabric shm >"$tmp/server$p2.b.log" 2>&1 &
pids+=($!)
ls_wait_log "$tmp/server$p2.b.log" "listening tcp" 10
check "the restarted server takes the first call for its key" 0 r --timeout 3000 put "$on_dead" again
check "... and answers it back" 0 r --timeout 3000 get "$on_dead"
expect "... byte-exact" test "$(cat "$tmp/out")" = again

[ "$failed" -eq 0 ]
