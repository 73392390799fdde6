/* dedup.c - the per-agent windows of completed non-idempotent calls (see dedup.h).
 *
 * An agent's window is a ring of `window` entries indexed by call id: id i
 * lives in entry i % window, so the entry says exactly whether i is in the
 * window (it holds i), older than it (it holds a larger id), or new. Call
 * ids travel as 32 bits and are extended to 64 here against the highest id
 * seen, as RTP extends its sequence numbers: an agent's calls in flight span
 * far less than 2^31 ids.
 */
#include "server/dedup.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "rdmem/netaddr.h"
#include "rdmem/util.h"

enum { ENT_EMPTY = 0, ENT_RUNNING, ENT_DONE };

struct dedup_entry {
	uint64_t id; /* extended call id */
	struct rdmem_dedup_result res;
	uint8_t state;
};

/* Windows remembered per peer address; under the table lock. */
struct dedup_addr {
	char key[RDMEM_ADDR_GROUP_MAX];
	uint32_t n; /* 0: a free entry */
};

struct rdmem_dedup_agent {
	uint64_t agent_id;
	struct dedup_addr *addr;      /* of its first BIND; under the table lock */
	uint32_t refs;		      /* bound connections; under the table lock */
	atomic_uint_fast64_t last_ns; /* last bind, unbind or call: relaxed, a hint for expiry */
	atomic_uint ran;	      /* a tracked call completed: the window holds a result */
	pthread_mutex_t lock;	      /* guards what follows */
	pthread_cond_t cv;	      /* an entry left RUNNING */
	uint64_t high;		      /* highest extended id claimed */
	uint64_t floor;		      /* ids below: outcome unknown here */
	struct dedup_entry *ring;
	struct rdmem_dedup_agent *next;
};

struct rdmem_dedup {
	struct rdmem_dedup_config cfg;
	uint64_t instance;
	pthread_mutex_t lock; /* the agent list and refs */
	struct rdmem_dedup_agent *agents;
	uint32_t nagents;
	struct dedup_addr *addrs; /* max_agents entries: one per address at most */
	/* Statistics: relaxed, nothing is published through them. */
	atomic_uint_fast64_t binds, bind_refused, executed, replayed, waited, stale, expired;
};

static void dedup_count(atomic_uint_fast64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

int rdmem_dedup_create(const struct rdmem_dedup_config *cfg, struct rdmem_dedup **out)
{
	struct rdmem_dedup *d;

	if (cfg->window < RDMEM_DEDUP_MIN_WINDOW || cfg->window > RDMEM_DEDUP_MAX_WINDOW ||
	    (cfg->window & (cfg->window - 1)) || !cfg->max_agents ||
	    cfg->max_agents > RDMEM_DEDUP_MAX_AGENTS || !cfg->idle_ms)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d || !(d->addrs = calloc(cfg->max_agents, sizeof(*d->addrs)))) {
		free(d);
		return -ENOMEM;
	}
	d->cfg = *cfg;
	if (getrandom(&d->instance, sizeof(d->instance), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(d->instance))
		d->instance = rdmem_now_ns() ^ ((uint64_t)getpid() << 32);
	d->instance |= 1; /* 0 means "none" in a BIND */
	pthread_mutex_init(&d->lock, NULL);
	*out = d;
	return 0;
}

static void dedup_agent_free(struct rdmem_dedup_agent *a)
{
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->cv);
	free(a->ring);
	free(a);
}

void rdmem_dedup_destroy(struct rdmem_dedup *d)
{
	struct rdmem_dedup_agent *a;

	if (!d)
		return;
	while ((a = d->agents)) {
		d->agents = a->next;
		dedup_agent_free(a);
	}
	pthread_mutex_destroy(&d->lock);
	free(d->addrs);
	free(d);
}

const struct rdmem_dedup_config *rdmem_dedup_get_config(const struct rdmem_dedup *d)
{
	return &d->cfg;
}

uint64_t rdmem_dedup_instance(const struct rdmem_dedup *d)
{
	return d->instance;
}

