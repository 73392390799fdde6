/* mw_probe.c - does this verbs device give us type-2 memory windows, and do
 * they fence what ScaleRPC's virtualized mapping needs fenced?
 *
 *   mw_probe [--dev NAME] [--gid-index N] [--iters N] [--timeout S]
 *
 * Groundwork for issue 14: a server that maps each session onto a block of a
 * shared pool only for its slice needs a per-session remote key it can grant
 * and revoke cheaply. A type-2 memory window bound on the session's own QP is
 * that key. On one device (default: the first; in the rxe VM, rxe0) the probe
 *   - reports max_mw and the MEM_WINDOW / TYPE_2A / TYPE_2B capability bits;
 *   - allocates a type-2 MW, binds it (IBV_WR_BIND_MW on an RC QP) to a 4 KiB
 *     block of an MR registered with IBV_ACCESS_MW_BIND, and has the peer QP
 *     RDMA-READ the block through the window's rkey, byte-checked;
 *   - revokes the window with IBV_WR_LOCAL_INV, and (second pair) with the
 *     peer's SEND_WITH_INV, and shows that a READ with the old rkey then fails;
 *   - shows a READ through the window past its block fails (the window, not
 *     the MR, bounds the access) and that another QP of the same PD cannot use
 *     a window bound to the first one (type 2: the window belongs to a QP);
 *   - times bind + invalidate round trips against ibv_reg_mr + ibv_dereg_mr of
 *     the same block (the alternative: per-session registrations).
 * Output: "ok - ..." / "not ok - ..." lines, '#' comments with the
 * capability bits and the timings. A device without type-2 windows prints
 * one "ok - ... # SKIP reason" line and exits 0. Figures from Soft-RoCE in
 * a TCG VM are functional, not performance figures. Exit 1 on any failure.
 */
#include "rdmem/util.h"

#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MWP_REGION (64u * 1024) /* the MR: a stand-in for the shared pool */
#define MWP_BLOCK  4096u	/* the window: one session's pool block */
#define MWP_OFF	   (2 * MWP_BLOCK)
#define MWP_DEPTH  16

struct mwp {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	union ibv_gid gid;
	uint8_t port;
	int gid_index;
	unsigned timeout_s;
	unsigned char *region; /* the "pool": MR with MW_BIND */
	struct ibv_mr *mr;
	unsigned char *local; /* the reader's landing buffer */
	struct ibv_mr *local_mr;
	int failed;
};

/* One RC QP with its own CQ, so a wait reads only its completions. */
struct mwp_qp {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
};

static void mwp_case(struct mwp *p, int ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void mwp_case(struct mwp *p, int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", ok ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!ok)
		p->failed = 1;
}

static struct ibv_context *mwp_open(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!list) {
		fprintf(stderr, "mw_probe: ibv_get_device_list: %s\n", strerror(errno));
		return NULL;
	}
	for (int i = 0; i < n && !ctx; i++)
		if (!name || strcmp(ibv_get_device_name(list[i]), name) == 0) {
			ctx = ibv_open_device(list[i]);
			if (!ctx)
				fprintf(stderr, "mw_probe: ibv_open_device %s: %s\n",
					ibv_get_device_name(list[i]), strerror(errno));
		}
	if (!ctx && n > 0 && name)
		fprintf(stderr, "mw_probe: no verbs device named %s (%d found)\n", name, n);
	if (n == 0)
		fprintf(stderr, "mw_probe: no verbs device\n");
	ibv_free_device_list(list);
	return ctx;
}

