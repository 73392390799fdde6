/* counters.h - one table per daemon describes every counter and gauge it
 * reports (name, help, type, where the value sits in a snapshot struct), and
 * these three writers render it: `rdmem stats` text ("name value" lines),
 * JSON (objects nested on the name's dots) and Prometheus /metrics
 * (rdmem_<daemon>_<name, dots as '_'>, "_total" for counters). So a counter
 * has one name everywhere, and adding one is one table line.
 */
#ifndef RDMEM_FABRIC_COUNTERS_H
#define RDMEM_FABRIC_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

#include "common/metrics.h"
#include "rdmem/util.h"

enum rdmem_ctr_type {
	RDMEM_CTR_COUNTER, /* only grows (per process or per link) */
	RDMEM_CTR_GAUGE,   /* goes up and down */
	RDMEM_CTR_LABEL,   /* a word (const char * in the snapshot); Prometheus: {value="..."} 1 */
};

struct rdmem_ctr {
	const char *name; /* dotted, snake_case parts: "rdma.reclaimed" */
	const char *help;
	uint8_t type;  /* enum rdmem_ctr_type */
	uint8_t width; /* bytes of the field: 4 or 8 (0 for a label) */
	uint8_t cond;  /* shown only when this bit is in the caller's mask; 0: always */
	uint32_t off;  /* offset of the field in the snapshot */
};

/* A table entry for field f of snapshot type T. */
#define RDMEM_CTR(T, name, type, f, help)                                                          \
	{                                                                                          \
		name, help, type, (uint8_t)sizeof(((T *)0)->f), 0, (uint32_t)offsetof(T, f)        \
	}
#define RDMEM_CTR_IF(T, cond, name, type, f, help)                                                 \
	{                                                                                          \
		name, help, type, (uint8_t)sizeof(((T *)0)->f), cond, (uint32_t)offsetof(T, f)     \
	}

struct rdmem_ctr_table {
	const char *daemon; /* "agent", "server": the Prometheus prefix */
	const struct rdmem_ctr *ctr;
	size_t n;
};

/* The run of t's entries named group... (e.g. "frontdoor."), as a table of
 * its own: 0, or -ENOENT when t has none. */
int rdmem_ctr_table_group(const struct rdmem_ctr_table *t, const char *group,
			  struct rdmem_ctr_table *view);

uint64_t rdmem_ctr_value(const struct rdmem_ctr *c, const void *snap);
const char *rdmem_ctr_label(const struct rdmem_ctr *c, const void *snap);
/* The Prometheus name of c: 0, or -E2BIG when cap is too small. */
int rdmem_ctr_prom_name(const struct rdmem_ctr_table *t, const struct rdmem_ctr *c, char *buf,
			size_t cap);

/* The entries whose cond bit is in mask, in table order. JSON opens and
 * closes objects between them: the caller writes the outer braces, and
 * *first says whether a comma is due before the first key (kept updated). */
void rdmem_ctr_text(const struct rdmem_ctr_table *t, const void *snap, unsigned mask,
		    struct rdmem_text *o);
void rdmem_ctr_json(const struct rdmem_ctr_table *t, const void *snap, unsigned mask,
		    struct rdmem_text *o, int *first);
void rdmem_ctr_prom(const struct rdmem_ctr_table *t, const void *snap, unsigned mask,
		    struct rdmem_prom *o);
/* The same for n snapshots: each sample gets labels[i] (NULL: none). */
void rdmem_ctr_prom_many(const struct rdmem_ctr_table *t, const void *const *snaps,
			 const unsigned *masks, const char *const *labels, unsigned n,
			 struct rdmem_prom *o);
/* A STATS report: the text lines, or "{" and the JSON members followed by
 * json_end (NULL: the object stays open for the caller to add to). */
void rdmem_ctr_report(const struct rdmem_ctr_table *t, const void *snap, unsigned mask, int json,
		      const char *json_end, struct rdmem_text *o);

#endif
