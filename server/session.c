/* session.c - the server side of one agent's RDMA session.
 *
 * The session learns of requests from completions of the agent's WRITE WITH
 * IMMEDIATE (imm = ring slot), serves up to a budget of them a round through
 * rdmem_service_dispatch(), and answers each into the agent's response slot
 * with the same publication (fabric/dataplane.h). Replies that do not fit the response
 * slot (or that the agent asked for by reference) go into the lease's object
 * pool and travel as a reference the agent RDMA-READs. A worker thread
 * (worker.c) drives many sessions; nothing here blocks. Setup and teardown
 * are in session_open.c.
 */
#include "server/session.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric/dataplane.h"
#include "rdmem/util.h"
#include "server/objpool.h"
#include "server/session_impl.h"

static int rdmem_session_reap(struct rdmem_session *s);

/* Posts the batched replies; a full send queue empties as completions are
 * reaped. Each reply's staging stays untouched until the agent answers it
 * with its next request on that slot, so posting late is safe. */
static int rdmem_session_flush(struct rdmem_session *s)
{
	int ret, spins = 0;

	if (!s->batch_n)
		return 0;
	while ((ret = rdmem_fab_post(s->conn, s->batch, (int)s->batch_n)) == -EAGAIN) {
		if ((ret = rdmem_session_reap(s)) < 0)
			return ret;
		if (++spins > 1000000) {
			rdmem_err_limited("session %u: send queue stuck full", s->id);
			return -EIO;
		}
		rdmem_cpu_relax();
	}
	if (ret == 0) {
		s->batch_n = 0;
		s->doorbells++;
	}
	return ret;
}

/* ---- replies ----------------------------------------------------------- */

struct rdmem_session_sink {
	struct rdmem_reply_sink base;
	struct rdmem_session *s;
	uint32_t slot;
	int want_objref;
	int used_objref;
	struct rdmem_objref ref;
};

static uint8_t *rdmem_session_staging(struct rdmem_session *s, uint32_t slot)
{
	return s->staging + (uint64_t)slot * rdmem_session_staging_stride(s);
}

static int rdmem_session_reserve(struct rdmem_reply_sink *base, uint32_t len, void **buf)
{
	struct rdmem_session_sink *k = (struct rdmem_session_sink *)base;
	struct rdmem_session *s = k->s;
	int ret;

	if (len <= s->eager_bytes && (!k->want_objref || len == 0)) {
		*buf = rdmem_session_staging(s, k->slot) + RDMEM_DESC_SIZE;
		return 0;
	}
	ret = rdmem_objpool_alloc(&s->objects, len, rdmem_now_ns(), &k->ref, buf);
	if (ret == 0) {
		k->used_objref = 1;
		s->eager_to_lazy += !k->want_objref;
	}
	return ret;
}

static int rdmem_session_reclaim(void *ctx, const struct rdmem_objref *ref)
{
	return rdmem_objpool_reclaim(&((struct rdmem_session *)ctx)->objects, ref);
}

/* The reply goes to the agent's response slot of the same index; it joins
 * the batch rdmem_session_poll posts. */
static int rdmem_session_send_reply(struct rdmem_session *s, uint32_t slot, struct rdmem_desc *rep,
				    uint32_t slot_payload)
{
	uint8_t *stage = rdmem_session_staging(s, slot);
	struct rdmem_sge sge = { (uintptr_t)(stage + RDMEM_DESC_SIZE), slot_payload,
				 s->mr_staging.lkey };
	/* Descriptor and payload back to back in the staging: one gather
	 * entry, one WQE (inline when small). */
	struct rdmem_dp_msg m = {
		.slot = slot,
		.desc = (struct rdmem_desc *)stage,
		.desc_lkey = s->mr_staging.lkey,
		.slot_addr = s->resp.addr + (uint64_t)slot * s->resp_stride,
		.rkey = s->resp.rkey,
		.payload = &sge,
		.npayload = slot_payload ? 1 : 0,
	};
	int ret;

	memcpy(stage, rep, RDMEM_DESC_SIZE);
	if (s->batch_n + RDMEM_DP_MAX_WRS > s->batch_cap && (ret = rdmem_session_flush(s)) < 0)
		return ret;
	ret = rdmem_dp_build(s->conn, &m, &s->batch[s->batch_n]);
	s->batch_n += (uint32_t)ret;
	s->wqes += (uint64_t)ret;
	return 0;
}

