#!/usr/bin/env bash
# netns_cut.sh - "two hosts" on one machine: rdmem-server in one network
# namespace, rdmem-agent in another, joined by a veth pair (addresses exist
# only inside those namespaces). Under load, the link is cut for 3 s and
# restored: calls fail cleanly during the cut (within their timeout, with a
# clear error), succeed again after, and nothing hangs. The RDMA paths cannot
# cross namespaces here (no NIC; the shm fabric is same-host), so the agent
# runs --fabric tcp: this is the fallback path's cross-host test.
set -u
B=${RDMEM_BIN:-build}
tag=$$
nsS=rdmS$tag nsA=rdmA$tag vS=rdvS$tag vA=rdvA$tag
addrS=198.18.77.1 addrA=198.18.77.2
port=$((20000 + tag % 20000))
shm=/rdmem-ns$tag
log=$(mktemp -d /tmp/rdmem-netns.XXXXXX)
timeout_ms=800

cleanup() {
	[ -n "${loadpid:-}" ] && kill "$loadpid" 2>/dev/null
	[ -n "${agent:-}" ] && kill "$agent" 2>/dev/null
	[ -n "${server:-}" ] && kill "$server" 2>/dev/null
	wait 2>/dev/null
	ip netns del "$nsS" 2>/dev/null
	ip netns del "$nsA" 2>/dev/null
	rm -f "${RDMEM_RUNTIME_DIR:-/run/rdmem}$shm.sock"
	rm -rf "$log"
}
trap cleanup EXIT

if ! ip netns add "$nsS" 2>/dev/null || ! ip netns add "$nsA" 2>/dev/null; then
	echo "ok - netns link cut # SKIP cannot create network namespaces here (needs root and iproute2)"
	exit 0
fi
ip link add "$vS" type veth peer name "$vA" &&
	ip link set "$vS" netns "$nsS" && ip link set "$vA" netns "$nsA" &&
	ip -n "$nsS" addr add "$addrS/30" dev "$vS" && ip -n "$nsA" addr add "$addrA/30" dev "$vA" &&
	ip -n "$nsS" link set "$vS" up && ip -n "$nsA" link set "$vA" up &&
	ip -n "$nsS" link set lo up && ip -n "$nsA" link set lo up || {
	echo "not ok - netns: could not build the veth link"
	exit 1
}

wait_log() { # file text
	for _ in $(seq 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
	echo "#   '$2' never appeared in $1:"; sed 's/^/#   | /' "$1"; return 1
}

ip netns exec "$nsS" "$B/rdmem-server" -b "$addrS" -p "$port" --fabric none >"$log/server.log" 2>&1 &
server=$!
wait_log "$log/server.log" "listening tcp" || { echo "not ok - netns: server start"; exit 1; }
ip netns exec "$nsA" "$B/rdmem-agent" -s "$addrS" -p "$port" --fabric tcp --shm-name "$shm" \
	--clients 4 --slots 4 >"$log/agent.log" 2>&1 &
agent=$!
wait_log "$log/agent.log" "ready:" || { echo "not ok - netns: agent start"; exit 1; }

R() { timeout 5 "$B/rdmem" --shm-name "$shm" --timeout "$timeout_ms" "$@"; }
if R put netns-key value >/dev/null && [ "$(R get netns-key)" = value ]; then
	echo "ok - netns: calls cross the veth between two namespaces"
else
	echo "not ok - netns: calls cross the veth between two namespaces"
fi

# Load: one call at a time, each line "<start ms> <duration ms> <exit status>".
load() {
	while :; do
		t0=$(date +%s%3N)
		R put netns-key value >/dev/null 2>&1
		rc=$?
		echo "$t0 $(($(date +%s%3N) - t0)) $rc"
	done
}
load >"$log/calls" &
loadpid=$!
sleep 2
cut_at=$(date +%s%3N)
ip -n "$nsA" link set "$vA" down
sleep 3
ip -n "$nsA" link set "$vA" up
up_at=$(date +%s%3N)
sleep 8
kill "$loadpid"
wait "$loadpid" 2>/dev/null
loadpid=

awk -v cut="$cut_at" -v up="$up_at" -v tmo="$timeout_ms" '
	{ n++; if ($3 == 124) hung++; if ($2 > tmo + 1500) slow++
	  if ($1 < cut && $3 == 0) before++
	  if ($1 >= cut + 100 && $1 + $2 < up && $3 != 0) failed_in_cut++
	  if ($1 >= cut + 100 && $1 + $2 < up && $3 == 0) ok_in_cut++
	  if ($1 > up + 5000) { late++; if ($3 == 0) late_ok++ } }
	END { printf "# %d calls: %d ok before the cut, %d failed and %d ok during it, %d/%d ok from 5 s after\n",
		n, before, failed_in_cut, ok_in_cut, late_ok, late
	      printf "%s - netns: calls succeed before the cut\n", (before > 0) ? "ok" : "not ok"
	      printf "%s - netns: calls during the cut fail cleanly, within their timeout\n",
		((failed_in_cut > 0) && ok_in_cut == 0 && !slow && !hung) ? "ok" : "not ok"
	      printf "%s - netns: calls succeed again after the link is back\n",
		((late > 0) && late_ok == late) ? "ok" : "not ok" }' "$log/calls"
if grep -q "lost the connection" "$log/agent.log"; then
	echo "# the agent saw the connection die and redialled"
fi
