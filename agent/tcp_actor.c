/* tcp_actor.c - the agent's TCP fallback actor (see tcp_actor.h). */
#include "agent/tcp_actor.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <time.h>

#include "agent/metrics.h"
#include "agent/queue.h"
#include "tcp/client.h"
#include "common/affinity.h"
#include "rdmem/idle.h"
#include "rdmem/util.h"

#define RDMEM_TCP_BACKOFF_MIN_NS 50000000ull   /* 50 ms */
#define RDMEM_TCP_BACKOFF_MAX_NS 2000000000ull /* 2 s */
/* A server that refused every dial for this long is down: a call fails
 * (-EHOSTUNREACH) as soon as a dial made after it arrived has failed,
 * instead of waiting out its deadline. Longer than a restart, so calls
 * ride one out. */
#define RDMEM_TCP_DOWN_NS 3000000000ull
/* While it is down, a call that arrived since the last dial gets a dial of
 * its own this soon, not after the backoff (up to 2 s): a server that came
 * back is found by the next call, not up to 2 s of failures later. */
#define RDMEM_TCP_DOWN_REDIAL_NS 100000000ull
#define RDMEM_TCP_DONE_BATCH	 64
#define RDMEM_TCP_BUSY_TICK_MS	 50	    /* the longest sleep while calls are on the wire */
#define RDMEM_TCP_SENT_SCAN_NS	 5000000ull /* calls on the wire: deadline scan at most this often */
/* A call held past its deadline (rdmem_tcp_expire_sent): looked at again this
 * often, and let go at this much past its deadline even if that breaks the
 * connection (a server that stopped reading, or stalled mid-reply). */
#define RDMEM_TCP_HELD_LOOK_NS 10000000ull
#define RDMEM_TCP_HELD_MAX_NS  2000000000ull

/* Counters written by the actor only, read by stats: relaxed is enough. */
struct rdmem_tcp_counters {
	atomic_uint_fast64_t calls, ok, failed, retried, unreachable, timeouts, connects,
	    disconnects, bytes_out, bytes_in, mac_failures, tls_handshakes, tls_handshake_failures,
	    tls_record_failures, timeouts_held;
	atomic_uint connected, inflight, waiting;
};

struct rdmem_tcp_actor {
	struct rdmem_tcp_actor_config cfg;
	struct rdmem_frontdoor *fd;
	struct rdmem_queue in;
	struct rdmem_tcp_client *cli;
	struct rdmem_tcp_call *tcalls; /* one per (client, slot) */
	uint8_t *theld; /* per tcall: past its deadline, held until withdrawing tears nothing */
	struct rdmem_agent_call *wait_head, *wait_tail;
	uint32_t nwaiting;
	uint64_t next_connect_ns, backoff_ns;
	uint64_t down_since_ns; /* first failed dial since the last good one; 0: none */
	uint64_t dial_ns;	/* when the last dial started */
	/* Earliest deadline of the calls on the wire (may be stale: a lower
	 * bound), UINT64_MAX for none; and when they may next be scanned. */
	uint64_t sent_first_ns, sent_scan_ns;
	atomic_int stop;
	pthread_t thread;
	struct rdmem_tcp_counters c;
	struct rdmem_call_metrics cm;
	struct rdmem_agent_ident ident; /* exactly-once: see call.h */
	atomic_uint sim_reply_loss; /* fault injection: see rdmem_tcp_actor_simulate_reply_loss */
};

