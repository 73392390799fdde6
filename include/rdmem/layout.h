/* layout.h - the per-session data-plane regions, the handshake that
 * exchanges them, and the control page.
 *
 *   server region                      peer access   registration
 *   request slots  slots x stride      remote write  req
 *   object pool    size classes        remote read   objpool
 *   control page   4 KiB               remote read   ctrl
 *   agent region
 *   response slots slots x resp_stride remote write  resp
 *   turn word      64 B after them     remote write  resp
 *
 * Every slot, request or response, is its 64-byte descriptor followed by
 * its payload: slot i starts at i * stride, its payload at i * stride + 64
 * (rdmem_slot_stride: the payload bytes rounded up to 64, plus the
 * descriptor). One RDMA WRITE WITH IMMEDIATE therefore carries a whole
 * message, descriptor and payload, to one contiguous range: one WQE for a
 * message whose pieces fit the send queue's gather list (fabric/dataplane.h).
 * A request payload larger than one slot runs on through the next slots,
 * their descriptors included, which the agent keeps reserved for it. The
 * reply to slot i goes to response slot i, or, when it is larger than
 * eager_bytes, into an object of the pool (RDMEM_F_OBJREF) that the agent
 * RDMA-READs and then RECLAIMs.
 *
 * Negotiated geometry: the hello says what the agent built, the welcome
 * carries back every per-session value both sides then rely on (ring slots,
 * slot bytes, the response stride the server writes at, the EAGER reply
 * capacity, max value, the object pool's length and largest object). The
 * agent uses only the welcome's values; see docs/architecture.md, "Handshake
 * and negotiated geometry".
 */
#ifndef RDMEM_LAYOUT_H
#define RDMEM_LAYOUT_H

#include <stdint.h>

#include "rdmem/auth.h"
#include "rdmem/byteorder.h"
#include "rdmem/fabric.h"
#include "rdmem/wire.h"

/* 2: welcome carries the negotiated geometry; 64-bit object offsets.
 * 3: welcome carries the object TTL (LAZY reads check their lease).
 * 4: descriptor and payload share a slot (one WQE a message); the welcome's
 *    req replaces req_ring + req_payload, resp_stride is the whole slot.
 * 5: the turn word after the response slots (the server tells the agent
 *    when to hold new calls and when its turn comes); replies no longer
 *    carry RDMEM_F_YIELD.
 * 6: a turn may come as a WRITE WITH IMMEDIATE that wakes the agent
 *    (RDMEM_TURN_IMM); requests acknowledge those taken in desc.hint. */
#define RDMEM_LAYOUT_VERSION 6
#define RDMEM_XCHG_MAGIC     0x58444d52u /* "RMDX" */

/* Slot state words (desc.state on the RDMA paths). */
#define RDMEM_RING_FREE	 0u
#define RDMEM_RING_READY 0x59444552u /* "REDY" */

/* Defaults (docs/architecture.md, "Paths"). */
#define RDMEM_DEFAULT_RING_SLOTS 256u /* calls in flight per session; payloads span slots */
#define RDMEM_DEFAULT_SLOT_BYTES (32u << 10)
#define RDMEM_DEFAULT_RESP_BYTES (16u << 10)
#define RDMEM_CTRL_BYTES	 4096u
#define RDMEM_MAX_RING_SLOTS	 4096u
#define RDMEM_MAX_RESP_BYTES	 (1u << 20) /* ceiling of the agent's --resp-bytes */
#define RDMEM_MAX_SLOT_BYTES	 (1u << 20) /* ceiling of the server's --slot-bytes */
#define RDMEM_MAX_STAGE_BYTES	 (1u << 20) /* ceiling of the server's --stage-bytes */
#define RDMEM_MIN_OBJECT_TTL_MS	 10u	    /* floor of the server's --object-ttl */
/* struct rdmem_remote.len is 32-bit: a longer region says this much, and the
 * reader checks min(need, this); the object pool's length is objpool_bytes. */
#define RDMEM_REMOTE_LEN_MAX UINT32_MAX

/* One slot: the descriptor, then the payload padded to 64 bytes, so every
 * slot's descriptor is 64-byte aligned (it is read as a struct) whatever the
 * payload size. At the ceilings, (4096 - 1) x stride + 64 still fits the
 * descriptor's 32-bit data_off. */
static inline uint64_t rdmem_slot_stride(uint32_t payload_bytes)
{
	return RDMEM_DESC_SIZE + (((uint64_t)payload_bytes + 63) & ~(uint64_t)63);
}

