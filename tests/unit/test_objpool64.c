/* test_objpool64.c - object offsets past 4 GiB: the largest legal pool
 * (--objpool-slabs 65536, --max-value 64m) is 518 GiB of address space, and
 * every object past the slabs lies above 2^32. The area is reserved, never
 * touched: offsets are arithmetic. */
#include <stdint.h>
#include <sys/mman.h>

#include "check.h"
#include "server/objpool.h"

static void test_offsets_past_4g(void)
{
	struct rdmem_objpool_config cfg = { 65536, 64u << 20, 1000 };
	uint64_t bytes = rdmem_objpool_area_bytes(&cfg);
	struct rdmem_objpool pool;
	struct rdmem_objref mid, big, last;
	void *area, *buf;
	uint32_t i;

	/* 65536 x 64 KiB + 8192 x 256 KiB + 8192 x 64 MiB */
	CHECK_EQ(bytes, (4ull << 30) + (2ull << 30) + (512ull << 30));
	area = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	REQUIRE(area != MAP_FAILED);
	REQUIRE(rdmem_objpool_init(&pool, &cfg, area) == 0);
	CHECK_EQ(pool.area_bytes, bytes);
	CHECK_EQ(rdmem_objpool_max_object(&pool), 64u << 20);
	/* The first object of the 256 KiB class starts where the slabs end. */
	REQUIRE(rdmem_objpool_alloc(&pool, 100000, 1, &mid, &buf) == 0);
	CHECK_EQ(mid.offset, 4ull << 30);
	CHECK((uint8_t *)buf == (uint8_t *)area + mid.offset);
	REQUIRE(rdmem_objpool_alloc(&pool, 64u << 20, 1, &big, &buf) == 0);
	CHECK_EQ(big.offset, 6ull << 30);
	CHECK((uint8_t *)buf == (uint8_t *)area + big.offset);
	/* The last object of the pool ends exactly at its end. */
	for (i = 1; i < 8192; i++)
		REQUIRE(rdmem_objpool_alloc(&pool, 64u << 20, 1, &last, &buf) == 0);
	CHECK_EQ(last.offset + last.length, bytes);
	CHECK_EQ(rdmem_objpool_reclaim(&pool, &mid), RDMEM_S_OK);
	CHECK_EQ(rdmem_objpool_reclaim(&pool, &last), RDMEM_S_OK);
	rdmem_objpool_fini(&pool);
	munmap(area, bytes);
}

int main(void)
{
	RUN(test_offsets_past_4g);
	return check_done();
}
