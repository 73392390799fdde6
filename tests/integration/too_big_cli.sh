#!/usr/bin/env bash
# too_big_cli.sh - a server with a small request ring (--ring-slots 4, the
# other side at its defaults): a PUT within both max values but over the
# ring is refused on a forced RDMA path (exit 3) with the ring named as the
# reason, and goes through on AUTO (over TCP), byte-exact. Prints "ok - " /
# "not ok - " lines. Needs RDMEM_BIN.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=tests/tap.sh
. tests/tap.sh too_big_cli stack
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
r() { "$bin/rdmem" --shm-name /toobig "$@"; }

read -r port <<<"$(ls_free_ports 1)"
"$bin/rdmem-server" -b 127.0.0.1 -p "$port" --tcp-port $((port + 1)) --fabric shm \
	--ring-slots 4 >"$tmp/server.log" 2>&1 &
pids+=($!)
ls_wait_log "$tmp/server.log" "listening tcp" 10
"$bin/rdmem-agent" -s "127.0.0.1:$port" --fabric shm --shm-name /toobig >"$tmp/agent.log" 2>&1 &
pids+=($!)
ls_wait_log "$tmp/agent.log" "ready:" 10
head -c 200000 /dev/urandom >"$tmp/v"
check "a 200000-byte PUT forced onto BULK is refused" 3 r --path bulk put k --file "$tmp/v"
expect "... naming the request ring, not the max value" grep -q "fit the server's request ring" "$tmp/err"
check "AUTO carries it" 0 r put k --file "$tmp/v"
check "... and it reads back" 0 r get k
expect "... byte-exact" cmp -s "$tmp/out" "$tmp/v"
exit $failed
