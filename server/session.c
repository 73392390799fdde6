/* session.c - the server side of one agent's RDMA session.
 *
 * The worker learns of requests from completions of the agent's WRITE WITH
 * IMMEDIATE (imm = ring slot), serves up to batch_budget of them a round
 * through rdmem_service_dispatch(), and answers each into the agent's
 * response slot with the same state-last publication. Replies that do not
 * fit the response slot (or that the agent asked for by reference) go into
 * the object pool and travel as a reference the agent RDMA-READs.
 */
#include "server/session.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fabric/dataplane.h"
#include "rdmem/idle.h"
#include "rdmem/util.h"
#include "server/objpool.h"

#define RDMEM_SESSION_RECV_BATCH 32
#define RDMEM_SESSION_CTRL_NS	 1000000ull   /* control page refresh */
#define RDMEM_SESSION_SCAN_NS	 100000000ull /* object TTL scan */
#define RDMEM_SESSION_CHECK_NS	 10000000ull  /* connection check; a syscall, so not every round */
#define RDMEM_SESSION_POLL_MS	 100
#define RDMEM_PAGE		 4096u

struct rdmem_session_area {
	uint64_t off, len;
};

struct rdmem_session {
	const struct rdmem_rdma_config *cfg;
	struct rdmem_service *svc;
	struct rdmem_conn *conn;
	uint32_t id;
	uint32_t slots, slot_bytes, resp_bytes;
	struct rdmem_remote resp; /* the agent's response ring + data */
	uint64_t resp_data;	  /* where its response data starts (after its ring) */

	uint8_t *region;
	uint64_t region_len;
	struct rdmem_desc *ring;
	uint8_t *payload;
	struct rdmem_ctrl *ctrl;
	uint8_t *staging; /* per slot: reply descriptor, then reply payload */
	struct rdmem_mr mr_ring, mr_payload, mr_pool, mr_ctrl, mr_staging;
	struct rdmem_objpool pool;

	uint32_t *ready; /* FIFO of slots whose immediate arrived */
	uint32_t ready_head, ready_count;
	uint32_t recv_owed; /* receives consumed and not yet reposted */

	uint64_t ctrl_seq, ctrl_at, scan_at, check_at;
	uint64_t completed, failed, bad, eager_to_lazy, bulk_requests, bulk_bytes;
	uint64_t ewma_ns[RDMEM_PATH__COUNT];

	pthread_t thread;
	int accepted, started;
	int stop_efd;
	atomic_int finished; /* set by the worker as it ends; read by the listener */
};

static uint64_t rdmem_page_up(uint64_t n)
{
	return (n + RDMEM_PAGE - 1) / RDMEM_PAGE * RDMEM_PAGE;
}

static uint64_t rdmem_session_staging_stride(const struct rdmem_session *s)
{
	return RDMEM_DESC_SIZE + s->resp_bytes;
}

int rdmem_session_check_hello(const struct rdmem_xchg_hello *h, size_t len)
{
	uint64_t need;

	if (len < sizeof(*h) || h->magic != RDMEM_XCHG_MAGIC)
		return RDMEM_S_BAD_REQUEST;
	if (h->version != RDMEM_LAYOUT_VERSION)
		return RDMEM_S_BAD_REQUEST;
	if (h->ring_slots == 0 || h->ring_slots > RDMEM_MAX_RING_SLOTS)
		return RDMEM_S_BAD_REQUEST;
	if (h->resp_bytes < RDMEM_DESC_SIZE || h->resp_bytes > (1u << 20))
		return RDMEM_S_BAD_REQUEST;
	need = (uint64_t)h->ring_slots * (RDMEM_DESC_SIZE + h->resp_bytes);
	if (h->resp.len < need)
		return RDMEM_S_BAD_REQUEST;
	return RDMEM_S_OK;
}

/* ---- regions ----------------------------------------------------------- */

static int rdmem_session_reg(struct rdmem_session *s, struct rdmem_mr *mr, uint64_t off,
			     uint64_t len, unsigned access)
{
	return rdmem_fab_reg(s->conn, s->region + off, len, access, mr);
}

