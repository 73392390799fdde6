/* session.c - the agent's session actor (see session.h).
 *
 * Loop: adopt a link the connector dialled, take calls from the front door,
 * choose each call's path, post RDMA calls or hand TCP ones over, reap RDMA
 * completions, retry on TCP what RDMA failed (AUTO), and sleep when idle.
 *
 * The front-door thread takes calls itself when it can (flat combining,
 * docs/architecture.md "One thread fewer per call"): the session's state
 * belongs to whichever thread holds its token, the actor for a round or the
 * front door for one batch of calls. The actor alone adopts and drops links,
 * registers client slots, reaps completions and sleeps; a front door that
 * meets one of those leaves it for the actor's next round.
 */
#include "agent/session.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/link.h"
#include "agent/metrics.h"
#include "agent/queue.h"
#include "agent/rdma.h"
#include "agent/stats.h"
#include "common/affinity.h"
#include "rdmem/idle.h"
#include "rdmem/util.h"
#include "shm/segment.h"

#define RDMEM_SESSION_BLOCK_MS	50
#define RDMEM_SESSION_EXPIRE_NS 1000000ull    /* deadline checks */
#define RDMEM_SESSION_CHECK_NS	10000000ull   /* link check: a syscall, so not every round */
#define RDMEM_ERROR_COOLDOWN_NS 5000000000ull /* forget RDMA errors after this */
#define RDMEM_REDIAL_MIN_NS	50000000ull
#define RDMEM_REDIAL_MAX_NS	2000000000ull

struct rdmem_agent_session {
	struct rdmem_agent_config cfg;
	struct rdmem_frontdoor *fd;
	struct rdmem_tcp_actor *tcp;
	struct rdmem_queue in;
	/* Parts of split calls sent again from any thread (the router's
	 * reruns): a second queue, its producers serialised by side_lock. */
	struct rdmem_queue side;
	pthread_mutex_t side_lock;

	/* The connector dials; a new link is handed over through this mailbox. */
	pthread_t connector;
	_Atomic(struct rdmem_link *) mailbox;
	atomic_int want_link; /* session -> connector: dial (again) */
	struct rdmem_queue connector_bell;

	struct rdmem_link *link;
	struct rdmem_rdma *rdma;
	/* Front door -> session: a client entry was reclaimed; its area's
	 * registration, if any, can go (rdmem_agent_session_drop_areas). */
	atomic_int area_sweep;
	int areas_waiting; /* a dropped client's area waits for a fence READ */
	/* The pinned-memory budget (agent/pin.h): the shed generation handled
	 * last, and the post a fence must pass for one more pass (0: none). */
	uint64_t shed_seen;
	uint64_t shed_after;
	/* Exactly-once: the link carries calls only once its BIND answered. */
	struct rdmem_agent_ident *ident;
	struct rdmem_agent_call bind_call;
	int rdma_bound;
	struct rdmem_agent_call *pending_head, *pending_tail; /* waiting for a link or slots */
	struct rdmem_agent_call *stats_wait; /* AGENT_STATS waiting for a fresh control page */
	struct rdmem_path_state pst;
	struct rdmem_ctrl ctrl;
	int have_ctrl;
	uint64_t last_error_ns, expire_at, check_at;
	struct rdmem_agent_counters cnt;
	struct rdmem_call_metrics cm; /* per op and path, for /metrics */
	struct rdmem_agent_gauges gauges;
	int publish_due; /* a round did work since the gauges were last published */
	uint64_t published_ns;

	/*
	 * Who owns everything above that is not atomic (and the TCP actor's
	 * producer side): 1 while the actor runs a round or the front door a
	 * batch. Taken with an acquire exchange, given back with a release
	 * store: each owner sees every write of the one before.
	 */
	atomic_int token;
	/* The actor found the token taken: the front door queues its next
	 * calls instead of taking the token again (relaxed: a hint; a late
	 * look costs one batch), so a stream of batches cannot starve the
	 * actor's reaping. */
	atomic_int actor_wants;
	int actor_misses; /* the actor's takes that failed in a row (actor thread only) */
	int fd_holds;	  /* front-door thread only: it holds the token for this batch */
	int fd_took;	  /* calls the front door took in this batch */
	int asleep;	  /* the actor is in (or entering) poll(); set under the token */
	int link_err;	  /* a post failed in the front door's batch: the actor drops the link */
	/* ... and then fails (or moves) the call whose post broke it: one at
	 * most, since nothing is posted once link_err is set. */
	struct rdmem_agent_call *post_failed;

	atomic_int stop;
	pthread_t thread;
};

/* ---- the token ------------------------------------------------------------- */

static int rdmem_agent_session_try_own(struct rdmem_agent_session *s)
{
	/* Acquire: pairs with the release store in rdmem_agent_session_disown()
	 * of the last owner, so its writes to the session are ours to read. A
	 * relaxed look first keeps a held token's line shared. */
	return !atomic_load_explicit(&s->token, memory_order_relaxed) &&
	       !atomic_exchange_explicit(&s->token, 1, memory_order_acquire);
}

/* The actor's client wake-ups wait for this (rdmem_frontdoor_defer_wakes):
 * a client woken mid-round would find the token held. */
static void rdmem_agent_session_disown(struct rdmem_agent_session *s)
{
	atomic_store_explicit(&s->token, 0, memory_order_release);
	rdmem_frontdoor_flush_wakes();
}

/* Failed takes in a row before the actor asks for its turn: an idle actor
 * that meets one batch must not turn inline calls off for the next. */
#define RDMEM_SESSION_WANT_MISSES 4

/* The actor's take; after misses failures in a row it asks the front door
 * to leave the token to it (actor_wants), cleared once it has it. */
static int rdmem_agent_session_actor_try_own(struct rdmem_agent_session *s, int misses)
{
	if (!rdmem_agent_session_try_own(s)) {
		if (++s->actor_misses >= misses)
			atomic_store_explicit(&s->actor_wants, 1, memory_order_relaxed);
		return 0;
	}
	s->actor_misses = 0;
	if (atomic_load_explicit(&s->actor_wants, memory_order_relaxed))
		atomic_store_explicit(&s->actor_wants, 0, memory_order_relaxed);
	return 1;
}

/* The actor's blocking take (a completion to acknowledge, or stop): the
 * front door holds it for one batch at most, and takes it no more once
 * asked to. */
static void rdmem_agent_session_own(struct rdmem_agent_session *s)
{
	while (!rdmem_agent_session_actor_try_own(s, 1))
		sched_yield();
}

/* ---- completing calls ------------------------------------------------------ */

static int rdmem_agent_session_auto(const struct rdmem_agent_session *s,
				    const struct rdmem_agent_call *call);

/* Ops that only read: a retry elsewhere cannot change the server's state twice. */
static int rdmem_agent_read_only(uint16_t op)
{
	return op == RDMEM_OP_KV_GET || op == RDMEM_OP_KV_MGET || op == RDMEM_OP_PROFILE ||
	       op == RDMEM_OP_LARGE_GET || op == RDMEM_OP_ECHO || op == RDMEM_OP_PING ||
	       op == RDMEM_OP_STATS;
}

