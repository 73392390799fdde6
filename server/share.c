/* share.c - --max-sessions shared among peer addresses (see share.h).
 *
 * When the server is full, a peer whose address holds at least two sessions
 * fewer than the address holding the most gets a place from it: that
 * address's idlest session is told to end (its worker closes it at the next
 * sweep), and the listener parks the peer's connect request until the place
 * is free, so nobody else's dial takes it first. Only a peer that redialed
 * evicts (a connect from an address that never comes back costs nobody a
 * session), and an address at most once per RDMEM_SHARE_COOLDOWN_NS. When a
 * session that never sent can be reclaimed instead, the peer is parked for
 * that place and nobody is evicted.
 */
#include "server/share.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmem/util.h"

/* Refused addresses remembered; a redial between these counts as one. A
 * claim younger than REDIAL_MAX is never replaced: a flood of dials from
 * fresh addresses (1,024 in 5 s) can keep new ones out, not erase one. */
#define RDMEM_SHARE_CLAIMS	  1024
#define RDMEM_SHARE_REDIAL_MIN_NS 20000000ull	/* not the same burst */
#define RDMEM_SHARE_REDIAL_MAX_NS 5000000000ull /* the agent's backoff is 2 s at most */
/* An address that made a place waits this long before it may make another,
 * and at most COOLDOWNS addresses wait at once: evictions are at most one
 * per address per 10 s and 6.4 a second in all. Without it one address
 * dialing twice and dropping each place it got closed 18 sessions a second. */
#define RDMEM_SHARE_COOLDOWNS	64
#define RDMEM_SHARE_COOLDOWN_NS 10000000000ull

/* Sessions open from one address; a session's close decrements n. */
struct share_addr {
	char key[RDMEM_SHARE_KEY];
	atomic_uint n;
	/* This address's sessions opened before this that never sent are
	 * reclaimed: set when the address is at --max-sessions-per-addr. */
	atomic_uint_fast64_t reclaim_before_ns;
};

/* An address and when it was first refused. */
struct share_mark {
	char key[RDMEM_SHARE_KEY];
	uint64_t ns;
};

struct rdmem_share {
	uint32_t max_sessions, max_per_addr;
	uint64_t grace_ns;
	struct share_addr *addrs;	    /* max_sessions: enough for every session */
	struct rdmem_session_guard *guards; /* max_sessions: one per open session */
	uint32_t *staying;		    /* scratch, per addrs entry (share_make_room) */
	struct share_mark claims[RDMEM_SHARE_CLAIMS];
	struct share_mark cooldowns[RDMEM_SHARE_COOLDOWNS]; /* ns: when it ends */
	/* Sessions opened before this that never sent are reclaimed (session.h). */
	atomic_uint_fast64_t reclaim_before_ns;
};

int rdmem_share_create(uint32_t max_sessions, uint32_t max_per_addr, uint32_t grace_ms,
		       struct rdmem_share **out)
{
	struct rdmem_share *sh = calloc(1, sizeof(*sh));

	if (!sh)
		return -ENOMEM;
	sh->max_sessions = max_sessions;
	sh->max_per_addr = max_per_addr ? max_per_addr : max_sessions;
	sh->grace_ns = (uint64_t)(grace_ms ? grace_ms : 5000) * 1000000ull;
	sh->addrs = calloc(max_sessions, sizeof(*sh->addrs));
	sh->guards = calloc(max_sessions, sizeof(*sh->guards));
	sh->staying = calloc(max_sessions, sizeof(*sh->staying));
	if (!sh->addrs || !sh->guards || !sh->staying) {
		rdmem_share_destroy(sh);
		return -ENOMEM;
	}
	*out = sh;
	return 0;
}

void rdmem_share_destroy(struct rdmem_share *sh)
{
	if (!sh)
		return;
	free(sh->addrs);
	free(sh->guards);
	free(sh->staying);
	free(sh);
}

/* key's entry, or when create a free one taken for it; NULL if none. */
static struct share_addr *share_addr(struct rdmem_share *sh, const char *key, int create)
{
	struct share_addr *free_slot = NULL;
	uint32_t i;

	for (i = 0; i < sh->max_sessions; i++) {
		struct share_addr *a = &sh->addrs[i];
		/* acquire: pairs with the release decrement in rdmem_session_close */
		unsigned n = atomic_load_explicit(&a->n, memory_order_acquire);

		if (n && strcmp(a->key, key) == 0)
			return a;
		if (!n && !free_slot)
			free_slot = a;
	}
	if (free_slot && create) {
		snprintf(free_slot->key, sizeof(free_slot->key), "%s", key);
		/* relaxed: no session points at a free entry (n is 0) */
		atomic_store_explicit(&free_slot->reclaim_before_ns, 0, memory_order_relaxed);
	}
	return create ? free_slot : NULL;
}

