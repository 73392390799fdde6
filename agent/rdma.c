/* rdma.c - request slots, EAGER/LAZY/BULK posting, reply matching, LAZY
 * reads, batched RECLAIM and control-page reads for one agent link. */
#include "agent/rdma.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/frontdoor.h" /* rdmem_frontdoor_flush_wakes */
#include "fabric/dataplane.h"
#include "rdmem/util.h"

#define RDMEM_RDMA_CTRL_NS	 10000000ull /* with calls flowing, read the control page this often */
#define RDMEM_RDMA_CTRL_CALLS	 64	     /* ... and every this many calls */
#define RDMEM_RDMA_RECLAIM_QUEUE 1024
/* Messages and READs a round builds before they go out in one post (one
 * doorbell: one MMIO write on a NIC, one lock and wake-up in the shm
 * fabric). A full batch is posted early. */
#define RDMEM_RDMA_BATCH_WRS 32

/* wr_id of signalled WRs: kind in the high half, slot in the low half. */
#define RDMEM_WRID_LAZY ((uint64_t)1 << 32)
#define RDMEM_WRID_CTRL ((uint64_t)2 << 32)

enum rdmem_rdma_owner {
	RDMEM_OWN_FREE = 0,
	RDMEM_OWN_CALL,	   /* a client's call */
	RDMEM_OWN_SPAN,	   /* continuation of a run that starts earlier */
	RDMEM_OWN_RECLAIM, /* one of our RECLAIM messages */
	RDMEM_OWN_ORPHAN,  /* a call that timed out; waiting for its late reply */
};

struct rdmem_rdma_slot {
	struct rdmem_agent_call *call;
	struct rdmem_agent_reply rep; /* saved while the LAZY read runs */
	struct rdmem_objref ref;
	uint64_t post_no; /* rdmem_rdma.posts when the request went out */
	uint64_t read_no; /* the same for the LAZY READ in flight */
	uint64_t sent_ns; /* a clock read no later than the request went out */
	uint32_t seq;
	uint16_t span; /* slots in the run starting here */
	uint8_t owner;
	uint8_t reading; /* LAZY read into the client's slot in flight */
	uint8_t path;
	uint8_t reclaim_buf;
	uint8_t held;	   /* past its deadline, waiting for its request WRs to complete */
	uint8_t from_area; /* its request WRs gather from the client's slot */
};

struct rdmem_rdma {
	struct rdmem_link *l;
	const struct rdmem_rdma_ops *ops;
	void *ctx;
	struct rdmem_rdma_slot *slot;
	uint64_t *free_map; /* bit set = slot free */
	uint32_t nwords;
	uint32_t inflight_slots;
	uint32_t recv_owed;
	uint8_t reclaim_busy[RDMEM_LINK_RECLAIM_BUFS];
	struct rdmem_objref *reclaim_q;
	uint32_t reclaim_n;
	int ctrl_reading;
	/* READs (LAZY and control page) posted and not completed, at most
	 * l->max_reads; LAZY READs beyond wait their turn in read_q (slots, FIFO). */
	uint32_t reads_inflight;
	uint32_t *read_q;
	uint32_t read_head, read_n;
	uint64_t ctrl_at;
	uint64_t ctrl_no; /* posts when the control-page READ in flight went out */
	/*
	 * Send-queue progress (finding: a timed-out call's slot must not go
	 * back to the client while a WR may still read it). Every post of
	 * ours gets the next number; a signalled READ completing proves every
	 * WR posted before it completed too (an RC send queue completes in
	 * order), so the NIC reads no request buffer of posts <= done_no.
	 */
	uint64_t posts, done_no;
	/*
	 * WRs built and not posted yet, in post order: requests, RECLAIMs and
	 * READs all go through it, so post numbers (given when a WR joins)
	 * stay in the order the send queue sees. rdmem_rdma_flush posts them;
	 * the session flushes every round, so nothing waits past the round
	 * that built it, unless the send queue is full (then the next round).
	 */
	struct rdmem_wr batch[RDMEM_RDMA_BATCH_WRS];
	uint32_t batch_n, batch_cap;
	uint64_t fence_need; /* a timed-out call waits for done_no to reach this */
	/* No call in a slot has a deadline before this: a lower bound (a call
	 * that finishes leaves it stale, never too late), so a round with
	 * nothing due skips the scan of every slot (~80 instructions a call at
	 * window 32). rdmem_rdma_expire recomputes it when it scans. */
	uint64_t expire_at;
	/* Liveness: signs the path works (completions, and READs posted with
	 * none in flight) are counted, and stamped alive_ns by housekeeping
	 * (no clock read per completion); READs may go stall_ns without one. */
	uint64_t signs, signs_seen;
	uint64_t alive_ns, stall_ns;
	uint64_t hold_until_ns;	     /* the server's group is not being served before this */
	uint64_t held_for;	     /* the hold_until_ns that yield_holds counted last */
	struct rdmem_turn_view turn; /* the turn word as last seen */
	uint32_t calls_since_ctrl;
	uint8_t reclaim_fault;	       /* enum rdmem_rdma_reclaim_fault, armed by agent-ctl */
	uint8_t withheld_n;	       /* 1: withheld holds a reference not given back */
	struct rdmem_objref withheld;  /* RDMEM_RECLAIM_WITHHOLD's */
	uint32_t evict_own, evict_any; /* where eviction scans start (rdmem_rdma_evict) */
	uint64_t *in_use;    /* client slots calls of this link use (rdmem_rdma_mark_in_use) */
	uint8_t no_register; /* rdmem_rdma_may_register(r, 0): the caller must not block */
	struct rdmem_rdma_stats st;
};

/* Idle registrations a call may let go before it takes another way. */
#define RDMEM_RDMA_EVICT_TRIES 4

/* ---- slot runs ---------------------------------------------------------- */

static int rdmem_rdma_is_free(const struct rdmem_rdma *r, uint32_t i)
{
	return (r->free_map[i / 64] >> (i % 64)) & 1;
}

static void rdmem_rdma_mark(struct rdmem_rdma *r, uint32_t first, uint32_t n, int free)
{
	uint32_t i;

	for (i = first; i < first + n; i++) {
		if (free)
			r->free_map[i / 64] |= 1ull << (i % 64);
		else
			r->free_map[i / 64] &= ~(1ull << (i % 64));
	}
	if (free)
		r->inflight_slots -= n;
	else
		r->inflight_slots += n;
}

/* The lowest free slot: one word at a time (bits past l->slots are never set). */
static int rdmem_rdma_find_one(const struct rdmem_rdma *r, uint32_t *first)
{
	uint32_t w;

	for (w = 0; w < r->nwords; w++)
		if (r->free_map[w]) {
			*first = w * 64 + (uint32_t)__builtin_ctzll(r->free_map[w]);
			return 0;
		}
	return -EAGAIN;
}

/* First-fit run of n free slots; low slots first keeps the touched memory small. */
static int rdmem_rdma_find_run(const struct rdmem_rdma *r, uint32_t n, uint32_t *first)
{
	uint32_t i = 0, run = 0;

	if (n == 1) /* most calls: a message that fits one slot */
		return rdmem_rdma_find_one(r, first);
	while (i < r->l->slots) {
		if (run == 0 && r->free_map[i / 64] == 0 && i % 64 == 0) {
			i += 64; /* a word with nothing free */
			continue;
		}
		run = rdmem_rdma_is_free(r, i) ? run + 1 : 0;
		i++;
		if (run == n) {
			*first = i - n;
			return 0;
		}
	}
	return -EAGAIN;
}

