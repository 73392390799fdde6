/* router.h - the agent's servers: one backend (session actor + TCP actor)
 * per server, and the front door's submit hook that sends each call to the
 * server its key lives on (agent/route.h). A call with keys on several
 * servers (MGET) is split into one part per server and merged back in
 * request order; AGENT_STATS and AGENT_CTL go to every server. The server
 * list comes from -s or --servers-file and may change while calls run
 * (rdmem_router_reload: SIGHUP, `rdmem agent-ctl reload`).
 * docs/architecture.md, "Many servers".
 */
#ifndef RDMEM_AGENT_ROUTER_H
#define RDMEM_AGENT_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "agent/call.h"
#include "agent/frontdoor.h"
#include "agent/session.h"
#include "agent/tcp_actor.h"

/* Servers one agent may serve: each costs two threads and a connection. */
#define RDMEM_ROUTER_MAX_SERVERS 64
/* "host:port" as the list spells it: the name keys are hashed against. */
#define RDMEM_ROUTER_NAME_MAX 280

/* One server as the list names it. */
struct rdmem_router_entry {
	char name[RDMEM_ROUTER_NAME_MAX]; /* "host:port", "[v6]:port", or "host" */
	char host[RDMEM_ROUTER_NAME_MAX];
	uint16_t port, tcp_port;
};

/* What every backend shares; per-server fields (server, ports, fabric) are
 * filled in from its entry. */
struct rdmem_router_config {
	struct rdmem_agent_config session;  /* .server/.port/.tcp_port/.fabric: per entry */
	struct rdmem_tcp_actor_config tcp;  /* .host/.port: per entry */
	int fabric_kind;		    /* --fabric: RDMEM_FAB_*, 0 for TCP; -1: per server */
	const char *servers_file;	    /* --servers-file, NULL: the list came from -s */
	uint16_t default_port, default_tcp; /* -p and --tcp-port (0: port + 1) */
};

struct rdmem_router;

/*
 * Parses a server list: comma- (or, from a file, newline-) separated
 * host[:port] entries; '#' starts a comment in a file. Fills out[] and *n.
 * why gets a message naming the entry and the limit on error (-EINVAL).
 */
int rdmem_router_parse_list(const char *text, int file, uint16_t port, uint16_t tcp_port,
			    struct rdmem_router_entry *out, uint32_t *n, char *why, size_t why_cap);

/* Starts one backend per entry of list (n >= 1). */
int rdmem_router_start(const struct rdmem_router_config *cfg, struct rdmem_frontdoor *fd,
		       const struct rdmem_router_entry *list, uint32_t n,
		       struct rdmem_router **out);
/* Every backend stopped: each call it held is answered first. */
void rdmem_router_stop(struct rdmem_router *r);
/* The front door's submit callback (front-door actor thread). */
void rdmem_router_submit(void *ctx, struct rdmem_agent_call *call);
/* The front door's batch ended (rdmem_frontdoor_on_batch_end): every session
 * gives back what it held for it, and the front door leaves the table. */
void rdmem_router_batch_end(void *ctx);
/* The front door's release callback: every backend lets go of the area. */
void rdmem_router_released(void *ctx, uint32_t client);
/* The pinned-memory budget's waker (agent/pin.h): wakes every session. */
void rdmem_router_pin_shed(void *ctx);

/*
 * Re-reads --servers-file and makes the backends match it: servers kept
 * keep their sessions, new ones start, removed ones stop (calls they hold
 * fail with RDMEM_S_SHUTDOWN). msg says what happened. Main thread only;
 * a failed reload leaves the running list as it was.
 */
int rdmem_router_reload(struct rdmem_router *r, char *msg, size_t cap);
/* The /metrics page of every backend (an rdmem_metrics_render_fn). */
int rdmem_router_metrics_render(void *ctx, char *buf, size_t cap);
/* How many servers, and their names, comma-separated (the ready line). */
uint32_t rdmem_router_servers(struct rdmem_router *r, char *list, size_t cap);
/* Reads a --servers-file (rdmem_router_parse_list's rules). */
int rdmem_router_read_servers(const char *path, uint16_t port, uint16_t tcp,
			      struct rdmem_router_entry *out, uint32_t *n, char *why, size_t cap);

#endif