static void rdmem_agent_session_done(void *ctx, struct rdmem_agent_call *call,
				     const struct rdmem_agent_reply *rep, uint8_t path)
{
	struct rdmem_agent_session *s = ctx;

	/* The server had no room to place the reply (object pool full), or the
	 * LAZY reply was read too late to trust (STALE, agent/rdma.c): AUTO
	 * takes the TCP path instead of surfacing either. */
	if ((rep->status == RDMEM_S_BUSY ||
	     (rep->status == RDMEM_S_STALE && !rdmem_call_reply_overlaps(call))) &&
	    path != RDMEM_PATH_TCP && !call->tries && rdmem_agent_session_auto(s, call) &&
	    rdmem_agent_read_only(call->req.op)) {
		rdmem_agent_count(&s->cnt.fallbacks, 1);
		call->path = RDMEM_PATH_TCP;
		call->tries++;
		rdmem_tcp_actor_submit(s->tcp, call);
		return;
	}
	call->path = path;
	rdmem_agent_count_done(&s->cnt, path, rep->status);
	rdmem_call_metrics_done(&s->cm, call, path, rep->status);
	rdmem_frontdoor_complete(s->fd, call, rep);
}

static void rdmem_agent_session_fail(struct rdmem_agent_session *s, struct rdmem_agent_call *call,
				     uint16_t status)
{
	struct rdmem_agent_reply rep = { status, 0, 0, rdmem_call_reply_off(call), 0, { 0, 0, 0 } };

	rdmem_call_name_server(call, &rep, s->cfg.name);
	rdmem_agent_session_done(s, call, &rep, call->path);
}

static int rdmem_agent_session_auto(const struct rdmem_agent_session *s,
				    const struct rdmem_agent_call *call)
{
	return call->forced_path == RDMEM_PATH_AUTO && s->cfg.path.force == RDMEM_PATH_AUTO;
}

static void rdmem_agent_session_rdma_error(struct rdmem_agent_session *s)
{
	s->pst.rdma_errors++;
	s->last_error_ns = rdmem_now_ns();
	rdmem_agent_count(&s->cnt.rdma_errors, 1);
}

/* An AUTO call RDMA could not carry goes over TCP (1); others fail (0). */
static int rdmem_agent_session_to_tcp(struct rdmem_agent_session *s, struct rdmem_agent_call *call)
{
	if (!rdmem_agent_session_auto(s, call))
		return 0;
	rdmem_agent_count(&s->cnt.fallbacks, 1);
	call->path = RDMEM_PATH_TCP;
	call->tries++;
	rdmem_tcp_actor_submit(s->tcp, call);
	return 1;
}

/* RDMA could not carry the call: AUTO retries it on TCP, a forced path fails. */
static void rdmem_agent_session_failed(void *ctx, struct rdmem_agent_call *call, int err,
				       int intact)
{
	struct rdmem_agent_session *s = ctx;
	int read_only = rdmem_agent_read_only(call->req.op);
	uint16_t status = err == -ECONNRESET ? RDMEM_S_UNREACHABLE : RDMEM_S_IO;

	/* -ENOMEM: the client's slot could not be registered for a reply READ
	 * (agent/rdma.c): a local limit, not an RDMA error. The server ran the
	 * call: run it again only if it changes nothing (a hostile server may
	 * answer a PUT by reference), and say "no memory" only then: for any
	 * other op it would read as "nothing happened". */
	if (err != -ENOMEM)
		rdmem_agent_session_rdma_error(s);
	else if (!read_only)
		intact = 0;
	else
		status = RDMEM_S_NO_MEMORY;
	if (intact && rdmem_agent_session_to_tcp(s, call))
		return;
	rdmem_agent_session_fail(s, call, status);
}

/* The BIND of a new link answered (or timed out): calls may go. */
static void rdmem_agent_session_bound(struct rdmem_agent_session *s, uint16_t status,
				      uint32_t window, uint64_t instance)
{
	s->rdma_bound = 1;
	rdmem_agent_ident_bound(s->ident, status, window, instance, "rdma");
}

/* A reply came back over RDMA: the server ran the call. */
static void rdmem_agent_session_rdma_done(void *ctx, struct rdmem_agent_call *call,
					  const struct rdmem_agent_reply *rep, uint8_t path)
{
	struct rdmem_agent_session *s = ctx;

	if (call == &s->bind_call) {
		rdmem_agent_session_bound(s, rep->status, rep->aux, rep->args[1]);
		return;
	}
	/* Fault injection: the completion is lost after the server ran the call. */
	if (s->cfg.sim.reply_loss && rep->status != RDMEM_S_TIMEOUT) {
		s->cfg.sim.reply_loss--;
		rdmem_agent_session_failed(s, call, -EIO, !rdmem_call_reply_overlaps(call));
		return;
	}
	rdmem_agent_session_done(s, call, rep, path);
}

static void rdmem_agent_session_rdma_failed(void *ctx, struct rdmem_agent_call *call, int err,
					    int intact)
{
	struct rdmem_agent_session *s = ctx;

	if (call == &s->bind_call)
		rdmem_agent_session_bound(s, rdmem_errno_status(err), 0, 0);
	else
		rdmem_agent_session_failed(s, call, err, intact);
}

static void rdmem_agent_session_answer_stats(struct rdmem_agent_session *s);

static void rdmem_agent_session_ctrl(void *ctx, const struct rdmem_ctrl *snap)
{
	struct rdmem_agent_session *s = ctx;

	s->ctrl = *snap;
	s->have_ctrl = 1;
	rdmem_agent_session_answer_stats(s);
}

static const struct rdmem_rdma_ops rdmem_agent_session_rdma_ops = {
	rdmem_agent_session_rdma_done,
	rdmem_agent_session_rdma_failed,
	rdmem_agent_session_ctrl,
};

/* ---- pending calls --------------------------------------------------------- */

static void rdmem_agent_session_pend(struct rdmem_agent_session *s, struct rdmem_agent_call *call)
{
	RDMEM_FIFO_PUSH(s->pending_head, s->pending_tail, call);
}

/* ---- the link --------------------------------------------------------------- */

/*
 * Ends the link, then its calls. The QP goes to error first and its send
 * queue is drained: after that no LAZY READ can still land in a client's
 * slot (nor a request WRITE still read one), so the calls may be retried on
 * TCP or handed back. On a NIC outstanding WRs complete with flush errors
 * only after the move to error; until then they may still run.
 */
static void rdmem_agent_session_drop_link(struct rdmem_agent_session *s)
{
	if (s->link)
		rdmem_fab_shutdown(s->link->conn);
	/* Fails (or moves to TCP) every call the link still carried. */
	rdmem_rdma_destroy(s->rdma);
	rdmem_link_close(s->link);
	s->rdma = NULL;
	s->link = NULL;
	s->rdma_bound = 0;
}