static int rdmem_rdma_take(struct rdmem_rdma *r, uint32_t n, uint8_t owner, uint32_t *first)
{
	uint32_t i;

	if (rdmem_rdma_find_run(r, n, first) < 0)
		return -EAGAIN;
	rdmem_rdma_mark(r, *first, n, 0);
	for (i = *first; i < *first + n; i++)
		r->slot[i].owner = RDMEM_OWN_SPAN;
	r->slot[*first].owner = owner;
	r->slot[*first].span = (uint16_t)n;
	return 0;
}

static void rdmem_rdma_release(struct rdmem_rdma *r, uint32_t first)
{
	struct rdmem_rdma_slot *s = &r->slot[first];
	uint32_t i, n = s->span;

	for (i = first; i < first + n; i++) {
		r->slot[i].owner = RDMEM_OWN_FREE;
		r->slot[i].call = NULL;
		r->slot[i].reading = 0;
	}
	rdmem_rdma_mark(r, first, n, 1);
}

/* ---- posting ------------------------------------------------------------ */

int rdmem_rdma_flush(struct rdmem_rdma *r)
{
	int ret;

	if (!r->batch_n)
		return 0;
	/* -EAGAIN: the send queue is full; completions free it, the next
	 * round posts. Anything else: the connection is gone. */
	if ((ret = rdmem_fab_post(r->l->conn, r->batch, (int)r->batch_n)) < 0)
		return ret == -EAGAIN ? 0 : ret;
	r->st.doorbells++;
	r->st.wqes += r->batch_n;
	r->batch_n = 0;
	return 0;
}

/* 1 when the batch has room for one more message (posting it first when
 * full), 0 when not now (the send queue is full), or -errno. */
static int rdmem_rdma_room(struct rdmem_rdma *r, uint32_t wrs)
{
	int ret;

	if (r->batch_n + wrs <= r->batch_cap)
		return 1;
	if ((ret = rdmem_rdma_flush(r)) < 0)
		return ret;
	return r->batch_n + wrs <= r->batch_cap;
}

/* Adds a message to the batch; the caller made room. */
static void rdmem_rdma_add_msg(struct rdmem_rdma *r, const struct rdmem_dp_msg *m)
{
	uint32_t n = (uint32_t)rdmem_dp_build(r->l->conn, m, &r->batch[r->batch_n]);

	r->batch_n += n;
	r->st.msg_wqes += n;
	r->posts++;
}

/* A signalled READ went out: account it; returns its post number. */
static uint64_t rdmem_rdma_read_posted(struct rdmem_rdma *r)
{
	if (r->reads_inflight++ == 0)
		r->signs++; /* its clock starts now */
	r->st.reads_peak = RDMEM_MAX(r->st.reads_peak, r->reads_inflight);
	return ++r->posts;
}

/* Adds a signalled READ to the batch (the caller made room); returns its post number. */
static uint64_t rdmem_rdma_add_read(struct rdmem_rdma *r, const struct rdmem_wr *wr)
{
	r->batch[r->batch_n++] = *wr;
	return rdmem_rdma_read_posted(r);
}

/* A READ posted as number no completed: so did every post up to it. */
static void rdmem_rdma_read_completed(struct rdmem_rdma *r, uint64_t no)
{
	if (r->reads_inflight)
		r->reads_inflight--;
	r->done_no = RDMEM_MAX(r->done_no, no);
}

static void rdmem_rdma_fill_desc(struct rdmem_rdma *r, uint32_t i, const struct rdmem_desc *req,
				 uint8_t path)
{
	struct rdmem_desc *d = &r->l->stage[i];

	*d = *req;
	d->state = RDMEM_RING_FREE; /* rdmem_dp_publish sets READY as it posts */
	d->seq = ++r->slot[i].seq;
	d->path = path;
	d->data_off = (uint32_t)rdmem_slot_data_off(i, r->l->slot_bytes);
	d->req_id = i;
	d->status = 0;
	/* The turns with an immediate we took (and whose receive is owed or
	 * reposted: the link keeps one for it beyond the batch): the server
	 * sends the next only after this (layout.h, RDMEM_TURN_IMM). */
	d->hint = (uint16_t)r->st.turn_wakes; /* r and its counters are this link's */
	if (path == RDMEM_PATH_LAZY)
		d->flags |= RDMEM_F_WANT_OBJREF;
}

static struct rdmem_dp_msg rdmem_rdma_msg(struct rdmem_rdma *r, uint32_t i,
					  const struct rdmem_sge *sge, int nsge)
{
	const struct rdmem_link *l = r->l;
	struct rdmem_dp_msg m = {
		.slot = i,
		.desc = &l->stage[i],
		.desc_lkey = l->mr_local.lkey,
		.slot_addr = l->w.req.addr + (uint64_t)i * l->req_stride,
		.rkey = l->w.req.rkey,
		.payload = sge,
		.npayload = nsge,
	};
	return m;
}

/* Marks in r->in_use the client slots that calls this link holds use (their
 * request WRs gather from them, or their READs land or will land there):
 * one pass over the ring slots before a scan of the registrations. */
static void rdmem_rdma_mark_in_use(struct rdmem_rdma *r)
{
	const struct rdmem_link *l = r->l;
	uint32_t i;

	memset(r->in_use, 0, ((uint64_t)l->fd_clients * l->fd_slots + 63) / 64 * sizeof(uint64_t));
	for (i = 0; i < l->slots; i++) {
		const struct rdmem_agent_call *c = r->slot[i].call;
		uint64_t idx;

		if (r->slot[i].owner != RDMEM_OWN_CALL || !c || !c->client_serial ||
		    c->client >= l->fd_clients || c->slot >= l->fd_slots)
			continue;
		idx = (uint64_t)c->client * l->fd_slots + c->slot;
		r->in_use[idx / 64] |= 1ull << (idx % 64);
	}
}

/* Client slot reg (index idx of the link's table) may go now: 1; it will
 * once done_no passes *fence (raised to its last post): -1; it is used by a
 * call this link holds: -2; none: 0. */
static int rdmem_rdma_reg_idle(const struct rdmem_rdma *r, uint64_t idx, uint64_t *fence)
{
	const struct rdmem_link *l = r->l;
	const struct rdmem_link_reg *reg = &l->regs[idx];

	if (!reg->serial)
		return 0;
	if ((r->in_use[idx / 64] >> (idx % 64)) & 1)
		return -2;
	if (reg->last_post > r->done_no) {
		*fence = RDMEM_MAX(*fence, reg->last_post);
		return -1;
	}
	return 1;
}

/*
 * Makes room under the pinned-memory budget: lets one idle registration go,
 * of client's own slots when its limit refused (over), of any client's when
 * the total did, from a cursor per scope that moves on so no client is
 * always first. Idle: no call this link holds uses it, and no WR that used
 * it can still run. Returns 1 when one went; -EDQUOT when one will be idle
 * after the fence READ that now goes out, or (may_wait) when calls of this
 * link hold them and will give them back when they finish: the call waits
 * (other calls need not: see agent/session.c's pending list); 0: none of
 * this link's can ever make room.
 */
