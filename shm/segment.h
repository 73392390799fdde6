/* segment.h - layout of the front-door shared memory.
 *
 * One address range of total_size bytes, the same offsets on both sides,
 * backed by memfds the agent creates and hands over its socket (shm/door.h),
 * sealed so nobody can change their size. Everything is fixed-width, nothing
 * is a pointer, and every offset comes from rdmem_shm_geom_compute(), which
 * both sides run: a client trusts no offset it reads, it recomputes them
 * from the geometry fields and checks they agree (rdmem_shm_header_check()).
 *
 *   0            common memfd, slots_off bytes, mapped by the agent and every
 *                client: the header (4 KiB): identity + geometry, agent
 *                liveness (state, pid, epoch), the ring's head and doorbell;
 *   clients_off  the client table: clients x 64 B; the agent assigns an entry
 *                at attach and writes its pid word, each claim bumps gen;
 *   ring_off     the MPSC ring: ring_size x 8 B cells (see shm/ring.h),
 *                carrying (client, slot) names only.
 *   slots_off    client c's area at slots_off + c * slots * slot_size: its slots,
 *                a memfd of its own, created fresh for every attach and
 *                mapped by that client and the agent alone. Other clients'
 *                areas are unmapped (PROT_NONE) in a client: no client can
 *                read or write another's requests or replies, and a process
 *                that keeps an old mapping after it detached only ever sees
 *                its own old calls. Pages come on first touch (no up-front
 *                allocation): an attached client costs what it uses.
 *
 * A slot: 256 B of control (state word = the client's futex word, seq,
 * deadline, requested path, request descriptor, reply descriptor), then the
 * payload area: key area of RDMEM_MAX_KEY bytes, then the value area. The
 * payload holds max_value + RDMEM_SHM_HEADROOM past the key area, so any
 * reply the agent accepts fits; replies go at any data_off inside it.
 *
 * Slot state machine (phase in the low byte, RDMEM_SLOT_WAITING flag =
 * "the client sleeps on this word, wake it"):
 *
 *   FREE --client--> SUBMITTED --agent--> TAKEN --agent--> DONE --client--> FREE
 *                        |                  |
 *                        +-----client-------+--> ABANDONED --agent--> FREE
 *
 * The client owns the slot in FREE and DONE, the agent in TAKEN; a client
 * that gives up (timeout) marks it ABANDONED and may not reuse it until the
 * agent, done with it, sets FREE. So a late reply is never seen by a later
 * call; the per-slot seq, echoed in the reply, double-checks it.
 *
 * Agent liveness: the client's connection to the agent still open
 * (libclient/attach.c). The header's state and epoch (an agent that takes
 * over a live one, --shm-reset, marks the old segment CLOSED and bumps its
 * epoch; the old agent then hangs up on its clients) only make a client
 * look at its connection at once: any client can write them.
 *
 * Header-only so libclient can include it with libc alone.
 */
#ifndef RDMEM_SHM_SEGMENT_H
#define RDMEM_SHM_SEGMENT_H

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rdmem/wire.h"
#include "shm/ring.h"

#define RDMEM_SHM_MAGIC 0x3144464d454d4452ull /* "RDMEMFD1" */
/* 2: slots in per-client memfds (the door hands two fds). */
#define RDMEM_SHM_VERSION      2
#define RDMEM_SHM_DEFAULT_NAME "/rdmem"
#define RDMEM_SHM_MODE	       0660
#define RDMEM_SHM_NAME_MAX     200 /* bytes, leading '/' included */
#define RDMEM_SHM_PAGE	       4096u
#define RDMEM_SHM_HEADER_SIZE  RDMEM_SHM_PAGE
#define RDMEM_SHM_CLIENT_SIZE  64u
#define RDMEM_SHM_SLOT_HDR     256u
#define RDMEM_SHM_VALUE_OFF    RDMEM_MAX_KEY /* value area, from the payload start */
/* Room for blob headers and tables around a max_value reply (MGET, PROFILE). */
#define RDMEM_SHM_HEADROOM    (64u << 10)
#define RDMEM_SHM_MAX_CLIENTS 1024u
#define RDMEM_SHM_MAX_SLOTS   64u /* a client allocates slots from one 64-bit map */
/* Defaults: 16 clients x 32 slots of ~1.07 MiB (1 MiB max value): 34 MiB of
 * address range per client, its pages allocated as the client uses them. */