static void rdmem_agent_session_link_lost(struct rdmem_agent_session *s, int err)
{
	/* On the front door's thread: closing a link waits for its send queue
	 * to drain, and the actor may be asleep on the link's fds. The actor
	 * drops it at the start of its next round; until then nothing posts. */
	if (s->fd_holds) {
		if (!s->link_err)
			s->link_err = err;
		return;
	}
	/* Dropping a link may wait seconds for its queue: whoever this round
	 * already answered is woken first. */
	rdmem_frontdoor_flush_wakes();
	rdmem_warn("rdma: lost the link to %s:%u: %s", s->cfg.server, s->cfg.port, strerror(-err));
	rdmem_agent_count(&s->cnt.link_losses, 1);
	rdmem_agent_session_drop_link(s);
	s->have_ctrl = 0;
	rdmem_agent_session_answer_stats(s);
	atomic_store_explicit(&s->cnt.link_up, 0, memory_order_relaxed);
	/* Pairs with the connector's acquire load of want_link. */
	atomic_store_explicit(&s->want_link, 1, memory_order_release);
	rdmem_queue_ring(&s->connector_bell);
}

/* The first call on a new link binds our identity; the rest wait for its reply. */
static void rdmem_agent_session_bind(struct rdmem_agent_session *s)
{
	struct rdmem_agent_call *b = &s->bind_call;
	int ret;

	memset(b, 0, sizeof(*b));
	rdmem_agent_ident_bind_desc(s->ident, &b->req);
	b->payload = b->key = b->val = (uint8_t *)b; /* no payload, no reply bytes */
	b->forced_path = b->path = RDMEM_PATH_EAGER;
	b->deadline_ns = rdmem_now_ns() + (uint64_t)s->cfg.connect_timeout_ms * 1000000ull;
	s->rdma_bound = 0;
	ret = rdmem_rdma_submit(s->rdma, b, RDMEM_PATH_EAGER);
	if (ret < 0)
		rdmem_agent_session_bound(s, rdmem_errno_status(ret), 0, 0);
}

static void rdmem_agent_session_adopt(struct rdmem_agent_session *s)
{
	/* Pairs with the connector's release exchange: the link is fully built. */
	struct rdmem_link *l = atomic_exchange_explicit(&s->mailbox, NULL, memory_order_acquire);

	if (!l)
		return;
	if (rdmem_rdma_create(l, &rdmem_agent_session_rdma_ops, s, &s->rdma) < 0) {
		rdmem_link_close(l);
		atomic_store_explicit(&s->want_link, 1, memory_order_release);
		rdmem_queue_ring(&s->connector_bell);
		return;
	}
	rdmem_rdma_set_stall_ms(s->rdma, s->cfg.stall_ms);
	s->link = l;
	rdmem_agent_session_bind(s);
	/* A new link starts clean, but for errors injected at start-up. */
	s->pst.rdma_errors = s->cfg.sim.rdma_errors;
	if (s->cfg.sim.rdma_errors)
		s->last_error_ns = rdmem_now_ns();
	s->cfg.sim.rdma_errors = 0;
	atomic_store_explicit(&s->cnt.link_up, 1, memory_order_relaxed);
	rdmem_agent_count(&s->cnt.link_opens, 1);
	rdmem_info("rdma: session %u with %s:%u%s%s over %s: %u slots x %u B", l->w.session_id,
		   s->cfg.server, s->cfg.port, s->cfg.source ? " from " : "",
		   s->cfg.source ? s->cfg.source : "", rdmem_fab_kind_name(s->cfg.fabric), l->slots,
		   l->slot_bytes);
}

/*
 * Verbs pins the link's region and, at worst (every client moving large
 * payloads at once), every client's area (zero copy). Under a locked-memory
 * limit too low for that every dial
 * would fail the same way, so the agent says so once, plainly, and leaves
 * RDMA off: AUTO calls go over TCP, forced RDMA paths time out as unreachable.
 * The limit of a running process is not expected to change: restart it.
 */
static int rdmem_agent_memlock_short(struct rdmem_agent_session *s,
				     const struct rdmem_link_config *lc)
{
	uint64_t need, limit;
	uint64_t link = 0, areas;

	if (!rdmem_link_memlock_short(lc, &need, &limit))
		return 0;
	rdmem_link_memlock_short(&(struct rdmem_link_config){ .fabric = lc->fabric,
							      .ring_slots = lc->ring_slots,
							      .resp_bytes = lc->resp_bytes },
				 &link, &limit);
	areas = need - link;
	rdmem_err("rdma: off: RDMA may pin %llu KiB (link regions %llu KiB, + front-door "
		  "client slots up to %llu KiB as --max-client-mem/--max-total-mem allow) but the "
		  "locked-memory limit is %llu KiB and the agent lacks CAP_IPC_LOCK. Every call "
		  "goes over TCP. Raise the limit (`ulimit -l unlimited`, or LimitMEMLOCK=infinity "
		  "for a systemd service) or lower --max-total-mem, then restart the agent",
		  (unsigned long long)need / 1024, (unsigned long long)link / 1024,
		  (unsigned long long)areas / 1024, (unsigned long long)limit / 1024);
	atomic_store_explicit(&s->cnt.memlock_short, 1, memory_order_relaxed);
	return 1;
}

/* Where the front door's client slots are, and the budget they pin under. */
static void rdmem_agent_session_fd_view(struct rdmem_agent_session *s, struct rdmem_link_config *lc)
{
	struct rdmem_frontdoor_areas a;

	rdmem_frontdoor_areas(s->fd, &a);
	lc->fd_base = a.base;
	lc->fd_area_off = a.area_off;
	lc->fd_area_len = a.area_len;
	lc->fd_clients = a.clients;
	lc->fd_slots = a.slots;
	lc->fd_slot_size = a.slot_size;
	lc->fd_payload_off = a.payload_off;
	lc->fd_payload_cap = a.payload_cap;
	lc->pin = a.pin;
}

static void *rdmem_agent_connector(void *arg)
{
	struct rdmem_agent_session *s = arg;
	struct rdmem_link_config lc = { .fabric = s->cfg.fabric,
					.host = s->cfg.server,
					.port = s->cfg.port,
					.ring_slots = s->cfg.ring_slots,
					.resp_bytes = s->cfg.resp_bytes,
					.timeout_ms = s->cfg.connect_timeout_ms,
					.src_addr = s->cfg.source,
					.auth = s->cfg.auth,
					.max_reads = s->cfg.max_reads,
					.max_value = s->cfg.max_value };
	uint64_t backoff = RDMEM_REDIAL_MIN_NS;
	struct rdmem_link *l;

	pthread_setname_np(pthread_self(), "rdmem-connect"); /* ps -L, top -H, the idle test */
	rdmem_agent_session_fd_view(s, &lc);
	if (rdmem_agent_memlock_short(s, &lc))
		return NULL; /* no link can ever come up: TCP carries every call */
	while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
		struct pollfd pfd = { s->connector_bell.efd, POLLIN, 0 };

		/* Every store of want_link = 1, and stop, rings the bell: no timer. */
		if (!atomic_load_explicit(&s->want_link, memory_order_acquire)) {
			if (poll(&pfd, 1, -1) > 0)
				rdmem_queue_woke(&s->connector_bell);
			continue;
		}
		if (rdmem_link_open(&lc, &l) < 0) {
			poll(&pfd, 1, (int)(backoff / 1000000));
			backoff = RDMEM_MIN(backoff * 2, RDMEM_REDIAL_MAX_NS);
			continue;
		}
		backoff = RDMEM_REDIAL_MIN_NS;
		atomic_store_explicit(&s->want_link, 0, memory_order_relaxed);
		/* Pairs with the session's acquire exchange in adopt(). */
		atomic_store_explicit(&s->mailbox, l, memory_order_release);
		rdmem_queue_ring(&s->in);
	}
	return NULL;
}