static int rdmem_rdma_evict(struct rdmem_rdma *r, uint32_t client, enum rdmem_pin_refusal over,
			    int may_wait)
{
	struct rdmem_link *l = r->l;
	int own = over == RDMEM_PIN_CLIENT, busy = 0;
	uint64_t n = own ? l->fd_slots : (uint64_t)l->fd_clients * l->fd_slots;
	uint64_t first = own ? (uint64_t)client * l->fd_slots : 0, fence = 0, k;
	uint32_t *cursor = own ? &r->evict_own : &r->evict_any;

	rdmem_rdma_mark_in_use(r);
	for (k = 0; k < n; k++) {
		uint64_t idx = first + (*cursor + k) % n;
		int idle = rdmem_rdma_reg_idle(r, idx, &fence);

		busy |= idle == -2;
		if (idle <= 0)
			continue;
		rdmem_link_reg_drop(l, (uint32_t)(idx / l->fd_slots),
				    (uint32_t)(idx % l->fd_slots));
		*cursor = (uint32_t)((idx - first + 1) % n);
		r->st.pin_evicted++;
		return 1;
	}
	if (fence)
		r->fence_need = RDMEM_MAX(r->fence_need, fence);
	if (fence || (busy && may_wait)) {
		r->st.pin_waits++;
		return -EDQUOT;
	}
	return 0;
}

int rdmem_rdma_shed_idle(struct rdmem_rdma *r, uint64_t *after)
{
	struct rdmem_link *l = r->l;
	uint64_t n = (uint64_t)l->fd_clients * l->fd_slots, idx, fence = 0;
	int dropped = 0;

	*after = 0;
	if (!l->regs)
		return 0;
	rdmem_rdma_mark_in_use(r);
	for (idx = 0; idx < n; idx++) {
		if (rdmem_rdma_reg_idle(r, idx, &fence) <= 0)
			continue; /* in use: a later ask sheds it; fenced: after *after */
		rdmem_link_reg_drop(l, (uint32_t)(idx / l->fd_slots),
				    (uint32_t)(idx % l->fd_slots));
		r->st.pin_evicted++;
		dropped++;
	}
	if (fence) {
		r->fence_need = RDMEM_MAX(r->fence_need, fence);
		*after = fence;
	}
	return dropped;
}

int rdmem_rdma_done_past(const struct rdmem_rdma *r, uint64_t post)
{
	return r->done_no >= post;
}

/*
 * The lkey of the payload of call's client slot (rdmem_link_reg_lkey). A new
 * attach of the entry replaces the old registration only once no WR that
 * used it can still run: request WRs are unsignalled, and a call completes
 * at its reply, not at its WRs' completion (after a lost ACK the NIC may
 * re-read a request whose reply already came), so deregistering earlier
 * could fault the QP. Until done_no passes the last post that used it:
 * -EBUSY (the call waits for it, as for a held group: -EAGAIN would send an
 * AUTO call over TCP) and a fence READ goes out. -EDQUOT: the budget is
 * used up and the call waits for a registration to become idle (fenced, or
 * used by calls of this link that will finish). -ENOMEM: it cannot be
 * registered (over the budget with nothing to wait for, or refused).
 */
static int rdmem_rdma_slot_lkey(struct rdmem_rdma *r, const struct rdmem_agent_call *call,
				uint32_t *lkey, int may_wait)
{
	struct rdmem_link_reg *reg = rdmem_link_reg(r->l, call->client, call->slot);
	enum rdmem_pin_refusal over;
	int ret, tries;

	if (!reg)
		return -ENOMEM;
	/* A slot its client could not register goes another way at once, on
	 * any thread (the front door's too): nothing to leave to the actor. */
	if (reg->serial != call->client_serial &&
	    rdmem_link_reg_refused(r->l, call->client, call->client_serial))
		return -ENOMEM;
	if (r->no_register && reg->serial != call->client_serial) {
		r->st.reg_deferred++;
		return -EINPROGRESS;
	}
	if (reg->serial && reg->serial != call->client_serial && reg->last_post > r->done_no) {
		r->fence_need = RDMEM_MAX(r->fence_need, reg->last_post);
		return -EBUSY;
	}
	if (reg->serial != call->client_serial &&
	    rdmem_pin_never_fits(r->l->pin, r->l->fd_payload_cap)) {
		r->st.pin_refused++; /* a limit below one slot: no eviction can help */
		return -ENOMEM;
	}
	/* A registration may sleep in the kernel: clients this round already
	 * answered are woken first (a no-op off the session thread). */
	if (reg->serial != call->client_serial)
		rdmem_frontdoor_flush_wakes();
	ret = rdmem_link_reg_lkey(r->l, call->client, call->slot, call->client_serial, lkey, &over);
	/* One eviction makes room for one registration (all are one slot's
	 * size); a few more cover other links charging meanwhile, never a
	 * drained link for one call. */
	for (tries = 0; ret == -ENOBUFS && tries < RDMEM_RDMA_EVICT_TRIES; tries++) {
		int freed = rdmem_rdma_evict(r, call->client, over, may_wait);

		if (freed < 0 && over == RDMEM_PIN_TOTAL)
			rdmem_pin_ask_shed(r->l->pin); /* idle ones elsewhere shorten the wait */
		if (freed < 0)
			return freed;
		if (!freed)
			break;
		ret = rdmem_link_reg_lkey(r->l, call->client, call->slot, call->client_serial, lkey,
					  &over);
	}
	if (ret == -ENOBUFS) {
		/* Other links may hold idle ones; this call goes another way. */
		r->st.pin_refused++;
		rdmem_pin_ask_shed(r->l->pin);
	}
	return ret < 0 ? -ENOMEM : 0;
}

/* Key and value gathered from the client's slot: no copy. */
static int rdmem_rdma_gather_slot(const struct rdmem_agent_call *call, uint32_t lkey,
				  struct rdmem_sge *sge)
{
	int n = 0;

	if (call->req.key_len)
		sge[n++] = (struct rdmem_sge){ (uintptr_t)call->key, call->req.key_len, lkey };
	if (call->req.val_len)
		sge[n++] = (struct rdmem_sge){ (uintptr_t)call->val, call->req.val_len, lkey };
	return n;
}

/*
 * Key and value (RDMEM_LINK_STAGE_BYTES at most) copied to ring slot i's
 * staging stride. The stride goes with the ring slot: written again only by
 * the next call on ring slot i, which gets it once this call's reply came (a
 * timed-out call's slot stays ORPHAN until then). A request WR re-read after
 * a lost ACK may carry that next call's bytes, as a client slot's would:
 * the duplicate targets server slot i and, in PSN order, lands before the
 * next call's own WRITEs, which carry the same bytes (docs/architecture.md,
 * "A request buffer is the client's slot until its WRs completed").
 */
static int rdmem_rdma_gather_copy(struct rdmem_rdma *r, uint32_t i,
				  const struct rdmem_agent_call *call, struct rdmem_sge *sge)
{
	uint8_t *dst = r->l->stage_payload + (uint64_t)i * RDMEM_LINK_STAGE_BYTES;
	uint32_t len = call->req.key_len + call->req.val_len;

	if (!len)
		return 0;
	memcpy(dst, call->key, call->req.key_len);
	memcpy(dst + call->req.key_len, call->val, call->req.val_len);
	sge[0] = (struct rdmem_sge){ (uintptr_t)dst, len, r->l->mr_local.lkey };
	return 1;
}

/* Slots a request payload of bytes takes: its own slot's payload part, then
 * whole slots (descriptor included) for the rest. */
