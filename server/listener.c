/* listener.c - the RDMA listener thread of rdmem-server.
 *
 * It takes connect requests, checks the agent's private data (and proof),
 * refuses clearly when the server is full, opens a session on a lease of the
 * message pool and hands it to a worker. Workers close sessions whose agent
 * left, and the lease goes back, so one agent's failure frees only its own.
 */
#include "server/listener.h"

#include <errno.h>
#include <stdatomic.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fabric/dataplane.h"
#include "rdmem/netaddr.h"
#include "rdmem/util.h"
#include "server/pool.h"
#include "server/worker.h"

#define RDMEM_ADDR_KEY		RDMEM_ADDR_GROUP_MAX
#define RDMEM_LISTENER_NUDGE_NS 10000000ull /* 10 ms */
/* Places held at once for newcomers an eviction made room for, and how
 * long: the agent redials at most 2 s apart (agent/session.c). */
#define RDMEM_LISTENER_HOLDS   8
#define RDMEM_LISTENER_HOLD_NS 3000000000ull

/* Sessions open from one peer address (--max-sessions-per-addr). The
 * listener alone assigns keys; a session's close decrements n. */
struct rdmem_addr_count {
	char key[RDMEM_ADDR_KEY];
	atomic_uint n;
};

/* A place an eviction made for a peer of address key, kept for it until
 * `until` so that the evicted address's own redial cannot take it back. */
struct rdmem_listener_hold {
	char key[RDMEM_ADDR_KEY];
	uint64_t until;
};

struct rdmem_listener_thread {
	const struct rdmem_rdma_config *cfg;
	struct rdmem_service *svc;
	struct rdmem_listener *l;
	struct rdmem_pool *pool; /* NULL: each session takes a pool of its own */
	struct rdmem_workers *workers;
	uint32_t next_id;
	struct rdmem_addr_count *addrs;	    /* max_sessions entries: enough for every session */
	struct rdmem_session_guard *guards; /* max_sessions entries: one per open session */
	struct rdmem_listener_hold holds[RDMEM_LISTENER_HOLDS];
	/* Sessions opened before this that never sent are reclaimed (see session.h). */
	atomic_uint_fast64_t reclaim_before_ns;
	uint64_t nudged_ns; /* the workers' last nudge (listener thread only) */
	int stop_efd;
	pthread_t thread;
};

static struct rdmem_fab_attr rdmem_listener_attr(const struct rdmem_rdma_config *cfg)
{
	/* The WRs a slot's reply may have in flight (RDMEM_SESSION_WRS_PER_SLOT). */
	struct rdmem_fab_attr a = { .max_send_wr = RDMEM_SESSION_WRS_PER_SLOT * cfg->ring_slots +
						   RDMEM_SESSION_WR_SPARE,
				    .max_recv_wr = cfg->ring_slots + RDMEM_SESSION_RECV_BATCH,
				    .max_inline = RDMEM_DP_INLINE,
				    .signal_every = 64 };

	return a;
}

static void rdmem_listener_refuse(struct rdmem_conn *c, uint16_t status, const char *why)
{
	struct rdmem_xchg_reject r = { RDMEM_XCHG_MAGIC, status, 0, { 0 } };

	snprintf(r.reason, sizeof(r.reason), "%s", why);
	rdmem_session_reject(c, &r);
}

/* The peer's address group (include/rdmem/netaddr.h: an IPv6 /64 is one
 * peer) from its name without the port (verbs "ip:port", "[ip6]:port"; shm
 * names the peer process, kept whole). */
static void rdmem_listener_addr_key(struct rdmem_conn *c, char *key)
{
	const char *peer = rdmem_fab_peer(c);
	size_t n = strlen(peer), end = n;
	char host[RDMEM_ADDR_KEY];

	while (end && peer[end - 1] >= '0' && peer[end - 1] <= '9')
		end--;
	if (end && end < n && peer[end - 1] == ':')
		n = end - 1;
	snprintf(host, sizeof(host), "%.*s", (int)n, peer);
	rdmem_addr_group(host, key, RDMEM_ADDR_KEY);
}