/* ---- routing calls ---------------------------------------------------------- */

static void rdmem_agent_session_refresh_state(struct rdmem_agent_session *s)
{
	const struct rdmem_simulate *sim = &s->cfg.sim;
	uint32_t ring = s->rdma ? rdmem_rdma_ring_used_pct(s->rdma) : 0, pool = 0;

	if (s->have_ctrl && s->ctrl.ring_slots) {
		ring = RDMEM_MAX(
		    ring, (uint32_t)((uint64_t)s->ctrl.ring_backlog * 100 / s->ctrl.ring_slots));
		if (s->ctrl.objpool_bytes)
			pool = (uint32_t)(s->ctrl.objpool_used * 100 / s->ctrl.objpool_bytes);
	}
	if (sim->pressure == RDMEM_PRESSURE_RING)
		ring = 100;
	if (sim->pressure == RDMEM_PRESSURE_OBJPOOL)
		pool = 100;
	s->pst.rdma_up = s->rdma && !sim->rdma_down && !s->link_err;
	rdmem_path_geometry(&s->pst, s->link);
	s->pst.ring_used_pct = ring;
	s->pst.objpool_used_pct = pool;
	if (s->pst.rdma_errors && rdmem_now_ns() - s->last_error_ns > RDMEM_ERROR_COOLDOWN_NS)
		s->pst.rdma_errors = 0;
}

static uint8_t rdmem_agent_session_choose(struct rdmem_agent_session *s,
					  const struct rdmem_agent_call *call)
{
	struct rdmem_path_call pc = { call->forced_path, rdmem_desc_payload_len(&call->req),
				      rdmem_path_expected_reply(&call->req, call->key) };

	return (uint8_t)rdmem_select_path(&s->cfg.path, &s->pst, &pc);
}

/* Posts an RDMA call; returns 0 when it was taken care of, -EAGAIN to keep it pending. */
static int rdmem_agent_session_post(struct rdmem_agent_session *s, struct rdmem_agent_call *call)
{
	uint8_t was;
	int ret;

	if (!s->rdma || s->cfg.sim.rdma_down || s->link_err)
		return -EAGAIN;
	if (!s->rdma_bound)
		return -EBUSY; /* a moment: the link's BIND is on its way */
	if (s->cfg.sim.op_fail) {
		s->cfg.sim.op_fail--;
		rdmem_agent_session_failed(s, call, -EIO, 1);
		return 0;
	}
	was = rdmem_agent_ident_sent(s->ident, call);
	if (s->cfg.sim.link_break) {
		s->cfg.sim.link_break--;
		ret = -ECONNRESET; /* what a post to a QP in the error state gets */
	} else {
		ret = rdmem_rdma_submit(s->rdma, call, call->path);
	}
	if (ret == -EINPROGRESS)
		ret = -EDQUOT; /* its slot's registration is the actor's to make: it waits */
	if (ret == -EAGAIN || ret == -EBUSY || ret == -EDQUOT || ret == -ENOMEM)
		rdmem_agent_ident_unsent(call, was); /* not posted: it waits */
	if (ret == 0 || ret == -EAGAIN || ret == -EBUSY || ret == -EDQUOT)
		return ret;
	if (ret == -E2BIG) {
		rdmem_agent_session_fail(s, call, RDMEM_S_TOO_BIG);
		return 0;
	}
	/* The client's area could not be registered (a local limit, not an
	 * RDMA error: the link and the other clients are fine). */
	if (ret == -ENOMEM) {
		if (!rdmem_agent_session_to_tcp(s, call))
			rdmem_agent_session_fail(s, call, RDMEM_S_NO_MEMORY);
		return 0;
	}
	/* The link goes first: nothing of it may touch memory a retry reuses. */
	rdmem_agent_session_link_lost(s, ret);
	if (s->fd_holds) {
		s->post_failed = call; /* failed once the actor dropped the link */
		return 0;
	}
	rdmem_agent_session_failed(s, call, ret, 1);
	return 0;
}

static void rdmem_agent_session_route(struct rdmem_agent_session *s, struct rdmem_agent_call *call)
{
	rdmem_agent_session_refresh_state(s);
	call->path = rdmem_agent_session_choose(s, call);
	rdmem_agent_count_call(&s->cnt, call->path);
	if (call->path == RDMEM_PATH_TCP) {
		/* Traffic, even on TCP: the page that sent it there (server
		 * pressure) must be read again, or it never would be. */
		if (s->rdma)
			rdmem_rdma_note_call(s->rdma);
		rdmem_tcp_actor_submit(s->tcp, call);
		return;
	}
	switch (rdmem_agent_session_post(s, call)) {
	case 0:
		return;
	case -EBUSY:  /* the server holds our group for a moment: wait for it */
	case -EDQUOT: /* a registration of this link's budget: wait for it */
		rdmem_agent_session_pend(s, call);
		return;
	default:
		/* No room in the ring: AUTO takes TCP rather than wait. */
		if (rdmem_agent_session_auto(s, call) && s->rdma) {
			rdmem_agent_count(&s->cnt.fallbacks, 1);
			call->path = RDMEM_PATH_TCP;
			rdmem_tcp_actor_submit(s->tcp, call);
			return;
		}
		rdmem_agent_session_pend(s, call);
	}
}

/* Posts what the round built (one doorbell); a post that fails breaks the link. */
static void rdmem_agent_session_flush(struct rdmem_agent_session *s)
{
	int ret;

	if (s->rdma && !s->link_err && (ret = rdmem_rdma_flush(s->rdma)) < 0)
		rdmem_agent_session_link_lost(s, ret);
}

/* Retries pending calls in order; stops at the first that still cannot go. */
static int rdmem_agent_session_retry_pending(struct rdmem_agent_session *s)
{
	struct rdmem_agent_call **pp = &s->pending_head, *call;
	int n = 0;

	while ((call = *pp)) {
		struct rdmem_agent_call *next = call->next;
		int ret;

		/*
		 * Unlinked before it is posted: once posted (or failed over to
		 * TCP) the call may complete on another thread, its client
		 * resubmit and the front door refill this very struct, so it
		 * must not be read after (TSan caught call->next read late).
		 */
		*pp = next;
		ret = rdmem_agent_session_post(s, call);
		if (ret == -EAGAIN || ret == -EBUSY || ret == -EDQUOT) {
			call->next = next; /* not taken: still ours, back in its place */
			*pp = call;
			pp = &call->next;
			/* A call waiting for its registration (its client's budget)
			 * holds back no other call; a full ring or a held group
			 * holds back all of them. */
			if (ret != -EDQUOT)
				break;
			continue;
		}
		n++;
	}
	/* The tail: the last call left (the list is short, and this runs only
	 * while calls are pending). */
	for (s->pending_tail = NULL, call = s->pending_head; call; call = call->next)
		s->pending_tail = call;
	return n;
}