static uint32_t rdmem_rdma_span(const struct rdmem_link *l, uint64_t bytes)
{
	uint64_t first = l->req_stride - RDMEM_DESC_SIZE;
	uint64_t rest = bytes > first ? bytes - first : 0;

	return (uint32_t)RDMEM_MIN(1 + (rest + l->req_stride - 1) / l->req_stride, UINT32_MAX);
}

void rdmem_rdma_may_register(struct rdmem_rdma *r, int yes)
{
	r->no_register = !yes;
}

/* The server's turn word (layout.h): a hold it tells us, or our turn, which
 * ends any hold. */
static void rdmem_rdma_look_turn(struct rdmem_rdma *r)
{
	uint64_t until = 0;

	switch (rdmem_link_turn_look(r->l, &r->turn, &until)) {
	case RDMEM_TURN_HOLD:
		r->hold_until_ns = until;
		r->st.yields++;
		break;
	case RDMEM_TURN_GO:
		r->hold_until_ns = 0;
		r->st.turns++;
		break;
	}
}

int rdmem_rdma_submit(struct rdmem_rdma *r, struct rdmem_agent_call *call, uint8_t path)
{
	uint64_t bytes = rdmem_desc_payload_len(&call->req);
	uint32_t span = rdmem_rdma_span(r->l, bytes);
	uint32_t lkey = 0, i;
	struct rdmem_sge sge[2];
	struct rdmem_dp_msg m;
	int nsge, ret, area;

	/* The agreed geometry bounds what RDMA carries; AUTO never sends more. */
	if (bytes > r->l->max_request || span > r->l->slots ||
	    call->req.val_len > r->l->w.max_value)
		return -E2BIG;
	rdmem_rdma_look_turn(r);
	if (r->hold_until_ns && rdmem_now_ns() < r->hold_until_ns) {
		/* Counted once per yield: proof a call really waited for our turn. */
		if (r->held_for != r->hold_until_ns) {
			r->held_for = r->hold_until_ns;
			r->st.yield_holds++;
		}
		return -EBUSY;
	}
	if ((ret = rdmem_rdma_room(r, RDMEM_DP_MAX_WRS)) <= 0)
		return ret ? ret : -EAGAIN;
	/* A client's call (the session's own, BIND, has no area) that moves a
	 * large payload, out of its slot or (LAZY) into it: its area's
	 * registration. Small requests are copied instead
	 * (rdmem_rdma_gather_copy), the session's own (small) included. */
	area = call->client_serial && (path != RDMEM_PATH_EAGER || bytes > RDMEM_LINK_STAGE_BYTES);
	if (!area && bytes > RDMEM_LINK_STAGE_BYTES)
		return -E2BIG;
	if (area && (ret = rdmem_rdma_slot_lkey(r, call, &lkey, 1)) < 0)
		return ret;
	if (rdmem_rdma_take(r, span, RDMEM_OWN_CALL, &i) < 0)
		return -EAGAIN;
	nsge = area ? rdmem_rdma_gather_slot(call, lkey, sge)
		    : rdmem_rdma_gather_copy(r, i, call, sge);
	r->st.staged += !area && nsge;
	r->slot[i].from_area = (uint8_t)area;
	r->slot[i].call = call;
	/* The object's lease counts from here (rdmem_rdma_lease_held): both are
	 * clock reads taken before the request goes out, and the round's is
	 * the later one for a call the turn or a full ring held back. */
	r->slot[i].sent_ns = RDMEM_MAX(call->start_ns, r->turn.look_ns);
	r->expire_at = RDMEM_MIN(r->expire_at, call->deadline_ns);
	r->slot[i].path = path;
	rdmem_rdma_fill_desc(r, i, &call->req, path);
	m = rdmem_rdma_msg(r, i, sge, nsge);
	rdmem_rdma_add_msg(r, &m);
	call->ring_slot = i;
	r->slot[i].post_no = r->posts;
	if (area) /* its WRs read the slot until done_no passes this */
		rdmem_link_reg(r->l, call->client, call->slot)->last_post = r->posts;
	r->slot[i].held = 0;
	r->st.posted++;
	r->calls_since_ctrl++;
	if (path == RDMEM_PATH_BULK) {
		r->st.bulk_sges += (uint64_t)nsge;
		r->st.bulk_bytes += bytes;
	}
	return 0;
}

int rdmem_rdma_drop_areas(struct rdmem_rdma *r, uint64_t (*serial)(void *ctx, uint32_t client),
			  void *ctx, int *waiting)
{
	struct rdmem_link *l = r->l;
	int dropped = 0;
	uint32_t c, i;

	for (c = 0; l->regs && c < l->fd_clients; c++) {
		uint64_t now = serial(ctx, c);

		for (i = 0; i < l->fd_slots; i++) {
			struct rdmem_link_reg *reg = rdmem_link_reg(l, c, i);

			if (!reg->serial || reg->serial == now)
				continue;
			if (reg->last_post > r->done_no) { /* as in rdmem_rdma_slot_lkey */
				r->fence_need = RDMEM_MAX(r->fence_need, reg->last_post);
				(*waiting)++;
				continue;
			}
			rdmem_link_reg_drop(l, c, i);
			dropped++;
		}
	}
	return dropped;
}

/* ---- RECLAIM batching ---------------------------------------------------- */

static void rdmem_rdma_queue_reclaim(struct rdmem_rdma *r, const struct rdmem_objref *ref)
{
	/* When full, the server's TTL scan frees what we could not report. */
	if (r->reclaim_n < RDMEM_RDMA_RECLAIM_QUEUE)
		r->reclaim_q[r->reclaim_n++] = *ref;
}

int rdmem_rdma_reclaim_fault(struct rdmem_rdma *r, enum rdmem_rdma_reclaim_fault f)
{
	if (f != RDMEM_RECLAIM_RELEASE) {
		r->reclaim_fault = (uint8_t)f;
		return 0;
	}
	if (!r->withheld_n)
		return -ENOENT;
	r->withheld_n = 0;
	rdmem_rdma_queue_reclaim(r, &r->withheld);
	return 0;
}

/* The RECLAIM of an object read, as the armed fault (if any) has it. */
static void rdmem_rdma_reclaim_read(struct rdmem_rdma *r, const struct rdmem_objref *ref)
{
	struct rdmem_objref old = *ref;
	uint8_t f = r->reclaim_fault;

	r->reclaim_fault = RDMEM_RECLAIM_NORMAL;
	if (f == RDMEM_RECLAIM_WITHHOLD && !r->withheld_n) {
		r->withheld = *ref;
		r->withheld_n = 1;
		return;
	}
	if (f == RDMEM_RECLAIM_STALE) {
		old.generation--; /* this object's previous life: the server must refuse it */
		rdmem_rdma_queue_reclaim(r, &old);
	}
	rdmem_rdma_queue_reclaim(r, ref);
	if (f == RDMEM_RECLAIM_REPEAT)
		rdmem_rdma_queue_reclaim(r, ref);
}

static int rdmem_rdma_free_reclaim_buf(const struct rdmem_rdma *r)
{
	int b;

	for (b = 0; b < RDMEM_LINK_RECLAIM_BUFS; b++)
		if (!r->reclaim_busy[b])
			return b;
	return -1;
}