/* Where slot i's payload starts in a region of such slots. */
static inline uint64_t rdmem_slot_data_off(uint32_t slot, uint32_t payload_bytes)
{
	return (uint64_t)slot * rdmem_slot_stride(payload_bytes) + RDMEM_DESC_SIZE;
}

/*
 * The turn word (connection grouping; docs/architecture.md, "The turn
 * word"): RDMEM_TURN_BYTES at the end of the agent's response region, at
 * ring_slots x rdmem_slot_stride(resp_bytes) of its hello (the agent's
 * layout, whatever the server serves of it), written by the server with an
 * RDMA WRITE (a turn may carry an immediate: RDMEM_TURN_IMM below), read
 * by the agent from its own memory before it sends.
 * Its first 8 bytes are one 32-bit value twice, little-endian: the high 16
 * bits a sequence that changes with every write, the low 16 how long to
 * hold new calls in microseconds (0: your turn, send now). RDMA does not
 * promise that an 8-byte write lands whole, nor does the shm backend's
 * copy: a read whose halves differ is torn, and the agent looks again
 * later.
 */
#define RDMEM_TURN_BYTES 64u

static inline uint64_t rdmem_turn_encode(uint16_t seq, uint16_t hold_us)
{
	uint64_t half = (uint64_t)seq << 16 | hold_us;

	return rdmem_le64(half << 32 | half);
}

/* 0 and the word's parts, or -1 for a torn read. */
static inline int rdmem_turn_decode(uint64_t wire, uint16_t *seq, uint16_t *hold_us)
{
	uint64_t v = rdmem_le64(wire);

	if ((v >> 32) != (v & 0xffffffffu))
		return -1;
	*seq = (uint16_t)(v >> 16);
	*hold_us = (uint16_t)v;
	return 0;
}

/*
 * A turn that wakes (layout 6): the server writes a turn (hold 0) as a
 * WRITE WITH IMMEDIATE of the word, immediate RDMEM_TURN_IMM, so an agent
 * asleep on a hold wakes to its completion instead of sleeping the hold
 * out. Each takes a receive, and how many the agent has to spare must be
 * exact (one that finds none is refused, RNR: the shm fabric breaks the
 * connection, verbs retries it for ever and the session stalls), so
 * credit is one: the agent keeps RDMEM_TURN_RECVS receive beyond its reply
 * receives and says in every request's desc.hint how many such turns it
 * has taken (mod 2^16); the server sends one only when every earlier one
 * is acknowledged, and writes every other word plainly.
 */
#define RDMEM_TURN_IMM	 0xffffffffu /* never a slot index (at most 4096 slots) */
#define RDMEM_TURN_RECVS 1u

/* May a turn wake now: every wake sent acknowledged. */
static inline int rdmem_turn_may_wake(uint16_t sent, uint16_t acked)
{
	return sent == acked;
}

/* The acknowledgement a request's hint makes, or the last one when the
 * hint names anything but the wake we sent last (an old request, or a
 * hostile or confused agent). With credit one, a hint is either the last
 * acknowledgement or the wake after. Safety comes from
 * rdmem_turn_may_wake's equality; this keeps the count honest. An agent
 * can always acknowledge a wake it never took: that costs only its own
 * connection. */
static inline uint16_t rdmem_turn_ack(uint16_t sent, uint16_t acked, uint16_t hint)
{
	return hint == sent ? hint : acked;
}

/* Where the turn word is in an agent region of ring_slots response slots. */
static inline uint64_t rdmem_turn_off(uint32_t ring_slots, uint32_t resp_bytes)
{
	return (uint64_t)ring_slots * rdmem_slot_stride(resp_bytes);
}

/* The largest response region an agent may register for the server (its
 * response slots and turn word at the largest --ring-slots and
 * --resp-bytes), with room for rounding to any page size up to 64 KiB: a
 * server maps no more of a peer's (rdmem_fab_attr.max_peer_bytes). */
static inline uint64_t rdmem_max_resp_region(void)
{
	return rdmem_turn_off(RDMEM_MAX_RING_SLOTS, RDMEM_MAX_RESP_BYTES) + RDMEM_TURN_BYTES +
	       65536;
}

/* Object pool size classes: 64 KiB slabs, then larger classes up to max_value. */
#define RDMEM_OBJ_CLASSES 3

