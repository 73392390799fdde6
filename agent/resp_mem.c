/* resp_mem.c - the RESP front end's memory bounds and their running total
 * (agent/resp_mem.h). */
#include "agent/resp_mem.h"

#include "rdmem/util.h"
#include "rdmem/wire.h"

uint64_t rdmem_resp_mem_input_limit(uint32_t max_value)
{
	return 4 * (uint64_t)RDMEM_MAX(max_value, RDMEM_MAX_KEY) + (1u << 20);
}

uint64_t rdmem_resp_mem_queued_limit(uint32_t max_value)
{
	return RDMEM_MAX(rdmem_resp_mem_input_limit(max_value), (uint64_t)RDMEM_RESP_QUEUED_SOFT);
}

uint64_t rdmem_resp_mem_output_limit(uint32_t max_value, uint32_t slots)
{
	uint64_t bulk = RDMEM_MAX(max_value, RDMEM_MAX_KEY);

	/* Unread output stops new calls at OUT_SOFT, but the replies of the
	 * calls already in flight (one a slot) are still encoded, and the
	 * buffer grows by doubling: its capacity may reach twice the bytes. */
	return 2 * (RDMEM_RESP_OUT_SOFT + (uint64_t)slots * (bulk + RDMEM_RESP_REPLY_OVERHEAD));
}

uint64_t rdmem_resp_mem_floor(uint32_t max_value, uint32_t slots)
{
	uint64_t in = rdmem_resp_mem_input_limit(max_value);

	/* Input; queued commands up to the pause mark, which is checked before
	 * a command is parsed, so the last one may pass it by a whole input;
	 * output; the struct and the queue's bookkeeping. */
	return in + rdmem_resp_mem_queued_limit(max_value) + in +
	       rdmem_resp_mem_output_limit(max_value, slots) + RDMEM_RESP_CONN_SLACK;
}

void rdmem_resp_mem_set(struct rdmem_resp_mem *m, struct rdmem_resp_mem_conn *c, uint64_t bytes)
{
	uint64_t *sum = c->dying ? &m->dying : &m->live;

	*sum = *sum - c->bytes + bytes;
	c->bytes = bytes;
}

void rdmem_resp_mem_dying(struct rdmem_resp_mem *m, struct rdmem_resp_mem_conn *c)
{
	if (c->dying)
		return;
	m->live -= c->bytes;
	m->dying += c->bytes;
	c->dying = 1;
}

int rdmem_resp_mem_over(const struct rdmem_resp_mem *m, uint64_t budget)
{
	return m->live > budget;
}
