/* worker.c - worker threads serving many RDMA sessions each: sessions in
 * and out, rounds of polls under the slice schedule (group.c) and the quiet
 * lane (lane.c), sleeping, STATS (see worker.h). */
#include "server/worker.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rdmem/idle.h"
#include "rdmem/util.h"
#include "server/group.h"
#include "server/lane.h"

/* A sleeping worker wakes on its sessions' fds and its bell, and when a
 * session's timed work is due (rdmem_session_timed). */
#define RDMEM_WORKER_PUBLISH_NS 100000000ull /* stats snapshot */
/* Every session's liveness and upkeep, whatever its group and however the
 * worker waits: a session whose connection closed or broke is closed within
 * this (plus the fabric's own notice: shm sees the socket's EOF at once,
 * verbs the CM's DISCONNECTED event). */
#define RDMEM_WORKER_SWEEP_NS 100000000ull
/* How often a busy worker looks for connection events (a peer that closed,
 * died or disconnected) of all its sessions: one epoll_wait on their event
 * fds, where a check of each session's connection would be one syscall per
 * session (100,000 a second at 1,024 sessions). A sleeping worker wakes on
 * those fds anyway. */
#define RDMEM_WORKER_CHECK_NS	10000000ull
#define RDMEM_WORKER_MAX_EVENTS 64
#define RDMEM_WORKER_LIST_MAX	256 /* sessions listed per worker in STATS */

/* epoll data: the session pointer with the low bit saying which of its fds. */
#define RDMEM_EV_EVENT 1ull

struct rdmem_worker {
	struct rdmem_workers *ws;
	uint32_t index;
	pthread_t thread;
	int epfd, bell;	      /* bell: an eventfd rung when sessions are handed over */
	int evfd;	      /* epoll of the sessions' event fds alone */
	pthread_mutex_t lock; /* guards inbox[] and snap[] */
	struct rdmem_session **inbox;
	/* Written under the lock; atomic so the worker reads it without: one
	 * with nothing handed over takes no lock at each round (issue 15: none
	 * on the steady path). */
	atomic_uint ninbox;
	struct rdmem_session_info *snap; /* published for STATS */
	uint32_t nsnap, snap_cap;
	/* owned by the worker thread: the next snapshot is built here, then
	 * swapped with snap (readers copy under the lock, so the old one is
	 * free to reuse): no allocation per publish once sessions stop growing */
	struct rdmem_session_info *spare;
	uint32_t spare_cap;
	/* owned by the worker thread */
	struct rdmem_session **sess;
	uint32_t nsess, cap;
	uint64_t published_at, swept_at, checked_at;
	struct rdmem_group group;
	struct rdmem_lane lane;
	atomic_uint load; /* sessions owned or handed over: placement, admission */
	/* the lane's figures for STATS, published with the snapshot */
	atomic_uint lane_size;
	atomic_ullong lane_polls, lane_served;
};

struct rdmem_workers {
	const struct rdmem_rdma_config *cfg;
	struct rdmem_worker *w;
	uint32_t n;
	atomic_int stop;
};

/* ---- sessions in and out --------------------------------------------------- */

static int rdmem_worker_watch(struct rdmem_worker *w, struct rdmem_session *s, int op)
{
	struct epoll_event ev = { EPOLLIN, { .u64 = (uintptr_t)s } };
	int ret = epoll_ctl(w->epfd, op, rdmem_session_comp_fd(s), &ev);

	if (ret == 0)
		ret = epoll_ctl(w->evfd, op, rdmem_session_event_fd(s), &ev);
	ev.data.u64 = (uintptr_t)s | RDMEM_EV_EVENT;
	if (ret == 0)
		ret = epoll_ctl(w->epfd, op, rdmem_session_event_fd(s), &ev);
	if (ret < 0 && op == EPOLL_CTL_ADD)
		rdmem_err("worker %u: epoll for a session: %s", w->index, strerror(errno));
	return ret;
}