static int rdmem_session_alloc_regions(struct rdmem_session *s)
{
	struct rdmem_objpool_config pc = { s->cfg->objpool_slabs, s->cfg->max_value,
					   s->cfg->object_ttl_ms };
	uint64_t ring = rdmem_page_up((uint64_t)s->slots * RDMEM_DESC_SIZE);
	uint64_t payload = rdmem_page_up((uint64_t)s->slots * s->slot_bytes);
	uint64_t pool = rdmem_page_up(rdmem_objpool_area_bytes(&pc));
	uint64_t staging = rdmem_page_up((uint64_t)s->slots * rdmem_session_staging_stride(s));
	uint64_t o_payload = ring, o_pool = o_payload + payload, o_ctrl = o_pool + pool;
	uint64_t o_staging = o_ctrl + RDMEM_CTRL_BYTES;
	int ret;

	s->region_len = o_staging + staging;
	s->region = rdmem_fab_alloc(s->conn, s->region_len);
	if (!s->region)
		return -ENOMEM;
	s->ring = (struct rdmem_desc *)s->region;
	s->payload = s->region + o_payload;
	s->ctrl = (struct rdmem_ctrl *)(s->region + o_ctrl);
	s->staging = s->region + o_staging;
	ret = rdmem_objpool_init(&s->pool, &pc, s->region + o_pool);
	if (ret)
		return ret;
	/* Least access per area: the agent writes requests, reads objects and
	 * the control page, and never touches the staging area. */
	if ((ret = rdmem_session_reg(s, &s->mr_ring, 0, ring, RDMEM_ACCESS_REMOTE_WRITE)) ||
	    (ret = rdmem_session_reg(s, &s->mr_payload, o_payload, payload,
				     RDMEM_ACCESS_REMOTE_WRITE)) ||
	    (ret = rdmem_session_reg(s, &s->mr_pool, o_pool, pool, RDMEM_ACCESS_REMOTE_READ)) ||
	    (ret = rdmem_session_reg(s, &s->mr_ctrl, o_ctrl, RDMEM_CTRL_BYTES,
				     RDMEM_ACCESS_REMOTE_READ)) ||
	    (ret = rdmem_session_reg(s, &s->mr_staging, o_staging, staging, RDMEM_ACCESS_LOCAL)))
		return ret;
	return 0;
}

static struct rdmem_remote rdmem_session_remote(const struct rdmem_mr *mr)
{
	struct rdmem_remote r = { (uint64_t)(uintptr_t)mr->addr, mr->rkey, (uint32_t)mr->len };

	return r;
}

static int rdmem_session_accept(struct rdmem_session *s, const struct rdmem_xchg_hello *hello)
{
	struct rdmem_xchg_welcome w = { 0 };

	w.magic = RDMEM_XCHG_MAGIC;
	w.version = RDMEM_LAYOUT_VERSION;
	w.ring_slots = s->slots;
	w.slot_bytes = s->slot_bytes;
	w.max_value = s->cfg->max_value;
	w.session_id = s->id;
	w.req_ring = rdmem_session_remote(&s->mr_ring);
	w.req_payload = rdmem_session_remote(&s->mr_payload);
	w.objpool = rdmem_session_remote(&s->mr_pool);
	w.ctrl = rdmem_session_remote(&s->mr_ctrl);
	(void)hello;
	return rdmem_fab_accept(s->conn, &w, sizeof(w));
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

	if (len <= s->resp_bytes && (!k->want_objref || len == 0)) {
		*buf = rdmem_session_staging(s, k->slot) + RDMEM_DESC_SIZE;
		return 0;
	}
	ret = rdmem_objpool_alloc(&s->pool, len, rdmem_now_ns(), &k->ref, buf);
	if (ret == 0) {
		k->used_objref = 1;
		s->eager_to_lazy += !k->want_objref;
	}
	return ret;
}

static int rdmem_session_reclaim(void *ctx, const struct rdmem_objref *ref)
{
	return rdmem_objpool_reclaim(&((struct rdmem_session *)ctx)->pool, ref);
}

static int rdmem_session_reap(struct rdmem_session *s);

