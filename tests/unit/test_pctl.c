/* test_pctl.c - the one percentile rule (include/rdmem/pctl.h):
 * sorted[round(q * (n - 1))], edges clamped, nothing read for no samples. */
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

int main(void)
{
	RUN(test_rule);
	RUN(test_empty_and_one);
	RUN(test_large);
	return check_done();
}
