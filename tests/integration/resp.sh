#!/usr/bin/env bash
# resp.sh - rdmem-agent's Redis protocol front end (--resp-port,
# --resp-socket) with the real Debian clients against a real server + agent
# (shm fabric): redis-cli for each command with its exact reply, the Unix
# socket and its mode, redis-benchmark -t ping,set,get,mset at -P 1 and -P 32
# finishing every request (counted by the agent's resp.cmds), redis-py
# byte-exact values, pipelines, RESP3 and malformed input
# (tests/tools/resp_check.py), INFO with its # Memory budget lines, the
# connection limit, the counters in
# `rdmem agent-stats` (none of it closed for --resp-max-memory at its
# default). Tools missing: "# SKIP" (scripts/install-deps.sh
# installs redis-tools and python3-redis). Needs RDMEM_BIN.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/tap.sh
. tests/tap.sh resp stack

# Debian's python3 (where python3-redis lives), not a pyenv shim.
py=/usr/bin/python3
missing=
command -v redis-cli >/dev/null || missing="redis-cli (redis-tools)"
command -v redis-benchmark >/dev/null || missing="$missing redis-benchmark (redis-tools)"
$py -c 'import redis' 2>/dev/null || missing="$missing python3-redis"
if [ -n "$missing" ]; then
	echo "ok - redis protocol with the Debian clients # SKIP not installed: $missing"
	exit 0
fi

shm=/rdmem-resp-$$
rport=$(ls_free_ports 1)
sock=$tmp/redis.sock
mkdir -p "$tmp/run"
# A 16 MiB store: the last case fills it.
if ! ls_start_server "$tmp/run" --kv-max-bytes 16m ||
	! ls_start_agent "$tmp/run" "$shm" --clients 4 --slots 16 --resp-port "$rport" \
		--resp-socket "$sock" --resp-max-conns 24; then
	echo "not ok - server and agent with --resp-port start"
	exit 1
fi
stat() { "$bdir/rdmem" --shm-name "$shm" agent-stats | awk -v k="$1" '$1 == k { print $2 }'; }
cli() { redis-cli --no-raw -p "$rport" "$@" 2>&1; }
same() { # same NAME WANT CMD...: the command's output is exactly WANT
	local name=$1 want=$2 got
	shift 2
	got=$("$@" 2>&1)
	if [ "$got" = "$want" ]; then
		echo "ok - $name"
	else
		echo "not ok - $name"
		printf '#   want: %s\n#   got:  %s\n' "$want" "$got"
		failed=1
	fi
}

expect "--resp-port listens on 127.0.0.1 only by default" \
	bash -c "ss -Hltn | awk '{print \$4}' | grep -qx '127.0.0.1:$rport'"
expect "--resp-socket is a socket of mode 0660" bash -c "[ -S '$sock' ] && [ \"\$(stat -c %a '$sock')\" = 660 ]"

same "PING" "PONG" cli PING
same "PING message" '"hello"' cli PING hello
same "ECHO" '"a b"' cli ECHO "a b"
same "SET" "OK" cli SET k1 v1
same "GET" '"v1"' cli GET k1
same "GET of a missing key is nil" "(nil)" cli GET nokey
same "SET overwrites" '"v2"' bash -c "redis-cli -p $rport SET k1 v2 >/dev/null; redis-cli --no-raw -p $rport GET k1"
same "MSET" "OK" cli MSET a 1 b 2 c 3
same "MGET keeps the order, nil for missing" '1) "1"
2) (nil)
3) "3"' cli MGET a nokey c
same "EXISTS counts every key named" "(integer) 3" cli EXISTS a a b nokey
same "DEL counts the keys removed" "(integer) 2" cli DEL a b nokey
same "DEL of a removed key" "(integer) 0" cli DEL a
same "SET with EX is refused naming the option" \
	"(error) ERR SET option 'EX' is not supported by rdmem (no TTLs, no conditional or GET sets): use plain SET key value" \
	cli SET k1 v EX 10
same "SET with NX is refused naming the option" \
	"(error) ERR SET option 'NX' is not supported by rdmem (no TTLs, no conditional or GET sets): use plain SET key value" \
	cli SET k1 v NX
same "an unknown command gets Redis's error" \
	"(error) ERR unknown command 'FLUSHALL', with args beginning with: 'x' " cli FLUSHALL x
same "a wrong arity" "(error) ERR wrong number of arguments for 'get' command" cli GET
same "SELECT 0" "OK" cli SELECT 0
same "SELECT 1 is refused" "(error) ERR DB index is out of range (rdmem has database 0 only)" cli SELECT 1
long=$(printf 'k%.0s' $(seq 1025))
same "a key over 1024 bytes names the limit" \
	"(error) ERR key length 1025 over the limit 1024 bytes (RDMEM_MAX_KEY)" cli GET "$long"
same "an empty key is refused" "(error) ERR empty keys are not supported by rdmem" cli GET ""
same "CLIENT SETNAME then GETNAME on one connection" 'OK
"me"' bash -c "printf 'CLIENT SETNAME me\nCLIENT GETNAME\n' | redis-cli --no-raw -p $rport"
same "QUIT" "OK" cli QUIT
expect "COMMAND COUNT is a number" bash -c "redis-cli -p $rport COMMAND COUNT | grep -Eqx '[0-9]+'"
cli INFO >"$tmp/info"
expect "INFO has # Server and # Stats with counters" \
	bash -c "grep -q '^# Server' '$tmp/info' && grep -q '^# Stats' '$tmp/info' && grep -Eq '^total_commands_processed:[1-9]' '$tmp/info'"
