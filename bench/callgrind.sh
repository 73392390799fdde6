# callgrind.sh - instructions per GET through each system's whole stack
# (client, rdmem-agent, server), sourced by scripts/bench.sh.
#
# Every process of a system runs under valgrind --tool=callgrind. The client
# runs twice, with A and A + CG_CALLS GETs (same warm-up); around each client
# run the servers' counters are zeroed (callgrind_control -z) and dumped (-d).
# Per process, (Ir[A + CG_CALLS] - Ir[A]) / CG_CALLS is the cost of one GET:
# start-up, connection set-up, preload and teardown cancel out. Instruction
# counts do not depend on the machine's load, so the figure is comparable run
# to run. For RDMemRPC the same difference of the agent's rdma.wqes and the
# server sessions' wqes gives the send WQEs (work requests) per GET, both
# directions. Writes $OUT/callgrind.json.
# Needs: OUT, LOGS, CG_CALLS, CPU_*, ACTIVE; procs.sh, systems.sh.

CG_BASE=200	 # GETs of the shorter client run
CG_WARMUP=100	 # the same warm-up in both client runs
CG_TIMEOUT=900	 # one client run under valgrind
# Window 1 counts the waiting too (spin, yield, time-driven checks, which
# run ~50x longer under valgrind); window 32 keeps the actors busy, so it
# counts mostly the work of a call.
CG_WINDOWS=(1 32)

# Sets VG to the valgrind command line writing to file $1; with "uring", the
# program's io_uring waits go through vg_uring_shim.so (valgrind 3.19 would
# freeze its other threads while one waits in io_uring_enter).
cg_vg() {
	VG=(valgrind --tool=callgrind --separate-threads=no --callgrind-out-file="$1")
	[ "${2:-}" = uring ] && VG=(env LD_PRELOAD="$TOOLS/vg_uring_shim.so" "${VG[@]}")
	return 0
}

# Instructions in a callgrind output file (its "totals:" or "summary:" line).
cg_total() {
	awk '/^(totals|summary):/ { print $2; exit }' "$1"
}

# Instructions spent inside the fabric (every rdmem_fab_* entry point,
# inclusive) in a callgrind output file: on the shm fabric that is the
# emulated NIC and its provider, which verbs hardware replaces. 0 for a
# program without the fabric. The entry points do not call each other, so
# their inclusive costs add up without counting anything twice; a function
# callgrind_annotate lists under two spellings of its file (it does when run
# from the source tree) counts once.
cg_fabric() {
	callgrind_annotate --inclusive=yes --threshold=100 --show-percs=no "$1" 2>/dev/null |
		awk '$2 ~ /fabric\/fabric\.c:rdmem_fab_/ {
			fn = $2; sub(/.*:/, "", fn); gsub(",", "", $1); ir[fn] = $1
		} END { for (fn in ir) s += ir[fn]; print s + 0 }'
}

# Zeroes (-z) or dumps (-d) the counters of a process under callgrind.
cg_control() {
	callgrind_control "$1" "$2" >>"$LOGS/callgrind-control.log" 2>&1 ||
		die "callgrind_control $1 $2 failed (see $LOGS/callgrind-control.log)"
}

# The newest dump of the process whose output file is $1.
cg_last_dump() {
	local f
	f=$(ls -v "$1".* 2>/dev/null | tail -n 1)
	[ -n "$f" ] || die "no callgrind dump for $1"
	cg_total "$f"
}

