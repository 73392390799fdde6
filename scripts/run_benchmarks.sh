#!/usr/bin/env bash
# run_benchmarks.sh [--fabric verbs|shm|tcp] [--tcp-port N] HOST PORT N
#
# The benchmark matrix against a live rdmem-server, through an rdmem-agent
# of our own (scripts/ops_agent.sh: private socket, removed on exit): every
# op `rdmem bench` offers, at each size, forced path and window, N calls a
# cell, every reply's value checked by rdmem bench. One table from one run:
# ops/s, p50 and p99 latency (us), and the paths the replies took. Exit 1
# when a cell failed (a call failed or a value was wrong), 2 on bad usage.
#
# Trim the matrix with (space-separated lists):
#   RDMEM_BENCH_OPS     default "ping local-ping get put large-get bigput"
#   RDMEM_BENCH_SIZES   default "32 4k 64k 1m" (ping/local-ping have none;
#                       large-get and bigput take the sizes of 4k and more)
#   RDMEM_BENCH_PATHS   default "auto eager lazy bulk tcp" (RDMA ones left
#                       out on fabric tcp; local-ping never leaves the agent)
#   RDMEM_BENCH_WINDOWS default "1 32"
set -u
# shellcheck source=scripts/ops_agent.sh
. "$(dirname "$0")/ops_agent.sh"
trap ops_cleanup EXIT
trap 'exit 130' INT TERM HUP
OPS_USAGE_REST=" N"
ops_parse_args "$@"
[ ${#OPS_REST[@]} -eq 1 ] || ops_usage
n=${OPS_REST[0]}
case $n in '' | *[!0-9]* | 0) echo "$0: N must be a positive number of calls" >&2 && ops_usage ;; esac

ops=${RDMEM_BENCH_OPS:-ping local-ping get put large-get bigput}
sizes=${RDMEM_BENCH_SIZES:-32 4k 64k 1m}
paths=${RDMEM_BENCH_PATHS:-auto eager lazy bulk tcp}
windows=${RDMEM_BENCH_WINDOWS:-1 32}
maxw=1
for w in $windows; do [ "$w" -gt "$maxw" ] && maxw=$w; done

# Slots for the widest window; two clients keep the segment small.
ops_start_agent --clients 2 --slots "$maxw" || exit 1
if [ "$OPS_FABRIC" = tcp ]; then
	paths=$(for p in $paths; do case $p in auto | tcp) echo "$p" ;; esac; done)
fi

bytes() { # 4k -> 4096
	case $1 in
	*k) echo $((${1%k} * 1024)) ;;
	*m) echo $((${1%m} * 1048576)) ;;
	*) echo "$1" ;;
	esac
}
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" "$OPS_TMP/bench.json"; }

cells=0 bad=0
printf '%-10s %8s %-5s %6s %10s %10s %10s  %-22s %s\n' op size path window ops/s "p50 us" \
	"p99 us" "reply paths" status
# cell OP SIZE PATH WINDOW: one rdmem bench run, one table row.
cell() {
	local op=$1 size=$2 path=$3 w=$4 sz=() st rp
	[ "$size" != - ] && sz=(--size "$size")
	cells=$((cells + 1))
	ops_wait ops_rdmem --path "$path" bench --op "$op" -n "$n" --window "$w" "${sz[@]}" --json \
		>"$OPS_TMP/bench.json" 2>"$OPS_TMP/bench.err"
	st=$?
	rp=$(sed -n 's/.*"paths":{\([^}]*\)}.*/\1/p' "$OPS_TMP/bench.json" | tr -d '"')
	if [ $st -eq 0 ]; then
		printf '%-10s %8s %-5s %6s %10.0f %10.2f %10.2f  %-22s ok\n' "$op" "$size" "$path" \
			"$w" "$(field qps)" "$(field p50_us)" "$(field p99_us)" "$rp"
		return
	fi
	bad=$((bad + 1))
	printf '%-10s %8s %-5s %6s %10s %10s %10s  %-22s FAILED: %s\n' "$op" "$size" "$path" "$w" \
		- - - "${rp:--}" "$(grep -v '^{' "$OPS_TMP/bench.err" | tr '\n' ' ' | cut -c1-160)"
}

for op in $ops; do
	case $op in
	ping | local-ping) op_sizes=- ;;
	large-get | bigput)
		op_sizes=$(for s in $sizes; do [ "$(bytes "$s")" -ge 4096 ] && echo "$s"; done)
		;;
	*) op_sizes=$sizes ;;
	esac
	op_paths=$paths
	[ "$op" = local-ping ] && op_paths=auto
	for size in $op_sizes; do
		for path in $op_paths; do
			for w in $windows; do
				cell "$op" "$size" "$path" "$w"
			done
		done
	done
done
echo "# $cells cells of $n calls each against $OPS_HOST:$OPS_PORT (fabric $OPS_FABRIC); $bad failed"
[ $bad -eq 0 ]