static void rdmem_worker_adopt(struct rdmem_worker *w)
{
	struct rdmem_session **in;
	uint32_t n, i;

	/* Relaxed: a hint only; the lock orders the inbox itself. A zero read
	 * late costs a round, never a sleep: the hand-over rings the bell after
	 * the store, and the bell (level-triggered) stays readable until this
	 * worker reads it, which the eventfd's own lock orders after the store. */
	if (!atomic_load_explicit(&w->ninbox, memory_order_relaxed))
		return;
	pthread_mutex_lock(&w->lock);
	in = w->inbox;
	n = atomic_load_explicit(&w->ninbox, memory_order_relaxed); /* the lock orders it */
	w->inbox = NULL;
	atomic_store_explicit(&w->ninbox, 0, memory_order_relaxed);
	pthread_mutex_unlock(&w->lock);
	for (i = 0; i < n; i++) {
		if (w->nsess == w->cap) {
			uint32_t cap = w->cap ? w->cap * 2 : 16;
			void *p = realloc(w->sess, cap * sizeof(*w->sess));

			if (!p) {
				rdmem_err("worker %u: no memory for a session: closing it",
					  w->index);
				rdmem_session_close(in[i]);
				atomic_fetch_sub_explicit(&w->load, 1, memory_order_release);
				continue;
			}
			w->sess = p;
			w->cap = cap;
		}
		if (rdmem_worker_watch(w, in[i], EPOLL_CTL_ADD) < 0) {
			rdmem_session_close(in[i]);
			atomic_fetch_sub_explicit(&w->load, 1, memory_order_release);
			continue;
		}
		rdmem_session_follow_slices(in[i], &w->group.serving);
		w->sess[w->nsess++] = in[i];
	}
	free(in);
}

static void rdmem_worker_drop(struct rdmem_worker *w, uint32_t i)
{
	struct rdmem_session *s = w->sess[i];

	rdmem_lane_forget(&w->lane, s); /* never a closed session in the lane */
	rdmem_worker_watch(w, s, EPOLL_CTL_DEL);
	rdmem_session_close(s);
	w->sess[i] = w->sess[--w->nsess];
	rdmem_group_dropped(&w->group, i, w->nsess); /* nor in the active group */
	atomic_fetch_sub_explicit(&w->load, 1, memory_order_release);
}

/* ---- serving -------------------------------------------------------------------- */

static uint32_t rdmem_worker_find(const struct rdmem_worker *w, const struct rdmem_session *s);

/*
 * Polls the quiet lane's sessions (lane.h), whatever their group, for one
 * call each (more would be another group's batch served out of its turn;
 * a member found with more leaves, and its round serves the rest), from
 * the lane's end: a member that leaves is replaced by one already polled.
 * One that fails is dropped here; the round that called us re-reads its
 * array. A member is never told to hold its calls: it is served anyway.
 */
static uint32_t rdmem_worker_serve_lane(struct rdmem_worker *w, uint64_t now)
{
	struct rdmem_lane *l = &w->lane;
	uint32_t k = l->n, work = 0;

	l->since = 0;
	l->polls++;
	while (k--) {
		struct rdmem_session *s = l->s[k];
		int n;

		rdmem_session_set_yield(s, 0, now);
		if ((n = rdmem_session_poll(s, 1, now)) < 0) {
			uint32_t i = rdmem_worker_find(w, s);

			if (i < w->nsess)
				rdmem_worker_drop(w, i); /* which takes it out of the lane */
			else
				rdmem_lane_forget(l, s);
			continue;
		}
		rdmem_lane_polled(l, k, (uint32_t)n, rdmem_session_backlog(s));
		work += (uint32_t)n;
	}
	return work;
}

/* What the slice schedule looks at: the sessions now, and the lane. */
static struct rdmem_group_view rdmem_worker_view(struct rdmem_worker *w)
{
	return (struct rdmem_group_view){ w->sess, w->nsess, &w->lane };
}

