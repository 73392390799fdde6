/* verbs_dp.c - the verbs fabric backend's memory and data path: page-aligned
 * buffers, memory registration, posting WRs, polling and retiring
 * completions, and the backend's ops table. Connection management is in
 * verbs_cm.c; the shared types and the send queue accounting are described in
 * verbs.h and verbs_cm.c.
 */
#include "fabric/verbs.h"
#include "rdmem/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* ---- memory ------------------------------------------------------------- */

static size_t rdmem_verbs_pages(size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (len + page - 1) / page * page;
}

static void *rdmem_verbs_alloc(struct rdmem_conn *conn, size_t len)
{
	void *p;

	if (len == 0)
		return NULL;
	p = mmap(NULL, rdmem_verbs_pages(len), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED) {
		rdmem_err("verbs: allocating %zu bytes for %s: %s", len,
			  rdmem_verbs_conn_of(conn)->peer, strerror(errno));
		return NULL;
	}
	return p;
}

static void rdmem_verbs_free(struct rdmem_conn *conn, void *p, size_t len)
{
	if (munmap(p, rdmem_verbs_pages(len)))
		rdmem_err("verbs: freeing %zu bytes of %s: %s", len,
			  rdmem_verbs_conn_of(conn)->peer, strerror(errno));
}

/*
 * Any connection registers it in its own PD: plain page-aligned memory.
 * MAP_NORESERVE: a pool sized for every lease is mostly address space until
 * sessions take leases (and registration pins what they use); without it the
 * kernel's overcommit heuristic refuses a pool larger than RAM outright.
 */
static void *rdmem_verbs_alloc_shared(size_t len)
{
	void *p;

	if (len == 0)
		return NULL;
	p = mmap(NULL, rdmem_verbs_pages(len), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		rdmem_err("verbs: allocating a shared pool of %zu bytes: %s", len, strerror(errno));
		return NULL;
	}
	return p;
}

static void rdmem_verbs_free_shared(void *p, size_t len)
{
	if (munmap(p, rdmem_verbs_pages(len)))
		rdmem_err("verbs: freeing a shared pool of %zu bytes: %s", len, strerror(errno));
}

static void rdmem_verbs_reg_failed(struct rdmem_verbs_conn *c, uint64_t len, int e)
{
	struct rlimit rl;

	if ((e == ENOMEM || e == EPERM) && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY) {
		rdmem_err("verbs: registering %llu bytes for %s: %s: the locked-memory limit is "
			  "%llu KiB; raise it (ulimit -l unlimited, or LimitMEMLOCK=infinity "
			  "for a systemd service)",
			  (unsigned long long)len, c->peer, strerror(e),
			  (unsigned long long)rl.rlim_cur / 1024);
		return;
	}
	rdmem_err("verbs: ibv_reg_mr of %llu bytes for %s: %s", (unsigned long long)len, c->peer,
		  strerror(e));
}

static int rdmem_verbs_reg(struct rdmem_conn *conn, void *addr, uint64_t len, unsigned access,
			   struct rdmem_mr *out)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_of(conn);
	int flags = IBV_ACCESS_LOCAL_WRITE;
	struct rdmem_verbs_mr *r;

	if (!addr || !len || (access & ~(RDMEM_ACCESS_REMOTE_WRITE | RDMEM_ACCESS_REMOTE_READ)))
		return -EINVAL;
	if (access & RDMEM_ACCESS_REMOTE_WRITE)
		flags |= IBV_ACCESS_REMOTE_WRITE;
	if (access & RDMEM_ACCESS_REMOTE_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->mr = ibv_reg_mr(c->pd, addr, len, flags);
	if (!r->mr) {
		int e = errno;

		rdmem_verbs_reg_failed(c, len, e);
		free(r);
		return -e;
	}
	r->next = c->mrs.next;
	r->prev = &c->mrs;
	c->mrs.next->prev = r;
	c->mrs.next = r;
	*out = (struct rdmem_mr){ .addr = addr,
				  .len = len,
				  .lkey = r->mr->lkey,
				  .rkey = r->mr->rkey,
				  .access = access,
				  .impl = r };
	return 0;
}

