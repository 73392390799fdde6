/* rdma.h - the agent's side of the RDMA data plane on one link.
 *
 * It owns the request slots of the server's ring: a call takes one slot (or
 * a run of them when its payload is larger than a slot) until its reply has
 * been consumed and any LAZY read into the client's slot completed. EAGER
 * and BULK write the payload straight from the client's front-door slot;
 * LAZY replies are RDMA-READ straight into it, then RECLAIMed in batches.
 * Runs on the session actor's thread; results leave through the ops.
 */
#ifndef RDMEM_AGENT_RDMA_H
#define RDMEM_AGENT_RDMA_H

#include <stdint.h>

#include "agent/call.h"
#include "agent/link.h"

struct rdmem_rdma;

struct rdmem_rdma_ops {
	/* The call finished on RDMA; path is the one that carried the reply. */
	void (*done)(void *ctx, struct rdmem_agent_call *call, const struct rdmem_agent_reply *rep,
		     uint8_t path);
	/*
	 * RDMA could not finish the call (err: -ECONNRESET link lost, -EIO an
	 * operation failed). intact says the request bytes are still as the
	 * client wrote them, so another path may retry it.
	 */
	void (*failed)(void *ctx, struct rdmem_agent_call *call, int err, int intact);
	/* A consistent control-page snapshot arrived. */
	void (*ctrl)(void *ctx, const struct rdmem_ctrl *snapshot);
};

struct rdmem_rdma_stats {
	uint64_t posted, replies, lazy_reads, lazy_bytes, bulk_sges, bulk_bytes;
	uint64_t doorbells; /* posts of the batched WRs: one per round under load */
	uint64_t wqes;	    /* send WRs those posts carried: messages, READs */
	uint64_t msg_wqes;  /* WRs built for request and RECLAIM messages (counted at build) */
	uint64_t reclaim_msgs, reclaimed, reclaim_refused;
	uint64_t late_replies; /* replies for calls that had already timed out */
	/* timed-out calls kept from their client until their request WRs completed */
	uint64_t timeouts_held;
	uint64_t bad_replies; /* refused: slot, sequence, lengths or object ref wrong */
	uint64_t ctrl_reads, ctrl_torn;
	uint64_t read_waits; /* LAZY READs that waited for the READ depth or send queue */
	uint64_t
	    lazy_expired; /* LAZY READs done too late to trust: the object's TTL may have run out */
	uint32_t reads_peak;	/* most READs in flight at once */
	uint32_t reads_max;	/* the READ depth: agreed by the connection, capped by config */
	uint64_t yields;	/* turn words telling us to hold (our group's slice ends) */
	uint64_t turns;		/* turn words telling us our group's turn has come */
	uint64_t turn_wakes;	/* turns that came with RDMEM_TURN_IMM (acknowledged in hint) */
	uint64_t wake_saved_us; /* rest of holds that held a call when a wake ended them */
	uint64_t yield_holds;	/* yields that held back at least one new call */
	uint64_t staged;	/* requests copied to the link's staging, not gathered */
	uint64_t area_regs;	/* client slots registered (rdmem_link_reg_lkey) */
	uint64_t area_drops;	/* ... and let go: attach over, or evicted */
	uint64_t area_refused;	/* reply READs not issued: the slot could not be registered */
	uint64_t pin_evicted;	/* idle registrations let go to stay within the budget */
	uint64_t pin_refused;	/* registrations the budget refused with none idle */
	uint64_t pin_waits;	/* calls told to wait for a registration to become idle */
	uint64_t reg_deferred;	/* registrations left to a caller that may block */
	uint32_t areas_live;	/* client slots registered now */
	uint32_t inflight;
	uint32_t slots;
};

int rdmem_rdma_create(struct rdmem_link *link, const struct rdmem_rdma_ops *ops, void *ctx,
		      struct rdmem_rdma **out);
/* Fails every call still in flight through ops->failed, then frees. */
void rdmem_rdma_destroy(struct rdmem_rdma *r);

/*
 * Posts the call on path (EAGER, LAZY or BULK): its WRs join the round's
 * batch (rdmem_rdma_flush). 0: on its way; -EAGAIN: no free run of slots, or
 * the send queue is full, now (retry after replies); -EBUSY: wait a moment
 * (the server asked us to hold new calls, connection grouping; or the
 * client's slot is still registered for an earlier attach whose WRs may run,
 * agent/rdma.c rdmem_rdma_slot_lkey); -EDQUOT: wait for a registration to
 * become idle (the pinned-memory budget is held by calls of this link, or
 * waits for a fence), while other calls may go; -E2BIG: can never fit; -ENOMEM: the client's slot
 * could not be registered (over --max-client-mem or --max-total-mem with
 * nothing idle to let go, or refused; nothing posted; the link is fine);
 * -EINPROGRESS: the slot needs a registration and registering is off
 * (rdmem_rdma_may_register); other -errno: the link is broken.
 */
int rdmem_rdma_submit(struct rdmem_rdma *r, struct rdmem_agent_call *call, uint8_t path);
/* Registering a client slot (a system call that may sleep, and evictions)
 * on (the default) or off, for a caller that must not block. */
