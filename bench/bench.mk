# bench.mk - the comparison systems of `make bench` (scripts/bench.sh): the
# gRPC server and clients, the Redis client and the UCX store, built into build/bench/.
# Included by the top-level Makefile; nothing here is built by `make` or
# `make test`, so those work without the gRPC and hiredis packages.
# Debian 12: libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev
#            protobuf-compiler libhiredis-dev redis-server libucx-dev
#            (and gnuplot-nox, valgrind)

BB	   := build/bench
BENCH_DIR  := bench
BENCH_HDRS := $(BENCH_DIR)/latency.h $(BENCH_DIR)/workload.h include/rdmem/content.h
# -Werror as for the tree: with WERROR=1 (CI) only.
BENCH_WARN := -Wall -Wextra $(if $(filter 1,$(WERROR)),-Werror)
BENCH_OPT  := -O2 -g
CXX	   ?= c++

.PHONY: bench-tools
bench-tools: $(BB)/grpc_server $(BB)/grpc_client $(BB)/redis_client $(BB)/vg_uring_shim.so \
	$(if $(shell pkg-config --exists ucx && echo y),bench-tools-ucx)

# Generated protobuf/gRPC code is not ours: it is compiled without -Werror and
# its headers come in with -isystem so they do not trip our warnings.
$(BB)/gen/kv.pb.cc $(BB)/gen/kv.grpc.pb.cc &: $(BENCH_DIR)/kv.proto
	@mkdir -p $(BB)/gen
	protoc -I$(BENCH_DIR) --cpp_out=$(BB)/gen --grpc_out=$(BB)/gen \
		--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) $<
$(BB)/gen/%.o: $(BB)/gen/%.cc
	$(CXX) -std=c++17 $(BENCH_OPT) $$(pkg-config --cflags grpc++ protobuf) -c $< -o $@

BENCH_GRPC_GEN := $(BB)/gen/kv.pb.o $(BB)/gen/kv.grpc.pb.o
.SECONDARY: $(BENCH_GRPC_GEN)
BENCH_CXX = $(CXX) -std=c++17 $(BENCH_OPT) $(BENCH_WARN) -Iinclude -I$(BENCH_DIR) \
	-isystem $(BB)/gen $$(pkg-config --cflags grpc++ protobuf)

$(BB)/grpc_%: $(BENCH_DIR)/grpc_%.cc $(BENCH_GRPC_GEN) $(BENCH_HDRS)
	$(BENCH_CXX) $< $(BENCH_GRPC_GEN) $$(pkg-config --libs grpc++ protobuf) -o $@

$(BB)/redis_client: $(BENCH_DIR)/redis_client.c $(BENCH_HDRS)
	@mkdir -p $(BB)
	$(CC) -std=c11 -D_GNU_SOURCE $(BENCH_OPT) $(BENCH_WARN) -Iinclude -I$(BENCH_DIR) \
		$$(pkg-config --cflags hiredis) $< $$(pkg-config --libs hiredis) -o $@

# Lets io_uring programs run under valgrind 3.19 (see the file); callgrind stage only.
$(BB)/vg_uring_shim.so: $(BENCH_DIR)/vg_uring_shim.c
	@mkdir -p $(BB)
	$(CC) -std=c11 $(BENCH_OPT) $(BENCH_WARN) -shared -fPIC $< -ldl -o $@

# The UCX comparison (bench/ucx_kv.h): Debian 12 libucx-dev; bench-tools
# builds it only where that is installed (bench.sh skips UCX otherwise).
.PHONY: bench-tools-ucx
bench-tools-ucx: $(BB)/ucx_kv_server $(BB)/ucx_kv_client
$(BB)/ucx_kv_%: $(BENCH_DIR)/ucx_kv_%.c $(BENCH_DIR)/ucx_kv.h $(BENCH_HDRS)
	@mkdir -p $(BB)
	$(CC) -std=c11 -D_GNU_SOURCE $(BENCH_OPT) $(BENCH_WARN) -Iinclude -I$(BENCH_DIR) \
		$$(pkg-config --cflags ucx) $< $$(pkg-config --libs ucx) -o $@
