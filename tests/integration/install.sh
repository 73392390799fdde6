#!/usr/bin/env bash
# install.sh - `make install` into a DESTDIR: the files and their modes,
# librdmem (.so, soname links, .a) and its public headers only,
# libclient/example.c and a <rdmem.h> program built in C and in C++ against
# the installed tree with pkg-config alone and run against the installed
# daemons, the Python package imported from the installed tree doing a put
# and get, man
# pages that render and name every option the programs' -h prints, systemd
# units that systemd-analyze accepts, and `make uninstall` leaving nothing.
# Needs RDMEM_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
for tool in cc c++ pkg-config; do
	if ! command -v $tool >/dev/null; then
		# The build itself needs both (scripts/install-deps.sh): a failure.
		echo "not ok - install: $tool is not installed (scripts/install-deps.sh installs it)"
		exit 1
	fi
done
# shellcheck source=tests/tap.sh
. tests/tap.sh install stack
dest=$tmp/root
pfx=/usr/local
# The build finds its own dependencies with the system's pkg-config: not
# with the installed-tree settings exported below for the app checks.
mk() { env -u PKG_CONFIG_SYSROOT_DIR -u PKG_CONFIG_PATH -u PKG_CONFIG_LIBDIR \
	make --no-print-directory -s B="$bdir" "$@"; }

expect "make install DESTDIR=... PREFIX=$pfx" mk install DESTDIR="$dest" PREFIX="$pfx"
for f in bin/rdmem bin/rdmem-agent bin/rdmem-server; do
	expect "installed $f (0755)" bash -c "[ \"\$(stat -c %a '$dest$pfx/$f')\" = 755 ]"
