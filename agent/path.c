/* path.c - the path selector's rule table. */
#include "agent/path.h"

#include <errno.h>
#include <string.h>

#include "agent/link.h"
#include "rdmem/content.h"

enum rdmem_path rdmem_select_path(const struct rdmem_path_config *cfg,
				  const struct rdmem_path_state *st,
				  const struct rdmem_path_call *call)
{
	if (call->forced != RDMEM_PATH_AUTO)
		return (enum rdmem_path)call->forced;
	if (cfg->force != RDMEM_PATH_AUTO)
		return (enum rdmem_path)cfg->force;
	if (!st->rdma_up || st->rdma_errors > cfg->error_threshold)
		return RDMEM_PATH_TCP;
	if (st->ring_used_pct > RDMEM_PRESSURE_RING_PCT ||
	    st->objpool_used_pct > RDMEM_PRESSURE_OBJPOOL_PCT)
		return RDMEM_PATH_TCP;
	if (st->max_request && call->req_bytes > st->max_request)
		return RDMEM_PATH_TCP;
	if (call->req_bytes >= cfg->bulk_threshold)
		return RDMEM_PATH_BULK;
	if (call->expected_reply >= cfg->large_threshold ||
	    (st->max_request && call->expected_reply > st->eager_bytes))
		return RDMEM_PATH_LAZY;
	return RDMEM_PATH_EAGER;
}

void rdmem_path_geometry(struct rdmem_path_state *st, const struct rdmem_link *link)
{
	st->max_request = link ? link->max_request : 0;
	st->eager_bytes = link ? link->w.eager_bytes : 0;
}

uint64_t rdmem_path_expected_reply(const struct rdmem_desc *req, const uint8_t *key)
{
	uint64_t size;

	switch (req->op) {
	case RDMEM_OP_ECHO:
		return req->val_len;
	case RDMEM_OP_LARGE_GET:
		return rdmem_big_parse((const char *)key, req->key_len, &size) ? 0 : size;
	default:
		return 0;
	}
}