void rdmem_verbs_dereg_one(struct rdmem_verbs_conn *c, struct rdmem_verbs_mr *r)
{
	int rc = ibv_dereg_mr(r->mr);

	if (rc)
		rdmem_err("verbs: ibv_dereg_mr for %s: %s", c->peer, strerror(rc));
	r->prev->next = r->next;
	r->next->prev = r->prev;
	free(r);
}

static void rdmem_verbs_dereg(struct rdmem_conn *conn, struct rdmem_mr *mr)
{
	rdmem_verbs_dereg_one(rdmem_verbs_conn_of(conn), mr->impl);
	mr->impl = NULL;
}

/* ---- data path ---------------------------------------------------------- */

static const char *rdmem_verbs_op_name(unsigned op)
{
	switch (op) {
	case RDMEM_WR_WRITE:
		return "RDMA WRITE";
	case RDMEM_WR_WRITE_IMM:
		return "RDMA WRITE WITH IMM";
	case RDMEM_WR_READ:
		return "RDMA READ";
	}
	return "receive";
}

/* Translates one WR; seq becomes its wr_id. */
static int rdmem_verbs_build(struct rdmem_verbs_conn *c, const struct rdmem_wr *w,
			     struct ibv_send_wr *s, struct ibv_sge *sge)
{
	uint64_t total = 0;

	if (w->op < RDMEM_WR_WRITE || w->op > RDMEM_WR_READ ||
	    (w->flags & ~(RDMEM_WR_SIGNALED | RDMEM_WR_INLINE)) ||
	    w->nsge > (w->op == RDMEM_WR_READ ? c->max_sge_rd : c->max_sge)) {
		rdmem_err("verbs: post to %s: invalid WR (op %u, flags 0x%x, %u SGEs; at most "
			  "%u, %u for READ)",
			  c->peer, w->op, w->flags, w->nsge, c->max_sge, c->max_sge_rd);
		return -EINVAL;
	}
	for (unsigned i = 0; i < w->nsge; i++) {
		sge[i] = (struct ibv_sge){ .addr = w->sge[i].addr,
					   .length = w->sge[i].len,
					   .lkey = w->sge[i].lkey };
		total += w->sge[i].len;
	}
	if (total > c->max_msg) {
		rdmem_err("verbs: post to %s: %llu bytes in one WR; %s allows %u", c->peer,
			  (unsigned long long)total, rdmem_verbs_dev(c), c->max_msg);
		return -EMSGSIZE;
	}
	memset(s, 0, sizeof(*s));
	s->sg_list = w->nsge ? sge : NULL;
	s->num_sge = w->nsge;
	s->wr.rdma.remote_addr = w->remote_addr;
	s->wr.rdma.rkey = w->rkey;
	s->opcode = w->op == RDMEM_WR_READ	  ? IBV_WR_RDMA_READ
		    : w->op == RDMEM_WR_WRITE_IMM ? IBV_WR_RDMA_WRITE_WITH_IMM
						  : IBV_WR_RDMA_WRITE;
	if (w->op == RDMEM_WR_WRITE_IMM)
		s->imm_data = htonl(w->imm);
	if ((w->flags & RDMEM_WR_INLINE) && w->op != RDMEM_WR_READ && total <= c->max_inline)
		s->send_flags |= IBV_SEND_INLINE;
	return 0;
}

/* Decides signalling for the WR at seq and records it in the shadow ring. */
static void rdmem_verbs_track(struct rdmem_verbs_conn *c, const struct rdmem_wr *w,
			      struct ibv_send_wr *s, uint64_t seq, uint32_t *run)
{
	struct rdmem_verbs_sq_ent *e = &c->sq[seq % c->sq_depth];

