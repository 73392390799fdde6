#!/usr/bin/env bash
# collect_env.sh - what an RDMemRPC bug report or benchmark needs to know
# about this host: kernel, distribution, RDMA devices and ports, the
# netdev <-> RDMA device map, GIDs, MTUs, the locked-memory limit,
# hugepages, io_uring, CPU and NUMA. Works on a host without RDMA and says
# what is absent instead of failing. Writes logs/env_<host>_<timestamp>.log
# and prints its path.
#
#   scripts/collect_env.sh [--out DIR] [--stdout]
#     --out DIR   folder for the log (default logs/ in the repository)
#     --stdout    also print the report
set -euo pipefail
cd "$(dirname "$0")/.."

out=logs echo_too=0
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=${2:?--out needs a folder}; shift 2 ;;
	--stdout) echo_too=1; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "collect_env: unknown option '$1'" >&2; exit 2 ;;
	esac
done
mkdir -p "$out"
host=$(hostname -s 2>/dev/null || uname -n)
log="$out/env_${host}_$(date +%Y%m%d_%H%M%S).log"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

section() { printf '\n== %s ==\n' "$1"; }
# run LABEL CMD...: the command's output, or why there is none. Bounded in time.
run() {
	local label=$1
	shift
	printf -- '--- %s: %s\n' "$label" "$*"
	if ! command -v "$1" >/dev/null 2>&1; then
		echo "(absent: $1 is not installed)"
		return 0
	fi
	if timeout 10 "$@" >"$tmp" 2>&1; then
		if [ -s "$tmp" ]; then cat "$tmp"; else echo "(no output)"; fi
	else
		echo "(exit $?)"
		sed 's/^/  /' "$tmp"
	fi
}
show() { # show FILE [LABEL]
	if [ -r "$1" ]; then
		printf -- '--- %s\n' "${2:-$1}"
		cat "$1"
	else
		printf -- '--- %s: (absent)\n' "${2:-$1}"
	fi
}