/* acquire: pairs with the release store of used in rdmem_session_close */
static int share_used(const struct rdmem_session_guard *g)
{
	return atomic_load_explicit(&g->used, memory_order_acquire) != 0;
}

static struct rdmem_session_guard *share_free_guard(struct rdmem_share *sh)
{
	uint32_t i;

	for (i = 0; i < sh->max_sessions; i++)
		if (!share_used(&sh->guards[i]))
			return &sh->guards[i];
	return NULL;
}

/* 1 when key was refused before, between REDIAL_MIN and REDIAL_MAX ago (a
 * peer that redials: the claim is used up); else remembers this refusal. */
static int share_redialed(struct rdmem_share *sh, const char *key, uint64_t now)
{
	struct share_mark *m = NULL, *oldest = &sh->claims[0];
	uint32_t i;

	for (i = 0; i < RDMEM_SHARE_CLAIMS && !m; i++) {
		if (sh->claims[i].ns && strcmp(sh->claims[i].key, key) == 0)
			m = &sh->claims[i];
		else if (sh->claims[i].ns < oldest->ns)
			oldest = &sh->claims[i];
	}
	if (m && now - m->ns < RDMEM_SHARE_REDIAL_MIN_NS)
		return 0;
	if (m && now - m->ns <= RDMEM_SHARE_REDIAL_MAX_NS) {
		m->ns = 0;
		return 1;
	}
	if (!m && oldest->ns && now - oldest->ns <= RDMEM_SHARE_REDIAL_MAX_NS)
		return 0; /* every claim is young: a flood; keep them */
	m = m ? m : oldest;
	snprintf(m->key, sizeof(m->key), "%s", key);
	m->ns = now;
	return 0;
}

/* A session that never sent, open longer than the grace: the reclaim the
 * refusal starts frees a place without closing a session in use. */
static int share_reclaimable(const struct rdmem_share *sh, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < sh->max_sessions; i++) {
		const struct rdmem_session_guard *g = &sh->guards[i];

		/* relaxed: a flag the worker sets once, nothing rides on it */
		if (share_used(g) && !atomic_load_explicit(&g->sent, memory_order_relaxed) &&
		    g->opened_ns + sh->grace_ns < now)
			return 1;
	}
	return 0;
}

static uint32_t share_index(const struct rdmem_share *sh, const atomic_uint *n)
{
	return (uint32_t)((const struct share_addr *)((const char *)n -
						      offsetof(struct share_addr, n)) -
			  sh->addrs);
}

/* sh->staying[i]: sessions of address i not told to end yet. */
static void share_count_staying(struct rdmem_share *sh)
{
	uint32_t i;

	memset(sh->staying, 0, sh->max_sessions * sizeof(*sh->staying));
	for (i = 0; i < sh->max_sessions; i++) {
		const struct rdmem_session_guard *g = &sh->guards[i];

		if (share_used(g) && !atomic_load_explicit(&g->evict, memory_order_relaxed))
			sh->staying[share_index(sh, g->addr_n)]++;
	}
}

/* The staying session of address i that was quiet longest. */
static struct rdmem_session_guard *share_idlest(struct rdmem_share *sh, uint32_t i)
{
	struct rdmem_session_guard *best = NULL;
	uint64_t best_ns = UINT64_MAX;
	uint32_t k;

	for (k = 0; k < sh->max_sessions; k++) {
		struct rdmem_session_guard *g = &sh->guards[k];
		/* relaxed: a time the worker stores, compared only */
		uint64_t t = atomic_load_explicit(&g->heard_ns, memory_order_relaxed);

		if (share_used(g) && !atomic_load_explicit(&g->evict, memory_order_relaxed) &&
		    share_index(sh, g->addr_n) == i && t < best_ns) {
			best = g;
			best_ns = t;
		}
	}
	return best;
}

/* key's cooldown entry when it may make a place now (a free one taken for
 * it), NULL when it made one within RDMEM_SHARE_COOLDOWN_NS or every entry
 * is taken. */
static struct share_mark *share_cooldown(struct rdmem_share *sh, const char *key, uint64_t now)
{
	struct share_mark *free_mark = NULL;
	uint32_t i;

