/* pin.h - the agent's budget of pinned client memory.
 *
 * Over verbs a registration pins every page it covers: the pages cannot be
 * swapped or reclaimed while it lives, and they count against the locked-
 * memory limit. The agent registers a client's slot payload (one slot at a
 * time, at the slot's first call that moves a large payload with no copy;
 * agent/link.c) and charges it here first. Two limits hold at every instant:
 * what one client entry's registrations cover (--max-client-mem) and what
 * all of them cover (--max-total-mem). A registration of the same slot on
 * two servers' connections counts twice, as the kernel counts it.
 *
 * Every session thread charges and releases, so the counts are atomics; a
 * charge is a CAS loop that never lets either count pass its limit, not
 * even for an instant, so a reader sees a true bound.
 */
#ifndef RDMEM_AGENT_PIN_H
#define RDMEM_AGENT_PIN_H

#include <stdatomic.h>
#include <stdint.h>

/* Range of both flags: 0 (never pin client memory: large payloads are
 * copied over TCP) to 1 TiB. */
#define RDMEM_PIN_MAX_LIMIT (1ull << 40)
#define RDMEM_PIN_SHED_NS   1000000ull /* rdmem_pin_ask_shed(): one wake a ms */

/* Wakes every link's owner (the router's sessions) to let go of its idle
 * registrations: a link can only evict its own, and an idle one sleeps. */
struct rdmem_pin_waker {
	void (*fn)(void *ctx);
	void *ctx;
};

struct rdmem_pin_budget {
	uint64_t max_client; /* --max-client-mem */
	uint64_t max_total;  /* --max-total-mem */
	uint32_t clients;
	_Atomic uint64_t total;
	_Atomic uint64_t *client; /* clients entries */
	_Atomic uint64_t refused_client, refused_total;
	_Atomic uint64_t shed_gen; /* bumped by each rdmem_pin_ask_shed() */
	_Atomic uint64_t shed_ns;  /* when the last ask woke the links */
	_Atomic(struct rdmem_pin_waker *) waker;
};

enum rdmem_pin_refusal {
	RDMEM_PIN_OK = 0,
	RDMEM_PIN_CLIENT = 1, /* the client's own limit */
	RDMEM_PIN_TOTAL = 2,  /* all clients' limit */
};

int rdmem_pin_init(struct rdmem_pin_budget *b, uint32_t clients, uint64_t max_client,
		   uint64_t max_total);
void rdmem_pin_fini(struct rdmem_pin_budget *b);

/* Charges bytes to client: RDMEM_PIN_OK, or which limit refused (nothing
 * charged then). A client out of range is refused as over its own limit. */
enum rdmem_pin_refusal rdmem_pin_charge(struct rdmem_pin_budget *b, uint32_t client,
					uint64_t bytes);
/* Gives back what a charge of bytes to client took. */
void rdmem_pin_release(struct rdmem_pin_budget *b, uint32_t client, uint64_t bytes);

/* Sets (or, NULL, clears) who wakes the links; w outlives its use. */
void rdmem_pin_set_waker(struct rdmem_pin_budget *b, struct rdmem_pin_waker *w);
/* A refused charge that found nothing idle on its own link: every link lets
 * go of its idle registrations (each sees a new rdmem_pin_shed_gen()). At
 * most one ask a millisecond wakes the links: one pass of each frees all
 * that a burst of refusals could ask for. */
void rdmem_pin_ask_shed(struct rdmem_pin_budget *b);
/* True when no registration of bytes can ever fit (a limit below it). */
static inline int rdmem_pin_never_fits(const struct rdmem_pin_budget *b, uint64_t bytes)
{
	return bytes > b->max_client || bytes > b->max_total;
}

static inline uint64_t rdmem_pin_shed_gen(struct rdmem_pin_budget *b)
{
	/* Acquire: pairs with the release increment in rdmem_pin_ask_shed(). */
	return atomic_load_explicit(&b->shed_gen, memory_order_acquire);
}

static inline uint64_t rdmem_pin_total(const struct rdmem_pin_budget *b)
{
	/* relaxed: a gauge for stats; no data is published through it. */
	return atomic_load_explicit(&b->total, memory_order_relaxed);
}

#endif
