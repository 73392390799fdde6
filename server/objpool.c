/* objpool.c - size-classed object pool with generation-checked reclaim. */
#include "server/objpool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RDMEM_OBJ_SLAB (64u << 10)
#define RDMEM_OBJ_MID  (256u << 10)

static void rdmem_objpool_geometry(const struct rdmem_objpool_config *cfg,
				   uint32_t size[RDMEM_OBJ_CLASSES],
				   uint32_t count[RDMEM_OBJ_CLASSES])
{
	uint32_t big = (cfg->max_value + RDMEM_OBJ_SLAB - 1) / RDMEM_OBJ_SLAB * RDMEM_OBJ_SLAB;

	/* Larger classes scale with the slabs: the default 256 slabs give 32 of
	 * each, a window of 32 maximum-size LAZY replies. */
	uint32_t large = RDMEM_MAX(2u, cfg->slab_count / 8);

	size[0] = RDMEM_OBJ_SLAB, count[0] = cfg->slab_count;
	size[1] = RDMEM_OBJ_MID, count[1] = big > RDMEM_OBJ_MID ? large : 0;
	size[2] = RDMEM_MAX(big, RDMEM_OBJ_SLAB), count[2] = big > RDMEM_OBJ_SLAB ? large : 0;
}

uint64_t rdmem_objpool_area_bytes(const struct rdmem_objpool_config *cfg)
{
	uint32_t size[RDMEM_OBJ_CLASSES], count[RDMEM_OBJ_CLASSES];
	uint64_t total = 0;
	int c;

	rdmem_objpool_geometry(cfg, size, count);
	for (c = 0; c < RDMEM_OBJ_CLASSES; c++)
		total += (uint64_t)size[c] * count[c];
	return total;
}

int rdmem_objpool_init(struct rdmem_objpool *p, const struct rdmem_objpool_config *cfg, void *area)
{
	uint32_t size[RDMEM_OBJ_CLASSES], count[RDMEM_OBJ_CLASSES], id = 0, i;
	uint64_t off = 0;
	int c;

	memset(p, 0, sizeof(*p));
	rdmem_objpool_geometry(cfg, size, count);
	for (c = 0; c < RDMEM_OBJ_CLASSES; c++)
		p->nobjs += count[c];
	p->objs = calloc(p->nobjs, sizeof(*p->objs));
	if (!p->objs)
		return -ENOMEM;
	for (c = 0; c < RDMEM_OBJ_CLASSES; c++) {
		struct rdmem_objpool_class *k = &p->cls[c];

		k->size = size[c], k->count = count[c], k->first_id = id, k->area_off = off;
		k->free_ids = malloc(sizeof(uint32_t) * (count[c] ? count[c] : 1));
		if (!k->free_ids) {
			rdmem_objpool_fini(p);
			return -ENOMEM;
		}
		/* Pushed high to low so the lowest ids (and pages) are used first. */
		for (i = count[c]; i > 0; i--) {
			p->objs[id + i - 1].cls = (uint8_t)c;
			p->objs[id + i - 1].generation = 1;
			k->free_ids[k->nfree++] = id + i - 1;
		}
		id += count[c];
		off += (uint64_t)size[c] * count[c];
	}
	p->area = area;
	p->area_bytes = off;
	/*
	 * Freed a quarter later than the TTL the welcome announces: an agent
	 * trusts a LAZY READ that completed within the TTL of its request going
	 * out, timed on its own clock, and clocks on two hosts run at rates NTP
	 * or chrony may slew apart (chrony by up to 8.3 % each way). The quarter
	 * covers that; an unreclaimed object merely lives a little longer.
	 */
	p->ttl_ns = (uint64_t)cfg->ttl_ms * 1000000ull;
	p->ttl_ns += p->ttl_ns / 4;
	return 0;
}

uint32_t rdmem_objpool_max_object(const struct rdmem_objpool *p)
{
	uint32_t max = 0;
	int c;

	for (c = 0; c < RDMEM_OBJ_CLASSES; c++)
		if (p->cls[c].count)
			max = RDMEM_MAX(max, p->cls[c].size);
	return max;
}

