#!/usr/bin/env bash
# librdmem.sh - the client library as built in the tree: librdmem.so exports
# only rdmem_* under its version node and carries its soname; the header's
# version is what the library reports; libclient/example.c builds as C++
# (c++ -x c++) against the .so and, like the C example, runs against a real
# server and agent; `rdmem -h/--help/--version`; and `make abi-check` passes
# against the checked-in baseline (when abidiff is installed). Needs RDMEM_BIN.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/tap.sh
. tests/tap.sh librdmem stack

ver=$(sed -n 's/^#define RDMEM_VERSION_[A-Z]* *//p' libclient/rdmem.h | paste -sd.)
so=$bdir/lib/librdmem.so.$ver
expect "build/lib holds librdmem.so.$ver, its links and librdmem.a" \
	bash -c "[ -f '$so' ] && [ -L '$bdir/lib/librdmem.so' ] && [ -L '$bdir/lib/librdmem.so.${ver%%.*}' ] && [ -f '$bdir/lib/librdmem.a' ]"
expect "the soname is librdmem.so.${ver%%.*}" \
	bash -c "objdump -p '$so' | grep -qw 'SONAME *librdmem.so.${ver%%.*}'"
nm -D --defined-only "$so" >"$tmp/nm" 2>&1
others=$(awk '$3 !~ /^rdmem_/ && $2 != "A" { print $3 }' "$tmp/nm" | tr '\n' ' ')
expect "nm -D lists only rdmem_* symbols${others:+ (also: $others)}" [ -z "$others" ]
expect "the API is exported (rdmem_open, rdmem_submit, rdmem_wait, rdmem_strerror)" \
	bash -c "for s in rdmem_open rdmem_submit rdmem_wait rdmem_strerror; do grep -qw \$s '$tmp/nm' || exit 1; done"
expect "every export is versioned (RDMEM_*)" \
	bash -c "[ -z \"\$(objdump -T '$so' | awk '/ DF .*rdmem_/ && \$0 !~ /RDMEM_/')\" ]"
expect "rdmem --version prints the header's version ($ver)" \
	bash -c "[ \"\$('$bdir/rdmem' --version)\" = 'rdmem $ver' ]"
expect "rdmem -h and --help print the usage on stdout and exit 0" \
	bash -c "'$bdir/rdmem' -h | grep -q '^usage: rdmem' && '$bdir/rdmem' --help | grep -q '^usage: rdmem'"
# The fast path stays inline in C: example.o calls the library's halves
# (rdmem__submit_begin), not the out-of-line rdmem_submit/rdmem_wait.
nm -u "$bdir/obj/libclient/example.o" >"$tmp/undef" 2>&1
expect "C callers get submit/wait inline (example.o needs rdmem__submit_begin, not rdmem_submit)" \
	bash -c "grep -qw rdmem__submit_begin '$tmp/undef' && ! grep -Eqw 'rdmem_submit|rdmem_wait|rdmem_poll' '$tmp/undef'"
expect "rdmem-example links the shared library" \
	bash -c "ldd '$bdir/rdmem-example' | grep -q 'librdmem.so.${ver%%.*} => $bdir/lib/'"

if command -v c++ >/dev/null; then
	expect "libclient/example.c builds as C++ against librdmem.so" \
		bash -c "$LS_CXX -x c++ libclient/example.c -x none -Iinclude -I. -pedantic -Wall -Wextra -Werror \
			-L'$bdir/lib' -lrdmem -Wl,-rpath,'$bdir/lib' -o '$tmp/example-cxx' 2>'$tmp/cxx.err'"
	sed 's/^/#   /' "$tmp/cxx.err"
else
	echo "ok - example.c builds as C++ # SKIP c++ is not installed"
fi

mkdir -p "$tmp/run"
if ls_start_server "$tmp/run" && ls_start_agent "$tmp/run" /rdmem-librdmem-$$ --clients 4 --slots 8; then
	expect "rdmem-example (C, librdmem.so) runs against the agent" \
		bash -c "'$bdir/rdmem-example' /rdmem-librdmem-$$ | grep -qx 'greeting = hello'"
	if [ -x "$tmp/example-cxx" ]; then
		expect "example.c built as C++ runs against the agent" \
			bash -c "'$tmp/example-cxx' /rdmem-librdmem-$$ | grep -qx 'greeting = hello'"
	fi
else
	echo "not ok - server and agent start" && failed=1
fi
ls_stop

if [ -n "${RDMEM_SANITIZER:-}" ]; then
	echo "ok - make abi-check # SKIP instrumented build ($RDMEM_SANITIZER): the baseline is of the plain one"
elif command -v abidiff >/dev/null; then
	expect "make abi-check: librdmem.so matches libclient/abi/librdmem.abi" \
		bash -c "make --no-print-directory -s B='$bdir' abi-check >'$tmp/abi.out' 2>&1"
	sed 's/^/#   /' "$tmp/abi.out" | head -20
else
	echo "ok - make abi-check # SKIP abidiff is not installed (abigail-tools)"
fi
exit $failed
