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
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline int rdmem_pctl_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Sorts samples ascending, the order rdmem_pctl() expects. An LSD radix
 * sort, one byte a pass, counting and moving only the bytes that differ
 * between samples (a latency in ns has 3-4): about 30 instructions a sample
 * against ~340 for qsort at 20,000 samples. The sort runs inside the
 * benchmarked client, whose instructions per call `make bench` counts, so
 * its cost is the harness's and must stay small next to a call's. qsort
 * only when the scratch buffer cannot be had.
 */
static inline void rdmem_pctl_sort(uint64_t *v, size_t n)
{
	size_t count[8][256] = { { 0 } }, i;
	uint64_t *tmp, *src = v, *dst, all = ~0ull, any = 0;
	unsigned b;

	if (n < 2)
		return;
	tmp = (uint64_t *)malloc(n * sizeof(*v));
	if (!tmp) {
		qsort(v, n, sizeof(*v), rdmem_pctl_cmp);
		return;
	}
	/* Bits set in every sample and in any: a byte where they agree is one
	 * every sample shares, which needs neither counting nor a pass. */
	for (i = 0; i < n; i++)
		all &= src[i], any |= src[i];
	for (b = 0; b < 8; b++)
		if ((((all ^ any) >> (8 * b)) & 0xff) != 0)
			for (i = 0; i < n; i++)
				count[b][(src[i] >> (8 * b)) & 0xff]++;
	dst = tmp;
	for (b = 0; b < 8; b++) {
		size_t *c = count[b], sum = 0, d;
		uint64_t *t;

		if ((((all ^ any) >> (8 * b)) & 0xff) == 0)
			continue; /* every sample has this byte: the pass moves nothing */
		for (d = 0; d < 256; d++) {
			size_t k = c[d];

			c[d] = sum;
			sum += k;
		}
		for (i = 0; i < n; i++)
			dst[c[(src[i] >> (8 * b)) & 0xff]++] = src[i];
		t = src, src = dst, dst = t;
	}
	if (src != v)
		memcpy(v, src, n * sizeof(*v));
	free(tmp);
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