static void rdmem_agent_session_expire(struct rdmem_agent_session *s, uint64_t now)
{
	struct rdmem_agent_call **pp = &s->pending_head, *call;

	if (now < s->expire_at)
		return;
	s->expire_at = now + RDMEM_SESSION_EXPIRE_NS;
	s->pending_tail = NULL;
	while ((call = *pp)) {
		if (now >= call->deadline_ns) {
			*pp = call->next;
			rdmem_agent_session_fail(s, call,
						 s->rdma ? RDMEM_S_TIMEOUT : RDMEM_S_UNREACHABLE);
			continue;
		}
		s->pending_tail = call;
		pp = &call->next;
	}
	if (s->rdma)
		rdmem_rdma_expire(s->rdma, now);
}

/* ---- agent-local ops ----------------------------------------------------------- */

static void rdmem_agent_session_snapshot(struct rdmem_agent_session *s,
					 struct rdmem_agent_snapshot *snap)
{
	memset(snap, 0, sizeof(*snap));
	rdmem_frontdoor_get_stats(s->fd, &snap->fd);
	rdmem_tcp_actor_get_stats(s->tcp, &snap->tcp);
	if (s->rdma)
		rdmem_rdma_get_stats(s->rdma, &snap->rdma);
	rdmem_agent_counters_read(&s->cnt, snap);
	snap->fabric = s->cfg.fabric;
	snap->sim = s->cfg.sim;
	snap->force = s->cfg.path.force;
	snap->rdma_errors = s->pst.rdma_errors;
	snap->have_ctrl = s->have_ctrl;
	snap->ctrl = s->ctrl;
	rdmem_agent_snapshot_names(snap);
}

static void rdmem_agent_session_stats_reply(struct rdmem_agent_session *s,
					    struct rdmem_agent_call *call)
{
	struct rdmem_agent_snapshot snap;
	uint32_t off = rdmem_call_reply_off(call);
	struct rdmem_agent_reply rep = { RDMEM_S_OK, 0, 0, off, 0, { 0, 0, 0 } };
	int n;

	rdmem_agent_session_snapshot(s, &snap);
	n = rdmem_agent_stats_format(&snap, !!(call->req.flags & RDMEM_F_JSON),
				     (char *)call->payload + off, rdmem_call_reply_cap(call));
	if (n < 0)
		rep.status = RDMEM_S_TOO_BIG;
	else
		rep.val_len = (uint32_t)n;
	rdmem_agent_session_done(s, call, &rep, RDMEM_PATH_AUTO);
}

static void rdmem_agent_session_answer_stats(struct rdmem_agent_session *s)
{
	struct rdmem_agent_call *call;

	while ((call = s->stats_wait)) {
		s->stats_wait = call->next;
		rdmem_agent_session_stats_reply(s, call);
	}
}

/* Stats carry the server's control page as it is now, not as last seen. */
static void rdmem_agent_session_stats(struct rdmem_agent_session *s, struct rdmem_agent_call *call)
{
	if (!s->rdma || rdmem_rdma_refresh_ctrl(s->rdma) < 0) {
		rdmem_agent_session_stats_reply(s, call);
		return;
	}
	call->next = s->stats_wait;
	s->stats_wait = call;
}

/* Applies one `rdmem agent-ctl CMD ARG`; returns 0 or -EINVAL. */
static int rdmem_agent_apply_ctl(struct rdmem_simulate *sim, struct rdmem_path_config *path,
				 const char *cmd, const char *arg)
{
	uint64_t n;

	if (strcmp(cmd, "simulate-rdma-down") == 0 && (!strcmp(arg, "on") || !strcmp(arg, "off")))
		sim->rdma_down = strcmp(arg, "on") == 0;
	else if (strcmp(cmd, "simulate-rdma-op-fail") == 0 && !rdmem_parse_size(arg, &n) &&
		 n <= UINT32_MAX)
		sim->op_fail = (uint32_t)n;
	else if (strcmp(cmd, "simulate-rdma-reply-loss") == 0 && !rdmem_parse_size(arg, &n) &&
		 n <= UINT32_MAX)
		sim->reply_loss = (uint32_t)n;
	else if (strcmp(cmd, "simulate-rdma-link-break") == 0 && !rdmem_parse_size(arg, &n) &&
		 n <= UINT32_MAX)
		sim->link_break = (uint32_t)n;
	else if (strcmp(cmd, "simulate-rdma-errors") == 0 && !rdmem_parse_size(arg, &n) &&
		 n <= UINT32_MAX)
		sim->rdma_errors = (uint32_t)n;
	else if (strcmp(cmd, "simulate-server-pressure") == 0 && !strcmp(arg, "ring"))
		sim->pressure = RDMEM_PRESSURE_RING;
	else if (strcmp(cmd, "simulate-server-pressure") == 0 && !strcmp(arg, "objpool"))
		sim->pressure = RDMEM_PRESSURE_OBJPOOL;
	else if (strcmp(cmd, "simulate-server-pressure") == 0 && !strcmp(arg, "off"))
		sim->pressure = RDMEM_PRESSURE_NONE;
	else if (strcmp(cmd, "force-path") == 0)
		return rdmem_path_parse(arg, &path->force);
	else
		return -EINVAL;
	return 0;
}

/* The TCP actor's fault: "simulate-tcp-reply-loss N". */
static uint16_t rdmem_agent_tcp_ctl(struct rdmem_agent_session *s, const char *arg)
{
	uint64_t n;

	if (rdmem_parse_size(arg, &n) || n > UINT32_MAX)
		return RDMEM_S_BAD_REQUEST;
	rdmem_tcp_actor_simulate_reply_loss(s->tcp, (uint32_t)n);
	return RDMEM_S_OK;
}

/* `rdmem lifecycle`'s fault: "simulate-reclaim stale|repeat|withhold|release|off"
 * bends the RECLAIM of the next LAZY object this session's link reads. */
static uint16_t rdmem_agent_reclaim_ctl(struct rdmem_agent_session *s, const char *arg)
{
	static const char *const names[] = { "off", "stale", "repeat", "withhold", "release" };
	unsigned f;

	for (f = 0; f < RDMEM_ARRAY_SIZE(names) && strcmp(arg, names[f]); f++)
		;
	if (f == RDMEM_ARRAY_SIZE(names))
		return RDMEM_S_BAD_REQUEST;
	if (!s->rdma)
		return RDMEM_S_UNREACHABLE; /* no RDMA link: no LAZY object to bend */
	return rdmem_rdma_reclaim_fault(s->rdma, (enum rdmem_rdma_reclaim_fault)f)
		   ? RDMEM_S_NOT_FOUND
		   : RDMEM_S_OK;
}

