/* pin.c - the agent's budget of pinned client memory (agent/pin.h). */
#include "agent/pin.h"

#include <errno.h>
#include <stdlib.h>

#include "rdmem/util.h"

int rdmem_pin_init(struct rdmem_pin_budget *b, uint32_t clients, uint64_t max_client,
		   uint64_t max_total)
{
	uint32_t c;

	b->max_client = max_client;
	b->max_total = max_total;
	b->clients = clients;
	atomic_init(&b->total, 0);
	atomic_init(&b->refused_client, 0);
	atomic_init(&b->refused_total, 0);
	atomic_init(&b->shed_gen, 0);
	atomic_init(&b->shed_ns, 0);
	atomic_init(&b->waker, NULL);
	b->client = calloc(clients ? clients : 1, sizeof(*b->client));
	if (!b->client)
		return -ENOMEM;
	for (c = 0; c < clients; c++)
		atomic_init(&b->client[c], 0);
	return 0;
}

void rdmem_pin_fini(struct rdmem_pin_budget *b)
{
	free((void *)b->client);
	b->client = NULL;
}

/* Adds bytes to *count unless that passes limit. relaxed: the count orders
 * nothing else; each CAS alone keeps it within the limit. */
static int rdmem_pin_add(_Atomic uint64_t *count, uint64_t bytes, uint64_t limit)
{
	uint64_t cur = atomic_load_explicit(count, memory_order_relaxed);

	do {
		if (bytes > limit || cur > limit - bytes)
			return -1;
	} while (!atomic_compare_exchange_weak_explicit(
	    count, &cur, cur + bytes, memory_order_relaxed, memory_order_relaxed));
	return 0;
}

enum rdmem_pin_refusal rdmem_pin_charge(struct rdmem_pin_budget *b, uint32_t client, uint64_t bytes)
{
	if (client >= b->clients || rdmem_pin_add(&b->client[client], bytes, b->max_client)) {
		atomic_fetch_add_explicit(&b->refused_client, 1, memory_order_relaxed);
		return RDMEM_PIN_CLIENT;
	}
	if (rdmem_pin_add(&b->total, bytes, b->max_total)) {
		atomic_fetch_sub_explicit(&b->client[client], bytes, memory_order_relaxed);
		atomic_fetch_add_explicit(&b->refused_total, 1, memory_order_relaxed);
		return RDMEM_PIN_TOTAL;
	}
	return RDMEM_PIN_OK;
}

void rdmem_pin_release(struct rdmem_pin_budget *b, uint32_t client, uint64_t bytes)
{
	if (client >= b->clients)
		return;
	atomic_fetch_sub_explicit(&b->total, bytes, memory_order_relaxed);
	atomic_fetch_sub_explicit(&b->client[client], bytes, memory_order_relaxed);
}

void rdmem_pin_set_waker(struct rdmem_pin_budget *b, struct rdmem_pin_waker *w)
{
	/* Release: w's fields are set before a session can load it. */
	atomic_store_explicit(&b->waker, w, memory_order_release);
}

void rdmem_pin_ask_shed(struct rdmem_pin_budget *b)
{
	/* relaxed: a rate limit; a lost race only skips or adds one wake. */
	uint64_t now = rdmem_now_ns(),
		 last = atomic_load_explicit(&b->shed_ns, memory_order_relaxed);
	struct rdmem_pin_waker *w;

	if (now - last < RDMEM_PIN_SHED_NS ||
	    !atomic_compare_exchange_strong_explicit(&b->shed_ns, &last, now, memory_order_relaxed,
						     memory_order_relaxed))
		return;

	/* Release: the asker's own drops come before; a woken link that sees
	 * the new generation sheds (it needs nothing else of ours). */
	atomic_fetch_add_explicit(&b->shed_gen, 1, memory_order_release);
	/* Acquire: pairs with the release store in rdmem_pin_set_waker(). */
	w = atomic_load_explicit(&b->waker, memory_order_acquire);
	if (w)
		w->fn(w->ctx);
}
