/* test_resp_mem.c - the RESP front end's memory bounds and running total
 * (agent/resp_mem.c): the per-connection limits and the smallest
 * --resp-max-memory follow --max-value; a connection's figure moves the
 * total by its difference only, whatever order the changes come in; a
 * closed connection's bytes stay in the total but no longer count against
 * the budget (they wait for calls in flight no eviction can cut short);
 * a connection freed leaves nothing behind. */
#include <stdint.h>

#include "agent/resp.h"
#include "agent/resp_mem.h"
#include "check.h"
#include "rdmem/wire.h"

#define MIB (1ull << 20)

static void test_limits_follow_max_value(void)
{
	/* the default --max-value: an MSET of two 1 MiB values and its headers */
	CHECK_EQ(rdmem_resp_mem_input_limit(1u << 20), 5 * MIB);
	CHECK_EQ(rdmem_resp_mem_queued_limit(1u << 20), 5 * MIB);
	/* 16 slots of 1 MiB replies in flight on 4 MiB unread, doubled: 40 MiB
	 * of output; inputs 5 + 5 + 5 (one command past the pause mark); the
	 * bookkeeping's 256 KiB */
	CHECK_EQ(rdmem_resp_mem_output_limit(1u << 20, 16), 40 * MIB + 2 * 16 * 64);
	CHECK_EQ(rdmem_resp_mem_floor(1u << 20, 16), 57935872ull);
	/* values smaller than a key: the key limit sizes the bulk */
	CHECK_EQ(rdmem_resp_mem_input_limit(1), 4 * RDMEM_MAX_KEY + MIB);
	CHECK_EQ(rdmem_resp_mem_queued_limit(1), RDMEM_RESP_QUEUED_SOFT);
	/* the largest --max-value: no 32-bit overflow, and over the default budget */
	CHECK_EQ(rdmem_resp_mem_input_limit(RDMEM_MAX_VALUE_LIMIT), 257 * MIB);
	CHECK_EQ(rdmem_resp_mem_floor(RDMEM_MAX_VALUE_LIMIT, 16), 2964588544ull);
	/* fewer slots, less output in flight */
	CHECK(rdmem_resp_mem_floor(1u << 20, 2) < 28 * MIB);
	/* the default budget holds one connection of the default geometry */
	CHECK(rdmem_resp_mem_floor(1u << 20, 16) <= RDMEM_RESP_DEFAULT_MAX_MEMORY);
}

static void test_total_moves_by_difference(void)
{
	struct rdmem_resp_mem m = { 0, 0 };
	struct rdmem_resp_mem_conn a = { 0, 0 }, b = { 0, 0 };

	rdmem_resp_mem_set(&m, &a, 1000);
	rdmem_resp_mem_set(&m, &b, 5 * MIB);
	CHECK_EQ(m.live, 5 * MIB + 1000);
	rdmem_resp_mem_set(&m, &a, 300); /* a buffer freed */
	CHECK_EQ(m.live, 5 * MIB + 300);
	rdmem_resp_mem_set(&m, &b, 9 * MIB); /* grown */
	CHECK_EQ(m.live, 9 * MIB + 300);
	CHECK_EQ(a.bytes, 300);
	CHECK_EQ(b.bytes, 9 * MIB);
	CHECK(!rdmem_resp_mem_over(&m, 16 * MIB));
	CHECK(rdmem_resp_mem_over(&m, 9 * MIB)); /* over means above, not at */
	CHECK(!rdmem_resp_mem_over(&m, 9 * MIB + 300));
	CHECK_EQ(m.dying, 0);
}

static void test_dying_leaves_the_budget(void)
{
	struct rdmem_resp_mem m = { 0, 0 };
	struct rdmem_resp_mem_conn a = { 0, 0 }, b = { 0, 0 };

	rdmem_resp_mem_set(&m, &a, 20 * MIB);
	rdmem_resp_mem_set(&m, &b, 2 * MIB);
	CHECK(rdmem_resp_mem_over(&m, 16 * MIB));
	rdmem_resp_mem_dying(&m, &a);
	rdmem_resp_mem_dying(&m, &a); /* twice: counted once */
	CHECK_EQ(m.live, 2 * MIB);
	CHECK_EQ(m.dying, 20 * MIB);
	CHECK(!rdmem_resp_mem_over(&m, 16 * MIB));
	/* shed down to what its calls in flight hold, then freed */
	rdmem_resp_mem_set(&m, &a, 1 * MIB);
	CHECK_EQ(m.dying, 1 * MIB);
	CHECK_EQ(m.live, 2 * MIB);
	rdmem_resp_mem_set(&m, &a, 0);
	rdmem_resp_mem_set(&m, &b, 0);
	CHECK_EQ(m.live, 0);
	CHECK_EQ(m.dying, 0);
}

int main(void)
{
	RUN(test_limits_follow_max_value);
	RUN(test_total_moves_by_difference);
	RUN(test_dying_leaves_the_budget);
	return check_done();
}