/* Answers the request with status alone, without serving it. */
static int rdmem_session_answer(struct rdmem_session *s, uint32_t slot,
				const struct rdmem_desc *req, uint16_t status)
{
	struct rdmem_desc rep = { 0 };

	rep.seq = req->seq;
	rep.req_id = req->req_id;
	rep.op = req->op;
	rep.path = req->path < RDMEM_PATH__COUNT ? req->path : 0;
	rep.status = status;
	return rdmem_session_send_reply(s, slot, &rep, 0);
}

static int rdmem_session_refuse(struct rdmem_session *s, uint32_t slot,
				const struct rdmem_desc *req, uint16_t status)
{
	s->bad++;
	rdmem_service_count_bad_input(s->svc);
	return rdmem_session_answer(s, slot, req, status);
}

uint16_t rdmem_session_check_req(const struct rdmem_desc *req, uint32_t slot, uint32_t slots,
				 uint32_t slot_bytes, uint32_t max_value)
{
	uint64_t area = (uint64_t)slots * rdmem_slot_stride(slot_bytes);
	uint16_t st = rdmem_desc_check(req, max_value);

	if (st)
		return st;
	/* A payload starts in its own slot and may run on through the
	 * following ones (their descriptors too: the agent reserved them). */
	if (slot >= slots || req->data_off != rdmem_slot_data_off(slot, slot_bytes))
		return RDMEM_S_BAD_REQUEST;
	if (rdmem_desc_payload_len(req) > area - req->data_off)
		return RDMEM_S_BAD_REQUEST;
	return RDMEM_S_OK;
}

/* The wakes the request in slot acknowledges (layout.h, RDMEM_TURN_IMM),
 * read as it arrives, not when served: a switch that finds the session
 * with requests waiting tells it its turn before serving them, and that
 * turn should wake it. The agent may rewrite the slot at any time; only
 * a hint naming the wake we sent counts (rdmem_turn_ack). */
static void rdmem_session_take_ack(struct rdmem_session *s, uint32_t slot)
{
	const struct rdmem_desc *d =
	    (const struct rdmem_desc *)(s->req + (uint64_t)slot * s->req_stride);
	uint16_t hint;

	memcpy(&hint, &d->hint, sizeof(hint));
	s->wakes_acked = rdmem_turn_ack((uint16_t)s->wakes, s->wakes_acked, rdmem_le16(hint));
}

static void rdmem_session_ewma(struct rdmem_session *s, unsigned path, uint64_t ns)
{
	uint64_t *e = &s->ewma_ns[path < RDMEM_PATH__COUNT ? path : 0];

	*e = *e ? (*e * 7 + ns) / 8 : ns;
}

/*
 * Points call at copies of the request's key and value, the bytes the
 * service reads. The request slot is the peer's to write (remote write
 * access) at any time, also while we serve it: a check of bytes there and
 * a later read of them may see two values. Found by review: an MGET entry's
 * offset passed its check and was read again unchecked (the worker read 4
 * GiB past the slot and the server died), an image's name passed its check
 * and was copied again (a file written outside --image-dir), a PUT's key
 * was hashed and then stored as other bytes (an entry no lookup finds).
 * The key is always copied (at most RDMEM_MAX_KEY bytes); the value too,
 * unless the op reads it once as opaque bytes (rdmem_service_value_opaque:
 * PUT, ECHO), where a racing peer changes only its own call and a copy
 * would cost a large PUT a second pass over its value.
 */
static int rdmem_session_snapshot(struct rdmem_session *s, const struct rdmem_desc *req,
				  struct rdmem_call *call)
{
	const uint8_t *key = s->req + req->data_off;
	int opaque = rdmem_service_value_opaque(req->op);
	uint64_t need = req->key_len + (opaque ? 0 : (uint64_t)req->val_len);