/* AGENT_CTL: the key holds "COMMAND ARG", e.g. "simulate-rdma-down on". */
static void rdmem_agent_session_ctl(struct rdmem_agent_session *s, struct rdmem_agent_call *call)
{
	char line[RDMEM_MAX_KEY + 1], *arg;
	uint16_t st;

	memcpy(line, call->key, call->req.key_len);
	line[call->req.key_len] = '\0';
	arg = strchr(line, ' ');
	if (arg)
		*arg++ = '\0';
	if (strcmp(line, "simulate-tcp-reply-loss") == 0)
		st = rdmem_agent_tcp_ctl(s, arg ? arg : "");
	else if (strcmp(line, "simulate-reclaim") == 0)
		st = rdmem_agent_reclaim_ctl(s, arg ? arg : "");
	else
		st = rdmem_agent_apply_ctl(&s->cfg.sim, &s->cfg.path, line, arg ? arg : "")
			 ? RDMEM_S_BAD_REQUEST
			 : RDMEM_S_OK;
	if (st == RDMEM_S_OK) {
		rdmem_info("agent-ctl: %s %s", line, arg ? arg : "");
		/* A one-shot error burst lands in the count the selector reads. */
		s->pst.rdma_errors += s->cfg.sim.rdma_errors;
		if (s->cfg.sim.rdma_errors)
			s->last_error_ns = rdmem_now_ns();
		s->cfg.sim.rdma_errors = 0;
	} else {
		rdmem_warn("agent-ctl: refused '%s'", line);
	}
	rdmem_agent_session_fail(s, call, st);
}

static void rdmem_agent_session_take(struct rdmem_agent_session *s, struct rdmem_agent_call *call)
{
	switch (call->req.op) {
	case RDMEM_SHM_OP_AGENT_STATS:
		rdmem_agent_session_stats(s, call);
		return;
	case RDMEM_SHM_OP_AGENT_CTL:
		rdmem_agent_session_ctl(s, call);
		return;
	default:
		rdmem_agent_ident_tag(s->ident, call);
		rdmem_agent_session_route(s, call);
	}
}

/* ---- the actor loop ------------------------------------------------------------ */

static int rdmem_agent_session_poll_rdma(struct rdmem_agent_session *s)
{
	uint64_t now = rdmem_now_ns();
	int n, ret;

	if (!s->rdma)
		return 0;
	n = rdmem_rdma_progress(s->rdma);
	if (n >= 0 && (ret = rdmem_rdma_housekeeping(s->rdma, now)) < 0)
		n = ret;
	if (n >= 0 && (ret = rdmem_rdma_flush(s->rdma)) < 0)
		n = ret;
	if (n >= 0 && now - s->check_at > RDMEM_SESSION_CHECK_NS) {
		s->check_at = now;
		if (rdmem_fab_check(s->link->conn) < 0)
			n = -ECONNRESET;
	}
	if (n < 0) {
		/* -ETIMEDOUT: our own liveness check found the path dead
		 * (rdmem_rdma_housekeeping); the connector redials with backoff
		 * and RDMA comes back when a dial gets through. */
		if (n == -ETIMEDOUT)
			rdmem_agent_count(&s->cnt.link_stalls, 1);
		rdmem_agent_session_link_lost(s, n);
		return 1;
	}
	return n;
}

/*
 * Sleep no longer than until the first pending call's deadline; with nothing
 * pending or outstanding, until an event: a call (the queue's eventfd, also
 * rung by the connector with a new link), a completion, or the link's
 * connection event (a peer that died or disconnected), so an idle agent
 * does not wake at all (-1). Nanoseconds: a grouping hold is a fraction of
 * a 500 us slice, and a sleep rounded up to a millisecond missed the
 * warm-up it ends at and most of the turn (found by review).
 */
static int64_t rdmem_agent_session_block_ns(const struct rdmem_agent_session *s)
{
	uint64_t now = rdmem_now_ns(), first = now + RDMEM_SESSION_BLOCK_MS * 1000000ull;
	const struct rdmem_agent_call *call;

	if (!s->pending_head && !s->stats_wait && (!s->rdma || rdmem_rdma_quiet(s->rdma)))
		return -1;

	for (call = s->pending_head; call; call = call->next)
		first = RDMEM_MIN(first, call->deadline_ns);
	/* Calls, RECLAIMs and control-page reads held for the server's
	 * grouping go out when the hold ends. */
	if (s->rdma && rdmem_rdma_hold_until(s->rdma) > now)
		first = RDMEM_MIN(first, rdmem_rdma_hold_until(s->rdma));
	return first <= now ? 0 : (int64_t)(first - now);
}

static void rdmem_agent_session_publish(struct rdmem_agent_session *s, uint64_t now, int force);
static int rdmem_agent_session_round(struct rdmem_agent_session *s);

/*
 * Under the token: one more round (after prepare_sleep, so whatever a ring
 * we may have drained while the front door held the token asked for, or
 * the front door left pending, is looked at before we sleep), then arms the
 * link's completions and works out how long to sleep. -2: don't sleep (the
 * round found work, or the front door holds the token and is taking calls
 * whose completions may be ours to reap).
 */
static int64_t rdmem_agent_session_prepare_block(struct rdmem_agent_session *s, struct pollfd *pfd,
						 int *nfd)
{
	int64_t ns = -2;

	if (!rdmem_agent_session_actor_try_own(s, RDMEM_SESSION_WANT_MISSES))
		return -2;
	if (rdmem_agent_session_round(s))
		goto out;
	rdmem_agent_session_publish(s, rdmem_now_ns(), 1); /* exact while asleep */
	if (s->rdma) {
		if (rdmem_fab_arm(s->link->conn) < 0 || rdmem_agent_session_poll_rdma(s))
			goto out;
		pfd[1].fd = rdmem_fab_comp_fd(s->link->conn);
		pfd[2].fd = rdmem_fab_event_fd(s->link->conn);
		*nfd = 3;
	}
	ns = rdmem_agent_session_block_ns(s);
	/* Read by a front door that takes calls while we sleep: it rings
	 * in.efd, since nothing else would make us look at their deadlines or
	 * at those it left pending. */
	s->asleep = 1;
out:
	rdmem_agent_session_disown(s);
	return ns;
}

static void rdmem_agent_session_block(struct rdmem_agent_session *s)
{
	struct pollfd pfd[3] = { { s->in.efd, POLLIN, 0 }, { -1, POLLIN, 0 }, { -1, POLLIN, 0 } };
	struct timespec ts;
	int nfd = 1;
	int64_t ns;

	if (!rdmem_queue_prepare_sleep(&s->in))
		return;
	/* A side push rings in.efd after its push: poll sees it if we miss it here. */
	if (!rdmem_queue_empty(&s->side)) {
		rdmem_queue_woke(&s->in);
		return;
	}
	ns = rdmem_agent_session_prepare_block(s, pfd, &nfd);
	if (ns == -2) {
		rdmem_queue_woke(&s->in);
		return;
	}
	/* s->link and s->rdma change on this thread only (adopt, link_lost):
	 * the front door never replaces them, so they are read here unowned. */
	ts.tv_sec = ns / 1000000000;
	ts.tv_nsec = ns % 1000000000;
	if (ppoll(pfd, (nfds_t)nfd, ns < 0 ? NULL : &ts, NULL) < 0 && errno != EINTR)
		rdmem_err("session actor poll: %s", strerror(errno));
	if (s->rdma && (pfd[1].revents || pfd[2].revents)) {
		rdmem_agent_session_own(s);
		if (pfd[1].revents)
			rdmem_fab_ack(s->link->conn);
		if (pfd[2].revents)
			s->check_at = 0; /* look at the link on the next round */
		rdmem_agent_session_disown(s);
	}
	rdmem_queue_woke(&s->in);
}

