/* share.h - how the RDMA listener shares --max-sessions among peer
 * addresses: sessions counted per address (--max-sessions-per-addr), the
 * guard each open session reports through (session.h), the reclaim of
 * sessions that never sent, and, when the server is full, which session
 * gives its place to a peer of an address holding fewer (docs/architecture.md,
 * "Server connection lifecycle against hostile peers").
 *
 * The listener thread alone calls these; workers touch only the guards'
 * atomics (session.c) and the counts' decrement (session close).
 */
#ifndef RDMEM_SERVER_SHARE_H
#define RDMEM_SERVER_SHARE_H

#include <stdint.h>

#include "rdmem/netaddr.h"
#include "server/session.h"

#define RDMEM_SHARE_KEY RDMEM_ADDR_GROUP_MAX

struct rdmem_share;

enum rdmem_share_verdict {
	RDMEM_SHARE_OPEN,    /* a session may open for the address */
	RDMEM_SHARE_FULL,    /* --max-sessions taken, nobody gives way */
	RDMEM_SHARE_PARK,    /* full; a place is being made for it: keep the request */
	RDMEM_SHARE_ADDR,    /* --max-sessions-per-addr taken by the address */
	RDMEM_SHARE_CLOSING, /* a closing session still holds the entry it needs */
};

/* max_per_addr 0: no limit of its own; grace_ms 0: 5000. */
int rdmem_share_create(uint32_t max_sessions, uint32_t max_per_addr, uint32_t grace_ms,
		       struct rdmem_share **out);
void rdmem_share_destroy(struct rdmem_share *sh);

/* Whether a session may open for address key with `open` places taken now
 * (sessions, and a parked request's). FULL and PARK also start the reclaim
 * of sessions that never sent, ADDR that of the address's own; PARK (only
 * when can_park) means a place is being made: nudge the workers now, keep
 * the request until open drops, and let nobody else have the place
 * meanwhile. */
enum rdmem_share_verdict rdmem_share_admit(struct rdmem_share *sh, const char *key, uint32_t open,
					   int can_park, uint64_t now);

/* A session opened for key after rdmem_share_admit said OPEN: its guard
 * (for rdmem_session_set_guard), counted for key. Never NULL then. */
struct rdmem_session_guard *rdmem_share_attach(struct rdmem_share *sh, const char *key,
					       uint64_t now);

#endif
