#!/usr/bin/env bash
# kv_default.sh - rdmem-server's default --kv-max-bytes is half of the memory
# it may use: the machine's, or its memory cgroup's limit when that is lower
# (inside a container the machine's memory bounds nothing). Starts the server
# in a fresh child memory cgroup limited to 512 MiB (v1 or v2, whichever this
# process is in) and reads the limit it resolved from its log: 256 MiB.
# Prints "ok - " / "not ok - " / "ok - ... # SKIP ..." lines. Needs RDMEM_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${RDMEM_BIN:-build}
limit=$((512 << 20))

# The directory of this process's memory cgroup, v2 first.
memory_cgroup() {
	local v2 v1
	v2=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
	if [ -n "$v2" ] && grep -qw memory "/sys/fs/cgroup$v2/cgroup.controllers" 2>/dev/null; then
		echo "/sys/fs/cgroup${v2%/}"
		return
	fi
	v1=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
	if [ -n "$v1" ] && [ -d "/sys/fs/cgroup/memory$v1" ]; then
		echo "/sys/fs/cgroup/memory${v1%/}"
	fi
}

parent=$(memory_cgroup)
cg=${parent:+$parent/rdmem-kv-default-$$}
if [ -z "$parent" ] || ! mkdir "$cg" 2>/dev/null; then
	echo "ok - default --kv-max-bytes follows the cgroup # SKIP no writable memory cgroup here (needs root)"
	exit 0
fi
log=$(mktemp /tmp/rdmem-kv-default.XXXXXX)
cleanup() {
	[ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rmdir "$cg" 2>/dev/null || true
	rm -f "$log"
}
trap cleanup EXIT
if [ -f "$cg/memory.max" ]; then
	echo "$limit" >"$cg/memory.max"
else
	echo "$limit" >"$cg/memory.limit_in_bytes"
fi
(echo "$BASHPID" >"$cg/cgroup.procs" && exec "$bin/rdmem-server" -b 127.0.0.1 --tcp-port 0 \
	--fabric none) >"$log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	grep -q "listening tcp" "$log" && break
	sleep 0.05
done
# The server logs the limit it resolved and where it came from.
if grep -q "kv: at most $((limit >> 21)) MiB of keys and values, half of this process's cgroup memory limit" "$log"; then
	echo "ok - default --kv-max-bytes is half of the cgroup's 512 MiB"
else
	echo "not ok - default --kv-max-bytes in a 512 MiB cgroup: want $((limit >> 21)) MiB from the cgroup"
	cat "$log"
	exit 1
fi