	for (i = 0; i < RDMEM_SHARE_COOLDOWNS; i++) {
		struct share_mark *m = &sh->cooldowns[i];

		if (m->ns <= now)
			free_mark = free_mark ? free_mark : m;
		else if (strcmp(m->key, key) == 0)
			return NULL;
	}
	return free_mark;
}

/* Tells the idlest session of the address holding the most to end, when it
 * holds at least two more than key's (so no two addresses trade a place
 * back and forth) and key may make a place now. 1 when it did. */
static int share_make_room(struct rdmem_share *sh, const char *key, uint64_t now)
{
	struct share_mark *cool = share_cooldown(sh, key, now);
	struct share_addr *mine = share_addr(sh, key, 0);
	struct rdmem_session_guard *victim;
	uint32_t i, top = UINT32_MAX, m;

	if (!cool)
		return 0;
	share_count_staying(sh);
	m = mine ? sh->staying[mine - sh->addrs] : 0;
	for (i = 0; i < sh->max_sessions; i++)
		if (&sh->addrs[i] != mine && sh->staying[i] &&
		    (top == UINT32_MAX || sh->staying[i] > sh->staying[top]))
			top = i;
	if (top == UINT32_MAX || sh->staying[top] < m + 2 || !(victim = share_idlest(sh, top)))
		return 0;
	/* relaxed: the worker acts on the flag alone; the caller's nudge wakes it */
	atomic_store_explicit(&victim->evict, 1, memory_order_relaxed);
	snprintf(cool->key, sizeof(cool->key), "%s", key);
	cool->ns = now + RDMEM_SHARE_COOLDOWN_NS;
	rdmem_log_limited(RDMEM_LOG_INFO,
			  "sessions full: %s holds %u of them, the connecting %s %u: closing its "
			  "idlest session",
			  sh->addrs[top].key, sh->staying[top], key, m);
	return 1;
}

/* Full (the table's time) or an address at its limit (that address's):
 * sessions older than the grace that never sent are reclaimed. */
static void share_pressure(struct rdmem_share *sh, atomic_uint_fast64_t *before, uint64_t now)
{
	/* relaxed: a time the workers compare with, no data rides on it */
	atomic_store_explicit(before, now > sh->grace_ns ? now - sh->grace_ns : 0,
			      memory_order_relaxed);
}

enum rdmem_share_verdict rdmem_share_admit(struct rdmem_share *sh, const char *key, uint32_t open,
					   int can_park, uint64_t now)
{
	struct share_addr *a = share_addr(sh, key, 0);

	/* At its own limit, an address gets no place, made or free. Its
	 * sessions that never sent may be a hog sharing the address (a NAT)
	 * with this peer: reclaimable, as when full; other addresses' are not
	 * (the server is not full for them). */
	if (a && atomic_load_explicit(&a->n, memory_order_relaxed) >= sh->max_per_addr) {
		share_pressure(sh, &a->reclaim_before_ns, now);
		return RDMEM_SHARE_ADDR;
	}
	if (open >= sh->max_sessions) {
		share_pressure(sh, &sh->reclaim_before_ns, now);
		if (can_park && share_redialed(sh, key, now) &&
		    (share_reclaimable(sh, now) || share_make_room(sh, key, now)))
			return RDMEM_SHARE_PARK;
		return RDMEM_SHARE_FULL;
	}
	/* Fewer than max_sessions open: an address entry is free (attach
	 * takes it). Sessions count down after their close gives the guard
	 * back (worker.c's release, our acquire): CLOSING is a safety net. */
	return share_free_guard(sh) ? RDMEM_SHARE_OPEN : RDMEM_SHARE_CLOSING;
}

struct rdmem_session_guard *rdmem_share_attach(struct rdmem_share *sh, const char *key,
					       uint64_t now)
{
	struct share_addr *a = share_addr(sh, key, 1);
	struct rdmem_session_guard *g = share_free_guard(sh);

	if (!a || !g)
		return NULL;
	atomic_fetch_add_explicit(&a->n, 1, memory_order_relaxed);
	g->addr_n = &a->n;
	g->reclaim_before_ns = &sh->reclaim_before_ns;
	g->addr_reclaim_before_ns = &a->reclaim_before_ns;
	g->opened_ns = now;
	/* relaxed: the worker gets the session (and g) through
	 * rdmem_workers_add's hand-over, which orders these stores */
	atomic_store_explicit(&g->heard_ns, now, memory_order_relaxed);
	atomic_store_explicit(&g->sent, 0, memory_order_relaxed);
	atomic_store_explicit(&g->evict, 0, memory_order_relaxed);
	atomic_store_explicit(&g->used, 1, memory_order_relaxed);
	return g;
}