	/* Never NULL, even for a request of no bytes: memcpy's arguments
	 * must be valid pointers (UBSan aborted the worker on a PING). */
	if (need > s->copy_cap || !s->copy) {
		uint64_t cap = RDMEM_MAX(need, 2 * (uint64_t)RDMEM_MAX_KEY);
		uint8_t *p;

		/* need <= RDMEM_MAX_KEY + --max-value (rdmem_desc_check), so
		 * cap fits 32 bits. Grows to what the session sends, up to
		 * RDMEM_SESSION_COPY_KEEP for good (rdmem_session_trim_copy);
		 * a larger request allocates each time. */
		if (!(p = realloc(s->copy, cap)))
			return -ENOMEM;
		s->copy = p;
		s->copy_cap = (uint32_t)cap;
	}
	memcpy(s->copy, key, req->key_len);
	call->key = s->copy;
	call->val = key + req->key_len;
	if (!opaque) {
		memcpy(s->copy + req->key_len, call->val, req->val_len);
		call->val = s->copy + req->key_len;
	}
	return 0;
}

/* A large copy is not kept: a session that sent one big MGET or image
 * chunk would hold it for life (up to --max-value, 64 MiB, a session). */
static void rdmem_session_trim_copy(struct rdmem_session *s)
{
	if (s->copy_cap <= RDMEM_SESSION_COPY_KEEP)
		return;
	free(s->copy);
	s->copy = NULL;
	s->copy_cap = 0;
}

static int rdmem_session_serve(struct rdmem_session *s, uint32_t slot)
{
	struct rdmem_session_sink sink = { { rdmem_session_reserve }, s, slot, 0, 0, { 0 } };
	struct rdmem_desc req, rep = { 0 };
	struct rdmem_call call;
	uint64_t t0, t1;
	uint16_t st;
	int ret;

	/* Our copy is what we validate and use: the agent cannot change it now. */
	if (rdmem_dp_take((struct rdmem_desc *)(s->req + (uint64_t)slot * s->req_stride), &req) <
	    0) {
		s->bad++;
		rdmem_service_count_bad_input(s->svc);
		rdmem_warn_limited("session %u: immediate for slot %u that is not READY: ignored",
				   s->id, slot);
		return 0;
	}
	st = rdmem_session_check_req(&req, slot, s->slots, s->slot_bytes, s->cfg->max_value);
	if (st)
		return rdmem_session_refuse(s, slot, &req, st);
	if (req.key_len + (uint64_t)req.val_len > s->req_stride - RDMEM_DESC_SIZE) {
		s->bulk_requests++;
		s->bulk_bytes += rdmem_desc_payload_len(&req);
	}
	call.req = &req;
	if (rdmem_session_snapshot(s, &req, &call) < 0) {
		rdmem_err_limited("session %u: no memory to copy a request of %u + %u B: "
				  "answered busy",
				  s->id, req.key_len, req.val_len);
		return rdmem_session_answer(s, slot, &req, RDMEM_S_BUSY);
	}
	call.reclaim = rdmem_session_reclaim;
	call.reclaim_ctx = s;
	/* A transport flag: this path consumes it, the service never sees it. */
	sink.want_objref = !!(req.flags & RDMEM_F_WANT_OBJREF);
	req.flags &= (uint16_t)~RDMEM_F_WANT_OBJREF;
	/* The replies built before a call that may wait (an exactly-once retry
	 * waits for its first run, up to RDMEM_DEDUP_WAIT_MS) or take long (an
	 * image's last chunk commits) go out first, not after it. */
	if ((req.flags & RDMEM_F_CALL_ID || req.op == RDMEM_OP_IMAGE_CHUNK) &&
	    (ret = rdmem_session_flush(s)) < 0)
		return ret;
	/* One clock read each side of the dispatch serves both its histogram
	 * (the service's) and this session's per-path average. */
	t0 = rdmem_now_ns();
	t1 = rdmem_service_dispatch_peer(s->svc, &call, &s->peer, &sink.base, &rep, t0);
	rdmem_session_trim_copy(s);
	rep.seq = req.seq;
	rep.req_id = req.req_id;
	rep.op = req.op;
	rep.path = req.path;
	if (sink.used_objref) {
		rep.flags |= RDMEM_F_OBJREF;
		rep.args.obj = sink.ref;
	}
	s->completed++;
	s->failed += rep.status != RDMEM_S_OK;
	rdmem_session_ewma(s, req.path, t1 - t0);
	return rdmem_session_send_reply(s, slot, &rep, sink.used_objref ? 0 : rep.val_len);
}

