# procs.sh - process plumbing for scripts/bench.sh (sourced): start a server
# pinned to CPUs and wait until it is ready, stop it (TERM, then KILL after a
# bound), clean everything up on exit, run one pinned client under a time
# limit and keep its JSON record.
# Needs: LOGS, RAW, OUT, CPU_CLIENT, RUN_TIMEOUT.

declare -A PIDS=() # name -> pid of the servers this run started
SHM_NAMES=()	   # front-door segments to remove on exit

log() { printf 'bench: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# Records a failed run; the benchmark goes on and exits non-zero at the end.
fail() {
	log "FAIL: $*"
	printf '%s\n' "$*" >>"$OUT/failed.txt"
}

skip() {
	log "skipping $1: $2"
	printf '%s\t%s\n' "$1" "$2" >>"$OUT/skipped.txt"
}

# A free loopback TCP port; with "pair", one whose successor is free too.
free_port() {
	python3 - "${1:-}" <<'EOF'
import socket, sys
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return s.getsockname()[1]
    except OSError: return 0
    finally: s.close()
for _ in range(200):
    p = free(0)
    if p and p < 65535 and (sys.argv[1] != "pair" or free(p + 1)):
        print(p); sys.exit(0)
sys.exit(1)
EOF
}

tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_proc NAME CPUS READY TIMEOUT_S CMD...
#   READY: "log:REGEX" (in the process's output), "port:N" (accepts TCP), or "none".
# Dies with the log's tail when the process exits or is not ready in time.
start_proc() {
	local name=$1 cpus=$2 ready=$3 tmo=$4 i pid
	shift 4
	log "start $name on CPU $cpus: $*"
	# Truncate here, not in the child: the readiness check below must never
	# see a line left by an earlier process of the same name.
	: >"$LOGS/$name.log"
	taskset -c "$cpus" "$@" >>"$LOGS/$name.log" 2>&1 &
	pid=$!
	PIDS[$name]=$pid
	for ((i = 0; i < tmo * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || {
			tail -n 20 "$LOGS/$name.log" | sed 's/^/  | /' >&2
			unset "PIDS[$name]"
			die "$name exited before it was ready (log: $LOGS/$name.log)"
		}
		case "$ready" in
		log:*) grep -Eq "${ready#log:}" "$LOGS/$name.log" && return 0 ;;
		port:*) tcp_open "${ready#port:}" && return 0 ;;
		none) return 0 ;;
		esac
		sleep 0.1
	done
	tail -n 20 "$LOGS/$name.log" | sed 's/^/  | /' >&2
	die "$name not ready after ${tmo}s (log: $LOGS/$name.log)"
}

# Stops one server: TERM, up to 10 s (valgrind needs a while to write its
# output), then KILL.
stop_proc() {
	local name=$1 pid=${PIDS[$1]:-} i
	[ -n "$pid" ] || return 0
	# A paused server (sys_pause) would keep SIGTERM pending until KILL.
	kill -TERM "$pid" 2>/dev/null || true
	kill -CONT "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "$name (pid $pid) ignored SIGTERM; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	unset "PIDS[$name]"
}

# Agents first (they hold sessions on the server), then the rest.
stop_all() {
	local name
	for name in "${!PIDS[@]}"; do
		[[ $name == agent* ]] && stop_proc "$name"
	done
	for name in "${!PIDS[@]}"; do
		stop_proc "$name"
	done
	return 0
}

procs_cleanup() {
	local rc=$? s
	trap - EXIT
	stop_all
	for s in "${SHM_NAMES[@]}"; do
		rm -f "${RDMEM_RUNTIME_DIR:-/run/rdmem}/${s#/}.sock" # a killed agent's socket
	done
	exit "$rc"
}

# run_client ROUND SYSTEM OP SIZE WINDOW N: runs the system's client pinned
# to the client CPUs and appends its record to $RAW. A non-zero exit, a
# missing record, failures or a short count mark the run failed.
run_client() {
	local sys=$2
	client_cmd "${@:2}" # sets CMD, and WARM for clients without a warm-up
	sys_resume "$sys"
	run_client_once "$@"
	sys_pause "$sys"
}

run_client_once() {
	local round=$1 sys=$2 op=$3 size=$4 w=$5 n=$6 out rc=0 line
	if [ ${#WARM[@]} -gt 0 ]; then
		timeout -k 5 "$RUN_TIMEOUT" taskset -c "$CPU_CLIENT" "${WARM[@]}" \
			>/dev/null 2>>"$LOGS/client-$sys.log" || rc=$?
		if [ "$rc" -ne 0 ]; then
			# Counted as a failed round of this cell in the report.
			printf '{"bench_system":"%s","op":"%s","size":%s,"window":%s,"round":%s,"rc":%s,"req_n":%s,"record":{"warmup_failed":true}}\n' \
				"$sys" "$op" "$size" "$w" "$round" "$rc" "$n" >>"$RAW"
			fail "$sys $op size $size window $w round $round: warm-up exit $rc (log: $LOGS/client-$sys.log)"
			return 0
		fi
	fi
	out=$(timeout -k 5 "$RUN_TIMEOUT" taskset -c "$CPU_CLIENT" "${CMD[@]}" \
		2>>"$LOGS/client-$sys.log") || rc=$?
	line=$(printf '%s\n' "$out" | grep '^{' | tail -n 1 || true)
	# Every client's record in the common form (normalize.py).
	[ -z "$line" ] || line=$(python3 bench/normalize.py "$sys" <<<"$line") ||
		{ fail "$sys $op: unreadable record: $out"; return 0; }
	if [ -n "$line" ]; then
		printf '{"bench_system":"%s","op":"%s","size":%s,"window":%s,"round":%s,"rc":%s,"req_n":%s,"record":%s}\n' \
			"$sys" "$op" "$size" "$w" "$round" "$rc" "$n" "$line" >>"$RAW"
	fi
	if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
		[ "$rc" -eq 124 ] && rc="124 (timed out after ${RUN_TIMEOUT}s)"
		fail "$sys $op size $size window $w round $round: exit $rc${line:+: $line} (log: $LOGS/client-$sys.log)"
	elif ! [[ $line =~ \"failures\":0[,}] && $line =~ \"n\":$n[,}] ]]; then
		fail "$sys $op size $size window $w round $round: failures or short count: $line"
	else
		log "$(printf 'r%s %-9s %-9s %8s w%-2s %s' "$round" "$sys" "$op" "$size" "$w" \
			"$(sed -E 's/.*"p50_us":([0-9.]+).*"qps":([0-9.]+).*/p50 \1 us, \2 qps/' <<<"$line")")"
	fi
}