static int rdmem_rdma_send_reclaim(struct rdmem_rdma *r)
{
	/* One slot's payload at most: a RECLAIM takes one slot, and running on
	 * would overwrite the next slot's descriptor (a server may agree to
	 * --slot-bytes as small as 64, under 32 references). */
	uint32_t fit =
	    (uint32_t)((r->l->req_stride - RDMEM_DESC_SIZE) / sizeof(struct rdmem_objref));
	uint32_t n = RDMEM_MIN(RDMEM_MIN(r->reclaim_n, RDMEM_LINK_RECLAIM_REFS), fit), bytes, i, k;
	int b = rdmem_rdma_free_reclaim_buf(r), ret;
	struct rdmem_desc req = { 0 };
	struct rdmem_sge sge;
	struct rdmem_dp_msg m;
	uint8_t *buf;

	if (!n || b < 0 || (ret = rdmem_rdma_room(r, RDMEM_DP_MAX_WRS)) <= 0 ||
	    rdmem_rdma_take(r, 1, RDMEM_OWN_RECLAIM, &i) < 0)
		return !n || b < 0 ? 0 : RDMEM_MIN(ret, 0);
	bytes = n * (uint32_t)sizeof(struct rdmem_objref);
	buf = r->l->reclaim + (size_t)b * RDMEM_LINK_RECLAIM_REFS * sizeof(struct rdmem_objref);
	for (k = 0; k < n; k++) /* entries travel little-endian; these n leave the queue */
		rdmem_objref_le(&r->reclaim_q[k]);
	memcpy(buf, r->reclaim_q, bytes);
	r->reclaim_n -= n;
	memmove(r->reclaim_q, r->reclaim_q + n, r->reclaim_n * sizeof(*r->reclaim_q));
	req.op = RDMEM_OP_RECLAIM;
	req.val_len = bytes;
	rdmem_rdma_fill_desc(r, i, &req, RDMEM_PATH_EAGER);
	sge = (struct rdmem_sge){ (uintptr_t)buf, bytes, r->l->mr_local.lkey };
	m = rdmem_rdma_msg(r, i, &sge, 1);
	rdmem_rdma_add_msg(r, &m);
	r->reclaim_busy[b] = 1;
	r->slot[i].reclaim_buf = (uint8_t)b;
	r->st.reclaim_msgs++;
	return 1;
}

/* ---- replies ------------------------------------------------------------ */

static struct rdmem_agent_reply rdmem_rdma_reply_of(const struct rdmem_desc *d, uint32_t data_off)
{
	struct rdmem_agent_reply rep = {
		d->status, d->flags, d->val_len,
		data_off,  d->aux,   { d->args.raw[0], d->args.raw[1], d->args.raw[2] }
	};
	return rep;
}

static void rdmem_rdma_finish(struct rdmem_rdma *r, uint32_t i, uint8_t path)
{
	struct rdmem_rdma_slot *s = &r->slot[i];
	struct rdmem_agent_call *call = s->call;
	struct rdmem_agent_reply rep = s->rep;

	rdmem_rdma_release(r, i);
	r->ops->done(r->ctx, call, &rep, path);
}

static void rdmem_rdma_read_done(struct rdmem_rdma *r, uint32_t i);

int rdmem_rdma_reply_fits(const struct rdmem_desc *d, const struct rdmem_agent_call *call,
			  const struct rdmem_xchg_welcome *w)
{
	uint32_t cap = rdmem_call_reply_cap(call);
	const struct rdmem_objref *ref = &d->args.obj;

	if (!(d->flags & RDMEM_F_OBJREF))
		return d->val_len <= w->eager_bytes && d->val_len <= cap;
	/* 64-bit and overflow-free: offset is the peer's, up to 2^64 - 1. */
	return ref->length == d->val_len && ref->length <= cap && ref->length <= w->obj_max &&
	       ref->offset <= w->objpool_bytes && ref->length <= w->objpool_bytes - ref->offset;
}

/* Why a reply that does not fit is refused: too big for the client's slot
 * (a server whose --max-value is above ours), or malformed. */
static uint16_t rdmem_rdma_refusal(struct rdmem_rdma *r, const struct rdmem_desc *d,
				   const struct rdmem_agent_call *call)
{
	if (d->val_len > rdmem_call_reply_cap(call))
		return RDMEM_S_TOO_BIG;
	r->st.bad_replies++;
	return RDMEM_S_IO;
}

/* At most one queued READ per slot: the queue cannot overflow. */
static void rdmem_rdma_queue_read(struct rdmem_rdma *r, uint32_t i)
{
	r->read_q[(r->read_head + r->read_n++) % r->l->slots] = i;
	r->st.read_waits++;
}

/* Slot i's reply cannot be READ: its client's area cannot be registered.
 * The server ran the call; an AUTO call of a read-only op may run again over
 * TCP, as a call refused at submit does (agent/session.c decides). */
static void rdmem_rdma_read_unregistered(struct rdmem_rdma *r, uint32_t i)
{
	struct rdmem_agent_call *call = r->slot[i].call;

	r->st.area_refused++; /* lazy_reads counted it: started, never read */
	rdmem_rdma_queue_reclaim(r, &r->slot[i].ref);
	rdmem_rdma_release(r, i);
	r->ops->failed(r->ctx, call, -ENOMEM, 1);
}

/* Posts the LAZY READ of slot i now, or queues it when the agreed READ
 * depth is used up (a NIC would stall the whole send queue behind it) or
 * the send queue is full. */
static int rdmem_rdma_issue_read(struct rdmem_rdma *r, uint32_t i, int queued)
{
	struct rdmem_rdma_slot *s = &r->slot[i];
	struct rdmem_agent_call *call = s->call;
	struct rdmem_wr wr = { 0 };
	uint32_t lkey;
	int ret;

	if (r->reads_inflight < r->l->max_reads && (ret = rdmem_rdma_room(r, 1)) != 0) {
		if (ret < 0)
			return ret;
		/* A LAZY call's slot was registered at submit; an EAGER call the
		 * server answered by reference (its value outgrew the EAGER
		 * reply) is the first to need it, now. -EBUSY: an earlier
		 * attach's or an evictee's WRs may still run (fenced), or calls
		 * of this link hold the budget: it waits, and the READs behind
		 * it go first (rdmem_rdma_drain_reads). */
		ret = rdmem_rdma_slot_lkey(r, call, &lkey, 1);
		if (ret == -EBUSY || ret == -EDQUOT) {
			if (!queued)
				rdmem_rdma_queue_read(r, i);
			return -EBUSY;
		}
		if (ret < 0) {
			rdmem_rdma_read_unregistered(r, i);
			return 0;
		}
		wr.wr_id = RDMEM_WRID_LAZY | i;
		wr.op = RDMEM_WR_READ;
		wr.flags = RDMEM_WR_SIGNALED;
		wr.remote_addr = r->l->w.objpool.addr + s->ref.offset;
		wr.rkey = r->l->w.objpool.rkey;
		wr.nsge = 1;
		wr.sge[0] = (struct rdmem_sge){ (uintptr_t)(call->payload + s->rep.data_off),
						s->ref.length, lkey };
		s->read_no = rdmem_rdma_add_read(r, &wr);
		rdmem_link_reg(r->l, call->client, call->slot)->last_post = s->read_no;
		return 0;
	}
	if (!queued)
		rdmem_rdma_queue_read(r, i);
	return -EAGAIN;
}

/*
 * Posts queued LAZY READs, oldest first, while the READ depth allows. One
 * that waits for its slot's registration (the budget is held by calls of
 * this link) moves to the back: those calls may be the READs behind it,
 * which hold their registrations already, and they must not wait for it.
 */