/* The entry counting key's sessions (a free one when none), or NULL. */
static struct rdmem_addr_count *rdmem_listener_addr(struct rdmem_listener_thread *lt,
						    const char *key)
{
	struct rdmem_addr_count *free_slot = NULL;
	uint32_t i;

	for (i = 0; i < lt->cfg->max_sessions; i++) {
		struct rdmem_addr_count *a = &lt->addrs[i];
		/* acquire: pairs with the release decrement in rdmem_session_close */
		unsigned n = atomic_load_explicit(&a->n, memory_order_acquire);

		if (n && strcmp(a->key, key) == 0)
			return a;
		if (!n && !free_slot)
			free_slot = a;
	}
	if (free_slot)
		snprintf(free_slot->key, sizeof(free_slot->key), "%s", key);
	return free_slot;
}

/* Full: sessions older than --session-grace-ms that never sent are reclaimed. */
static void rdmem_listener_pressure(struct rdmem_listener_thread *lt)
{
	uint64_t grace = (uint64_t)(lt->cfg->grace_ms ? lt->cfg->grace_ms : 5000) * 1000000ull;
	uint64_t now = rdmem_now_ns();

	/* relaxed: a time the workers compare with, no data rides on it */
	atomic_store_explicit(&lt->reclaim_before_ns, now > grace ? now - grace : 0,
			      memory_order_relaxed);
	/* Sleeping workers look at their silent sessions now, not at a tick;
	 * at most every RDMEM_LISTENER_NUDGE_NS, so a flood of refused
	 * connects does not make them sweep for each (the refused agent's
	 * retry nudges again). */
	if (now - lt->nudged_ns >= RDMEM_LISTENER_NUDGE_NS) {
		lt->nudged_ns = now;
		rdmem_workers_nudge(lt->workers);
	}
}

/* Returns 0 to go on, or the status the request is refused with. */
static uint16_t rdmem_listener_admit(struct rdmem_listener_thread *lt, struct rdmem_conn *c,
				     const struct rdmem_xchg_hello *hello, size_t len)
{
	char why[sizeof(((struct rdmem_xchg_reject *)0)->reason)];
	uint16_t st = rdmem_session_check_hello(hello, len, lt->cfg->auth, why, sizeof(why));

	if (st == RDMEM_S_DENIED) {
		rdmem_service_count_auth_failure(lt->svc);
		rdmem_warn_limited("connect request from %s: authentication failed: refused",
				   rdmem_fab_peer(c));
		rdmem_listener_refuse(c, st, "authentication failed");
	} else if (st) {
		rdmem_service_count_bad_input(lt->svc);
		rdmem_warn_limited("connect request from %s: %s (%zu bytes): refused",
				   rdmem_fab_peer(c), why, len);
		rdmem_listener_refuse(c, st, why);
	}
	return st;
}

/* ---- full: the address holding the most gives way --------------------------- */

/* The hold kept for key (NULL: none); *others: holds kept for other keys. */
static struct rdmem_listener_hold *rdmem_listener_held(struct rdmem_listener_thread *lt,
						       const char *key, uint64_t now,
						       uint32_t *others)
{
	struct rdmem_listener_hold *mine = NULL;
	uint32_t i;

	*others = 0;
	for (i = 0; i < RDMEM_LISTENER_HOLDS; i++) {
		struct rdmem_listener_hold *h = &lt->holds[i];

		if (h->until <= now)
			continue;
		if (!mine && strcmp(h->key, key) == 0)
			mine = h;
		else
			(*others)++;
	}
	return mine;
}

/* Sessions of the address whose count is n, less those already told to go. */
static uint32_t rdmem_listener_staying(const struct rdmem_listener_thread *lt, const atomic_uint *n)
{
	uint32_t i, k = 0;

	for (i = 0; i < lt->cfg->max_sessions; i++) {
		const struct rdmem_session_guard *g = &lt->guards[i];

		/* acquire: pairs with the release store of used in rdmem_session_close */
		k += atomic_load_explicit(&g->used, memory_order_acquire) && g->addr_n == n &&
		     !atomic_load_explicit(&g->evict, memory_order_relaxed);
	}
	return k;
}

