#!/usr/bin/env bash
# too_big_cli.sh - a server with a small request ring (--ring-slots 4, the
# agent at its defaults): a PUT within both max values but over the ring is
# refused on a forced RDMA path (exit 3) with the ring named as the reason,
# and goes through on AUTO (over TCP), byte-exact. Prints "ok - " /
# "not ok - " lines. Needs RDMEM_BIN.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/tap.sh
. tests/tap.sh too_big_cli stack
export RDMEM_RUNTIME_DIR=$tmp
r() { "$bdir/rdmem" --shm-name /toobig "$@"; }

ls_start_server "$tmp" --ring-slots 4 || exit 1
ls_start_agent "$tmp" /toobig || exit 1
head -c 200000 /dev/urandom >"$tmp/v"
check "a 200000-byte PUT forced onto BULK is refused" 3 r --path bulk put k --file "$tmp/v"
expect "... naming the request ring, not the max value" grep -q "fit the server's request ring" "$tmp/err"
check "AUTO carries it" 0 r put k --file "$tmp/v"
check "... and it reads back" 0 r get k
expect "... byte-exact" cmp -s "$tmp/out" "$tmp/v"
exit $failed