/* The reply goes to the agent's response slot of the same index. */
static int rdmem_session_send_reply(struct rdmem_session *s, uint32_t slot, struct rdmem_desc *rep,
				    uint32_t slot_payload)
{
	uint8_t *stage = rdmem_session_staging(s, slot);
	struct rdmem_sge sge = { (uintptr_t)(stage + RDMEM_DESC_SIZE), slot_payload,
				 s->mr_staging.lkey };
	struct rdmem_dp_msg m = {
		.slot = slot,
		.desc = (struct rdmem_desc *)stage,
		.desc_lkey = s->mr_staging.lkey,
		.ring = s->resp,
		.payload = &sge,
		.npayload = slot_payload ? 1 : 0,
		.payload_addr = s->resp_data + (uint64_t)slot * s->resp_bytes,
		.payload_rkey = s->resp.rkey,
	};
	int ret, spins = 0;

	memcpy(stage, rep, RDMEM_DESC_SIZE);
	while ((ret = rdmem_dp_publish(s->conn, &m)) == -EAGAIN) {
		/* Send queue full: completions retire WRs; reap them and retry. */
		if ((ret = rdmem_session_reap(s)) < 0)
			return ret;
		if (++spins > 1000000) {
			rdmem_err("session %u: send queue stuck full", s->id);
			return -EIO;
		}
		rdmem_cpu_relax();
	}
	return ret;
}

static int rdmem_session_refuse(struct rdmem_session *s, uint32_t slot,
				const struct rdmem_desc *req, uint16_t status)
{
	struct rdmem_desc rep = { 0 };

	s->bad++;
	rdmem_service_count_bad_input(s->svc);
	rep.seq = req->seq;
	rep.req_id = req->req_id;
	rep.op = req->op;
	rep.path = req->path < RDMEM_PATH__COUNT ? req->path : 0;
	rep.status = status;
	return rdmem_session_send_reply(s, slot, &rep, 0);
}

/* Checks what the agent controls beyond the generic descriptor checks. */
static uint16_t rdmem_session_check_req(const struct rdmem_session *s, uint32_t slot,
					const struct rdmem_desc *req)
{
	uint64_t area = (uint64_t)s->slots * s->slot_bytes;
	uint16_t st = rdmem_desc_check(req, s->cfg->max_value);

	if (st)
		return st;
	/* A payload starts in its own slot and may span the following ones. */
	if (req->data_off != (uint64_t)slot * s->slot_bytes)
		return RDMEM_S_BAD_REQUEST;
	if (rdmem_desc_payload_len(req) > area - req->data_off)
		return RDMEM_S_BAD_REQUEST;
	return RDMEM_S_OK;
}

static void rdmem_session_ewma(struct rdmem_session *s, unsigned path, uint64_t ns)
{
	uint64_t *e = &s->ewma_ns[path < RDMEM_PATH__COUNT ? path : 0];

	*e = *e ? (*e * 7 + ns) / 8 : ns;
}

static int rdmem_session_serve(struct rdmem_session *s, uint32_t slot)
{
	struct rdmem_session_sink sink = { { rdmem_session_reserve }, s, slot, 0, 0, { 0 } };
	struct rdmem_desc req, rep = { 0 };
	struct rdmem_call call;
	uint64_t t0 = rdmem_now_ns();
	uint16_t st;

	/* Our copy is what we validate and use: the agent cannot change it now. */
	if (rdmem_dp_take(&s->ring[slot], &req) < 0) {
		s->bad++;
		rdmem_service_count_bad_input(s->svc);
		rdmem_warn("session %u: immediate for slot %u that is not READY: ignored", s->id,
			   slot);
		return 0;
	}
	st = rdmem_session_check_req(s, slot, &req);
	if (st)
		return rdmem_session_refuse(s, slot, &req, st);
	if (req.key_len + (uint64_t)req.val_len > s->slot_bytes) {
		s->bulk_requests++;
		s->bulk_bytes += rdmem_desc_payload_len(&req);
	}
	call.req = &req;
	call.key = s->payload + req.data_off;
	call.val = call.key + req.key_len;
	call.reclaim = rdmem_session_reclaim;
	call.reclaim_ctx = s;
	/* A transport flag: this path consumes it, the service never sees it. */
	sink.want_objref = !!(req.flags & RDMEM_F_WANT_OBJREF);
	req.flags &= (uint16_t)~RDMEM_F_WANT_OBJREF;
	rdmem_service_dispatch(s->svc, &call, &sink.base, &rep);
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
	rdmem_session_ewma(s, req.path, rdmem_now_ns() - t0);
	return rdmem_session_send_reply(s, slot, &rep, sink.used_objref ? 0 : rep.val_len);
}

