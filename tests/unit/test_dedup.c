/* test_dedup.c - the server's per-agent dedup window (server/dedup.c):
 * replay, the window edge, a retry racing its first run, 32-bit id wrap,
 * the agents cap, idle expiry and a returning agent's floor. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "rdmem/util.h"
#include "server/dedup.h"

static struct rdmem_dedup *make(uint32_t window, uint32_t agents, uint32_t idle_ms)
{
	struct rdmem_dedup_config cfg = { window, agents, idle_ms };
	struct rdmem_dedup *d = NULL;

	return rdmem_dedup_create(&cfg, &d) == 0 ? d : NULL;
}

/* Runs call id through begin/end with result status st; returns the verdict. */
static enum rdmem_dedup_verdict run(struct rdmem_dedup *d, struct rdmem_dedup_agent *a, uint32_t id,
				    uint16_t st, struct rdmem_dedup_result *rec)
{
	struct rdmem_dedup_result res = { st, id * 3, { id, 0, 0 } };
	enum rdmem_dedup_verdict v;
	uint64_t ext;

	v = rdmem_dedup_begin(d, a, id, &ext, rec);
	if (v == RDMEM_DEDUP_RUN)
		rdmem_dedup_end(d, a, ext, &res);
	return v;
}

static void test_config_checked(void)
{
	CHECK(make(0, 1, 1) == NULL);
	CHECK(make(100, 1, 1) == NULL); /* not a power of two */
	CHECK(make(RDMEM_DEDUP_MAX_WINDOW * 2, 1, 1) == NULL);
	CHECK(make(64, 0, 1) == NULL);
	CHECK(make(64, 1, 0) == NULL);
}

static void test_replay_and_window_edge(void)
{
	struct rdmem_dedup *d = make(16, 4, 60000);
	struct rdmem_dedup_agent *a;
	struct rdmem_dedup_result rec;
	uint32_t i;

	REQUIRE(d);
	REQUIRE(rdmem_dedup_bind(d, 7, 1, "a", &a) == 0);
	for (i = 1; i <= 20; i++)
		CHECK_EQ(run(d, a, i, i % 3, &rec), RDMEM_DEDUP_RUN);
	/* 5..20 are the last 16: replayed with their own result. */
	CHECK_EQ(run(d, a, 5, 0, &rec), RDMEM_DEDUP_REPLAY);
	CHECK_EQ(rec.status, 5 % 3);
	CHECK_EQ(rec.aux, 15);
	CHECK_EQ(rec.args[0], 5);
	CHECK_EQ(run(d, a, 20, 0, &rec), RDMEM_DEDUP_REPLAY);
	/* 1..4 left it. */
	CHECK_EQ(run(d, a, 4, 0, &rec), RDMEM_DEDUP_STALE);
	CHECK_EQ(run(d, a, 1, 0, &rec), RDMEM_DEDUP_STALE);
	rdmem_dedup_unbind(d, a);
	rdmem_dedup_destroy(d);
}

struct racer {
	struct rdmem_dedup *d;
	struct rdmem_dedup_agent *a;
	enum rdmem_dedup_verdict v;
	struct rdmem_dedup_result rec;
	uint64_t waited_ns;
};

static void *retry_thread(void *arg)
{
	struct racer *r = arg;
	uint64_t t0 = rdmem_now_ns(), ext;

	r->v = rdmem_dedup_begin(r->d, r->a, 9, &ext, &r->rec);
	r->waited_ns = rdmem_now_ns() - t0;
	return NULL;
}

/* A retry arriving while the first run executes waits for it, then replays. */
static void test_retry_waits_for_running_call(void)
{
	struct rdmem_dedup_result res = { 4, 99, { 1, 2, 3 } }, rec;
	struct rdmem_dedup_stats st;
	struct racer r = { 0 };
	pthread_t t;
	uint64_t ext;

	r.d = make(64, 4, 60000);
	REQUIRE(r.d);
	REQUIRE(rdmem_dedup_bind(r.d, 8, 1, "a", &r.a) == 0);
	REQUIRE(rdmem_dedup_begin(r.d, r.a, 9, &ext, &rec) == RDMEM_DEDUP_RUN);
	REQUIRE(pthread_create(&t, NULL, retry_thread, &r) == 0);
	usleep(50000); /* the retry is now blocked on our run */
	rdmem_dedup_end(r.d, r.a, ext, &res);
	pthread_join(t, NULL);
	CHECK_EQ(r.v, RDMEM_DEDUP_REPLAY);
	CHECK_EQ(r.rec.status, 4);
	CHECK_EQ(r.rec.aux, 99);
	CHECK_EQ(r.rec.args[2], 3);
	CHECK(r.waited_ns >= 40000000ull);
	rdmem_dedup_get_stats(r.d, &st);
	CHECK_EQ(st.waited, 1);
	CHECK_EQ(st.executed, 1);
	CHECK_EQ(st.replayed, 1);
	rdmem_dedup_unbind(r.d, r.a);
	rdmem_dedup_destroy(r.d);
}

