/* pool.c - a message pool's leases: taken on fresh memory, given back unmapped. */
#include "server/pool.h"

#include <errno.h>
#include <stdlib.h>

#include "rdmem/util.h"

#define RDMEM_POOL_PAGE 4096ull

static uint64_t rdmem_pool_page_up(uint64_t n)
{
	return (n + RDMEM_POOL_PAGE - 1) / RDMEM_POOL_PAGE * RDMEM_POOL_PAGE;
}

/* Lays out one lease: every area page-aligned, so each registers on its own. */
static void rdmem_pool_geometry(struct rdmem_pool *p)
{
	const struct rdmem_pool_config *c = &p->cfg;
	uint64_t req =
	    rdmem_pool_page_up((uint64_t)c->lease_slots * rdmem_slot_stride(c->slot_bytes));
	uint64_t objects = rdmem_pool_page_up(rdmem_objpool_area_bytes(&c->obj));
	/* The reply staging has the response slots' shape: one gather entry
	 * carries a reply's descriptor and payload. */
	uint64_t staging =
	    rdmem_pool_page_up((uint64_t)c->lease_slots * rdmem_slot_stride(c->stage_bytes));

	p->off_objects = req;
	p->off_ctrl = p->off_objects + objects;
	p->off_staging = p->off_ctrl + RDMEM_CTRL_BYTES;
	p->lease_bytes = p->off_staging + staging;
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
		if (p->mem[i])
			rdmem_fab_free_shared(p->cfg.fabric, p->mem[i], p->lease_bytes);
	pthread_mutex_destroy(&p->lock);
	free(p->mem);
	free(p->taken);
	free(p);
}

static void rdmem_pool_fill(const struct rdmem_pool *p, uint32_t i, uint8_t *b,
			    struct rdmem_lease *l)
{
	l->index = i;
	l->req = b;
	l->objects = b + p->off_objects;
	l->ctrl = b + p->off_ctrl;
	l->staging = b + p->off_staging;
	l->req_len = p->off_objects;
	l->objects_len = p->off_ctrl - p->off_objects;
	l->staging_len = p->lease_bytes - p->off_staging;
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

/* Unmarks lease i; returns the memory it held (NULL if it was not taken). */
static uint8_t *rdmem_pool_unclaim(struct rdmem_pool *p, uint32_t i)
{
	uint8_t *mem = NULL;

	pthread_mutex_lock(&p->lock);
	if (i < p->cfg.leases && p->taken[i]) {
		mem = p->mem[i];
		p->mem[i] = NULL;
		p->taken[i] = 0;
		p->ntaken--;
	}
	pthread_mutex_unlock(&p->lock);
	return mem;
}

int rdmem_pool_take(struct rdmem_pool *p, struct rdmem_lease *out)
{
	uint32_t i = rdmem_pool_claim(p);
	uint8_t *mem;

	if (i == p->cfg.leases)
		return -EBUSY;
	/* Fresh memory, never the last tenant's: see pool.h. Mapped outside the
	 * lock (a syscall); the lease is ours already. */
	mem = rdmem_fab_alloc_shared(p->cfg.fabric, p->lease_bytes);
	if (!mem) {
		rdmem_pool_unclaim(p, i);
		return -ENOMEM;
	}
	pthread_mutex_lock(&p->lock);
	p->mem[i] = mem;
	pthread_mutex_unlock(&p->lock);
	rdmem_pool_fill(p, i, mem, out);
	return 0;
}

void rdmem_pool_give(struct rdmem_pool *p, const struct rdmem_lease *l)
{
	uint8_t *mem = rdmem_pool_unclaim(p, l->index);

	if (mem)
		rdmem_fab_free_shared(p->cfg.fabric, mem, p->lease_bytes);
}

uint32_t rdmem_pool_taken(struct rdmem_pool *p)
{
	uint32_t n;

	pthread_mutex_lock(&p->lock);
	n = p->ntaken;
	pthread_mutex_unlock(&p->lock);
	return n;
}

uint64_t rdmem_pool_remote_bytes(const struct rdmem_pool *p)
{
	return p->off_staging; /* request slots, objects and the control page */
}