	e->wr_id = w->wr_id;
	e->op = w->op;
	e->hidden = 0;
	s->wr_id = seq;
	if (w->flags & RDMEM_WR_SIGNALED) {
		*run = 0;
	} else if (++*run >= c->signal_every) {
		e->hidden = 1;
		*run = 0;
	}
	if (!*run)
		s->send_flags |= IBV_SEND_SIGNALED;
}

static int rdmem_verbs_post(struct rdmem_conn *conn, const struct rdmem_wr *wrs, int n)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_of(conn);
	uint32_t run = c->unsignaled;
	struct ibv_send_wr *bad = NULL;
	int rc;

	if (n <= 0 || (uint32_t)n > c->max_send)
		return n == 0 ? 0 : -EINVAL;
	if (c->broken)
		return -ECONNRESET;
	if (!c->connected) {
		rdmem_err("verbs: post to %s before the connection is up", c->peer);
		return -ENOTCONN;
	}
	/* sq_depth - 1: the last slot is the drain marker's. */
	if (c->sq_tail - c->sq_head + (uint64_t)n > c->sq_depth - 1)
		return -EAGAIN;
	for (int i = 0; i < n; i++) {
		rc = rdmem_verbs_build(c, &wrs[i], &c->swr[i], &c->sge[i * RDMEM_FAB_MAX_SGE]);
		if (rc)
			return rc;
		rdmem_verbs_track(c, &wrs[i], &c->swr[i], c->sq_tail + (uint64_t)i, &run);
		c->swr[i].next = i + 1 < n ? &c->swr[i + 1] : NULL;
	}
	rc = ibv_post_send(c->id->qp, c->swr, &bad);
	if (rc) {
		/* Our own checks passed, so the QP itself is unusable: WRs before
		 * bad were posted and will complete (flushed); call it broken. */
		c->sq_tail += bad ? (uint64_t)(bad - c->swr) : 0;
		rdmem_err("verbs: ibv_post_send to %s (WR %ld of %d): %s", c->peer,
			  bad ? (long)(bad - c->swr) : -1L, n, strerror(rc));
		rdmem_verbs_break(c);
		return -rc;
	}
	c->sq_tail += (uint64_t)n;
	c->unsignaled = run;
	return 0;
}

static int rdmem_verbs_post_recv(struct rdmem_conn *conn, int n)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_of(conn);
	struct ibv_recv_wr *bad = NULL;
	int rc;

	if (n <= 0)
		return n == 0 ? 0 : -EINVAL;
	if (c->broken)
		return -ECONNRESET;
	if (c->rq_posted + (uint32_t)n > c->max_recv)
		return -EAGAIN;
	for (int i = 0; i < n; i++)
		c->rwr[i] = (struct ibv_recv_wr){ .wr_id = RDMEM_VERBS_WRID_RECV,
						  .next = i + 1 < n ? &c->rwr[i + 1] : NULL };
	rc = ibv_post_recv(c->id->qp, c->rwr, &bad);
	if (rc) {
		c->rq_posted += bad ? (uint32_t)(bad - c->rwr) : 0;
		rdmem_err("verbs: ibv_post_recv for %s (%d receives): %s", c->peer, n,
			  strerror(rc));
		return -rc;
	}
	c->rq_posted += (uint32_t)n;
	return 0;
}

static uint8_t rdmem_verbs_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS:
		return RDMEM_WC_SUCCESS;
	case IBV_WC_REM_ACCESS_ERR:
		return RDMEM_WC_REM_ACCESS_ERR;
	case IBV_WC_LOC_PROT_ERR:
		return RDMEM_WC_LOC_PROT_ERR;
	case IBV_WC_WR_FLUSH_ERR:
		return RDMEM_WC_FLUSH_ERR;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return RDMEM_WC_RNR_ERR;
	default:
		return RDMEM_WC_GENERAL_ERR;
	}
}

/* A failed completion breaks the connection. Flushes are the echo of a break:
 * after a known one (an error, the peer's disconnect, which check() may not
 * have read yet) they are logged at debug level, else the first as a warning. */
