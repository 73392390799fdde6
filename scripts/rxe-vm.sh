#!/usr/bin/env bash
# rxe-vm.sh - run a command against real Soft-RoCE (rdma_rxe) inside a
# throw-away qemu VM that boots Debian 12's own kernel.
#
# For any Debian 12 host without RDMA hardware or RDMA in its kernel: the VM
# has no network card (-nic none); all RDMA traffic stays inside the guest,
# on rxe devices bound to a dummy netdev ("one host") and/or to the two ends
# of a veth pair ("two hosts").
#
# Usage:
#   scripts/rxe-vm.sh [-d DIR] [-m MODE] [-t SECS] [-v] [--rebuild] [--] COMMAND...
#
#   -d DIR     copied into the VM as /extra (COMMAND's cwd, first on PATH),
#              typically a staging copy of build/ plus scripts. Host shared
#              libraries that ELF files in DIR need and the image lacks are
#              copied to /extra/.lib and put on LD_LIBRARY_PATH.
#   -m MODE    rxe setup before COMMAND runs (default: dummy):
#                dummy  rxe0 on dummy0, 198.18.0.1/24; client and server share it
#                veth   veth0 198.19.0.1 (rxe_s) <-> veth1 198.19.0.2 (rxe_c), both
#                       in the root netns (rxe in 6.1 only listens on UDP 4791 there),
#                       policy-routed so traffic between the two addresses crosses
#                       the veth; a client picks rxe_c by binding source 198.19.0.2
#                both   dummy and veth at once (one boot for a whole suite)
#                lo     rxe0 on lo: raw verbs work, rdma_cm route resolution does
#                       NOT (ENODEV); kept to reproduce that pitfall
#                none   modules loaded, no rxe device
#   -t SECS    limit for COMMAND inside the VM (default 300). The VM as a whole
#              gets SECS + RDMEM_RXE_BOOT_SLACK (default 180) seconds.
#   -v         print the guest kernel console after the run
#   --rebuild  rebuild the cached base image first
#   COMMAND    shell text, run by bash in /extra (remaining args joined by spaces)
#
# Inside the VM: RXE_MODE; RXE_SRV_IP / RXE_CLI_IP (the first mode set up);
# RXE_DUMMY_IP, RXE_DUMMY_DEV (dummy, both); RXE_VETH_SRV_IP, RXE_VETH_CLI_IP,
# RXE_VETH_SRV_DEV, RXE_VETH_CLI_DEV (veth, both). The RoCEv2 IPv4 GID is
# index 1. memlock is unlimited, we are root. Tools: ibv_devinfo, rping,
# ib_*_lat/bw (perftest), rdma, ip, tc (netem, drop filters), bash, coreutils,
# python3 (3.11 with its standard library), busybox applets.
#
# Exit status: COMMAND's own; 124 = COMMAND timed out inside the VM;
# 125 = the VM or the image build failed (no status came back); 2 = usage.
#
# Environment: RDMEM_RXE_CACHE (image cache; default
# ${XDG_CACHE_HOME:-$HOME/.cache}/rdmem-rxe), RDMEM_RXE_MEM (MiB, 1024),
# RDMEM_RXE_SMP (2), RDMEM_RXE_KEEP=1 keeps the per-run directory.
#
# Host needs: apt-get/dpkg with Debian 12 lists, qemu-system-x86, binutils
# (readelf); as root, missing host tools are installed with apt-get.
# Cost here (2 shared cores, TCG, no KVM): first image build ~15 s
# (download + extract, cached after), then ~12 s wall to boot and run a
# trivial command. Under TCG an RDMA op costs ~50 us: runs in this VM prove
# correctness, never speed.
set -euo pipefail

CACHE=${RDMEM_RXE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmem-rxe}
MEM=${RDMEM_RXE_MEM:-1024}
SMP=${RDMEM_RXE_SMP:-2}
SLACK=${RDMEM_RXE_BOOT_SLACK:-180}
DIR="" MODE=dummy TMO=300 VERBOSE="" REBUILD=""

