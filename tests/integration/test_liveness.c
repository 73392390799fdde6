/* test_liveness.c - the agent finds a dead RDMA path by itself, within a
 * second, and comes back when it heals.
 *
 * A cut network under an RC QP need not fail any WR (rxe retries for ever;
 * a NIC may take many seconds to exhaust its retries), and the peer's CM
 * says nothing either. The agent here runs over the shm fabric in its test
 * mode that black-holes this process's network while a file exists
 * (RDMEM_SHM_TEST_BLACKHOLE, fabric/emu.h): WRs stay unrun, replies
 * unseen, redials time out.
 *
 * Cases:
 *   AUTO calls in flight when the path dies complete on TCP within ~1 s,
 *     with exact bytes; a call forced onto RDMA fails with a clear error;
 *     the agent counts the stall and shows the link down;
 *   the path heals: the agent redials and AUTO calls ride RDMA again (the
 *     EAGER path counter grows).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "e2e.h"
#include "tmpdir.h"

#define T_CALLS	    8
#define T_VALUE	    1500 /* over the inline limit: the WRs must read our slots */
#define T_DETECT_MS 1500 /* liveness (~0.5 s) + a probe round + TCP, on a loaded host */

static struct e2e e;
static char hole[64];

static void make_hole(void)
{
	FILE *f = fopen(hole, "w");

	if (f)
		fclose(f);
}

/* AUTO PUT then GET of one key, value exact; 0 when both succeed. */
static int auto_put_get(const char *key, uint32_t seed)
{
	struct rdmem_opts o = { RDMEM_PATH_AUTO, 5000, NULL };
	uint8_t val[T_VALUE];
	void *got = NULL;
	uint32_t len = 0;
	int bad;

	e2e_fill(val, sizeof(val), seed);
	bad = rdmem_put(e.h, key, (uint32_t)strlen(key), val, sizeof(val), &o) != 0;
	bad += rdmem_get(e.h, key, (uint32_t)strlen(key), &got, &len, &o) != 0 ||
	       len != sizeof(val) || memcmp(got, val, len) != 0;
	free(got);
	return bad;
}

static void test_path_dies_under_calls(void)
{
	struct rdmem_rpc c[T_CALLS];
	uint8_t val[T_CALLS][T_VALUE];
	char key[T_CALLS][32];
	struct rdmem_opts eager = { RDMEM_PATH_EAGER, 500, NULL };
	long long tcp_ok, stalls = e2e_stat(&e, "link_stalls");
	uint64_t t0, worst = 0;
	int i, bad = 0, on_tcp = 0;

	REQUIRE(e2e_link_becomes(&e, 1, 10000));
	REQUIRE(auto_put_get("before", 1) == 0);
	tcp_ok = e2e_stat(&e, "paths.tcp.ok");
	make_hole();
	t0 = rdmem_now_ns();
	for (i = 0; i < T_CALLS; i++) {
		snprintf(key[i], sizeof(key[i]), "live-%d", i);
		e2e_fill(val[i], T_VALUE, (uint32_t)i + 100);
		rdmem_rpc_init(&c[i], RDMEM_OP_KV_PUT);
		c[i].key = key[i];
		c[i].key_len = (uint32_t)strlen(key[i]);
		c[i].val = val[i];
		c[i].val_len = T_VALUE;
		c[i].path = RDMEM_PATH_AUTO;
		c[i].timeout_ms = 5000;
		REQUIRE(rdmem_submit(e.h, &c[i]) == 0);
	}
	for (i = 0; i < T_CALLS; i++) {
		rdmem_wait(e.h, &c[i]);
		worst = RDMEM_MAX(worst, rdmem_now_ns() - t0);
		bad += c[i].rc != 0;
		on_tcp += c[i].rpath == RDMEM_PATH_TCP;
		rdmem_rpc_free(&c[i]);
	}
	printf("# %d AUTO PUTs in flight when the path died: all done after %.0f ms, %d on "
	       "TCP, %d failed\n",
	       T_CALLS, worst / 1e6, on_tcp, bad);
	CHECK_EQ(bad, 0);
	CHECK_EQ(on_tcp, T_CALLS);
	CHECK(worst <= T_DETECT_MS * 1000000ull);
	CHECK_EQ(e2e_stat(&e, "link_stalls") - stalls, 1);
	CHECK_EQ(e2e_stat(&e, "link_up"), 0);
	CHECK(e2e_stat(&e, "paths.tcp.ok") - tcp_ok >= T_CALLS);
	/* Every value landed once, whole, under its own key. */
	for (i = 0; i < T_CALLS; i++) {
		struct rdmem_opts tcp = { RDMEM_PATH_TCP, 3000, NULL };
		void *got = NULL;
		uint32_t len = 0;

		bad = rdmem_get(e.h, key[i], (uint32_t)strlen(key[i]), &got, &len, &tcp) != 0 ||
		      len != T_VALUE || memcmp(got, val[i], len) != 0;
		CHECK_EQ(bad, 0);
		free(got);
	}
	/* A call forced onto RDMA has nowhere to go: a clear error, no hang. */
	t0 = rdmem_now_ns();
	CHECK_EQ(rdmem_ping(e.h, &eager), -EHOSTUNREACH);
	CHECK(rdmem_now_ns() - t0 < 1000000000ull);
	/* AUTO goes on over TCP while the path stays dead. */
	CHECK_EQ(auto_put_get("during", 2), 0);
}

static void test_path_heals(void)
{
	long long eager, opens = e2e_stat(&e, "link_opens");

	unlink(hole);
	/* The connector redials with backoff (at most 2 s between dials). */
	CHECK(e2e_link_becomes(&e, 1, 8000));
	CHECK(e2e_stat(&e, "link_opens") - opens >= 1);
	eager = e2e_stat(&e, "paths.eager.ok");
	CHECK_EQ(auto_put_get("after", 3), 0);
	CHECK_EQ(e2e_stat(&e, "paths.eager.ok") - eager, 2);
}

int main(void)
{
	int ret;

	rdmem_log_init("test_liveness", 0);
	snprintf(hole, sizeof(hole), "%s/rdmem-hole-%d", test_tmpdir(), (int)getpid());
	unlink(hole);
	if (e2e_init(&e, "shm") < 0 || e2e_server(&e, "shm", NULL) < 0) {
		printf("not ok - start the server\n");
		e2e_fini(&e);
		return 1;
	}
	/* Only the agent's network is cut. */
	setenv("RDMEM_SHM_TEST_BLACKHOLE", hole, 1);
	ret = e2e_agent(&e, NULL);
	unsetenv("RDMEM_SHM_TEST_BLACKHOLE");
	if (ret) {
		printf("not ok - start the agent\n");
		e2e_fini(&e);
		return 1;
	}
	RUN(test_path_dies_under_calls);
	RUN(test_path_heals);
	unlink(hole);
	e2e_fini(&e);
	return check_done();
}