# Starts the servers of one system under callgrind; sets CG_PROCS (name=outfile ...).
cg_start() {
	local sys=$1 d=$OUT/callgrind
	CG_PROCS=()
	case "$sys" in
	grpc)
		cg_vg "$d/grpc-server.cg"
		start_proc cg-grpc "$CPU_SERVER" "log:listening on" 180 \
			"${VG[@]}" "$TOOLS/grpc_server" --bind 127.0.0.1 --port 0
		GRPC_PORT=$(awk '/listening on/ { print $3; exit }' "$LOGS/cg-grpc.log")
		CG_PROCS=("server=cg-grpc=$d/grpc-server.cg")
		;;
	redis)
		REDIS_PORT=$(free_port) || die "no free port"
		cg_vg "$d/redis-server.cg"
		start_proc cg-redis "$CPU_SERVER" "log:Ready to accept connections" 180 \
			"${VG[@]}" "$(command -v redis-server)" --port "$REDIS_PORT" \
			--bind 127.0.0.1 --save "" --appendonly no --dir "$LOGS/redis" --maxmemory 1gb
		CG_PROCS=("server=cg-redis=$d/redis-server.cg")
		;;
	rdmem-shm | rdmem-tcp)
		local force=() shm=$SHM_SHM
		[ "$sys" = rdmem-tcp ] && force=(--force-path tcp) shm=$SHM_TCP
		RDMEM_PORT=$(free_port pair) || die "no free port pair"
		cg_vg "$d/$sys-server.cg" uring
		start_proc cg-rdmem-server "$CPU_SERVER" "log:listening (shm|verbs)" 180 \
			"${VG[@]}" "$BIN/rdmem-server" -b 127.0.0.1 \
			-p "$RDMEM_PORT" --tcp-port $((RDMEM_PORT + 1)) "${SERVER_OPTS[@]}"
		SHM_NAMES+=("$shm")
		cg_vg "$d/$sys-agent.cg" uring
		start_proc agent-cg "$CPU_AGENT" "log:ready:" 180 \
			"${VG[@]}" "$BIN/rdmem-agent" -s 127.0.0.1 -p "$RDMEM_PORT" \
			--fabric shm "${force[@]}" --shm-name "$shm" "${AGENT_OPTS[@]}"
		CG_PROCS=("server=cg-rdmem-server=$d/$sys-server.cg" "agent=agent-cg=$d/$sys-agent.cg")
		;;
	esac
}

# Send WQEs an RDMemRPC system's agent and server have posted so far: the
# agent's rdma.wqes plus its server sessions' wqes. Each query adds its own
# (a control-page READ, a STATS call), the same in every run, so they cancel
# in the difference of two runs. Prints nothing for binaries without the
# counters (before layout 4): the report then shows "–".
cg_wqes() {
	local shm=$SHM_SHM a j
	[ "$1" = rdmem-tcp ] && shm=$SHM_TCP
	a=$("$BIN/rdmem" --shm-name "$shm" agent-stats | awk '$1 == "rdma.wqes" { print $2 }')
	j=$("$BIN/rdmem" --shm-name "$shm" stats --json)
	[ -n "$a" ] && [[ $j == *'"wqes":'* ]] || return 0
	echo $((a + $(grep -o '"wqes":[0-9]*' <<<"$j" | awk -F: '{ s += $2 } END { print s + 0 }')))
}

# One client run of n GETs at window w under callgrind; prints
# "client=IR server=IR [agent=IR wqes=N]".
cg_client_run() {
	local sys=$1 n=$2 w=$3 p role name file out=$OUT/callgrind/$sys-w$3-client-$2.cg wq=
	[[ $sys == rdmem-* ]] && wq=$(cg_wqes "$sys")
	for p in "${CG_PROCS[@]}"; do
		IFS== read -r role name file <<<"$p"
		cg_control -z "${PIDS[$name]}"
	done
	client_cmd "$sys" get 32 "$w" "$n"
	[[ $sys == grpc || $sys == redis ]] && CMD+=(--warmup "$CG_WARMUP")
	cg_vg "$out"
	timeout -k 5 "$CG_TIMEOUT" taskset -c "$CPU_CLIENT" "${VG[@]}" "${CMD[@]}" \
		>>"$LOGS/callgrind-clients.log" 2>&1 ||
		die "$sys client under callgrind failed (see $LOGS/callgrind-clients.log)"
	printf 'client=%s' "$(cg_total "$out")"
	for p in "${CG_PROCS[@]}"; do
		IFS== read -r role name file <<<"$p"
		cg_control -d "${PIDS[$name]}"
		printf ' %s=%s' "$role" "$(cg_last_dump "$file")"
		[[ $sys != rdmem-* ]] || printf ' fabric_%s=%s' "$role" "$(cg_fabric "$(ls -v "$file".* | tail -n 1)")"
	done
	[ -z "$wq" ] || printf ' wqes=%s' $(($(cg_wqes "$sys") - wq))
	echo
}