static int rdmem_rdma_drain_reads(struct rdmem_rdma *r)
{
	uint32_t looks = r->read_n;

	while (r->read_n && looks--) {
		uint32_t i = r->read_q[r->read_head];
		int ret = rdmem_rdma_issue_read(r, i, 1);

		if (ret == -EAGAIN)
			return 0;
		if (ret < 0 && ret != -EBUSY)
			return ret;
		r->read_head = (r->read_head + 1) % r->l->slots;
		if (ret == -EBUSY) { /* to the back: the count stays */
			r->read_q[(r->read_head + r->read_n - 1) % r->l->slots] = i;
			continue;
		}
		r->read_n--;
	}
	return 0;
}

/* A LAZY reply: READ the object straight into the client's slot. */
static int rdmem_rdma_start_read(struct rdmem_rdma *r, uint32_t i, const struct rdmem_desc *d)
{
	struct rdmem_rdma_slot *s = &r->slot[i];
	struct rdmem_agent_call *call = s->call;
	const struct rdmem_objref *ref = &d->args.obj;
	uint32_t off = rdmem_call_reply_off(call);
	int ret;

	/* The session's own calls (no client, no area) never ask for a value. */
	if (!call->client_serial || !rdmem_rdma_reply_fits(d, call, &r->l->w)) {
		s->rep = rdmem_rdma_reply_of(d, off);
		s->rep.status = rdmem_rdma_refusal(r, d, call);
		s->rep.val_len = 0;
		if (s->rep.status == RDMEM_S_IO)
			rdmem_warn_limited(
			    "server sent a bad object reference (%u bytes at %llu): refused",
			    ref->length, (unsigned long long)ref->offset);
		/* Not read, still given back: the server frees it now, not at its TTL. */
		rdmem_rdma_queue_reclaim(r, ref);
		rdmem_rdma_finish(r, i, RDMEM_PATH_LAZY);
		return 0;
	}
	s->ref = *ref;
	s->rep = rdmem_rdma_reply_of(d, off);
	s->reading = 1;
	r->st.lazy_reads++;
	r->st.lazy_bytes += ref->length;
	if (ref->length == 0) {
		rdmem_rdma_read_done(r, i); /* nothing to read */
		return 0;
	}
	/* Queued READs go first: replies are served in the order they came. */
	if (r->read_n) {
		rdmem_rdma_queue_read(r, i);
		return 0;
	}
	ret = rdmem_rdma_issue_read(r, i, 0);
	return ret == -EAGAIN || ret == -EBUSY ? 0 : ret; /* queued */
}

static int rdmem_rdma_eager_reply(struct rdmem_rdma *r, uint32_t i, const struct rdmem_desc *d)
{
	struct rdmem_rdma_slot *s = &r->slot[i];
	struct rdmem_agent_call *call = s->call;
	uint32_t off = rdmem_call_reply_off(call);

	s->rep = rdmem_rdma_reply_of(d, off);
	if (!rdmem_rdma_reply_fits(d, call, &r->l->w)) {
		s->rep.status = rdmem_rdma_refusal(r, d, call);
		s->rep.val_len = 0;
	} else if (d->val_len) {
		/* The one copy of the EAGER path: response slot -> client slot. */
		memcpy(call->payload + off,
		       r->l->resp + (uint64_t)i * r->l->w.resp_stride + RDMEM_DESC_SIZE,
		       d->val_len);
	}
	rdmem_rdma_finish(r, i, s->path);
	return 0;
}

static void rdmem_rdma_reclaim_reply(struct rdmem_rdma *r, uint32_t i, const struct rdmem_desc *d)
{
	r->reclaim_busy[r->slot[i].reclaim_buf] = 0;
	r->st.reclaimed += d->aux;
	r->st.reclaim_refused += d->args.raw[0];
	rdmem_rdma_release(r, i);
}

static int rdmem_rdma_response(struct rdmem_rdma *r, uint32_t i)
{
	struct rdmem_rdma_slot *s;
	struct rdmem_desc d;

	if (i >= r->l->slots ||
	    rdmem_dp_take((struct rdmem_desc *)(r->l->resp + (uint64_t)i * r->l->w.resp_stride),
			  &d) < 0) {
		r->st.bad_replies++;
		return 0;
	}
	s = &r->slot[i];
	if (d.seq != s->seq || s->reading ||
	    (s->owner != RDMEM_OWN_CALL && s->owner != RDMEM_OWN_RECLAIM &&
	     s->owner != RDMEM_OWN_ORPHAN)) {
		r->st.bad_replies++;
		rdmem_warn_limited("reply for slot %u with sequence %u (expected %u): refused", i,
				   d.seq, s->seq);
		return 0;
	}
	r->st.replies++;
	if (d.status >= RDMEM_S__WIRE) { /* no status a server may send */
		r->st.bad_replies++;
		d.status = RDMEM_S_IO;
	}
	switch (s->owner) {
	case RDMEM_OWN_RECLAIM:
		rdmem_rdma_reclaim_reply(r, i, &d);
		return 0;
	case RDMEM_OWN_ORPHAN:
		r->st.late_replies++;
		if (d.flags & RDMEM_F_OBJREF)
			rdmem_rdma_queue_reclaim(r, &d.args.obj);
		rdmem_rdma_release(r, i);
		return 0;
	}
	if (d.flags & RDMEM_F_OBJREF)
		return rdmem_rdma_start_read(r, i, &d);
	return rdmem_rdma_eager_reply(r, i, &d);
}

/*
 * The object's lease. The server frees an object not RECLAIMed within its
 * --object-ttl of being made, and made it after this call's request arrived,
 * so after s->sent_ns here: a clock read before the request went out. (It
 * was the call's start, and a call that waited in the agent, for a ring
 * slot or up to 65 ms for its turn, lost the wait from its lease.) A READ
 * that completed (seen now) sooner than the TTL after sent_ns read the
 * object before anything could free or reuse it; a later one may hold
 * another reply's bytes and is not trusted. Only elapsed times are
 * compared, each on its own host's clock; the server frees a quarter past
 * the TTL (server/objpool.c), which covers the two clocks' rates differing
 * while NTP or chrony slews them (chrony up to 8.3 % each way), and 1/1024
 * here is spare. A host that suspends stops
 * CLOCK_MONOTONIC: not covered (the RC connection rarely survives it).
 */
static int rdmem_rdma_lease_held(const struct rdmem_rdma *r, const struct rdmem_rdma_slot *s)
{
	uint64_t ttl_ns = (uint64_t)r->l->w.object_ttl_ms * 1000000ull;

	return rdmem_now_ns() - s->sent_ns < ttl_ns - ttl_ns / 1024;
}

static void rdmem_rdma_read_done(struct rdmem_rdma *r, uint32_t i)
{
	struct rdmem_rdma_slot *s = &r->slot[i];

	if (i >= r->l->slots || !s->reading)
		return;
	s->reading = 0;
	if (s->ref.length && !rdmem_rdma_lease_held(r, s)) {
		/* The session retries a read-only call on TCP, or fails it -ESTALE. */
		r->st.lazy_expired++;
		s->rep.status = RDMEM_S_STALE;
		s->rep.val_len = 0;
	}
	rdmem_rdma_reclaim_read(r, &s->ref);
	rdmem_rdma_finish(r, i, RDMEM_PATH_LAZY);
}

/* ---- control page -------------------------------------------------------- */