/*
 * Polls session i for a batch, and the quiet lane when it is due (after
 * every RDMEM_LANE_EVERY requests served); adds the requests served to
 * *work. Returns -1 when session i failed and was dropped (the array's last
 * session is in its place now).
 */
static int rdmem_worker_visit(struct rdmem_worker *w, uint32_t i, uint64_t now, uint32_t *work)
{
	struct rdmem_session *s = w->sess[i];
	int n = rdmem_session_poll(s, w->ws->cfg->batch_budget, now);

	if (n < 0) {
		rdmem_worker_drop(w, i);
		return -1;
	}
	*work += (uint32_t)n;
	if (n && rdmem_lane_note(&w->lane, s, (uint32_t)n, rdmem_session_backlog(s)))
		*work += rdmem_worker_serve_lane(w, now);
	return 0;
}

/*
 * One round: every session, or, grouped, the active group's members; returns
 * requests served. A lane drop may move the array's last session into a
 * place this round already passed: it is polled next round.
 */
static uint32_t rdmem_worker_round(struct rdmem_worker *w, uint64_t now)
{
	struct rdmem_group_view v = rdmem_worker_view(w);
	struct rdmem_group *g = &w->group;
	uint32_t i, k, work = 0;

	if (!rdmem_group_turn(g, &v, now)) {
		for (i = 0; i < w->nsess;)
			i += rdmem_worker_visit(w, i, now, &work) == 0;
		return work;
	}
	/* A drop marks the member that left and renumbers the one moved. */
	for (k = 0; k < g->members; k++)
		if (g->member[k] != RDMEM_GROUP_LEFT)
			rdmem_worker_visit(w, g->member[k], now, &work);
	/* The group ran dry: the lane is not due (nothing served), but its
	 * members must not wait for the next switch (found by review). */
	if (!work && w->lane.n)
		work = rdmem_worker_serve_lane(w, now);
	if (!work) {
		v.n = w->nsess; /* a visit may have dropped sessions */
		rdmem_group_dry(g, &v, now);
	}
	return work;
}

/*
 * Only the active group is polled while grouping, and under --busy-poll (or
 * while any group keeps the worker busy) the worker never sleeps: the sweep
 * gives every session, whatever its group, its reaping and upkeep (no
 * syscall), and rdmem_worker_check its connection events; without them a
 * killed agent's session in another group would hold its lease for good
 * and new agents would find the server full.
 */
static void rdmem_worker_sweep(struct rdmem_worker *w, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < w->nsess;) {
		if (rdmem_session_tick(w->sess[i], now) < 0) {
			rdmem_worker_drop(w, i);
			continue;
		}
		i++;
	}
	w->swept_at = now;
}

/* The index of session s, or nsess when it is no longer ours. */
static uint32_t rdmem_worker_find(const struct rdmem_worker *w, const struct rdmem_session *s)
{
	uint32_t i;

	for (i = 0; i < w->nsess && w->sess[i] != s; i++)
		;
	return i;
}

/* Checks the connections whose event fd is readable (rare: a peer that
 * closed, died or disconnected), all sessions in one syscall; when many
 * died at once (an agent host lost), up to 16 batches of them, so 1,024
 * dead sessions close in one check, not 64 every 10 ms. */
static void rdmem_worker_check(struct rdmem_worker *w, uint64_t now)
{
	struct epoll_event ev[RDMEM_WORKER_MAX_EVENTS];
	int n = RDMEM_WORKER_MAX_EVENTS, k, round;

	for (round = 0; round < 16 && n == RDMEM_WORKER_MAX_EVENTS; round++) {
		n = epoll_wait(w->evfd, ev, RDMEM_WORKER_MAX_EVENTS, 0);
		if (n < 0 && errno != EINTR)
			rdmem_err_limited("worker %u: epoll_wait for connection events: %s",
					  w->index, strerror(errno));
		for (k = 0; k < n; k++) {
			struct rdmem_session *s = (struct rdmem_session *)(uintptr_t)ev[k].data.u64;
			uint32_t i = rdmem_worker_find(w, s);

			if (i < w->nsess && rdmem_session_woke(s, 0, 1) < 0)
				rdmem_worker_drop(w, i);
		}
	}
	w->checked_at = now;
}

