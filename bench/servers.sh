#!/usr/bin/env bash
# servers.sh - many servers (issue 17): the same calls through an agent with
# one server and through one with three, same options, in one run; then how
# many keys a fourth server moves, measured end to end. Three (later four)
# rdmem-server over the shm fabric on this host, agents with default options.
# A measurement, not a test: it prints what it sees and fails only when it
# cannot measure (or a value comes back wrong, which rdmem bench checks).
#   bench/servers.sh OUT BIN [N]   writes OUT/servers.md and OUT/servers.json
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=$1 bin=$2 n=${3:-20000}
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "servers.sh: N must be a positive number" >&2; exit 2; }
work=$(mktemp -d)
export RDMEM_RUNTIME_DIR=$work
pids=()
stop() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap stop EXIT
# shellcheck source=scripts/local-stack.sh
. "$here/scripts/local-stack.sh"

read -r -a ports <<<"$(ls_free_ports 4)"
start_server() { # INDEX
	local p=${ports[$1]}
	"$bin/rdmem-server" -b 127.0.0.1 -p "$p" --tcp-port $((p + 1)) --fabric shm \
		>"$work/server$1.log" 2>&1 &
	pids+=($!)
	ls_wait_log "$work/server$1.log" "listening tcp" 10
}
start_agent() { # NAME SERVERS...   (one -s list, or --servers-file)
	local name=$1
	shift
	"$bin/rdmem-agent" "$@" --fabric shm --shm-name "/$name" --slots 32 >"$work/$name.log" 2>&1 &
	pids+=($!)
	ls_wait_log "$work/$name.log" "ready:" 10
	ls_wait_log "$work/$name.log" "rdma: session" 10
}
for i in 0 1 2 3; do start_server "$i"; done
one=127.0.0.1:${ports[0]}
three=$one,127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}
start_agent one -s "$one"
printf '%s\n' "$one" "127.0.0.1:${ports[1]}" "127.0.0.1:${ports[2]}" >"$work/servers"
start_agent three --servers-file "$work/servers"
# every rdma session up before timing
for _ in $(seq 100); do [ "$(grep -c 'rdma: session' "$work/three.log")" -ge 3 ] && break; sleep 0.1; done

# "qps p50 p99" of one rdmem bench run
run() { # AGENT OP WINDOW COUNT
	"$bin/rdmem" --shm-name "/$1" bench --op "$2" --window "$3" -n "$4" --keys 1000 --json |
		python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["wrong"] == 0 and d["failures"] == 0, d; print("%.0f %.1f %.1f" % (d["qps"], d["p50_us"], d["p99_us"]))'
}
rows=()
for spec in "get 1 $((n / 4))" "get 32 $n" "mget 1 $((n / 8))" "mget 8 $((n / 4))"; do
	read -r op w cnt <<<"$spec"
	read -r q1 p1 t1 <<<"$(run one "$op" "$w" "$cnt")"
	read -r q3 p3 t3 <<<"$(run three "$op" "$w" "$cnt")"
	rows+=("$op $w $q1 $p1 $t1 $q3 $p3 $t3")
done

# Key movement: 10,000 keys through three servers, then a fourth joins
# (agent-ctl reload) and every key is put again: the new server then holds
# exactly the keys that moved, and if none moved between the old three,
# their key counts did not change. The rdmem tool alone (a sanitizer
# build's librdmem cannot load into python3), python3 only to read JSON.
keys=10000
counts() { # the kv.keys of each server, in list order
	"$bin/rdmem" --shm-name /three stats --json |
		python3 -c 'import json,sys; d=json.load(sys.stdin)["servers"]; print(" ".join(str(d[n]["kv"]["keys"]) for n in sys.argv[1:]))' "$@"
}
put_all() {
	"$bin/rdmem" --shm-name /three bench --op put --keys "$keys" -n "$keys" --size 16 --json |
		python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["failures"] == 0, d'
}
old3=("127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" "127.0.0.1:${ports[2]}")
put_all
read -r -a before <<<"$(counts "${old3[@]}")"
echo "127.0.0.1:${ports[3]}" >>"$work/servers"
"$bin/rdmem" --shm-name /three agent-ctl reload >/dev/null
put_all
read -r -a after <<<"$(counts "${old3[@]}" "127.0.0.1:${ports[3]}")"
moved=${after[3]}
unchanged=1
for i in 0 1 2; do [ "${before[$i]}" = "${after[$i]}" ] || unchanged=0; done

{
	echo "## Many servers: one agent, one server vs three (bench/servers.sh)"
	echo
	echo "Same agent and server options (agents at --slots 32 for window 32); three rdmem-server and the agents on this host over the shm fabric; 1,000 keys of 64 B; every value checked. MGET asks for 16 keys a call (with three servers: split into up to three parts, merged in order)."
	echo
	echo "| op | window | 1 server ops/s | p50 µs | p99 µs | 3 servers ops/s | p50 µs | p99 µs |"
	echo "|---|---|---|---|---|---|---|---|"
	for r in "${rows[@]}"; do
		read -r op w q1 p1 t1 q3 p3 t3 <<<"$r"
		echo "| $op | $w | $q1 | $p1 | $t1 | $q3 | $p3 | $t3 |"
	done
	echo
	echo "Adding a fourth server (agent-ctl reload) to three holding $keys keys, then putting every key again: the new server took $moved keys ($(python3 -c "print('%.1f' % (100 * $moved / $keys))") %; rendezvous hashing moves 1/4 = 25 % on average). The old three held ${before[*]} keys before and ${after[*]:0:3} after: $([ "$unchanged" = 1 ] && echo "unchanged, so no key moved between them" || echo "CHANGED: keys moved between old servers")."
} >"$out/servers.md"
python3 - "$out/servers.json" "$moved" "$unchanged" "$keys" "${rows[@]}" <<'EOF'
import json, sys
rows = [dict(zip(["op", "window", "qps_1", "p50_1", "p99_1", "qps_3", "p50_3", "p99_3"], r.split())) for r in sys.argv[5:]]
json.dump({"rows": rows, "moved": int(sys.argv[2]), "old_servers_unchanged": sys.argv[3] == "1", "keys": int(sys.argv[4])}, open(sys.argv[1], "w"), indent=1)
EOF
cat "$out/servers.md"