static int rdmem_rdma_read_ctrl(struct rdmem_rdma *r, uint64_t now_ns)
{
	struct rdmem_wr wr = { 0 };
	int ret;

	if (r->reads_inflight >= r->l->max_reads)
		return 0; /* housekeeping tries again when a READ completed */
	if ((ret = rdmem_rdma_room(r, 1)) <= 0)
		return ret; /* 0: the send queue is full; the same */
	wr.wr_id = RDMEM_WRID_CTRL;
	wr.op = RDMEM_WR_READ;
	wr.flags = RDMEM_WR_SIGNALED;
	wr.remote_addr = r->l->w.ctrl.addr;
	wr.rkey = r->l->w.ctrl.rkey;
	wr.nsge = 1;
	wr.sge[0] = (struct rdmem_sge){ (uintptr_t)r->l->ctrl, sizeof(struct rdmem_ctrl),
					r->l->mr_local.lkey };
	r->ctrl_no = rdmem_rdma_add_read(r, &wr);
	r->ctrl_reading = 1;
	r->ctrl_at = now_ns;
	r->calls_since_ctrl = 0;
	return 0;
}

static void rdmem_rdma_ctrl_done(struct rdmem_rdma *r)
{
	struct rdmem_ctrl snap = *r->l->ctrl;

	rdmem_ctrl_le(&snap); /* the page came off the wire */
	r->ctrl_reading = 0;
	r->st.ctrl_reads++;
	if (snap.magic != RDMEM_CTRL_MAGIC || snap.seq_begin != snap.seq_end ||
	    (snap.seq_begin & 1)) {
		/* Read while the server was writing it: the next read will not be. */
		r->st.ctrl_torn++;
		rdmem_rdma_read_ctrl(r, rdmem_now_ns());
		return;
	}
	r->ops->ctrl(r->ctx, &snap);
}

/* ---- progress ------------------------------------------------------------ */

/* A turn that woke us (layout.h, RDMEM_TURN_IMM): the word is in place (RC
 * places a WR's bytes before its completion), and unless a newer hold has
 * replaced it, its turn ends our hold now. */
static int rdmem_rdma_wake(struct rdmem_rdma *r)
{
	uint64_t until = r->hold_until_ns, now = rdmem_now_ns();
	int held_a_call = r->held_for == until;

	r->st.turn_wakes++;
	rdmem_rdma_look_turn(r);
	/* At most what the wake saved: the rest of a hold that held a call
	 * (a later look, or the call's deadline, might have ended it sooner). */
	if (!r->hold_until_ns && until > now && held_a_call)
		r->st.wake_saved_us += (until - now) / 1000;
	return 0;
}

static int rdmem_rdma_completion(struct rdmem_rdma *r, const struct rdmem_wc *wc)
{
	if (wc->status != RDMEM_WC_SUCCESS) {
		rdmem_err("RDMA to %s failed: %s", rdmem_fab_peer(r->l->conn),
			  rdmem_wc_status_name(wc->status));
		return -EIO;
	}
	r->signs++; /* packets got through */
	switch (wc->op) {
	case RDMEM_WC_RECV_IMM:
		r->recv_owed++;
		if (wc->imm == RDMEM_TURN_IMM)
			return rdmem_rdma_wake(r);
		return rdmem_rdma_response(r, wc->imm);
	case RDMEM_WC_READ:
		if (wc->wr_id == RDMEM_WRID_CTRL) {
			rdmem_rdma_read_completed(r, r->ctrl_no);
			rdmem_rdma_ctrl_done(r);
		} else if ((wc->wr_id & ~0xffffffffull) == RDMEM_WRID_LAZY &&
			   (uint32_t)wc->wr_id < r->l->slots) {
			rdmem_rdma_read_completed(r, r->slot[(uint32_t)wc->wr_id].read_no);
			rdmem_rdma_read_done(r, (uint32_t)wc->wr_id);
		} else {
			rdmem_rdma_read_completed(r, 0);
		}
		return rdmem_rdma_drain_reads(r);
	default:
		return 0;
	}
}

int rdmem_rdma_progress(struct rdmem_rdma *r)
{
	struct rdmem_wc wc[32];
	int n, i, ret;

	/* What the round built goes out before we look for what came back. */
	if ((ret = rdmem_rdma_flush(r)) < 0)
		return ret;
	if ((n = rdmem_fab_poll(r->l->conn, wc, 32)) < 0)
		return n;
	for (i = 0; i < n; i++)
		if ((ret = rdmem_rdma_completion(r, &wc[i])) < 0)
			return ret;
	/* Batched: the link posted slots + batch, so a reply always finds one. */
	if (r->recv_owed >= RDMEM_LINK_RECV_BATCH) {
		if ((ret = rdmem_fab_post_recv(r->l->conn, (int)r->recv_owed)) < 0)
			return ret;
		r->recv_owed = 0;
	}
	return n;
}

/*
 * Liveness: the path is dead when READs are in flight and nothing at all
 * completed for stall_ns (--rdma-stall-ms). A NIC answers a READ without
 * the server's CPU, and replies to earlier calls count as signs of life
 * too, so a long send queue of BULK writes that the server keeps answering
 * does not trip it. The control-page READ that housekeeping posts anyway
 * (every RDMEM_RDMA_CTRL_NS while the actor runs) is the probe: this adds
 * no RDMA operation. A black-holed RC QP may retry for ever (rxe never
 * reports retries exhausted); this does not wait for it. Completions
 * already in the CQ are reaped first, so an actor that was itself
 * descheduled for a while does not blame the path.
 */
static int rdmem_rdma_new_signs(struct rdmem_rdma *r, uint64_t now_ns)
{
	if (r->signs == r->signs_seen)
		return 0;
	r->signs_seen = r->signs;
	r->alive_ns = now_ns;
	return 1;
}

static int rdmem_rdma_stalled(struct rdmem_rdma *r, uint64_t now_ns)
{
	int i, n = 0;

	if (rdmem_rdma_new_signs(r, now_ns) || !r->reads_inflight ||
	    now_ns <= r->alive_ns + r->stall_ns)
		return 0;
	for (i = 0; i < 64 && (n = rdmem_rdma_progress(r)) > 0; i++)
		;
	if (n < 0)
		return n;
	if (rdmem_rdma_new_signs(r, rdmem_now_ns()) || !r->reads_inflight)
		return 0;
	rdmem_err("RDMA to %s: nothing completed in %llu ms with %u READs in flight: the path "
		  "is dead (--rdma-stall-ms)",
		  rdmem_fab_peer(r->l->conn), (unsigned long long)r->stall_ns / 1000000,
		  r->reads_inflight);
	return -ETIMEDOUT;
}