/* ---- sleeping ------------------------------------------------------------------- */

static void rdmem_worker_publish(struct rdmem_worker *w, uint64_t now);

/* How long a sleep may last: for ever unless a session has timed work, and
 * then until the earliest, no sooner than the loop's next sweep runs. */
static int rdmem_worker_block_ms(const struct rdmem_worker *w, uint64_t now)
{
	uint64_t due = UINT64_MAX, t;
	uint32_t i;

	for (i = 0; i < w->nsess; i++)
		if ((t = rdmem_session_timed(w->sess[i])) && t < due)
			due = t;
	if (due == UINT64_MAX)
		return -1;
	due = RDMEM_MAX(due, w->swept_at + RDMEM_WORKER_SWEEP_NS + 1);
	return due <= now ? 0 : (int)RDMEM_MIN((due - now + 999999) / 1000000, (uint64_t)INT_MAX);
}

static void rdmem_worker_block(struct rdmem_worker *w)
{
	struct epoll_event ev[RDMEM_WORKER_MAX_EVENTS];
	struct rdmem_group_view view;
	uint64_t now;
	uint32_t i;
	int n, k;

	for (i = 0; i < w->nsess;) {
		int ret = rdmem_session_arm(w->sess[i]);

		if (ret > 0)
			return; /* work arrived while arming: no sleep */
		if (ret < 0) {
			rdmem_worker_drop(w, i);
			continue;
		}
		i++;
	}
	view = rdmem_worker_view(w);
	now = rdmem_now_ns();
	rdmem_group_idle(&w->group, &view, now);
	/* STATS reads the snapshot while we sleep: nothing changes until we wake. */
	rdmem_worker_publish(w, now);
	n = epoll_wait(w->epfd, ev, RDMEM_WORKER_MAX_EVENTS, rdmem_worker_block_ms(w, now));
	for (k = 0; k < n; k++) {
		uint64_t d = ev[k].data.u64;
		struct rdmem_session *s = (struct rdmem_session *)(uintptr_t)(d & ~RDMEM_EV_EVENT);
		uint64_t v;

		if (!s) {
			if (read(w->bell, &v, sizeof(v)) < 0 && errno != EAGAIN)
				rdmem_err("worker %u: bell: %s", w->index, strerror(errno));
			/* A nudge (or a new session): sweep every session at
			 * once, those of inactive groups too, whatever the
			 * last sweep's time. */
			w->swept_at = 0;
			continue;
		}
		i = rdmem_worker_find(w, s);
		if (i < w->nsess &&
		    rdmem_session_woke(s, !(d & RDMEM_EV_EVENT), !!(d & RDMEM_EV_EVENT)) < 0)
			rdmem_worker_drop(w, i);
	}
}

static void rdmem_worker_publish(struct rdmem_worker *w, uint64_t now)
{
	struct rdmem_session_info *built;
	uint32_t i, cap;

	if (w->spare_cap < w->nsess) {
		cap = RDMEM_MAX(w->nsess, 2 * w->spare_cap);
		built = realloc(w->spare, (size_t)cap * sizeof(*built));
		if (!built)
			return; /* the last snapshot stays; retried next time */
		w->spare = built;
		w->spare_cap = cap;
	}
	for (i = 0; i < w->nsess; i++)
		rdmem_session_get_info(w->sess[i], &w->spare[i]);
	pthread_mutex_lock(&w->lock);
	built = w->spare;
	cap = w->spare_cap;
	w->spare = w->snap;
	w->spare_cap = w->snap_cap;
	w->snap = built;
	w->snap_cap = cap;
	w->nsnap = w->nsess;
	pthread_mutex_unlock(&w->lock);
	/* Relaxed: figures for STATS, read alone; this thread is their one writer. */
	atomic_store_explicit(&w->lane_size, w->lane.n, memory_order_relaxed);
	atomic_store_explicit(&w->lane_polls, w->lane.polls, memory_order_relaxed);
	atomic_store_explicit(&w->lane_served, w->lane.served, memory_order_relaxed);
	w->published_at = now;
}

