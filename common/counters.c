/* counters.c - renders a counter table as text, JSON and Prometheus (see counters.h). */
#include "common/counters.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int rdmem_ctr_table_group(const struct rdmem_ctr_table *t, const char *group,
			  struct rdmem_ctr_table *view)
{
	size_t len = strlen(group), i = 0, n;

	while (i < t->n && strncmp(t->ctr[i].name, group, len) != 0)
		i++;
	for (n = 0; i + n < t->n && strncmp(t->ctr[i + n].name, group, len) == 0; n++)
		;
	if (!n)
		return -ENOENT;
	*view = (struct rdmem_ctr_table){ t->daemon, t->ctr + i, n };
	return 0;
}

uint64_t rdmem_ctr_value(const struct rdmem_ctr *c, const void *snap)
{
	const char *p = (const char *)snap + c->off;
	uint32_t v32;
	uint64_t v64;

	if (c->width == 4) {
		memcpy(&v32, p, 4);
		return v32;
	}
	if (c->width == 8) {
		memcpy(&v64, p, 8);
		return v64;
	}
	return 0;
}

const char *rdmem_ctr_label(const struct rdmem_ctr *c, const void *snap)
{
	const char *s;

	if (c->type != RDMEM_CTR_LABEL)
		return NULL;
	memcpy(&s, (const char *)snap + c->off, sizeof(s));
	return s ? s : "";
}

int rdmem_ctr_prom_name(const struct rdmem_ctr_table *t, const struct rdmem_ctr *c, char *buf,
			size_t cap)
{
	int n = snprintf(buf, cap, "rdmem_%s_%s%s", t->daemon, c->name,
			 c->type == RDMEM_CTR_COUNTER ? "_total" : "");
	char *d;

	if (n < 0 || (size_t)n >= cap)
		return -E2BIG;
	for (d = buf; *d; d++)
		if (*d == '.')
			*d = '_';
	return 0;
}

static int rdmem_ctr_shown(const struct rdmem_ctr *c, unsigned mask)
{
	return !c->cond || (mask & c->cond);
}

void rdmem_ctr_text(const struct rdmem_ctr_table *t, const void *snap, unsigned mask,
		    struct rdmem_text *o)
{
	const struct rdmem_ctr *c;

	for (c = t->ctr; c < t->ctr + t->n; c++) {
		if (!rdmem_ctr_shown(c, mask))
			continue;
		if (c->type == RDMEM_CTR_LABEL)
			rdmem_text_add(o, "%s %s\n", c->name, rdmem_ctr_label(c, snap));
		else
			rdmem_text_add(o, "%s %" PRIu64 "\n", c->name, rdmem_ctr_value(c, snap));
	}
}

/* Length of the group part both names share, ending at a dot ("" when none). */
static size_t rdmem_ctr_common_group(const char *a, const char *b)
{
	size_t i, common = 0;

	for (i = 0; a[i] && a[i] == b[i]; i++)
		if (a[i] == '.')
			common = i + 1;
	return common;
}

static unsigned rdmem_ctr_depth(const char *s)
{
	unsigned d = 0;

	for (; *s; s++)
		d += *s == '.';
	return d;
}

void rdmem_ctr_json(const struct rdmem_ctr_table *t, const void *snap, unsigned mask,
		    struct rdmem_text *o, int *first)
{
	const struct rdmem_ctr *c;
	const char *prev = "";
	size_t common;
	unsigned close;

	for (c = t->ctr; c < t->ctr + t->n; c++) {
		const char *key;

		if (!rdmem_ctr_shown(c, mask))
			continue;
		common = rdmem_ctr_common_group(prev, c->name);
		/* close the groups of prev below the shared part, open those of c */
		for (close = rdmem_ctr_depth(prev + common); close; close--)
			rdmem_text_add(o, "}");
		for (key = c->name + common; strchr(key, '.'); key = strchr(key, '.') + 1) {
			rdmem_text_add(o, "%s\"%.*s\":{", *first ? "" : ",",
				       (int)(strchr(key, '.') - key), key);
			*first = 1;
		}
		if (c->type == RDMEM_CTR_LABEL)
			rdmem_text_add(o, "%s\"%s\":\"%s\"", *first ? "" : ",", key,
				       rdmem_ctr_label(c, snap));
		else
			rdmem_text_add(o, "%s\"%s\":%" PRIu64, *first ? "" : ",", key,
				       rdmem_ctr_value(c, snap));
		*first = 0;
		prev = c->name;
	}
	for (close = rdmem_ctr_depth(prev); close; close--)
		rdmem_text_add(o, "}");
}

void rdmem_ctr_prom(const struct rdmem_ctr_table *t, const void *snap, unsigned mask,
		    struct rdmem_prom *o)
{
	rdmem_ctr_prom_many(t, &snap, &mask, NULL, 1, o);
}

/* One family per entry, with a sample per snapshot that shows it; with
 * labels, each sample carries its own (e.g. server="h:p"). */
void rdmem_ctr_prom_many(const struct rdmem_ctr_table *t, const void *const *snaps,
			 const unsigned *masks, const char *const *labels, unsigned n,
			 struct rdmem_prom *o)
{
	static const char *const types[] = { "counter", "gauge", "gauge" };
	const struct rdmem_ctr *c;
	char name[128], label[512];
	unsigned i, shown;

	for (c = t->ctr; c < t->ctr + t->n; c++) {
		for (i = shown = 0; i < n; i++)
			shown += rdmem_ctr_shown(c, masks[i]);
		if (!shown || rdmem_ctr_prom_name(t, c, name, sizeof(name)) < 0)
			continue;
		rdmem_prom_family(o, name, types[c->type], c->help);
		for (i = 0; i < n; i++) {
			const char *sep = labels && c->type == RDMEM_CTR_LABEL ? "," : "";

			if (!rdmem_ctr_shown(c, masks[i]))
				continue;
			snprintf(label, sizeof(label), "%s%s", labels ? labels[i] : "", sep);
			if (c->type == RDMEM_CTR_LABEL) {
				snprintf(label + strlen(label), sizeof(label) - strlen(label),
					 "value=\"%s\"", rdmem_ctr_label(c, snaps[i]));
				rdmem_prom_sample(o, name, label, 1);
			} else {
				rdmem_prom_sample(o, name, label, rdmem_ctr_value(c, snaps[i]));
			}
		}
	}
}

void rdmem_ctr_report(const struct rdmem_ctr_table *t, const void *snap, unsigned mask, int json,
		      const char *json_end, struct rdmem_text *o)
{
	int first = 1;

	if (!json) {
		rdmem_ctr_text(t, snap, mask, o);
		return;
	}
	rdmem_text_add(o, "{");
	rdmem_ctr_json(t, snap, mask, o, &first);
	if (json_end)
		rdmem_text_add(o, "%s", json_end);
}