/* Prints what the device claims; returns 0 when type-2 windows may exist. */
static int mwp_caps(struct mwp *p, const char **why)
{
	struct ibv_device_attr a;
	int rc = ibv_query_device(p->ctx, &a);

	if (rc) {
		fprintf(stderr, "mw_probe: ibv_query_device: %s\n", strerror(rc));
		*why = "ibv_query_device failed";
		return -1;
	}
	int mw = !!(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	int t2a = !!(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A);
	int t2b = !!(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);

	printf("# mw: device %s fw %s: max_mw %d, max_mr %d, max_qp %d, "
	       "MEM_WINDOW %d, MEM_WINDOW_TYPE_2A %d, MEM_WINDOW_TYPE_2B %d\n",
	       ibv_get_device_name(p->ctx->device), a.fw_ver, a.max_mw, a.max_mr, a.max_qp, mw, t2a,
	       t2b);
	if (a.max_mw <= 0) {
		*why = "device reports max_mw 0";
		return -1;
	}
	if (!t2a && !t2b) {
		*why = "device reports neither MEM_WINDOW_TYPE_2A nor _2B";
		return -1;
	}
	return 0;
}

static int mwp_wait(struct mwp *p, struct ibv_cq *cq, struct ibv_wc *wc, const char *what)
{
	uint64_t end = rdmem_now_ns() + (uint64_t)p->timeout_s * 1000000000ull;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0) {
			fprintf(stderr, "mw_probe: ibv_poll_cq (%s): %d\n", what, n);
			return -1;
		}
		if (n == 1)
			return 0;
		if (rdmem_now_ns() > end) {
			fprintf(stderr, "mw_probe: no completion for %s within %u s\n", what,
				p->timeout_s);
			return -1;
		}
	}
}

static int mwp_qp_create(struct mwp *p, struct mwp_qp *q)
{
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = MWP_DEPTH,
						.max_recv_wr = MWP_DEPTH,
						.max_send_sge = 1,
						.max_recv_sge = 1 } };

	q->cq = ibv_create_cq(p->ctx, 2 * MWP_DEPTH, NULL, NULL, 0);
	if (!q->cq) {
		fprintf(stderr, "mw_probe: ibv_create_cq: %s\n", strerror(errno));
		return -1;
	}
	ia.send_cq = ia.recv_cq = q->cq;
	q->qp = ibv_create_qp(p->pd, &ia);
	if (!q->qp) {
		fprintf(stderr, "mw_probe: ibv_create_qp: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static void mwp_qp_destroy(struct mwp_qp *q)
{
	if (q->qp && ibv_destroy_qp(q->qp))
		fprintf(stderr, "mw_probe: ibv_destroy_qp: %s\n", strerror(errno));
	if (q->cq && ibv_destroy_cq(q->cq))
		fprintf(stderr, "mw_probe: ibv_destroy_cq: %s\n", strerror(errno));
	q->qp = NULL;
	q->cq = NULL;
}

/* INIT -> RTR -> RTS towards `peer` over RoCE (GRH to our own GID: both QPs
 * live on this device; rxe loops the packets). */
static int mwp_qp_connect(struct mwp *p, struct mwp_qp *q, uint32_t peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = p->port,
				 .qp_access_flags =
				     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE };
	int rc = ibv_modify_qp(
	    q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);

	if (!rc) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = peer;
		a.max_dest_rd_atomic = 4;
		a.min_rnr_timer = 12;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = p->gid;
		a.ah_attr.grh.sgid_index = (uint8_t)p->gid_index;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = p->port;
		rc = ibv_modify_qp(q->qp, &a,
				   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER);
	}
	if (!rc) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 4;
		rc = ibv_modify_qp(q->qp, &a,
				   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				       IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	}
	if (rc)
		fprintf(stderr, "mw_probe: ibv_modify_qp (qp %u -> %u): %s\n", q->qp->qp_num, peer,
			strerror(rc));
	return rc ? -1 : 0;
}

/* Owner a (the "server" side, where the window lives) and reader b. */
static int mwp_pair(struct mwp *p, struct mwp_qp *a, struct mwp_qp *b)
{
	memset(a, 0, sizeof(*a));
	memset(b, 0, sizeof(*b));
	if (mwp_qp_create(p, a) || mwp_qp_create(p, b))
		return -1;
	return mwp_qp_connect(p, a, b->qp->qp_num) || mwp_qp_connect(p, b, a->qp->qp_num) ? -1 : 0;
}