/*
 * RDMA state is the actor's own: /metrics sees it through these gauges.
 * Publishing costs ~460 instructions, as much as a tenth of a call at window
 * 32 when done every busy round, so under load it happens at most every
 * RDMEM_SESSION_PUBLISH_NS, and before the actor sleeps (exact once quiet).
 * AGENT_STATS does not read them: the actor answers it from its own state.
 */
#define RDMEM_SESSION_PUBLISH_NS 1000000ull

static void rdmem_agent_session_publish(struct rdmem_agent_session *s, uint64_t now, int force)
{
	struct rdmem_rdma_stats st;

	if (!s->publish_due || (!force && now - s->published_ns < RDMEM_SESSION_PUBLISH_NS))
		return;
	s->publish_due = 0;
	s->published_ns = now;
	if (s->rdma)
		rdmem_rdma_get_stats(s->rdma, &st);
	rdmem_agent_gauges_publish(&s->gauges, s->rdma ? &st : NULL, s->have_ctrl ? &s->ctrl : NULL,
				   s->pst.rdma_errors, &s->cfg.sim, s->cfg.path.force);
}

/* The front door's reclaim hook (actor thread): wake the session to let go
 * of the entry's area registration. */
void rdmem_agent_session_released(void *ctx, uint32_t client)
{
	struct rdmem_agent_session *s = ctx;

	(void)client; /* every stale registration is found by its serial */
	/* Release: the entry's serial went to 0 before; pairs with the acquire
	 * exchange in rdmem_agent_session_drop_areas(). */
	atomic_store_explicit(&s->area_sweep, 1, memory_order_release);
	rdmem_queue_ring(&s->in);
}

static uint64_t rdmem_agent_session_serial(void *ctx, uint32_t client)
{
	return rdmem_frontdoor_client_serial(((struct rdmem_agent_session *)ctx)->fd, client);
}

/*
 * With verbs a departed client's slot registrations pin their pages (and
 * hold their share of the pinned-memory budget) until they go; one a WR
 * may still use goes after the
 * fence READ (its completion wakes us; areas_waiting keeps us looking). A
 * link that went down took its registrations with it. Returns how many went.
 */
static int rdmem_agent_session_drop_areas(struct rdmem_agent_session *s)
{
	/* Acquire: pairs with the release store in
	 * rdmem_agent_session_released(), made after the entry's serial went 0. */
	int asked = atomic_load_explicit(&s->area_sweep, memory_order_relaxed) &&
		    atomic_exchange_explicit(&s->area_sweep, 0, memory_order_acquire);
	int waiting = 0, dropped = 0;

	if (!asked && !s->areas_waiting)
		return 0;
	if (s->rdma)
		dropped = rdmem_rdma_drop_areas(s->rdma, rdmem_agent_session_serial, s, &waiting);
	s->areas_waiting = waiting > 0;
	return dropped;
}

void rdmem_agent_session_wake(struct rdmem_agent_session *s)
{
	rdmem_queue_ring(&s->in);
}

/*
 * Another link's registration found the budget used up (agent/pin.h): let
 * go of every idle registration of ours, and once more after the fence
 * that those a WR might still read wait for. Only once more: on a busy
 * link a fence is always owed by someone, and repeating would drop each
 * registration as soon as its call ended, for ever.
 */
static int rdmem_agent_session_shed(struct rdmem_agent_session *s)
{
	uint64_t gen = rdmem_pin_shed_gen(rdmem_frontdoor_pin(s->fd)), ignored;

	if (!s->rdma) {
		s->shed_seen = gen;
		s->shed_after = 0;
		return 0;
	}
	if (gen != s->shed_seen) {
		s->shed_seen = gen;
		return rdmem_rdma_shed_idle(s->rdma, &s->shed_after);
	}
	if (!s->shed_after || !rdmem_rdma_done_past(s->rdma, s->shed_after))
		return 0;
	s->shed_after = 0;
	return rdmem_rdma_shed_idle(s->rdma, &ignored);
}

/* A post failed in the front door's batch: the link goes, then its calls. */
static int rdmem_agent_session_batch_failures(struct rdmem_agent_session *s)
{
	struct rdmem_agent_call *call = s->post_failed;
	int err = s->link_err;

	if (!err)
		return 0;
	s->link_err = 0;
	s->post_failed = NULL;
	rdmem_info("rdma: a post on the front door's thread broke the link; dropping it here");
	rdmem_agent_session_link_lost(s, err);
	if (call)
		rdmem_agent_session_failed(s, call, err, 1);
	return 1;
}

static int rdmem_agent_session_round(struct rdmem_agent_session *s)
{
	struct rdmem_agent_call *call;
	uint64_t now;
	int work;

	s->asleep = 0;
	work = rdmem_agent_session_batch_failures(s);
	rdmem_agent_session_adopt(s);
	while ((call = rdmem_queue_pop(&s->in))) {
		rdmem_agent_session_take(s, call);
		work++;
	}
	while ((call = rdmem_queue_pop(&s->side))) {
		rdmem_agent_session_take(s, call);
		work++;
	}
	work += rdmem_agent_session_drop_areas(s); /* publishes areas_live */
	work += rdmem_agent_session_shed(s);
	work += rdmem_agent_session_poll_rdma(s);
	work += rdmem_agent_session_retry_pending(s);
	rdmem_agent_session_flush(s);
	now = rdmem_now_ns();
	rdmem_agent_session_expire(s, now);
	s->publish_due |= work != 0;
	rdmem_agent_session_publish(s, now, 0);
	return work;
}

static void *rdmem_agent_session_main(void *arg)
{
	struct rdmem_agent_session *s = arg;
	struct rdmem_idle idle;

	pthread_setname_np(pthread_self(), "rdmem-session"); /* ps -L, top -H, the idle test */
	/* Confined to one CPU, this actor shares it with the front door and
	 * the apps it completes calls for: a spin after a call only delays them. */
	rdmem_idle_init(&idle, rdmem_affinity_single_cpu());
	rdmem_frontdoor_defer_wakes(); /* made in disown() */
	while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
		int work = 0;

		/* Not ours this moment: the front door is taking calls. */
		if (rdmem_agent_session_actor_try_own(s, RDMEM_SESSION_WANT_MISSES)) {
			work = rdmem_agent_session_round(s);
			rdmem_agent_session_disown(s);
		}
		if (rdmem_idle_after(&idle, work, s->cfg.busy_poll))
			rdmem_agent_session_block(s);
	}
	return NULL;
}