# # Memory: the budget (the default, 256 MiB: above the floor at --slots 16),
# the policy, what the connections hold; evicted_clients in # Stats, as Redis 7.
tr -d '\r' <"$tmp/info" >"$tmp/info.lf"
expect "INFO # Memory: maxmemory is the default --resp-max-memory, policy rdmem-evict-stalled" \
	bash -c "grep -qx '# Memory' '$tmp/info.lf' && grep -qx 'maxmemory:268435456' '$tmp/info.lf' && grep -qx 'maxmemory_policy:rdmem-evict-stalled' '$tmp/info.lf'"
expect "INFO used_memory is what the RESP connections hold ($(grep '^used_memory:' "$tmp/info.lf"))" \
	grep -Eqx 'used_memory:[1-9][0-9]*' "$tmp/info.lf"
expect "INFO evicted_clients is 0 at the default budget" grep -qx 'evicted_clients:0' "$tmp/info.lf"
same "the Unix socket serves GET" '"v2"' redis-cli --no-raw -s "$sock" GET k1

# redis-benchmark: every request answered (the agent counts the commands).
# Sanitizer builds run ten times slower: fewer requests there.
n=20000
[ -n "${RDMEM_SANITIZER:-}" ] && n=2000
bench() { # bench P: runs the four tests, checks the CSV rows and the count
	local p=$1 before after rows
	before=$(stat resp.cmds)
	timeout 300 redis-benchmark -p "$rport" -t ping,set,get,mset -n "$n" -c 8 -P "$p" --csv \
		>"$tmp/bench$p.csv" 2>"$tmp/bench$p.err"
	after=$(stat resp.cmds)
	rows=$(grep -cE '^"(PING_INLINE|PING_MBULK|SET|GET|MSET \(10 keys\))","[0-9.]+"' "$tmp/bench$p.csv")
	sed 's/^/#   /' "$tmp/bench$p.csv"
	expect "redis-benchmark -P $p: five tests finished with a rate ($rows rows)" [ "$rows" = 5 ]
	# At least 5 x n commands; the benchmark's own set-up adds a few.
	expect "redis-benchmark -P $p: the agent answered all $((5 * n)) commands ($((after - before)))" \
		[ $((after - before)) -ge $((5 * n)) ]
}
bench 1
bench 32
expect "redis-benchmark's SET left its 3-byte value" \
	[ "$(redis-cli -p "$rport" GET key:__rand_int__ | tr -d '\n' | wc -c)" = 3 ]

$py tests/tools/resp_check.py "$rport" 1048576 "$LS_AGENT_PID" || failed=1

# The connection limit: 24 open, the 25th refused with a reason.
$py - "$rport" >"$tmp/limit" 2>&1 <<'PY'
import socket, sys, time
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(24)]
for s in held:
    s.sendall(b"PING\r\n")
    assert s.recv(100) == b"+PONG\r\n"
extra = socket.create_connection(("127.0.0.1", port))
extra.settimeout(5)
print(extra.recv(200).decode().strip())
print("closed" if extra.recv(200) == b"" else "open")
PY
expect "--resp-max-conns: the connection over the limit is told why and closed" \
	bash -c "grep -q 'max number of clients reached' '$tmp/limit' && grep -qx closed '$tmp/limit'"
expect "resp.refused counts it" [ "$(stat resp.refused)" -ge 1 ]
expect "resp.protocol_errors counts the 6 malformed streams of resp_check.py" \
	[ "$(stat resp.protocol_errors)" = 6 ]
expect "resp.errors counts error replies" [ "$(stat resp.errors)" -ge 10 ]
expect "resp.conns counts connections" [ "$(stat resp.conns)" -ge 40 ]
expect "the agent's calls went over the shm fabric (paths.eager.ok moved)" \
	[ "$(stat paths.eager.ok)" -ge $((10 * n)) ]
expect "the default --resp-max-memory closed no honest connection (resp.evicted_memory $(stat resp.evicted_memory))" \
	[ "$(stat resp.evicted_memory)" = 0 ]
# The server's store full (--kv-max-bytes 16m): SET answers Redis's own OOM
# error, so clients raise their out-of-memory exception, not a disk error.
head -c 1000000 /dev/zero >"$tmp/big"
expect "SET past the server's --kv-max-bytes answers -OOM" bash -c "for i in \$(seq 40); do
	out=\$(redis-cli -p $rport -x SET oomfill\$i <'$tmp/big' 2>&1)
	case \$out in OK) ;; *'OOM command not allowed'*) exit 0 ;; *) echo \"\$out\"; exit 1 ;; esac
done; exit 1"
expect "the agent logged no error" bash -c "! grep -q ': error:' '$tmp/run/agent.log'"
ls_stop
expect "the agent removed its Unix socket on exit" [ ! -e "$sock" ]
# A directory others may rename in (0777, not sticky): another user could
# swap the socket for a link before the chmod. Refused at start.
mkdir "$tmp/open" && chmod 0777 "$tmp/open"
timeout -s KILL 20 "$bdir/rdmem-agent" -s 127.0.0.1 -p 1 --fabric tcp --shm-name "$shm-open" \
	--resp-socket "$tmp/open/redis.sock" >"$tmp/open.log" 2>&1
rc=$?
expect "--resp-socket in a directory others can write (0777) is refused (exit $rc)" \
	bash -c "[ $rc = 1 ] && grep -q 'writable by others (mode 0777)' '$tmp/open.log' && [ ! -e '$tmp/open/redis.sock' ]"
exit $failed
