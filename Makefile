# RDMemRPC top-level Makefile: `make`, `make test`, `make bench`, `make asan`, `make tsan`.
# Objects go to $(B) (build/ by default; the sanitizer variants use their own).

B	?= build
CC	?= cc
OPT	?= -O2
CFLAGS	?= $(OPT) -g
override CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -pthread
CPPFLAGS += -Iinclude -I. -Itests
LDLIBS	+= -lrdmacm -libverbs -luring -lrt -pthread

FABRIC_SRCS := $(wildcard fabric/*.c)
SERVER_SRCS := $(filter-out server/main.c,$(wildcard server/*.c))
AGENT_SRCS  := $(filter-out agent/main.c,$(wildcard agent/*.c))
UNIT_SRCS   := $(wildcard tests/unit/test_*.c)
INTEG_SRCS  := $(wildcard tests/integration/test_*.c)
TOOL_SRCS   := $(wildcard tests/tools/*.c)

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

LIBFABRIC := $(B)/lib/librdmem_fabric.a
LIBSERVER := $(B)/lib/librdmem_server.a
LIBAGENT  := $(B)/lib/librdmem_agent.a
LIBS	  := $(LIBSERVER) $(LIBAGENT) $(LIBFABRIC)

BINS  := $(B)/rdmem-server $(B)/rdmem-agent $(B)/rdmem $(B)/rdmem-example
UNITS := $(patsubst tests/unit/%.c,$(B)/tests/%,$(UNIT_SRCS))
INTEGS := $(patsubst tests/integration/%.c,$(B)/tests/%,$(INTEG_SRCS))
TOOLS := $(patsubst tests/tools/%.c,$(B)/tests/%,$(TOOL_SRCS))

.PHONY: all test unit bench asan tsan format format-check clean demo test-rxe
all: $(BINS) $(UNITS) $(INTEGS) $(TOOLS)

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIBFABRIC): $(call obj,$(FABRIC_SRCS))
$(LIBSERVER): $(call obj,$(SERVER_SRCS))
$(LIBAGENT): $(call obj,$(AGENT_SRCS))
$(B)/lib/%.a:
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(B)/rdmem-server: $(call obj,server/main.c) $(LIBSERVER) $(LIBFABRIC)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@
$(B)/rdmem-agent: $(call obj,agent/main.c) $(LIBAGENT) $(LIBFABRIC)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@
# libclient programs link libc only: that is the library's promise.
$(B)/rdmem: $(call obj,libclient/rdmem_cli.c)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) -o $@
$(B)/rdmem-example: $(call obj,libclient/example.c)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) -o $@
$(B)/tests/%: $(B)/obj/tests/unit/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@
$(B)/tests/%: $(B)/obj/tests/integration/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@
$(B)/tests/%: $(B)/obj/tests/tools/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@

# The README's test command. RDMEM_BIN tells integration scripts where binaries are.
test: all
	RDMEM_BIN=$(abspath $(B)) scripts/run-tests.sh $(UNITS) $(INTEGS) $(sort $(wildcard tests/integration/*.sh))

unit: all
	RDMEM_BIN=$(abspath $(B)) scripts/run-tests.sh $(UNITS)

# Real verbs: the rxe suite in a qemu VM running Soft-RoCE (scripts/test-rxe.sh).
test-rxe: all
	scripts/test-rxe.sh -b $(B)

demo:
	scripts/demo.sh

asan:
	$(MAKE) B=build/asan CC=clang OPT=-O1 \
		CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
		LDFLAGS="-fsanitize=address,undefined" test

tsan:
	$(MAKE) B=build/tsan CC=clang CFLAGS="-O1 -g -fsanitize=thread" LDFLAGS="-fsanitize=thread" test

format:
	clang-format -i $$(git ls-files '*.c' '*.h')
format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
