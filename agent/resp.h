/* resp.h - the agent's Redis protocol front end (docs/architecture.md, "The
 * Redis protocol front end (agent/resp.c)"): one thread serving RESP2/RESP3
 * on a loopback TCP port and/or a Unix socket, carrying every data command
 * as librdmem calls on the agent's own front door. */
#ifndef RDMEM_AGENT_RESP_H
#define RDMEM_AGENT_RESP_H

#include <stdint.h>

#define RDMEM_RESP_DEFAULT_MAX_CONNS 1024u
/* Seconds of silence after which a connection may be replaced at the cap. */
#define RDMEM_RESP_DEFAULT_IDLE_EVICT 10u
/* Bytes all RESP connections may hold together (--resp-max-memory): what
 * 18 connections at their per-connection bounds (about 14 MiB each at the
 * default --max-value) hold, or some thousand honest ones with small
 * pipelines; a hostile peer's 1,024 connections would otherwise hold over
 * 10 GiB. Range: RDMEM_RESP_MIN_MAX_MEMORY to RDMEM_RESP_MAX_MAX_MEMORY. */
#define RDMEM_RESP_DEFAULT_MAX_MEMORY (256ull << 20)
#define RDMEM_RESP_MIN_MAX_MEMORY     (16ull << 20)
#define RDMEM_RESP_MAX_MAX_MEMORY     (64ull << 30)

struct rdmem_resp_config {
	const char *shm_name; /* the front door to attach to as a client */
	const char *bind;     /* numeric address for the TCP port; NULL: 127.0.0.1 */
	uint16_t port;	      /* 0: no TCP listener */
	const char *socket;   /* Unix socket path (mode 0660); NULL: none */
	uint32_t max_conns;   /* connections served at once; more are refused */
	/* At max_conns, a new connection replaces the one silent longest when
	 * it has been silent this many seconds (0: never): silent connections,
	 * or half a command then nothing, cannot lock everyone out. */
	uint32_t idle_evict_s;
	/* Bytes every connection together may hold (input, queued arguments,
	 * output); over it the connection holding the most bytes longest
	 * without progress is closed (agent/resp_mem.h). 0: the
	 * default, raised to rdmem_resp_mem_floor() when that is larger. */
	uint64_t max_memory;
};

/* Counters of the RESP front end (one writer: its thread). */
struct rdmem_resp_stats {
	uint64_t conns;		  /* connections accepted */
	uint64_t clients;	  /* connections open now */
	uint64_t cmds;		  /* commands answered */
	uint64_t errors;	  /* error replies */
	uint64_t protocol_errors; /* connections closed for malformed input */
	uint64_t refused;	  /* connections refused at --resp-max-conns */
	uint64_t paused;	  /* times a connection's input was held back (backpressure) */
	uint64_t evicted;	  /* silent connections closed for a new one at the cap */
	uint64_t evicted_memory;  /* connections closed at --resp-max-memory */
	uint64_t memory;	  /* bytes the connections hold now (a gauge) */
};

struct rdmem_resp;

/* Opens the listeners, attaches to the front door and starts the thread. */
int rdmem_resp_start(const struct rdmem_resp_config *cfg, struct rdmem_resp **out);
/* Stops the thread, waits for its calls in flight, closes everything (NULL: no-op). */
void rdmem_resp_stop(struct rdmem_resp *r);
/* The process's RESP counters (zero when no RESP front end runs). */
void rdmem_resp_stats_read(struct rdmem_resp_stats *o);

#endif