int rdmem_rdma_housekeeping(struct rdmem_rdma *r, uint64_t now_ns)
{
	int ret = rdmem_rdma_drain_reads(r), held;

	if (ret < 0)
		return ret;
	/* While the server serves other groups (a yield), background work
	 * waits too: a RECLAIM is a request like any other, and the periodic
	 * control-page read touches the server's QP all the same. A fence read
	 * (a timed-out call's client waits on it) does not wait. */
	rdmem_rdma_look_turn(r);
	r->turn.look_ns = now_ns; /* read before this look: a bound for the next */
	held = r->hold_until_ns && now_ns < r->hold_until_ns;
	while (!held && r->reclaim_n && (ret = rdmem_rdma_send_reclaim(r)) > 0)
		;
	if (!held && r->reclaim_n && ret < 0)
		return ret;
	if ((ret = rdmem_rdma_stalled(r, now_ns)) < 0)
		return ret;
	if (held && r->fence_need <= r->done_no)
		return 0;
	/* A timed-out call waits for proof that its request left: a READ posted
	 * after it. The page is read while calls flow: every CTRL_CALLS calls,
	 * and every CTRL_NS while a call went out since the last read or any
	 * is outstanding (a long transfer keeps these READs coming, as the
	 * liveness check expects: without them a 1 MiB transfer over Soft-RoCE
	 * veth was declared dead). An idle session posts nothing
	 * (docs/architecture.md, "Idle sessions"). */
	if (!r->ctrl_reading &&
	    (r->calls_since_ctrl >= RDMEM_RDMA_CTRL_CALLS || r->fence_need > r->done_no ||
	     (now_ns - r->ctrl_at > RDMEM_RDMA_CTRL_NS &&
	      (r->calls_since_ctrl || r->inflight_slots || r->reads_inflight))))
		return rdmem_rdma_read_ctrl(r, now_ns);
	return 0;
}

void rdmem_rdma_note_call(struct rdmem_rdma *r)
{
	r->calls_since_ctrl++;
}

int rdmem_rdma_quiet(const struct rdmem_rdma *r)
{
	return !r->inflight_slots && !r->reads_inflight && !r->read_n && !r->reclaim_n &&
	       !r->batch_n && !r->ctrl_reading && !r->calls_since_ctrl &&
	       r->fence_need <= r->done_no;
}

int rdmem_rdma_refresh_ctrl(struct rdmem_rdma *r)
{
	return r->ctrl_reading ? 0 : rdmem_rdma_read_ctrl(r, rdmem_now_ns());
}

/* Ends the call in slot s with TIMEOUT when it may go; 0 when it stays. */
static int rdmem_rdma_expire_slot(struct rdmem_rdma *r, struct rdmem_rdma_slot *s, uint64_t now_ns)
{
	struct rdmem_agent_reply rep = { RDMEM_S_TIMEOUT, 0, 0, 0, 0, { 0, 0, 0 } };

	/* A call whose READ is still landing in its slot cannot be let go. */
	if (s->reading || now_ns < s->call->deadline_ns)
		return 0;
	/*
	 * Nor one whose request WRs may still run and gather from the
	 * client's slot (a large payload, no copy): a NIC may read it any
	 * time until the WR completes (RNR and transport retries can go on for
	 * ever). Once the client has its slot back it writes the next request
	 * there, which that WR would then send under this call's descriptor.
	 * Housekeeping posts a READ; its completion proves this post completed
	 * (RC completes in order). A staged request's bytes stay in the ORPHAN
	 * ring slot's stride.
	 */
	if (s->from_area && s->post_no > r->done_no) {
		r->fence_need = RDMEM_MAX(r->fence_need, s->post_no);
		if (!s->held)
			r->st.timeouts_held++;
		s->held = 1;
		return 0;
	}
	s->owner = RDMEM_OWN_ORPHAN;
	r->ops->done(r->ctx, s->call, &rep, s->path);
	s->call = NULL;
	return 1;
}

void rdmem_rdma_expire(struct rdmem_rdma *r, uint64_t now_ns)
{
	uint32_t i;

	if (now_ns < r->expire_at)
		return;
	/* Lowered again by every call that stays (one held past its deadline
	 * keeps the bound due, so the scan repeats until it can go), and by
	 * rdmem_rdma_submit should done() post another call. */
	r->expire_at = UINT64_MAX;
	for (i = 0; i < r->l->slots; i++) {
		struct rdmem_rdma_slot *s = &r->slot[i];

		if (s->owner == RDMEM_OWN_CALL && !rdmem_rdma_expire_slot(r, s, now_ns))
			r->expire_at = RDMEM_MIN(r->expire_at, s->call->deadline_ns);
	}
}

/* ---- lifecycle ----------------------------------------------------------- */

int rdmem_rdma_create(struct rdmem_link *link, const struct rdmem_rdma_ops *ops, void *ctx,
		      struct rdmem_rdma **out)
{
	struct rdmem_rdma *r = calloc(1, sizeof(*r));
	uint32_t i, max_send, max_recv;

	if (!r)
		return -ENOMEM;
	/* Half the send queue at most, so a batch always fits once earlier
	 * WRs retire; never less than one message. */
	rdmem_fab_queue_caps(link->conn, &max_send, &max_recv);
	r->batch_cap = RDMEM_MAX(RDMEM_MIN(RDMEM_RDMA_BATCH_WRS, max_send / 2), RDMEM_DP_MAX_WRS);
	r->l = link;
	r->ops = ops;
	r->ctx = ctx;
	r->nwords = (link->slots + 63) / 64;
	r->slot = calloc(link->slots, sizeof(*r->slot));
	r->free_map = calloc(r->nwords, sizeof(uint64_t));
	r->reclaim_q = calloc(RDMEM_RDMA_RECLAIM_QUEUE, sizeof(*r->reclaim_q));
	r->read_q = calloc(link->slots, sizeof(*r->read_q));
	/* One bit per client slot (rdmem_rdma_mark_in_use); none without a front door. */
	r->in_use =
	    calloc(((uint64_t)link->fd_clients * link->fd_slots + 63) / 64 + 1, sizeof(uint64_t));
	if (!r->slot || !r->free_map || !r->reclaim_q || !r->read_q || !r->in_use) {
		rdmem_rdma_destroy(r);
		return -ENOMEM;
	}
	for (i = 0; i < link->slots; i++)
		r->free_map[i / 64] |= 1ull << (i % 64);
	r->ctrl_at = rdmem_now_ns();
	r->stall_ns = RDMEM_RDMA_STALL_DEFAULT_MS * 1000000ull;
	*out = r;
	return 0;
}

void rdmem_rdma_destroy(struct rdmem_rdma *r)
{
	uint32_t i;

	if (!r)
		return;
	for (i = 0; r->slot && i < r->l->slots; i++) {
		struct rdmem_rdma_slot *s = &r->slot[i];

		if (s->owner != RDMEM_OWN_CALL)
			continue;
		/* A READ cut off mid-way may have overwritten an overlapping request. */
		r->ops->failed(r->ctx, s->call, -ECONNRESET,
			       !(s->reading && rdmem_call_reply_overlaps(s->call)));
		s->owner = RDMEM_OWN_FREE;
	}
	free(r->slot);
	free(r->free_map);
	free(r->reclaim_q);
	free(r->read_q);
	free(r->in_use);
	free(r);
}

void rdmem_rdma_get_stats(const struct rdmem_rdma *r, struct rdmem_rdma_stats *out)
{
	*out = r->st;
	out->inflight = r->inflight_slots;
	out->reads_max = r->l->max_reads;
	out->slots = r->l->slots;
	out->area_regs = r->l->area_regs;
	out->areas_live = r->l->areas_live;
	out->area_drops = r->l->area_drops;
}

void rdmem_rdma_set_stall_ms(struct rdmem_rdma *r, uint32_t ms)
{
	if (ms)
		r->stall_ns = (uint64_t)ms * 1000000ull;
}

uint64_t rdmem_rdma_hold_until(const struct rdmem_rdma *r)
{
	return r->hold_until_ns;
}

uint32_t rdmem_rdma_ring_used_pct(const struct rdmem_rdma *r)
{
	return (uint32_t)((uint64_t)r->inflight_slots * 100 / r->l->slots);
}