#define RDMEM_SHM_DEFAULT_CLIENTS 16u
#define RDMEM_SHM_DEFAULT_SLOTS	  32u
/* The agent never trusts a client deadline further out than this. */
#define RDMEM_SHM_MAX_TIMEOUT_NS (3600ull * 1000000000ull)

enum rdmem_shm_state {
	RDMEM_SHM_INIT = 0, /* being formatted: not for clients yet */
	RDMEM_SHM_RUNNING = 1,
	RDMEM_SHM_CLOSED = 2, /* agent stopped or replaced: re-attach */
};

/*
 * Front-door-only op codes, outside the wire's range: they never leave the
 * host. LOCAL_PING is answered by the front-door actor itself (the ring
 * round trip alone, for benchmarks). AGENT_STATS and AGENT_CTL are handed to
 * submit() like wire ops; the agent answers them (text, or JSON with
 * RDMEM_F_JSON). AGENT_CTL carries a command line in the key area.
 */
enum rdmem_shm_op {
	RDMEM_SHM_OP_LOCAL_PING = 0x100,
	RDMEM_SHM_OP_AGENT_STATS,
	RDMEM_SHM_OP_AGENT_CTL,
	RDMEM_SHM_OP__END
};

/* Request flags a client may set; the rest are reply-only or unknown. */
#define RDMEM_SHM_REQ_FLAGS (RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT | RDMEM_F_JSON)

enum rdmem_slot_phase {
	RDMEM_SLOT_FREE = 0,
	RDMEM_SLOT_SUBMITTED = 1,
	RDMEM_SLOT_TAKEN = 2,
	RDMEM_SLOT_DONE = 3,
	RDMEM_SLOT_ABANDONED = 4,
};
#define RDMEM_SLOT_WAITING 0x100u /* the client sleeps on the word: wake it */
/* SUBMITTED with no ring entry, and none will come: the ring was full (a
 * client jamming it; it holds twice the slots there are) or the claim gave
 * up under contention, so the client asked the agent on its connection to
 * take the slot (RDMEM_DOOR_TAKE, shm/door.h). */
#define RDMEM_SLOT_NO_ENTRY 0x200u
#define RDMEM_SLOT_PHASE(s) ((s)&0xffu)

struct rdmem_shm_header {
	/* identity and geometry: written once, before state turns RUNNING */
	uint64_t magic;
	uint32_t version;
	uint32_t header_size;
	uint32_t clients;
	uint32_t slots; /* per client */
	uint32_t max_value;
	uint32_t payload_cap; /* bytes in each slot's payload area */
	uint32_t slot_size;
	uint32_t ring_size;
	uint64_t total_size;
	uint64_t clients_off;
	uint64_t ring_off;
	uint64_t slots_off;
	uint8_t pad0[56];
	/* agent liveness */
	_Atomic uint32_t state; /* enum rdmem_shm_state */
	int32_t agent_pid;
	_Atomic uint64_t epoch; /* bumped by every agent that replaces a dead one */
	uint64_t created_ns;	/* CLOCK_REALTIME, for humans */
	uint64_t agent_start;	/* the agent's /proc starttime: tells a reused pid apart */
	uint8_t pad1[32];
	struct rdmem_ring_ctl ring; /* head, doorbell, sleeping */
	uint8_t pad2[RDMEM_SHM_HEADER_SIZE - 320];
};
_Static_assert(offsetof(struct rdmem_shm_header, state) == 128, "liveness on its own line");
_Static_assert(offsetof(struct rdmem_shm_header, ring) == 192, "ring ctl on its own lines");
_Static_assert(sizeof(struct rdmem_shm_header) == RDMEM_SHM_HEADER_SIZE, "header is one page");

struct rdmem_shm_client {
	_Atomic int32_t pid;  /* 0: free; the agent writes its client's pid at attach */
	_Atomic uint32_t gen; /* bumped by every claim */
	uint64_t attach_ns;   /* CLOCK_MONOTONIC at claim, for humans */
	uint8_t pad[48];
};
_Static_assert(sizeof(struct rdmem_shm_client) == RDMEM_SHM_CLIENT_SIZE, "one line per client");

struct rdmem_shm_slot {
	_Atomic uint32_t state; /* phase | RDMEM_SLOT_WAITING: the client's futex word */
	uint32_t seq;		/* client bumps it per call; the reply echoes it */
	uint64_t deadline_ns;	/* CLOCK_MONOTONIC; the call fails after it */
	uint8_t path;		/* enum rdmem_path the client asks for */
	uint8_t pad0[47];
	struct rdmem_desc req; /* written by the client while FREE */
	struct rdmem_desc rep; /* written by the agent before DONE */
	uint8_t pad1[64];
};
_Static_assert(sizeof(struct rdmem_shm_slot) == RDMEM_SHM_SLOT_HDR, "slot control is 256 B");
_Static_assert(offsetof(struct rdmem_shm_slot, req) == 64, "request on its own line");

