/* test_slot_release.c - a timed-out call's front-door slot goes back to its
 * client only once no RDMA WR can read it any more.
 *
 * EAGER and BULK requests are WRITTEN straight from the client's slot (no
 * copy), and a NIC reads that memory when it runs the WR, not when it is
 * posted. The agent here runs over the shm fabric in its test mode that
 * runs WRs late (RDMEM_SHM_TEST_DELAY_MS, fabric/emu.h), as a NIC that
 * retries or is queued behind others would. A PUT of a 6000-byte value
 * (over the 4 KiB the agent copies to its staging: sent from the slot)
 * times out; the client then GETs a key nobody wrote. Had the agent handed
 * the slot back at the timeout, the GET would reuse it and the late PUT WR
 * would send the GET's key under the PUT's descriptor: the server would
 * store the PUT's value under the GET's key, and the GET would return it.
 * The GET must find nothing; the PUT, when it lands, must land whole under
 * its own key. Rounds of a 2000-byte PUT (copied to staging, which stays
 * with the timed-out ring slot) check the same without the hold: their
 * slot goes back at the timeout.
 *
 * Then, on a stack without the delay: two calls in flight to a stopped
 * server, with different deadlines, both time out at the agent (a scan for
 * the first must keep the second's deadline: rdmem_rdma_expire's bound).
 *
 *   test_timed_out_slot_not_resent   (shm only: the delay is the shm fabric's)
 *   test_two_deadlines_on_a_stopped_server
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "e2e.h"

#define T_DELAY_MS "300" /* WRs run this late: above the timeout, below liveness */
#define T_TIMEOUT  100	 /* the PUT's timeout, ms */
#define T_VALUE	   6000	 /* over RDMEM_LINK_STAGE_BYTES: sent from the client's slot */
#define T_STAGED   2000	 /* staged (copied), over the shm fabric's 256-byte inline limit */
#define T_ROUNDS   4

static struct e2e e;

static int get_value(const char *key, uint8_t path, int ms, void **val, uint32_t *len)
{
	struct rdmem_opts o = { path, (uint32_t)ms, NULL };

	return rdmem_get(e.h, key, (uint32_t)strlen(key), val, len, &o);
}

/* One round: a PUT of size bytes times out, the next call must not resend its slot. */
static int one_round(int round, uint32_t size)
{
	struct rdmem_opts put = { RDMEM_PATH_EAGER, T_TIMEOUT, NULL };
	char ka[32], kb[32];
	uint8_t val[T_VALUE];
	void *got = NULL;
	uint32_t len = 0;
	int rc, bad = 0;

	/* Same length: the late WR would carry the second key in full. */
	snprintf(ka, sizeof(ka), "slot-a-%d", round);
	snprintf(kb, sizeof(kb), "slot-b-%d", round);
	e2e_fill(val, sizeof(val), (uint32_t)round + 7);
	rc = rdmem_put(e.h, ka, (uint32_t)strlen(ka), val, size, &put);
	if (rc != -ETIMEDOUT) {
		fprintf(stderr, "  round %d: PUT returned %d, expected a timeout\n", round, rc);
		bad++;
	}
	/* The agent gives up a little before the client and may sleep up to
	 * 50 ms first: give it the time to answer, so the slot is FREE again
	 * (not abandoned) if it is handed back, and the GET takes it (lowest
	 * free slot first) while the PUT's WRs have yet to run. */
	proc_sleep_ms(60);
	rc = get_value(kb, RDMEM_PATH_EAGER, 3000, &got, &len);
	if (rc != -ENOENT) {
		fprintf(stderr,
			"  round %d: GET of a key never written returned %d with %u bytes%s\n",
			round, rc, len,
			rc == 0 && len == size && !memcmp(got, val, len)
			    ? " - the timed-out PUT's value: its WR resent the reused slot"
			    : "");
		bad++;
	}
	free(got);
	got = NULL;
	/* The late PUT lands (or not) under its own key, whole. */
	proc_sleep_ms(400);
	rc = get_value(ka, RDMEM_PATH_TCP, 3000, &got, &len);
	if (!(rc == -ENOENT || (rc == 0 && len == size && !memcmp(got, val, len)))) {
		fprintf(stderr, "  round %d: the timed-out PUT's key holds %d/%u bytes, wrong\n",
			round, rc, len);
		bad++;
	}
	free(got);
	return bad;
}

