/* session_open.c - a session's setup and teardown: the agent's hello
 * checked (and its proof, with --secret-file), a lease of the message pool
 * taken and registered with the least access each area needs, the welcome
 * sent; at the end everything given back, the lease last. The data path a
 * worker drives is in session.c.
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
#include "server/session_impl.h"

static int rdmem_session_check_proof(const struct rdmem_xchg_hello *h, struct rdmem_auth *auth)
{
	struct rdmem_xchg_hello wire = *h;

	if (!auth)
		return RDMEM_S_OK;
	/* The proof covers the bytes the agent sent: its hello re-encoded. */
	rdmem_hello_le(&wire);
	if (rdmem_auth_verify(auth, "agent", &wire, offsetof(struct rdmem_xchg_hello, proof), NULL,
			      0, h->proof, sizeof(h->proof)) < 0 ||
	    rdmem_auth_fresh(auth, h->nonce) < 0)
		return RDMEM_S_DENIED;
	return RDMEM_S_OK;
}

int rdmem_session_check_hello(const struct rdmem_xchg_hello *h, size_t len, struct rdmem_auth *auth,
			      char *why, size_t why_len)
{
	uint64_t need;

	snprintf(why, why_len, "bad session parameters");
	if (len < sizeof(*h) || h->magic != RDMEM_XCHG_MAGIC)
		return RDMEM_S_BAD_REQUEST;
	/* The one line an agent of another release shows its operator. */
	if (h->version != RDMEM_LAYOUT_VERSION) {
		snprintf(why, why_len, "layout v%u, server speaks v%u", (unsigned)h->version,
			 (unsigned)RDMEM_LAYOUT_VERSION);
		return RDMEM_S_BAD_REQUEST;
	}
	if (h->ring_slots == 0 || h->ring_slots > RDMEM_MAX_RING_SLOTS)
		return RDMEM_S_BAD_REQUEST;
	if (h->resp_bytes < RDMEM_DESC_SIZE || h->resp_bytes > RDMEM_MAX_RESP_BYTES)
		return RDMEM_S_BAD_REQUEST;
	need = rdmem_turn_off(h->ring_slots, h->resp_bytes) + RDMEM_TURN_BYTES;
	if (h->resp.len < RDMEM_MIN(need, RDMEM_REMOTE_LEN_MAX))
		return RDMEM_S_BAD_REQUEST;
	snprintf(why, why_len, "authentication failed");
	return rdmem_session_check_proof(h, auth);
}

/* ---- the lease and its registrations --------------------------------------- */

struct rdmem_pool_config rdmem_session_pool_config(const struct rdmem_rdma_config *c,
						   uint32_t leases)
{
	return (struct rdmem_pool_config){
		.fabric = c->fabric,
		.leases = leases,
		.lease_slots = c->ring_slots,
		.slot_bytes = c->slot_bytes,
		.stage_bytes = c->stage_bytes,
		.obj = { c->objpool_slabs, c->max_value, c->object_ttl_ms },
	};
}

/* A pool of its own for this session: the classic per-session design. */
static int rdmem_session_own_pool(struct rdmem_session *s)
{
	struct rdmem_pool_config pc = rdmem_session_pool_config(s->cfg, 1);
	int ret = rdmem_pool_create(&pc, &s->owned);

	s->pool = s->owned;
	return ret;
}

static int rdmem_session_reg(struct rdmem_session *s, struct rdmem_mr *mr, void *addr, uint64_t len,
			     unsigned access)
{
	return rdmem_fab_reg(s->conn, addr, len, access, mr);
}

static int rdmem_session_take_lease(struct rdmem_session *s)
{
	const struct rdmem_pool_config *pc;
	struct rdmem_lease *l = &s->lease;
	int ret;

	if (!s->pool && (ret = rdmem_session_own_pool(s)) < 0)
		return ret;
	if ((ret = rdmem_pool_take(s->pool, l)) < 0)
		return ret;
	pc = &s->pool->cfg;
	s->slots = RDMEM_MIN(s->slots, pc->lease_slots);
	/* Our staging holds stage_bytes a slot; the agent's slot resp_bytes. */
	s->eager_bytes = RDMEM_MIN(s->resp_bytes, pc->stage_bytes);
	s->req = l->req;
	s->req_stride = rdmem_slot_stride(pc->slot_bytes);
	s->ctrl = (struct rdmem_ctrl *)l->ctrl;
	s->staging = l->staging;
	if ((ret = rdmem_objpool_init(&s->objects, &pc->obj, l->objects)) < 0)
		return ret;
	/* Least access per area, and only this lease: the agent writes requests,
	 * reads objects and the control page, and never touches the staging. */
	if ((ret =
		 rdmem_session_reg(s, &s->mr_req, l->req, l->req_len, RDMEM_ACCESS_REMOTE_WRITE)) ||
	    (ret = rdmem_session_reg(s, &s->mr_objects, l->objects, l->objects_len,
				     RDMEM_ACCESS_REMOTE_READ)) ||
	    (ret = rdmem_session_reg(s, &s->mr_ctrl, l->ctrl, RDMEM_CTRL_BYTES,
				     RDMEM_ACCESS_REMOTE_READ)) ||
	    (ret = rdmem_session_reg(s, &s->mr_staging, l->staging, l->staging_len,
				     RDMEM_ACCESS_LOCAL)))
		return ret;
	s->slot_bytes = pc->slot_bytes;
	return 0;
}

