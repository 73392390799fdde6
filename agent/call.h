/* call.h - one call in flight inside rdmem-agent.
 *
 * The front-door actor fills a call from a client's slot and hands its
 * pointer to the session actor; whichever actor finishes it (session or TCP)
 * completes it back into the same slot with rdmem_frontdoor_complete().
 * Calls live in a table indexed by (client, slot), so nothing is allocated
 * per call, and request/reply bytes stay in the client's slot in the shared
 * segment: paths read and write them there (zero-copy where the path allows).
 */
#ifndef RDMEM_AGENT_CALL_H
#define RDMEM_AGENT_CALL_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "rdmem/util.h"
#include "rdmem/wire.h"

struct rdmem_agent_reply;

struct rdmem_agent_call {
	struct rdmem_desc req; /* validated copy; the client cannot change it now */
	uint8_t *key;	       /* req.key_len bytes in the slot */
	uint8_t *val;	       /* req.val_len bytes in the slot */
	uint8_t *payload;      /* start of the slot's payload area */
	uint32_t payload_cap;  /* bytes in the slot's payload area */
	uint64_t deadline_ns;  /* CLOCK_MONOTONIC; the call fails after it */
	uint64_t start_ns;
	uint16_t client;
	uint16_t slot;
	uint32_t slot_seq;	/* the slot's sequence when taken; completion checks it */
	uint64_t client_serial; /* the client entry's attach (never reused): whose area it is */
	uint8_t forced_path;	/* enum rdmem_path; AUTO unless the client forced one */
	uint8_t path;		/* the path carrying it now */
	uint8_t tries;		/* paths tried (AUTO retries a failed RDMA op on TCP) */
	uint8_t sent;		/* a tagged call's id may have left (rdmem_agent_ident_sent) */
	uint32_t ring_slot;	/* session actor: request ring slot on the RDMA paths */
	struct rdmem_agent_call *next; /* intrusive list link for the owning actor */
	/* A part of a call the router split across servers (agent/router_fan.c):
	 * its completion goes here, not to the client's slot. NULL otherwise. */
	void (*join)(struct rdmem_agent_call *part, const struct rdmem_agent_reply *rep);
};

/*
 * The reply, as a path hands it back: status, flags and value length as on
 * the wire, plus where in the slot payload the value bytes were put.
 */
struct rdmem_agent_reply {
	uint16_t status;
	uint16_t flags;
	uint32_t val_len;
	uint32_t data_off; /* value bytes at call->payload + data_off */
	uint32_t aux;
	uint64_t args[3];
};

/*
 * Where a call's reply bytes go in its slot payload: after the request value
 * (64-byte aligned), so the request stays intact for a retry on another path.
 * Only an ECHO too big to fit twice overlaps its own request; such a call
 * cannot be retried once reply bytes started landing.
 */
static inline uint32_t rdmem_call_reply_off(const struct rdmem_agent_call *c)
{
	uint32_t val_off = (uint32_t)(c->val - c->payload);
	uint64_t after = ((uint64_t)val_off + c->req.val_len + 63) & ~63ull;
	uint64_t need = c->req.op == RDMEM_OP_ECHO ? c->req.val_len : 0;

	return after + need <= c->payload_cap ? (uint32_t)after : val_off;
}

static inline uint32_t rdmem_call_reply_cap(const struct rdmem_agent_call *c)
{
	return c->payload_cap - rdmem_call_reply_off(c);
}

/*
 * A call that could not reach its server (RDMEM_S_UNREACHABLE) carries the
 * server's "host:port" as its reply value, so an app with several servers
 * (rdmem_submit: c->rval) and the rdmem tool can say which one is down.
 */
static inline void rdmem_call_name_server(const struct rdmem_agent_call *c,
					  struct rdmem_agent_reply *rep, const char *name)
{
	uint32_t off = rdmem_call_reply_off(c), len;

	if (rep->status != RDMEM_S_UNREACHABLE || !name)
		return;
	len = (uint32_t)strlen(name);
	if (len > c->payload_cap - off)
		return;
	memcpy(c->payload + off, name, len);
	rep->data_off = off;
	rep->val_len = len;
}

/* True when reply bytes written at the reply offset destroy the request. */
static inline int rdmem_call_reply_overlaps(const struct rdmem_agent_call *c)
{
	return rdmem_call_reply_off(c) < (uint32_t)(c->val - c->payload) + c->req.val_len;
}

/*
 * Exactly-once calls: the agent's identity, bound to each RDMA session and
 * TCP connection with RDMEM_OP_BIND, and the ids of its non-idempotent calls
 * (desc.aux with RDMEM_F_CALL_ID). The server answers a retry of an id it ran
 * with the recorded result. Owned by the TCP actor; the session actor tags
 * calls and binds its links with it too.
 */
struct rdmem_agent_ident {
	uint64_t agent_id;	  /* random, non-zero; fixed once the actors run */
	atomic_uint next_call_id; /* 32-bit, wraps; the server extends it */
	atomic_uint sent_high;	  /* newest id that may have left the agent (valid with sent_any) */
	atomic_int sent_any;
	/* The server run (BIND reply args.raw[1]) we bound to last, 0: none:
	 * told in each BIND, so a server that forgot our window can tell. */
	atomic_uint_fast64_t server_instance;
	atomic_uint server_window; /* the window the last BIND reported (0: none) */
};