static void rdmem_tcp_count(atomic_uint_fast64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static struct rdmem_tcp_call *rdmem_tcp_slot(struct rdmem_tcp_actor *a,
					     const struct rdmem_agent_call *call)
{
	return &a->tcalls[(size_t)call->client * a->cfg.slots + call->slot];
}

static void rdmem_tcp_complete(struct rdmem_tcp_actor *a, struct rdmem_agent_call *call,
			       uint16_t status, const struct rdmem_desc *rep)
{
	struct rdmem_agent_reply r = { status, 0, 0, rdmem_call_reply_off(call), 0, { 0, 0, 0 } };

	if (rep) {
		r.flags = rep->flags;
		r.val_len = rep->val_len;
		r.aux = rep->aux;
		memcpy(r.args, rep->args.raw, sizeof(r.args));
		rdmem_tcp_count(&a->c.bytes_in, rep->val_len);
	}
	rdmem_call_name_server(call, &r, a->cfg.name);
	rdmem_tcp_count(status == RDMEM_S_OK ? &a->c.ok : &a->c.failed, 1);
	rdmem_call_metrics_done(&a->cm, call, RDMEM_PATH_TCP, status);
	call->path = RDMEM_PATH_TCP;
	rdmem_frontdoor_complete(a->fd, call, &r);
}

/* ---- waiting list: calls with no connection or no window yet ---------------- */

static void rdmem_tcp_wait_push(struct rdmem_tcp_actor *a, struct rdmem_agent_call *call)
{
	RDMEM_FIFO_PUSH(a->wait_head, a->wait_tail, call);
	a->nwaiting++;
}

static struct rdmem_agent_call *rdmem_tcp_wait_pop(struct rdmem_tcp_actor *a)
{
	struct rdmem_agent_call *call = a->wait_head;

	if (call) {
		a->wait_head = call->next;
		if (!a->wait_head)
			a->wait_tail = NULL;
		a->nwaiting--;
	}
	return call;
}

/* Fails waiting calls whose deadline passed: unreachable if we have no server. */
static void rdmem_tcp_expire(struct rdmem_tcp_actor *a, uint64_t now)
{
	uint32_t n = a->nwaiting;

	while (n--) {
		struct rdmem_agent_call *call = rdmem_tcp_wait_pop(a);

		if (now < call->deadline_ns) {
			rdmem_tcp_wait_push(a, call);
			continue;
		}
		if (a->cli) {
			rdmem_tcp_count(&a->c.timeouts, 1);
			rdmem_tcp_complete(a, call, RDMEM_S_TIMEOUT, NULL);
		} else {
			rdmem_tcp_count(&a->c.unreachable, 1);
			rdmem_tcp_complete(a, call, RDMEM_S_UNREACHABLE, NULL);
		}
	}
}

/* True when the server counts as down: no connection, every dial failed for RDMEM_TCP_DOWN_NS. */
static int rdmem_tcp_is_down(const struct rdmem_tcp_actor *a, uint64_t now)
{
	return !a->cli && a->down_since_ns && now - a->down_since_ns >= RDMEM_TCP_DOWN_NS;
}

/* The server is down: a waiting call that a failed dial began after fails
 * now; one that came later waits for its own dial. */
static void rdmem_tcp_fail_if_down(struct rdmem_tcp_actor *a, uint64_t now)
{
	uint32_t n = a->nwaiting;

	if (!rdmem_tcp_is_down(a, now))
		return;
	while (n--) {
		struct rdmem_agent_call *call = rdmem_tcp_wait_pop(a);

		if (call->start_ns >= a->dial_ns) {
			rdmem_tcp_wait_push(a, call);
			continue;
		}
		rdmem_tcp_count(&a->c.unreachable, 1);
		rdmem_tcp_complete(a, call, RDMEM_S_UNREACHABLE, NULL);
	}
}

/* Down, with a call newer than the last dial: dial soon, not after the backoff. */
static void rdmem_tcp_redial_for_new(struct rdmem_tcp_actor *a, uint64_t now)
{
	const struct rdmem_agent_call *call;

	if (!rdmem_tcp_is_down(a, now))
		return;
	for (call = a->wait_head; call; call = call->next)
		if (call->start_ns >= a->dial_ns) {
			a->next_connect_ns =
			    RDMEM_MIN(a->next_connect_ns, a->dial_ns + RDMEM_TCP_DOWN_REDIAL_NS);
			return;
		}
}

/* ---- connection ---------------------------------------------------------- */

/* Binds this connection to our identity, so a retry on it runs once. */
static int rdmem_tcp_bind(struct rdmem_tcp_actor *a)
{
	struct rdmem_tcp_call t;
	int ret;

	memset(&t, 0, sizeof(t));
	rdmem_agent_ident_bind_desc(&a->ident, &t.req);
	t.req.path = RDMEM_PATH_TCP;
	ret = rdmem_tcp_client_call(a->cli, &t, a->cfg.connect_timeout_ms);
	if (ret < 0) {
		rdmem_warn("tcp: binding agent %016llx on %s:%u: %s",
			   (unsigned long long)a->ident.agent_id, a->cfg.host, a->cfg.port,
			   strerror(-ret));
		return ret;
	}
	if (t.rep.status == RDMEM_S_DENIED) {
		/* The server wants AUTH first (we have no secret): it closes this
		 * connection, so none of our calls can go on it. */
		rdmem_err("tcp: %s:%u refused us: it requires the shared secret (--secret-file)",
			  a->cfg.host, a->cfg.port);
		return -EACCES;
	}
	rdmem_agent_ident_bound(&a->ident, t.rep.status, t.rep.aux, t.rep.args.raw[1], "tcp");
	return 0;
}

/* Closes the connection, keeping its counts of replies that failed their MAC or TLS. */
static void rdmem_tcp_close_client(struct rdmem_tcp_actor *a)
{
	rdmem_tcp_count(&a->c.mac_failures, rdmem_tcp_client_mac_failures(a->cli));
	rdmem_tcp_count(&a->c.tls_record_failures, rdmem_tcp_client_tls_record_failures(a->cli));
	rdmem_tcp_client_close(a->cli);
	a->cli = NULL;
}

/*
 * A TLS session counts as made once the connection is set up: a TLS 1.3
 * server refuses a client certificate only after the client's handshake
 * ended, with an alert the first read (BIND's reply) meets.
 */
static void rdmem_tcp_count_tls(struct rdmem_tcp_actor *a, int handshake_ret)
{
	int refused = handshake_ret < 0 || (a->cli && rdmem_tcp_client_tls_refused(a->cli));

	rdmem_tcp_count(refused ? &a->c.tls_handshake_failures : &a->c.tls_handshakes, 1);
}

static void rdmem_tcp_connect(struct rdmem_tcp_actor *a, uint64_t now)
{
	int ret, tls_ret = 0;

	if (now < a->next_connect_ns)
		return;
	a->dial_ns = now;
	ret =
	    rdmem_tcp_client_connect(a->cfg.host, a->cfg.port, a->cfg.connect_timeout_ms, &a->cli);
	if (ret == 0 && a->cfg.tls)
		ret = tls_ret = rdmem_tcp_client_starttls(a->cli, a->cfg.tls, a->cfg.host,
							  a->cfg.connect_timeout_ms);
	if (ret == 0 && a->cfg.auth)
		ret = rdmem_tcp_client_auth(a->cli, a->cfg.auth, a->cfg.connect_timeout_ms);
	if (ret == 0)
		ret = rdmem_tcp_bind(a);
	if (a->cli && a->cfg.tls)
		rdmem_tcp_count_tls(a, tls_ret);
	if (ret < 0 && a->cli)
		rdmem_tcp_close_client(a);
	if (ret < 0) {
		a->cli = NULL;
		if (!a->down_since_ns)
			a->down_since_ns = now ? now : 1;
		a->backoff_ns = a->backoff_ns
				    ? RDMEM_MIN(a->backoff_ns * 2, RDMEM_TCP_BACKOFF_MAX_NS)
				    : RDMEM_TCP_BACKOFF_MIN_NS;
		a->next_connect_ns = rdmem_now_ns() + a->backoff_ns;
		return;
	}
	a->backoff_ns = 0;
	a->down_since_ns = 0;
	rdmem_tcp_count(&a->c.connects, 1);
	atomic_store_explicit(&a->c.connected, 1, memory_order_relaxed);
	rdmem_tcp_client_watch(a->cli, a->in.efd);
	rdmem_info("tcp: connected to %s:%u", a->cfg.host, a->cfg.port);
}

static void rdmem_tcp_finished(struct rdmem_tcp_actor *a, struct rdmem_tcp_call *t, int *lost);

/*
 * Takes back every call the connection still holds before it is freed: a
 * reply that came is delivered, the rest wait for the next connection (or
 * their deadline). progress() hands back at most a batch at a time, and a
 * connection can break with calls still in its window; without this they
 * would never complete, and their front-door slots (and a dead client's
 * entry) would stay held for ever.
 */
static void rdmem_tcp_take_back(struct rdmem_tcp_actor *a)
{
	struct rdmem_tcp_call *done[RDMEM_TCP_DONE_BATCH];
	int n, i, lost = 0;

	while ((n = rdmem_tcp_client_abort(a->cli, done, RDMEM_TCP_DONE_BATCH)) > 0)
		for (i = 0; i < n; i++)
			rdmem_tcp_finished(a, done[i], &lost);
	rdmem_tcp_close_client(a);
}

/* The connection is gone: calls it carried go back to wait for the next one. */
static void rdmem_tcp_disconnect(struct rdmem_tcp_actor *a)
{
	rdmem_warn_limited("tcp: lost the connection to %s:%u", a->cfg.host, a->cfg.port);
	rdmem_tcp_take_back(a);
	rdmem_tcp_count(&a->c.disconnects, 1);
	atomic_store_explicit(&a->c.connected, 0, memory_order_relaxed);
	a->next_connect_ns = rdmem_now_ns();
}

/* ---- calls ---------------------------------------------------------------- */

static void rdmem_tcp_prepare(struct rdmem_tcp_actor *a, struct rdmem_agent_call *call)
{
	struct rdmem_tcp_call *t = rdmem_tcp_slot(a, call);
	uint32_t off = rdmem_call_reply_off(call);

	memset(t, 0, sizeof(*t));
	a->theld[t - a->tcalls] = 0;
	t->req = call->req;
	t->req.path = RDMEM_PATH_TCP;
	t->req.flags &= (uint16_t)~RDMEM_F_WANT_OBJREF;
	t->key = call->key;
	t->val = call->val;
	t->reply = call->payload + off;
	t->reply_cap = call->payload_cap - off;
	t->user = call;
}

static void rdmem_tcp_send_waiting(struct rdmem_tcp_actor *a)
{
	struct rdmem_agent_call *call;

	while (a->cli && (call = rdmem_tcp_wait_pop(a))) {
		int ret;

		uint8_t was = rdmem_agent_ident_sent(&a->ident, call); /* may renumber: first */

		rdmem_tcp_prepare(a, call);
		ret = rdmem_tcp_client_submit(a->cli, rdmem_tcp_slot(a, call));
		if (ret == 0) {
			rdmem_tcp_count(&a->c.bytes_out, rdmem_desc_payload_len(&call->req));
			a->sent_first_ns = RDMEM_MIN(a->sent_first_ns, call->deadline_ns);
			continue;
		}
		rdmem_agent_ident_unsent(call, was); /* refused before any byte was queued */
		/* Window full or connection dead: keep it at the head for later. */
		call->next = a->wait_head;
		a->wait_head = call;
		if (!a->wait_tail)
			a->wait_tail = call;
		a->nwaiting++;
		if (ret != -EAGAIN)
			rdmem_tcp_disconnect(a);
		break;
	}
}

/* Takes one injected reply loss, if any is left. */
static int rdmem_tcp_sim_reply_lost(struct rdmem_tcp_actor *a)
{
	/* relaxed: a counter set by agent-ctl, no other data rides on it. */
	unsigned n = atomic_load_explicit(&a->sim_reply_loss, memory_order_relaxed);

	while (n && !atomic_compare_exchange_weak_explicit(
			&a->sim_reply_loss, &n, n - 1, memory_order_relaxed, memory_order_relaxed))
		;
	return n != 0;
}

static void rdmem_tcp_finished(struct rdmem_tcp_actor *a, struct rdmem_tcp_call *t, int *lost)
{
	struct rdmem_agent_call *call = t->user;

	switch (t->result) {
	case 0:
		if (rdmem_tcp_sim_reply_lost(a))
			break; /* as if the connection broke before this reply */
		rdmem_tcp_complete(a, call, t->rep.status, &t->rep);
		return;
	case -EMSGSIZE:
		rdmem_tcp_complete(a, call, RDMEM_S_TOO_BIG, NULL);
		return;
	default:
		break;
	}
	/* Lost with the connection: safe to send again (a non-idempotent call
	 * runs once: the server knows its id) unless the reply had begun
	 * overwriting its own request. */
	*lost = 1;
	if (rdmem_call_reply_overlaps(call)) {
		rdmem_tcp_complete(a, call, RDMEM_S_IO, NULL);
		return;
	}
	rdmem_tcp_count(&a->c.retried, 1);
	rdmem_tcp_wait_push(a, call);
}

/* Drives the connection; returns completions handled. */
static int rdmem_tcp_progress(struct rdmem_tcp_actor *a, int timeout_ms)
{
	struct rdmem_tcp_call *done[RDMEM_TCP_DONE_BATCH];
	int n, i, lost = 0;

	n = rdmem_tcp_client_progress(a->cli, timeout_ms, done, RDMEM_TCP_DONE_BATCH);
	for (i = 0; i < n; i++)
		rdmem_tcp_finished(a, done[i], &lost);
	if (n < 0 || lost)
		rdmem_tcp_disconnect(a);
	return n < 0 ? 0 : n;
}

/*
 * Ends the calls on the wire whose deadline passed: a server that holds a
 * call (stopped, overloaded, a retry waiting for its first run) keeps the
 * connection alive, so nothing else would end them, and their front-door
 * slots (or a dead client's entry) would wait for the server. Rare (only
 * once a deadline passed, at most every RDMEM_TCP_SENT_SCAN_NS), so the
 * scan of every (client, slot) costs nothing in the normal case.
 *
 * A call half on the wire (or whose value a recv in flight writes into its
 * slot) is held, not withdrawn: withdrawing it would break the connection
 * every client shares, so one client's short deadlines on large values
 * could make the agent reconnect and resend everyone's calls at will. It
 * keeps its front-door slot (the kernel still reads or writes it) and is
 * answered TIMEOUT at a later look, once the kernel is done with it, or
 * RDMEM_TCP_HELD_MAX_NS past its deadline, when it is withdrawn anyway: a
 * server that stopped reading or stalled mid-reply would hold it for good
 * (no client can make an honest server stall, so this reopens nothing).
 */
static void rdmem_tcp_expire_sent(struct rdmem_tcp_actor *a, uint64_t now)
{
	size_t i, n = (size_t)a->cfg.clients * a->cfg.slots;
	uint64_t first = UINT64_MAX;
	int tears;

	if (!a->cli || now < a->sent_first_ns || now < a->sent_scan_ns)
		return;
	a->sent_scan_ns = now + RDMEM_TCP_SENT_SCAN_NS;
	for (i = 0; i < n && a->cli; i++) {
		struct rdmem_tcp_call *t = &a->tcalls[i];
		struct rdmem_agent_call *call = t->user;

		if (!call || !rdmem_tcp_client_holds(a->cli, t))
			continue;
		if (now < call->deadline_ns) {
			first = RDMEM_MIN(first, call->deadline_ns);
			continue;
		}
		tears = rdmem_tcp_client_withdraw_tears(a->cli, t);
		if (tears && now - call->deadline_ns < RDMEM_TCP_HELD_MAX_NS) {
			if (!a->theld[i])
				rdmem_tcp_count(&a->c.timeouts_held, 1);
			a->theld[i] = 1;
			first = RDMEM_MIN(first, now + RDMEM_TCP_HELD_LOOK_NS);
			continue;
		}
		if (tears)
			rdmem_warn_limited(
			    "tcp: a call to %s:%u is still half sent or half read "
			    "%llu ms past its deadline: breaking the connection (the "
			    "server stopped reading or stalled)",
			    a->cfg.host, a->cfg.port,
			    (unsigned long long)((now - call->deadline_ns) / 1000000));
		if (rdmem_tcp_client_withdraw(a->cli, t)) {
			rdmem_tcp_count(&a->c.timeouts, 1);
			rdmem_tcp_complete(a, call, RDMEM_S_TIMEOUT, NULL);
		}
	}
	a->sent_first_ns = first;
}

static int rdmem_tcp_drain_inbox(struct rdmem_tcp_actor *a)
{
	struct rdmem_agent_call *call;
	int n = 0;

	while ((call = rdmem_queue_pop(&a->in))) {
		rdmem_tcp_wait_push(a, call);
		n++;
	}
	return n;
}

static void rdmem_tcp_publish_gauges(struct rdmem_tcp_actor *a)
{
	atomic_store_explicit(&a->c.inflight,
			      a->cli ? (unsigned)rdmem_tcp_client_inflight(a->cli) : 0,
			      memory_order_relaxed);
	atomic_store_explicit(&a->c.waiting, a->nwaiting, memory_order_relaxed);
}

/*
 * Until the first waiting call's deadline, the next redial or the next scan
 * of calls on the wire; while calls are on the wire, at most
 * RDMEM_TCP_BUSY_TICK_MS (a withdrawn call's late reply completes nothing,
 * so progress would not return for it, and the in-flight gauge would stay
 * stale). -1 (no timer) when there is none of them: calls arrive through
 * the inbox's eventfd, replies and a lost connection through io_uring, and
 * stop rings the inbox, so an idle actor needs no tick (it woke every 50 ms
 * before: 40 context switches in test_idle's 2 s).
 */
static int rdmem_tcp_block_ms(const struct rdmem_tcp_actor *a)
{
	uint64_t now = rdmem_now_ns(), first = UINT64_MAX;
	const struct rdmem_agent_call *call;

	if (a->cli && rdmem_tcp_client_inflight(a->cli))
		first = now + RDMEM_TCP_BUSY_TICK_MS * 1000000ull;
	for (call = a->wait_head; call; call = call->next)
		first = RDMEM_MIN(first, call->deadline_ns);
	if (!a->cli && a->nwaiting)
		first = RDMEM_MIN(first, a->next_connect_ns);
	if (a->cli)
		first = RDMEM_MIN(first, RDMEM_MAX(a->sent_first_ns, a->sent_scan_ns));
	if (first == UINT64_MAX)
		return -1;
	return first <= now ? 0 : (int)RDMEM_MIN((first - now + 999999) / 1000000, INT32_MAX);
}

/* Nothing to do: sleep until a call arrives, a reply comes, or a timer is due. */
static void rdmem_tcp_block(struct rdmem_tcp_actor *a)
{
	struct pollfd pfd = { a->in.efd, POLLIN, 0 };
	int ms = rdmem_tcp_block_ms(a);

	if (!rdmem_queue_prepare_sleep(&a->in))
		return;
	if (a->cli)
		rdmem_tcp_progress(a, ms);
	else if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
		rdmem_err("tcp actor poll: %s", strerror(errno));
	rdmem_queue_woke(&a->in);
}

static void *rdmem_tcp_main(void *arg)
{
	struct rdmem_tcp_actor *a = arg;
	struct rdmem_idle idle;

	pthread_setname_np(pthread_self(), "rdmem-tcp");     /* ps -L, top -H, the idle test */
	rdmem_idle_init(&idle, rdmem_affinity_single_cpu()); /* as the session actor */
	while (!atomic_load_explicit(&a->stop, memory_order_acquire)) {
		uint64_t now = rdmem_now_ns();
		int work = rdmem_tcp_drain_inbox(a);

		rdmem_tcp_redial_for_new(a, now);
		if (!a->cli && a->nwaiting)
			rdmem_tcp_connect(a, now);
		rdmem_tcp_fail_if_down(a, now);
		rdmem_tcp_expire(a, now);
		rdmem_tcp_expire_sent(a, now);
		rdmem_tcp_send_waiting(a);
		if (a->cli)
			work += rdmem_tcp_progress(a, 0);
		rdmem_tcp_publish_gauges(a);
		if (rdmem_idle_after(&idle, work, a->cfg.busy_poll))
			rdmem_tcp_block(a);
	}
	return NULL;
}

/* A random agent id: getrandom, or clock and pid when the pool is not ready. */
static uint64_t rdmem_tcp_agent_id(void)
{
	uint64_t id = 0;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id))
		id = rdmem_now_ns() ^ ((uint64_t)getpid() << 40) ^ (uint64_t)time(NULL) << 20;
	return id ? id : 1;
}

