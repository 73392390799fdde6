#!/usr/bin/env bash
# shm_impostor.sh - the shm fabric's listener name is abstract
# (@rdmem-shm:PORT): any local user can bind it, first. A root rdmem-server
# serves TCP only (--fabric none); another user binds the shm name of its
# port with a server of its own. The root agent must not trust that
# listener (its user is neither root nor the agent's): it logs why, and
# every call goes over TCP to the real server, the impostor seeing none.
# Then the other user runs a whole server (shm and TCP): it is not reached
# over shm either, and its calls go over TCP. Needs root (to run a process
# as another user) and RDMEM_BIN.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/tap.sh
. tests/tap.sh shm-impostor stack

if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	echo "ok - shm impostor refused # SKIP needs root and setpriv to run a server as another user"
	exit 0
fi
uid=64123 # no such user needed: setpriv sets the ids
# Under a sanitizer its reports go to the process's stderr (our log of it):
# the reports directory is root's.
as_other() {
	setpriv --reuid=$uid --regid=$uid --clear-groups \
		env -u ASAN_OPTIONS -u UBSAN_OPTIONS -u TSAN_OPTIONS "$@"
}
# Starts a server as that user in the background; imp_pid is the server's
# own pid (setpriv and env exec it), so stopping it stops the server.
start_other() { # LOG ARGS...
	local log=$1
	shift
	setpriv --reuid=$uid --regid=$uid --clear-groups \
		env -u ASAN_OPTIONS -u UBSAN_OPTIONS -u TSAN_OPTIONS "$other_server" "$@" \
		>"$log" 2>&1 &
	imp_pid=$!
}
# The other user runs a copy in our scratch directory: the tree may sit in a
# private one (a fresh clone under mktemp -d is 0700), which uid $uid cannot
# enter. The server needs no library of the tree.
chmod 0755 "$tmp"
other_server=$tmp/rdmem-server
install -m 0755 "$bdir/rdmem-server" "$other_server"
if ! as_other test -x "$other_server"; then
	echo "ok - shm impostor refused # SKIP uid $uid cannot run $other_server (a private directory on its path, or /tmp mounted noexec)"
	exit 0
fi
# Starts a root agent (the default fabric: shm for a local server) on PORT
# with front door SHM, and checks it refuses the listener, saying why.
agent_refusing() { # PORT SHM
	: >"$tmp/agent.log"
	"$bdir/rdmem-agent" -s 127.0.0.1 -p "$1" --shm-name "$2" >>"$tmp/agent.log" 2>&1 &
	LS_AGENT_PID=$!
	expect "the agent starts" ls_wait_log "$tmp/agent.log" "ready:" 10
	expect "the agent refuses uid $uid's shm listener and says why" \
		ls_wait_log "$tmp/agent.log" "not trusted (any local user can take the name)" 10
}
imp_pid=
stop_imp() { [ -n "$imp_pid" ] && ls_stop_pid "$imp_pid"; imp_pid=; }
trap 'stop_imp; ls_stop; rm -rf "$tmp"' EXIT
read -r port other <<<"$(ls_free_ports 2)"
shm=/rdmem-impostor-$$

# The real server: root, TCP only, on port+1.
LS_FIXED_PORT=$port
if ! ls_start_server "$tmp" --fabric none; then
	echo "not ok - the real server (TCP only) starts"
	exit 1
fi
# The impostor: another user, the shm name of the same port, TCP elsewhere.
start_other "$tmp/impostor.log" -b 127.0.0.1 -p "$port" --tcp-port "$((other + 1))" --fabric shm
expect "the impostor binds @rdmem-shm:$port as uid $uid" ls_wait_log "$tmp/impostor.log" "listening shm" 10
agent_refusing "$port" "$shm"
check "a PUT through the agent" 0 "$bdir/rdmem" --shm-name "$shm" put impostor-key secret-value
check "the real server holds it (over TCP)" 0 "$bdir/rdmem" --shm-name "$shm" --path tcp get impostor-key
expect "... with the value put" grep -q secret-value "$tmp/out"
expect "no RDMA session with the impostor" bash -c "! grep -q 'rdma: session' '$tmp/agent.log'"
expect "the impostor served no call" bash -c "! grep -qi 'session opened\|established' '$tmp/impostor.log'"
ls_stop
stop_imp

# A whole server of another user (shm and TCP): reached over TCP only.
read -r port <<<"$(ls_free_ports 1)"
start_other "$tmp/other.log" -b 127.0.0.1 -p "$port" --fabric shm
expect "uid $uid's server (shm and TCP) starts" ls_wait_log "$tmp/other.log" "listening tcp" 10
agent_refusing "$port" "$shm-2"
check "a PUT to it goes over TCP" 0 "$bdir/rdmem" --shm-name "$shm-2" put k v
check "and a GET" 0 "$bdir/rdmem" --shm-name "$shm-2" get k
expect "... with the value put" grep -qx v "$tmp/out"
expect "no RDMA session" bash -c "! grep -q 'rdma: session' '$tmp/agent.log'"
ls_stop
stop_imp
expect "no process of uid $uid left" bash -c "! pgrep -u $uid >/dev/null"
exit $failed