static void test_timed_out_slot_not_resent(void)
{
	long long held;
	int r, bad = 0;

	REQUIRE(e2e_stat(&e, "link_up") == 1);
	for (r = 0; r < 2 * T_ROUNDS; r++)
		bad += one_round(r, r % 2 ? T_STAGED : T_VALUE);
	CHECK_EQ(bad, 0);
	/* The mechanism ran: timeouts from the slot waited for their request
	 * WRs; staged ones did not need to. */
	held = e2e_stat(&e, "rdma.timeouts_held");
	printf("# timeouts held until their WRs completed: %lld of %d\n", held, 2 * T_ROUNDS);
	CHECK_EQ(held, T_ROUNDS);
	/* Nothing broke the link on the way. */
	CHECK_EQ(e2e_stat(&e, "link_losses"), 0);
}

/* One EAGER GET of key "k" with timeout ms, submitted on e2->h. */
static int submit_get_ms(struct e2e *e2, struct rdmem_rpc *rpc, uint32_t ms)
{
	rdmem_rpc_init(rpc, RDMEM_OP_KV_GET);
	rpc->key = "k";
	rpc->key_len = 1;
	rpc->path = RDMEM_PATH_EAGER;
	rpc->timeout_ms = ms;
	return rdmem_submit(e2->h, rpc);
}

static void test_two_deadlines_on_a_stopped_server(void)
{
	struct rdmem_rpc a, b;
	struct e2e e2;
	long long failed;
	int done_a = 0, done_b = 0;
	uint64_t end;

	REQUIRE(e2e_init(&e2, "shm") == 0);
	REQUIRE(e2e_server(&e2, "shm", NULL) == 0);
	REQUIRE(e2e_agent(&e2, NULL) == 0);
	REQUIRE(rdmem_put(e2.h, "k", 1, "v", 1, NULL) == 0);
	failed = e2e_stat(&e2, "paths.eager.failed");
	/* Stopped for certain before the calls go out: kill() returns first. */
	REQUIRE(proc_stop_wait(e2.server.pid, 2000) == 0);
	REQUIRE(submit_get_ms(&e2, &a, 200) == 0);
	REQUIRE(submit_get_ms(&e2, &b, 600) == 0);
	end = rdmem_now_ns() + 5000000000ull;
	while ((!done_a || !done_b) && rdmem_now_ns() < end) {
		done_a = done_a || rdmem_poll(e2.h, &a) == 1;
		done_b = done_b || rdmem_poll(e2.h, &b) == 1;
		proc_sleep_ms(1);
	}
	CHECK(done_a && done_b);
	CHECK(a.rc != 0 && b.rc != 0);
	/* The client gives up on its own at its deadline; the agent, a little
	 * before, must end both calls with TIMEOUT (its failed count). */
	proc_sleep_ms(300);
	failed = e2e_stat(&e2, "paths.eager.failed") - failed;
	printf("# calls the agent timed out: %lld of 2\n", failed);
	CHECK_EQ(failed, 2);
	/* Their ring slots stay the server's until it answers: then they are free. */
	kill(e2.server.pid, SIGCONT);
	for (int i = 0; i < 200 && e2e_stat(&e2, "rdma.slots_in_use") != 0; i++)
		proc_sleep_ms(10);
	CHECK_EQ(e2e_stat(&e2, "rdma.slots_in_use"), 0);
	rdmem_rpc_free(&a);
	rdmem_rpc_free(&b);
	e2e_fini(&e2);
}

int main(void)
{
	int ret;

	rdmem_log_init("test_slot_release", 0);
	if (e2e_init(&e, "shm") < 0 || e2e_server(&e, "shm", NULL) < 0) {
		printf("not ok - start the server\n");
		e2e_fini(&e);
		return 1;
	}
	/* Only the agent's WRs run late. */
	setenv("RDMEM_SHM_TEST_DELAY_MS", T_DELAY_MS, 1);
	ret = e2e_agent(&e, NULL);
	unsetenv("RDMEM_SHM_TEST_DELAY_MS");
	if (ret) {
		printf("not ok - start the agent\n");
		e2e_fini(&e);
		return 1;
	}
	RUN(test_timed_out_slot_not_resent);
	e2e_fini(&e);
	RUN(test_two_deadlines_on_a_stopped_server);
	return check_done();
}