/* ---- completions and the worker loop ------------------------------------ */

static void rdmem_session_ready_push(struct rdmem_session *s, uint32_t slot)
{
	s->ready[(s->ready_head + s->ready_count) % s->slots] = slot;
	s->ready_count++;
}

/* Returns completions handled, or -ECONNRESET when the connection broke. */
static int rdmem_session_reap(struct rdmem_session *s)
{
	struct rdmem_wc wc[32];
	int n = rdmem_fab_poll(s->conn, wc, 32), i;

	if (n < 0)
		return n;
	for (i = 0; i < n; i++) {
		if (wc[i].status != RDMEM_WC_SUCCESS) {
			rdmem_err("session %u (%s): completion error: %s", s->id,
				  rdmem_fab_peer(s->conn), rdmem_wc_status_name(wc[i].status));
			return -ECONNRESET;
		}
		if (wc[i].op != RDMEM_WC_RECV_IMM)
			continue;
		s->recv_owed++;
		/* At most one request per slot is in flight; more is a broken peer. */
		if (wc[i].imm >= s->slots || s->ready_count >= s->slots) {
			s->bad++;
			rdmem_service_count_bad_input(s->svc);
			rdmem_warn("session %u: immediate %u out of range: ignored", s->id,
				   wc[i].imm);
			continue;
		}
		rdmem_session_ready_push(s, wc[i].imm);
	}
	return n;
}

static void rdmem_session_publish_ctrl(struct rdmem_session *s, uint64_t now)
{
	struct rdmem_ctrl *c = s->ctrl;
	const struct rdmem_objpool_stats *p = &s->pool.st;

	/* Advisory snapshot for the agent's path selector: odd seq while
	 * writing; a reader keeps only copies whose two sequences match. */
	c->seq_begin = ++s->ctrl_seq;
	atomic_thread_fence(memory_order_release);
	c->magic = RDMEM_CTRL_MAGIC;
	c->version = RDMEM_LAYOUT_VERSION;
	c->ring_slots = s->slots;
	c->ring_backlog = s->ready_count;
	c->objpool_bytes = s->pool.area_bytes;
	c->objpool_used = p->used_bytes;
	c->objects_live = p->live;
	c->rdma_state = 1;
	c->tcp_state = 1;
	c->session_id = s->id;
	c->completed = s->completed;
	c->failed = s->failed;
	c->bad_requests = s->bad;
	c->eager_to_lazy = s->eager_to_lazy;
	memcpy(c->ewma_ns, s->ewma_ns, sizeof(c->ewma_ns));
	c->obj_alloc = p->alloc;
	c->obj_reclaim = p->reclaim;
	c->obj_repeat = p->repeat;
	c->obj_stale = p->stale;
	c->obj_timeout = p->timeout;
	c->obj_full = p->full;
	c->bulk_requests = s->bulk_requests;
	c->bulk_bytes = s->bulk_bytes;
	atomic_thread_fence(memory_order_release);
	c->seq_end = ++s->ctrl_seq;
	c->seq_begin = s->ctrl_seq;
	s->ctrl_at = now;
}

static int rdmem_session_housekeeping(struct rdmem_session *s)
{
	uint64_t now = rdmem_now_ns();

	if (now - s->check_at > RDMEM_SESSION_CHECK_NS) {
		s->check_at = now;
		if (rdmem_fab_check(s->conn) < 0)
			return -ECONNRESET;
	}
	if (now - s->scan_at > RDMEM_SESSION_SCAN_NS) {
		uint32_t n = rdmem_objpool_scan(&s->pool, now);

		if (n)
			rdmem_warn("session %u: %u unreclaimed objects freed by the TTL scan",
				   s->id, n);
		s->scan_at = now;
	}
	if (now - s->ctrl_at > RDMEM_SESSION_CTRL_NS)
		rdmem_session_publish_ctrl(s, now);
	return 0;
}

