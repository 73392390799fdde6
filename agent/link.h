/* link.h - one established RDMA connection from the agent to a server: its
 * registered regions and the server's regions as the handshake gave them.
 *
 *   resp           response slots (descriptor + payload each)   remote write (replies);
 *                  an allocation of its own: on shm the server gets its file
 *   local region   descriptor staging, control-page snapshot, RECLAIM buffers,
 *                  small-payload staging: local
 *   front door     each client slot's payload (shm/segment.h), registered
 *                  local-only at the slot's first call after each attach that
 *                  moves a large payload (BULK, LAZY, a request over
 *                  RDMEM_LINK_STAGE_BYTES, or a reply the server sent by
 *                  reference), so those leave from and READs land in the
 *                  client's slot with no copy; each registration is charged
 *                  to the agent's pinned-memory budget (agent/pin.h)
 */
#ifndef RDMEM_AGENT_LINK_H
#define RDMEM_AGENT_LINK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/pin.h"
#include "rdmem/fabric.h"
#include "rdmem/layout.h"

#define RDMEM_LINK_RECLAIM_BUFS 8
#define RDMEM_LINK_RECLAIM_REFS 32 /* object refs per RECLAIM message */
#define RDMEM_LINK_RECV_BATCH	32 /* receives reposted at a time */
/* Receives posted beyond one per slot: the batch that may be owed, and the
 * one a turn that wakes takes (layout.h). */
#define RDMEM_LINK_RECVS_SPARE (RDMEM_LINK_RECV_BATCH + RDMEM_TURN_RECVS)
/* Request payloads up to this size are copied into the agent's own
 * registered memory (one stride per ring slot) instead of gathered from the
 * client's area: a client that moves only small payloads never has its area
 * registered, so over verbs its pages are not pinned (docs/architecture.md,
 * "Per-client areas"). */
#define RDMEM_LINK_STAGE_BYTES 4096u

struct rdmem_link_config {
	enum rdmem_fab_kind fabric;
	const char *host;
	uint16_t port;
	uint32_t ring_slots;
	uint32_t resp_bytes;
	uint8_t *fd_base;     /* front-door range, for zero-copy (NULL: none) */
	uint64_t fd_area_off; /* client c's area at fd_base + off + c * len */
	uint64_t fd_area_len;
	uint32_t fd_clients;
	uint32_t fd_slots;	      /* slot s of an area at s * fd_slot_size ... */
	uint32_t fd_slot_size;	      /* ... its payload fd_payload_off into it, ... */
	uint32_t fd_payload_off;      /* ... of fd_payload_cap bytes: what a */
	uint32_t fd_payload_cap;      /* registration covers */
	struct rdmem_pin_budget *pin; /* charged per registration; shared by every link */
	int timeout_ms;
	const char *src_addr;	 /* local address to dial from (verbs: picks the device) */
	struct rdmem_auth *auth; /* --secret-file; NULL: none */
	uint32_t max_reads;	 /* cap on READs in flight; 0: what the connection agreed */
	uint32_t max_value;	 /* the front door's --max-value: our largest value */
};

struct rdmem_link {
	struct rdmem_conn *conn;
	struct rdmem_xchg_welcome w; /* the server's regions and geometry, validated */
	/* slots and slot_bytes as the welcome agreed (request slot i at
	 * w.req.addr + i * req_stride); resp_bytes is our response slots'
	 * payload (the server echoed their stride); the EAGER capacity is
	 * w.eager_bytes. */
	uint32_t slots, slot_bytes, resp_bytes;
	uint64_t req_stride;
	uint64_t max_request; /* largest request payload this link carries */
	uint32_t max_reads;   /* READs the agent keeps in flight: agreed depth, capped by config */
	uint8_t *region;      /* local: the staging, the control-page copy, RECLAIMs */
	uint64_t region_len;
	uint8_t *resp;	   /* response slot i at i * w.resp_stride: descriptor, then payload */
	uint64_t resp_len; /* resp is an allocation of its own: the server writes it */
	uint64_t *turn;	   /* the turn word the server writes (layout.h) */
	struct rdmem_desc *stage; /* request descriptors as posted, one per slot */
	uint8_t *stage_payload;	  /* RDMEM_LINK_STAGE_BYTES per slot: small request payloads */
	struct rdmem_ctrl *ctrl;  /* the last control-page READ lands here */
	uint8_t *reclaim;	  /* RDMEM_LINK_RECLAIM_BUFS message buffers */
	struct rdmem_mr mr_resp, mr_local;
	/* Per client slot: its payload's registration (fd_clients x fd_slots,
	 * client-major); per client entry: the attach whose registration failed. */
	struct rdmem_link_reg *regs;
	uint64_t *reg_failed;
	uint8_t *fd_base;
	uint64_t fd_area_off, fd_area_len;
	uint32_t fd_clients, fd_slots, fd_slot_size, fd_payload_off, fd_payload_cap;
	struct rdmem_pin_budget *pin;
	uint64_t area_regs;  /* registrations of client slots made on this link */
	uint32_t areas_live; /* client slots registered now */
	uint64_t area_drops; /* registrations let go: attach over, replaced or evicted */
};

struct rdmem_link_reg {
	struct rdmem_mr mr;
	uint64_t serial;    /* the attach registered (call->client_serial); 0: none */
	uint64_t last_post; /* the RDMA actor's post number of the last WR that used mr */
};