static void *rdmem_worker_main(void *arg)
{
	struct rdmem_worker *w = arg;
	struct rdmem_idle idle;

	pthread_setname_np(pthread_self(), "rdmem-worker"); /* ps -L, top -H, the idle test */
	/* Spins even alone on a CPU: its peers are agents on other CPUs or hosts. */
	rdmem_idle_init(&idle, 0);
	while (!atomic_load_explicit(&w->ws->stop, memory_order_acquire)) {
		uint64_t now = rdmem_now_ns();

		rdmem_worker_adopt(w);
		if (now - w->swept_at > RDMEM_WORKER_SWEEP_NS)
			rdmem_worker_sweep(w, now);
		if (now - w->checked_at > RDMEM_WORKER_CHECK_NS)
			rdmem_worker_check(w, now);
		if (now - w->published_at > RDMEM_WORKER_PUBLISH_NS)
			rdmem_worker_publish(w, now);
		if (rdmem_idle_after(&idle, rdmem_worker_round(w, now) != 0, w->ws->cfg->busy_poll))
			rdmem_worker_block(w);
	}
	rdmem_worker_adopt(w);
	while (w->nsess)
		rdmem_worker_drop(w, w->nsess - 1);
	return NULL;
}

/* ---- the pool of workers ---------------------------------------------------------- */

static void rdmem_worker_fini(struct rdmem_worker *w)
{
	if (w->epfd >= 0)
		close(w->epfd);
	if (w->evfd >= 0)
		close(w->evfd);
	if (w->bell >= 0)
		close(w->bell);
	pthread_mutex_destroy(&w->lock);
	rdmem_group_fini(&w->group);
	free(w->inbox);
	free(w->snap);
	free(w->spare);
	free(w->sess);
}

static int rdmem_worker_init(struct rdmem_workers *ws, struct rdmem_worker *w, uint32_t i)
{
	struct epoll_event ev = { EPOLLIN, { .u64 = 0 } };
	int ret;

	w->ws = ws;
	w->index = i;
	rdmem_lane_init(&w->lane, ws->cfg->quiet_lane);
	pthread_mutex_init(&w->lock, NULL);
	if ((ret = rdmem_group_init(&w->group, ws->cfg)) < 0) {
		rdmem_err("worker %u: no memory for a group of %u", i, ws->cfg->group_size);
		goto fail;
	}
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	w->evfd = epoll_create1(EPOLL_CLOEXEC);
	w->bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->epfd < 0 || w->evfd < 0 || w->bell < 0 ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->bell, &ev) < 0) {
		ret = -errno;
		rdmem_err("worker %u: epoll/eventfd: %s", i, strerror(-ret));
		goto fail;
	}
	if ((ret = -pthread_create(&w->thread, NULL, rdmem_worker_main, w)) == 0)
		return 0;
	rdmem_err("worker %u: pthread_create: %s", i, strerror(-ret));
fail:
	rdmem_worker_fini(w); /* not joined: rdmem_workers_start stops at it */
	return ret;
}

