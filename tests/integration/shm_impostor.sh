#!/usr/bin/env bash
# shm_impostor.sh - the shm fabric's listener name is abstract
# (@rdmem-shm:PORT): any local user can bind it, first. A root rdmem-server
# serves TCP only (--fabric none); another user binds the shm name of its
# port with a server of its own. The root agent must not trust that
# listener (it is not root, not the agent's user, and holds no TCP listener
# on the server's port): it logs why, and every call goes over TCP to the
# real server, the impostor seeing none. Then the other user runs a whole
# server (shm and the TCP port): a listener whose user holds the server's
# TCP port is trusted, as TCP trusts whoever holds the port, and the
# session comes up over shm. Needs root (to run a process as another user)
# and RDMEM_BIN.
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
if ! as_other test -x "$bdir/rdmem-server"; then
	echo "ok - shm impostor refused # SKIP uid $uid cannot run $bdir/rdmem-server (a private directory on its path)"
	exit 0
fi
imp_pid=
stop_imp() { [ -n "$imp_pid" ] && ls_stop_pid "$imp_pid"; imp_pid=; }
trap 'stop_imp; ls_stop; rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
read -r port other <<<"$(ls_free_ports 2)"
shm=/rdmem-impostor-$$

# The real server: root, TCP only, on port+1.
LS_FIXED_PORT=$port
if ! ls_start_server "$tmp" --fabric none; then
	echo "not ok - the real server (TCP only) starts"
	exit 1
fi
# The impostor: another user, the shm name of the same port, TCP elsewhere.
as_other "$bdir/rdmem-server" -b 127.0.0.1 -p "$port" --tcp-port "$((other + 1))" --fabric shm \
	>"$tmp/impostor.log" 2>&1 &
imp_pid=$!
expect "the impostor binds @rdmem-shm:$port as uid $uid" ls_wait_log "$tmp/impostor.log" "listening shm" 10
: >"$tmp/agent.log"
"$bdir/rdmem-agent" -s 127.0.0.1 -p "$port" --shm-name "$shm" >>"$tmp/agent.log" 2>&1 &
LS_AGENT_PID=$!
expect "the agent starts" ls_wait_log "$tmp/agent.log" "ready:" 10
expect "the agent refuses the listener and says why" \
	ls_wait_log "$tmp/agent.log" "not trusted (another user may have taken the name)" 10
check "a PUT through the agent" 0 "$bdir/rdmem" --shm-name "$shm" put impostor-key secret-value
check "the real server holds it (over TCP)" 0 "$bdir/rdmem" --shm-name "$shm" --path tcp get impostor-key
expect "... with the value put" grep -q secret-value "$tmp/out"
expect "no RDMA session with the impostor" bash -c "! grep -q 'rdma: session' '$tmp/agent.log'"
expect "the impostor served no call" bash -c "! grep -qi 'session opened\|established' '$tmp/impostor.log'"
ls_stop
stop_imp

# The same user holding the server's TCP port: trusted, the session over shm.
read -r port <<<"$(ls_free_ports 1)"
as_other "$bdir/rdmem-server" -b 127.0.0.1 -p "$port" --fabric shm >"$tmp/other.log" 2>&1 &
imp_pid=$!
expect "uid $uid's server (shm and TCP) starts" ls_wait_log "$tmp/other.log" "listening tcp" 10
: >"$tmp/agent.log"
"$bdir/rdmem-agent" -s 127.0.0.1 -p "$port" --shm-name "$shm-2" >>"$tmp/agent.log" 2>&1 &
LS_AGENT_PID=$!
expect "the agent starts" ls_wait_log "$tmp/agent.log" "ready:" 10
expect "the agent trusts the listener of the TCP port's user: session over shm" \
	ls_wait_log "$tmp/agent.log" "rdma: session" 10
check "a PUT and GET over shm" 0 "$bdir/rdmem" --shm-name "$shm-2" put k v
exit $failed