/* Posts one signaled send WR on q and waits for it. Returns the WC status,
 * or -1 when it could not post or no completion came. */
static int mwp_post_wait(struct mwp *p, struct mwp_qp *q, struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc;
	int rc;

	wr->send_flags |= IBV_SEND_SIGNALED;
	rc = ibv_post_send(q->qp, wr, &bad);
	if (rc) {
		fprintf(stderr, "mw_probe: ibv_post_send (%s): %s\n", what, strerror(rc));
		return -1;
	}
	if (mwp_wait(p, q->cq, &wc, what))
		return -1;
	if (wc.status != IBV_WC_SUCCESS)
		printf("# mw: %s completed with %s (vendor_err 0x%x)\n", what,
		       ibv_wc_status_str(wc.status), wc.vendor_err);
	return (int)wc.status;
}

static int mwp_bind(struct mwp *p, struct mwp_qp *a, struct ibv_mw *mw, uint32_t *rkey)
{
	struct ibv_send_wr wr = { .opcode = IBV_WR_BIND_MW };
	int st;

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info.mr = p->mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)p->region + MWP_OFF;
	wr.bind_mw.bind_info.length = MWP_BLOCK;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	st = mwp_post_wait(p, a, &wr, "BIND_MW");
	if (st != IBV_WC_SUCCESS)
		return -1;
	/* The new rkey is ours to pick (its low byte); the MW takes it on bind. */
	mw->rkey = wr.bind_mw.rkey;
	*rkey = wr.bind_mw.rkey;
	return 0;
}

static int mwp_local_inv(struct mwp *p, struct mwp_qp *a, uint32_t rkey)
{
	struct ibv_send_wr wr = { .opcode = IBV_WR_LOCAL_INV, .invalidate_rkey = rkey };

	return mwp_post_wait(p, a, &wr, "LOCAL_INV") == IBV_WC_SUCCESS ? 0 : -1;
}

/* b READs len bytes at off of the region through rkey; returns the status. */
static int mwp_read(struct mwp *p, struct mwp_qp *b, uint32_t rkey, size_t off, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)p->local,
			       .length = len,
			       .lkey = p->local_mr->lkey };
	struct ibv_send_wr wr = { .opcode = IBV_WR_RDMA_READ, .sg_list = &sge, .num_sge = 1 };

	memset(p->local, 0, len);
	wr.wr.rdma.remote_addr = (uintptr_t)p->region + off;
	wr.wr.rdma.rkey = rkey;
	return mwp_post_wait(p, b, &wr, "RDMA_READ");
}

static int mwp_block_ok(const struct mwp *p)
{
	return memcmp(p->local, p->region + MWP_OFF, MWP_BLOCK) == 0;
}

/* A fresh window per case: a case that ends in an access error may leave the
 * owner's QP in error with its window still bound, and a type-2 window binds
 * only from the free state. */
static struct ibv_mw *mwp_alloc(struct mwp *p)
{
	struct ibv_mw *mw = ibv_alloc_mw(p->pd, IBV_MW_TYPE_2);

	if (!mw)
		fprintf(stderr, "mw_probe: ibv_alloc_mw(IBV_MW_TYPE_2): %s\n", strerror(errno));
	return mw;
}

static void mwp_free(struct mwp *p, struct ibv_mw *mw)
{
	if (mw && ibv_dealloc_mw(mw))
		mwp_case(p, 0, "ibv_dealloc_mw: %s", strerror(errno));
}

