/* test_call_ident.c - the agent's call ids for exactly-once (agent/call.h)
 * against the server's window (server/dedup.c): what a BIND's floor covers.
 *
 * A server with no window for the agent (a restart, or it forgot the agent)
 * answers STALE every id below the BIND's aux, the agent's newest sent id
 * plus one. A call that waited in a queue while newer ids went out must not
 * be below that floor when it is first sent: it never ran anywhere, and an
 * app would get "may have run" for a call that never left. */
#include <string.h>

#include "agent/call.h"
#include "check.h"
#include "server/dedup.h"

static struct rdmem_agent_ident ident;

static void tag(struct rdmem_agent_call *c, uint16_t op)
{
	memset(c, 0, sizeof(*c));
	c->req.op = op;
	rdmem_agent_ident_tag(&ident, c);
}

static uint32_t bind_aux(void)
{
	struct rdmem_desc d;

	rdmem_agent_ident_bind_desc(&ident, &d);
	return d.aux;
}

/* Runs id in the window; returns the verdict. */
static enum rdmem_dedup_verdict run(struct rdmem_dedup *d, struct rdmem_dedup_agent *a, uint32_t id)
{
	struct rdmem_dedup_result res = { 0, 0, { 0, 0, 0 } }, rec;
	enum rdmem_dedup_verdict v;
	uint64_t ext;

	v = rdmem_dedup_begin(d, a, id, &ext, &rec);
	if (v == RDMEM_DEDUP_RUN)
		rdmem_dedup_end(d, a, ext, &res);
	return v;
}

static void test_untracked_ops_carry_no_id(void)
{
	struct rdmem_agent_call c;

	tag(&c, RDMEM_OP_KV_GET);
	CHECK_EQ(c.req.flags & RDMEM_F_CALL_ID, 0);
	rdmem_agent_ident_sent(&ident, &c);
	CHECK_EQ(atomic_load(&ident.sent_any), 0);
	CHECK_EQ(bind_aux(), RDMEM_AGENT_FIRST_CALL_ID);
}

static void test_queued_call_is_renumbered_above_the_floor(void)
{
	struct rdmem_dedup_config cfg = { 64, 4, 1000 };
	struct rdmem_agent_call waited, fast, retried;
	struct rdmem_dedup_agent *a;
	struct rdmem_dedup *d = NULL;
	uint32_t first_id, floor;

	REQUIRE(rdmem_dedup_create(&cfg, &d) == 0);
	tag(&waited, RDMEM_OP_KV_PUT);
	tag(&fast, RDMEM_OP_KV_DEL);
	first_id = waited.req.aux;
	CHECK(fast.req.aux == first_id + 1);
	/* The newer call goes first; the older one waited (a full TCP window). */
	rdmem_agent_ident_sent(&ident, &fast);
	CHECK_EQ(fast.req.aux, first_id + 1);
	/* The server restarts here: the new run's window starts at the floor. */
	floor = bind_aux();
	CHECK_EQ(floor, first_id + 2);
	REQUIRE(rdmem_dedup_bind(d, 77, floor, "a", &a) == 0);
	/* The retry of the call that had left is of unknown outcome there. */
	rdmem_agent_ident_sent(&ident, &fast);
	CHECK_EQ(fast.req.aux, first_id + 1);
	CHECK_EQ(run(d, a, fast.req.aux), RDMEM_DEDUP_STALE);
	/* The call that never left goes out with a fresh id, and runs. */
	rdmem_agent_ident_sent(&ident, &waited);
	CHECK(waited.req.aux >= floor);
	CHECK_EQ(run(d, a, waited.req.aux), RDMEM_DEDUP_RUN);
	/* Its own retry keeps that id: answered from the record, not run. */
	retried = waited;
	rdmem_agent_ident_sent(&ident, &retried);
	CHECK_EQ(retried.req.aux, waited.req.aux);
	CHECK_EQ(run(d, a, retried.req.aux), RDMEM_DEDUP_REPLAY);
	CHECK_EQ(bind_aux(), waited.req.aux + 1);
	rdmem_dedup_unbind(d, a);
	rdmem_dedup_destroy(d);
}

/* A post that took nothing (ring or window full, a held link) leaves the
 * call unsent: it may still be renumbered at its real first send. A post
 * that may have reached the server pins its id for every retry. */
static void test_refused_post_leaves_the_call_unsent(void)
{
	struct rdmem_agent_call refused, newer, posted;
	uint8_t was;
	uint32_t floor;

	tag(&refused, RDMEM_OP_KV_PUT);
	tag(&newer, RDMEM_OP_KV_PUT);
	tag(&posted, RDMEM_OP_KV_DEL);
	was = rdmem_agent_ident_sent(&ident, &refused);
	rdmem_agent_ident_unsent(&refused, was); /* the ring was full */
	rdmem_agent_ident_sent(&ident, &newer);
	floor = bind_aux();
	rdmem_agent_ident_sent(&ident, &refused);
	CHECK(refused.req.aux >= floor);
	/* Posted, then its link failed: the retry keeps the id it went out with. */
	rdmem_agent_ident_sent(&ident, &posted);
	floor = posted.req.aux;
	rdmem_agent_ident_sent(&ident, &newer);
	rdmem_agent_ident_sent(&ident, &posted);
	CHECK_EQ(posted.req.aux, floor);
}

static void test_in_order_calls_keep_their_ids(void)
{
	struct rdmem_agent_call c[3];
	uint32_t ids[3];
	int i;

	for (i = 0; i < 3; i++) {
		tag(&c[i], RDMEM_OP_KV_PUT);
		ids[i] = c[i].req.aux;
	}
	for (i = 0; i < 3; i++) {
		rdmem_agent_ident_sent(&ident, &c[i]);
		CHECK_EQ(c[i].req.aux, ids[i]);
	}
	CHECK_EQ(bind_aux(), ids[2] + 1);
}

int main(void)
{
	atomic_store(&ident.next_call_id, RDMEM_AGENT_FIRST_CALL_ID);
	ident.agent_id = 77;
	RUN(test_untracked_ops_carry_no_id);
	RUN(test_queued_call_is_renumbered_above_the_floor);
	RUN(test_refused_post_leaves_the_call_unsent);
	RUN(test_in_order_calls_keep_their_ids);
	return check_done();
}
