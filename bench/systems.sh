# systems.sh - the systems scripts/bench.sh compares (sourced): which can run
# here, how their servers start, and the client command for one run.
#   rdmem-shm  app -> SHM front door -> rdmem-agent -> shm fabric -> rdmem-server
#   rdmem-tcp  the same, the agent forced onto its TCP path (--force-path tcp)
#   grpc       grpc_client -> grpc_server (C++ unary, HTTP/2 over loopback TCP)
#   redis      redis_client (hiredis) -> redis-server (loopback TCP)
#   frontdoor  the front door alone (local-ping, answered by the agent)
#              against a Unix-domain-socket echo round trip (uds) and UCX's
#              tag ping-pong over shared memory (ucx, bench/ucx_ping.py)
#   ucx-shm    ucx_kv_client -> ucx_kv_server: the same GET/SET store over UCP
#              active messages (bench/ucx_kv.h), UCX on shared memory
#   ucx-tcp    the same, UCX on loopback TCP
# Needs: BIN, TOOLS, LOGS, SYSTEMS, CPU_SERVER, CPU_AGENT; procs.sh.

ACTIVE=()
# Window 32 needs 32 slots per client (the agent's default is 16); few
# clients keep the front-door segment small with 1 MiB values.
AGENT_OPTS=(--clients 4 --slots 32 --max-value 1m)
# The server's defaults, on the shm fabric.
SERVER_OPTS=(--fabric shm "${EXTRA_SERVER_OPTS[@]}")
AGENT_OPTS+=("${EXTRA_AGENT_OPTS[@]}")
SHM_SHM=/rdmem-bench-$$-shm
SHM_TCP=/rdmem-bench-$$-tcp
# tests/tools/uds_echo (the front-door engineer's): forks its own echo
# process, which it pins where the agent sits; both are the app's local peer.
UDS_TOOL=$BIN/tests/uds_echo

rdmem_ready() {
	[ -x "$BIN/rdmem-server" ] && [ -x "$BIN/rdmem-agent" ] && [ -x "$BIN/rdmem" ] ||
		{ echo "RDMemRPC binaries missing in $BIN (make)"; return 1; }
	# rdmem prints its usage and exits 2 on --help: read the text, not the status.
	RDMEM_USAGE=$("$BIN/rdmem" --help 2>&1 || true)
	grep -qw bench <<<"$RDMEM_USAGE" ||
		{ echo "$BIN/rdmem has no 'bench' command yet"; return 1; }
}

# Prints why a system cannot run here, or nothing.
system_missing() {
	case "$1" in
	grpc)
		[ -x "$TOOLS/grpc_server" ] && [ -x "$TOOLS/grpc_client" ] ||
			echo "no $TOOLS/grpc_server (make bench-tools; needs libgrpc++-dev protobuf-compiler-grpc)"
		;;
	redis)
		command -v redis-server >/dev/null || { echo "no redis-server (apt-get install redis-server)"; return; }
		[ -x "$TOOLS/redis_client" ] || echo "no $TOOLS/redis_client (make bench-tools; needs libhiredis-dev)"
		;;
	rdmem-shm | rdmem-tcp)
		rdmem_ready || true
		;;
	ucx-shm | ucx-tcp)
		[ -x "$TOOLS/ucx_kv_server" ] && [ -x "$TOOLS/ucx_kv_client" ] ||
			{ echo "no $TOOLS/ucx_kv_server (make bench-tools-ucx; needs libucx-dev)"; return; }
		# Both ends busy-poll (UCX's way): on one CPU a round trip costs a
		# scheduler slice, a figure about the scheduler, not UCX.
		[[ $CPU_SERVER =~ ^[0-9]+$ && $CPU_CLIENT =~ ^[0-9]+$ && $CPU_SERVER != "$CPU_CLIENT" ]] ||
			echo "UCX busy-polls: client and server need CPUs of their own (client on $CPU_CLIENT, server on $CPU_SERVER)"
		;;
	frontdoor)
		rdmem_ready || return 0
		grep -q local-ping <<<"$RDMEM_USAGE" ||
			{ echo "rdmem bench has no local-ping op yet"; return; }
		[ -x "$UDS_TOOL" ] || echo "no $UDS_TOOL (make)"
		;;
	*) echo "unknown system (one of rdmem-shm,rdmem-tcp,grpc,redis,ucx-shm,ucx-tcp,frontdoor)" ;;
	esac
}

