#!/usr/bin/env bash
# install-deps.sh - installs the Debian 12 packages RDMemRPC builds and tests
# with, if any is missing. Used by .ci/run and scripts/demo.sh; safe to rerun.
#   scripts/install-deps.sh [extra packages...]
#   scripts/install-deps.sh --rxe   what scripts/rxe-vm.sh needs on the host
#                                   (make test-rxe): qemu, readelf
set -euo pipefail

opts=()
if [ "${1:-}" = --rxe ]; then
	shift
	# The guest image itself is built from Debian packages by rxe-vm.sh;
	# qemu's recommends (GUI, audio) are not needed for a headless TCG guest.
	pkgs=(qemu-system-x86 binutils "$@")
	opts=(--no-install-recommends)
else
	pkgs=(build-essential clang libclang-rt-dev pkg-config liburing-dev libibverbs-dev librdmacm-dev
	      rdma-core ibverbs-providers libsodium-dev libgnutls28-dev openssl iproute2 procps psmisc
	      python3 abigail-tools redis-server redis-tools python3-redis strace libucx-dev ucx-utils "$@")
	# abigail-tools: abidiff for `make abi-check`; redis-server, redis-tools and
	# python3-redis: the Redis clients that tests/integration/resp.sh and
	# `make bench` drive rdmem-agent --resp-port with; libgnutls28-dev: TLS on
	# the TCP path (tcp/tls.c); openssl: the command test_tls and
	# scripts/tls_bench.sh make throw-away certificates with; strace: the
	# syscall counts of bench/hotpath.sh (its smoke run is in make test);
	# libucx-dev, ucx-utils: the UCX store that `make bench` compares with
	# (bench/ucx_kv_*.c; bench_smoke.sh in make test checks its values) and
	# ucx_perftest beneath it.
fi
missing=()
for p in "${pkgs[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
	exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${opts[@]}" "${missing[@]}" >/dev/null