/* ---- completions -------------------------------------------------------- */

static void rdmem_session_ready_push(struct rdmem_session *s, uint32_t slot)
{
	s->ready[(s->ready_head + s->ready_count) % s->slots] = slot;
	s->ready_count++;
}

/* Returns completions handled, or -ECONNRESET when the connection broke. */
static int rdmem_session_reap(struct rdmem_session *s)
{
	struct rdmem_wc wc[32];
	int n, i;

	if (s->turn_err)
		return s->turn_err;
	if ((n = rdmem_fab_poll(s->conn, wc, 32)) < 0)
		return n;
	for (i = 0; i < n; i++) {
		if (wc[i].status != RDMEM_WC_SUCCESS) {
			rdmem_err_limited("session %u (%s): completion error: %s", s->id,
					  rdmem_fab_peer(s->conn),
					  rdmem_wc_status_name(wc[i].status));
			return -ECONNRESET;
		}
		if (wc[i].op != RDMEM_WC_RECV_IMM)
			continue;
		s->recv_owed++;
		/* At most one request per slot is in flight; more is a broken peer. */
		if (wc[i].imm >= s->slots || s->ready_count >= s->slots) {
			s->bad++;
			rdmem_service_count_bad_input(s->svc);
			rdmem_warn_limited("session %u: immediate %u out of range: ignored", s->id,
					   wc[i].imm);
			continue;
		}
		/* Only an in-range request exempts it from the grace reclaim;
		 * the listener learns it at once (share.c skips evicting while
		 * a silent session can be reclaimed). Relaxed: a flag alone. */
		if (s->heard++ == 0 && s->guard)
			atomic_store_explicit(&s->guard->sent, 1, memory_order_relaxed);
		rdmem_session_take_ack(s, wc[i].imm);
		rdmem_session_ready_push(s, wc[i].imm);
	}
	/* Batched, and here (every path that reaps): slots + batch were posted,
	 * so with at most a batch owed a receive waits for every request. */
	if (s->recv_owed >= RDMEM_SESSION_RECV_BATCH) {
		int ret = rdmem_fab_post_recv(s->conn, (int)s->recv_owed);

		if (ret < 0)
			return ret;
		s->recv_owed = 0;
	}
	return n;
}

/* The service sums every session's pool for /metrics: it gets the changes. */
void rdmem_session_tell_pool(struct rdmem_session *s, int64_t used, int64_t size, int64_t live)
{
	int64_t *t = s->pool_told;

	if (used == t[0] && size == t[1] && live == t[2])
		return;
	rdmem_service_pool_delta(s->svc, used - t[0], size - t[1], live - t[2]);
	t[0] = used;
	t[1] = size;
	t[2] = live;
}