/* The open session of the address counted by n that was quiet longest. */
static struct rdmem_session_guard *rdmem_listener_idlest(struct rdmem_listener_thread *lt,
							 const atomic_uint *n)
{
	struct rdmem_session_guard *best = NULL;
	uint64_t best_ns = UINT64_MAX;
	uint32_t i;

	for (i = 0; i < lt->cfg->max_sessions; i++) {
		struct rdmem_session_guard *g = &lt->guards[i];
		/* relaxed: a time the worker stores, compared only */
		uint64_t t = atomic_load_explicit(&g->heard_ns, memory_order_relaxed);

		if (atomic_load_explicit(&g->used, memory_order_acquire) && g->addr_n == n &&
		    !atomic_load_explicit(&g->evict, memory_order_relaxed) && t < best_ns) {
			best = g;
			best_ns = t;
		}
	}
	return best;
}

/*
 * The server is full and a peer of address key came: when another address
 * holds at least two sessions more than key's, its idlest session is closed
 * and the place kept for key for RDMEM_LISTENER_HOLD_NS. So no address holds
 * every place: sessions go to addresses as evenly as they ask (a session
 * that keeps sending keeps its place only against its own address's
 * newcomers). Returns 1 when a place is being made.
 */
static int rdmem_listener_make_room(struct rdmem_listener_thread *lt, const char *key, uint64_t now)
{
	struct rdmem_addr_count *top = NULL;
	struct rdmem_listener_hold *hold = NULL;
	struct rdmem_session_guard *victim;
	uint32_t mine = 0, i, top_n;

	for (i = 0; i < lt->cfg->max_sessions; i++) {
		struct rdmem_addr_count *a = &lt->addrs[i];
		unsigned n = atomic_load_explicit(&a->n, memory_order_acquire);

		if (n && strcmp(a->key, key) == 0)
			mine = n;
		else if (n && (!top || n > atomic_load_explicit(&top->n, memory_order_relaxed)))
			top = a;
	}
	for (i = 0; i < RDMEM_LISTENER_HOLDS && !hold; i++)
		if (lt->holds[i].until <= now)
			hold = &lt->holds[i];
	if (!top || !hold)
		return 0;
	top_n = rdmem_listener_staying(lt, &top->n);
	if (top_n <= mine + 1 || !(victim = rdmem_listener_idlest(lt, &top->n)))
		return 0;
	/* relaxed: the worker acts on the flag alone; the nudge wakes it */
	atomic_store_explicit(&victim->evict, 1, memory_order_relaxed);
	snprintf(hold->key, sizeof(hold->key), "%s", key);
	hold->until = now + RDMEM_LISTENER_HOLD_NS;
	lt->nudged_ns = now;
	rdmem_workers_nudge(lt->workers);
	rdmem_log_limited(RDMEM_LOG_INFO,
			  "sessions full: %s holds %u of them, the connecting %s %u: closing its "
			  "idlest session for it",
			  top->key, top_n, key, mine);
	return 1;
}

/* 0 when a session may open for key now (*hold: the place kept for it, if
 * any), or the status the request was refused with. */
static uint16_t rdmem_listener_admit_room(struct rdmem_listener_thread *lt, struct rdmem_conn *c,
					  const char *key, struct rdmem_listener_hold **hold)
{
	uint64_t now = rdmem_now_ns();
	uint32_t others;

	*hold = rdmem_listener_held(lt, key, now, &others);
	if (rdmem_workers_sessions(lt->workers) + others < lt->cfg->max_sessions)
		return 0;
	rdmem_listener_pressure(lt);
	if (*hold || rdmem_listener_make_room(lt, key, now)) {
		/* The evicted session closes at its worker's next sweep: the
		 * agent's redial (50 ms on) finds the place. */
		rdmem_listener_refuse(c, RDMEM_S_BUSY, "sessions full: a place is being made");
		return RDMEM_S_BUSY;
	}
	rdmem_warn_limited("connect request from %s: %u sessions already (--max-sessions): "
			   "refused",
			   rdmem_fab_peer(c), lt->cfg->max_sessions);
	rdmem_listener_refuse(c, RDMEM_S_BUSY, "too many sessions");
	return RDMEM_S_BUSY;
}