static struct rdmem_dedup_agent *dedup_agent_new(struct rdmem_dedup *d, uint64_t agent_id,
						 uint32_t next_id)
{
	struct rdmem_dedup_agent *a = calloc(1, sizeof(*a));
	pthread_condattr_t ca;

	if (!a || !(a->ring = calloc(d->cfg.window, sizeof(*a->ring)))) {
		free(a);
		return NULL;
	}
	a->agent_id = agent_id;
	/* Extended ids start at 2^32 so the first ones extend without wrapping below 0. */
	a->high = (1ull << 32) + next_id - 1;
	a->floor = a->high + 1;
	pthread_mutex_init(&a->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cv, &ca);
	pthread_condattr_destroy(&ca);
	return a;
}

/* key's entry, or when create a free one taken for it; NULL if none. Under d->lock. */
static struct dedup_addr *dedup_addr(struct rdmem_dedup *d, const char *key, int create)
{
	struct dedup_addr *free_slot = NULL;
	uint32_t i;

	for (i = 0; i < d->cfg.max_agents; i++) {
		if (d->addrs[i].n && strcmp(d->addrs[i].key, key) == 0)
			return &d->addrs[i];
		if (!d->addrs[i].n && !free_slot)
			free_slot = &d->addrs[i];
	}
	if (free_slot && create)
		snprintf(free_slot->key, sizeof(free_slot->key), "%s", key);
	return create ? free_slot : NULL;
}

/*
 * How much a newcomer of address mine (holding m windows) would lose by
 * taking a's window, lowest first; -1: not at all (a connection is bound).
 * 0: a window with no completed call (losing it can only turn a retry's
 * run into STALE); 1: left longer ago than the grace (its agent's retries
 * have most likely ended); 2: its own address's, or an address holding two
 * more; 3: any other. Never refusing while a window can be taken: a
 * refused BIND leaves its connection's calls untracked, and a retry there
 * may run twice.
 */
static int dedup_cost(const struct rdmem_dedup *d, const struct rdmem_dedup_agent *a,
		      const struct dedup_addr *mine, uint32_t m, uint64_t now)
{
	/* Never past the idle expiry, which forgets it anyway. */
	uint64_t grace = RDMEM_MIN(RDMEM_DEDUP_GRACE_MS, d->cfg.idle_ms) * 1000000ull;
	uint64_t last = atomic_load_explicit(&a->last_ns, memory_order_relaxed);

	if (a->refs)
		return -1;
	/* relaxed: no call runs on a window without connections */
	if (!atomic_load_explicit(&a->ran, memory_order_relaxed))
		return 0;
	if (now > last && now - last > grace)
		return 1;
	return a->addr == mine || a->addr->n >= m + 2 ? 2 : 3;
}

/* The window a newcomer of address mine takes (dedup.h), or NULL when every
 * one has a connection. Under d->lock. */
static struct rdmem_dedup_agent **dedup_victim(struct rdmem_dedup *d, const struct dedup_addr *mine,
					       uint64_t now)
{
	struct rdmem_dedup_agent **pp, **best = NULL;
	uint32_t m = mine ? mine->n : 0;
	int best_cost = 4;

	for (pp = &d->agents; *pp; pp = &(*pp)->next) {
		const struct rdmem_dedup_agent *a = *pp, *b = best ? *best : NULL;
		int cost = dedup_cost(d, a, mine, m, now);

		if (cost < 0 || cost > best_cost)
			continue;
		/* Equal cost: the address holding the most, then least recently used. */
		if (!b || cost < best_cost || a->addr->n > b->addr->n ||
		    (a->addr->n == b->addr->n &&
		     atomic_load_explicit(&a->last_ns, memory_order_relaxed) <
			 atomic_load_explicit(&b->last_ns, memory_order_relaxed))) {
			best = pp;
			best_cost = cost;
		}
	}
	return best;
}