select_systems() {
	local s why
	for s in ${SYSTEMS//,/ }; do
		why=$(system_missing "$s")
		if [ -n "$why" ]; then
			skip "$s" "$why"
		else
			ACTIVE+=("$s")
		fi
	done
	log "systems: ${ACTIVE[*]:-none}"
}

# Why UCX's ping-pong cannot run next to the front door here, or nothing.
# It busy-polls without yielding, so with its peer on the client's CPU one
# round trip costs a scheduler slice (~6 ms here): a figure about the
# scheduler, not UCX. It runs where the two ends have CPUs of their own
# (the placement check's agent-on-server-cpu).
ucx_missing() {
	command -v ucx_perftest >/dev/null || { echo "no ucx_perftest (apt-get install ucx-utils)"; return; }
	[[ $CPU_AGENT =~ ^[0-9]+$ && $CPU_CLIENT =~ ^[0-9]+$ && $CPU_AGENT != "$CPU_CLIENT" ]] ||
		echo "UCX busy-polls: it needs its own CPU for the peer (client on $CPU_CLIENT, peer on $CPU_AGENT); see the placement check"
}

is_active() { printf '%s\n' "${ACTIVE[@]}" | grep -qx "$1"; }

sys_has_op() { return 0; } # every system runs every op (Redis maps them, see redis_client.c)

start_rdmem() {
	RDMEM_PORT=$(free_port pair) || die "no free port pair for rdmem-server"
	start_proc server-rdmem "$CPU_SERVER" "log:listening (shm|verbs)" 20 \
		"$BIN/rdmem-server" -b 127.0.0.1 -p "$RDMEM_PORT" --tcp-port $((RDMEM_PORT + 1)) \
		"${SERVER_OPTS[@]}"
	if is_active rdmem-shm || is_active frontdoor; then
		SHM_NAMES+=("$SHM_SHM")
		start_proc agent-shm "$CPU_AGENT" "log:ready:" 20 \
			"$BIN/rdmem-agent" -s 127.0.0.1 -p "$RDMEM_PORT" --fabric shm --shm-name "$SHM_SHM" \
			"${AGENT_OPTS[@]}"
	fi
	if is_active rdmem-tcp; then
		SHM_NAMES+=("$SHM_TCP")
		start_proc agent-tcp "$CPU_AGENT" "log:ready:" 20 \
			"$BIN/rdmem-agent" -s 127.0.0.1 -p "$RDMEM_PORT" --fabric shm \
			--force-path tcp --shm-name "$SHM_TCP" "${AGENT_OPTS[@]}"
	fi
}

start_grpc() {
	start_proc server-grpc "$CPU_SERVER" "log:listening on" 20 \
		"$TOOLS/grpc_server" --bind 127.0.0.1 --port 0
	GRPC_PORT=$(awk '/listening on/ { print $3; exit }' "$LOGS/server-grpc.log")
}

# Persistence off (no RDB snapshots, no AOF), memory bounded, loopback only.
start_redis() {
	REDIS_PORT=$(free_port) || die "no free port for redis-server"
	mkdir -p "$LOGS/redis"
	start_proc server-redis "$CPU_SERVER" "log:Ready to accept connections" 20 \
		redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --protected-mode yes \
		--save "" --appendonly no --dir "$LOGS/redis" --daemonize no \
		--maxmemory 1gb --maxmemory-policy noeviction
}

# UCX's transports per system: shared memory, or TCP on loopback only.
ucx_env() {
	case "$1" in
	ucx-shm) echo UCX_TLS=posix,self ;;
	*) echo UCX_TLS=tcp,self UCX_NET_DEVICES=lo ;;
	esac
}

start_ucx() {
	local sys=$1 port
	# shellcheck disable=SC2046 # ucx_env prints words for env
	start_proc "server-$sys" "$CPU_SERVER" "log:listening on" 20 \
		env $(ucx_env "$sys") UCX_WARN_UNUSED_ENV_VARS=n "$TOOLS/ucx_kv_server" --port 0
	port=$(awk '/listening on/ { print $3; exit }' "$LOGS/server-$sys.log")
	if [ "$sys" = ucx-shm ]; then UCX_SHM_PORT=$port; else UCX_TCP_PORT=$port; fi
	sys_pause "$sys"
}