done
ver=$(sed -n 's/^#define RDMEM_VERSION_[A-Z]* *//p' libclient/rdmem.h | paste -sd.)
expect "installed lib/librdmem.so.$ver (0755)" bash -c "[ \"\$(stat -c %a '$dest$pfx/lib/librdmem.so.$ver')\" = 755 ]"
expect "lib/librdmem.so -> librdmem.so.${ver%%.*} -> librdmem.so.$ver" \
	bash -c "[ \"\$(readlink '$dest$pfx/lib/librdmem.so')\" = librdmem.so.${ver%%.*} ] &&
		 [ \"\$(readlink '$dest$pfx/lib/librdmem.so.${ver%%.*}')\" = librdmem.so.$ver ]"
expect "the soname is librdmem.so.${ver%%.*}" \
	bash -c "objdump -p '$dest$pfx/lib/librdmem.so.$ver' | grep -qw 'SONAME *librdmem.so.${ver%%.*}'"
expect "the .so exports only rdmem_* (and its version node)" \
	bash -c "[ -z \"\$(nm -D --defined-only '$dest$pfx/lib/librdmem.so.$ver' | awk '\$3 !~ /^rdmem_/ && \$2 != \"A\"')\" ]"
expect "only public headers: no rdmem_priv.h" \
	bash -c "[ -z \"\$(find '$dest$pfx/include' -name rdmem_priv.h)\" ]"
for f in include/rdmem-1/rdmem.h include/rdmem-1/rdmem_fast.h include/rdmem-1/libclient/rdmem.h \
	lib/librdmem.a include/rdmem-1/rdmem/wire.h \
	include/rdmem-1/rdmem/blob.h include/rdmem-1/rdmem/content.h include/rdmem-1/rdmem/idle.h \
	include/rdmem-1/rdmem/util.h include/rdmem-1/shm/segment.h include/rdmem-1/shm/ring.h \
	include/rdmem-1/shm/futex.h lib/pkgconfig/rdmem.pc share/man/man1/rdmem.1 \
	share/man/man8/rdmem-agent.8 share/man/man8/rdmem-server.8 \
	lib/systemd/system/rdmem-agent.service lib/systemd/system/rdmem-server.service; do
	expect "installed $f (0644)" bash -c "[ \"\$(stat -c %a '$dest$pfx/$f')\" = 644 ]"
done
expect "nothing installed outside PREFIX" bash -c "[ -z \"\$(find '$dest' -type f ! -path '$dest$pfx/*')\" ]"

# Build against the installed tree only: a copy of the sources outside the repository.
export PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_PATH=$dest$pfx/lib/pkgconfig PKG_CONFIG_LIBDIR=
mkdir -p "$tmp/src"
cp libclient/example.c "$tmp/src/"
cat >"$tmp/src/app.c" <<'EOF'
#include <rdmem.h>

int main(int argc, char **argv)
{
	rdmem_t *h = NULL;
	void *v = NULL;
	uint32_t len = 0;
	int rc = rdmem_open(argc > 1 ? argv[1] : "/rdmem-install-none", &h);

	if (rc == 0)
		rc = rdmem_put(h, "app", 3, "installed", 9, NULL);
	if (rc == 0)
		rc = rdmem_get(h, "app", 3, &v, &len, NULL);
	printf("%s %.*s\n", rdmem_strerror(rc), (int)len, v ? (char *)v : "");
	free(v);
	rdmem_close(h);
	return rc == 0 ? 0 : rc == -ECONNREFUSED ? 3 : 1;
}
EOF
expect "pkg-config knows rdmem" pkg-config --exists rdmem
expect "pkg-config's version is the header's ($ver)" [ "$(pkg-config --modversion rdmem)" = "$ver" ]
expect "pkg-config --libs rdmem gives -lrdmem" \
	bash -c "pkg-config --libs rdmem | tr ' ' '\n' | grep -qx -- -lrdmem"
expect "Cflags point into the installed tree" \
	bash -c "[ \"\$(pkg-config --cflags rdmem | tr -d ' ')\" = '-I$dest$pfx/include/rdmem-1' ]"
cf=$(pkg-config --cflags --libs rdmem)
# shellcheck disable=SC2086
expect "libclient/example.c builds with pkg-config only" \
	bash -c "cd '$tmp/src' && $LS_CC -std=c11 -pedantic -Wall -Wextra -Werror example.c $cf -o example 2>'$tmp/cc1.err'"
# shellcheck disable=SC2086
expect "#include <rdmem.h> builds with pkg-config only" \
	bash -c "cd '$tmp/src' && $LS_CC -std=c11 -pedantic -Wall -Wextra -Werror app.c $cf -o app 2>'$tmp/cc2.err'"
# shellcheck disable=SC2086
expect "example.c builds as C++ (c++ -x c++) with pkg-config only" \
	bash -c "cd '$tmp/src' && $LS_CXX -x c++ example.c -x none $cf -pedantic -Wall -Wextra -Werror -o example-cxx 2>'$tmp/cc3.err'"
# shellcheck disable=SC2086
expect "#include <rdmem.h> builds as C++ with pkg-config only" \
	bash -c "cd '$tmp/src' && $LS_CXX -x c++ app.c -x none $cf -pedantic -Wall -Wextra -Werror -o app-cxx 2>'$tmp/cc4.err'"
sed 's/^/#   /' "$tmp"/cc*.err 2>/dev/null || true
# The installed tree is under DESTDIR: tell the loader where librdmem is.
export LD_LIBRARY_PATH=$dest$pfx/lib
expect "the app links the installed librdmem, and nothing of the daemons" \
	bash -c "ldd '$tmp/src/app' | grep -q '=> $dest$pfx/lib/librdmem.so.${ver%%.*} ' &&
		 ! ldd '$tmp/src/app' | grep -Eq 'rdmacm|ibverbs|uring|sodium'"
for a in app app-cxx; do
	set +e
	"$tmp/src/$a" >/dev/null 2>&1
	rc=$?
	set -e
	expect "no agent: $a reports -ECONNREFUSED" [ "$rc" = 3 ]
done

# Run the installed programs together.
LS_BIN=$dest$pfx/bin
mkdir -p "$tmp/run"
if ls_start_server "$tmp/run" && ls_start_agent "$tmp/run" /rdmem-install-$$ --clients 2 --slots 8; then
	for a in example example-cxx; do
		expect "installed $a runs against the installed daemons" \
			bash -c "'$tmp/src/$a' /rdmem-install-$$ | grep -qx 'greeting = hello'"
	done
	for a in app app-cxx; do
		expect "installed <rdmem.h> $a runs" \
			bash -c "'$tmp/src/$a' /rdmem-install-$$ | grep -qx 'ok installed'"
	done
	expect "installed rdmem CLI works" bash -c "'$LS_BIN/rdmem' --shm-name /rdmem-install-$$ ping >/dev/null"
	# The Python package, as Debian's python3 would import it, on the installed librdmem.
	pydir=$(dirname "$(dirname "$(find "$dest$pfx/lib" -path '*/dist-packages/rdmem/__init__.py')")")
	expect "installed the Python package under $pfx/lib/python3*/dist-packages/rdmem (0644)" \
		bash -c "[ -n '$pydir' ] && [ \"\$(stat -c %a '$pydir/rdmem/__init__.py' '$pydir/rdmem/_native.py' | sort -u)\" = 644 ]"
	# The interpreter itself (not a shim script) gets a sanitizer build's
	# runtime; the interpreter's own leaks at exit are not ours (python.sh).
	py=$(python3 -c 'import sys; print(sys.executable)')
	py_env=(PYTHONPATH="$pydir" PYTHONDONTWRITEBYTECODE=1)
	case "${RDMEM_SANITIZER:-}" in
	asan) py_env+=(LD_PRELOAD="$(clang -print-file-name=libclang_rt.asan-x86_64.so)"
		ASAN_OPTIONS="${ASAN_OPTIONS:-} detect_leaks=0") ;;
	esac
	pycheck="installed Python package: import rdmem, one put/get on the installed librdmem"
	if [ "${RDMEM_SANITIZER:-}" = tsan ]; then
		# The TSan runtime preloaded into python3 crashes it (SIGSEGV at start).
		echo "ok - $pycheck # SKIP python3 cannot load a TSan-instrumented librdmem (make test and make asan run it)"
	else
		expect "$pycheck" \
			env -u RDMEM_LIB "${py_env[@]}" "$py" -c "