# The counts are in the dumps already; a clean exit is not needed, and a
# server that waits for SIGTERM on a signalfd (rdmem-server) never sees it
# under valgrind, which holds blocked signals itself.
cg_stop() {
	local p role name file pid
	for p in "${CG_PROCS[@]}"; do
		IFS== read -r role name file <<<"$p"
		pid=${PIDS[$name]:-}
		[ -n "$pid" ] || continue
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		unset "PIDS[$name]"
	done
}

callgrind_system() {
	local sys=$1 a b w calls
	log "callgrind: $sys, $CG_CALLS GETs per process, windows ${CG_WINDOWS[*]}"
	cg_start "$sys"
	# Warm the servers up natively-timed but counted nowhere (counters are zeroed next).
	client_cmd "$sys" get 32 1 500
	timeout -k 5 "$CG_TIMEOUT" taskset -c "$CPU_CLIENT" "${CMD[@]}" >/dev/null 2>>"$LOGS/callgrind-clients.log" ||
		die "$sys warm-up under callgrind failed"
	for w in "${CG_WINDOWS[@]}"; do
		# Window 32 runs 10x the calls: time-driven work while the client
		# starts under valgrind (timers of an idle agent) must not show.
		calls=$((w > 1 ? CG_CALLS * 10 : CG_CALLS))
		a=$(cg_client_run "$sys" "$CG_BASE" "$w")
		b=$(cg_client_run "$sys" $((CG_BASE + calls)) "$w")
		python3 - "$sys" "$calls" "$w" "$a" "$b" >>"$OUT/callgrind.jsonl" <<'EOF'
import json, sys
sys_, calls, w = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a = dict(x.split("=") for x in sys.argv[4].split())
b = dict(x.split("=") for x in sys.argv[5].split())
for role in a:
    if role == "wqes":  # not instructions: send WQEs of agent + server
        print(json.dumps({"system": sys_, "process": role, "calls": calls, "window": w,
                          "wqes_a": int(a[role]), "wqes_b": int(b[role]),
                          "wqes_per_call": (int(b[role]) - int(a[role])) / calls}))
        continue
    if role.startswith("fabric_"):  # of that process's instructions, the fabric's
        print(json.dumps({"system": sys_, "process": role[7:], "calls": calls, "window": w,
                          "fabric_per_call": (int(b[role]) - int(a[role])) / calls}))
        continue
    print(json.dumps({"system": sys_, "process": role, "calls": calls, "window": w,
                      "ir_a": int(a[role]), "ir_b": int(b[role]),
                      "ir_per_call": (int(b[role]) - int(a[role])) / calls}))
EOF
	done
	cg_stop
}

callgrind_all() {
	local sys
	command -v valgrind >/dev/null && command -v callgrind_control >/dev/null ||
		{ skip callgrind "valgrind is not installed (apt-get install valgrind)"; return 0; }
	mkdir -p "$OUT/callgrind"
	: >"$OUT/callgrind.jsonl"
	for sys in "${ACTIVE[@]}"; do
		case "$sys" in
		grpc | redis) callgrind_system "$sys" ;;
		rdmem-shm | rdmem-tcp)
			if [ -f "$TOOLS/vg_uring_shim.so" ]; then
				callgrind_system "$sys"
			else
				skip "callgrind $sys" "no $TOOLS/vg_uring_shim.so (make bench-tools)"
			fi
			;;
		esac
	done
	python3 -c 'import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1]) if l.strip()], indent=1))' \
		"$OUT/callgrind.jsonl" >"$OUT/callgrind.json"
}
