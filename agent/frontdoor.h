/* frontdoor.h - the agent's front-door actor: it owns the SHM segment that
 * local apps attach to, drains the MPSC request ring, validates each entry
 * and slot, and hands good calls to the session actor. Replies go back into
 * the caller's slot through rdmem_frontdoor_complete(), from any actor.
 *
 * Segment layout and the slot state machine: shm/segment.h.
 */
#ifndef RDMEM_AGENT_FRONTDOOR_H
#define RDMEM_AGENT_FRONTDOOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/call.h"
#include "agent/pin.h"

struct rdmem_frontdoor;

/* Zero fields take the defaults in brackets. */
struct rdmem_frontdoor_config {
	const char *shm_name; /* ["/rdmem"]; a missing leading '/' is added; names the socket */
	/* The attach socket [<runtime dir>/<shm_name>.sock, shm/door.h]; its
	 * directory is created 0750, or must be ours and writable by nobody else. */
	const char *socket_path;
	int reset;   /* --shm-reset: take over a live agent's socket or a foreign file there */
	gid_t group; /* socket and directory group; (gid_t)-1 or 0 keeps ours */
	/* agent-ctl is for root, the agent's own user and, with has_admin_group,
	 * members of admin_group (docs/architecture.md, "Who may steer the agent"). */
	gid_t admin_group;
	int has_admin_group;
	uint32_t clients; /* client-table entries [RDMEM_SHM_DEFAULT_CLIENTS], <= 1024 */
	/* Entries one uid other than root and the agent's own may hold
	 * [half the table, at least 1], <= 1024 (--clients-per-uid). */
	uint32_t clients_per_uid;
	uint32_t slots;	    /* slots per client [RDMEM_SHM_DEFAULT_SLOTS], <= 64 */
	uint32_t max_value; /* largest value a call may carry [1 MiB]; sizes slot payloads */
	int busy_poll;	    /* never block when idle */
	/* Tests and fuzzers: how long a claimed, unpublished ring position (or a
	 * scribbled cell) waits before the actor skips or repairs it
	 * [RDMEM_RING_SKIP_NS]. */
	uint64_t ring_skip_ns;
	/* --client-strikes: misbehaviour attributable to one client (see
	 * docs/architecture.md, "Cutting off a misbehaving client") it may
	 * commit faster than one per RDMEM_FD_STRIKE_DECAY_NS before the agent
	 * disconnects it; 0 (the zero field too) never cuts anyone off. The
	 * agent's flag defaults to RDMEM_FD_STRIKES_DEFAULT. */
	uint32_t client_strikes;
	/* Pinned-memory budget for zero copy (agent/pin.h): bytes of one
	 * entry's slots, and of all entries' slots, that registrations may cover
	 * at once (--max-client-mem, --max-total-mem, 0..RDMEM_PIN_MAX_LIMIT),
	 * when has_mem_limits (RDMEM_FD_MEM_DEFAULT: the default for that one);
	 * else (tests, fuzzers) both defaults. A default is never below one
	 * slot's payload, so every legal --max-value gets zero copy. */
	uint64_t max_client_mem;
	uint64_t max_total_mem;
	int has_mem_limits;
};

#define RDMEM_FD_MEM_DEFAULT	    UINT64_MAX
#define RDMEM_FD_DEFAULT_CLIENT_MEM (64ull << 20)  /* or one slot's payload, if more */
#define RDMEM_FD_DEFAULT_TOTAL_MEM  (256ull << 20) /* or one slot's payload, if more */
#define RDMEM_FD_STRIKES_DEFAULT    16
#define RDMEM_FD_STRIKES_MAX	    1000000
/* One strike is forgiven this often: a rare glitch never adds up. */
#define RDMEM_FD_STRIKE_DECAY_NS 1000000000ull
/* A process cut off may not attach again for this long. */
#define RDMEM_FD_CUT_HOLD_NS 10000000000ull

/*
 * Called on the front-door thread for each valid call; must not block.
 * call->req is a validated copy (op allowed, flags, path, key_len <=
 * RDMEM_MAX_KEY, val_len <= max_value); req.seq and req.path are the slot's
 * seq and forced path. Key bytes are at call->key (payload + 0), value bytes
 * at call->val (payload + RDMEM_SHM_VALUE_OFF). Ops: the wire ops except
 * RECLAIM and AUTH, plus RDMEM_SHM_OP_AGENT_STATS and RDMEM_SHM_OP_AGENT_CTL
 * (LOCAL_PING never reaches submit). Every call handed over must be
 * completed exactly once with rdmem_frontdoor_complete().
 */
typedef void (*rdmem_frontdoor_submit_fn)(void *ctx, struct rdmem_agent_call *call);