void rdmem_session_publish_ctrl(struct rdmem_session *s, uint64_t now)
{
	struct rdmem_ctrl *c = s->ctrl;
	const struct rdmem_objpool_stats *p = &s->objects.st;
	unsigned i;

	/* Advisory snapshot for the agent's path selector: odd seq while
	 * writing; a reader keeps only copies whose two sequences match. The
	 * page is on the wire (RDMA-READ by the agent): every field little-endian. */
	c->seq_begin = rdmem_le64(++s->ctrl_seq);
	atomic_thread_fence(memory_order_release);
	c->magic = rdmem_le32(RDMEM_CTRL_MAGIC);
	c->version = rdmem_le32(RDMEM_LAYOUT_VERSION);
	c->ring_slots = rdmem_le32(s->slots);
	c->ring_backlog = rdmem_le32(s->ready_count);
	c->objpool_bytes = rdmem_le64(s->objects.area_bytes);
	c->objpool_used = rdmem_le64(p->used_bytes);
	c->objects_live = rdmem_le32(p->live);
	c->rdma_state = rdmem_le32(1);
	c->tcp_state =
	    rdmem_le32(s->cfg->tcp_up ? 1 : 0); /* the agent's TCP fallback exists or not */
	c->session_id = rdmem_le32(s->id);
	/* The page carries slices mod 2^32. */
	c->group = rdmem_le32((uint32_t)s->group);
	c->active_group = rdmem_le32((uint32_t)(s->serving ? *s->serving : 0));
	c->completed = rdmem_le64(s->completed);
	c->failed = rdmem_le64(s->failed);
	c->bad_requests = rdmem_le64(s->bad);
	c->eager_to_lazy = rdmem_le64(s->eager_to_lazy);
	memcpy(c->ewma_ns, s->ewma_ns, sizeof(c->ewma_ns));
	for (i = 0; i < RDMEM_PATH__COUNT; i++)
		RDMEM_LE64_SWAP(c->ewma_ns[i]);
	c->obj_alloc = rdmem_le64(p->alloc);
	c->obj_reclaim = rdmem_le64(p->reclaim);
	c->obj_repeat = rdmem_le64(p->repeat);
	c->obj_stale = rdmem_le64(p->stale);
	c->obj_timeout = rdmem_le64(p->timeout);
	c->obj_full = rdmem_le64(p->full);
	c->bulk_requests = rdmem_le64(s->bulk_requests);
	c->bulk_bytes = rdmem_le64(s->bulk_bytes);
	atomic_thread_fence(memory_order_release);
	c->seq_end = rdmem_le64(++s->ctrl_seq);
	c->seq_begin = rdmem_le64(s->ctrl_seq);
	s->ctrl_at = now;
	rdmem_session_tell_pool(s, (int64_t)p->used_bytes, (int64_t)s->objects.area_bytes, p->live);
}

/* The listener is full, or this session's address at its limit, and its
 * peer never sent a request. */
static int rdmem_session_unused(struct rdmem_session *s)
{
	const struct rdmem_session_guard *g = s->guard;
	int full;

	/* relaxed: times, no other data rides on them (the listener's stores);
	 * the address entry stays while this session counts in it */
	if (s->heard || !g)
		return 0;
	full = s->opened_ns < atomic_load_explicit(g->reclaim_before_ns, memory_order_relaxed);
	if (!full &&
	    s->opened_ns >= atomic_load_explicit(g->addr_reclaim_before_ns, memory_order_relaxed))
		return 0;
	rdmem_service_count_net(s->svc, RDMEM_NET_RDMA_RECLAIMED);
	rdmem_warn_limited("session %u (%s): no request in %llu ms while %s: closed for a new "
			   "agent (--session-grace-ms)",
			   s->id, rdmem_fab_peer(s->conn),
			   (unsigned long long)((rdmem_now_ns() - s->opened_ns) / 1000000),
			   full ? "sessions are full"
				: "its address holds --max-sessions-per-addr");
	return 1;
}

/*
 * The listener was full and gave this session's place to a peer of another
 * address (its own holds the most sessions; listener.c). Relaxed: a flag,
 * nothing rides on it. Else tells the listener when requests came, at the
 * tick's clock (a tick per sweep, not a clock read per request).
 */
static int rdmem_session_evicted(struct rdmem_session *s, uint64_t now)
{
	if (!s->guard)
		return 0;
	if (atomic_load_explicit(&s->guard->evict, memory_order_relaxed)) {
		rdmem_service_count_net(s->svc, RDMEM_NET_RDMA_EVICTED);
		rdmem_warn_limited("session %u (%s): closed while sessions are full: its address "
				   "holds the most, and a peer of another address came",
				   s->id, rdmem_fab_peer(s->conn));
		return 1;
	}
	if (s->heard != s->heard_seen) {
		s->heard_seen = s->heard;
		atomic_store_explicit(&s->guard->heard_ns, now, memory_order_relaxed);
	}
	return 0;
}

