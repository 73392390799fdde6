# ops_agent.sh - sourced (not run) by run_basic_tests.sh and
# run_benchmarks.sh: their own rdmem-agent, pointed at a live rdmem-server
# HOST PORT, on a private socket in a private temp directory, so they touch
# no other agent and leave nothing behind.
#
#   . scripts/ops_agent.sh
#   ops_parse_args "$@"    # [--fabric verbs|shm|tcp] [--tcp-port N] HOST PORT [rest...]
#   ops_start_agent [agent args...]  # sets OPS_AGENT_PID, OPS_SOCK, OPS_FABRIC
#   ops_rdmem ARGS...      # the rdmem CLI on our agent
#
# The caller's EXIT trap must call ops_cleanup. Environment:
#   RDMEM_BIN         folder holding rdmem and rdmem-agent (default: the
#                     tree's build/ when built, else $PATH)
#   RDMEM_FABRIC      verbs | shm | tcp (as --fabric); default: verbs with an
#                     RDMA device, else shm when HOST is this host (tried, and
#                     tcp if no RDMA session comes up), else tcp
#   RDMEM_AGENT_ARGS  more agent options, e.g. "--secret-file /etc/rdmem/secret"
# shellcheck shell=bash

OPS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -n "${RDMEM_BIN:-}" ]; then
	OPS_BIN=$RDMEM_BIN
elif [ -x "$OPS_DIR/build/rdmem" ] && [ -x "$OPS_DIR/build/rdmem-agent" ]; then
	OPS_BIN=$OPS_DIR/build
else
	OPS_BIN=$(dirname "$(command -v rdmem-agent || echo /usr/bin/rdmem-agent)")
fi
OPS_FABRIC=${RDMEM_FABRIC:-}
OPS_FABRIC_ASKED=
OPS_TCP_PORT=
OPS_HOST=
OPS_PORT=
OPS_REST=()
OPS_AGENT_PID=
OPS_CHILD= # a long command run by ops_wait, stopped by ops_cleanup
OPS_TMP=$(mktemp -d "${TMPDIR:-/tmp}/rdmem-ops.XXXXXX") || exit 1
chmod 700 "$OPS_TMP" # the agent refuses a socket directory others may write
OPS_SOCK=$OPS_TMP/agent.sock

ops_usage() {
	echo "usage: $0 [--fabric verbs|shm|tcp] [--tcp-port N] HOST PORT${OPS_USAGE_REST:-}" >&2
	exit 2
}

ops_parse_args() {
	while [ $# -gt 0 ]; do
		case $1 in
		--fabric)
			[ $# -ge 2 ] || ops_usage
			OPS_FABRIC=$2
			shift 2
			;;
		--tcp-port)
			[ $# -ge 2 ] || ops_usage
			OPS_TCP_PORT=$2
			shift 2
			;;
		-h | --help) ops_usage ;;
		-*) echo "$0: unknown option $1" >&2 && ops_usage ;;
		*) break ;;
		esac
	done
	[ $# -ge 2 ] || ops_usage
	OPS_HOST=$1 OPS_PORT=$2
	shift 2
	# shellcheck disable=SC2034 # the caller's arguments after HOST PORT
	OPS_REST=("$@")
	case $OPS_PORT in '' | *[!0-9]*) echo "$0: PORT must be a number" >&2 && ops_usage ;; esac
	case $OPS_FABRIC in '' | verbs | shm | tcp) ;; *) echo "$0: --fabric verbs|shm|tcp" >&2 && ops_usage ;; esac
	OPS_FABRIC_ASKED=$OPS_FABRIC
	for b in rdmem rdmem-agent; do
		if [ ! -x "$OPS_BIN/$b" ]; then
			echo "$0: $OPS_BIN/$b not found (build with make, or set RDMEM_BIN)" >&2
			exit 2
		fi
	done
}

ops_cleanup() {
	local i
	[ -n "$OPS_CHILD" ] && kill "$OPS_CHILD" 2>/dev/null && wait "$OPS_CHILD" 2>/dev/null
	if [ -n "$OPS_AGENT_PID" ]; then
		kill "$OPS_AGENT_PID" 2>/dev/null
		for ((i = 0; i < 100; i++)); do
			kill -0 "$OPS_AGENT_PID" 2>/dev/null || break
			sleep 0.05
		done
		kill -9 "$OPS_AGENT_PID" 2>/dev/null
		wait "$OPS_AGENT_PID" 2>/dev/null
		OPS_AGENT_PID=
	fi
	rm -rf "$OPS_TMP"
}

ops_local_host() {
	case $OPS_HOST in localhost | 127.* | ::1 | "$(hostname)") return 0 ;; esac
	hostname -I 2>/dev/null | tr ' ' '\n' | grep -qxF -- "$OPS_HOST"
}

ops_wait_log() { # FILE TEXT SECONDS
	local i
	for ((i = 0; i < $3 * 20; i++)); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		kill -0 "$OPS_AGENT_PID" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# Starts the agent on fabric $1; 0 when it is ready (and, unless tcp, its
# RDMA session is up).
ops_try_agent() {
	local fabric=$1 tcp=()
	shift
	[ -n "$OPS_TCP_PORT" ] && tcp=(--tcp-port "$OPS_TCP_PORT")
	rm -f "$OPS_TMP/agent.log" # an earlier try's "ready:" must not count
	# shellcheck disable=SC2086 # RDMEM_AGENT_ARGS is a list of options
	"$OPS_BIN/rdmem-agent" -s "$OPS_HOST" -p "$OPS_PORT" "${tcp[@]}" --fabric "$fabric" \
		--socket "$OPS_SOCK" ${RDMEM_AGENT_ARGS:-} "$@" >"$OPS_TMP/agent.log" 2>&1 &
	OPS_AGENT_PID=$!
	ops_wait_log "$OPS_TMP/agent.log" "ready:" 10 || return 1
	[ "$fabric" = tcp ] || ops_wait_log "$OPS_TMP/agent.log" "rdma: session" 5
}

ops_stop_agent() {
	local pid=$OPS_AGENT_PID
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	OPS_AGENT_PID=
}

ops_start_agent() {
	local f=$OPS_FABRIC
	if [ -z "$f" ]; then
		if compgen -G "/sys/class/infiniband/*" >/dev/null; then
			f=verbs
		elif ops_local_host; then
			f=shm
		else
			f=tcp
		fi
	fi
	if ops_try_agent "$f" "$@"; then
		OPS_FABRIC=$f
		echo "# agent on fabric $f ($OPS_BIN/rdmem-agent -> $OPS_HOST:$OPS_PORT)"
		return 0
	fi
	ops_stop_agent
	if [ -z "$OPS_FABRIC_ASKED" ] && [ "$f" != tcp ] && ops_try_agent tcp "$@"; then
		OPS_FABRIC=tcp
		echo "# fabric $f: no RDMA session; agent on fabric tcp (RDMA-only checks skipped)"
		return 0
	fi
	echo "$0: rdmem-agent (fabric $f) did not come up against $OPS_HOST:$OPS_PORT:" >&2
	sed 's/^/  /' "$OPS_TMP/agent.log" >&2
	return 1
}

# ops_wait CMD...: runs CMD in the background and waits for it, so a signal
# to the script runs its trap now, not when CMD ends (bash defers traps
# until a foreground command returns). Returns CMD's status.
ops_wait() {
	local st
	"$@" &
	OPS_CHILD=$!
	wait "$OPS_CHILD"
	st=$?
	OPS_CHILD=
	return $st
}

ops_rdmem() { "$OPS_BIN/rdmem" --shm-name "$OPS_SOCK" "$@"; }