static void rdmem_verbs_wc_error(struct rdmem_verbs_conn *c, const struct ibv_wc *w, unsigned op,
				 uint64_t wr_id)
{
	if (w->status != IBV_WC_WR_FLUSH_ERR)
		rdmem_err_limited(
		    "verbs: %s (wr_id %llu) on %s failed: %s (status %d, vendor_err 0x%x)",
		    rdmem_verbs_op_name(op), (unsigned long long)wr_id, c->peer,
		    ibv_wc_status_str(w->status), w->status, w->vendor_err);
	else if (c->flushed++ == 0 && rdmem_verbs_check(&c->base) == 0)
		rdmem_warn("verbs: %s (wr_id %llu) on %s: %s (vendor_err 0x%x) with no error "
			   "or disconnect seen first (did the peer violate our access rights?)",
			   rdmem_verbs_op_name(op), (unsigned long long)wr_id, c->peer,
			   ibv_wc_status_str(w->status), w->vendor_err);
	else
		rdmem_debug("verbs: %s (wr_id %llu) on %s: %s", rdmem_verbs_op_name(op),
			    (unsigned long long)wr_id, c->peer, ibv_wc_status_str(w->status));
	rdmem_verbs_break(c);
}

static int rdmem_verbs_recv_done(struct rdmem_verbs_conn *c, const struct ibv_wc *w,
				 struct rdmem_wc *out)
{
	if (c->rq_posted)
		c->rq_posted--;
	*out =
	    (struct rdmem_wc){ .op = RDMEM_WC_RECV_IMM, .status = rdmem_verbs_status(w->status) };
	if (w->status != IBV_WC_SUCCESS) {
		rdmem_verbs_wc_error(c, w, 0, 0);
	} else if (w->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(w->wc_flags & IBV_WC_WITH_IMM)) {
		rdmem_err_limited(
		    "verbs: %s sent a message that is not an RDMA WRITE WITH IMM (opcode %d)",
		    c->peer, w->opcode);
		out->status = RDMEM_WC_GENERAL_ERR;
	} else {
		out->imm = ntohl(w->imm_data);
	}
	return 1;
}

/* Maps one raw completion; returns 1 when the caller sees it, 0 when hidden. */
static int rdmem_verbs_complete(struct rdmem_verbs_conn *c, const struct ibv_wc *w,
				struct rdmem_wc *out)
{
	const struct rdmem_verbs_sq_ent *e;
	uint64_t seq = w->wr_id;

	if (seq == RDMEM_VERBS_WRID_RECV)
		return rdmem_verbs_recv_done(c, w, out);
	if (seq < c->sq_head || seq >= c->sq_tail) {
		rdmem_err_limited("verbs: completion for unknown wr %llu on %s (%s)",
				  (unsigned long long)seq, c->peer, ibv_wc_status_str(w->status));
		return 0;
	}
	e = &c->sq[seq % c->sq_depth];
	c->sq_head = seq + 1; /* RC completes the send queue in order */
	if (w->status == IBV_WC_SUCCESS && e->hidden)
		return 0;
	*out = (struct rdmem_wc){ .wr_id = e->wr_id,
				  .status = rdmem_verbs_status(w->status),
				  .op = e->op == RDMEM_WR_READ ? RDMEM_WC_READ : RDMEM_WC_WRITE };
	if (w->status != IBV_WC_SUCCESS)
		rdmem_verbs_wc_error(c, w, e->op, e->wr_id);
	return 1;
}

static int rdmem_verbs_poll(struct rdmem_conn *conn, struct rdmem_wc *wc, int max)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_of(conn);
	struct ibv_wc raw[RDMEM_VERBS_POLL_BATCH];
	int got = 0;

	while (got < max) {
		int want = RDMEM_MIN(max - got, RDMEM_VERBS_POLL_BATCH);
		int n = ibv_poll_cq(c->cq, want, raw);

		if (n < 0) {
			rdmem_err("verbs: ibv_poll_cq for %s failed (%d)", c->peer, n);
			rdmem_verbs_break(c);
			return got ? got : -EIO;
		}
		for (int i = 0; i < n; i++)
			got += rdmem_verbs_complete(c, &raw[i], &wc[got]);
		if (n < want)
			break;
	}
	return got;
}

