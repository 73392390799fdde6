/* pool.c - leases carved out of one message-pool allocation. */
#include "server/pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rdmem/layout.h"
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
	uint64_t desc = rdmem_pool_page_up((uint64_t)c->lease_slots * RDMEM_DESC_SIZE);
	uint64_t payload = rdmem_pool_page_up((uint64_t)c->lease_slots * c->slot_bytes);
	uint64_t objects = rdmem_pool_page_up(rdmem_objpool_area_bytes(&c->obj));
	uint64_t staging =
	    rdmem_pool_page_up((uint64_t)c->lease_slots * (RDMEM_DESC_SIZE + c->stage_bytes));

	p->off_payload = desc;
	p->off_objects = p->off_payload + payload;
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
	p->len = p->lease_bytes * cfg->leases;
	p->taken = calloc(cfg->leases, 1);
	/* Pages are touched only as leases are used: an idle lease costs address space. */
	p->base = p->taken ? rdmem_fab_alloc_shared(cfg->fabric, p->len) : NULL;
	if (!p->base) {
		free(p->taken);
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

void rdmem_pool_destroy(struct rdmem_pool *p)
{
	if (!p)
		return;
	rdmem_fab_free_shared(p->cfg.fabric, p->base, p->len);
	pthread_mutex_destroy(&p->lock);
	free(p->taken);
	free(p);
}

static void rdmem_pool_fill(const struct rdmem_pool *p, uint32_t i, struct rdmem_lease *l)
{
	uint8_t *b = p->base + (uint64_t)i * p->lease_bytes;

	l->index = i;
	l->desc = b;
	l->payload = b + p->off_payload;
	l->objects = b + p->off_objects;
	l->ctrl = b + p->off_ctrl;
	l->staging = b + p->off_staging;
	l->desc_len = p->off_payload;
	l->payload_len = p->off_objects - p->off_payload;
	l->objects_len = p->off_ctrl - p->off_objects;
	l->staging_len = p->lease_bytes - p->off_staging;
}

int rdmem_pool_take(struct rdmem_pool *p, struct rdmem_lease *out)
{
	uint32_t i;
	int ret = -EBUSY;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < p->cfg.leases; i++) {
		if (!p->taken[i]) {
			p->taken[i] = 1;
			p->ntaken++;
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (ret == 0) {
		rdmem_pool_fill(p, i, out);
		/* A new session starts from a clean ring and control page. */
		memset(out->desc, 0, out->desc_len);
		memset(out->ctrl, 0, RDMEM_CTRL_BYTES);
	}
	return ret;
}

void rdmem_pool_give(struct rdmem_pool *p, const struct rdmem_lease *l)
{
	pthread_mutex_lock(&p->lock);
	if (l->index < p->cfg.leases && p->taken[l->index]) {
		p->taken[l->index] = 0;
		p->ntaken--;
	}
	pthread_mutex_unlock(&p->lock);
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
	return p->off_staging; /* descriptors, payloads, objects and the control page */
}