/* Serves up to batch_budget ready slots; returns how many, or -errno. */
static int rdmem_session_serve_batch(struct rdmem_session *s)
{
	uint32_t budget = s->cfg->batch_budget, done = 0;
	int ret;

	while (s->ready_count && done < budget) {
		uint32_t slot = s->ready[s->ready_head];

		s->ready_head = (s->ready_head + 1) % s->slots;
		s->ready_count--;
		if ((ret = rdmem_session_serve(s, slot)) < 0)
			return ret;
		done++;
	}
	if (s->recv_owed >= RDMEM_SESSION_RECV_BATCH) {
		if ((ret = rdmem_fab_post_recv(s->conn, (int)s->recv_owed)) < 0)
			return ret;
		s->recv_owed = 0;
	}
	return (int)done;
}

/* Sleeps until a completion, a connection event or a stop request. */
static int rdmem_session_block(struct rdmem_session *s)
{
	struct pollfd pfd[3] = { { rdmem_fab_comp_fd(s->conn), POLLIN, 0 },
				 { rdmem_fab_event_fd(s->conn), POLLIN, 0 },
				 { s->stop_efd, POLLIN, 0 } };
	int ret;

	/* Going idle: leave the agent an up-to-date control page. */
	rdmem_session_publish_ctrl(s, rdmem_now_ns());
	if ((ret = rdmem_fab_arm(s->conn)) < 0)
		return ret;
	/* A completion that raced with arming is found here, not slept on. */
	if ((ret = rdmem_session_reap(s)) != 0)
		return ret;
	ret = poll(pfd, 3, RDMEM_SESSION_POLL_MS);
	if (ret < 0 && errno != EINTR)
		return -errno;
	if (pfd[0].revents)
		rdmem_fab_ack(s->conn);
	if (pfd[2].revents)
		return -ESHUTDOWN;
	if (pfd[1].revents && rdmem_fab_check(s->conn) < 0)
		return -ECONNRESET;
	return 0;
}

static int rdmem_session_step(struct rdmem_session *s, struct rdmem_idle *idle)
{
	int got, served;

	if ((got = rdmem_session_reap(s)) < 0)
		return got;
	if ((served = rdmem_session_serve_batch(s)) < 0)
		return served;
	/* The agent's path selector and stats read it: keep it current. */
	if (served)
		rdmem_session_publish_ctrl(s, rdmem_now_ns());
	if (rdmem_session_housekeeping(s) < 0)
		return -ECONNRESET;
	if (got || served || s->ready_count) {
		rdmem_idle_reset(idle);
		return 0;
	}
	if (!rdmem_idle_step(idle, s->cfg->busy_poll))
		return 0;
	rdmem_idle_reset(idle);
	return rdmem_session_block(s);
}

static void *rdmem_session_worker(void *arg)
{
	struct rdmem_session *s = arg;
	struct rdmem_idle idle = { 0 };
	int ret;

	while ((ret = rdmem_session_step(s, &idle)) >= 0)
		;
	if (ret == -ESHUTDOWN)
		rdmem_info("session %u (%s): stopped", s->id, rdmem_fab_peer(s->conn));
	else
		rdmem_info("session %u (%s): ended: %s", s->id, rdmem_fab_peer(s->conn),
			   strerror(-ret));
	/* Pairs with the listener's acquire load in rdmem_session_finished(). */
	atomic_store_explicit(&s->finished, 1, memory_order_release);
	return NULL;
}

/* ---- open / close ------------------------------------------------------- */

/* Frees the session; a connection never accepted is rejected instead. */
static void rdmem_session_free(struct rdmem_session *s, int accepted)
{
	struct rdmem_mr *mrs[] = { &s->mr_ring, &s->mr_payload, &s->mr_pool, &s->mr_ctrl,
				   &s->mr_staging };
	struct rdmem_xchg_reject why = { RDMEM_XCHG_MAGIC, RDMEM_S_BUSY, 0, "server out of resources" };
	size_t i;

	for (i = 0; i < RDMEM_ARRAY_SIZE(mrs); i++)
		rdmem_fab_dereg(s->conn, mrs[i]);
	rdmem_objpool_fini(&s->pool);
	if (s->region)
		rdmem_fab_free(s->conn, s->region, s->region_len);
	if (accepted)
		rdmem_fab_close(s->conn);
	else
		rdmem_fab_reject(s->conn, &why, sizeof(why));
	if (s->stop_efd >= 0)
		close(s->stop_efd);
	free(s->ready);
	free(s);
}

