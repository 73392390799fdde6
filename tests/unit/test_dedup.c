/* test_dedup.c - the server's per-agent dedup window (server/dedup.c):
 * replay, the window edge, a retry racing its first run, 32-bit id wrap,
 * the agents cap, idle expiry and a returning agent's floor. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
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

/* Binds id from addr, runs call 1 there when run, and unbinds. */
static int bind_run_leave(struct rdmem_dedup *d, uint64_t id, const char *addr, int run_call)
{
	struct rdmem_dedup_agent *a;
	struct rdmem_dedup_result rec;
	int ret = rdmem_dedup_bind(d, id, 1, addr, &a);

	if (ret == 0 && run_call && run(d, a, 1, 0, &rec) != RDMEM_DEDUP_RUN)
		ret = -1;
	if (ret == 0)
		rdmem_dedup_unbind(d, a);
	return ret;
}

/* The agent id's call 1 is replayed (its window was kept). */
static int replayed(struct rdmem_dedup *d, uint64_t id, const char *addr)
{
	struct rdmem_dedup_agent *a;
	struct rdmem_dedup_result rec;
	enum rdmem_dedup_verdict v;

	if (rdmem_dedup_bind(d, id, 2, addr, &a) < 0)
		return 0;
	v = run(d, a, 1, 0, &rec);
	rdmem_dedup_unbind(d, a);
	return v == RDMEM_DEDUP_REPLAY;
}

/*
 * A peer binding agent ids by the hundred (connect, BIND, close), with or
 * without a call in each, replaces its own windows, not that of an agent
 * that just left: the agent's retry after its redial is replayed, not
 * STALE. Newcomers of other addresses take the windows of an address
 * holding at least two more than theirs, and are not refused while any
 * window is without a connection (a refused BIND runs calls untracked).
 */
static void test_agents_shared_by_address(void)
{
	struct rdmem_dedup *d = make(16, 4, 60000);
	struct rdmem_dedup_stats st;
	char addr[32];
	uint64_t id;

	REQUIRE(d);
	REQUIRE(bind_run_leave(d, 1, "honest", 1) == 0); /* its link broke: it redials */
	for (id = 800; id < 1056; id++) {		 /* BIND alone, from 256 addresses */
		snprintf(addr, sizeof(addr), "2001:db8:0:%x::/64", (unsigned)id);
		CHECK_EQ(bind_run_leave(d, id, addr, 0), 0);
	}
	CHECK(replayed(d, 1, "honest"));
	for (id = 100; id < 356; id++) /* BIND alone */
		CHECK_EQ(bind_run_leave(d, id, "hog", 0), 0);
	CHECK(replayed(d, 1, "honest"));
	for (id = 400; id < 656; id++) /* a call in each */
		CHECK_EQ(bind_run_leave(d, id, "hog", 1), 0);
	CHECK(replayed(d, 1, "honest"));
	/* The hog holds 3: two newcomers take its windows; a third, with
	 * every address at one, takes the least recently used (the hog's). */
	CHECK_EQ(bind_run_leave(d, 700, "y", 1), 0);
	CHECK_EQ(bind_run_leave(d, 701, "z", 1), 0);
	CHECK_EQ(bind_run_leave(d, 702, "w", 1), 0);
	CHECK(replayed(d, 1, "honest"));
	rdmem_dedup_get_stats(d, &st);
	CHECK_EQ(st.agents, 4);
	CHECK_EQ(st.bind_refused, 0);
	rdmem_dedup_destroy(d);
}

/* Past the grace (here --dedup-idle 300 ms), a window goes before those of
 * an address holding two more; within it, after them, though older. */
static void test_agents_grace_then_fair_share(void)
{
	struct rdmem_dedup *d = make(16, 4, 300);

	REQUIRE(d);
	REQUIRE(bind_run_leave(d, 1, "honest", 1) == 0);
	REQUIRE(bind_run_leave(d, 2, "hog", 1) == 0);
	REQUIRE(bind_run_leave(d, 3, "hog", 1) == 0);
	REQUIRE(bind_run_leave(d, 4, "hog", 1) == 0);
	CHECK_EQ(bind_run_leave(d, 5, "y", 1), 0); /* the hog's 2, not the older honest */
	CHECK(replayed(d, 1, "honest"));
	usleep(350 * 1000);
	/* The hog's two young again, y too: without the grace the newcomer
	 * would take one of the hog's (an address holding two more). */
	REQUIRE(bind_run_leave(d, 3, "hog", 0) == 0);
	REQUIRE(bind_run_leave(d, 4, "hog", 0) == 0);
	REQUIRE(bind_run_leave(d, 5, "y", 0) == 0);
	CHECK_EQ(bind_run_leave(d, 6, "z", 1), 0); /* honest 1, past the grace */
	CHECK(replayed(d, 3, "hog"));		   /* (before: the honest agent's BIND takes one) */
	CHECK(!replayed(d, 1, "honest"));
	rdmem_dedup_destroy(d);
}

/* A newcomer takes its own address's young window before one of an
 * address holding more but not two more. */
static void test_agents_own_address_first(void)
{
	struct rdmem_dedup *d = make(16, 3, 60000);

	REQUIRE(d);
	REQUIRE(bind_run_leave(d, 1, "a", 1) == 0);
	REQUIRE(bind_run_leave(d, 2, "b", 1) == 0);
	REQUIRE(bind_run_leave(d, 3, "b", 1) == 0);
	CHECK_EQ(bind_run_leave(d, 4, "a", 1), 0);
	CHECK(replayed(d, 2, "b"));
	CHECK(replayed(d, 3, "b"));
	CHECK(!replayed(d, 1, "a"));
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
	RUN(test_agents_grace_then_fair_share);
	RUN(test_agents_own_address_first);
	RUN(test_idle_expiry_and_floor);
	return check_done();
}
