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

void rdmem_resp_mem_start(struct rdmem_resp_mem_conn *c, uint64_t now_ns)
{
	c->progress_ns = now_ns;
	c->moved = 0;
}

int rdmem_resp_mem_moved(struct rdmem_resp_mem_conn *c, uint64_t n, uint64_t now_ns)
{
	uint64_t since = now_ns > c->progress_ns ? now_ns - c->progress_ns : 0;
	/* What the floor rate asks for the time since the last progress; past a
	 * second, a second's worth. Without that cap an honest client idle an
	 * hour would have to move 118 MB before counting as moving; with it, a
	 * peer that stalls and then bursts still pays one second's worth per
	 * refresh, and in between its clock runs. */
	uint64_t due = since >= 1000000000ull ? RDMEM_RESP_PROGRESS_RATE
					      : since * RDMEM_RESP_PROGRESS_RATE / 1000000000ull;

	c->moved += n;
	if (c->moved < due)
		return 0;
	rdmem_resp_mem_start(c, now_ns);
	return 1;
}

uint64_t rdmem_resp_mem_score(const struct rdmem_resp_mem_conn *c, uint64_t now_ns)
{
	uint64_t ms = now_ns > c->progress_ns ? (now_ns - c->progress_ns) / 1000000u : 0;

	/* Capped: past it a connection is simply stalled, and among those the
	 * one holding most goes first (one close frees the most), rather than
	 * dozens of long-idle pooled clients of a few KiB each before one large
	 * connection stalled a little less long. KiB x ms: at most 2^26 x 2^14,
	 * no overflow. */
	ms = RDMEM_MIN(ms, (uint64_t)RDMEM_RESP_STALL_CAP_MS);
	return ((c->bytes + 1023) >> 10) * ms;
}

int rdmem_resp_mem_before(const struct rdmem_resp_mem_conn *a, const struct rdmem_resp_mem_conn *b,
			  uint64_t now_ns)
{
	uint64_t sa = rdmem_resp_mem_score(a, now_ns), sb = rdmem_resp_mem_score(b, now_ns);

	/* Equal scores (typically 0: every candidate moved within the last
	 * millisecond): the largest, as before ranking by progress. */
	return sa > sb || (sa == sb && a->bytes > b->bytes);
}
