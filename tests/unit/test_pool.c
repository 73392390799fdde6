/* test_pool.c - the server's message pool: a lease taken again after its
 * tenant wrote every byte of it comes back all zeros, in every area (ring,
 * payloads, objects, control page, staging); leases run out with -EBUSY and
 * come back. Shm fabric: the pool's memory is memfd-backed, as for agents
 * on this host. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "rdmem/layout.h"
#include "server/pool.h"

static struct rdmem_pool_config config(uint32_t leases)
{
	struct rdmem_pool_config c = {
		.fabric = RDMEM_FAB_SHM,
		.leases = leases,
		.lease_slots = 16,
		.slot_bytes = 4096,
		.stage_bytes = 4096,
		.obj = { 4, 256u << 10, 1000 },
	};

	return c;
}

static uint64_t nonzero(const uint8_t *b, uint64_t n)
{
	uint64_t i, c = 0;

	for (i = 0; i < n; i++)
		c += b[i] != 0;
	return c;
}

/* Every byte of every area of l, as a tenant might leave it. */
static void scribble(const struct rdmem_lease *l)
{
	memset(l->req, 0xa1, l->req_len);
	memset(l->objects, 0xa3, l->objects_len);
	memset(l->ctrl, 0xa4, RDMEM_CTRL_BYTES);
	memset(l->staging, 0xa5, l->staging_len);
}

static uint64_t lease_dirty(const struct rdmem_lease *l)
{
	return nonzero(l->req, l->req_len) + nonzero(l->objects, l->objects_len) +
	       nonzero(l->ctrl, RDMEM_CTRL_BYTES) + nonzero(l->staging, l->staging_len);
}

static void test_reused_lease_is_zero(void)
{
	struct rdmem_pool_config c = config(1);
	struct rdmem_lease a, b;
	struct rdmem_pool *p;
	int round;

	REQUIRE(rdmem_pool_create(&c, &p) == 0);
	for (round = 0; round < 3; round++) {
		REQUIRE(rdmem_pool_take(p, &a) == 0);
		CHECK_EQ(lease_dirty(&a), 0);
		CHECK(a.objects_len >= rdmem_objpool_area_bytes(&c.obj));
		scribble(&a);
		rdmem_pool_give(p, &a);
	}
	/* The same (only) lease again: nothing of the last tenant's. */
	REQUIRE(rdmem_pool_take(p, &b) == 0);
	CHECK_EQ(b.index, a.index);
	CHECK_EQ(lease_dirty(&b), 0);
	rdmem_pool_give(p, &b);
	rdmem_pool_destroy(p);
}

static void test_leases_run_out_and_return(void)
{
	struct rdmem_pool_config c = config(2);
	struct rdmem_lease l[3];
	struct rdmem_pool *p;

	REQUIRE(rdmem_pool_create(&c, &p) == 0);
	CHECK_EQ(rdmem_pool_taken(p), 0);
	REQUIRE(rdmem_pool_take(p, &l[0]) == 0);
	REQUIRE(rdmem_pool_take(p, &l[1]) == 0);
	CHECK(l[0].index != l[1].index);
	CHECK(l[0].req + rdmem_pool_lease_size(&c) <= l[1].req ||
	      l[1].req + rdmem_pool_lease_size(&c) <= l[0].req);
	CHECK_EQ(rdmem_pool_take(p, &l[2]), -EBUSY);
	CHECK_EQ(rdmem_pool_taken(p), 2);
	scribble(&l[0]);
	CHECK_EQ(lease_dirty(&l[1]), 0); /* leases do not overlap */
	rdmem_pool_give(p, &l[0]);
	rdmem_pool_give(p, &l[0]); /* a second give is ignored */
	CHECK_EQ(rdmem_pool_taken(p), 1);
	REQUIRE(rdmem_pool_take(p, &l[2]) == 0);
	CHECK_EQ(l[2].index, l[0].index);
	CHECK_EQ(lease_dirty(&l[2]), 0);
	rdmem_pool_give(p, &l[1]);
	rdmem_pool_give(p, &l[2]);
	CHECK_EQ(rdmem_pool_taken(p), 0);
	rdmem_pool_destroy(p);
}

int main(void)
{
	rdmem_log_init("test_pool", 0);
	RUN(test_reused_lease_is_zero);
	RUN(test_leases_run_out_and_return);
	return check_done();
}
