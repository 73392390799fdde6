/* latency.h - the one place where benchmark clients time calls, compute
 * percentiles and print their result record. Every comparison client (C and
 * C++) includes it, so a p99 means the same thing for gRPC, Redis and any
 * other system measured by these tools.
 *
 * Percentiles come from include/rdmem/pctl.h, the routine `rdmem bench`
 * (cli/bench.c) and the test tools use, so the RDMemRPC figures
 * and these are computed the same way.
 *
 * Record (one JSON object on one line, on stdout):
 *   {"system":..,"op":..,"size":..,"window":..,"n":..,"avg_us":..,"p50_us":..,
 *    "p99_us":..,"p999_us":..,"qps":..,"failures":..}
 */
#ifndef RDMEM_BENCH_LATENCY_H
#define RDMEM_BENCH_LATENCY_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rdmem/pctl.h"

struct lat_stats {
	uint64_t *ns;	   /* one sample per measured call, in ns */
	size_t n, cap;	   /* samples taken, room for */
	uint64_t t_begin;  /* start of the measured phase */
	uint64_t t_end;	   /* end of the measured phase */
	uint64_t failures; /* calls that failed or returned a wrong value */
};

static inline uint64_t lat_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Room for cap samples; allocated up front so recording never allocates. */
static inline int lat_init(struct lat_stats *s, size_t cap)
{
	s->ns = (uint64_t *)calloc(cap ? cap : 1, sizeof(*s->ns));
	s->n = 0;
	s->cap = cap;
	s->t_begin = s->t_end = 0;
	s->failures = 0;
	return s->ns ? 0 : -1;
}

static inline void lat_free(struct lat_stats *s)
{
	free(s->ns);
	s->ns = NULL;
}

static inline void lat_begin(struct lat_stats *s)
{
	s->t_begin = lat_now_ns();
}

static inline void lat_end(struct lat_stats *s)
{
	s->t_end = lat_now_ns();
}

/* Records one call that started at t0 and completed at t1. */
static inline void lat_add(struct lat_stats *s, uint64_t t0, uint64_t t1)
{
	if (s->n < s->cap)
		s->ns[s->n++] = t1 - t0;
}

/* Percentile q in [0, 1] of sorted samples, in microseconds. */
static inline double lat_pct_us(const uint64_t *sorted, size_t n, double q)
{
	return rdmem_pctl_us(sorted, n, q);
}

struct lat_summary {
	double avg_us, p50_us, p99_us, p999_us, qps;
};

/* Sorts the samples in place and summarizes them. */
static inline struct lat_summary lat_summarize(struct lat_stats *s)
{
	struct lat_summary r = { 0, 0, 0, 0, 0 };
	long double sum = 0;
	size_t i;

	rdmem_pctl_sort(s->ns, s->n);
	for (i = 0; i < s->n; i++)
		sum += s->ns[i];
	if (s->n) {
		r.avg_us = (double)(sum / s->n) / 1000.0;
		r.p50_us = lat_pct_us(s->ns, s->n, 0.50);
		r.p99_us = lat_pct_us(s->ns, s->n, 0.99);
		r.p999_us = lat_pct_us(s->ns, s->n, 0.999);
	}
	if (s->t_end > s->t_begin)
		r.qps = (double)s->n * 1e9 / (double)(s->t_end - s->t_begin);
	return r;
}

/* Prints the record every client prints; names must not need JSON escaping. */
static inline void lat_print_json(FILE *f, struct lat_stats *s, const char *system, const char *op,
				  uint64_t size, unsigned window)
{
	struct lat_summary r = lat_summarize(s);

	fprintf(f,
		"{\"system\":\"%s\",\"op\":\"%s\",\"size\":%llu,\"window\":%u,\"n\":%llu,"
		"\"avg_us\":%.3f,\"p50_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,"
		"\"qps\":%.1f,\"failures\":%llu}\n",
		system, op, (unsigned long long)size, window, (unsigned long long)s->n, r.avg_us,
		r.p50_us, r.p99_us, r.p999_us, r.qps, (unsigned long long)s->failures);
	fflush(f);
}

#endif