static struct rdmem_remote rdmem_session_remote(const struct rdmem_mr *mr)
{
	/* len saturates: the object pool's full length travels as objpool_bytes. */
	struct rdmem_remote r = { (uint64_t)(uintptr_t)mr->addr, mr->rkey,
				  (uint32_t)RDMEM_MIN(mr->len, RDMEM_REMOTE_LEN_MAX) };

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
	w.resp_stride = s->resp_stride;
	w.eager_bytes = s->eager_bytes;
	w.objpool_bytes = s->objects.area_bytes;
	w.obj_max = rdmem_objpool_max_object(&s->objects);
	w.obj_count = s->objects.nobjs;
	w.srv_ring_slots = s->cfg->ring_slots;
	w.srv_stage_bytes = s->cfg->stage_bytes;
	w.object_ttl_ms = s->cfg->object_ttl_ms;
	w.req = rdmem_session_remote(&s->mr_req);
	w.objpool = rdmem_session_remote(&s->mr_objects);
	w.ctrl = rdmem_session_remote(&s->mr_ctrl);
	rdmem_welcome_le(&w);
	/* Mutual: the agent learns we hold the secret too, for its nonce. The
	 * proof covers wire bytes, the nonce's as the agent sent it. */
	if (s->cfg->auth) {
		uint64_t nonce = rdmem_le64(hello->nonce);

		rdmem_auth_mac(s->cfg->auth, "server", &nonce, sizeof(nonce), &w,
			       offsetof(struct rdmem_xchg_welcome, proof), w.proof,
			       sizeof(w.proof));
	}
	return rdmem_fab_accept(s->conn, &w, sizeof(w));
}

/* One QP and one CQ per connection (fabric/verbs_cm.c, the emulator alike),
 * the lease's registrations (four), and the receives rdmem_session_setup()
 * keeps posted. */
static void rdmem_session_count_usage(struct rdmem_session *s)
{
	s->usage = (struct rdmem_rdma_usage){
		.qps = 1,
		.cqs = 1,
		.mrs = (s->mr_req.len != 0) + (s->mr_objects.len != 0) + (s->mr_ctrl.len != 0) +
		       (s->mr_staging.len != 0),
		.registered_bytes = (int64_t)rdmem_session_registered_bytes(s),
		.recv_wqes = s->slots + RDMEM_SESSION_RECV_BATCH,
	};
}

/* ---- open / close ------------------------------------------------------- */

void rdmem_session_reject(struct rdmem_conn *c, struct rdmem_xchg_reject *r)
{
	rdmem_reject_le(r); /* reject private data is on the wire */
	rdmem_fab_reject(c, r, sizeof(*r));
}

/* Frees the session; a connection never accepted is rejected instead. */
static void rdmem_session_free(struct rdmem_session *s)
{
	struct rdmem_mr *mrs[] = { &s->mr_req, &s->mr_objects, &s->mr_ctrl, &s->mr_staging };
	struct rdmem_xchg_reject why = { RDMEM_XCHG_MAGIC, RDMEM_S_BUSY, 0,
					 "server full: no lease free" };
	size_t i;

	/* Not every setup failure is a full pool (a review: an address space
	 * filled by a peer was reported as "no lease free"). */
	if (s->setup_err && s->setup_err != -EBUSY)
		snprintf(why.reason, sizeof(why.reason), "setup failed: %s", /* 40 bytes */
			 strerror(-s->setup_err));

	for (i = 0; i < RDMEM_ARRAY_SIZE(mrs); i++)
		rdmem_fab_dereg(s->conn, mrs[i]);
	rdmem_session_tell_pool(s, 0, 0, 0);
	rdmem_objpool_fini(&s->objects);
	if (s->accepted)
		rdmem_fab_close(s->conn);
	else
		rdmem_session_reject(s->conn, &why);
	/* Only now, with no registration and no connection left to reach it. */
	if (s->req)
		rdmem_pool_give(s->pool, &s->lease);
	rdmem_pool_destroy(s->owned);
	if (s->svc)
		rdmem_service_peer_release(s->svc, &s->peer);
	free(s->ready);
	free(s->copy);
	free(s);
}

static int rdmem_session_setup(struct rdmem_session *s, const struct rdmem_xchg_hello *hello)
{
	int ret;

	if ((ret = rdmem_session_take_lease(s)) < 0)
		return ret;
	s->ready = calloc(s->slots, sizeof(*s->ready));
	if (!s->ready)
		return -ENOMEM;
	/* One receive per slot (at most one request per slot is in flight)
	 * plus the batch that may be owed: immediates never find none posted. */
	if ((ret = rdmem_fab_post_recv(s->conn, (int)(s->slots + RDMEM_SESSION_RECV_BATCH))) < 0)
		return ret;
	rdmem_session_publish_ctrl(s, rdmem_now_ns());
	if ((ret = rdmem_session_accept(s, hello)) < 0)
		return ret;
	s->accepted = 1;
	return 0;
}