/*
 * The front door takes the call itself when the token is free (the actor
 * is between rounds, yielding or asleep): it saves the hand-off to the
 * actor's thread, which on a shared CPU is a context switch per call. It
 * keeps the token until rdmem_agent_session_batch_end(). Otherwise the call
 * goes through the queue, as it always may.
 */
static void rdmem_agent_session_take_inline(struct rdmem_agent_session *s,
					    struct rdmem_agent_call *call)
{
	s->fd_took++;
	rdmem_agent_count(&s->cnt.inline_calls, 1);
	rdmem_agent_session_take(s, call);
}

void rdmem_agent_session_submit(void *ctx, struct rdmem_agent_call *call)
{
	struct rdmem_agent_session *s = ctx;
	struct rdmem_agent_call *queued;

	/* Relaxed: a hint (see actor_wants). */
	if (!s->fd_holds && !atomic_load_explicit(&s->actor_wants, memory_order_relaxed) &&
	    rdmem_agent_session_try_own(s)) {
		s->fd_holds = 1;
		if (s->rdma) /* a registration may sleep in the kernel: the actor's */
			rdmem_rdma_may_register(s->rdma, 0);
		/* Calls queued while the actor held the token go first. */
		while ((queued = rdmem_queue_pop(&s->in)))
			rdmem_agent_session_take_inline(s, queued);
	}
	if (s->fd_holds) {
		rdmem_agent_session_take_inline(s, call);
		return;
	}
	if (rdmem_queue_push(&s->in, call) < 0)
		rdmem_err("session queue sized wrong: call dropped");
}

void rdmem_agent_session_batch_end(struct rdmem_agent_session *s)
{
	int ring;

	if (!s->fd_holds)
		return;
	rdmem_agent_session_flush(s); /* one doorbell for the batch */
	if (s->rdma)
		rdmem_rdma_may_register(s->rdma, 1);
	/* An actor asleep learns of the calls (deadlines, pending ones) and of
	 * a link to drop only from us; one awake finds them next round. */
	ring = s->link_err || (s->asleep && s->fd_took);
	if (ring)
		s->asleep = 0;
	s->publish_due |= s->fd_took != 0; /* the gauges /metrics shows */
	s->fd_took = 0;
	s->fd_holds = 0; /* before the release: the next owner reads it */
	rdmem_agent_session_disown(s);
	if (ring)
		rdmem_queue_ring(&s->in);
}

void rdmem_agent_session_submit_any(struct rdmem_agent_session *s, struct rdmem_agent_call *call)
{
	int ret;

	pthread_mutex_lock(&s->side_lock);
	ret = rdmem_queue_push(&s->side, call);
	pthread_mutex_unlock(&s->side_lock);
	if (ret < 0)
		rdmem_err("session side queue sized wrong: call dropped");
	rdmem_queue_ring(&s->in); /* the actor sleeps on in's bell only */
}

void rdmem_agent_session_metrics(struct rdmem_agent_session *s, struct rdmem_agent_counters **cnt,
				 struct rdmem_call_metrics **calls,
				 struct rdmem_agent_gauges **gauges)
{
	*cnt = &s->cnt;
	*calls = &s->cm;
	*gauges = &s->gauges;
}

int rdmem_agent_session_start(const struct rdmem_agent_config *cfg, struct rdmem_frontdoor *fd,
			      struct rdmem_tcp_actor *tcp, struct rdmem_agent_session **out)
{
	struct rdmem_agent_session *s = calloc(1, sizeof(*s));
	uint32_t ncalls = cfg->clients * cfg->slots;
	int ret;

	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->fd = fd;
	s->tcp = tcp;
	s->ident = rdmem_tcp_actor_ident(tcp);
	if (rdmem_queue_init(&s->in, ncalls) < 0) {
		free(s);
		return -ENOMEM;
	}
	if (rdmem_queue_init(&s->side, ncalls) < 0) {
		rdmem_queue_fini(&s->in);
		free(s);
		return -ENOMEM;
	}
	if (rdmem_queue_init(&s->connector_bell, 1) < 0) {
		rdmem_queue_fini(&s->in);
		rdmem_queue_fini(&s->side);
		free(s);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->side_lock, NULL);
	atomic_store_explicit(&s->want_link, cfg->fabric != 0, memory_order_relaxed);
	ret = -pthread_create(&s->thread, NULL, rdmem_agent_session_main, s);
	if (ret == 0 && cfg->fabric) {
		ret = -pthread_create(&s->connector, NULL, rdmem_agent_connector, s);
		if (ret < 0) {
			atomic_store_explicit(&s->stop, 1, memory_order_release);
			pthread_join(s->thread, NULL);
		}
	}
	if (ret < 0) {
		rdmem_queue_fini(&s->in);
		rdmem_queue_fini(&s->side);
		rdmem_queue_fini(&s->connector_bell);
		pthread_mutex_destroy(&s->side_lock);
		free(s);
		return ret;
	}
	*out = s;
	return 0;
}

void rdmem_agent_session_stop(struct rdmem_agent_session *s)
{
	struct rdmem_agent_call *call;
	struct rdmem_link *l;

	if (!s)
		return;
	/* Pairs with the acquire loads at the top of both loops. */
	atomic_store_explicit(&s->stop, 1, memory_order_release);
	rdmem_queue_ring(&s->in);
	rdmem_queue_ring(&s->connector_bell);
	pthread_join(s->thread, NULL);
	if (s->cfg.fabric)
		pthread_join(s->connector, NULL);
	/* The front door no longer reaches us (stopped, or a reload unlisted
	 * us and waited for it to leave); owned for the record. */
	rdmem_agent_session_own(s);
	if ((l = atomic_exchange_explicit(&s->mailbox, NULL, memory_order_acquire)))
		rdmem_link_close(l);
	s->cfg.path.force = RDMEM_PATH_TCP; /* nothing may go back to RDMA now */
	rdmem_agent_session_drop_link(s);
	if (s->post_failed)
		rdmem_agent_session_fail(s, s->post_failed, RDMEM_S_SHUTDOWN);
	while ((call = rdmem_queue_pop(&s->in)))
		rdmem_agent_session_fail(s, call, RDMEM_S_SHUTDOWN);
	pthread_mutex_lock(&s->side_lock); /* a rerun may still be arriving */
	while ((call = rdmem_queue_pop(&s->side)))
		rdmem_agent_session_fail(s, call, RDMEM_S_SHUTDOWN);
	pthread_mutex_unlock(&s->side_lock);
	while ((call = s->pending_head)) {
		s->pending_head = call->next;
		rdmem_agent_session_fail(s, call, RDMEM_S_SHUTDOWN);
	}
	rdmem_agent_session_answer_stats(s);
	rdmem_queue_fini(&s->in);
	rdmem_queue_fini(&s->side);
	rdmem_queue_fini(&s->connector_bell);
	pthread_mutex_destroy(&s->side_lock);
	free(s);
}