/*
 * Creates the segment (a memfd sealed against shrinking and growing, every
 * page allocated up front, so it can never SIGBUS) and the socket clients
 * attach through. Refuses (-EBUSY) a socket a live agent answers on (any
 * process, this one included) and (-EEXIST) a file there that is not our
 * socket, unless cfg->reset; with reset, a live agent's segment is marked
 * CLOSED with a bumped epoch (its clients re-attach to us). A dead agent's
 * socket is removed. -EPERM for a socket directory that is not ours or that
 * others may write; -ENOSPC when memory cannot hold the segment.
 */
int rdmem_frontdoor_create(const struct rdmem_frontdoor_config *cfg, struct rdmem_frontdoor **out);
int rdmem_frontdoor_start(struct rdmem_frontdoor *fd, rdmem_frontdoor_submit_fn submit, void *ctx);
/*
 * One round of the actor on the caller's thread, for tests and fuzzers that
 * drive a front door whose thread was never started: takes up to one batch
 * of ring entries (each validated, then handed to submit or refused as the
 * actor would) and, with scan, looks for dead clients and for submitted
 * slots whose entry was lost (taken as if it had come). Returns the entries
 * taken, those included, or -EBUSY while the actor thread runs.
 */
int rdmem_frontdoor_poll(struct rdmem_frontdoor *fd, rdmem_frontdoor_submit_fn submit, void *ctx,
			 int scan);
/*
 * Stops the actor: no call is taken from the ring or handed to submit()
 * afterwards, while the segment stays up so actors still holding calls can
 * complete them. The agent's stop order: this, the other actors, destroy.
 */
void rdmem_frontdoor_stop(struct rdmem_frontdoor *fd);
/*
 * Marks the segment CLOSED (attached clients see it at once and their calls
 * fail with -ESHUTDOWN), stops the actor, wakes every waiter, unlinks the
 * name if it is still ours. Stop every actor that may still call
 * rdmem_frontdoor_complete() first: calls not completed simply die here.
 */
void rdmem_frontdoor_destroy(struct rdmem_frontdoor *fd);

/*
 * Publishes the reply of call into its slot and wakes the client if it
 * sleeps. Safe from any thread; a call whose client died or gave up is
 * dropped and its slot freed. The call must not be touched afterwards.
 *
 * The reply value must already be in the slot: rep->val_len bytes at
 * call->payload + rep->data_off, inside call->payload_cap (checked: a reply
 * outside is turned into RDMEM_S_IO with no value, and logged). Any data_off
 * works, e.g. RDMEM_SHM_VALUE_OFF, or 0 to use the whole payload once the
 * request has been sent. The reply descriptor carries call->path as the
 * path taken, and the slot's seq and req_id.
 */
void rdmem_frontdoor_complete(struct rdmem_frontdoor *fd, struct rdmem_agent_call *call,
			      const struct rdmem_agent_reply *rep);

/*
 * From now on this thread's rdmem_frontdoor_complete() wakes no sleeping
 * client at once: the wakes wait for rdmem_frontdoor_flush_wakes(), which
 * the thread must call before it sleeps or lets a client wait on it (the
 * session actor: whenever it gives its token back). A thread's first 64
 * held wakes are kept; any more are made at once.
 */
void rdmem_frontdoor_defer_wakes(void);
void rdmem_frontdoor_flush_wakes(void);

/* Completes call with a status and no value (errors, DEL, PUT, ...). */
void rdmem_frontdoor_complete_status(struct rdmem_frontdoor *fd, struct rdmem_agent_call *call,
				     uint16_t status);

/* The agent's range (common part, then the client areas; shm/segment.h). */
void *rdmem_frontdoor_segment(struct rdmem_frontdoor *fd, size_t *len);

/*
 * Where client slots are, so the agent can register their payloads with the
 * fabric (zero copy): client c's slot s at base + area_off + c * area_len +
 * s * slot_size, its payload payload_off into it, payload_cap bytes. An area
 * is mapped only while its entry is claimed. pin: the budget every
 * registration is charged to.
 */
struct rdmem_frontdoor_areas {
	uint8_t *base;
	uint64_t area_off, area_len;
	uint32_t clients, slots, slot_size, payload_off, payload_cap;
	struct rdmem_pin_budget *pin;
};
void rdmem_frontdoor_areas(struct rdmem_frontdoor *fd, struct rdmem_frontdoor_areas *out);
/* The budget of pinned client memory (agent/pin.h), as in the areas. */
struct rdmem_pin_budget *rdmem_frontdoor_pin(struct rdmem_frontdoor *fd);

/*
 * fn(ctx, client) runs on the actor thread each time a client entry is
 * reclaimed (its attach is over: rdmem_frontdoor_client_serial() says 0 or,
 * once reused, a new attach's), so whoever keeps something of that attach
 * (the session's registration of its area) can let it go. Set before
 * rdmem_frontdoor_start(); fn must not block.
 */
