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

#include <stdint.h>

#include "rdmem/wire.h"

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
	uint32_t slot_seq;   /* the slot's sequence when taken; completion checks it */
	uint8_t forced_path; /* enum rdmem_path; AUTO unless the client forced one */
	uint8_t path;	     /* the path carrying it now */
	uint8_t tries;	     /* paths tried (AUTO retries a failed RDMA op on TCP) */
	uint8_t reserved;
	uint32_t ring_slot;	       /* session actor: request ring slot on the RDMA paths */
	struct rdmem_agent_call *next; /* intrusive list link for the owning actor */
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

/* True when reply bytes written at the reply offset destroy the request. */
static inline int rdmem_call_reply_overlaps(const struct rdmem_agent_call *c)
{
	return rdmem_call_reply_off(c) < (uint32_t)(c->val - c->payload) + c->req.val_len;
}

#endif