static int rdmem_session_housekeeping(struct rdmem_session *s, uint64_t now)
{
	/* No connection check here: the worker checks only connections whose
	 * event fd is readable, all of them in one epoll_wait
	 * (rdmem_worker_check), not a syscall per session every few rounds. */
	if (rdmem_session_unused(s) || rdmem_session_evicted(s, now))
		return -ETIMEDOUT;
	/* now may be older than a stamp taken fresh elsewhere (arm, setup):
	 * compare without subtracting from it. */
	if (now > s->scan_at + RDMEM_SESSION_SCAN_NS) {
		uint32_t n = rdmem_objpool_scan(&s->objects, now);

		if (n)
			rdmem_warn_limited(
			    "session %u: %u unreclaimed objects freed by the TTL scan", s->id, n);
		s->scan_at = now;
	}
	if (now > s->ctrl_at + RDMEM_SESSION_CTRL_NS)
		rdmem_session_publish_ctrl(s, now);
	return 0;
}

/* ---- what a worker drives --------------------------------------------------- */

int rdmem_session_peek(struct rdmem_session *s)
{
	return rdmem_session_reap(s);
}

int rdmem_session_tick(struct rdmem_session *s, uint64_t now)
{
	int ret = rdmem_session_reap(s);

	return ret < 0 ? ret : rdmem_session_housekeeping(s, now);
}

uint64_t rdmem_session_timed(const struct rdmem_session *s)
{
	/* Live objects: the TTL scan frees those no RECLAIM gives back, at the
	 * first expiry, but housekeeping scans at most every SCAN_NS. The rest
	 * of the housekeeping has an fd (the connection's events) or a nudge
	 * (the listener's reclaim, rdmem_workers_nudge). */
	if (!s->objects.st.live || !s->objects.next_expiry_ns)
		return 0;
	return RDMEM_MAX(s->objects.next_expiry_ns, s->scan_at + RDMEM_SESSION_SCAN_NS + 1);
}

uint32_t rdmem_session_backlog(const struct rdmem_session *s)
{
	return s->ready_count;
}

int rdmem_session_poll(struct rdmem_session *s, uint32_t budget, uint64_t now)
{
	uint32_t done = 0;
	int ret;

	if ((ret = rdmem_session_reap(s)) < 0)
		return ret;
	while (s->ready_count && done < budget) {
		uint32_t slot = s->ready[s->ready_head];

		s->ready_head = (s->ready_head + 1) % s->slots;
		s->ready_count--;
		if ((ret = rdmem_session_serve(s, slot)) < 0)
			return ret;
		done++;
	}
	if ((ret = rdmem_session_flush(s)) < 0)
		return ret;
	/* The agent's path selector and stats read it: keep it current. */
	if (done)
		rdmem_session_publish_ctrl(s, now);
	if ((ret = rdmem_session_housekeeping(s, now)) < 0)
		return ret;
	return (int)done;
}

int rdmem_session_arm(struct rdmem_session *s)
{
	int ret;

	/* Going idle: leave the agent an up-to-date control page. */
	rdmem_session_publish_ctrl(s, rdmem_now_ns());
	if ((ret = rdmem_fab_arm(s->conn)) < 0)
		return ret;
	/* A completion that raced with arming is found here, not slept on. */
	if ((ret = rdmem_session_reap(s)) < 0)
		return ret;
	return ret > 0 || s->ready_count;
}

int rdmem_session_woke(struct rdmem_session *s, int comp_ready, int event_ready)
{
	if (comp_ready)
		rdmem_fab_ack(s->conn);
	if (event_ready && rdmem_fab_check(s->conn) < 0)
		return -ECONNRESET;
	return 0;
}

int rdmem_session_comp_fd(struct rdmem_session *s)
{
	return rdmem_fab_comp_fd(s->conn);
}

int rdmem_session_event_fd(struct rdmem_session *s)
{
	return rdmem_fab_event_fd(s->conn);
}