/* bind, READ through the window (byte-checked), LOCAL_INV, READ again. */
static void mwp_case_local_inv(struct mwp *p)
{
	struct ibv_mw *mw = mwp_alloc(p);
	struct mwp_qp a, b;
	uint32_t rkey = 0;
	int st;

	if (!mw || mwp_pair(p, &a, &b) || mwp_bind(p, &a, mw, &rkey)) {
		mwp_case(p, 0, "bind a type-2 MW on an RC QP to a 4 KiB block of an MW_BIND MR");
		goto out;
	}
	mwp_case(p, 1,
		 "bind a type-2 MW on an RC QP to a 4 KiB block of an MW_BIND MR (rkey 0x%x, "
		 "MR rkey 0x%x)",
		 rkey, p->mr->rkey);
	st = mwp_read(p, &b, rkey, MWP_OFF, MWP_BLOCK);
	mwp_case(p, st == IBV_WC_SUCCESS && mwp_block_ok(p),
		 "peer QP READs the block through the window's rkey, every byte right");
	mwp_case(p, mwp_local_inv(p, &a, rkey) == 0, "LOCAL_INV of the window completes");
	st = mwp_read(p, &b, rkey, MWP_OFF, MWP_BLOCK);
	mwp_case(p, st > 0, "a READ with the invalidated rkey fails (%s)",
		 st > 0 ? ibv_wc_status_str((enum ibv_wc_status)st) : "it did not");
out:
	mwp_qp_destroy(&b);
	mwp_qp_destroy(&a);
	mwp_free(p, mw);
}

/* The peer revokes the window itself with SEND_WITH_INV; the owner's receive
 * completion names the rkey; the old rkey's READ then fails. */
static void mwp_case_send_inv(struct mwp *p)
{
	struct ibv_mw *mw = mwp_alloc(p);
	struct mwp_qp a, b;
	struct ibv_recv_wr rwr = { .wr_id = 1 }, *rbad = NULL;
	struct ibv_wc wc = { 0 };
	uint32_t rkey = 0;
	int st;

	if (!mw || mwp_pair(p, &a, &b) || mwp_bind(p, &a, mw, &rkey) ||
	    ibv_post_recv(a.qp, &rwr, &rbad)) {
		mwp_case(p, 0, "set up a second pair with a bound window and a posted receive");
		goto out;
	}
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND_WITH_INV, .invalidate_rkey = rkey };

	st = mwp_post_wait(p, &b, &wr, "SEND_WITH_INV");
	int got = st == IBV_WC_SUCCESS && mwp_wait(p, a.cq, &wc, "receive of SEND_WITH_INV") == 0;

	if (got)
		printf("# mw: owner's receive of SEND_WITH_INV: %s, opcode %d, wc_flags 0x%x, "
		       "invalidated_rkey 0x%x (window rkey 0x%x); IBV_WC_WITH_INV %s\n",
		       ibv_wc_status_str(wc.status), (int)wc.opcode, wc.wc_flags,
		       wc.invalidated_rkey, rkey,
		       (wc.wc_flags & IBV_WC_WITH_INV) ? "set" : "NOT set (rxe in 6.1 omits it)");
	/* The rkey, not the flag: rxe fills invalidated_rkey without setting
	 * IBV_WC_WITH_INV, so a server must not key on the flag alone. */
	mwp_case(p, got && wc.status == IBV_WC_SUCCESS && wc.invalidated_rkey == rkey,
		 "peer's SEND_WITH_INV arrives at the owner naming the window's rkey");
	st = mwp_read(p, &b, rkey, MWP_OFF, MWP_BLOCK);
	mwp_case(p, st > 0, "a READ with the rkey the peer invalidated fails (%s)",
		 st > 0 ? ibv_wc_status_str((enum ibv_wc_status)st) : "it did not");
out:
	mwp_qp_destroy(&b);
	mwp_qp_destroy(&a);
	mwp_free(p, mw);
}

/* Where the window's bounds come from. Through a window over the whole pool
 * MR, READs past the window's block but inside the MR: a device that checks
 * the window refuses them; one that checks only the MR under it (rxe in
 * Linux 6.1 does) lets them through: then a window fences a session from its
 * neighbours only when the MR under it covers that session's block alone.
 * Reported, not asserted: it is a property of the device to design around. */