/* An entry of lt->guards no open session holds, or NULL. */
static struct rdmem_session_guard *rdmem_listener_free_guard(struct rdmem_listener_thread *lt)
{
	uint32_t i;

	for (i = 0; i < lt->cfg->max_sessions; i++)
		/* acquire: pairs with the release store in rdmem_session_close */
		if (!atomic_load_explicit(&lt->guards[i].used, memory_order_acquire))
			return &lt->guards[i];
	return NULL;
}

/* --max-sessions-per-addr: 0 and the address's entry, or the refusal status. */
static uint16_t rdmem_listener_admit_addr(struct rdmem_listener_thread *lt, struct rdmem_conn *c,
					  const char *key, struct rdmem_addr_count **out)
{
	/* 0 (a config not from main): no limit of its own */
	uint32_t limit = lt->cfg->max_per_addr ? lt->cfg->max_per_addr : lt->cfg->max_sessions;
	struct rdmem_addr_count *a = rdmem_listener_addr(lt, key);

	if (a && atomic_load_explicit(&a->n, memory_order_relaxed) < limit) {
		*out = a;
		return 0;
	}
	/* Sessions of that address that never sent may be a hog sharing it (a
	 * NAT) with this peer: make them reclaimable, as when the server is full. */
	rdmem_listener_pressure(lt);
	rdmem_service_count_net(lt->svc, RDMEM_NET_RDMA_REFUSED_ADDR);
	rdmem_warn_limited("connect request from %s: %u sessions from that address "
			   "(--max-sessions-per-addr): refused",
			   rdmem_fab_peer(c), limit);
	rdmem_listener_refuse(c, RDMEM_S_BUSY, "too many sessions from this address");
	return RDMEM_S_BUSY;
}

static void rdmem_listener_take(struct rdmem_listener_thread *lt)
{
	struct rdmem_fab_attr attr = rdmem_listener_attr(lt->cfg);
	struct rdmem_xchg_hello hello;
	struct rdmem_session *s;
	struct rdmem_addr_count *addr = NULL;
	struct rdmem_listener_hold *hold = NULL;
	struct rdmem_session_guard *g;
	struct rdmem_conn *c;
	char key[RDMEM_ADDR_KEY];
	size_t len = sizeof(hello);
	int ret;

	memset(&hello, 0, sizeof(hello));
	ret = rdmem_fab_get_request(lt->l, &attr, &c, &hello, &len);
	if (ret < 0) {
		if (ret != -EAGAIN)
			rdmem_warn_limited("connect request failed: %s", strerror(-ret));
		return;
	}
	rdmem_hello_le(&hello); /* wire bytes -> host order; the proof check re-encodes */
	rdmem_listener_addr_key(c, key);
	if (rdmem_listener_admit(lt, c, &hello, len) ||
	    rdmem_listener_admit_room(lt, c, key, &hold) ||
	    rdmem_listener_admit_addr(lt, c, key, &addr))
		return;
	/* Sessions count up only as their close gives the entry back: a closing
	 * one may still hold it. */
	if (!(g = rdmem_listener_free_guard(lt))) {
		rdmem_listener_refuse(c, RDMEM_S_BUSY, "sessions full: one is closing");
		return;
	}
	/* On failure (e.g. no lease free) the session refused the request with a reason. */
	if (rdmem_session_open(lt->cfg, lt->svc, lt->pool, c, &hello, ++lt->next_id, &s) == 0) {
		if (hold)
			hold->until = 0; /* taken */
		atomic_fetch_add_explicit(&addr->n, 1, memory_order_relaxed);
		g->addr_n = &addr->n;
		g->reclaim_before_ns = &lt->reclaim_before_ns;
		/* relaxed: the worker gets the session (and g) through
		 * rdmem_workers_add's hand-over, which orders these stores */
		atomic_store_explicit(&g->heard_ns, rdmem_now_ns(), memory_order_relaxed);
		atomic_store_explicit(&g->evict, 0, memory_order_relaxed);
		atomic_store_explicit(&g->used, 1, memory_order_relaxed);
		rdmem_session_set_guard(s, g, key);
		rdmem_workers_add(lt->workers, s);
	}
}