/* Call ids are 32-bit on the wire: the window works across the wrap. */
static void test_id_wrap(void)
{
	struct rdmem_dedup *d = make(16, 4, 60000);
	struct rdmem_dedup_agent *a;
	struct rdmem_dedup_result rec;
	uint32_t id = 0xfffffff8u;
	int i;

	REQUIRE(d);
	REQUIRE(rdmem_dedup_bind(d, 9, id, "a", &a) == 0);
	for (i = 0; i < 16; i++)
		CHECK_EQ(run(d, a, id + (uint32_t)i, 0, &rec), RDMEM_DEDUP_RUN);
	CHECK_EQ(run(d, a, 0xfffffffau, 0, &rec), RDMEM_DEDUP_REPLAY);
	CHECK_EQ(run(d, a, 3, 0, &rec), RDMEM_DEDUP_REPLAY); /* after the wrap */
	CHECK_EQ(run(d, a, 8, 0, &rec), RDMEM_DEDUP_RUN);
	CHECK_EQ(run(d, a, 0xfffffff8u, 0, &rec), RDMEM_DEDUP_STALE);
	rdmem_dedup_unbind(d, a);
	rdmem_dedup_destroy(d);
}

/* The cap evicts an idle agent; with every agent connected, BIND is refused. */
static void test_agents_cap(void)
{
	struct rdmem_dedup *d = make(16, 2, 60000);
	struct rdmem_dedup_agent *a, *b, *c;
	struct rdmem_dedup_stats st;

	REQUIRE(d);
	REQUIRE(rdmem_dedup_bind(d, 1, 1, "a", &a) == 0);
	REQUIRE(rdmem_dedup_bind(d, 2, 1, "a", &b) == 0);
	CHECK_EQ(rdmem_dedup_bind(d, 3, 1, "a", &c), -ENOSPC);
	rdmem_dedup_unbind(d, a);
	CHECK_EQ(rdmem_dedup_bind(d, 3, 1, "a", &c), 0); /* evicts agent 1 */
	rdmem_dedup_get_stats(d, &st);
	CHECK_EQ(st.agents, 2);
	CHECK_EQ(st.expired, 1);
	CHECK_EQ(st.bind_refused, 1);
	rdmem_dedup_unbind(d, b);
	rdmem_dedup_unbind(d, c);
	rdmem_dedup_destroy(d);
}

/*
 * A peer binding agent ids by the hundred (connect, BIND, close) replaces
 * its own windows, not that of an agent that just left: the agent's retry
 * after its redial is replayed, not STALE. Newcomers of other addresses
 * take windows of the address holding at least two more than theirs; a
 * window left less than the grace ago (here --dedup-idle 200 ms) stays.
 */