typedef void (*rdmem_frontdoor_released_fn)(void *ctx, uint32_t client);
/*
 * fn(submit's ctx) runs on the actor thread after each batch of calls it
 * handed to submit (a drain of the ring, or a scan's), before it looks at
 * the ring again or sleeps: a submit that keeps something across the calls
 * of a batch (a session's token) lets go of it there. Set before
 * rdmem_frontdoor_start() or _poll(); fn must not block.
 */
typedef void (*rdmem_frontdoor_batch_fn)(void *ctx);
void rdmem_frontdoor_on_batch_end(struct rdmem_frontdoor *fd, rdmem_frontdoor_batch_fn fn);
void rdmem_frontdoor_on_release(struct rdmem_frontdoor *fd, rdmem_frontdoor_released_fn fn,
				void *ctx);
/* The attach serial of entry c now (0: none); any thread. */
uint64_t rdmem_frontdoor_client_serial(struct rdmem_frontdoor *fd, uint32_t c);

/* The segment's geometry: payload bytes per slot, slots, clients, max value. */
uint32_t rdmem_frontdoor_payload_cap(struct rdmem_frontdoor *fd);

struct rdmem_frontdoor_stats {
	uint64_t calls;		  /* entries taken from the ring */
	uint64_t local_pings;	  /* answered by the front door itself */
	uint64_t bad_entries;	  /* refused: wrong client, slot, state, length, op, path */
	uint64_t skipped;	  /* ring positions skipped after a dead or stalled producer */
	uint64_t repaired;	  /* ring cells a client scribbled on, rewritten */
	uint64_t stalls;	  /* waits for an unpublished position that ended in skips */
	uint64_t head_repaired;	  /* ring heads a client moved out of range, reset */
	uint64_t pid_forged;	  /* client entries with a negative pid word */
	uint64_t header_repaired; /* segment headers a client overwrote, put back */
	uint64_t orphans;	/* submitted slots whose ring entry never came, taken by the scan */
	uint64_t no_entry;	/* slots a client marked (the ring full), taken at its request */
	uint64_t take_reqs;	/* such requests read on clients' connections */
	uint64_t late_entries;	/* ring entries that came after the scan took their slot */
	uint64_t dead_clients;	/* client entries reclaimed */
	uint64_t dropped;	/* completions for clients that died or gave up */
	uint64_t expired;	/* calls whose deadline passed before the agent took them */
	uint64_t epoch;		/* the segment's agent epoch */
	uint64_t door_attached; /* attaches the door granted */
	uint64_t door_bad_hello;   /* connections closed for a bad hello or stray bytes */
	uint64_t door_timeouts;	   /* connections closed for a hello not sent in time */
	uint64_t door_full;	   /* attaches refused: no free client entry */
	uint64_t door_evicted;	   /* handshakes dropped for newer ones (too many at once) */
	uint64_t door_hangups;	   /* attached clients whose connection closed */
	uint64_t door_uid_full;	   /* attaches refused: the uid holds its --clients-per-uid */
	uint64_t door_pid_unknown; /* attaches from outside our PID namespace (pid 0) */
	uint64_t door_owner_exits; /* owners whose exit a pidfd told (connection still open) */
	uint64_t ctl_denied;	   /* agent-ctl calls from clients not allowed to steer */
	uint64_t cut_off;	   /* clients disconnected for misbehaving (--client-strikes) */
	uint64_t strikes;	   /* misbehaviour attributed to one client (scored) */
	uint64_t unattributed;	   /* misbehaviour naming a client others could have forged */
	uint64_t door_cut_refused; /* attaches refused: the process was cut off recently */
	uint64_t door_no_memory;   /* attaches refused: no memory for the client's area */
	uint64_t pin_bytes;	   /* client slot bytes registered now, every link (agent/pin.h) */
	uint64_t pin_max_client;   /* --max-client-mem */
	uint64_t pin_max_total;	   /* --max-total-mem */
	uint64_t pin_refused_client; /* registrations over a client's limit */
	uint64_t pin_refused_total;  /* registrations over the total */
	uint32_t attached;	     /* live client entries */
	uint32_t inflight;	     /* calls handed to submit() and not completed yet */
};
void rdmem_frontdoor_get_stats(struct rdmem_frontdoor *fd, struct rdmem_frontdoor_stats *out);

/*
 * Formats the stats as text lines ("frontdoor.calls 12") or one JSON object
 * ({"frontdoor":{"calls":12,...}}) into buf, NUL-terminated: the frontdoor.*
 * entries of the agent's counter table (agent/stats.c, which implements
 * this). Returns the length, or -ENOBUFS when cap is too small.
 */
int rdmem_frontdoor_format_stats(struct rdmem_frontdoor *fd, int json, char *buf, size_t cap);

#endif
