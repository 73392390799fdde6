/* test_agent_rdma_loss.c - the RDMA side really breaks while an agent runs;
 * AUTO calls go on over TCP and succeed, the agent's path counters prove
 * which path carried them, and RDMA is used again once it is back.
 *
 *   test_agent_rdma_loss [shm|verbs]   (default shm)
 *
 * Cases:
 *   the server comes back without its RDMA listener (--fabric none): the
 *     agent's link is gone and cannot be redialled;
 *   the network under RDMA is cut (env RDMEM_TEST_CUT, a shell command that
 *     black-holes the RDMA path but not TCP; RDMEM_TEST_HEAL undoes it): the
 *     QP stops getting acknowledgements; the agent's own liveness check
 *     (or the NIC's retry counter) finds the path dead. Without them the case
 *     is skipped (the shm fabric has no network: tests/expected-skips.txt);
 *     the rxe suite's rdma_loss_veth runs it with tc netem on a veth pair.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "e2e.h"

#define T_CALL_MS 30000 /* room for a QP to exhaust its retries on a dead network */

static struct e2e e;

static struct rdmem_opts auto_opts(void)
{
	struct rdmem_opts o = { RDMEM_PATH_AUTO, T_CALL_MS, NULL };

	return o;
}

/* n AUTO puts and gets of distinct keys, every value read back exact. */
static int auto_calls(const char *tag, int n)
{
	struct rdmem_opts o = auto_opts();
	int bad = 0, i;

	for (i = 0; i < n; i++) {
		char key[32], val[16];
		void *got = NULL;
		uint32_t len = 0;

		snprintf(key, sizeof(key), "%s-%d", tag, i);
		snprintf(val, sizeof(val), "v%d", i);
		bad +=
		    rdmem_put(e.h, key, (uint32_t)strlen(key), val, (uint32_t)strlen(val), &o) != 0;
		bad += rdmem_get(e.h, key, (uint32_t)strlen(key), &got, &len, &o) != 0 ||
		       len != strlen(val) || !got || memcmp(got, val, len) != 0;
		free(got);
	}
	return bad;
}

/* After the break: 4 AUTO calls all on TCP, none on the RDMA paths. */
static void check_calls_on_tcp(const char *tag)
{
	long long tcp = e2e_stat(&e, "paths.tcp.ok"), eager = e2e_stat(&e, "paths.eager.ok");

	CHECK_EQ(auto_calls(tag, 2), 0);
	CHECK_EQ(e2e_stat(&e, "paths.tcp.ok") - tcp, 4);
	CHECK_EQ(e2e_stat(&e, "paths.eager.ok") - eager, 0);
	CHECK_EQ(e2e_stat(&e, "link_up"), 0);
}

/* Back on RDMA: an AUTO call is carried EAGER again. */
static void check_back_on_rdma(void)
{
	long long eager;

	CHECK(e2e_link_becomes(&e, 1, 15000));
	eager = e2e_stat(&e, "paths.eager.ok");
	CHECK_EQ(auto_calls("back", 1), 0);
	CHECK_EQ(e2e_stat(&e, "paths.eager.ok") - eager, 2);
}

static void test_server_without_rdma(void)
{
	long long losses = e2e_stat(&e, "link_losses");
	struct rdmem_opts eager = { RDMEM_PATH_EAGER, 300, NULL };

	REQUIRE(e2e_stat(&e, "link_up") == 1);
	proc_stop(&e.server, SIGTERM, 5000);
	REQUIRE(e2e_server(&e, "none", NULL) == 0);
	CHECK(e2e_link_becomes(&e, 0, 5000));
	CHECK_EQ(e2e_stat(&e, "link_losses") - losses, 1);
	check_calls_on_tcp("norma");
	/* A call forced onto RDMA has nowhere to go: it fails, it does not hang. */
	CHECK(rdmem_ping(e.h, &eager) < 0);
	proc_stop(&e.server, SIGTERM, 5000);
	REQUIRE(e2e_server(&e, e.fabric, NULL) == 0);
	check_back_on_rdma();
}

static void test_network_cut(void)
{
	const char *cut = getenv("RDMEM_TEST_CUT"), *heal = getenv("RDMEM_TEST_HEAL");
	long long losses = e2e_stat(&e, "link_losses"), tcp = e2e_stat(&e, "paths.tcp.ok");
	uint64_t t0;

	REQUIRE(e2e_link_becomes(&e, 1, 15000));
	CHECK_EQ(system(cut), 0);
	/* The first calls may wait for the QP to give up (retries exhausted);
	 * the agent then retries them on TCP: they succeed all the same. */
	t0 = rdmem_now_ns();
	if (auto_calls("cut", 1) != 0) {
		/* Later steps would only wait out more deadlines: heal and stop. */
		CHECK(0);
		CHECK_EQ(system(heal), 0);
		return;
	}
	printf("# first AUTO put+get after the cut took %.0f ms (QP retries running out); "
	       "functional figure\n",
	       (rdmem_now_ns() - t0) / 1e6);
	CHECK_EQ(e2e_stat(&e, "paths.tcp.ok") - tcp, 2);
	CHECK(e2e_link_becomes(&e, 0, 15000));
	CHECK(e2e_stat(&e, "link_losses") - losses >= 1);
	printf("# fallbacks %lld, rdma errors %lld\n", e2e_stat(&e, "fallbacks"),
	       e2e_stat(&e, "rdma_errors"));
	check_calls_on_tcp("cut2");
	CHECK_EQ(system(heal), 0);
	check_back_on_rdma();
}

int main(int argc, char **argv)
{
	const char *fabric = argc > 1 ? argv[1] : "shm";

	rdmem_log_init("test_agent_rdma_loss", 0);
	if (e2e_init(&e, fabric) < 0 || e2e_server(&e, fabric, NULL) < 0 || e2e_agent(&e, NULL)) {
		printf("not ok - start server and agent over %s\n", fabric);
		e2e_fini(&e);
		return 1;
	}
	RUN(test_server_without_rdma);
	if (getenv("RDMEM_TEST_CUT") && getenv("RDMEM_TEST_HEAL"))
		RUN(test_network_cut);
	else
		check_skip("test_network_cut",
			   "RDMEM_TEST_CUT and RDMEM_TEST_HEAL not set (commands "
			   "that black-hole the RDMA path and undo it)");
	e2e_fini(&e);
	return check_done();
}