/* Ops whose second run would change the server's state again. */
static inline int rdmem_agent_tracked_op(uint16_t op)
{
	return op == RDMEM_OP_KV_PUT || op == RDMEM_OP_KV_DEL || op == RDMEM_OP_IMAGE_CHUNK ||
	       op == RDMEM_OP_RECLAIM;
}

/* Gives a call its id once, when it enters the agent; every retry reuses it. */
static inline void rdmem_agent_ident_tag(struct rdmem_agent_ident *id,
					 struct rdmem_agent_call *call)
{
	struct rdmem_desc *req = &call->req;

	call->sent = 0;
	req->flags &= (uint16_t)~RDMEM_F_CALL_ID;
	if (!rdmem_agent_tracked_op(req->op))
		return;
	/* relaxed: ids only need to be distinct; the BIND that reads the
	 * counter sees it by coherence of this one variable. */
	req->aux = atomic_fetch_add_explicit(&id->next_call_id, 1, memory_order_relaxed);
	req->flags |= RDMEM_F_CALL_ID;
}

#define RDMEM_AGENT_FIRST_CALL_ID 1u

/*
 * A tagged call is about to be sent (before the post, so a BIND racing with
 * it errs on the safe side). The newest such id is what a server that lost
 * our window must treat as possibly run: see rdmem_agent_ident_bind_desc().
 * A call that waited in a queue while newer ids went out takes a fresh id on
 * its first send, so a call that never left is never below that floor (it
 * would be answered STALE after a server restart although it never ran);
 * its retries keep the id it was first sent with. Returns what call->sent
 * was, for rdmem_agent_ident_unsent() when the post then takes nothing.
 */
static inline uint8_t rdmem_agent_ident_sent(struct rdmem_agent_ident *id,
					     struct rdmem_agent_call *call)
{
	struct rdmem_desc *d = &call->req;
	/* relaxed: a CAS loop on one variable, read by BINDs of either actor. */
	unsigned cur = atomic_load_explicit(&id->sent_high, memory_order_relaxed);
	uint8_t was = call->sent;

	if (!(d->flags & RDMEM_F_CALL_ID))
		return was;
	if (!call->sent && atomic_load_explicit(&id->sent_any, memory_order_relaxed) &&
	    (int32_t)(d->aux - cur) <= 0)
		d->aux = atomic_fetch_add_explicit(&id->next_call_id, 1, memory_order_relaxed);
	call->sent = 1;
	while ((!atomic_load_explicit(&id->sent_any, memory_order_relaxed) ||
		(int32_t)(d->aux - cur) > 0) &&
	       !atomic_compare_exchange_weak_explicit(&id->sent_high, &cur, d->aux,
						      memory_order_relaxed, memory_order_relaxed))
		;
	atomic_store_explicit(&id->sent_any, 1, memory_order_relaxed);
	return was;
}

/* The post after rdmem_agent_ident_sent() took nothing (ring or window
 * full, a held link, a dead connection): the call never left, so its first
 * real send may still renumber it. was: what rdmem_agent_ident_sent() said. */
static inline void rdmem_agent_ident_unsent(struct rdmem_agent_call *call, uint8_t was)
{
	call->sent = was;
}

/* aux: the first id that cannot have reached any server yet (where a new
 * window of a returning agent starts; older ids are answered STALE there). */
static inline void rdmem_agent_ident_bind_desc(struct rdmem_agent_ident *id, struct rdmem_desc *d)
{
	*d = (struct rdmem_desc){ 0 };
	d->op = RDMEM_OP_BIND;
	d->aux = atomic_load_explicit(&id->sent_any, memory_order_relaxed)
		     ? atomic_load_explicit(&id->sent_high, memory_order_relaxed) + 1
		     : RDMEM_AGENT_FIRST_CALL_ID;
	d->args.raw[0] = id->agent_id;
	d->args.raw[1] = atomic_load_explicit(&id->server_instance, memory_order_relaxed);
}

/* The BIND reply of one connection ("rdma", "tcp"): says what the retries are. */
static inline void rdmem_agent_ident_bound(struct rdmem_agent_ident *id, uint16_t status,
					   uint32_t window, uint64_t instance, const char *via)
{
	if (status != RDMEM_S_OK) {
		rdmem_warn("%s: the server did not bind agent %016llx (status %u): retried "
			   "PUT/DEL/IMAGE_CHUNK calls on this connection may run twice",
			   via, (unsigned long long)id->agent_id, status);
		return;
	}
	if (instance)
		atomic_store_explicit(&id->server_instance, instance, memory_order_relaxed);
	atomic_store_explicit(&id->server_window, window, memory_order_relaxed);
	if (!window)
		rdmem_warn("%s: the server keeps no dedup window (--no-dedup): retried calls may "
			   "run twice",
			   via);
}

#endif
