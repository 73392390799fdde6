#!/usr/bin/env bash
# demo.sh - the main job in one command (`make demo`): installs what the build
# needs, builds, starts rdmem-server and rdmem-agent on this host (shm fabric:
# the real data plane, no NIC needed), tours every CLI verb and runs a short
# benchmark, then stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
make -j"$(nproc)" >/dev/null

B=build
port=$((20000 + RANDOM % 20000))
shm=/rdmem-demo-$$
img=$(mktemp -d /tmp/rdmem-demo-img.XXXXXX)
logs=$(mktemp -d /tmp/rdmem-demo-logs.XXXXXX)
cleanup() {
	[ -n "${agent:-}" ] && kill "$agent" 2>/dev/null && wait "$agent" 2>/dev/null || true
	[ -n "${server:-}" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
	rm -rf "$img"
}
trap cleanup EXIT

wait_for() { # file text
	for _ in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
	echo "demo: '$2' never appeared in $1:" >&2; cat "$1" >&2; exit 1
}

$B/rdmem-server -b 127.0.0.1 -p "$port" --fabric shm --image-dir "$img" >"$logs/server.log" 2>&1 &
server=$!
wait_for "$logs/server.log" "listening shm"
$B/rdmem-agent -s 127.0.0.1 -p "$port" --fabric shm --shm-name "$shm" --clients 4 --slots 32 \
	>"$logs/agent.log" 2>&1 &
agent=$!
wait_for "$logs/agent.log" "rdma: session"

r() { echo "\$ rdmem $*"; $B/rdmem --shm-name "$shm" "$@"; echo; }
r --verbose ping
r echo "hello, rdma"
r --verbose put user:42 '{"name":"ada","plan":"pro"}'
r --verbose get user:42
r mget user:42,user:missing
r profile 1001
r --verbose large-get big:256k
head -c 3000000 /dev/urandom >"$logs/photo.jpg"
r image-put photo.jpg "$logs/photo.jpg"
cmp "$logs/photo.jpg" "$img/photo.jpg" && echo "photo.jpg arrived byte-exact"
r --path tcp --verbose get user:42
r del user:42
r get user:42 || echo "(exit $?: not found, as expected)"
r bench --op get -n 20000 --window 1
r bench --op get -n 50000 --window 32
r bench --op large-get --size 1m -n 500 --window 4
r agent-stats
echo "demo: done (logs in $logs)"