static void dedup_unlink(struct rdmem_dedup *d, struct rdmem_dedup_agent **pp)
{
	struct rdmem_dedup_agent *a = *pp;

	*pp = a->next;
	d->nagents--;
	a->addr->n--;
	dedup_count(&d->expired);
	rdmem_log_limited(RDMEM_LOG_INFO, "dedup: forgot agent %016llx",
			  (unsigned long long)a->agent_id);
	dedup_agent_free(a);
}

/* A window for a new agent of address key, under d->lock: 0, -ENOSPC or -ENOMEM. */
static int dedup_add(struct rdmem_dedup *d, uint64_t agent_id, uint32_t next_id, const char *key,
		     struct rdmem_dedup_agent **out)
{
	struct rdmem_dedup_agent *a, **victim;

	if (d->nagents >= d->cfg.max_agents) {
		victim = dedup_victim(d, dedup_addr(d, key, 0), rdmem_now_ns());
		if (!victim) {
			dedup_count(&d->bind_refused);
			return -ENOSPC;
		}
		dedup_unlink(d, victim);
	}
	a = dedup_agent_new(d, agent_id, next_id);
	if (!a)
		return -ENOMEM;
	a->addr = dedup_addr(d, key, 1); /* never NULL: fewer agents than entries now */
	a->addr->n++;
	a->next = d->agents;
	d->agents = a;
	d->nagents++;
	*out = a;
	return 0;
}

int rdmem_dedup_bind(struct rdmem_dedup *d, uint64_t agent_id, uint32_t next_id, const char *addr,
		     struct rdmem_dedup_agent **out)
{
	struct rdmem_dedup_agent *a;
	int ret;

	pthread_mutex_lock(&d->lock);
	for (a = d->agents; a && a->agent_id != agent_id; a = a->next)
		;
	if (!a && (ret = dedup_add(d, agent_id, next_id, addr ? addr : "", &a)) < 0) {
		pthread_mutex_unlock(&d->lock);
		return ret;
	}
	a->refs++;
	atomic_store_explicit(&a->last_ns, rdmem_now_ns(), memory_order_relaxed);
	pthread_mutex_unlock(&d->lock);
	dedup_count(&d->binds);
	*out = a;
	return 0;
}

void rdmem_dedup_unbind(struct rdmem_dedup *d, struct rdmem_dedup_agent *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&d->lock);
	a->refs--;
	atomic_store_explicit(&a->last_ns, rdmem_now_ns(), memory_order_relaxed);
	pthread_mutex_unlock(&d->lock);
}

/* The 64-bit id nearest to the highest seen whose low half is id. */
static uint64_t dedup_extend(uint64_t high, uint32_t id)
{
	return high + (uint64_t)(int64_t)(int32_t)(id - (uint32_t)high);
}

/* Waits (bounded) for a RUNNING entry to change; 0 when the deadline passed. */
static int dedup_wait(struct rdmem_dedup_agent *a, const struct timespec *until)
{
	return pthread_cond_timedwait(&a->cv, &a->lock, until) != ETIMEDOUT;
}

static enum rdmem_dedup_verdict dedup_lookup(struct rdmem_dedup *d, struct rdmem_dedup_agent *a,
					     uint64_t ext, struct rdmem_dedup_result *rec)
{
	struct dedup_entry *e = &a->ring[ext & (d->cfg.window - 1)];
	struct timespec until;
	int waited = 0;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += RDMEM_DEDUP_WAIT_MS / 1000;
	for (;;) {
		if (e->state != ENT_EMPTY && e->id > ext)
			return RDMEM_DEDUP_STALE; /* a call a window newer took its entry */
		if (e->state == ENT_DONE && e->id == ext) {
			*rec = e->res;
			return RDMEM_DEDUP_REPLAY;
		}
		if (e->state != ENT_RUNNING)
			break;
		/* Its own first run (or the call a window older) is running on
		 * another thread: it ends within one op's time. */
		if (!waited++)
			dedup_count(&d->waited);
		if (!dedup_wait(a, &until))
			return RDMEM_DEDUP_BUSY;
	}
	e->id = ext;
	e->state = ENT_RUNNING;
	if (ext > a->high)
		a->high = ext;
	return RDMEM_DEDUP_RUN;
}

