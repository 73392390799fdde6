# local-stack.sh - sourced (not run) by scripts and tests that need a real
# rdmem-server and rdmem-agent on this host over the shm fabric (the real
# data plane, no NIC needed). The caller sets its own EXIT trap and calls
# ls_stop from it.
#
#   . scripts/local-stack.sh
#   ls_start_server DIR [server args...]   # sets LS_PORT, LS_SERVER_PID; logs DIR/server.log
#   ls_start_agent DIR SHM [agent args...] # sets LS_AGENT_PID; logs DIR/agent.log
#   ls_stop                                # agent first, then server
#
# RDMEM_BIN names the folder holding the binaries (default build).
# shellcheck shell=bash

LS_BIN=${RDMEM_BIN:-build}
# Compilers for programs linked against the tree's librdmem: a sanitizer
# build's library needs the same compiler and runtime (make asan/tsan build
# with clang), else the link fails on __asan_*/__tsan_* symbols.
case "${RDMEM_SANITIZER:-}" in
asan) LS_CC="clang -fsanitize=address,undefined" LS_CXX="clang++ -fsanitize=address,undefined" ;;
tsan) LS_CC="clang -fsanitize=thread" LS_CXX="clang++ -fsanitize=thread" ;;
*) LS_CC=cc LS_CXX=c++ ;;
esac
LS_PORT=
LS_SERVER_PID=
LS_AGENT_PID=

# A port P with P and P+1 free (RDMA port and the TCP fallback port), or
# several, space-separated, with "ls_free_ports N" (each with its neighbour);
# free on every address, and below the ephemeral range, so no outgoing
# connection takes one between this check and the server's bind.
ls_free_ports() {
	python3 - "${1:-1}" <<'EOF'
import random, socket, sys
want, got = int(sys.argv[1]), []
def free(p):
    s = socket.socket()
    try:
        s.bind(("", p))
        return True
    except OSError:
        return False
    finally:
        s.close()
for _ in range(2000):
    p = random.randrange(12000, 32000, 2)  # below the ephemeral range (32768-)
    if p not in got and free(p) and free(p + 1):
        got.append(p)
        if len(got) == want:
            break
print(" ".join(map(str, got)))
EOF
}

# ls_wait_log FILE TEXT [SECONDS]: waits until TEXT appears in FILE.
ls_wait_log() {
	local i n=$((${3:-10} * 20))
	for ((i = 0; i < n; i++)); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "local-stack: '$2' never appeared in $1:" >&2
	sed 's/^/  /' "$1" >&2 2>/dev/null || true
	return 1
}

ls_start_server() {
	local dir=$1 try
	shift
	for try in 1 2 3; do
		LS_PORT=${LS_FIXED_PORT:-$(ls_free_ports 1)}
		: >"$dir/server.log" # as for the agent's log below
		"$LS_BIN/rdmem-server" -b 127.0.0.1 -p "$LS_PORT" --fabric shm "$@" \
			>>"$dir/server.log" 2>&1 &
		LS_SERVER_PID=$!
		ls_wait_log "$dir/server.log" "listening tcp" 10 2>/dev/null && return 0
		# Lost a race for the port (or a real failure): say which, retry once more.
		kill "$LS_SERVER_PID" 2>/dev/null
		wait "$LS_SERVER_PID" 2>/dev/null
		LS_SERVER_PID=
		[ -n "${LS_FIXED_PORT:-}" ] && break
	done
	echo "local-stack: rdmem-server did not start (try $try):" >&2
	sed 's/^/  /' "$dir/server.log" >&2
	return 1
}

ls_start_agent() {
	local dir=$1 shm=$2
	shift 2
	# Emptied here, not by the child's redirection: that may run after the
	# wait below has read an earlier agent's "ready:" from the same log.
	: >"$dir/agent.log"
	"$LS_BIN/rdmem-agent" -s 127.0.0.1 -p "$LS_PORT" --fabric shm --shm-name "$shm" "$@" \
		>>"$dir/agent.log" 2>&1 &
	LS_AGENT_PID=$!
	ls_wait_log "$dir/agent.log" "ready:" 10 || return 1
	# The RDMA session comes up in the background; calls before it go TCP.
	case " $* " in *" --fabric tcp "*) return 0 ;; esac
	ls_wait_log "$dir/agent.log" "rdma: session" 10
}

ls_stop_pid() {
	local pid=$1 i
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

ls_stop() {
	ls_stop_pid "$LS_AGENT_PID"
	LS_AGENT_PID=
	ls_stop_pid "$LS_SERVER_PID"
	LS_SERVER_PID=
}