static void *rdmem_listener_main(void *arg)
{
	struct rdmem_listener_thread *lt = arg;
	struct pollfd pfd[2] = { { rdmem_fab_listener_fd(lt->l), POLLIN, 0 },
				 { lt->stop_efd, POLLIN, 0 } };

	pthread_setname_np(pthread_self(), "rdmem-listen"); /* ps -L, top -H, the idle test */
	for (;;) {
		/* No time limit: every duty is an event (a connection; a pending
		 * peer's bytes, which the shm listener's epoll set carries; stop;
		 * the shm listener's timer ending an accept paused for want of
		 * fds). A pending peer that stays silent is dropped at the next
		 * request. */
		int n = poll(pfd, 2, -1);

		if (n < 0 && errno != EINTR) {
			rdmem_err("listener poll: %s", strerror(errno));
			break;
		}
		if (pfd[1].revents)
			break;
		if (pfd[0].revents)
			rdmem_listener_take(lt);
	}
	return NULL;
}

/* STATS: the pool's leases, then each worker's groups and sessions (or,
 * when they do not fit, "workers":null and why). */
static int rdmem_listener_stats(void *ctx, int json, char *buf, size_t cap)
{
	struct rdmem_listener_thread *lt = ctx;
	uint32_t taken =
	    lt->pool ? rdmem_pool_taken(lt->pool) : rdmem_workers_sessions(lt->workers);
	uint32_t leases = lt->pool ? lt->pool->cfg.leases : lt->cfg->max_sessions;
	unsigned long long lease_bytes = lt->pool ? lt->pool->lease_bytes : 0;
	int n, m;

	if (json)
		n = snprintf(buf, cap,
			     "{\"shared_pool\":%d,\"leases\":%u,\"leases_taken\":%u,"
			     "\"lease_bytes\":%llu,\"workers\":",
			     lt->pool != NULL, leases, taken, lease_bytes);
	else
		n = snprintf(buf, cap, "%s pool: %u of %u leases taken, %llu B each\n",
			     lt->pool ? "shared" : "per-session", taken, leases, lease_bytes);
	if (n < 0 || (size_t)n >= cap)
		return -E2BIG;
	m = rdmem_workers_format(lt->workers, json, buf + n, cap - (size_t)n);
	/* A reply is at most --max-value bytes, and the list grows ~150 B a
	 * session: past that, the pool's summary alone, saying so. */
	if (m < 0)
		m = snprintf(buf + n, cap - (size_t)n,
			     json ? "null,\"workers_omitted\":\"%s\"" : "workers: %s\n",
			     "the session list is longer than a reply may be (--max-value)");
	if (m < 0 || (size_t)(n + m + (json ? 1 : 0)) >= cap)
		return -E2BIG;
	if (json) {
		buf[n + m++] = '}';
		buf[n + m] = '\0';
	}
	return n + m;
}

static void rdmem_listener_free(struct rdmem_listener_thread *lt)
{
	rdmem_fab_listener_close(lt->l);
	rdmem_workers_stop(lt->workers); /* closes every session: leases go back */
	rdmem_pool_destroy(lt->pool);
	free(lt->addrs);
	free(lt->guards);
	if (lt->stop_efd >= 0)
		close(lt->stop_efd);
	free(lt);
}