enum rdmem_dedup_verdict rdmem_dedup_begin(struct rdmem_dedup *d, struct rdmem_dedup_agent *a,
					   uint32_t id, uint64_t *ext,
					   struct rdmem_dedup_result *rec)
{
	enum rdmem_dedup_verdict v;

	atomic_store_explicit(&a->last_ns, rdmem_now_ns(), memory_order_relaxed);
	pthread_mutex_lock(&a->lock);
	*ext = dedup_extend(a->high, id);
	v = *ext < a->floor ? RDMEM_DEDUP_STALE : dedup_lookup(d, a, *ext, rec);
	pthread_mutex_unlock(&a->lock);
	if (v == RDMEM_DEDUP_REPLAY)
		dedup_count(&d->replayed);
	else if (v == RDMEM_DEDUP_STALE)
		dedup_count(&d->stale);
	return v;
}

void rdmem_dedup_end(struct rdmem_dedup *d, struct rdmem_dedup_agent *a, uint64_t ext,
		     const struct rdmem_dedup_result *res)
{
	struct dedup_entry *e = &a->ring[ext & (d->cfg.window - 1)];

	pthread_mutex_lock(&a->lock);
	/* Nothing can take a RUNNING entry, so it is still ours. */
	if (e->id == ext && e->state == ENT_RUNNING) {
		e->res = *res;
		e->state = ENT_DONE;
		atomic_store_explicit(&a->ran, 1, memory_order_relaxed);
	}
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->lock);
	dedup_count(&d->executed);
}

void rdmem_dedup_expire(struct rdmem_dedup *d, uint64_t now_ns)
{
	uint64_t idle = (uint64_t)d->cfg.idle_ms * 1000000ull;
	struct rdmem_dedup_agent **pp;

	pthread_mutex_lock(&d->lock);
	pp = &d->agents;
	while (*pp) {
		uint64_t last = atomic_load_explicit(&(*pp)->last_ns, memory_order_relaxed);

		if (!(*pp)->refs && now_ns > last && now_ns - last > idle)
			dedup_unlink(d, pp);
		else
			pp = &(*pp)->next;
	}
	pthread_mutex_unlock(&d->lock);
}

uint64_t rdmem_dedup_next_expiry(struct rdmem_dedup *d)
{
	uint64_t idle = (uint64_t)d->cfg.idle_ms * 1000000ull, next = UINT64_MAX;
	struct rdmem_dedup_agent *a;

	pthread_mutex_lock(&d->lock);
	for (a = d->agents; a; a = a->next) {
		/* Forgotten once idle > idle_ms: + 1. Read once (RDMEM_MIN
		 * evaluates twice; a call may store it meanwhile). */
		uint64_t t = atomic_load_explicit(&a->last_ns, memory_order_relaxed) + idle + 1;

		if (!a->refs)
			next = RDMEM_MIN(next, t);
	}
	pthread_mutex_unlock(&d->lock);
	return next;
}

void rdmem_dedup_get_stats(struct rdmem_dedup *d, struct rdmem_dedup_stats *out)
{
#define DEDUP_LD(f) out->f = atomic_load_explicit(&d->f, memory_order_relaxed)
	pthread_mutex_lock(&d->lock);
	out->agents = d->nagents;
	pthread_mutex_unlock(&d->lock);
	out->bytes = out->agents * (sizeof(struct rdmem_dedup_agent) +
				    (uint64_t)d->cfg.window * sizeof(struct dedup_entry));
	DEDUP_LD(binds);
	DEDUP_LD(bind_refused);
	DEDUP_LD(executed);
	DEDUP_LD(replayed);
	DEDUP_LD(waited);
	DEDUP_LD(stale);
	DEDUP_LD(expired);
#undef DEDUP_LD
}