/* A device may grant smaller queues than the listener asked for: serve fewer
 * slots then, so each slot's reply WRs (payload, descriptor) and its
 * request's receive fit by construction. The welcome tells the agent. */
static uint32_t rdmem_session_fit_slots(struct rdmem_conn *conn, uint32_t slots)
{
	uint32_t max_send, max_recv, fit;

	rdmem_fab_queue_caps(conn, &max_send, &max_recv);
	fit = max_send > RDMEM_SESSION_WR_SPARE
		  ? (max_send - RDMEM_SESSION_WR_SPARE) / RDMEM_SESSION_WRS_PER_SLOT
		  : 0;
	/* ring_slots + RDMEM_SESSION_RECV_BATCH receives stay posted */
	fit = RDMEM_MIN(
	    fit, max_recv > RDMEM_SESSION_RECV_BATCH ? max_recv - RDMEM_SESSION_RECV_BATCH : 0);
	fit = RDMEM_MAX(fit, 1u);
	if (fit >= slots)
		return slots;
	rdmem_warn_limited("session with %s: send queue %u, receive queue %u: %u ring slots "
			   "instead of %u",
			   rdmem_fab_peer(conn), max_send, max_recv, fit, slots);
	return fit;
}

/* Half the send queue at most, so a batch fits once earlier WRs retire. */
static uint32_t rdmem_session_batch_cap(struct rdmem_conn *conn)
{
	uint32_t max_send, max_recv;

	rdmem_fab_queue_caps(conn, &max_send, &max_recv);
	return RDMEM_MAX(RDMEM_MIN(RDMEM_SESSION_BATCH_WRS, max_send / 2), RDMEM_DP_MAX_WRS);
}

int rdmem_session_open(const struct rdmem_rdma_config *cfg, struct rdmem_service *svc,
		       struct rdmem_pool *pool, struct rdmem_conn *conn,
		       const struct rdmem_xchg_hello *hello, uint32_t id,
		       struct rdmem_session **out)
{
	struct rdmem_session *s = calloc(1, sizeof(*s));
	int ret;

	if (!s) {
		struct rdmem_xchg_reject why = { RDMEM_XCHG_MAGIC, RDMEM_S_BUSY, 0,
						 "out of memory" };

		rdmem_session_reject(conn, &why);
		return -ENOMEM;
	}
	s->cfg = cfg;
	s->svc = svc;
	s->conn = conn;
	s->pool = pool;
	s->id = id;
	s->slots = rdmem_session_fit_slots(conn, hello->ring_slots);
	s->batch_cap = rdmem_session_batch_cap(conn);
	s->resp_bytes = hello->resp_bytes;
	s->resp_stride = (uint32_t)rdmem_slot_stride(hello->resp_bytes);
	s->resp = hello->resp;
	s->turn_addr = hello->resp.addr + rdmem_turn_off(hello->ring_slots, hello->resp_bytes);
	ret = rdmem_session_setup(s, hello);
	if (ret < 0) {
		rdmem_err_limited("session %u (%s): setup failed: %s", id, rdmem_fab_peer(conn),
				  strerror(-ret));
		s->setup_err = ret;
		rdmem_session_free(s);
		return ret;
	}
	rdmem_session_count_usage(s);
	rdmem_service_session_delta(svc, 1, &s->usage);
	s->opened_ns = rdmem_now_ns();
	rdmem_log_limited(RDMEM_LOG_INFO,
			  "session %u (%s): lease %u, %u slots x %u B, object pool %llu KiB", id,
			  rdmem_fab_peer(conn), s->lease.index, s->slots, s->slot_bytes,
			  (unsigned long long)(s->objects.area_bytes >> 10));
	*out = s;
	return 0;
}

void rdmem_session_set_guard(struct rdmem_session *s, struct rdmem_session_guard *g,
			     const char *addr)
{
	s->guard = g;
	snprintf(s->peer.addr, sizeof(s->peer.addr), "%s", addr);
}

void rdmem_session_close(struct rdmem_session *s)
{
	if (!s)
		return;
	rdmem_log_limited(RDMEM_LOG_INFO, "session %u (%s): closed", s->id,
			  rdmem_fab_peer(s->conn));
	rdmem_service_session_delta(s->svc, -1, &s->usage);
	/* release: pairs with the listener's acquire loads that reuse the
	 * entries; the guard first, so a guard in use never names an address
	 * entry already handed to another address. The count's pointer is read
	 * before: once used is 0 the listener may give the guard to a new
	 * session and rewrite it. */
	if (s->guard) {
		atomic_uint *addr_n = s->guard->addr_n;

		atomic_store_explicit(&s->guard->used, 0, memory_order_release);
		atomic_fetch_sub_explicit(addr_n, 1, memory_order_release);
	}
	rdmem_session_free(s);
}
