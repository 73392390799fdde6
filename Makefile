# RDMemRPC top-level Makefile: `make`, `make test`, `make bench`, `make asan`, `make tsan`.
# Objects go to $(B) (build/ by default; the sanitizer variants use their own).

B	?= build
CC	?= cc
OPT	?= -O2
CFLAGS	?= $(OPT) -g
# The language and warnings are not optional (a CFLAGS=... on the command
# line, as the sanitizer builds pass, still gets them). -Werror is: CI builds
# with WERROR=1 (.ci/run); a default build warns only, so a newer compiler's
# new warning does not stop a user's build.
WERROR	?= 0
override CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -pthread $(if $(filter 1,$(WERROR)),-Werror)
CPPFLAGS += -Iinclude -I.

# The daemons' dependencies, found and flagged by pkg-config. Each is checked
# once, with the Debian package that provides it, before anything builds
# (not for goals that build nothing).
DEPS	:= libibverbs:libibverbs-dev librdmacm:librdmacm-dev liburing:liburing-dev \
	   libsodium:libsodium-dev gnutls:libgnutls28-dev
DEP_NAMES := $(foreach d,$(DEPS),$(firstword $(subst :, ,$(d))))
NOBUILD_GOALS := clean format format-check uninstall
ifneq ($(filter-out $(NOBUILD_GOALS),$(or $(MAKECMDGOALS),all)),)
ifeq ($(shell command -v pkg-config),)
$(error pkg-config not found: install pkg-config (Debian package pkg-config), or run scripts/install-deps.sh)
endif
$(foreach d,$(DEPS),$(if $(shell pkg-config --exists $(firstword $(subst :, ,$(d))) && echo y),,\
  $(error $(firstword $(subst :, ,$(d))) not found by pkg-config: install $(firstword $(subst :, ,$(d))) (Debian package $(lastword $(subst :, ,$(d)))), or run scripts/install-deps.sh)))
CPPFLAGS += $(shell pkg-config --cflags $(DEP_NAMES))
LDLIBS	+= $(shell pkg-config --libs $(DEP_NAMES)) -lrt -pthread
endif

