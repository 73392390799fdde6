/* pool.c - a message pool's leases: taken on fresh memory, given back unmapped. */
#include "server/pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rdmem/util.h"

#define RDMEM_POOL_PAGE 4096ull

static uint64_t rdmem_pool_page_up(uint64_t n)
{
	return (n + RDMEM_POOL_PAGE - 1) / RDMEM_POOL_PAGE * RDMEM_POOL_PAGE;
}

/* Gives back every area mapped in mem (NULL ones are skipped). */
static void rdmem_pool_unmap(const struct rdmem_pool *p, struct rdmem_pool_mem *mem)
{
	int a;

	for (a = 0; a < RDMEM_POOL_AREAS; a++) {
		if (mem->area[a])
			rdmem_fab_free_shared(p->cfg.fabric, mem->area[a], p->area_bytes[a]);
		mem->area[a] = NULL;
	}
}

/* Sizes one lease's areas, each page-rounded: each is an allocation of its
 * own (fabric.h: a remote-access registration is one whole allocation). */
static void rdmem_pool_geometry(struct rdmem_pool *p)
{
	const struct rdmem_pool_config *c = &p->cfg;
	uint64_t *b = p->area_bytes;
	int a;

	b[RDMEM_POOL_REQ] =
	    rdmem_pool_page_up((uint64_t)c->lease_slots * rdmem_slot_stride(c->slot_bytes));
	b[RDMEM_POOL_OBJECTS] = rdmem_pool_page_up(rdmem_objpool_area_bytes(&c->obj));
	b[RDMEM_POOL_CTRL] = rdmem_pool_page_up(RDMEM_CTRL_BYTES);
	/* The reply staging has the response slots' shape: one gather entry
	 * carries a reply's descriptor and payload. */
	b[RDMEM_POOL_STAGING] =
	    rdmem_pool_page_up((uint64_t)c->lease_slots * rdmem_slot_stride(c->stage_bytes));
	p->lease_bytes = 0;
	for (a = 0; a < RDMEM_POOL_AREAS; a++)
		p->lease_bytes += b[a];
}

uint64_t rdmem_pool_lease_size(const struct rdmem_pool_config *cfg)
{
	struct rdmem_pool p = { .cfg = *cfg };

	rdmem_pool_geometry(&p);
	return p.lease_bytes;
}

int rdmem_pool_create(const struct rdmem_pool_config *cfg, struct rdmem_pool **out)
{
	struct rdmem_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->cfg = *cfg;
	rdmem_pool_geometry(p);
	/* Memory comes per lease at take time: an idle lease costs nothing. */
	p->taken = calloc(cfg->leases, 1);
	p->mem = calloc(cfg->leases, sizeof(*p->mem));
	if (!p->taken || !p->mem) {
		free(p->taken);
		free(p->mem);
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

void rdmem_pool_destroy(struct rdmem_pool *p)
{
	uint32_t i;

	if (!p)
		return;
	/* Sessions give their leases back first; this only covers a leak. */
	for (i = 0; i < p->cfg.leases; i++)
		rdmem_pool_unmap(p, &p->mem[i]);
	pthread_mutex_destroy(&p->lock);
	free(p->mem);
	free(p->taken);
	free(p);
}

static void rdmem_pool_fill(const struct rdmem_pool *p, uint32_t i, uint8_t *const *m,
			    struct rdmem_lease *l)
{
	l->index = i;
	l->req = m[RDMEM_POOL_REQ];
	l->objects = m[RDMEM_POOL_OBJECTS];
	l->ctrl = m[RDMEM_POOL_CTRL];
	l->staging = m[RDMEM_POOL_STAGING];
	l->req_len = p->area_bytes[RDMEM_POOL_REQ];
	l->objects_len = p->area_bytes[RDMEM_POOL_OBJECTS];
	l->staging_len = p->area_bytes[RDMEM_POOL_STAGING];
}

/* Marks a free lease taken; returns its index, or cfg.leases when none is free. */
static uint32_t rdmem_pool_claim(struct rdmem_pool *p)
{
	uint32_t i;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < p->cfg.leases && p->taken[i]; i++)
		;
	if (i < p->cfg.leases) {
		p->taken[i] = 1;
		p->ntaken++;
	}
	pthread_mutex_unlock(&p->lock);
	return i;
}

/* Unmarks lease i; *mem gets the memory it held (all NULL if it was not taken). */
static void rdmem_pool_unclaim(struct rdmem_pool *p, uint32_t i, struct rdmem_pool_mem *mem)
{
	memset(mem, 0, sizeof(*mem));
	pthread_mutex_lock(&p->lock);
	if (i < p->cfg.leases && p->taken[i]) {
		*mem = p->mem[i];
		memset(&p->mem[i], 0, sizeof(p->mem[i]));
		p->taken[i] = 0;
		p->ntaken--;
	}
	pthread_mutex_unlock(&p->lock);
}

/* Fresh memory for each area of a lease: 0, or -ENOMEM with none kept. */
static int rdmem_pool_map(const struct rdmem_pool *p, struct rdmem_pool_mem *mem)
{
	int a;

	for (a = 0; a < RDMEM_POOL_AREAS; a++) {
		mem->area[a] = rdmem_fab_alloc_shared(p->cfg.fabric, p->area_bytes[a]);
		if (!mem->area[a]) {
			rdmem_pool_unmap(p, mem);
			return -ENOMEM;
		}
	}
	return 0;
}

int rdmem_pool_take(struct rdmem_pool *p, struct rdmem_lease *out)
{
	uint32_t i = rdmem_pool_claim(p);
	struct rdmem_pool_mem mem = { { NULL } };

	if (i == p->cfg.leases)
		return -EBUSY;
	/* Fresh memory, never the last tenant's: see pool.h. Mapped outside the
	 * lock (syscalls); the lease is ours already. */
	if (rdmem_pool_map(p, &mem) < 0) {
		rdmem_pool_unclaim(p, i, &mem);
		return -ENOMEM;
	}
	pthread_mutex_lock(&p->lock);
	p->mem[i] = mem;
	pthread_mutex_unlock(&p->lock);
	rdmem_pool_fill(p, i, mem.area, out);
	return 0;
}

void rdmem_pool_give(struct rdmem_pool *p, const struct rdmem_lease *l)
{
	struct rdmem_pool_mem mem;

	rdmem_pool_unclaim(p, l->index, &mem);
	rdmem_pool_unmap(p, &mem);
}

uint32_t rdmem_pool_taken(struct rdmem_pool *p)
{
	uint32_t n;

	pthread_mutex_lock(&p->lock);
	n = p->ntaken;
	pthread_mutex_unlock(&p->lock);
	return n;
}