void rdmem_objpool_fini(struct rdmem_objpool *p)
{
	int c;

	for (c = 0; c < RDMEM_OBJ_CLASSES; c++)
		free(p->cls[c].free_ids);
	free(p->objs);
	memset(p, 0, sizeof(*p));
}

static uint64_t rdmem_objpool_offset(const struct rdmem_objpool *p, uint32_t id)
{
	const struct rdmem_objpool_class *k = &p->cls[p->objs[id].cls];

	return k->area_off + (uint64_t)(id - k->first_id) * k->size;
}

int rdmem_objpool_alloc(struct rdmem_objpool *p, uint32_t len, uint64_t now_ns,
			struct rdmem_objref *ref, void **buf)
{
	int c, fits = 0;

	/* Smallest class that fits and has a free object; a larger one if not. */
	for (c = 0; c < RDMEM_OBJ_CLASSES; c++) {
		struct rdmem_objpool_class *k = &p->cls[c];
		struct rdmem_objpool_obj *o;
		uint32_t id;

		if (k->size < len || !k->count)
			continue;
		fits = 1;
		if (!k->nfree)
			continue;
		id = k->free_ids[--k->nfree];
		o = &p->objs[id];
		o->ready_ns = now_ns;
		/* Objects become ready in time order: an earlier one expires first. */
		if (!p->next_expiry_ns)
			p->next_expiry_ns = now_ns + p->ttl_ns + 1;
		o->length = len;
		ref->object_id = id;
		ref->length = len;
		ref->offset = rdmem_objpool_offset(p, id); /* 64-bit: pools pass 4 GiB */
		ref->generation = o->generation;
		*buf = p->area + ref->offset;
		p->st.alloc++;
		p->st.live++;
		p->st.used_bytes += k->size;
		return 0;
	}
	if (fits)
		p->st.full++;
	return fits ? RDMEM_S_BUSY : RDMEM_S_TOO_BIG;
}

/*
 * A RECLAIM frees with gen + 1, so its own retry (gen + 1 == generation) is
 * recognised as a repeat; the TTL scan frees with gen + 2, so a RECLAIM that
 * arrives after it is stale: the object may already serve another reply.
 */
static void rdmem_objpool_free(struct rdmem_objpool *p, uint32_t id, uint64_t gen_step)
{
	struct rdmem_objpool_obj *o = &p->objs[id];
	struct rdmem_objpool_class *k = &p->cls[o->cls];

	o->generation += gen_step;
	o->ready_ns = 0;
	k->free_ids[k->nfree++] = id;
	p->st.live--;
	p->st.used_bytes -= k->size;
}

int rdmem_objpool_reclaim(struct rdmem_objpool *p, const struct rdmem_objref *ref)
{
	struct rdmem_objpool_obj *o;

	if (ref->object_id >= p->nobjs) {
		p->st.stale++;
		return RDMEM_S_STALE;
	}
	o = &p->objs[ref->object_id];
	if (o->ready_ns && ref->generation == o->generation) {
		rdmem_objpool_free(p, ref->object_id, 1);
		p->st.reclaim++;
		return RDMEM_S_OK;
	}
	/* The RECLAIM we just honoured, sent again (a retry): nothing to do. */
	if (!o->ready_ns && ref->generation + 1 == o->generation) {
		p->st.repeat++;
		return RDMEM_S_OK;
	}
	p->st.stale++;
	return RDMEM_S_STALE;
}

uint32_t rdmem_objpool_scan(struct rdmem_objpool *p, uint64_t now_ns)
{
	uint64_t next = 0;
	uint32_t id, freed = 0;

	for (id = 0; id < p->nobjs; id++) {
		struct rdmem_objpool_obj *o = &p->objs[id];

		if (!o->ready_ns)
			continue;
		/* Not now_ns - ready_ns: the worker's round time may be older
		 * than the stamp of an object made in this very round (a fresh
		 * clock read), and the difference would wrap and free it at
		 * once, to be reused under the agent's READ (wrong bytes, OK). */
		if (now_ns > o->ready_ns + p->ttl_ns) {
			rdmem_objpool_free(p, id, 2);
			freed++;
		} else if (!next || o->ready_ns + p->ttl_ns + 1 < next) {
			next = o->ready_ns + p->ttl_ns + 1;
		}
	}
	p->next_expiry_ns = next;
	p->st.timeout += freed;
	return freed;
}