/* The turn word as we last saw it (connection grouping; layout.h). */
struct rdmem_turn_view {
	uint64_t look_ns; /* a clock read taken no later than our last look */
	uint16_t seq;
};

enum { RDMEM_TURN_SAME, RDMEM_TURN_HOLD, RDMEM_TURN_GO };

/*
 * Looks at the turn word: RDMEM_TURN_SAME when it is as last seen or older (or torn:
 * a write is landing, and a later look sees it whole), RDMEM_TURN_HOLD with
 * *until when the server tells us to hold new calls, RDMEM_TURN_GO when it
 * gives us our turn. No clock read here (the send path calls it): the
 * caller sets v->look_ns when it has one. The word was written at some
 * time after that stamp, which we did not see, so the hold counts from the
 * stamp: a word seen late never holds longer than the server meant (an
 * agent sending sees it within a round; one idle for longer than the hold
 * is not held at all).
 */
static inline int rdmem_link_turn_look(const struct rdmem_link *l, struct rdmem_turn_view *v,
				       uint64_t *until)
{
	/* Relaxed: the word stands alone, nothing else rides on it; its one
	 * store is the server's WRITE (a NIC's placement, or the shm peer's
	 * copy), which no fence of ours can pair with anyway. */
	uint64_t w = atomic_load_explicit((_Atomic uint64_t *)l->turn, memory_order_relaxed);
	uint16_t seq, hold_us;

	/* Only a newer word, in serial-number order: a NIC that places out of
	 * order (multipath) may land a retried older write after a newer one. */
	if (rdmem_turn_decode(w, &seq, &hold_us) < 0 || (int16_t)(uint16_t)(seq - v->seq) <= 0)
		return RDMEM_TURN_SAME;
	v->seq = seq;
	if (!hold_us)
		return RDMEM_TURN_GO;
	*until = v->look_ns + (uint64_t)hold_us * 1000;
	return RDMEM_TURN_HOLD;
}

/* Slot's registration of client, or NULL when the link has no front door or
 * either is out of range. */
struct rdmem_link_reg *rdmem_link_reg(struct rdmem_link *l, uint32_t client, uint32_t slot);

/* Did this attach (serial) of the client fail a registration for good? Its
 * calls then go another way, not through a new try. */
static inline int rdmem_link_reg_refused(const struct rdmem_link *l, uint32_t client,
					 uint64_t serial)
{
	return l->reg_failed[client] == serial;
}

/*
 * The lkey of client's slot payload as attach serial has it (the session
 * actor's thread only). Each attach maps a fresh memfd, so a registration of
 * an earlier attach pins the old pages: it is replaced on the slot's first
 * call of a new attach. The caller makes sure no WR that used the old one can
 * still run (agent/rdma.c, rdmem_rdma_slot_lkey). Returns 0; -ENOBUFS when
 * the pinned-memory budget refuses it (*over says which limit: the caller
 * may let an idle registration go and try again); -errno of a failed
 * registration (then, for this attach, at once: its calls go another way).
 */
int rdmem_link_reg_lkey(struct rdmem_link *l, uint32_t client, uint32_t slot, uint64_t serial,
			uint32_t *lkey, enum rdmem_pin_refusal *over);

/* Deregisters a slot's payload and gives its bytes back to the budget (the
 * caller made sure no WR can still use it). */
void rdmem_link_reg_drop(struct rdmem_link *l, uint32_t client, uint32_t slot);

/* Connects to the server and exchanges regions; logs why on failure. */
int rdmem_link_open(const struct rdmem_link_config *cfg, struct rdmem_link **out);
void rdmem_link_close(struct rdmem_link *l);

/*
 * True when the verbs fabric certainly cannot register what a link needs
 * (agent region + client slots up to the pinned-memory budget, *need bytes): RLIMIT_MEMLOCK (*limit
 * bytes) is lower and the process lacks CAP_IPC_LOCK. The pinning rule is the
 * kernel's; a false answer does not promise the registrations succeed.
 */
int rdmem_link_memlock_short(const struct rdmem_link_config *cfg, uint64_t *need, uint64_t *limit);

/* Validates the server's accept private data against what we asked for:
 * at most asked_slots ring slots, the stride of our response slots of
 * asked_resp_bytes echoed, no larger EAGER replies than they hold. */
int rdmem_link_check_welcome(const struct rdmem_xchg_welcome *w, size_t len, uint32_t asked_slots,
			     uint32_t asked_resp_bytes);

/* Request payload bytes the agreed slots hold, from slot 0's payload on:
 * the most one request can span. */
uint64_t rdmem_link_request_room(const struct rdmem_xchg_welcome *w);

/* Largest request payload (key + value) we may send: our --max-value capped
 * by the server's (larger values are refused on every path), plus a key. */
uint64_t rdmem_link_max_request(const struct rdmem_xchg_welcome *w, uint32_t max_value);

/*
 * 1 with one line in line when the agreed request ring cannot hold the
 * largest request: it names both sides' values and the flags to change.
 * Such a link still serves: AUTO sends the larger requests over TCP.
 */
int rdmem_link_geometry_note(const struct rdmem_xchg_welcome *w, uint32_t asked_slots,
			     uint32_t max_value, char *line, size_t len);

#endif
