/* pctl.h - the one percentile rule every figure in the tree uses: the
 * `rdmem bench` CLI, the benchmark clients (bench/latency.h), the
 * test tools and the tests that print latency. Percentiles are taken over
 * all samples, with no interpolation and no histogram buckets, as
 * p = sorted[round(q * (n - 1))], so a p99 printed by any of them means the
 * same thing. Header-only and C++-safe: the gRPC client includes it too.
 */
#ifndef RDMEM_PCTL_H
#define RDMEM_PCTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline int rdmem_pctl_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Sorts samples ascending, the order rdmem_pctl() expects. */
static inline void rdmem_pctl_sort(uint64_t *v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof(*v), rdmem_pctl_cmp);
}

/* Percentile q in [0, 1] of n sorted samples; 0 when there are none. */
static inline uint64_t rdmem_pctl(const uint64_t *sorted, size_t n, double q)
{
	if (n == 0)
		return 0;
	if (q <= 0)
		return sorted[0];
	if (q >= 1)
		return sorted[n - 1];
	return sorted[(size_t)(q * (double)(n - 1) + 0.5)];
}

/* The same, for samples in nanoseconds, in microseconds. */
static inline double rdmem_pctl_us(const uint64_t *sorted, size_t n, double q)
{
	return (double)rdmem_pctl(sorted, n, q) / 1000.0;
}

#ifdef __cplusplus
}
#endif

#endif