{
	echo "RDMemRPC environment report"
	echo "host: $host"
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "user: $(id -un) (uid $(id -u))"
	if git rev-parse --short HEAD >/dev/null 2>&1; then
		echo "rdmem commit: $(git rev-parse --short HEAD)$(git diff --quiet 2>/dev/null || echo ' (modified)')"
	fi

	section "kernel and distribution"
	run "kernel" uname -a
	show /etc/os-release
	show /proc/cmdline "kernel command line"
	run "virtualisation" systemd-detect-virt

	section "RDMA devices (/sys/class/infiniband)"
	if [ -d /sys/class/infiniband ] && [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
		for dev in /sys/class/infiniband/*; do
			d=$(basename "$dev")
			echo "device $d: node_type $(cat "$dev/node_type" 2>/dev/null || echo ?)," \
				"fw $(cat "$dev/fw_ver" 2>/dev/null || echo ?)," \
				"node_guid $(cat "$dev/node_guid" 2>/dev/null || echo ?)"
			for p in "$dev"/ports/*; do
				[ -d "$p" ] || continue
				pn=$(basename "$p")
				echo "  port $pn: state $(cat "$p/state" 2>/dev/null || echo ?)," \
					"phys_state $(cat "$p/phys_state" 2>/dev/null || echo ?)," \
					"link_layer $(cat "$p/link_layer" 2>/dev/null || echo ?)," \
					"rate $(cat "$p/rate" 2>/dev/null || echo ?)"
				# Non-zero GIDs with their type and netdev: what rdma_cm picks from.
				for g in "$p"/gids/*; do
					[ -r "$g" ] || continue
					i=$(basename "$g")
					gid=$(cat "$g" 2>/dev/null || true)
					case $gid in "" | 0000:0000:0000:0000:0000:0000:0000:0000) continue ;; esac
					echo "    gid[$i] $gid type $(cat "$p/gid_attrs/types/$i" 2>/dev/null || echo ?)" \
						"netdev $(cat "$p/gid_attrs/ndevs/$i" 2>/dev/null || echo ?)"
				done
			done
		done
	else
		echo "(absent: no RDMA device; rdmem-agent and rdmem-server fall back to the shm fabric"
		echo " for a server on this host, else TCP. scripts/rxe-vm.sh runs Soft-RoCE in a VM.)"
	fi
	run "RDMA links" rdma link show
	run "RDMA devices" rdma dev show
	run "RDMA system" rdma system show
	run "verbs devices" ibv_devices
	run "verbs device info" ibv_devinfo -v
	echo "--- kernel modules"
	grep -E '^(ib_core|ib_uverbs|rdma_cm|rdma_ucm|rdma_rxe|siw|mlx5_ib|mlx4_ib|irdma|bnxt_re|efa) ' \
		/proc/modules 2>/dev/null || echo "(no RDMA module loaded)"
	echo "--- /dev/infiniband (verbs and rdma_cm device nodes)"
	ls -l /dev/infiniband 2>/dev/null || echo "(absent)"

	section "netdev <-> RDMA device map, MTUs"
	links=$(timeout 10 rdma link show 2>/dev/null || true)
	if [ -n "$links" ]; then
		# "link rxe0/1 state ACTIVE ... netdev veth0": device/port -> netdev
		echo "$links" | awk '{ for (i = 1; i < NF; i++) if ($i == "netdev") print $2, "->", $(i + 1) }'
	elif [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
		for d in /sys/class/infiniband/*; do
			echo "$(basename "$d") -> $(ls "$d/device/net" 2>/dev/null | tr '\n' ' ')"
		done
	else
		echo "(absent: no RDMA device, so no netdev is mapped to one)"
	fi
	echo "--- netdevs (name, state, MTU, addresses)"
	if command -v ip >/dev/null 2>&1; then
		ip -brief address 2>/dev/null || true
		ip -o link 2>/dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "mtu") print $2, "mtu", $(i + 1) }'
	else
		echo "(absent: ip is not installed)"
	fi
	echo "--- RDMA active MTU per port (ibv_devinfo)"
	if command -v ibv_devinfo >/dev/null 2>&1; then
		timeout 10 ibv_devinfo 2>/dev/null | grep -E 'hca_id|port:|active_mtu|max_mtu|state' || echo "(no device)"
	else
		echo "(absent: ibv_devinfo is not installed: apt-get install ibverbs-utils)"
	fi

	section "memory: locked-memory limit, hugepages"
	echo "ulimit -l (this shell): $(ulimit -l)"
	echo "ulimit -l hard: $(ulimit -H -l)"
	if [ "$(ulimit -l)" != unlimited ]; then
		echo "note: RDMA registers rdmem's regions (tens of MiB per session); raise it"
		echo "      (ulimit -l unlimited, or LimitMEMLOCK=infinity in the systemd units)"
	fi
	grep -E '^(MemTotal|MemAvailable|HugePages_Total|HugePages_Free|Hugepagesize|Mlocked)' /proc/meminfo
	show /sys/kernel/mm/transparent_hugepage/enabled "transparent hugepages"
	echo "--- front-door sockets (/run/rdmem; segments are memfds, in RAM)"
	ls -la /run/rdmem 2>/dev/null || echo "(no /run/rdmem)"

	section "io_uring"
	show /proc/sys/kernel/io_uring_disabled "kernel.io_uring_disabled (0 = allowed)"
	if command -v python3 >/dev/null 2>&1; then
		# io_uring_setup(2) with 1 entry: the syscall number is 425 on every arch.
		python3 - <<'EOF' || true
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 1, params)
if fd >= 0:
    os.close(fd)
    print("io_uring_setup: works")
else:
    print("io_uring_setup: fails:", os.strerror(ctypes.get_errno()),
          "(rdmem-server's TCP loop and image store need io_uring)")
EOF
	else
		echo "(python3 absent: io_uring not probed)"
	fi
	echo "liburing: $(ls /usr/lib/*/liburing.so.* 2>/dev/null | head -1 || true)"
	[ -n "$(ls /usr/lib/*/liburing.so.* 2>/dev/null)" ] || echo "(absent: liburing is not installed)"

	section "CPU and NUMA"
	run "cpus" nproc
	run "lscpu" lscpu
	if [ -d /sys/devices/system/node ]; then
		for nd in /sys/devices/system/node/node*; do
			[ -d "$nd" ] || continue
			echo "$(basename "$nd"): cpus $(cat "$nd/cpulist" 2>/dev/null)," \
				"$(awk '/MemTotal/ { print $4, $5 }' "$nd/meminfo" 2>/dev/null)"
		done
	else
		echo "(absent: no NUMA information in sysfs)"
	fi
	run "numactl" numactl --hardware
	for dev in /sys/class/infiniband/*; do
		[ -r "$dev/device/numa_node" ] && echo "$(basename "$dev") numa_node $(cat "$dev/device/numa_node")"
	done
	show /proc/loadavg "load average"

	section "RDMemRPC processes and builds"
	ps -eo pid,args 2>/dev/null | grep -E '[r]dmem-(agent|server)' || echo "(no rdmem daemon running)"
	for b in build/rdmem-server build/rdmem-agent build/rdmem; do
		if [ -x "$b" ]; then echo "$b: built $(date -r "$b" -u +%Y-%m-%dT%H:%M:%SZ)"; else echo "$b: (absent)"; fi
	done
	run "compiler" cc --version
	for p in libibverbs-dev librdmacm-dev liburing-dev rdma-core ibverbs-providers ibverbs-utils; do
		v=$(dpkg-query -W -f '${Version}' "$p" 2>/dev/null || true)
		echo "package $p: ${v:-(absent)}"
	done
} >"$log" 2>&1

echo "$log"
[ "$echo_too" = 1 ] && cat "$log"
exit 0