static void mwp_case_bounds_pool(struct mwp *p)
{
	struct ibv_mw *mw = mwp_alloc(p);
	struct mwp_qp a, b;
	uint32_t rkey = 0;
	int past, other;

	if (!mw || mwp_pair(p, &a, &b) || mwp_bind(p, &a, mw, &rkey)) {
		mwp_case(p, 0, "set up a pair for the pool-MR bounds case");
		goto out;
	}
	past = mwp_read(p, &b, rkey, MWP_OFF + 1, MWP_BLOCK);
	other = past ? -1 : mwp_read(p, &b, rkey, 0, MWP_BLOCK);
	printf("# mw: window over one pool-wide MR: a READ one byte past the window %s; a READ "
	       "of another block of the MR %s: the device bounds window accesses by %s\n",
	       past ? "fails" : "SUCCEEDS",
	       other < 0 ? "(not tried)"
	       : other	 ? "fails"
			 : "SUCCEEDS",
	       past ? "the window" : "the MR under it, not the window");
out:
	mwp_qp_destroy(&b);
	mwp_qp_destroy(&a);
	mwp_free(p, mw);
}

/* The layout that fences on either kind of device: one MR per pool block,
 * the session's window bound to its block's MR. One byte past is refused. */
static void mwp_case_bounds_block(struct mwp *p)
{
	struct ibv_mw *mw = mwp_alloc(p);
	struct ibv_mr *pool_mr = p->mr;
	struct mwp_qp a, b;
	uint32_t rkey = 0;
	int st;

	p->mr = ibv_reg_mr(p->pd, p->region + MWP_OFF, MWP_BLOCK,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
	if (!p->mr)
		fprintf(stderr, "mw_probe: ibv_reg_mr of one block: %s\n", strerror(errno));
	if (!mw || !p->mr || mwp_pair(p, &a, &b) || mwp_bind(p, &a, mw, &rkey)) {
		mwp_case(p, 0, "set up a window over a one-block MR");
		goto out;
	}
	st = mwp_read(p, &b, rkey, MWP_OFF, MWP_BLOCK);
	mwp_case(p, st == IBV_WC_SUCCESS && mwp_block_ok(p),
		 "a window over a one-block MR READs its block, every byte right");
	st = mwp_read(p, &b, rkey, MWP_OFF + 1, MWP_BLOCK);
	mwp_case(p, st > 0, "a READ one byte past a window over a one-block MR fails (%s)",
		 st > 0 ? ibv_wc_status_str((enum ibv_wc_status)st) : "it did not");
out:
	mwp_qp_destroy(&b);
	mwp_qp_destroy(&a);
	mwp_free(p, mw);
	if (p->mr && ibv_dereg_mr(p->mr))
		fprintf(stderr, "mw_probe: ibv_dereg_mr of one block: %s\n", strerror(errno));
	p->mr = pool_mr;
}

/* Type 2: a window bound on session A's QP is no key for session C's QP,
 * even in the same PD. */
static void mwp_case_other_qp(struct mwp *p)
{
	struct ibv_mw *mw = mwp_alloc(p);
	struct mwp_qp a, b, a2, c;
	uint32_t rkey = 0;
	int st;

	if (!mw || mwp_pair(p, &a, &b) || mwp_pair(p, &a2, &c) || mwp_bind(p, &a, mw, &rkey)) {
		mwp_case(p, 0, "set up two pairs for the other-QP case");
		goto out;
	}
	st = mwp_read(p, &c, rkey, MWP_OFF, MWP_BLOCK);
	mwp_case(p, st > 0,
		 "another QP of the same PD cannot READ through a window bound on the "
		 "first (%s)",
		 st > 0 ? ibv_wc_status_str((enum ibv_wc_status)st) : "it could");
	st = mwp_read(p, &b, rkey, MWP_OFF, MWP_BLOCK);
	mwp_case(p, st == IBV_WC_SUCCESS && mwp_block_ok(p),
		 "while the QP it is bound on still READs through it");
	mwp_local_inv(p, &a, rkey);
out:
	mwp_qp_destroy(&c);
	mwp_qp_destroy(&a2);
	mwp_qp_destroy(&b);
	mwp_qp_destroy(&a);
	mwp_free(p, mw);
}

static int mwp_cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return (a > b) - (a < b);
}