/* Where everything is, derived from three numbers; both sides compute it. */
struct rdmem_shm_geom {
	uint32_t clients;
	uint32_t slots;
	uint32_t max_value;
	uint32_t payload_cap;
	uint32_t slot_size;
	uint32_t ring_size;
	uint64_t clients_off;
	uint64_t ring_off;
	uint64_t slots_off;  /* = the common memfd's size */
	uint64_t total_size; /* the whole range: slots_off + clients x client size */
};
/* (No client size field: struct rdmem_att embeds this struct, and librdmem's
 * inline fast path reads the fields after it. See rdmem_shm_client_size().) */

static inline uint64_t rdmem_shm_round_up(uint64_t v, uint64_t align)
{
	return (v + align - 1) / align * align;
}

/* Smallest power of two >= v, v <= 2^31. */
static inline uint32_t rdmem_shm_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

/*
 * Computes the layout for a geometry. Returns 0, or -EINVAL for a count out
 * of range, -E2BIG for a max_value over RDMEM_MAX_VALUE_LIMIT. All products
 * are 64-bit and bounded by the limits, so nothing can overflow.
 */
static inline int rdmem_shm_geom_compute(uint32_t clients, uint32_t slots, uint32_t max_value,
					 struct rdmem_shm_geom *g)
{
	uint64_t slot_size, ring_size, n_slots;

	if (clients == 0 || clients > RDMEM_SHM_MAX_CLIENTS || slots == 0 ||
	    slots > RDMEM_SHM_MAX_SLOTS)
		return -EINVAL;
	if (max_value > RDMEM_MAX_VALUE_LIMIT)
		return -E2BIG;
	slot_size = rdmem_shm_round_up((uint64_t)RDMEM_SHM_SLOT_HDR + RDMEM_MAX_KEY + max_value +
					   RDMEM_SHM_HEADROOM,
				       RDMEM_SHM_PAGE);
	n_slots = (uint64_t)clients * slots;
	ring_size = rdmem_shm_pow2((uint32_t)(2 * n_slots));
	if (ring_size < RDMEM_RING_MIN_SIZE)
		ring_size = RDMEM_RING_MIN_SIZE;
	g->clients = clients;
	g->slots = slots;
	g->max_value = max_value;
	g->slot_size = (uint32_t)slot_size;
	g->payload_cap = (uint32_t)(slot_size - RDMEM_SHM_SLOT_HDR);
	g->ring_size = (uint32_t)ring_size;
	g->clients_off = RDMEM_SHM_HEADER_SIZE;
	g->ring_off = rdmem_shm_round_up(g->clients_off + (uint64_t)clients * RDMEM_SHM_CLIENT_SIZE,
					 RDMEM_CACHELINE);
	g->slots_off =
	    rdmem_shm_round_up(g->ring_off + ring_size * sizeof(uint64_t), RDMEM_SHM_PAGE);
	g->total_size = g->slots_off + n_slots * slot_size;
	return 0;
}

/* Writes a geometry's fields into a header being formatted. */
static inline void rdmem_shm_header_fill(struct rdmem_shm_header *h, const struct rdmem_shm_geom *g)
{
	h->magic = RDMEM_SHM_MAGIC;
	h->version = RDMEM_SHM_VERSION;
	h->header_size = RDMEM_SHM_HEADER_SIZE;
	h->clients = g->clients;
	h->slots = g->slots;
	h->max_value = g->max_value;
	h->payload_cap = g->payload_cap;
	h->slot_size = g->slot_size;
	h->ring_size = g->ring_size;
	h->total_size = g->total_size;
	h->clients_off = g->clients_off;
	h->ring_off = g->ring_off;
	h->slots_off = g->slots_off;
}

/*
 * Validates a header with mapped bytes of the common memfd behind it: ours
 * (magic, version), and its geometry recomputed from clients/slots/max_value
 * agrees with every stored field, and the common part fits in what is
 * mapped. Returns 0 with *g set, -EPROTO when it is not an rdmem segment (or
 * another version), -EINVAL when inconsistent.
 */
