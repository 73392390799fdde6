/* listener.c - the RDMA listener thread of rdmem-server.
 *
 * It takes connect requests, checks the agent's private data (and proof),
 * refuses clearly when the server is full, opens a session on a lease of the
 * message pool and hands it to a worker. Workers close sessions whose agent
 * left, and the lease goes back, so one agent's failure frees only its own.
 */
#include "server/listener.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fabric/dataplane.h"
#include "rdmem/layout.h"
#include "rdmem/memlimit.h"
#include "rdmem/netaddr.h"
#include "rdmem/util.h"
#include "server/objpool.h"
#include "server/pool.h"
#include "server/share.h"
#include "server/worker.h"

#define RDMEM_LISTENER_NUDGE_NS 10000000ull /* 10 ms */
/* A parked request waits at most this for its place (under the agent's
 * --connect-timeout, 2 s by default; a busy worker sweeps every 100 ms and
 * then closes the session), checked this often. */
#define RDMEM_LISTENER_PARK_NS	    1000000000ull
#define RDMEM_LISTENER_PARK_POLL_MS 5

/* A connect request kept while the place made for it frees (share.h, PARK). */
struct rdmem_listener_parked {
	struct rdmem_conn *c; /* NULL: none */
	struct rdmem_xchg_hello hello;
	char key[RDMEM_SHARE_KEY];
	uint64_t since_ns;
};

struct rdmem_listener_thread {
	const struct rdmem_rdma_config *cfg;
	struct rdmem_service *svc;
	struct rdmem_listener *l;
	struct rdmem_pool *pool; /* NULL: each session takes a pool of its own */
	struct rdmem_workers *workers;
	uint32_t next_id;
	struct rdmem_share *share; /* who gets a place (server/share.h) */
	struct rdmem_listener_parked parked;
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
				    .signal_every = 64,
				    /* An agent registers one area for us: its
				     * response slots. A hostile peer declaring
				     * more (64 regions of 1 TiB each passed
				     * once) filled our address space. */
				    .max_peer_bytes = rdmem_max_resp_region(),
				    .max_peer_regions = 1 };

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
	char host[RDMEM_SHARE_KEY];

	while (end && peer[end - 1] >= '0' && peer[end - 1] <= '9')
		end--;
	if (end && end < n && peer[end - 1] == ':')
		n = end - 1;
	snprintf(host, sizeof(host), "%.*s", (int)n, peer);
	rdmem_addr_group(host, key, RDMEM_SHARE_KEY);
}

/* Sleeping workers look at their sessions now, not at a tick: sessions
 * that never sent are reclaimed, one told to end is closed. At most every
 * RDMEM_LISTENER_NUDGE_NS unless one was told to end, so a flood of refused
 * connects does not make them sweep for each (the refused agent's retry
 * nudges again). */
