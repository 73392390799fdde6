/* dedup.h - exactly-once for non-idempotent calls (PUT, DEL, IMAGE_CHUNK,
 * RECLAIM): a per-agent window of the calls the server ran, keyed by the
 * agent's identity (a random 64-bit id the agent binds to each of its RDMA
 * sessions and TCP connections with RDMEM_OP_BIND) and the call id the agent
 * put in the request (desc.aux with RDMEM_F_CALL_ID). A retry of a call in
 * the window is answered with the recorded result instead of running again;
 * one older than the window is answered RDMEM_S_STALE, never run again.
 * See docs/architecture.md, "Exactly-once calls".
 *
 * Thread-safe: RDMA workers and the TCP loop serve one agent's calls at once.
 */
#ifndef RDMEM_SERVER_DEDUP_H
#define RDMEM_SERVER_DEDUP_H

#include <stdint.h>

#define RDMEM_DEDUP_DEFAULT_WINDOW  4096u  /* calls remembered per agent */
#define RDMEM_DEDUP_MIN_WINDOW	    16u	   /* power of two, at least this */
#define RDMEM_DEDUP_MAX_WINDOW	    65536u /* ... and at most this */
#define RDMEM_DEDUP_DEFAULT_AGENTS  256u   /* agents remembered at once */
#define RDMEM_DEDUP_MAX_AGENTS	    65536u
#define RDMEM_DEDUP_DEFAULT_IDLE_MS 300000u /* an agent with no connection is forgotten */
#define RDMEM_DEDUP_WAIT_MS	    10000u  /* a retry waits this long for its first run */
/* A window whose agent left is kept this long (or --dedup-idle if shorter)
 * in preference to others (dedup.h, rdmem_dedup_bind): its redial and
 * retries come. */
#define RDMEM_DEDUP_GRACE_MS 30000u

struct rdmem_dedup_config {
	uint32_t window;     /* power of two in [MIN_WINDOW, MAX_WINDOW] */
	uint32_t max_agents; /* 1..MAX_AGENTS */
	uint32_t idle_ms;    /* >= 1 */
};
#define RDMEM_DEDUP_DEFAULTS                                                                       \
	{                                                                                          \
		RDMEM_DEDUP_DEFAULT_WINDOW, RDMEM_DEDUP_DEFAULT_AGENTS,                            \
		    RDMEM_DEDUP_DEFAULT_IDLE_MS                                                    \
	}

/* What a replay hands back: everything a non-idempotent op puts in its reply
 * (none of them returns value bytes). */
struct rdmem_dedup_result {
	uint16_t status;
	uint32_t aux;
	uint64_t args[3];
};

enum rdmem_dedup_verdict {
	RDMEM_DEDUP_RUN,    /* new call: run it, then rdmem_dedup_end() */
	RDMEM_DEDUP_REPLAY, /* ran before: answer with *rec */
	RDMEM_DEDUP_STALE,  /* older than the window: outcome unknown here */
	RDMEM_DEDUP_BUSY,   /* its first run did not end within RDMEM_DEDUP_WAIT_MS */
};

struct rdmem_dedup_stats {
	uint64_t agents;       /* agents remembered now */
	uint64_t bytes;	       /* memory their windows take */
	uint64_t binds;	       /* connections bound */
	uint64_t bind_refused; /* table full of agents with live connections */
	uint64_t executed;     /* tracked calls run */
	uint64_t replayed;     /* retries answered from the record */
	uint64_t waited;       /* retries that waited for their first run to end */
	uint64_t stale;	       /* retries older than the window (or than a lost table) */
	uint64_t expired;      /* agents forgotten: idle, or evicted for a new one */
};

struct rdmem_dedup;
struct rdmem_dedup_agent;

int rdmem_dedup_create(const struct rdmem_dedup_config *cfg, struct rdmem_dedup **out);
void rdmem_dedup_destroy(struct rdmem_dedup *d);

/*
 * Binds one connection to agent_id (non-zero), from peer address addr (the
 * rdmem_addr_group key; NULL: ""). next_id is the first id the
 * agent cannot have sent yet. When this table has no window for the agent,
 * the new one starts there: every id below next_id is of unknown outcome,
 * answered STALE. Such an id may have run here before the window was
 * forgotten, or on a server run this one replaced (a restart), where what it
 * did may have been seen (a reader saw a DEL's key gone) although the
 * restart undid it: run again, a DEL that deleted would answer "not found"
 * and a PUT's lost value would come back. An agent's first BIND names its
 * first id: nothing is below it.
 * Returns 0 or -ENOSPC.
 *
 * A new agent when max_agents are remembered takes the window of an agent
 * without connections, the first kind there is of: one with no completed
 * call; one left longer than RDMEM_DEDUP_GRACE_MS ago; one of its own
 * address's or of an address holding at least two windows more than its
 * own; any (dedup.c, dedup_cost). Within a kind, of the address holding
 * the most, the least recently used. -ENOSPC only when every window has a
 * connection. So a peer binding agent ids by the hundred replaces its own
 * windows, not those of agents that just left (whose retries would then be
 * STALE), and a newcomer is never refused while a window can be taken.
 */
int rdmem_dedup_bind(struct rdmem_dedup *d, uint64_t agent_id, uint32_t next_id, const char *addr,
		     struct rdmem_dedup_agent **out);
/* Random, non-zero, fixed for this table's life: names this server run. */
uint64_t rdmem_dedup_instance(const struct rdmem_dedup *d);
/* The connection closed: its agent may be forgotten once idle. */
void rdmem_dedup_unbind(struct rdmem_dedup *d, struct rdmem_dedup_agent *a);

/* Looks call id up; with RUN the caller owns *ext until rdmem_dedup_end(). */
enum rdmem_dedup_verdict rdmem_dedup_begin(struct rdmem_dedup *d, struct rdmem_dedup_agent *a,
					   uint32_t id, uint64_t *ext,
					   struct rdmem_dedup_result *rec);
void rdmem_dedup_end(struct rdmem_dedup *d, struct rdmem_dedup_agent *a, uint64_t ext,
		     const struct rdmem_dedup_result *res);

/* Forgets agents without connections idle longer than idle_ms. */
void rdmem_dedup_expire(struct rdmem_dedup *d, uint64_t now_ns);
/* When the next agent without connections is forgotten if it stays so
 * (UINT64_MAX: none). Only an unbind makes an agent expirable. */
uint64_t rdmem_dedup_next_expiry(struct rdmem_dedup *d);
void rdmem_dedup_get_stats(struct rdmem_dedup *d, struct rdmem_dedup_stats *out);
const struct rdmem_dedup_config *rdmem_dedup_get_config(const struct rdmem_dedup *d);

#endif
