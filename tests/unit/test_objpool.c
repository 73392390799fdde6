/* test_objpool.c - object pool: size classes, generation-checked reclaim,
 * repeat vs stale, TTL scan, exhaustion. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "server/objpool.h"

static struct rdmem_objpool pool;
static void *area;

static void setup(uint32_t slabs, uint32_t ttl_ms)
{
	struct rdmem_objpool_config cfg = { slabs, 1u << 20, ttl_ms };

	area = calloc(1, rdmem_objpool_area_bytes(&cfg));
	if (rdmem_objpool_init(&pool, &cfg, area))
		abort();
}

static void teardown(void)
{
	rdmem_objpool_fini(&pool);
	free(area);
}

static void test_classes_and_bounds(void)
{
	struct rdmem_objref a, b, c;
	void *pa, *pb, *pc;

	setup(4, 1000);
	CHECK_EQ(rdmem_objpool_alloc(&pool, 100, 1, &a, &pa), 0);
	CHECK_EQ(rdmem_objpool_alloc(&pool, 200 << 10, 1, &b, &pb), 0);
	CHECK_EQ(rdmem_objpool_alloc(&pool, 1 << 20, 1, &c, &pc), 0);
	CHECK_EQ(rdmem_objpool_alloc(&pool, (1 << 20) + 1, 1, &c, &pc), RDMEM_S_TOO_BIG);
	/* Every object lies inside the area, and objects do not overlap. */
	CHECK((uint8_t *)pa + 100 <= (uint8_t *)area + pool.area_bytes);
	CHECK((uint64_t)b.offset + b.length <= pool.area_bytes);
	CHECK((uint64_t)c.offset + c.length <= pool.area_bytes);
	CHECK(a.offset + (64u << 10) <= b.offset || b.offset + b.length <= a.offset);
	CHECK_EQ(pool.st.live, 3);
	teardown();
}

static void test_reclaim_repeat_stale(void)
{
	struct rdmem_objref r, forged;
	void *p;

	setup(4, 1000);
	REQUIRE(rdmem_objpool_alloc(&pool, 10, 1, &r, &p) == 0);
	CHECK_EQ(rdmem_objpool_reclaim(&pool, &r), RDMEM_S_OK);
	CHECK_EQ(pool.st.live, 0);
	/* The same RECLAIM again (a retry) is harmless... */
	CHECK_EQ(rdmem_objpool_reclaim(&pool, &r), RDMEM_S_OK);
	CHECK_EQ(pool.st.repeat, 1);
	/* ...but once the object serves another reply, the old ref is stale. */
	REQUIRE(rdmem_objpool_alloc(&pool, 10, 1, &forged, &p) == 0);
	CHECK_EQ(forged.object_id, r.object_id);
	CHECK_EQ(rdmem_objpool_reclaim(&pool, &r), RDMEM_S_STALE);
	CHECK_EQ(pool.st.live, 1);
	forged.generation += 5;
	CHECK_EQ(rdmem_objpool_reclaim(&pool, &forged), RDMEM_S_STALE);
	forged.object_id = 999999;
	CHECK_EQ(rdmem_objpool_reclaim(&pool, &forged), RDMEM_S_STALE);
	/* The first id past the last object: refused before the table is read
	 * (an off-by-one bound reads past it: scripts/mutate.sh builds this
	 * test with ASan to see that). */
	forged.object_id = pool.nobjs;
	forged.generation = 1;
	CHECK_EQ(rdmem_objpool_reclaim(&pool, &forged), RDMEM_S_STALE);
	CHECK_EQ(pool.st.stale, 4);
	CHECK_EQ(pool.st.live, 1);
	teardown();
}

static void test_ttl_scan(void)
{
	struct rdmem_objref r;
	void *p;

	setup(4, 10);
	REQUIRE(rdmem_objpool_alloc(&pool, 10, 1000, &r, &p) == 0);
	CHECK_EQ(rdmem_objpool_scan(&pool, 1000 + 5 * 1000000ull), 0);
	/* Past the TTL but within its grace quarter (agents' clocks may run
	 * fast against ours): still there. */
	CHECK_EQ(rdmem_objpool_scan(&pool, 1000 + 12 * 1000000ull), 0);
	CHECK_EQ(rdmem_objpool_scan(&pool, 1000 + 13 * 1000000ull), 1);
	CHECK_EQ(pool.st.live, 0);
	CHECK_EQ(pool.st.timeout, 1);
	/* A RECLAIM arriving after the scan freed it is stale, not a repeat. */
	CHECK_EQ(rdmem_objpool_reclaim(&pool, &r), RDMEM_S_STALE);
	teardown();
}

/* A scan whose clock is older than an object's stamp (the worker's round
 * time against a fresh read at allocation) must not take the object for
 * expired: the wrapped difference once freed it at once, and the next reply
 * reused it under the agent's READ (another call's bytes, status OK). */
static void test_scan_older_than_stamp(void)
{
	struct rdmem_objref r;
	void *p;

	setup(4, 10);
	REQUIRE(rdmem_objpool_alloc(&pool, 10, 5000000000ull, &r, &p) == 0);
	CHECK_EQ(rdmem_objpool_scan(&pool, 5000000000ull - 1000), 0);
	CHECK_EQ(pool.st.live, 1);
	CHECK_EQ(rdmem_objpool_reclaim(&pool, &r), RDMEM_S_OK);
	teardown();
}

static void test_pool_full(void)
{
	struct rdmem_objref r[4], extra;
	void *p;
	int i;

	setup(2, 1000);
	for (i = 0; i < 2; i++)
		CHECK_EQ(rdmem_objpool_alloc(&pool, 1000, 1, &r[i], &p), 0);
	/* Small objects spill into the larger classes (2 slabs: 2 of each) first. */
	for (i = 0; i < 64; i++)
		if (rdmem_objpool_alloc(&pool, 1000, 1, &extra, &p))
			break;
	CHECK_EQ(i, 4);
	CHECK_EQ(rdmem_objpool_alloc(&pool, 1000, 1, &extra, &p), RDMEM_S_BUSY);
	CHECK_EQ(pool.st.full, 2); /* the loop's last try and this one */
	CHECK_EQ(rdmem_objpool_reclaim(&pool, &r[0]), RDMEM_S_OK);
	CHECK_EQ(rdmem_objpool_alloc(&pool, 1000, 1, &extra, &p), 0);
	teardown();
}

int main(void)
{
	RUN(test_classes_and_bounds);
	RUN(test_reclaim_repeat_stale);
	RUN(test_ttl_scan);
	RUN(test_scan_older_than_stamp);
	RUN(test_pool_full);
	return check_done();
}