static int rdmem_verbs_arm(struct rdmem_conn *conn)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_of(conn);
	int rc = ibv_req_notify_cq(c->cq, 0);

	if (rc) {
		rdmem_err("verbs: ibv_req_notify_cq for %s: %s", c->peer, strerror(rc));
		return -rc;
	}
	return 0;
}

static int rdmem_verbs_comp_fd(struct rdmem_conn *conn)
{
	return rdmem_verbs_conn_of(conn)->cc->fd;
}

/* Consumes every pending CQ event; acks are batched (ibv_ack_cq_events takes
 * a mutex), the remainder is acked before the CQ is destroyed. */
static void rdmem_verbs_ack(struct rdmem_conn *conn)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_of(conn);
	struct ibv_cq *cq;
	void *ctx;

	while (ibv_get_cq_event(c->cc, &cq, &ctx) == 0) {
		if (++c->cq_unacked >= RDMEM_VERBS_ACK_BATCH) {
			ibv_ack_cq_events(c->cq, c->cq_unacked);
			c->cq_unacked = 0;
		}
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		rdmem_err("verbs: ibv_get_cq_event for %s: %s", c->peer, strerror(errno));
}

static uint32_t rdmem_verbs_max_reads(struct rdmem_conn *conn)
{
	return rdmem_verbs_conn_of(conn)->max_reads;
}

static void rdmem_verbs_queue_caps(struct rdmem_conn *conn, uint32_t *max_send, uint32_t *max_recv)
{
	*max_send = rdmem_verbs_conn_of(conn)->max_send;
	*max_recv = rdmem_verbs_conn_of(conn)->max_recv;
}

static uint32_t rdmem_verbs_max_send_sge(struct rdmem_conn *conn)
{
	return rdmem_verbs_conn_of(conn)->max_sge;
}

static uint32_t rdmem_verbs_max_inline(struct rdmem_conn *conn)
{
	return rdmem_verbs_conn_of(conn)->max_inline;
}

static const char *rdmem_verbs_peer(struct rdmem_conn *conn)
{
	return rdmem_verbs_conn_of(conn)->peer;
}

const struct rdmem_fab_ops rdmem_fab_verbs_ops = {
	.name = "verbs",
	.listen = rdmem_verbs_listen,
	.listener_fd = rdmem_verbs_listener_fd,
	.get_request = rdmem_verbs_get_request,
	.accept = rdmem_verbs_accept,
	.reject = rdmem_verbs_reject,
	.listener_close = rdmem_verbs_listener_close,
	.resolve = rdmem_verbs_resolve,
	.connect = rdmem_verbs_connect,
	.alloc = rdmem_verbs_alloc,
	.free = rdmem_verbs_free,
	.alloc_shared = rdmem_verbs_alloc_shared,
	.free_shared = rdmem_verbs_free_shared,
	.reg = rdmem_verbs_reg,
	.dereg = rdmem_verbs_dereg,
	.post = rdmem_verbs_post,
	.post_recv = rdmem_verbs_post_recv,
	.poll = rdmem_verbs_poll,
	.arm = rdmem_verbs_arm,
	.comp_fd = rdmem_verbs_comp_fd,
	.ack = rdmem_verbs_ack,
	.event_fd = rdmem_verbs_event_fd,
	.check = rdmem_verbs_check,
	.max_inline = rdmem_verbs_max_inline,
	.max_send_sge = rdmem_verbs_max_send_sge,
	.max_reads = rdmem_verbs_max_reads,
	.queue_caps = rdmem_verbs_queue_caps,
	.peer = rdmem_verbs_peer,
	.shutdown = rdmem_verbs_shutdown,
	.close = rdmem_verbs_close,
};