void rdmem_tcp_actor_simulate_reply_loss(struct rdmem_tcp_actor *a, uint32_t n)
{
	atomic_store_explicit(&a->sim_reply_loss, n, memory_order_relaxed);
}

struct rdmem_agent_ident *rdmem_tcp_actor_ident(struct rdmem_tcp_actor *a)
{
	return &a->ident;
}

int rdmem_tcp_actor_start(const struct rdmem_tcp_actor_config *cfg, struct rdmem_frontdoor *fd,
			  struct rdmem_tcp_actor **out)
{
	struct rdmem_tcp_actor *a = calloc(1, sizeof(*a));
	size_t ncalls = (size_t)cfg->clients * cfg->slots;
	int ret;

	if (!a)
		return -ENOMEM;
	a->cfg = *cfg;
	a->fd = fd;
	a->sent_first_ns = UINT64_MAX;
	a->ident.agent_id = rdmem_tcp_agent_id();
	atomic_init(&a->ident.next_call_id, RDMEM_AGENT_FIRST_CALL_ID);
	rdmem_info("agent id %016llx (exactly-once calls)", (unsigned long long)a->ident.agent_id);
	a->tcalls = calloc(ncalls, sizeof(*a->tcalls));
	a->theld = calloc(ncalls, 1);
	if (!a->tcalls || !a->theld || rdmem_queue_init(&a->in, (uint32_t)ncalls) < 0) {
		free(a->tcalls);
		free(a->theld);
		free(a);
		return -ENOMEM;
	}
	ret = -pthread_create(&a->thread, NULL, rdmem_tcp_main, a);
	if (ret < 0) {
		rdmem_queue_fini(&a->in);
		free(a->tcalls);
		free(a->theld);
		free(a);
		return ret;
	}
	*out = a;
	return 0;
}