static int rdmem_listener_pool(struct rdmem_listener_thread *lt)
{
	struct rdmem_pool_config pc = rdmem_session_pool_config(lt->cfg, lt->cfg->max_sessions);

	return lt->cfg->shared_pool ? rdmem_pool_create(&pc, &lt->pool) : 0;
}

/*
 * Every session pins its lease for the NIC, and the pins of all sessions
 * count against one locked-memory limit: say at start how many sessions
 * the limit holds, not at the first session past it (whose registration
 * fails; that agent then works over TCP).
 */
static void rdmem_listener_memlock_check(const struct rdmem_rdma_config *c)
{
	struct rdmem_pool_config pc = rdmem_session_pool_config(c, 1);
	uint64_t lease = rdmem_pool_lease_size(&pc), limit, fit;

	if (c->fabric != RDMEM_FAB_VERBS || !rdmem_memlock_limit(&limit))
		return;
	fit = limit / lease;
	if (fit >= c->max_sessions)
		return;
	rdmem_err("rdma: the locked-memory limit is %llu KiB and each session pins %llu KiB: "
		  "%llu of --max-sessions %u sessions can register, the rest are refused "
		  "(their agents use TCP). Raise the limit (`ulimit -l unlimited`, or "
		  "LimitMEMLOCK=infinity for a systemd service), or lower --ring-slots, "
		  "--objpool-slabs or --max-sessions",
		  (unsigned long long)limit / 1024, (unsigned long long)lease / 1024,
		  (unsigned long long)fit, c->max_sessions);
}

int rdmem_rdma_listener_start(const struct rdmem_rdma_config *cfg, struct rdmem_service *svc,
			      struct rdmem_listener_thread **out)
{
	struct rdmem_listener_thread *lt = calloc(1, sizeof(*lt));
	int ret;

	if (!lt)
		return -ENOMEM;
	lt->cfg = cfg;
	lt->svc = svc;
	rdmem_listener_memlock_check(cfg);
	lt->stop_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	lt->addrs = calloc(cfg->max_sessions, sizeof(*lt->addrs));
	lt->guards = calloc(cfg->max_sessions, sizeof(*lt->guards));
	ret = lt->stop_efd < 0		  ? -errno
	      : !lt->addrs || !lt->guards ? -ENOMEM
					  : rdmem_listener_pool(lt);
	if (ret == 0)
		ret = rdmem_workers_start(cfg, &lt->workers);
	if (ret == 0)
		ret = rdmem_fab_listen(cfg->fabric, cfg->addr, cfg->port, &lt->l);
	if (ret == 0)
		ret = -pthread_create(&lt->thread, NULL, rdmem_listener_main, lt);
	if (ret < 0) {
		rdmem_err("rdma listener on %s:%u (%s): %s", cfg->addr, cfg->port,
			  rdmem_fab_kind_name(cfg->fabric), strerror(-ret));
		rdmem_listener_free(lt);
		return ret;
	}
	rdmem_service_set_stats_hook(svc, rdmem_listener_stats, lt);
	rdmem_info("listening %s %s:%u (%s pool, %u workers, grouping above %u sessions)",
		   rdmem_fab_kind_name(cfg->fabric), cfg->addr, cfg->port,
		   cfg->shared_pool ? "shared" : "per-session", RDMEM_MAX(1u, cfg->workers),
		   cfg->group_threshold);
	*out = lt;
	return 0;
}

void rdmem_rdma_listener_stop(struct rdmem_listener_thread *lt)
{
	uint64_t one = 1;

	if (!lt)
		return;
	/* The TCP loop may still serve STATS: unhook before lt goes (this waits
	 * for a STATS inside the hook to finish). */
	rdmem_service_set_stats_hook(lt->svc, NULL, NULL);
	if (write(lt->stop_efd, &one, sizeof(one)) < 0)
		rdmem_warn("listener stop signal: %s", strerror(errno));
	pthread_join(lt->thread, NULL);
	rdmem_listener_free(lt);
}
