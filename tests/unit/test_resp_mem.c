/* test_resp_mem.c - the RESP front end's memory bounds and running total
 * (agent/resp_mem.c): the per-connection limits and the smallest
 * --resp-max-memory follow --max-value; a connection's figure moves the
 * total by its difference only, whatever order the changes come in; a
 * closed connection's bytes stay in the total but no longer count against
 * the budget (they wait for calls in flight no eviction can cut short);
 * a connection freed leaves nothing behind; progress is bytes moved at
 * the floor rate, and the connection to close is the one holding the most
 * bytes for the longest without it. */
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
	struct rdmem_resp_mem_conn a = { 0 }, b = { 0 };

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
	struct rdmem_resp_mem_conn a = { 0 }, b = { 0 };

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

#define MS  1000000ull
#define SEC 1000000000ull

static void test_progress_needs_the_floor_rate(void)
{
	struct rdmem_resp_mem_conn c = { 0 };
	uint64_t t = 5 * SEC, i;

	rdmem_resp_mem_start(&c, t);
	/* a byte every 100 ms: 10 B/s, never progress, however long */
	for (i = 1; i <= 600; i++)
		CHECK(!rdmem_resp_mem_moved(&c, 1, t + i * 100 * MS));
	CHECK_EQ(c.progress_ns, t);
	CHECK_EQ(c.moved, 600);
	/* a burst of the floor's one-second worth restarts the clock */
	CHECK(rdmem_resp_mem_moved(&c, RDMEM_RESP_PROGRESS_RATE - 600, t + 61 * SEC));
	CHECK_EQ(c.progress_ns, t + 61 * SEC);
	CHECK_EQ(c.moved, 0);
	/* within the second, the floor rate pro rata: 10 ms asks for 327 B */
	t += 61 * SEC;
	CHECK(!rdmem_resp_mem_moved(&c, 300, t + 10 * MS));
	CHECK(rdmem_resp_mem_moved(&c, 28, t + 10 * MS));
	/* at loopback speed every read is progress */
	t += 10 * MS;
	for (i = 1; i <= 64; i++)
		CHECK(rdmem_resp_mem_moved(&c, 16384, t + i * 50000));
	/* a clock read twice out of order (same thread, same ns) is no progress lost */
	CHECK(rdmem_resp_mem_moved(&c, 1, c.progress_ns));
}

static void test_score_is_bytes_times_stall(void)
{
	struct rdmem_resp_mem_conn c = { .bytes = 512 << 10 };
	uint64_t t = 7 * SEC;

	rdmem_resp_mem_start(&c, t);
	CHECK_EQ(rdmem_resp_mem_score(&c, t), 0);
	CHECK_EQ(rdmem_resp_mem_score(&c, t + 999999), 0); /* whole milliseconds */
	CHECK_EQ(rdmem_resp_mem_score(&c, t + 3 * SEC), 512ull * 3000);
	/* capped at ten seconds */
	CHECK_EQ(rdmem_resp_mem_score(&c, t + 3600 * SEC), 512ull * RDMEM_RESP_STALL_CAP_MS);
	c.bytes = 1; /* rounded up to a KiB: a stalled connection never scores 0 */
	CHECK_EQ(rdmem_resp_mem_score(&c, t + 2 * SEC), 2000);
	/* the largest --resp-max-memory's worth, capped: no overflow */
	c.bytes = 64ull << 30;
	CHECK_EQ(rdmem_resp_mem_score(&c, t + 3600 * SEC), (64ull << 20) * RDMEM_RESP_STALL_CAP_MS);
	/* a clock behind the last progress reads as no stall */
	CHECK_EQ(rdmem_resp_mem_score(&c, t - SEC), 0);
}

/* The case the ranking exists for: many small connections dribbling partial
 * commands hold the budget, an honest large upload takes it over. The
 * largest would be the upload; the stalled ones go first. */
static void test_stalled_go_before_the_moving(void)
{
	struct rdmem_resp_mem_conn loris = { .bytes = 512 << 10 }, upload = { .bytes = 2 << 20 },
				   idle = { .bytes = 17 << 10 }, big = { .bytes = 40 << 20 };
	uint64_t t = 10000 * SEC;

	rdmem_resp_mem_start(&idle, t - 3600 * SEC);
	rdmem_resp_mem_start(&loris, t - 2 * SEC);
	rdmem_resp_mem_start(&upload, t - 2 * SEC);
	rdmem_resp_mem_moved(&loris, 1, t - 1 * MS); /* its dribble: no progress */
	rdmem_resp_mem_moved(&upload, 65536, t - 1 * MS);
	rdmem_resp_mem_moved(&upload, 65536, t); /* reading at speed */
	CHECK_EQ(upload.progress_ns, t);
	CHECK(rdmem_resp_mem_before(&loris, &upload, t));
	CHECK(!rdmem_resp_mem_before(&upload, &loris, t));
	/* a pooled client idle an hour holds little: 17 KiB x 10 s (capped) is
	 * less than 512 KiB x 2 s */
	CHECK(rdmem_resp_mem_before(&loris, &idle, t));
	/* but it goes before the one moving */
	CHECK(rdmem_resp_mem_before(&idle, &upload, t));
	/* a large hoarder stalled as long goes before the small one */
	rdmem_resp_mem_start(&big, t - 2 * SEC);
	CHECK(rdmem_resp_mem_before(&big, &loris, t));
	/* all moving at once (score 0): the largest, as before */
	rdmem_resp_mem_start(&loris, t);
	CHECK(rdmem_resp_mem_before(&upload, &loris, t));
	CHECK(!rdmem_resp_mem_before(&loris, &loris, t)); /* strict */
}

int main(void)
{
	RUN(test_limits_follow_max_value);
	RUN(test_total_moves_by_difference);
	RUN(test_dying_leaves_the_budget);
	RUN(test_progress_needs_the_floor_rate);
	RUN(test_score_is_bytes_times_stall);
	RUN(test_stalled_go_before_the_moving);
	return check_done();
}