void rdmem_tcp_actor_stop(struct rdmem_tcp_actor *a)
{
	struct rdmem_agent_call *call;

	if (!a)
		return;
	/* Pairs with the actor's acquire load at the top of its loop. */
	atomic_store_explicit(&a->stop, 1, memory_order_release);
	rdmem_queue_ring(&a->in);
	pthread_join(a->thread, NULL);
	if (a->cli)
		rdmem_tcp_take_back(a); /* its calls are answered SHUTDOWN below */
	rdmem_tcp_drain_inbox(a);
	while ((call = rdmem_tcp_wait_pop(a)))
		rdmem_frontdoor_complete(
		    a->fd, call,
		    &(struct rdmem_agent_reply){ RDMEM_S_SHUTDOWN, 0, 0, 0, 0, { 0, 0, 0 } });
	rdmem_queue_fini(&a->in);
	free(a->tcalls);
	free(a->theld);
	free(a);
}

void rdmem_tcp_actor_submit(struct rdmem_tcp_actor *a, struct rdmem_agent_call *call)
{
	rdmem_tcp_count(&a->c.calls, 1);
	if (rdmem_queue_push(&a->in, call) < 0)
		rdmem_err("tcp actor queue sized wrong: call dropped");
}

void rdmem_tcp_actor_get_stats(struct rdmem_tcp_actor *a, struct rdmem_tcp_actor_stats *o)
{
#define RDMEM_LOAD(f) o->f = atomic_load_explicit(&a->c.f, memory_order_relaxed)
	RDMEM_LOAD(calls);
	RDMEM_LOAD(ok);
	RDMEM_LOAD(failed);
	RDMEM_LOAD(retried);
	RDMEM_LOAD(unreachable);
	RDMEM_LOAD(timeouts);
	RDMEM_LOAD(connects);
	RDMEM_LOAD(disconnects);
	RDMEM_LOAD(bytes_out);
	RDMEM_LOAD(bytes_in);
	RDMEM_LOAD(mac_failures);
	RDMEM_LOAD(tls_handshakes);
	RDMEM_LOAD(tls_handshake_failures);
	RDMEM_LOAD(tls_record_failures);
	RDMEM_LOAD(timeouts_held);
	RDMEM_LOAD(connected);
	RDMEM_LOAD(inflight);
	RDMEM_LOAD(waiting);
#undef RDMEM_LOAD
	/* relaxed: a gauge for the stats page, as the counters above. */
	o->sim_reply_loss = atomic_load_explicit(&a->sim_reply_loss, memory_order_relaxed);
}

struct rdmem_call_metrics *rdmem_tcp_actor_call_metrics(struct rdmem_tcp_actor *a)
{
	return &a->cm;
}
