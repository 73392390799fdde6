/* metrics.h - what the agent and the server need to expose Prometheus
 * metrics: a lock-free latency histogram with log2 buckets and a writer for
 * the Prometheus text exposition format. The HTTP side is metrics_http.h.
 *
 * A histogram has one writer (an actor thread: plain load + store, no RMW)
 * or many (the server's dispatch: fetch_add); readers on other threads take
 * relaxed loads and may see a sample counted in its bucket but not yet in
 * the sum, which is fine for monitoring. The count a reader reports is the
 * sum of the buckets it read, so _count always equals the +Inf bucket.
 */
#ifndef RDMEM_FABRIC_METRICS_H
#define RDMEM_FABRIC_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rdmem/util.h"

/* Bucket i counts samples <= 2^(i + RDMEM_HIST_SHIFT) ns: 1.024 us up to
 * 2^35 ns (~34 s); the last bucket is +Inf. */
#define RDMEM_HIST_SHIFT   10
#define RDMEM_HIST_FINITE  26
#define RDMEM_HIST_BUCKETS (RDMEM_HIST_FINITE + 1)

struct rdmem_hist {
	atomic_uint_fast64_t bucket[RDMEM_HIST_BUCKETS];
	atomic_uint_fast64_t sum_ns;
};

/* A reader's copy; rdmem_hist_read() adds into it, so histograms can be merged. */
struct rdmem_hist_snap {
	uint64_t bucket[RDMEM_HIST_BUCKETS];
	uint64_t count, sum_ns;
};

/*
 * Adds n to a counter only one thread writes at a time (the writer's order
 * with the last one comes from elsewhere: its thread, or a token's
 * acquire): a relaxed load and store, cheaper than an atomic RMW. Readers
 * on other threads take relaxed loads and see each value whole.
 */
static inline void rdmem_count_single(atomic_uint_fast64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static inline unsigned rdmem_hist_index(uint64_t ns)
{
	unsigned bits;

	if (ns <= (1ull << RDMEM_HIST_SHIFT))
		return 0;
	bits = 64u - (unsigned)__builtin_clzll(ns - 1); /* ceil(log2(ns)) */
	bits -= RDMEM_HIST_SHIFT;
	return bits < RDMEM_HIST_FINITE ? bits : RDMEM_HIST_FINITE;
}

/* One writer thread only (rdmem_count_single). */
static inline void rdmem_hist_add_single(struct rdmem_hist *h, uint64_t ns)
{
	rdmem_count_single(&h->bucket[rdmem_hist_index(ns)], 1);
	rdmem_count_single(&h->sum_ns, ns);
}

/* Any number of writer threads. */
static inline void rdmem_hist_add_shared(struct rdmem_hist *h, uint64_t ns)
{
	atomic_fetch_add_explicit(&h->bucket[rdmem_hist_index(ns)], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

void rdmem_hist_read(const struct rdmem_hist *h, struct rdmem_hist_snap *into);

/* ---- Prometheus text format -------------------------------------------- */

/* An appender that remembers overflow instead of failing every call. */
struct rdmem_prom {
	struct rdmem_text t; /* the writer rdmem_text_add() appends with */
};

void rdmem_prom_init(struct rdmem_prom *p, char *buf, size_t cap);
void rdmem_prom_printf(struct rdmem_prom *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "# HELP name help" and "# TYPE name type"; once per metric family. */
void rdmem_prom_family(struct rdmem_prom *p, const char *name, const char *type, const char *help);
/* One sample; labels is "" or 'a="x",b="y"' (values must need no escaping). */
void rdmem_prom_sample(struct rdmem_prom *p, const char *name, const char *labels, uint64_t value);
void rdmem_prom_sample_i(struct rdmem_prom *p, const char *name, const char *labels, int64_t value);
/* name_bucket{labels,le=...} (cumulative, in seconds), name_sum, name_count. */
void rdmem_prom_hist(struct rdmem_prom *p, const char *name, const char *labels,
		     const struct rdmem_hist_snap *s);
/* The text's length, or -E2BIG when it did not fit. */
int rdmem_prom_finish(const struct rdmem_prom *p);

#endif