static void test_agents_shared_by_address(void)
{
	struct rdmem_dedup *d = make(16, 4, 200);
	struct rdmem_dedup_agent *h, *x, *y;
	struct rdmem_dedup_result rec;
	struct rdmem_dedup_stats st;
	uint64_t id;

	REQUIRE(d);
	REQUIRE(rdmem_dedup_bind(d, 1, 1, "honest", &h) == 0);
	CHECK_EQ(run(d, h, 1, 0, &rec), RDMEM_DEDUP_RUN);
	rdmem_dedup_unbind(d, h); /* its link broke: it redials */
	for (id = 100; id < 356; id++) {
		CHECK_EQ(rdmem_dedup_bind(d, id, 1, "hog", &x), 0);
		rdmem_dedup_unbind(d, x);
	}
	REQUIRE(rdmem_dedup_bind(d, 1, 2, "honest", &h) == 0);
	CHECK_EQ(run(d, h, 1, 0, &rec), RDMEM_DEDUP_REPLAY);
	rdmem_dedup_unbind(d, h);
	/* The hog holds 3, the honest agent 1: a newcomer of another address
	 * takes the hog's, twice; then every address holds 1 (or 2 against
	 * 1) and the honest agent's window is young: refused. */
	CHECK_EQ(rdmem_dedup_bind(d, 500, 1, "y", &y), 0);
	CHECK_EQ(rdmem_dedup_bind(d, 501, 1, "z", &x), 0);
	rdmem_dedup_unbind(d, x);
	CHECK_EQ(rdmem_dedup_bind(d, 502, 1, "w", &x), -ENOSPC);
	rdmem_dedup_unbind(d, y);
	rdmem_dedup_get_stats(d, &st);
	CHECK_EQ(st.agents, 4);
	CHECK_EQ(st.bind_refused, 1);
	/* Past the grace, an old window goes to a newcomer: the least
	 * recently used (the hog's last, left before the honest agent's). */
	usleep(250 * 1000);
	CHECK_EQ(rdmem_dedup_bind(d, 502, 1, "w", &x), 0);
	rdmem_dedup_unbind(d, x);
	REQUIRE(rdmem_dedup_bind(d, 1, 2, "honest", &h) == 0);
	CHECK_EQ(run(d, h, 1, 0, &rec), RDMEM_DEDUP_REPLAY);
	rdmem_dedup_unbind(d, h);
	rdmem_dedup_destroy(d);
}

/* Forgotten once idle; back at the same server run, ids below its floor are STALE. */
static void test_idle_expiry_and_floor(void)
{
	struct rdmem_dedup *d = make(16, 4, 10);
	struct rdmem_dedup_agent *a;
	struct rdmem_dedup_result rec;
	struct rdmem_dedup_stats st;
	uint64_t t0;

	REQUIRE(d);
	REQUIRE(rdmem_dedup_bind(d, 5, 1, "a", &a) == 0);
	CHECK_EQ(run(d, a, 1, 0, &rec), RDMEM_DEDUP_RUN);
	rdmem_dedup_expire(d, rdmem_now_ns() + 1000000000ull); /* connected: kept */
	rdmem_dedup_get_stats(d, &st);
	CHECK_EQ(st.agents, 1);
	CHECK_EQ(rdmem_dedup_next_expiry(d), UINT64_MAX); /* connected: no deadline */
	t0 = rdmem_now_ns();
	rdmem_dedup_unbind(d, a);
	/* Forgotten once idle over --dedup-idle (10 ms here): the timer's deadline. */
	CHECK(rdmem_dedup_next_expiry(d) > t0 + 10000000ull);
	CHECK(rdmem_dedup_next_expiry(d) <= rdmem_now_ns() + 10000001ull);
	rdmem_dedup_expire(d, rdmem_now_ns() + 1000000000ull);
	rdmem_dedup_get_stats(d, &st);
	CHECK_EQ(st.agents, 0);
	REQUIRE(rdmem_dedup_bind(d, 5, 2, "a", &a) == 0);
	CHECK_EQ(run(d, a, 1, 0, &rec), RDMEM_DEDUP_STALE);
	CHECK_EQ(run(d, a, 2, 0, &rec), RDMEM_DEDUP_RUN);
	rdmem_dedup_unbind(d, a);
	/* Any agent new to this table starts at its BIND's id, whatever it was
	 * bound to before (a server run this one replaced, where what it sent
	 * may have run and been seen; or nothing it ever heard back from): the
	 * ids below are STALE, not run. A first BIND names id 1: none below. */
	REQUIRE(rdmem_dedup_bind(d, 10, 5, "a", &a) == 0);
	CHECK_EQ(run(d, a, 1, 0, &rec), RDMEM_DEDUP_STALE);
	CHECK_EQ(run(d, a, 4, 0, &rec), RDMEM_DEDUP_STALE);
	CHECK_EQ(run(d, a, 5, 0, &rec), RDMEM_DEDUP_RUN);
	rdmem_dedup_unbind(d, a);
	CHECK(rdmem_dedup_instance(d) != 0);
	rdmem_dedup_destroy(d);
}

int main(void)
{
	RUN(test_config_checked);
	RUN(test_replay_and_window_edge);
	RUN(test_retry_waits_for_running_call);
	RUN(test_id_wrap);
	RUN(test_agents_cap);
	RUN(test_agents_shared_by_address);
	RUN(test_idle_expiry_and_floor);
	return check_done();
}