/* Connect private data, agent -> server (RC connect carries at most 56 bytes). */
struct rdmem_xchg_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t flags;
	uint32_t ring_slots;		     /* slots of our response ring */
	uint32_t resp_bytes;		     /* payload bytes per response slot */
	struct rdmem_remote resp;	     /* the response slots, then the turn word */
	uint64_t nonce;			     /* fresh per connect: high half = the agent's clock */
	uint8_t proof[RDMEM_AUTH_HELLO_MAC]; /* with --secret-file; see auth.h */
};
_Static_assert(sizeof(struct rdmem_xchg_hello) <= RDMEM_FAB_CONNECT_PRIV_MAX,
	       "fits RC connect private data");

/* Accept private data, server -> agent (RC accept carries at most 196 bytes).
 * Every per-session value either side relies on, as the server will use it. */
struct rdmem_xchg_welcome {
	uint32_t magic;
	uint16_t version;
	uint16_t flags;
	uint32_t ring_slots; /* min(agent's, server's, what the queues hold) */
	uint32_t slot_bytes; /* request payload bytes per slot: stride rdmem_slot_stride() */
	uint32_t max_value;  /* the server's --max-value: larger values are refused */
	uint32_t session_id;
	uint32_t resp_stride;	/* slot i at i * resp_stride: slot_stride(resp_bytes) */
	uint32_t eager_bytes;	/* largest reply payload written to a response slot */
	uint64_t objpool_bytes; /* the object pool's length (objpool.len is capped at 4 GiB) */
	uint32_t obj_max;	/* largest object: replies above it are refused TOO_BIG */
	uint32_t obj_count;	/* objects in the pool, all classes */
	/* The server's own flags, so that a refusal can name both sides' values. */
	uint32_t srv_ring_slots;  /* --ring-slots */
	uint32_t srv_stage_bytes; /* --stage-bytes */
	/* --object-ttl: an object may be freed this long after the request that
	 * made it arrived, so a LAZY READ is trusted only if it completed
	 * sooner than this after its request went out (docs/architecture.md,
	 * "Paths"). */
	uint32_t object_ttl_ms;
	uint32_t reserved;	 /* 0 */
	struct rdmem_remote req; /* the request slots */
	struct rdmem_remote objpool;
	struct rdmem_remote ctrl;
	uint8_t proof[RDMEM_AUTH_MAC]; /* with --secret-file: the server knows it too */
};
_Static_assert(sizeof(struct rdmem_xchg_welcome) <= RDMEM_FAB_ACCEPT_PRIV_MAX,
	       "fits RC accept private data");

/* Reject private data: why the server refused the session. */
struct rdmem_xchg_reject {
	uint32_t magic;
	uint16_t status; /* enum rdmem_status */
	uint16_t reserved;
	char reason[40];
};
_Static_assert(sizeof(struct rdmem_xchg_reject) <= RDMEM_FAB_REJECT_PRIV_MAX,
	       "fits reject private data");

/*
 * Control page: written by the session's server worker, RDMA-READ by the
 * agent every few calls. seq_begin/seq_end bracket an update (odd while it
 * runs): a snapshot whose two sequences differ or are odd is torn and ignored.
 */
struct rdmem_ctrl {
	uint64_t seq_begin;
	uint32_t magic;
	uint32_t version;
	uint32_t ring_slots;
	uint32_t ring_backlog; /* READY slots not yet taken by the worker */
	uint64_t objpool_bytes;
	uint64_t objpool_used; /* bytes held by live objects */
	uint32_t objects_live;
	uint32_t rdma_state; /* 1 = serving */
	uint32_t tcp_state;  /* 1 = TCP listener up */
	uint32_t session_id;
	uint32_t group;	       /* grouping: the last slice whose group held this session */
	uint32_t active_group; /* the slice being served when this was written */
	uint64_t completed;
	uint64_t failed;		     /* replies with a non-OK status */
	uint64_t bad_requests;		     /* refused descriptors */
	uint64_t eager_to_lazy;		     /* replies that did not fit the reply slot */
	uint64_t ewma_ns[RDMEM_PATH__COUNT]; /* service time per path */
	uint64_t obj_alloc;
	uint64_t obj_reclaim;
	uint64_t obj_repeat;	/* repeated RECLAIM of a freed object: harmless */
	uint64_t obj_stale;	/* RECLAIM with a wrong generation: refused */
	uint64_t obj_timeout;	/* freed by the TTL scan */
	uint64_t obj_full;	/* allocation failed: pool full */
	uint64_t bulk_requests; /* requests whose payload spanned several slots */
	uint64_t bulk_bytes;
	uint64_t seq_end;
};
_Static_assert(sizeof(struct rdmem_ctrl) <= RDMEM_CTRL_BYTES, "fits the control page");