# common/: log, options and parsers, auth, metrics, counters (the daemons,
# and the rdmem tool for its parsers: libc only). tcp/ (framing, the TCP
# client) and fabric/ (the RDMA data plane): the daemons.
COMMON_SRCS := $(wildcard common/*.c)
FABRIC_SRCS := $(wildcard tcp/*.c fabric/*.c)
SERVER_SRCS := $(filter-out server/main.c,$(wildcard server/*.c))
AGENT_SRCS  := $(filter-out agent/main.c,$(wildcard agent/*.c))
UNIT_SRCS   := $(wildcard tests/unit/test_*.c)
INTEG_SRCS  := $(wildcard tests/integration/test_*.c)
HOSTILE_SRCS := $(wildcard tests/hostile/test_*.c)
TOOL_SRCS   := $(wildcard tests/tools/*.c)
# librdmem: every libclient/*.c but the example program.
LIBRDMEM_SRCS := $(filter-out libclient/example.c,$(wildcard libclient/*.c))

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

LIBCOMMON := $(B)/lib/librdmem_common.a
LIBFABRIC := $(B)/lib/librdmem_fabric.a
LIBSERVER := $(B)/lib/librdmem_server.a
LIBAGENT  := $(B)/lib/librdmem_agent.a
# The client library. One version, RDMEM_VERSION_* in libclient/rdmem.h: the
# soname (its major), rdmem.pc and rdmem_version() all read it there.
RDMEM_VERSION := $(shell sed -n 's/^\#define RDMEM_VERSION_[A-Z]* *//p' libclient/rdmem.h | paste -sd.)
RDMEM_SOMAJOR := $(firstword $(subst ., ,$(RDMEM_VERSION)))
# Static: what programs of this tree link (the tests, the CLI; a test client
# on another branch reuses it as `$(LIBRDMEM)` in its link line).
LIBRDMEM    := $(B)/lib/librdmem.a
LIBRDMEM_SO := $(B)/lib/librdmem.so.$(RDMEM_VERSION)
LIBRDMEM_SOLINKS := $(B)/lib/librdmem.so.$(RDMEM_SOMAJOR) $(B)/lib/librdmem.so
LIBS	  := $(LIBSERVER) $(LIBAGENT) $(LIBFABRIC) $(LIBCOMMON) $(LIBRDMEM)

BINS  := $(B)/rdmem-server $(B)/rdmem-agent $(B)/rdmem $(B)/rdmem-example $(LIBRDMEM_SOLINKS)
UNITS := $(patsubst tests/unit/%.c,$(B)/tests/%,$(UNIT_SRCS))
INTEGS := $(patsubst tests/integration/%.c,$(B)/tests/%,$(INTEG_SRCS))
HOSTILES := $(patsubst tests/hostile/%.c,$(B)/tests/%,$(HOSTILE_SRCS))
TOOLS := $(patsubst tests/tools/%.c,$(B)/tests/%,$(TOOL_SRCS))

.PHONY: all check abi-check abi-baseline test torture unit bench bench-scale asan tsan fuzz fuzz-targets fuzz-seeds format format-check clean demo test-rxe install uninstall
# Keep objects: they are not throw-away intermediates.
.SECONDARY:
all: $(BINS) $(UNITS) $(INTEGS) $(HOSTILES) $(TOOLS) $(B)/tests/torture_client

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(PIC) -MMD -MP -c $< -o $@
# Only test objects see the test harness headers (tests/check.h, e2e.h, ...).
$(B)/obj/tests/%.o: CPPFLAGS += -Itests

$(LIBCOMMON): $(call obj,$(COMMON_SRCS))
$(LIBFABRIC): $(call obj,$(FABRIC_SRCS))
$(LIBSERVER): $(call obj,$(SERVER_SRCS))
$(LIBAGENT): $(call obj,$(AGENT_SRCS))
# librdmem's objects serve both the .a and the .so: position-independent.
$(call obj,$(LIBRDMEM_SRCS)): PIC := -fPIC
$(LIBRDMEM): $(call obj,$(LIBRDMEM_SRCS))
$(B)/lib/%.a:
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(B)/rdmem-server: $(call obj,server/main.c) $(LIBSERVER) $(LIBFABRIC) $(LIBCOMMON)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@
# The agent links librdmem too: its RESP front end (agent/resp.c) is a client
# of its own front door.
$(B)/rdmem-agent: $(call obj,agent/main.c) $(LIBAGENT) $(LIBFABRIC) $(LIBCOMMON) $(LIBRDMEM)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@
# librdmem.so: only rdmem_* is exported (libclient/librdmem.map); it needs
# libc only, which --no-undefined proves (not on sanitizer builds: their
# runtime comes with the program).
SO_DEFS = $(if $(findstring -fsanitize,$(CFLAGS) $(LDFLAGS)),,-Wl,--no-undefined)
$(LIBRDMEM_SO): $(call obj,$(LIBRDMEM_SRCS)) libclient/librdmem.map
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared -Wl,-soname,librdmem.so.$(RDMEM_SOMAJOR) \
		-Wl,--version-script=libclient/librdmem.map $(SO_DEFS) \
		$(filter %.o,$^) $(LDFLAGS) -o $@
$(LIBRDMEM_SOLINKS): $(LIBRDMEM_SO)
	ln -sf $(notdir $<) $@
# The CLI links librdmem statically: the installed tool then runs from any
# directory with no loader path to get right, and keeps the inline fast path.
$(B)/rdmem: $(call obj,$(wildcard cli/*.c)) $(LIBRDMEM) $(LIBCOMMON)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) -o $@
# The example links the shared library, as an app would: found next to it via rpath.
$(B)/rdmem-example: $(call obj,libclient/example.c) $(LIBRDMEM_SOLINKS)
	$(CC) $(CFLAGS) $(filter %.o,$^) $(LDFLAGS) -L$(B)/lib -lrdmem -Wl,-rpath,'$$ORIGIN/lib' -o $@
# The torture client is an app like any other: libclient only.
$(B)/tests/torture_client: $(call obj,tests/torture/client.c) $(LIBRDMEM)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) -o $@
$(B)/tests/%: $(B)/obj/tests/unit/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@
$(B)/tests/%: $(B)/obj/tests/integration/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@
$(B)/tests/%: $(B)/obj/tests/hostile/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@
$(B)/tests/%: $(B)/obj/tests/tools/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@

# The scenario driver's zipfian generator needs libm.
$(B)/tests/rdmem_scenarios: LDLIBS += -lm

# The README's test command. RDMEM_BIN tells integration scripts where binaries are.
test: all
	RDMEM_BIN=$(abspath $(B)) scripts/run-tests.sh $(UNITS) $(INTEGS) $(HOSTILES) $(sort $(wildcard tests/integration/*.sh)) tests/torture/make-test.sh

# Randomized configurations, op mixes and faults (tests/torture/README.md):
# `make torture [SEED=S] [CASES=N] [MINUTES=M]`.
torture: all
	RDMEM_BIN=$(abspath $(B)) tests/torture/run $(if $(SEED),--seed $(SEED)) $(if $(CASES),--cases $(CASES)) $(if $(MINUTES),--minutes $(MINUTES))

check: test

unit: all
	RDMEM_BIN=$(abspath $(B)) scripts/run-tests.sh $(UNITS)

# Real verbs: the rxe suite in a qemu VM running Soft-RoCE (scripts/test-rxe.sh).
test-rxe: all
	scripts/test-rxe.sh -b $(B)

demo:
	scripts/demo.sh

# The sanitizer runs: the unit and integration suites on instrumented builds.
# Every process (tests and the servers and agents they start) writes its
# reports to build/<san>/reports/ (log_path), and the run fails if any
# exists. RDMEM_SANITIZER tells tests which run this is.
SAN_ENV = rm -rf $(1)/reports && mkdir -p $(1)/reports &&
SAN_END = ; rc=$$?; scripts/sanitizer-reports.sh $(1)/reports || rc=1; exit $$rc

asan:
	$(call SAN_ENV,build/asan) \
	ASAN_OPTIONS="log_path=$(abspath build/asan/reports)/asan $$ASAN_OPTIONS" \
	UBSAN_OPTIONS="log_path=$(abspath build/asan/reports)/ubsan print_stacktrace=1 $$UBSAN_OPTIONS" \
	$(MAKE) B=build/asan CC=clang OPT=-O1 RDMEM_SANITIZER=asan \
		CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
		LDFLAGS="-fsanitize=address,undefined" test \
	$(call SAN_END,build/asan)

# No suppressions: the one blind spot, io_uring rings (memory shared with the
# kernel, mapped by raw syscalls), is annotated where rings are made
# (common/uring.h).
tsan:
	$(call SAN_ENV,build/tsan) \
	TSAN_OPTIONS="log_path=$(abspath build/tsan/reports)/tsan $$TSAN_OPTIONS" \
	$(MAKE) B=build/tsan CC=clang RDMEM_SANITIZER=tsan CFLAGS="-O1 -g -fsanitize=thread" \
		LDFLAGS="-fsanitize=thread" test \
	$(call SAN_END,build/tsan)

# libFuzzer targets (tests/fuzz/fuzz_*.c) in their own tree, build/fuzz/: the
# runtime is instrumented for coverage, ASan and UBSan, the harnesses are
# linked with libFuzzer. Needs clang's fuzzer runtime (libclang-rt-dev); the
# normal build never does. Run them with scripts/fuzz.sh.
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZERS	  := $(patsubst tests/fuzz/%.c,$(B)/%,$(FUZZ_SRCS))
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

fuzz:
	@printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' | \
		clang -x c - -fsanitize=fuzzer -o /dev/null 2>/dev/null || \
		{ echo "make fuzz: clang with libFuzzer (-fsanitize=fuzzer) is needed: install clang and libclang-rt-dev" >&2; exit 1; }
	$(MAKE) B=build/fuzz CC=clang LDFLAGS= \
		CFLAGS="-O1 -g -fsanitize=fuzzer-no-link $(FUZZ_SAN)" fuzz-targets

# Regenerates the seed corpus from valid inputs (checked in; deterministic).
fuzz-seeds: $(B)/tests/fuzz_mkseeds
	$(B)/tests/fuzz_mkseeds tests/fuzz/corpus
$(B)/tests/fuzz_mkseeds: $(B)/obj/tests/fuzz/mkseeds.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) -o $@

fuzz-targets: $(FUZZERS)
$(B)/fuzz_%: $(B)/obj/tests/fuzz/fuzz_%.o $(LIBS)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $^ $(LDFLAGS) $(LDLIBS) -o $@

# `make install [PREFIX=/usr/local] [DESTDIR=...]`: the three programs,
# librdmem (.so with its soname links, and .a), its public headers only (the
# ones <rdmem.h> includes, under include/rdmem-1 so "shm/" and "rdmem/" do
# not land in include/), rdmem.pc, man pages, systemd units and the Python
# package (PYTHONDIR below).
PREFIX	   ?= /usr/local
BINDIR	   ?= $(PREFIX)/bin
INCLUDEDIR ?= $(PREFIX)/include
LIBDIR	   ?= $(PREFIX)/lib
MANDIR	   ?= $(PREFIX)/share/man
UNITDIR	   ?= $(LIBDIR)/systemd/system
CLIENT_HDRS := include/rdmem/wire.h include/rdmem/byteorder.h include/rdmem/blob.h include/rdmem/content.h \
	       include/rdmem/idle.h include/rdmem/util.h shm/segment.h shm/ring.h shm/futex.h
IHDIR = $(DESTDIR)$(INCLUDEDIR)/rdmem-1
# The Python package (python/rdmem, pure Python over librdmem.so.0) goes on
# Debian's python3 path: /usr/lib/python3/dist-packages for PREFIX=/usr (the
# packages' path), else PREFIX/lib/python3.X/dist-packages, the local path
# Debian's python3 searches (/usr/local/lib/python3.11/dist-packages: it is
# per version, unlike the packages' one). Evaluated only when used.
PYTHONDIR  ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/$(shell \
	python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null || echo python3)/dist-packages)
PY_SRCS    := $(wildcard python/rdmem/*.py)
ILIBDIR = $(DESTDIR)$(LIBDIR)

install: $(B)/rdmem-server $(B)/rdmem-agent $(B)/rdmem $(LIBRDMEM) $(LIBRDMEM_SOLINKS)
	install -d $(DESTDIR)$(BINDIR) $(IHDIR)/rdmem $(IHDIR)/shm $(IHDIR)/libclient \
		$(ILIBDIR)/pkgconfig $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(UNITDIR)
	install -m 0755 $(B)/rdmem-server $(B)/rdmem-agent $(B)/rdmem $(DESTDIR)$(BINDIR)/
	install -m 0755 $(LIBRDMEM_SO) $(ILIBDIR)/
	ln -sf $(notdir $(LIBRDMEM_SO)) $(ILIBDIR)/librdmem.so.$(RDMEM_SOMAJOR)
	ln -sf librdmem.so.$(RDMEM_SOMAJOR) $(ILIBDIR)/librdmem.so
	install -m 0644 $(LIBRDMEM) $(ILIBDIR)/
	install -m 0644 libclient/rdmem.h libclient/rdmem_fast.h $(IHDIR)/
	install -m 0644 $(filter include/rdmem/%,$(CLIENT_HDRS)) $(IHDIR)/rdmem/
	install -m 0644 $(filter shm/%,$(CLIENT_HDRS)) $(IHDIR)/shm/
	@# The in-tree name too, so sources written against the repository build as they are.
	printf '/* libclient/rdmem.h: the in-tree name of <rdmem.h>. */\n#include "../rdmem.h"\n' \
		>$(IHDIR)/libclient/rdmem.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
		-e 's|@VERSION@|$(RDMEM_VERSION)|' libclient/rdmem.pc.in >$(ILIBDIR)/pkgconfig/rdmem.pc
	install -m 0644 man/rdmem.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 man/rdmem-agent.8 man/rdmem-server.8 $(DESTDIR)$(MANDIR)/man8/
	for u in rdmem-agent rdmem-server; do \
		sed 's|@BINDIR@|$(BINDIR)|g' systemd/$$u.service.in >$(DESTDIR)$(UNITDIR)/$$u.service && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$u.service || exit 1; \
	done
	install -d $(DESTDIR)$(PYTHONDIR)/rdmem
	install -m 0644 $(PY_SRCS) $(DESTDIR)$(PYTHONDIR)/rdmem/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/rdmem-server $(DESTDIR)$(BINDIR)/rdmem-agent $(DESTDIR)$(BINDIR)/rdmem
	rm -f $(ILIBDIR)/librdmem.so $(ILIBDIR)/librdmem.so.$(RDMEM_SOMAJOR) \
		$(ILIBDIR)/$(notdir $(LIBRDMEM_SO)) $(ILIBDIR)/librdmem.a
	rm -rf $(IHDIR)
	rm -f $(ILIBDIR)/pkgconfig/rdmem.pc $(DESTDIR)$(MANDIR)/man1/rdmem.1 \
		$(DESTDIR)$(MANDIR)/man8/rdmem-agent.8 $(DESTDIR)$(MANDIR)/man8/rdmem-server.8 \
		$(DESTDIR)$(UNITDIR)/rdmem-agent.service $(DESTDIR)$(UNITDIR)/rdmem-server.service
	rm -rf $(DESTDIR)$(PYTHONDIR)/rdmem

# The ABI check: librdmem.so against the checked-in baseline (abidiff, from
# abigail-tools). After an intended change (a new function in a new version
# node, or a new major), refresh it with `make abi-baseline` and commit
# libclient/abi/librdmem.abi with the change.
ABI_BASELINE := libclient/abi/librdmem.abi
ABI_HDRS     := --headers-dir libclient --headers-dir include --headers-dir shm
abi-check: $(LIBRDMEM_SO)
	@command -v abidiff >/dev/null || \
		{ echo "make abi-check: abidiff is needed: install abigail-tools" >&2; exit 1; }
	abidiff --hd2 libclient --hd2 include --hd2 shm \
		$(ABI_BASELINE) $(LIBRDMEM_SO)
abi-baseline: $(LIBRDMEM_SO)
	@mkdir -p $(dir $(ABI_BASELINE))
	abidw --no-corpus-path $(ABI_HDRS) --out-file $(ABI_BASELINE) $(LIBRDMEM_SO)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')
format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build

# `make bench`: the side-by-side benchmark (scripts/bench.sh). Its comparison
# systems (gRPC, Redis) build only here, so `make`/`make test` need neither.
include bench/bench.mk
bench: all bench-tools
	scripts/bench.sh
	RDMEM_BIN=$(B) scripts/scale_bench.sh
# The scaling curve alone (~75 s): 1..1024 sessions, pooled + grouping vs
# classic per-session regions at equal flags (scripts/scale_bench.sh).
bench-scale: all
	RDMEM_BIN=$(B) scripts/scale_bench.sh

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
