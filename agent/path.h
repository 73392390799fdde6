/* path.h - rdmem_select_path(): the one place a call's path is chosen.
 *
 * Rules, in order (docs/architecture.md, "Paths"):
 *   1. a forced path wins (the call's own, then --force-path);
 *   2. RDMA unavailable, or its error count over --error-threshold -> TCP;
 *   3. server pressure: request ring over 90 % or object pool over 85 % -> TCP;
 *   4. request larger than the link's agreed request ring -> TCP;
 *   5. request >= --bulk-threshold -> BULK;
 *   6. expected reply >= --large-threshold, or above the agreed EAGER reply
 *      capacity (the server's --stage-bytes capped by our --resp-bytes) -> LAZY;
 *   7. else EAGER.
 * A reply whose size is not known in advance (a GET) is expected small; the
 * server turns it into a LAZY reply by itself when it does not fit.
 */
#ifndef RDMEM_AGENT_PATH_H
#define RDMEM_AGENT_PATH_H

#include <stdint.h>

#include "rdmem/util.h" /* rdmem_path_parse: --path and "path" control */
#include "rdmem/wire.h"

#define RDMEM_PRESSURE_RING_PCT	   90
#define RDMEM_PRESSURE_OBJPOOL_PCT 85

struct rdmem_path_config {
	uint8_t force;		  /* enum rdmem_path; AUTO lets the rules decide */
	uint32_t bulk_threshold;  /* bytes of request payload */
	uint32_t large_threshold; /* bytes of expected reply */
	uint32_t error_threshold; /* RDMA errors tolerated before TCP */
};

struct rdmem_path_state {
	uint8_t rdma_up;
	uint32_t rdma_errors;
	uint32_t ring_used_pct;
	uint32_t objpool_used_pct;
	/* The link's negotiated geometry (0: no link, or not known). */
	uint64_t max_request; /* request payload the server's ring can take */
	uint32_t eager_bytes; /* largest reply the server writes to a response slot */
};

struct rdmem_link;
/* Copies the negotiated geometry of link (NULL: none) into st. */
void rdmem_path_geometry(struct rdmem_path_state *st, const struct rdmem_link *link);

struct rdmem_path_call {
	uint8_t forced; /* the call's own forced path, or AUTO */
	uint64_t req_bytes;
	uint64_t expected_reply;
};

enum rdmem_path rdmem_select_path(const struct rdmem_path_config *cfg,
				  const struct rdmem_path_state *st,
				  const struct rdmem_path_call *call);

/* What a request will likely get back: known for LARGE_GET and ECHO, else 0. */
uint64_t rdmem_path_expected_reply(const struct rdmem_desc *req, const uint8_t *key);

#endif