static void mwp_print_times(const char *what, uint64_t *ns, unsigned n)
{
	qsort(ns, n, sizeof(*ns), mwp_cmp_u64);
	printf("# mw: %s over %u: p50 %.1f us, p99 %.1f us, min %.1f us\n", what, n,
	       (double)ns[n / 2] / 1e3, (double)ns[(n * 99) / 100] / 1e3, (double)ns[0] / 1e3);
}

/* The slice switch's cost: bind + invalidate a window (posted and completed
 * on the session's QP), against registering and deregistering the block. */
static void mwp_case_timing(struct mwp *p, unsigned iters)
{
	struct ibv_mw *mw = mwp_alloc(p);
	struct mwp_qp a, b;
	uint64_t *bind = calloc(iters, sizeof(*bind)), *inv = calloc(iters, sizeof(*inv));
	uint64_t *reg = calloc(iters, sizeof(*reg)), *dereg = calloc(iters, sizeof(*dereg));
	unsigned i, done = 0;
	uint32_t rkey;

	if (!mw || !bind || !inv || !reg || !dereg || mwp_pair(p, &a, &b)) {
		mwp_case(p, 0, "set up the timing loop");
		goto out;
	}
	for (i = 0; i < iters; i++, done++) {
		uint64_t t0 = rdmem_now_ns();

		if (mwp_bind(p, &a, mw, &rkey))
			break;
		uint64_t t1 = rdmem_now_ns();

		if (mwp_local_inv(p, &a, rkey))
			break;
		bind[i] = t1 - t0;
		inv[i] = rdmem_now_ns() - t1;
	}
	mwp_case(p, done == iters, "%u bind + LOCAL_INV cycles of one window on one QP", done);
	for (i = 0; i < iters; i++) {
		uint64_t t0 = rdmem_now_ns();
		struct ibv_mr *mr = ibv_reg_mr(p->pd, p->region + MWP_OFF, MWP_BLOCK,
					       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
		uint64_t t1 = rdmem_now_ns();

		if (!mr || ibv_dereg_mr(mr)) {
			fprintf(stderr, "mw_probe: ibv_reg_mr/ibv_dereg_mr of 4 KiB: %s\n",
				strerror(errno));
			break;
		}
		reg[i] = t1 - t0;
		dereg[i] = rdmem_now_ns() - t1;
	}
	if (done == iters && i == iters) {
		mwp_print_times("BIND_MW posted to completion", bind, iters);
		mwp_print_times("LOCAL_INV posted to completion", inv, iters);
		mwp_print_times("ibv_reg_mr of the 4 KiB block", reg, iters);
		mwp_print_times("ibv_dereg_mr of the 4 KiB block", dereg, iters);
	}
out:
	mwp_qp_destroy(&b);
	mwp_qp_destroy(&a);
	mwp_free(p, mw);
	free(bind);
	free(inv);
	free(reg);
	free(dereg);
}

static int mwp_setup(struct mwp *p)
{
	p->pd = ibv_alloc_pd(p->ctx);
	p->region = aligned_alloc(4096, MWP_REGION);
	p->local = aligned_alloc(4096, MWP_REGION);
	if (!p->pd || !p->region || !p->local) {
		fprintf(stderr, "mw_probe: ibv_alloc_pd or buffers: %s\n", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < MWP_REGION; i++)
		p->region[i] = (unsigned char)(i * 131u + 7u);
	p->mr = ibv_reg_mr(p->pd, p->region, MWP_REGION,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
	p->local_mr = ibv_reg_mr(p->pd, p->local, MWP_REGION, IBV_ACCESS_LOCAL_WRITE);
	if (!p->mr || !p->local_mr) {
		fprintf(stderr, "mw_probe: ibv_reg_mr (with IBV_ACCESS_MW_BIND): %s\n",
			strerror(errno));
		return -1;
	}
	if (ibv_query_gid(p->ctx, p->port, p->gid_index, &p->gid)) {
		fprintf(stderr, "mw_probe: ibv_query_gid port %u index %d: %s\n", p->port,
			p->gid_index, strerror(errno));
		return -1;
	}
	return 0;
}

static void mwp_teardown(struct mwp *p)
{
	if (p->local_mr)
		ibv_dereg_mr(p->local_mr);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	if (p->ctx)
		ibv_close_device(p->ctx);
	free(p->region);
	free(p->local);
}

static int mwp_args(int argc, char **argv, const char **dev, struct mwp *p, unsigned *iters)
{
	static const struct option opts[] = { { "dev", required_argument, NULL, 'd' },
					      { "gid-index", required_argument, NULL, 'g' },
					      { "iters", required_argument, NULL, 'i' },
					      { "timeout", required_argument, NULL, 't' },
					      { NULL, 0, NULL, 0 } };
	int c;
	long v;
	char *end;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'd') {
			*dev = optarg;
			continue;
		}
		if (c == '?')
			return -1;
		errno = 0;
		v = strtol(optarg, &end, 10);
		if (errno || *end || v < (c == 'g' ? 0 : 1) || v > (c == 'g' ? 255 : 100000)) {
			fprintf(stderr, "mw_probe: --%s %s: out of range\n",
				c == 'g'   ? "gid-index"
				: c == 'i' ? "iters"
					   : "timeout",
				optarg);
			return -1;
		}
		if (c == 'g')
			p->gid_index = (int)v;
		else if (c == 'i')
			*iters = (unsigned)v;
		else
			p->timeout_s = (unsigned)v;
	}
	return optind == argc ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct mwp p = { .port = 1, .gid_index = 1, .timeout_s = 30 };
	const char *dev = NULL, *why = NULL;
	unsigned iters = 200;
	struct ibv_mw *mw;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (mwp_args(argc, argv, &dev, &p, &iters)) {
		fprintf(stderr, "usage: mw_probe [--dev NAME] [--gid-index N] [--iters N] "
				"[--timeout S]\n");
		return 2;
	}
	p.ctx = mwp_open(dev);
	if (!p.ctx) {
		mwp_case(&p, 0, "open verbs device %s", dev ? dev : "(first)");
		return 1;
	}
	if (mwp_caps(&p, &why)) {
		printf("ok - type-2 memory windows # SKIP %s\n", why);
		mwp_teardown(&p);
		return 0;
	}
	if (mwp_setup(&p)) {
		mwp_case(&p, 0, "set up PD, MR with IBV_ACCESS_MW_BIND, GID");
		mwp_teardown(&p);
		return 1;
	}
	mw = ibv_alloc_mw(p.pd, IBV_MW_TYPE_2);
	if (!mw) {
		printf("ok - type-2 memory windows # SKIP ibv_alloc_mw(IBV_MW_TYPE_2): %s\n",
		       strerror(errno));
		mwp_teardown(&p);
		return 0;
	}
	mwp_case(&p, 1, "ibv_alloc_mw(IBV_MW_TYPE_2) (rkey 0x%x)", mw->rkey);
	mwp_free(&p, mw);
	mwp_case_local_inv(&p);
	mwp_case_send_inv(&p);
	mwp_case_bounds_pool(&p);
	mwp_case_bounds_block(&p);
	mwp_case_other_qp(&p);
	mwp_case_timing(&p, iters);
	mwp_teardown(&p);
	return p.failed;
}
