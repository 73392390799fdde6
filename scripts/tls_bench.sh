#!/usr/bin/env bash
# tls_bench.sh - what TLS costs the TCP path. Two daemon pairs on loopback,
# one plain and one with TLS 1.3 on both ends (throw-away certificates from
# openssl), each agent with --fabric tcp; `rdmem --path tcp bench` runs the
# same settings against both, rounds alternating so load swings hit both
# alike; medians are printed side by side.
#   scripts/tls_bench.sh            (RDMEM_BIN=build, ROUNDS=3, N=50000, W=16)
set -euo pipefail
B=${RDMEM_BIN:-build}
ROUNDS=${ROUNDS:-3}
N=${N:-50000}
W=${W:-16}
dir=$(mktemp -d /tmp/rdmem-tls-bench.XXXXXX)
pids=()
shms=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for s in "${shms[@]}"; do rm -f "/dev/shm${s}" "/dev/shm${s}-b"; done
	rm -rf "$dir"
}
trap cleanup EXIT

cert() { # name cn signer san
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/$1.key" \
		-out "$dir/$1.csr" -subj "/CN=$2" 2>/dev/null
	printf '%s\n' "$4" >"$dir/$1.ext"
	openssl x509 -req -in "$dir/$1.csr" -CA "$dir/$3.pem" -CAkey "$dir/$3.key" -CAcreateserial \
		-out "$dir/$1.pem" -days 1 -extfile "$dir/$1.ext" 2>/dev/null
	chmod 600 "$dir/$1.key"
}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/ca.key" \
	-out "$dir/ca.pem" -days 1 -subj /CN=rdmem-bench-ca 2>/dev/null
cert srv localhost ca "subjectAltName=DNS:localhost,IP:127.0.0.1"

wait_log() { # file text
	for _ in $(seq 200); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "tls_bench: no '$2' in $1:" >&2
	cat "$1" >&2
	return 1
}

# name port [server args --] agent args
start_pair() {
	local name=$1 port=$2 shm="/rdmem-tlsbench-$1-$$"
	shift 2
	local sargs=() aargs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do sargs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	aargs=("$@")
	"$B/rdmem-server" -b 127.0.0.1 -p "$port" --tcp-port $((port + 1)) --fabric shm \
		"${sargs[@]}" >"$dir/$name-server.log" 2>&1 &
	pids+=($!)
	wait_log "$dir/$name-server.log" "listening tcp"
	"$B/rdmem-agent" -s 127.0.0.1 -p "$port" --tcp-port $((port + 1)) --fabric tcp \
		--shm-name "$shm" "${aargs[@]}" >"$dir/$name-agent.log" 2>&1 &
	pids+=($!)
	shms+=("$shm")
	wait_log "$dir/$name-agent.log" "ready:"
}

base=$((20000 + RANDOM % 20000))
start_pair plain "$base" --
start_pair tls $((base + 2)) --tls-cert "$dir/srv.pem" --tls-key "$dir/srv.key" -- \
	--tls-ca "$dir/ca.pem"

# One run: "ops/s p50 p99".
run() { # name op size n window (size 0: none, as for ping)
	local size=()
	[ "$3" != 0 ] && size=(--size "$3")
	"$B/rdmem" --shm-name "/rdmem-tlsbench-$1-$$" --path tcp bench --op "$2" "${size[@]}" \
		-n "$4" --window "$5" | awk '
		/ ops\/s/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "ops/s") ops = $i }
		/latency us:/ { for (i = 1; i <= NF; i++) { if ($i == "p50") p50 = $(i + 1); if ($i == "p99") p99 = $(i + 1) } }
		/failures/ { if ($2 != 0) bad = 1 }
		END { if (bad) print "FAILED"; else printf "%s %s %s\n", ops, p50, p99 }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '# rdmem bench --path tcp, agent --fabric tcp, %d rounds alternating, medians; %s\n' \
	"$ROUNDS" "$(uptime | sed 's/.*load/load/')"
printf '%-16s %6s | %12s %12s %7s | %16s %16s\n' "op, value" window "ops/s plain" "ops/s TLS" \
	"TLS/pl" "p50/p99 us plain" "p50/p99 us TLS"
cases=("ping 0 $N $W" "get 64 $N $W" "put 64 $N $W" "get 4096 $N $W" "put 4096 $N $W"
	"get 1048576 400 4" "put 1048576 400 4")
for c in "${cases[@]}"; do
	read -r op size n w <<<"$c"
	: >"$dir/plain.r"
	: >"$dir/tls.r"
	for _ in $(seq "$ROUNDS"); do
		run plain "$op" "$size" "$n" "$w" >>"$dir/plain.r"
		run tls "$op" "$size" "$n" "$w" >>"$dir/tls.r"
	done
	if grep -q FAILED "$dir/plain.r" "$dir/tls.r"; then
		echo "tls_bench: $op $size: calls failed" >&2
		exit 1
	fi
	po=$(cut -d' ' -f1 "$dir/plain.r" | median)
	to=$(cut -d' ' -f1 "$dir/tls.r" | median)
	pp=$(printf '%s / %s' "$(cut -d' ' -f2 "$dir/plain.r" | median)" \
		"$(cut -d' ' -f3 "$dir/plain.r" | median)")
	tp=$(printf '%s / %s' "$(cut -d' ' -f2 "$dir/tls.r" | median)" \
		"$(cut -d' ' -f3 "$dir/tls.r" | median)")
	label="$op $size B"
	[ "$op" = ping ] && label=ping
	printf '%-16s %6s | %12s %12s %6.2fx | %16s %16s\n' "$label" "$w" "$po" "$to" \
		"$(awk -v a="$to" -v b="$po" 'BEGIN { print (b > 0 ? a / b : 0) }')" "$pp" "$tp"
done
# The TLS pair really ran TLS: its agent counted exactly one session.
"$B/rdmem" --shm-name "/rdmem-tlsbench-tls-$$" agent-stats | grep -E '^tls\.handshakes 1$' >/dev/null ||
	{ echo "tls_bench: the TLS agent did not report one TLS session" >&2; exit 1; }
