#!/usr/bin/env bash
# collect_env.sh - scripts/collect_env.sh writes logs/env_<host>_<time>.log
# with every section, exits 0, and on a host without RDMA says so.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/tap.sh
. tests/tap.sh env
set +e
log=$(scripts/collect_env.sh --out "$tmp" 2>"$tmp/err")
rc=$?
set -e
expect "collect_env exits 0" [ "$rc" = 0 ]
expect "log named env_<host>_<timestamp>.log" \
	bash -c "[[ '$log' =~ ^$tmp/env_[A-Za-z0-9._-]+_[0-9]{8}_[0-9]{6}\.log$ ]] && [ -s '$log' ]"
for s in "kernel and distribution" "RDMA devices" "netdev <-> RDMA device map, MTUs" \
	"memory: locked-memory limit, hugepages" "io_uring" "CPU and NUMA"; do
	expect "section: $s" grep -qF "== $s" "$log"
done
expect "reports ulimit -l" grep -q "^ulimit -l (this shell): " "$log"
expect "reports whether io_uring works" grep -Eq "^io_uring_setup: (works|fails)" "$log"
if [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
	expect "lists the RDMA devices" grep -q "^device " "$log"
else
	expect "says that RDMA is absent" grep -q "(absent: no RDMA device" "$log"
fi
expect "refuses an unknown option" bash -c "! scripts/collect_env.sh --frob 2>/dev/null"
exit $failed
