/* frontdoor.h - the agent's front-door actor: it owns the SHM segment that
 * local apps attach to, drains the MPSC request ring, validates each entry
 * and slot, and hands good calls to the session actor. Replies go back into
 * the caller's slot through rdmem_frontdoor_complete(), from any actor.
 */
#ifndef RDMEM_AGENT_FRONTDOOR_H
#define RDMEM_AGENT_FRONTDOOR_H

#include <stdint.h>
#include <sys/types.h>

#include "agent/call.h"

struct rdmem_frontdoor;

struct rdmem_frontdoor_config {
	const char *shm_name;	   /* "/rdmem" */
	int reset;		   /* --shm-reset: take over a segment we did not create */
	gid_t group;		   /* segment group (mode 0660); (gid_t)-1 keeps ours */
	uint32_t clients;	   /* client-table entries */
	uint32_t slots;		   /* slots per client (<= 64) */
	uint32_t max_value;	   /* largest value a call may carry; sizes slot payloads */
	int busy_poll;		   /* never block when idle */
};

/* Called on the front-door thread for each valid call; must not block. */
typedef void (*rdmem_frontdoor_submit_fn)(void *ctx, struct rdmem_agent_call *call);

int rdmem_frontdoor_create(const struct rdmem_frontdoor_config *cfg, struct rdmem_frontdoor **out);
int rdmem_frontdoor_start(struct rdmem_frontdoor *fd, rdmem_frontdoor_submit_fn submit, void *ctx);
/* Stops the actor, marks the segment closed (attached clients see it), unlinks it. */
void rdmem_frontdoor_destroy(struct rdmem_frontdoor *fd);

/*
 * Publishes the reply of call into its slot and wakes the client. Safe from
 * any thread; a call whose client died or gave up is dropped and its slot
 * freed. The call must not be touched afterwards.
 */
void rdmem_frontdoor_complete(struct rdmem_frontdoor *fd, struct rdmem_agent_call *call,
			      const struct rdmem_agent_reply *rep);

/* The mapped segment, so the agent can register it with the fabric (zero-copy). */
void *rdmem_frontdoor_segment(struct rdmem_frontdoor *fd, size_t *len);

struct rdmem_frontdoor_stats {
	uint64_t calls;	       /* entries taken from the ring */
	uint64_t local_pings;  /* answered by the front door itself */
	uint64_t bad_entries;  /* refused: wrong client, slot, state, length, op */
	uint64_t skipped;      /* ring positions skipped after a dead producer */
	uint64_t dead_clients; /* client entries reclaimed */
	uint64_t dropped;      /* completions for clients that died or gave up */
	uint32_t attached;     /* live client entries */
};
void rdmem_frontdoor_get_stats(struct rdmem_frontdoor *fd, struct rdmem_frontdoor_stats *out);

#endif
