/* test_pool.c - the server's message pool: a lease taken again after its
 * tenant wrote every byte of it comes back all zeros, in every area (ring,
 * payloads, objects, control page, staging); leases run out with -EBUSY and
 * come back; each area is a memfd of its own. Shm fabric: the pool's memory
 * is memfd-backed, as for agents on this host. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
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

/* [p, p + n) and [q, q + m) share no byte. */
static int apart(const uint8_t *p, uint64_t n, const uint8_t *q, uint64_t m)
{
	return p + n <= q || q + m <= p;
}

/* The inode of the memfd mapped whole, from offset 0, at [p, p + n); 0 when
 * no mapping is exactly that (part of a larger file, say). */
static unsigned long whole_file_at(const uint8_t *p, uint64_t n)
{
	unsigned long long lo, hi, off;
	unsigned long inode, found = 0;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %*s %llx %*s %lu", &lo, &hi, &off, &inode) == 4 &&
		    lo == (uintptr_t)p && hi - lo == n && off == 0 && strstr(line, "/memfd:"))
			found = inode;
	fclose(f);
	return found;
}

/*
 * No area of lease a overlaps an area of lease b, and each area is a file of
 * its own, mapped whole: the shm fabric hands a peer the file behind what it
 * registers, so a file holding two areas would give the peer both.
 */
static int leases_apart(const struct rdmem_lease *a, const struct rdmem_lease *b)
{
	const struct rdmem_lease *l[2] = { a, b };
	const uint8_t *p[8];
	unsigned long ino[8];
	uint64_t n[8];
	int i, j, k = 0;

	for (i = 0; i < 2; i++) {
		p[k] = l[i]->req, n[k++] = l[i]->req_len;
		p[k] = l[i]->objects, n[k++] = l[i]->objects_len;
		p[k] = l[i]->ctrl, n[k++] = RDMEM_CTRL_BYTES;
		p[k] = l[i]->staging, n[k++] = l[i]->staging_len;
	}
	for (i = 0; i < k; i++)
		if (!(ino[i] = whole_file_at(p[i], n[i])))
			return 0;
	for (i = 0; i < k; i++)
		for (j = i + 1; j < k; j++)
			if (!apart(p[i], n[i], p[j], n[j]) || ino[i] == ino[j])
				return 0;
	return 1;
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
	CHECK(leases_apart(&l[0], &l[1]));
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