import rdmem, sys
with rdmem.Client('/rdmem-install-$$') as c:
    c.put('py', b'in\\x00stalled')
    assert c.get('py') == b'in\\x00stalled', c.get('py')
lib = [l.split()[-1] for l in open('/proc/self/maps') if 'librdmem.so' in l]
assert lib and lib[0].startswith('$dest$pfx/lib/'), lib
assert rdmem.__file__.startswith('$pydir/'), rdmem.__file__
"
	fi
else
	echo "not ok - installed daemons start" && failed=1
fi
ls_stop

# Man pages: render cleanly and name every long option of -h.
if command -v man >/dev/null; then
	for m in share/man/man1/rdmem.1 share/man/man8/rdmem-agent.8 share/man/man8/rdmem-server.8; do
		expect "man $(basename "$m") renders without warnings" \
			bash -c "[ -z \"\$(MANWIDTH=80 man -l --warnings=w '$dest$pfx/$m' 2>&1 >/dev/null)\" ]"
	done
else
	echo "ok - man pages render # SKIP man is not installed"
fi
opts_of() { { "$@" 2>&1 || true; } | grep -oE -- '--[a-z][a-z-]+' | sort -u; }
man_missing() { # man_missing PAGE PROG ARGS...: options of the usage text the page lacks
	local page=$1 o
	shift
	sed 's/\\-/-/g' "$page" >"$tmp/page.txt" # roff writes "-" as "\-"
	opts_of "$@" | while read -r o; do grep -qF -- "$o" "$tmp/page.txt" || echo "$o"; done | tr '\n' ' '
}
for prog in rdmem-agent:8 rdmem-server:8; do
	name=${prog%:*}
	missing=$(man_missing "man/$name.${prog#*:}" "$bdir/$name" -h)
	expect "man $name names every option of -h${missing:+ (missing: $missing)}" [ -z "$missing" ]
done
missing=$(man_missing man/rdmem.1 "$bdir/rdmem") # no command: the usage text
expect "man rdmem names every option of the usage text${missing:+ (missing: $missing)}" [ -z "$missing" ]

# systemd units: LimitMEMLOCK, restart, hardening, and systemd's own check.
for u in rdmem-agent rdmem-server; do
	f=$dest$pfx/lib/systemd/system/$u.service
	expect "$u.service: ExecStart is the installed binary" grep -q "^ExecStart=$pfx/bin/$u " "$f"
	expect "$u.service: LimitMEMLOCK=infinity, Restart=on-failure, NoNewPrivileges" \
		bash -c "grep -qx LimitMEMLOCK=infinity '$f' && grep -qx Restart=on-failure '$f' && grep -qx NoNewPrivileges=yes '$f'"
done
if command -v systemd-analyze >/dev/null; then
	# Installed for real into a private PREFIX so the ExecStart paths exist.
	mk install PREFIX="$tmp/pfx" >/dev/null
	expect "systemd-analyze verify accepts both units" \
		bash -c "MANPATH='$tmp/pfx/share/man' systemd-analyze verify '$tmp/pfx/lib/systemd/system/rdmem-agent.service' '$tmp/pfx/lib/systemd/system/rdmem-server.service' 2>'$tmp/verify.err'"
	sed 's/^/#   /' "$tmp/verify.err"
else
	echo "ok - systemd-analyze verify # SKIP systemd-analyze is not installed"
fi

expect "make uninstall removes every file and link" \
	bash -c "make --no-print-directory -s -C '$root' B='$bdir' uninstall DESTDIR='$dest' PREFIX='$pfx' && [ -z \"\$(find '$dest' -type f -o -type l)\" ]"
exit $failed