/* The source of a turn WRITE when the device cannot inline 8 bytes: the
 * control page's last 64 bytes, which the page never uses. */
#define RDMEM_SESSION_TURN_SRC (RDMEM_CTRL_BYTES - 64)
_Static_assert(sizeof(struct rdmem_ctrl) <= RDMEM_SESSION_TURN_SRC, "turn source is spare");

/* Writes the turn word now, in order behind the replies already posted
 * (one RC send queue). */
static int rdmem_session_post_turn(struct rdmem_session *s, uint16_t hold_us)
{
	uint64_t *src = (uint64_t *)((uint8_t *)s->ctrl + RDMEM_SESSION_TURN_SRC);
	struct rdmem_wr *wr;
	int ret;

	if (s->batch_n + 1 > s->batch_cap && (ret = rdmem_session_flush(s)) < 0)
		return ret;
	/* Inline, the bytes are copied at post. Else the WR reads src when it
	 * runs, and a later turn may have rewritten it by then: that WR then
	 * carries the later word early, and its own WR carries it again after
	 * it. Either way the agent is left with the last word we wrote. */
	*src = rdmem_turn_encode(++s->turn_seq, hold_us);
	wr = &s->batch[s->batch_n++];
	*wr = (struct rdmem_wr){
		.op = RDMEM_WR_WRITE,
		.flags = RDMEM_WR_INLINE,
		.nsge = 1,
		.remote_addr = s->turn_addr,
		.rkey = s->resp.rkey,
		.sge = { { (uintptr_t)src, sizeof(*src), s->mr_ctrl.lkey } },
	};
	/* A turn wakes an agent asleep on its hold, if the one receive it keeps
	 * for that is free (layout.h); else it finds the word at its next look
	 * or when its hold runs out, as every hold does. */
	if (!hold_us && rdmem_turn_may_wake((uint16_t)s->wakes, s->wakes_acked)) {
		wr->op = RDMEM_WR_WRITE_IMM;
		wr->imm = RDMEM_TURN_IMM;
		s->wakes++;
	}
	s->turns++;
	return rdmem_session_flush(s);
}

void rdmem_session_set_yield(struct rdmem_session *s, uint32_t hold_us, uint64_t now)
{
	int holding = s->hold_until > now;
	int ret;

	/* Told once per hold: a hold running is not told again, and a turn is
	 * given only to an agent that may still be holding. */
	if (s->turn_err || (hold_us ? holding : !holding))
		return;
	hold_us = RDMEM_MIN(hold_us, UINT16_MAX);
	/* A fresh clock, not the round's: a long dispatch since (an image's
	 * commit) would end our view of the hold before the agent's, and the
	 * turn that ends it at idle would be skipped (found by review). */
	s->hold_until = hold_us ? rdmem_now_ns() + (uint64_t)hold_us * 1000 : 0;
	if ((ret = rdmem_session_post_turn(s, (uint16_t)hold_us)) < 0) {
		rdmem_err_limited("session %u (%s): turn word not posted: %s", s->id,
				  rdmem_fab_peer(s->conn), strerror(-ret));
		s->turn_err = ret;
	}
}

int rdmem_session_holding(const struct rdmem_session *s, uint64_t now)
{
	return s->hold_until > now;
}

void rdmem_session_set_group(struct rdmem_session *s, uint64_t slice)
{
	s->group = slice;
}

uint64_t rdmem_session_group(const struct rdmem_session *s)
{
	return s->group;
}

void rdmem_session_follow_slices(struct rdmem_session *s, const uint64_t *serving)
{
	s->serving = serving;
}

void rdmem_session_get_info(const struct rdmem_session *s, struct rdmem_session_info *out)
{
	out->id = s->id;
	out->lease = s->lease.index;
	out->slots = s->slots;
	out->backlog = s->ready_count;
	out->objects_live = s->objects.st.live;
	out->group = (uint32_t)s->group;
	out->completed = s->completed;
	out->doorbells = s->doorbells;
	out->wqes = s->wqes;
	out->turns = s->turns;
	out->wakes = s->wakes;
	out->registered_bytes = rdmem_session_registered_bytes(s);
}