int rdmem_workers_start(const struct rdmem_rdma_config *cfg, struct rdmem_workers **out)
{
	struct rdmem_workers *ws = calloc(1, sizeof(*ws));
	uint32_t i;
	int ret = 0;

	if (!ws)
		return -ENOMEM;
	ws->cfg = cfg;
	ws->n = RDMEM_MAX(1u, cfg->workers);
	ws->w = calloc(ws->n, sizeof(*ws->w));
	if (!ws->w) {
		free(ws);
		return -ENOMEM;
	}
	for (i = 0; i < ws->n; i++)
		ws->w[i].epfd = ws->w[i].evfd = ws->w[i].bell = -1;
	for (i = 0; i < ws->n && ret == 0; i++)
		if ((ret = rdmem_worker_init(ws, &ws->w[i], i)) < 0)
			ws->n = i; /* only the started ones get joined */
	if (ret < 0) {
		rdmem_workers_stop(ws);
		return ret;
	}
	*out = ws;
	return 0;
}

void rdmem_workers_stop(struct rdmem_workers *ws)
{
	uint64_t one = 1;
	uint32_t i;

	if (!ws)
		return;
	/* Pairs with the workers' acquire load at the top of their loop. */
	atomic_store_explicit(&ws->stop, 1, memory_order_release);
	for (i = 0; i < ws->n; i++)
		if (write(ws->w[i].bell, &one, sizeof(one)) < 0)
			rdmem_warn("worker %u: stop bell: %s", i, strerror(errno));
	for (i = 0; i < ws->n; i++) {
		pthread_join(ws->w[i].thread, NULL);
		rdmem_worker_fini(&ws->w[i]);
	}
	free(ws->w);
	free(ws);
}