# Debian 12 packages of the image. No dependency resolver runs: every run-time
# dependency is listed, and build_image() checks each ELF's NEEDED sonames.
PKGS="busybox-static bash libtinfo6 libgcc-s1 libc6 coreutils libacl1 libattr1
 libgmp10 libssl3 libselinux1 libpcre2-8-0 kmod libkmod2 liblzma5 libzstd1
 libibverbs1 librdmacm1 ibverbs-providers ibverbs-utils rdmacm-utils perftest
 libibumad3 libpci3 libudev1 libnl-3-200 libnl-route-3-200 liburing2
 iproute2 libmnl0 libbsd0 libmd0 libelf1 zlib1g libbpf1 libcap2 libdb5.3
 libtirpc3 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libcom-err2 libkrb5support0
 libkeyutils1 libxtables12
 python3-minimal python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libexpat1
 libffi8 libbz2-1.0 libsqlite3-0 libuuid1 libreadline8 libncursesw6 libnsl2 libcrypt1"
# python3 (minimal + stdlib, no pip) runs tests/torture/ in the guest; the
# other libraries are what the stdlib's extension modules link against.
# Kernel modules; modprobe --show-depends adds what they need.
# sch_netem, sch_ingress, cls_matchall, act_gact: to cut the network under
# RDMA by hand (tc ... netem loss 100%, or a matchall drop filter).
MODS="rdma_rxe ib_uverbs ib_umad rdma_ucm rdma_cm ib_cm iw_cm crc32_generic crc32_pclmul veth dummy
 sch_netem sch_ingress cls_matchall act_gact"
IMAGE_VERSION=2 # bump when build_image() or the guest init changes the image

log() { echo "[rxe-vm] $*" >&2; }
die() {
	log "$*"
	exit 125
}
usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
	exit "${1:-2}"
}
is_elf() { [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; }

parse_args() {
	while [ $# -gt 0 ]; do
		case $1 in
		-d) DIR=$2; shift 2 ;;
		-m) MODE=$2; shift 2 ;;
		-t) TMO=$2; shift 2 ;;
		-v) VERBOSE=1; shift ;;
		--rebuild) REBUILD=1; shift ;;
		-h | --help) usage 0 ;;
		--) shift; break ;;
		-*) log "unknown option $1"; usage 2 ;;
		*) break ;;
		esac
	done
	[ $# -gt 0 ] || usage 2
	CMD="$*"
	case $MODE in dummy | veth | both | lo | none) ;; *) log "unknown mode $MODE"; usage 2 ;; esac
	[[ $TMO =~ ^[0-9]+$ ]] || { log "-t needs seconds"; usage 2; }
	[ -z "$DIR" ] || [ -d "$DIR" ] || { log "-d $DIR: not a directory"; exit 2; }
}

