/* test_pctl.c - the one percentile rule (include/rdmem/pctl.h):
 * sorted[round(q * (n - 1))], edges clamped, nothing read for no samples. */
#include <string.h>

#include "rdmem/pctl.h"
#include "rdmem/util.h"
#include "tests/check.h"

static void test_rule(void)
{
	uint64_t v[] = { 9, 1, 7, 3, 5, 2, 8, 4, 6, 10 };
	size_t n = RDMEM_ARRAY_SIZE(v);

	rdmem_pctl_sort(v, n);
	CHECK_EQ(v[0], 1);
	CHECK_EQ(v[9], 10);
	CHECK_EQ(rdmem_pctl(v, n, 0.0), 1);
	CHECK_EQ(rdmem_pctl(v, n, 0.5), 6); /* round(4.5) = 5 -> sixth sample */
	CHECK_EQ(rdmem_pctl(v, n, 0.99), 10);
	CHECK_EQ(rdmem_pctl(v, n, 1.0), 10);
	CHECK_EQ(rdmem_pctl(v, n, 2.0), 10); /* clamped, not read past the end */
	CHECK_EQ(rdmem_pctl(v, n, -1.0), 1);
	CHECK(rdmem_pctl_us(v, n, 1.0) == 0.010);
}

static void test_empty_and_one(void)
{
	uint64_t one = 42;

	CHECK_EQ(rdmem_pctl(NULL, 0, 0.99), 0);
	CHECK(rdmem_pctl_us(NULL, 0, 0.5) == 0.0);
	rdmem_pctl_sort(&one, 1);
	CHECK_EQ(rdmem_pctl(&one, 1, 0.5), 42);
	CHECK_EQ(rdmem_pctl(&one, 1, 0.999), 42);
}

static void test_large(void)
{
	enum { N = 1000 };
	static uint64_t v[N];
	size_t i;

	for (i = 0; i < N; i++)
		v[i] = (uint64_t)(N - i); /* descending: the sort has work to do */
	rdmem_pctl_sort(v, N);
	CHECK_EQ(rdmem_pctl(v, N, 0.5), 501);  /* round(499.5) = 500 */
	CHECK_EQ(rdmem_pctl(v, N, 0.99), 990); /* round(989.01) = 989 */
	CHECK_EQ(rdmem_pctl(v, N, 0.999), 999);
}

/*
 * The radix sort against qsort on seeded random samples of every shape a
 * byte-at-a-time sort can get wrong: all equal (every pass skipped), one
 * byte differing (only that pass), values in the top byte, duplicates,
 * and full 64-bit values.
 */
static void test_radix_matches_qsort(void)
{
	enum { N = 5000 };
	static uint64_t v[N], want[N];
	static const uint64_t masks[] = { 0,   0xff,	    0xff00, 0xff00000000000000ull,
					  0xf, 0xffffffull, ~0ull };
	uint64_t x = 0x9e3779b97f4a7c15ull; /* xorshift64, fixed seed */
	size_t m, i, n;

	for (m = 0; m < RDMEM_ARRAY_SIZE(masks); m++) {
		n = 1 + (size_t)(x % N);
		for (i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			v[i] = want[i] = (x & masks[m]) | 0x100000000ull * (m == 0);
		}
		qsort(want, n, sizeof(*want), rdmem_pctl_cmp);
		rdmem_pctl_sort(v, n);
		CHECK(memcmp(v, want, n * sizeof(*v)) == 0);
	}
}

int main(void)
{
	RUN(test_radix_matches_qsort);
	RUN(test_rule);
	RUN(test_empty_and_one);
	RUN(test_large);
	return check_done();
}