static void rdmem_listener_nudge(struct rdmem_listener_thread *lt, int now_anyway)
{
	uint64_t now = rdmem_now_ns();

	if (now_anyway || now - lt->nudged_ns >= RDMEM_LISTENER_NUDGE_NS) {
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

/* Whether a session may open for address key: OPEN, PARK, or a refusal
 * already sent. A parked request counts as a place taken. */
static enum rdmem_share_verdict rdmem_listener_admit_share(struct rdmem_listener_thread *lt,
							   struct rdmem_conn *c, const char *key)
{
	uint32_t open = rdmem_workers_sessions(lt->workers) + (lt->parked.c != NULL);
	enum rdmem_share_verdict v =
	    rdmem_share_admit(lt->share, key, open, lt->parked.c == NULL, rdmem_now_ns());

	if (v == RDMEM_SHARE_OPEN)
		return v;
	if (v != RDMEM_SHARE_CLOSING)
		rdmem_listener_nudge(lt, v == RDMEM_SHARE_PARK);
	if (v == RDMEM_SHARE_FULL) {
		rdmem_warn_limited("connect request from %s: %u sessions already "
				   "(--max-sessions): refused",
				   rdmem_fab_peer(c), lt->cfg->max_sessions);
		rdmem_listener_refuse(c, RDMEM_S_BUSY, "too many sessions");
	} else if (v == RDMEM_SHARE_ADDR) {
		rdmem_service_count_net(lt->svc, RDMEM_NET_RDMA_REFUSED_ADDR);
		rdmem_warn_limited("connect request from %s: %u sessions from that address "
				   "(--max-sessions-per-addr): refused",
				   rdmem_fab_peer(c),
				   lt->cfg->max_per_addr ? lt->cfg->max_per_addr
							 : lt->cfg->max_sessions);
		rdmem_listener_refuse(c, RDMEM_S_BUSY, "too many sessions from this address");
	} else if (v == RDMEM_SHARE_CLOSING) {
		rdmem_listener_refuse(c, RDMEM_S_BUSY, "sessions full: one is closing");
	}
	return v;
}

/* Opens the session of an admitted request; on failure (e.g. no lease free)
 * the session refused the request with a reason. */
static void rdmem_listener_open(struct rdmem_listener_thread *lt, struct rdmem_conn *c,
				const struct rdmem_xchg_hello *hello, const char *key)
{
	struct rdmem_session *s;

	if (rdmem_session_open(lt->cfg, lt->svc, lt->pool, c, hello, ++lt->next_id, &s) == 0) {
		/* admitted OPEN on this thread: an entry and a guard are free */
		rdmem_session_set_guard(s, rdmem_share_attach(lt->share, key, rdmem_now_ns()), key);
		rdmem_workers_add(lt->workers, s);
	}
}

/* The parked request: opened once its place is free (before any new
 * request is read), refused after RDMEM_LISTENER_PARK_NS. */
static void rdmem_listener_unpark(struct rdmem_listener_thread *lt)
{
	struct rdmem_listener_parked p = lt->parked;

	if (!p.c)
		return;
	if (rdmem_workers_sessions(lt->workers) < lt->cfg->max_sessions) {
		lt->parked.c = NULL;
		if (rdmem_listener_admit_share(lt, p.c, p.key) == RDMEM_SHARE_OPEN)
			rdmem_listener_open(lt, p.c, &p.hello, p.key);
	} else if (rdmem_now_ns() - p.since_ns > RDMEM_LISTENER_PARK_NS) {
		lt->parked.c = NULL;
		rdmem_service_count_net(lt->svc, RDMEM_NET_RDMA_PARK_TIMEOUTS);
		rdmem_warn_limited(
		    "connect request from %s: no place freed within %llu ms: refused",
		    rdmem_fab_peer(p.c), (unsigned long long)(RDMEM_LISTENER_PARK_NS / 1000000));
		rdmem_listener_refuse(p.c, RDMEM_S_BUSY, "too many sessions");
	}
}

static void rdmem_listener_take(struct rdmem_listener_thread *lt)
{
	struct rdmem_fab_attr attr = rdmem_listener_attr(lt->cfg);
	struct rdmem_xchg_hello hello;
	enum rdmem_share_verdict v;
	struct rdmem_conn *c;
	char key[RDMEM_SHARE_KEY];
	size_t len = sizeof(hello);
	int ret;

	memset(&hello, 0, sizeof(hello));
	ret = rdmem_fab_get_request(lt->l, &attr, &c, &hello, &len);
	if (ret < 0) {
		/* Counted: what a peer sent wrong. Not a peer that left before
		 * its request (an agent of another uid does, then uses TCP) or
		 * our own failure (out of memory, fds). */
		if (ret == -EPROTO)
			rdmem_service_count_net(lt->svc, RDMEM_NET_RDMA_BAD_REQUESTS);
		if (ret != -EAGAIN)
			rdmem_warn_limited("connect request failed: %s", strerror(-ret));
		return;
	}
	rdmem_hello_le(&hello); /* wire bytes -> host order; the proof check re-encodes */
	rdmem_listener_addr_key(c, key);
	if (rdmem_listener_admit(lt, c, &hello, len))
		return;
	v = rdmem_listener_admit_share(lt, c, key);
	if (v == RDMEM_SHARE_OPEN) {
		rdmem_listener_open(lt, c, &hello, key);
	} else if (v == RDMEM_SHARE_PARK) {
		rdmem_service_count_net(lt->svc, RDMEM_NET_RDMA_PARKED);
		lt->parked.c = c;
		lt->parked.hello = hello;
		snprintf(lt->parked.key, sizeof(lt->parked.key), "%s", key);
		lt->parked.since_ns = rdmem_now_ns();
	}
}

static void *rdmem_listener_main(void *arg)
{
	struct rdmem_listener_thread *lt = arg;
	struct pollfd pfd[2] = { { rdmem_fab_listener_fd(lt->l), POLLIN, 0 },
				 { lt->stop_efd, POLLIN, 0 } };

	pthread_setname_np(pthread_self(), "rdmem-listen"); /* ps -L, top -H, the idle test */
	for (;;) {
		/* No time limit but while a request is parked (its place frees
		 * when a worker closes a session: no event here): every other
		 * duty is an event (a connection; a pending peer's bytes, which
		 * the shm listener's epoll set carries; stop; the shm listener's
		 * timer ending an accept paused for want of fds). A pending peer
		 * that stays silent is dropped at the next request. */
		int n = poll(pfd, 2, lt->parked.c ? RDMEM_LISTENER_PARK_POLL_MS : -1);

		if (n < 0 && errno != EINTR) {
			rdmem_err("listener poll: %s", strerror(errno));
			break;
		}
		if (pfd[1].revents)
			break;
		rdmem_listener_unpark(lt);
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
	if (lt->parked.c)
		rdmem_listener_refuse(lt->parked.c, RDMEM_S_BUSY, "server stopping");
	rdmem_fab_listener_close(lt->l);
	rdmem_workers_stop(lt->workers); /* closes every session: leases go back */
	rdmem_pool_destroy(lt->pool);
	rdmem_share_destroy(lt->share);
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

/*
 * A session pins its whole lease when it registers. One larger than the
 * memory this process may use can never register, and each try first
 * pushes the machine into reclaim for seconds, the listener stuck in it:
 * in a 2 GiB VM, 2,251 ring slots x a 1 MiB stage (2.2 GiB a session)
 * outlasted every agent's connect timeout. Refused at start instead.
 */
static int rdmem_listener_lease_fits(const struct rdmem_rdma_config *c)
{
	struct rdmem_pool_config pc = rdmem_session_pool_config(c, 1);
	uint64_t lease = rdmem_pool_lease_size(&pc), mem;
	const char *whose;

	if (c->fabric != RDMEM_FAB_VERBS)
		return 0; /* nothing pinned: the shm fabric maps, the kernel pages in */
	if (lease <= (mem = rdmem_mem_limit(&whose)))
		return 0;
	/* Each area by the flags that size it (server/pool.c's geometry). */
	rdmem_err("rdma: each session pins %llu MiB (requests %llu MiB: --ring-slots %u x "
		  "--slot-bytes %u; replies %llu MiB: --ring-slots x --stage-bytes %u; objects "
		  "%llu MiB: --objpool-slabs %u, --max-value %u), more than %s (%llu MiB): no "
		  "session could ever register. Lower the largest; the server does not start",
		  (unsigned long long)(lease >> 20),
		  (unsigned long long)(c->ring_slots * rdmem_slot_stride(c->slot_bytes) >> 20),
		  c->ring_slots, c->slot_bytes,
		  (unsigned long long)(c->ring_slots * rdmem_slot_stride(c->stage_bytes) >> 20),
		  c->stage_bytes, (unsigned long long)(rdmem_objpool_area_bytes(&pc.obj) >> 20),
		  c->objpool_slabs, c->max_value, whose, (unsigned long long)(mem >> 20));
	return -EINVAL;
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
	lt->stop_efd = -1;
	if ((ret = rdmem_listener_lease_fits(cfg)) < 0) {
		rdmem_listener_free(lt);
		return ret;
	}
	rdmem_listener_memlock_check(cfg);
	lt->stop_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ret = lt->stop_efd < 0 ? -errno
			       : rdmem_share_create(cfg->max_sessions, cfg->max_per_addr,
						    cfg->grace_ms, &lt->share);
	if (ret == 0)
		ret = rdmem_listener_pool(lt);
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