ensure_host_tools() {
	local need=()
	command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
	command -v readelf >/dev/null || need+=(binutils)
	command -v apt-get >/dev/null || die "apt-get not found: the image is built from Debian 12 packages"
	[ ${#need[@]} -eq 0 ] && return
	[ "$(id -u)" = 0 ] || die "missing host packages: ${need[*]} (install them as root)"
	log "installing host packages: ${need[*]}"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends "${need[@]}" >/dev/null || die "apt-get install ${need[*]} failed"
}

image_key() {
	printf '%s\n%s\n%s\n' "$IMAGE_VERSION" "$PKGS" "$MODS" | sha256sum | cut -c1-12
}

# Kernel modules the image needs, with their dependencies, copied with depmod data.
install_modules() {
	local W=$1 R=$1/root KV=$2 LDP mods f rel
	LDP="$R/lib/x86_64-linux-gnu:$R/usr/lib/x86_64-linux-gnu"
	mkdir -p "$W/tools"
	# kmod from the extracted package: the host needs none.
	for f in depmod modprobe; do ln -sf "$R/bin/kmod" "$W/tools/$f"; done
	LD_LIBRARY_PATH=$LDP "$W/tools/depmod" -b "$W/kroot" "$KV"
	mods=$(for m in $MODS; do
		LD_LIBRARY_PATH=$LDP "$W/tools/modprobe" -C /dev/null -d "$W/kroot" -S "$KV" --show-depends "$m"
	done | awk '$1=="insmod"{print $2}' | sort -u)
	[ -n "$mods" ] || die "no kernel modules found for: $MODS"
	for f in $mods; do
		rel=${f#"$W/kroot/lib/modules/$KV/"}
		mkdir -p "$R/lib/modules/$KV/$(dirname "$rel")"
		cp "$f" "$R/lib/modules/$KV/$rel"
	done
	cp "$W/kroot/lib/modules/$KV"/modules.{order,builtin,builtin.modinfo} "$R/lib/modules/$KV/"
	LD_LIBRARY_PATH=$LDP "$W/tools/depmod" -b "$R" "$KV"
}

# Fails when an ELF file of the image needs a soname the image lacks.
check_image_libs() {
	local R=$1 f n miss=0
	while read -r f; do
		is_elf "$f" || continue
		for n in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
			grep -qxF "$n" "$R/../base-libs.txt" || { log "missing $n (needed by ${f#"$R"})"; miss=1; }
		done
	done < <(find "$R"/bin "$R"/sbin "$R"/usr/bin "$R"/usr/sbin "$R"/lib "$R"/usr/lib -type f \
		\( -perm -u+x -o -name '*.so*' \) -not -path '*/modules/*')
	[ $miss = 0 ] || die "base image incomplete: add the packages providing these libraries to PKGS"
}

finish_rootfs() {
	local R=$1 a
	rm -rf "$R"/usr/share "$R"/usr/include "$R"/usr/lib/x86_64-linux-gnu/gconv "$R"/usr/lib/x86_64-linux-gnu/tc "$R"/etc/init.d "$R"/etc/cron*
	# busybox applets go last on PATH (/bb), so real iproute2/kmod/coreutils win
	mkdir -p "$R/bb" "$R"/{proc,sys,dev,run,tmp,extra,var,root,mnt}
	for a in $("$R/bin/busybox" --list); do ln -sf /bin/busybox "$R/bb/$a"; done
	[ -e "$R/bin/sh" ] || ln -s busybox "$R/bin/sh"
	ln -sfn /run "$R/var/run"
	printf '127.0.0.1 localhost\n::1 localhost\n' >"$R/etc/hosts"
	echo 'root:x:0:0:root:/root:/bin/bash' >"$R/etc/passwd"
	echo 'root:x:0:' >"$R/etc/group"
	echo 'include /etc/ld.so.conf.d/*.conf' >"$R/etc/ld.so.conf"
	ldconfig -r "$R" 2>/dev/null || true
	(cd "$R" && find lib usr/lib -name '*.so*' -printf '%f\n') | sort -u >"$R/../base-libs.txt"
}

build_image() {
	local IMG=$1 W=$1.tmp KPKG KV t0=$SECONDS d
	rm -rf "$W"
	mkdir -p "$W"/{debs,kroot,root}
	if [ "$(id -u)" = 0 ]; then
		log "apt-get update"
		apt-get update -qq || die "apt-get update failed"
	fi
	KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	[ -n "$KPKG" ] || die "cannot resolve linux-image-amd64 (apt lists missing? run apt-get update)"
	log "downloading $KPKG and $(echo $PKGS | wc -w) packages"
	chmod 777 "$W/debs" # apt's _apt user downloads into it
	(cd "$W/debs" && apt-get download -qq "$KPKG" $PKGS 2> >(grep -v unsandboxed >&2)) ||
		die "apt-get download failed"
	dpkg -x "$W"/debs/linux-image-*.deb "$W/kroot"
	for d in "$W"/debs/*.deb; do
		case $d in *linux-image*) continue ;; esac
		dpkg -x "$d" "$W/root"
	done
	KV=$(ls "$W/kroot/lib/modules")
	cp "$W/kroot/boot/vmlinuz-$KV" "$W/vmlinuz"
	install_modules "$W" "$KV"
	finish_rootfs "$W/root"
	check_image_libs "$W/root"
	(cd "$W/root" && find . | LC_ALL=C sort | "$W/root/bin/busybox" cpio -o -H newc 2>/dev/null) >"$W/base.cpio"
	cp "$W/root/bin/busybox" "$W/busybox" # static: the host's cpio for overlays
	echo "$KV" >"$W/kver"
	rm -rf "$W/debs" "$W/kroot" "$W/root" "$W/tools"
	rm -rf "$IMG"
	mv "$W" "$IMG"
	log "image built in $((SECONDS - t0)) s: kernel $KV, initramfs $(du -h "$IMG/base.cpio" | cut -f1)"
}

# Builds the image once; concurrent runs wait on the lock instead of racing.
ensure_image() {
	IMG=$CACHE/image-$(image_key)
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock 9
	if [ -n "$REBUILD" ] || [ ! -f "$IMG/base.cpio" ]; then build_image "$IMG"; fi
	flock -u 9
}

# /init of the guest. Debian's busybox sh runs its own applets (ip, modprobe,
# timeout) before PATH, so real tools are called by full path here; COMMAND
# runs under bash, where PATH order (busybox last) holds.
write_init() {
	cat <<'INIT'
#!/bin/sh
export PATH=/extra:/usr/sbin:/usr/bin:/sbin:/bin:/bb HOME=/root
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp
echo 1 > /proc/sys/kernel/printk
exec >/dev/ttyS1 2>&1 </dev/null
echo "RDMEM_VM_BOOTED"
. /run-env
echo /sbin/modprobe > /proc/sys/kernel/modprobe
IP=/bin/ip MODPROBE=/sbin/modprobe RDMA=/usr/bin/rdma
$IP link set lo up
for m in crc32_generic crc32_pclmul rdma_rxe ib_uverbs ib_umad rdma_ucm; do
  $MODPROBE $m || echo "modprobe $m failed"
done
setup_dummy() {
  $MODPROBE dummy numdummies=0
  $IP link add dummy0 type dummy
  $IP addr add 198.18.0.1/24 dev dummy0
  $IP link set dummy0 up
  $RDMA link add rxe0 type rxe netdev dummy0 || echo "rdma link add rxe0 failed"
  export RXE_DUMMY_IP=198.18.0.1 RXE_DUMMY_DEV=rxe0
  : ${RXE_SRV_IP:=198.18.0.1} ${RXE_CLI_IP:=198.18.0.1}
}
# Both veth ends stay in the root netns; policy routing sends .2 -> .1 out of
# veth1 and .1 -> .2 out of veth0 instead of via lo; accept_local lets each end
# take packets from an address of its own host.
setup_veth() {
  $MODPROBE veth
  $IP link add veth0 type veth peer name veth1
  $IP addr add 198.19.0.1/24 dev veth0; $IP addr add 198.19.0.2/24 dev veth1
  $IP link set veth0 up; $IP link set veth1 up
  for k in all default veth0 veth1; do
    echo 1 > /proc/sys/net/ipv4/conf/$k/accept_local
    echo 0 > /proc/sys/net/ipv4/conf/$k/rp_filter
  done
  $IP rule add pref 10 iif lo from 198.19.0.2 to 198.19.0.1 lookup 100
  $IP rule add pref 11 iif lo from 198.19.0.1 to 198.19.0.2 lookup 101
  $IP rule add pref 100 lookup local; $IP rule del pref 0
  $IP route add 198.19.0.1 dev veth1 src 198.19.0.2 table 100
  $IP route add 198.19.0.2 dev veth0 src 198.19.0.1 table 101
  $RDMA link add rxe_s type rxe netdev veth0 || echo "rdma link add rxe_s failed"
  $RDMA link add rxe_c type rxe netdev veth1 || echo "rdma link add rxe_c failed"
  export RXE_VETH_SRV_IP=198.19.0.1 RXE_VETH_CLI_IP=198.19.0.2 RXE_VETH_SRV_DEV=rxe_s RXE_VETH_CLI_DEV=rxe_c
  : ${RXE_SRV_IP:=198.19.0.1} ${RXE_CLI_IP:=198.19.0.2}
}
case "$RXE_MODE" in
  dummy) setup_dummy ;;
  veth) setup_veth ;;
  both) setup_dummy; setup_veth ;;
  lo) $RDMA link add rxe0 type rxe netdev lo; RXE_SRV_IP=127.0.0.1 RXE_CLI_IP=127.0.0.1 ;;
esac
export RXE_MODE RXE_SRV_IP RXE_CLI_IP
ulimit -l unlimited
ulimit -n 65536
[ -d /extra/.lib ] && export LD_LIBRARY_PATH=/extra/.lib
cd /extra
echo "RDMEM_VM_READY"
/usr/bin/timeout -k 5 "$RXE_TMO" /bin/bash /cmd.sh
echo "RDMEM_VM_EXIT_STATUS=$?"
sync
poweroff -f
INIT
}

# Host libraries ELF files in the overlay need and the image lacks.
add_host_libs() {
	local X=$1 f so path
	mkdir -p "$X/.lib"
	find "$X" -type f \( -perm -u+x -o -name '*.so*' \) | while read -r f; do
		# if, not &&: a script as the last file must not fail the pipeline
		if is_elf "$f"; then
			ldd "$f" 2>/dev/null | awk '/=> \//{print $1, $3}'
		fi
	done | sort -u | while read -r so path; do
		grep -qxF "$so" "$IMG/base-libs.txt" && continue
		cp -L "$path" "$X/.lib/"
		log "adding host library $path"
	done
	rmdir "$X/.lib" 2>/dev/null || true
}

make_initrd() {
	mkdir -p "$RUN/ov/extra"
	if [ -n "$DIR" ]; then
		cp -a "$DIR"/. "$RUN/ov/extra/"
		add_host_libs "$RUN/ov/extra"
	fi
	write_init >"$RUN/ov/init"
	chmod 755 "$RUN/ov/init"
	printf '%s\n' "$CMD" >"$RUN/ov/cmd.sh"
	printf 'RXE_MODE=%s\nRXE_TMO=%s\n' "$MODE" "$TMO" >"$RUN/ov/run-env"
	# a later cpio entry wins: the overlay's /init replaces nothing in the base
	(cd "$RUN/ov" && find . | "$IMG/busybox" cpio -o -H newc 2>/dev/null) >"$RUN/overlay.cpio"
	cat "$IMG/base.cpio" "$RUN/overlay.cpio" >"$RUN/initrd.cpio"
}

boot() {
	log "booting (tcg, ${MEM} MiB, smp $SMP), mode $MODE, command limit ${TMO}s"
	local t0=$SECONDS
	set +e
	timeout $((TMO + SLACK)) qemu-system-x86_64 -accel tcg -cpu max -m "$MEM" -smp "$SMP" \
		-kernel "$IMG/vmlinuz" -initrd "$RUN/initrd.cpio" \
		-append "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init" \
		-display none -nic none -no-reboot -monitor none \
		-serial "file:$RUN/console.log" -serial "file:$RUN/out.log" >"$RUN/qemu.log" 2>&1
	QRC=$?
	set -e
	log "VM ran $((SECONDS - t0)) s wall (qemu status $QRC)"
}

report() {
	local out=$RUN/out.clean st
	tr -d '\r' <"$RUN/out.log" >"$out"
	# what the guest's setup printed before COMMAND (errors) goes to stderr
	sed -n '/^RDMEM_VM_BOOTED$/,/^RDMEM_VM_READY$/p' "$out" | grep -v '^RDMEM_VM_' | sed 's/^/[vm-setup] /' >&2 || true
	sed -n '/^RDMEM_VM_READY$/,$p' "$out" | sed -e '1d' -e '/^RDMEM_VM_EXIT_STATUS=[0-9]*$/d'
	[ -z "$VERBOSE" ] || { log "guest console:"; tr -d '\r' <"$RUN/console.log" >&2; }
	st=$(sed -n 's/^RDMEM_VM_EXIT_STATUS=\([0-9]*\)$/\1/p' "$out" | tail -1)
	if [ -z "$st" ]; then
		log "VM failed: no exit status came back (qemu status $QRC; 124 = VM limit hit)"
		grep -q '^RDMEM_VM_READY$' "$out" || log "the guest never got ready"
		tail -n 20 "$RUN/console.log" 2>/dev/null | tr -d '\r' | sed 's/^/[console] /' >&2
		sed 's/^/[qemu] /' "$RUN/qemu.log" >&2
		exit 125
	fi
	[ "$st" != 124 ] || log "COMMAND timed out after ${TMO}s inside the VM"
	exit "$st"
}

main() {
	parse_args "$@"
	ensure_host_tools
	ensure_image
	RUN=$(mktemp -d "${TMPDIR:-/tmp}/rdmem-rxe-run.XXXXXX")
	trap '[ -n "${RDMEM_RXE_KEEP:-}" ] && log "run dir kept: $RUN" || rm -rf "$RUN"' EXIT
	make_initrd
	boot
	report
}

main "$@"