static int rdmem_session_setup(struct rdmem_session *s, const struct rdmem_xchg_hello *hello)
{
	int ret;

	if ((ret = rdmem_session_alloc_regions(s)) < 0)
		return ret;
	s->ready = calloc(s->slots, sizeof(*s->ready));
	s->stop_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!s->ready || s->stop_efd < 0)
		return -ENOMEM;
	/* One receive per slot: at most one request per slot is ever in flight,
	 * so immediates never find the receive queue empty. */
	if ((ret = rdmem_fab_post_recv(s->conn, (int)s->slots)) < 0)
		return ret;
	rdmem_session_publish_ctrl(s, rdmem_now_ns());
	if ((ret = rdmem_session_accept(s, hello)) < 0)
		return ret;
	s->accepted = 1;
	return 0;
}

/* A device may grant smaller queues than the listener asked for: serve fewer
 * slots then, so each slot's reply WRs (payload, descriptor, state) and its
 * request's receive fit by construction. The welcome tells the agent. */
static uint32_t rdmem_session_fit_slots(struct rdmem_conn *conn, uint32_t slots)
{
	uint32_t max_send, max_recv, fit;

	rdmem_fab_queue_caps(conn, &max_send, &max_recv);
	fit = max_send > RDMEM_SESSION_WR_SPARE
		  ? (max_send - RDMEM_SESSION_WR_SPARE) / RDMEM_SESSION_WRS_PER_SLOT
		  : 0;
	fit = RDMEM_MAX(RDMEM_MIN(fit, max_recv), 1u);
	if (fit >= slots)
		return slots;
	rdmem_warn("session with %s: send queue %u, receive queue %u: %u ring slots instead of %u",
		   rdmem_fab_peer(conn), max_send, max_recv, fit, slots);
	return fit;
}

int rdmem_session_open(const struct rdmem_rdma_config *cfg, struct rdmem_service *svc,
		       struct rdmem_conn *conn, const struct rdmem_xchg_hello *hello, uint32_t id,
		       struct rdmem_session **out)
{
	struct rdmem_session *s = calloc(1, sizeof(*s));
	int ret;

	if (!s) {
		struct rdmem_xchg_reject why = { RDMEM_XCHG_MAGIC, RDMEM_S_BUSY, 0, "out of memory" };

		rdmem_fab_reject(conn, &why, sizeof(why));
		return -ENOMEM;
	}
	s->cfg = cfg;
	s->svc = svc;
	s->conn = conn;
	s->id = id;
	s->stop_efd = -1;
	s->slots = rdmem_session_fit_slots(conn, RDMEM_MIN(hello->ring_slots, cfg->ring_slots));
	s->slot_bytes = cfg->slot_bytes;
	s->resp_bytes = hello->resp_bytes;
	s->resp = hello->resp;
	s->resp_data = hello->resp.addr + (uint64_t)hello->ring_slots * RDMEM_DESC_SIZE;
	ret = rdmem_session_setup(s, hello);
	if (ret == 0)
		ret = -pthread_create(&s->thread, NULL, rdmem_session_worker, s);
	if (ret < 0) {
		rdmem_err("session %u (%s): setup failed: %s", id, rdmem_fab_peer(conn),
			  strerror(-ret));
		rdmem_session_free(s, s->accepted);
		return ret;
	}
	s->started = 1;
	rdmem_service_session_delta(svc, 1);
	rdmem_info("session %u (%s): %u slots x %u B, object pool %llu KiB", id,
		   rdmem_fab_peer(conn), s->slots, s->slot_bytes,
		   (unsigned long long)(s->pool.area_bytes >> 10));
	*out = s;
	return 0;
}

int rdmem_session_finished(struct rdmem_session *s)
{
	/* Pairs with the worker's release store as it ends. */
	return atomic_load_explicit(&s->finished, memory_order_acquire);
}

void rdmem_session_close(struct rdmem_session *s)
{
	uint64_t one = 1;

	if (s->started) {
		if (write(s->stop_efd, &one, sizeof(one)) < 0)
			rdmem_warn("session %u: stop signal: %s", s->id, strerror(errno));
		pthread_join(s->thread, NULL);
		rdmem_service_session_delta(s->svc, -1);
	}
	rdmem_session_free(s, 1);
}