# A UCX server spins on its CPU even when idle, which would tax every other
# system's server there: it is stopped (SIGSTOP) except while its own
# client runs. No other server needs this (they sleep when idle).
# A server that died is a failure of the run, not the end of the benchmark.
sys_pause() {
	case "$1" in
	ucx-shm | ucx-tcp) kill -STOP "${PIDS[server-$1]}" 2>/dev/null || fail "server-$1 is gone" ;;
	esac
}
sys_resume() {
	case "$1" in
	ucx-shm | ucx-tcp) kill -CONT "${PIDS[server-$1]}" 2>/dev/null || fail "server-$1 is gone" ;;
	esac
}

start_servers() {
	if is_active rdmem-shm || is_active rdmem-tcp || is_active frontdoor; then
		start_rdmem
	fi
	if is_active grpc; then start_grpc; fi
	if is_active redis; then start_redis; fi
	if is_active ucx-shm; then start_ucx ucx-shm; fi
	if is_active ucx-tcp; then start_ucx ucx-tcp; fi
	return 0
}

# client_cmd SYSTEM OP SIZE WINDOW N: sets CMD to the client command line, and
# WARM to a warm-up run for clients that have no warm-up of their own (rdmem
# bench: a tenth of the calls, at least 100, same op, size and window).
client_cmd() {
	local sys=$1 op=$2 size=$3 w=$4 n=$5 warm
	warm=$((n / 10 > 100 ? n / 10 : 100))
	WARM=()
	case "$sys" in
	grpc) CMD=("$TOOLS/grpc_client" --port "$GRPC_PORT" --op "$op" --size "$size") ;;
	redis) CMD=("$TOOLS/redis_client" --port "$REDIS_PORT" --op "$op" --size "$size") ;;
	ucx-shm | ucx-tcp)
		# shellcheck disable=SC2046 # ucx_env prints words for env
		CMD=(env $(ucx_env "$sys") UCX_WARN_UNUSED_ENV_VARS=n "$TOOLS/ucx_kv_client" --system "$sys"
			--port "$([ "$sys" = ucx-shm ] && echo "$UCX_SHM_PORT" || echo "$UCX_TCP_PORT")"
			--op "$op" --size "$size")
		;;
	rdmem-shm | rdmem-tcp)
		CMD=("$BIN/rdmem" --shm-name "$([ "$sys" = rdmem-shm ] && echo "$SHM_SHM" || echo "$SHM_TCP")"
			bench --op "$op" --size "$size" --json)
		# The same 1024 keys as the other clients.
		[ "$op" = large-get ] || CMD+=(--keys 1024)
		;;
	frontdoor) CMD=("$BIN/rdmem" --shm-name "$SHM_SHM" bench --op local-ping --json) ;;
	ucx)
		# Its peer sits where the agent does, as uds_echo's echo process.
		CMD=(bench/ucx_ping.py --peer-cpu "$CPU_AGENT" --port "$(free_port)" -n "$n"
			--size "$size" --timeout "$RUN_TIMEOUT")
		return 0
		;;
	ucx-perf-shm | ucx-perf-tcp)
		CMD=(bench/ucx_ping.py --peer-cpu "$CPU_SERVER" --port "$(free_port)" -n "$n"
			--size "$size" --test "$op" --op "$op" --timeout "$RUN_TIMEOUT"
			--tls "$([ "$sys" = ucx-perf-shm ] && echo posix || echo tcp)")
		return 0
		;;
	uds)
		CMD=("$UDS_TOOL" -n "$n" --window "$w" --json)
		# uds_echo forks its echo process and pins both ends itself.
		[[ $CPU_AGENT =~ ^[0-9]+$ ]] && CMD+=(--server-cpu "$CPU_AGENT")
		[[ $CPU_CLIENT =~ ^[0-9]+$ ]] && CMD+=(--client-cpu "$CPU_CLIENT")
		return 0
		;;
	esac
	case "$sys" in rdmem-* | frontdoor) WARM=("${CMD[@]}" --window "$w" -n "$warm") ;; esac
	CMD+=(--window "$w" -n "$n")
}