#define RDMEM_CTRL_MAGIC 0x4c525443u /* "CTRL" */

/*
 * Host order <-> wire bytes (little-endian), in place; each is its own
 * inverse. The handshake converts the whole struct where it is sent or
 * received; the server writes the control page field by field through
 * rdmem_le32/64 and the agent converts its snapshot copy.
 */
static inline void rdmem_remote_le(struct rdmem_remote *r)
{
	RDMEM_LE64_SWAP(r->addr);
	RDMEM_LE32_SWAP(r->rkey);
	RDMEM_LE32_SWAP(r->len);
}

static inline void rdmem_hello_le(struct rdmem_xchg_hello *h)
{
	RDMEM_LE32_SWAP(h->magic);
	RDMEM_LE16_SWAP(h->version);
	RDMEM_LE16_SWAP(h->flags);
	RDMEM_LE32_SWAP(h->ring_slots);
	RDMEM_LE32_SWAP(h->resp_bytes);
	rdmem_remote_le(&h->resp);
	RDMEM_LE64_SWAP(h->nonce);
}

static inline void rdmem_welcome_le(struct rdmem_xchg_welcome *w)
{
	RDMEM_LE32_SWAP(w->magic);
	RDMEM_LE16_SWAP(w->version);
	RDMEM_LE16_SWAP(w->flags);
	RDMEM_LE32_SWAP(w->ring_slots);
	RDMEM_LE32_SWAP(w->slot_bytes);
	RDMEM_LE32_SWAP(w->max_value);
	RDMEM_LE32_SWAP(w->session_id);
	RDMEM_LE32_SWAP(w->resp_stride);
	RDMEM_LE32_SWAP(w->eager_bytes);
	RDMEM_LE64_SWAP(w->objpool_bytes);
	RDMEM_LE32_SWAP(w->obj_max);
	RDMEM_LE32_SWAP(w->obj_count);
	RDMEM_LE32_SWAP(w->srv_ring_slots);
	RDMEM_LE32_SWAP(w->srv_stage_bytes);
	RDMEM_LE32_SWAP(w->object_ttl_ms);
	RDMEM_LE32_SWAP(w->reserved);
	rdmem_remote_le(&w->req);
	rdmem_remote_le(&w->objpool);
	rdmem_remote_le(&w->ctrl);
}

static inline void rdmem_reject_le(struct rdmem_xchg_reject *r)
{
	RDMEM_LE32_SWAP(r->magic);
	RDMEM_LE16_SWAP(r->status);
	RDMEM_LE16_SWAP(r->reserved);
}

static inline void rdmem_ctrl_le(struct rdmem_ctrl *c)
{
	unsigned i;

	RDMEM_LE64_SWAP(c->seq_begin);
	RDMEM_LE32_SWAP(c->magic);
	RDMEM_LE32_SWAP(c->version);
	RDMEM_LE32_SWAP(c->ring_slots);
	RDMEM_LE32_SWAP(c->ring_backlog);
	RDMEM_LE64_SWAP(c->objpool_bytes);
	RDMEM_LE64_SWAP(c->objpool_used);
	RDMEM_LE32_SWAP(c->objects_live);
	RDMEM_LE32_SWAP(c->rdma_state);
	RDMEM_LE32_SWAP(c->tcp_state);
	RDMEM_LE32_SWAP(c->session_id);
	RDMEM_LE32_SWAP(c->group);
	RDMEM_LE32_SWAP(c->active_group);
	RDMEM_LE64_SWAP(c->completed);
	RDMEM_LE64_SWAP(c->failed);
	RDMEM_LE64_SWAP(c->bad_requests);
	RDMEM_LE64_SWAP(c->eager_to_lazy);
	for (i = 0; i < RDMEM_PATH__COUNT; i++)
		RDMEM_LE64_SWAP(c->ewma_ns[i]);
	RDMEM_LE64_SWAP(c->obj_alloc);
	RDMEM_LE64_SWAP(c->obj_reclaim);
	RDMEM_LE64_SWAP(c->obj_repeat);
	RDMEM_LE64_SWAP(c->obj_stale);
	RDMEM_LE64_SWAP(c->obj_timeout);
	RDMEM_LE64_SWAP(c->obj_full);
	RDMEM_LE64_SWAP(c->bulk_requests);
	RDMEM_LE64_SWAP(c->bulk_bytes);
	RDMEM_LE64_SWAP(c->seq_end);
}

#endif