static inline int rdmem_shm_header_check(const struct rdmem_shm_header *h, uint64_t mapped,
					 struct rdmem_shm_geom *g)
{
	if (mapped < RDMEM_SHM_HEADER_SIZE)
		return -EPROTO;
	if (h->magic != RDMEM_SHM_MAGIC || h->version != RDMEM_SHM_VERSION)
		return -EPROTO;
	if (rdmem_shm_geom_compute(h->clients, h->slots, h->max_value, g))
		return -EINVAL;
	if (h->header_size != RDMEM_SHM_HEADER_SIZE || h->payload_cap != g->payload_cap ||
	    h->slot_size != g->slot_size || h->ring_size != g->ring_size ||
	    h->total_size != g->total_size || h->clients_off != g->clients_off ||
	    h->ring_off != g->ring_off || h->slots_off != g->slots_off)
		return -EINVAL;
	if (g->slots_off > mapped)
		return -EINVAL;
	return 0;
}

/* The accessors below take indices the caller has range-checked against g. */
static inline struct rdmem_shm_client *
rdmem_shm_client_at(void *base, const struct rdmem_shm_geom *g, uint32_t client)
{
	return (struct rdmem_shm_client *)((uint8_t *)base + g->clients_off +
					   (uint64_t)client * RDMEM_SHM_CLIENT_SIZE);
}

static inline struct rdmem_shm_slot *rdmem_shm_slot_at(void *base, const struct rdmem_shm_geom *g,
						       uint32_t client, uint32_t slot)
{
	uint64_t index = (uint64_t)client * g->slots + slot;

	return (struct rdmem_shm_slot *)((uint8_t *)base + g->slots_off + index * g->slot_size);
}

/* One client's area (its memfd): its slots. */
static inline uint64_t rdmem_shm_client_size(const struct rdmem_shm_geom *g)
{
	return (uint64_t)g->slots * g->slot_size;
}

/* Client c's area: its memfd is mapped here. */
static inline uint8_t *rdmem_shm_client_area(void *base, const struct rdmem_shm_geom *g,
					     uint32_t client)
{
	return (uint8_t *)base + g->slots_off + (uint64_t)client * rdmem_shm_client_size(g);
}

static inline uint8_t *rdmem_shm_payload(struct rdmem_shm_slot *s)
{
	return (uint8_t *)s + RDMEM_SHM_SLOT_HDR;
}

static inline void rdmem_shm_ring_view(void *base, const struct rdmem_shm_geom *g,
				       struct rdmem_ring *r)
{
	struct rdmem_shm_header *h = (struct rdmem_shm_header *)base;

	rdmem_ring_bind(r, &h->ring, (uint8_t *)base + g->ring_off, g->ring_size);
}

static inline int rdmem_shm_op_is_local(unsigned op)
{
	return op >= RDMEM_SHM_OP_LOCAL_PING && op < RDMEM_SHM_OP__END;
}

/*
 * Ops a client may send through the front door. RECLAIM and AUTH belong to
 * the agent's own session with the server: a client sending them could
 * free another process's objects or disturb the session.
 */
static inline int rdmem_shm_op_allowed(unsigned op)
{
	if (rdmem_shm_op_is_local(op))
		return 1;
	/* Connection setup ops are the agent's: a client must not bind another identity. */
	return op > 0 && op < RDMEM_OP__COUNT && op != RDMEM_OP_RECLAIM && op != RDMEM_OP_AUTH &&
	       op != RDMEM_OP_BIND;
}

static inline const char *rdmem_shm_op_name(unsigned op)
{
	switch (op) {
	case RDMEM_SHM_OP_LOCAL_PING:
		return "local_ping";
	case RDMEM_SHM_OP_AGENT_STATS:
		return "agent_stats";
	case RDMEM_SHM_OP_AGENT_CTL:
		return "agent_ctl";
	default:
		return rdmem_op_name(op);
	}
}

/*
 * Normalizes a segment name for shm_open(): one leading '/', then 1..
 * RDMEM_SHM_NAME_MAX - 1 characters with no '/'. "rdmem" becomes "/rdmem".
 * Returns 0 or -EINVAL.
 */
static inline int rdmem_shm_name_norm(const char *name, char *out, size_t cap)
{
	size_t len;

	if (!name)
		return -EINVAL;
	if (name[0] == '/')
		name++;
	len = strlen(name);
	if (len == 0 || len + 2 > cap || len + 1 >= RDMEM_SHM_NAME_MAX || strchr(name, '/'))
		return -EINVAL;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	out[0] = '/';
	memcpy(out + 1, name, len + 1);
	return 0;
}

#endif
