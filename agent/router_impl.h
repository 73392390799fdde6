/* router_impl.h - what router.c (the table, reload) and router_fan.c (calls
 * split across servers) share. Not for other files. */
#ifndef RDMEM_AGENT_ROUTER_IMPL_H
#define RDMEM_AGENT_ROUTER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "agent/metrics.h"
#include "agent/pin.h"
#include "agent/router.h"

/* A --servers-file longer than this is refused (64 servers fit many times). */
#define RDMEM_ROUTER_FILE_MAX (64u << 10)
/* Bytes split calls may hold at once in copies of their requests and of
 * their parts' replies (an MGET's are up to --max-value each); over it a
 * split call fails with RDMEM_S_BUSY instead of growing the agent. */
#define RDMEM_ROUTER_HEAP_MAX (64ull << 20)

struct rdmem_router_backend {
	struct rdmem_router_entry entry;
	uint64_t seed; /* rdmem_route_server_seed(entry.name) */
	struct rdmem_tcp_actor *tcp;
	struct rdmem_agent_session *session;
	struct rdmem_agent_metrics_src msrc;
};

/* Immutable once published: a reload publishes a new one. */
struct rdmem_router_table {
	uint32_t n;
	struct rdmem_router_backend *b[RDMEM_ROUTER_MAX_SERVERS];
	uint64_t seeds[RDMEM_ROUTER_MAX_SERVERS];
};

struct rdmem_router {
	struct rdmem_router_config cfg;
	struct rdmem_frontdoor *fd;
	_Atomic(struct rdmem_router_table *) table;
	atomic_uint readers; /* threads between rdmem_router_enter() and _leave() */
	/* The table the front door's batch is in (front-door thread only). */
	struct rdmem_router_table *batch;
	pthread_mutex_t lock; /* reload, and readers of backends' telemetry */
	/* An `agent-ctl reload` the main thread has yet to run and answer. */
	_Atomic(struct rdmem_agent_call *) reload_call;
	atomic_uint_fast64_t heap;	  /* bytes split calls hold (RDMEM_ROUTER_HEAP_MAX) */
	struct rdmem_pin_waker pin_waker; /* wakes every session to shed (agent/pin.h) */
	struct rdmem_router_counters {
		/* relaxed atomics: counts, read by AGENT_STATS from any thread */
		atomic_uint_fast64_t splits; /* calls split across servers */
		atomic_uint_fast64_t parts;  /* parts sent, reruns included */
		atomic_uint_fast64_t
		    reruns;		   /* MGET parts run again alone: values over their share */
		atomic_uint_fast64_t busy; /* split calls refused: RDMEM_ROUTER_HEAP_MAX reached */
		atomic_uint_fast64_t reloads, reload_failures;
	} cnt;
};

static inline void rdmem_router_count(atomic_uint_fast64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* The table as it is now; valid until rdmem_router_leave(). Any thread. */
struct rdmem_router_table *rdmem_router_enter(struct rdmem_router *r);
void rdmem_router_leave(struct rdmem_router *r);
/* The index of the server a key goes to. */
uint32_t rdmem_router_pick_key(const struct rdmem_router_table *t, const void *key, uint32_t len);

/* MGET with keys on several servers, AGENT_STATS, AGENT_CTL: one part per
 * server, answered once every part is (router_fan.c). Front-door thread. */
void rdmem_router_fan_out(struct rdmem_router *r, struct rdmem_router_table *t,
			  struct rdmem_agent_call *call);

/* `agent-ctl reload`: the main thread runs it (it stops sessions, which no
 * actor thread may do), so the call waits for rdmem_router_reload(). */
int rdmem_router_ctl_is_reload(const struct rdmem_agent_call *call);
void rdmem_router_ask_reload(struct rdmem_router *r, struct rdmem_agent_call *call);
void rdmem_router_answer_reload(struct rdmem_router *r, uint16_t status, const char *msg);
/* The parked call, taken: a reload takes it before it reads the file, so
 * its answer covers every edit made before the client asked. */
struct rdmem_agent_call *rdmem_router_take_reload(struct rdmem_router *r);
void rdmem_router_answer_call(struct rdmem_router *r, struct rdmem_agent_call *call,
			      uint16_t status, const char *msg);

#endif