void rdmem_workers_add(struct rdmem_workers *ws, struct rdmem_session *s)
{
	struct rdmem_worker *w = &ws->w[0];
	struct rdmem_session **in;
	uint64_t one = 1;
	uint32_t i, n;

	for (i = 1; i < ws->n; i++)
		if (atomic_load_explicit(&ws->w[i].load, memory_order_relaxed) <
		    atomic_load_explicit(&w->load, memory_order_relaxed))
			w = &ws->w[i];
	pthread_mutex_lock(&w->lock);
	n = atomic_load_explicit(&w->ninbox, memory_order_relaxed); /* the lock orders it */
	in = realloc(w->inbox, (n + 1) * sizeof(*in));
	if (in) {
		w->inbox = in;
		w->inbox[n] = s;
		atomic_store_explicit(&w->ninbox, n + 1, memory_order_relaxed);
		/* Counted now, so the listener's admission sees it at once; under
		 * the lock, so before the worker's adopt can take it off again
		 * (a session it fails to adopt), and load never wraps below 0. */
		atomic_fetch_add_explicit(&w->load, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&w->lock);
	if (!in) {
		rdmem_err("no memory to hand a session to a worker: closing it");
		rdmem_session_close(s);
		return;
	}
	if (write(w->bell, &one, sizeof(one)) < 0)
		rdmem_warn("worker %u: bell: %s", w->index, strerror(errno));
}

void rdmem_workers_nudge(struct rdmem_workers *ws)
{
	uint64_t one = 1;
	uint32_t i;

	for (i = 0; i < ws->n; i++)
		if (write(ws->w[i].bell, &one, sizeof(one)) < 0 && errno != EAGAIN)
			rdmem_warn_limited("worker %u: bell: %s", i, strerror(errno));
}

uint32_t rdmem_workers_sessions(struct rdmem_workers *ws)
{
	uint32_t i, n = 0;

	for (i = 0; i < ws->n; i++)
		/* acquire: pairs with the release decrement after a session's
		 * close, so a listener that sees a place free also sees the guard
		 * and address entries that close gave back (server/share.c) */
		n += atomic_load_explicit(&ws->w[i].load, memory_order_acquire);
	return n;
}

/* ---- STATS ---------------------------------------------------------------------- */

static void rdmem_workers_format_one(struct rdmem_worker *w, int json, struct rdmem_text *o)
{
	/* Relaxed: figures the worker thread stores alone (group.c, publish). */
	unsigned groups = atomic_load_explicit(&w->group.groups, memory_order_relaxed),
		 members = atomic_load_explicit(&w->group.group_members, memory_order_relaxed),
		 lane = atomic_load_explicit(&w->lane_size, memory_order_relaxed);
	unsigned long long slices = atomic_load_explicit(&w->group.slices, memory_order_relaxed),
			   held =
			       atomic_load_explicit(&w->group.held_arrivals, memory_order_relaxed);
	unsigned long long polls = atomic_load_explicit(&w->lane_polls, memory_order_relaxed),
			   served = atomic_load_explicit(&w->lane_served, memory_order_relaxed);
	uint32_t i;

	if (json)
		rdmem_text_add(o,
			       "{\"worker\":%u,\"groups\":%u,\"group_members\":%u,\"slices\":%llu,"
			       "\"held_arrivals\":%llu,\"lane\":%u,\"lane_polls\":%llu,"
			       "\"lane_served\":%llu,\"sessions\":[",
			       w->index, groups, members, slices, held, lane, polls, served);
	else
		rdmem_text_add(
		    o,
		    "worker %u: %u busy groups, %u sessions in the active one, %llu slices "
		    "(%llu found with requests while told to hold); quiet lane %u "
		    "sessions, %llu polls served %llu calls\n",
		    w->index, groups, members, slices, held, lane, polls, served);
	pthread_mutex_lock(&w->lock);
	for (i = 0; i < w->nsnap && i < RDMEM_WORKER_LIST_MAX; i++) {
		const struct rdmem_session_info *s = &w->snap[i];

		if (json)
			rdmem_text_add(
			    o,
			    "%s{\"id\":%u,\"lease\":%u,\"group\":%u,\"slots\":%u,"
			    "\"backlog\":%u,\"objects_live\":%u,\"completed\":%llu,"
			    "\"doorbells\":%llu,\"wqes\":%llu,\"turns\":%llu,\"wakes\":%llu,"
			    "\"registered_bytes\":%llu}",
			    i ? "," : "", s->id, s->lease, s->group, s->slots, s->backlog,
			    s->objects_live, (unsigned long long)s->completed,
			    (unsigned long long)s->doorbells, (unsigned long long)s->wqes,
			    (unsigned long long)s->turns, (unsigned long long)s->wakes,
			    (unsigned long long)s->registered_bytes);
		else
			rdmem_text_add(
			    o,
			    "  session %u: lease %u, group %u, %u slots, backlog %u, "
			    "%u objects live, %llu calls in %llu reply posts (%llu WQEs), "
			    "%llu turn words (%llu woke the agent), %llu B registered\n",
			    s->id, s->lease, s->group, s->slots, s->backlog, s->objects_live,
			    (unsigned long long)s->completed, (unsigned long long)s->doorbells,
			    (unsigned long long)s->wqes, (unsigned long long)s->turns,
			    (unsigned long long)s->wakes, (unsigned long long)s->registered_bytes);
	}
	if (w->nsnap > RDMEM_WORKER_LIST_MAX && !json)
		rdmem_text_add(o, "  ... and %u more sessions\n", w->nsnap - RDMEM_WORKER_LIST_MAX);
	pthread_mutex_unlock(&w->lock);
	if (json)
		rdmem_text_add(o, "]}");
}

int rdmem_workers_format(struct rdmem_workers *ws, int json, char *buf, size_t cap)
{
	struct rdmem_text o = { buf, cap, 0, 0 };
	uint32_t i;

	if (!cap)
		return -E2BIG;
	buf[0] = '\0';
	if (json)
		rdmem_text_add(&o, "[");
	for (i = 0; i < ws->n; i++) {
		if (json && i)
			rdmem_text_add(&o, ",");
		rdmem_workers_format_one(&ws->w[i], json, &o);
	}
	if (json)
		rdmem_text_add(&o, "]");
	return o.overflow ? -E2BIG : (int)o.len;
}
