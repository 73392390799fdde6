/* metrics.c - histogram reads and the Prometheus text writer (see metrics.h). */
#include "common/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

void rdmem_hist_read(const struct rdmem_hist *h, struct rdmem_hist_snap *into)
{
	unsigned i;

	for (i = 0; i < RDMEM_HIST_BUCKETS; i++) {
		/* The const is ours: a relaxed load does not write. */
		uint64_t n = atomic_load_explicit((atomic_uint_fast64_t *)&h->bucket[i],
						  memory_order_relaxed);

		into->bucket[i] += n;
		into->count += n;
	}
	into->sum_ns +=
	    atomic_load_explicit((atomic_uint_fast64_t *)&h->sum_ns, memory_order_relaxed);
}

void rdmem_prom_init(struct rdmem_prom *p, char *buf, size_t cap)
{
	p->t = (struct rdmem_text){ buf, cap, 0, cap == 0 };
	if (cap)
		buf[0] = '\0';
}

void rdmem_prom_printf(struct rdmem_prom *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rdmem_text_vadd(&p->t, fmt, ap);
	va_end(ap);
}

void rdmem_prom_family(struct rdmem_prom *p, const char *name, const char *type, const char *help)
{
	rdmem_prom_printf(p, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void rdmem_prom_sample(struct rdmem_prom *p, const char *name, const char *labels, uint64_t value)
{
	if (labels && *labels)
		rdmem_prom_printf(p, "%s{%s} %" PRIu64 "\n", name, labels, value);
	else
		rdmem_prom_printf(p, "%s %" PRIu64 "\n", name, value);
}

void rdmem_prom_sample_i(struct rdmem_prom *p, const char *name, const char *labels, int64_t value)
{
	if (labels && *labels)
		rdmem_prom_printf(p, "%s{%s} %" PRId64 "\n", name, labels, value);
	else
		rdmem_prom_printf(p, "%s %" PRId64 "\n", name, value);
}

void rdmem_prom_hist(struct rdmem_prom *p, const char *name, const char *labels,
		     const struct rdmem_hist_snap *s)
{
	const char *sep = labels && *labels ? "," : "";
	uint64_t cum = 0;
	unsigned i;

	if (!labels)
		labels = "";
	for (i = 0; i < RDMEM_HIST_FINITE; i++) {
		cum += s->bucket[i];
		rdmem_prom_printf(p, "%s_bucket{%s%sle=\"%.9g\"} %" PRIu64 "\n", name, labels, sep,
				  (double)(1ull << (i + RDMEM_HIST_SHIFT)) / 1e9, cum);
	}
	rdmem_prom_printf(p, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, sep,
			  s->count);
	if (*labels) {
		rdmem_prom_printf(p, "%s_sum{%s} %.9f\n", name, labels, (double)s->sum_ns / 1e9);
		rdmem_prom_printf(p, "%s_count{%s} %" PRIu64 "\n", name, labels, s->count);
	} else {
		rdmem_prom_printf(p, "%s_sum %.9f\n", name, (double)s->sum_ns / 1e9);
		rdmem_prom_printf(p, "%s_count %" PRIu64 "\n", name, s->count);
	}
}

int rdmem_prom_finish(const struct rdmem_prom *p)
{
	return p->t.overflow ? -E2BIG : (int)p->t.len;
}