void rdmem_rdma_may_register(struct rdmem_rdma *r, int yes);
/*
 * Deregisters the client slots whose attach is over (serial(ctx, client) is
 * no longer the one registered): with verbs a slot's registration pins its
 * pages, which the front door punched out at the reclaim. One that a WR may
 * still use waits for a fence READ (*waiting counts them: call again after
 * completions). Returns how many were let go.
 */
int rdmem_rdma_drop_areas(struct rdmem_rdma *r, uint64_t (*serial)(void *ctx, uint32_t client),
			  void *ctx, int *waiting);
/*
 * Lets go of every client slot registration no call uses and no WR can
 * still read (another link's budget needed room: agent/pin.h). Those a WR
 * may still use wait for a fence READ: *after is the post it must pass
 * (rdmem_rdma_done_past; 0: none waits), for one more call. Returns how
 * many went.
 */
int rdmem_rdma_shed_idle(struct rdmem_rdma *r, uint64_t *after);
/* True once the send queue proved done up to post (a fence READ came). */
int rdmem_rdma_done_past(const struct rdmem_rdma *r, uint64_t post);
/* Posts the batch (first), reaps completions; returns how many, or
 * -ECONNRESET when the link broke. */
int rdmem_rdma_progress(struct rdmem_rdma *r);
/* Posts every WR built since the last post in one post (one doorbell). 0
 * also when the send queue is full (they go next round); -errno: the link broke. */
int rdmem_rdma_flush(struct rdmem_rdma *r);
/* Sends queued RECLAIMs and starts a control-page read if one is due.
 * -ETIMEDOUT: a READ has been stuck long enough that the path is dead. */
int rdmem_rdma_housekeeping(struct rdmem_rdma *r, uint64_t now_ns);
/* 1 when nothing of ours is outstanding (no call, READ, RECLAIM, fence, or
 * control-page read due): no deadline or liveness check needs a timer, so
 * the session may sleep until an event (docs/architecture.md, "Idle sessions"). */
int rdmem_rdma_quiet(const struct rdmem_rdma *r);
/* A call the selector sent elsewhere (TCP) while the link is up: counts as
 * traffic for the control-page cadence, so a page that says "pressure" is
 * read again while calls flow, even when none of them goes over RDMA. */
void rdmem_rdma_note_call(struct rdmem_rdma *r);
/* Starts a control-page read now unless one is in flight; ops->ctrl reports it. */
int rdmem_rdma_refresh_ctrl(struct rdmem_rdma *r);
/* Completes calls past their deadline with -ETIMEDOUT once their request
 * WRs are known to have completed (so nothing reads the client's slot after
 * it is handed back); their ring slots stay reserved until the late reply
 * arrives. */
void rdmem_rdma_expire(struct rdmem_rdma *r, uint64_t now_ns);
void rdmem_rdma_get_stats(const struct rdmem_rdma *r, struct rdmem_rdma_stats *out);
uint32_t rdmem_rdma_ring_used_pct(const struct rdmem_rdma *r);
/* Liveness: READs in flight with nothing completing for this long mean the
 * path is dead (housekeeping then returns -ETIMEDOUT). 0 keeps the default. */
#define RDMEM_RDMA_STALL_DEFAULT_MS 500
void rdmem_rdma_set_stall_ms(struct rdmem_rdma *r, uint32_t ms);
/*
 * Fault injection for `rdmem lifecycle` (agent-ctl simulate-reclaim): what
 * becomes of the RECLAIM of the next LAZY object this link reads. One-shot.
 */
enum rdmem_rdma_reclaim_fault {
	RDMEM_RECLAIM_NORMAL,	/* off: the fault armed last is cancelled */
	RDMEM_RECLAIM_STALE,	/* first an older generation (refused), then the right one */
	RDMEM_RECLAIM_REPEAT,	/* sent twice: the server's repeat check answers the second */
	RDMEM_RECLAIM_WITHHOLD, /* kept back: the server's --object-ttl scan frees it */
	RDMEM_RECLAIM_RELEASE,	/* the one withheld, now (stale if the TTL freed it) */
};
/* 0, or -ENOENT: RELEASE with nothing withheld. */
int rdmem_rdma_reclaim_fault(struct rdmem_rdma *r, enum rdmem_rdma_reclaim_fault f);
/* When the current hold ends (CLOCK_MONOTONIC ns; 0 or past: none). */
uint64_t rdmem_rdma_hold_until(const struct rdmem_rdma *r);

/*
 * Checks a server's reply to call before any of its bytes move, against the
 * geometry the welcome w agreed: EAGER (no RDMEM_F_OBJREF: at most
 * w->eager_bytes in our response slot) or LAZY (an object of at most
 * w->obj_max bytes inside the w->objpool_bytes pool, READ by us). 1 when the
 * value fits where it goes, the client's slot from rdmem_call_reply_off(call);
 * 0: refuse it.
 */
int rdmem_rdma_reply_fits(const struct rdmem_desc *d, const struct rdmem_agent_call *call,
			  const struct rdmem_xchg_welcome *w);

#endif
