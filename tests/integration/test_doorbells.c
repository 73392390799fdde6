/* test_doorbells.c - calls that arrive together leave together: one post
 * (one doorbell) for what an actor round built, on the agent (requests,
 * READs, RECLAIMs) and on the server (replies), with every reply exact.
 *
 * Per message a post costs a doorbell on a NIC (an MMIO write), a syscall
 * on Soft-RoCE, and a lock and a wake-up in the shm fabric. Four client
 * processes keep 16 calls each in flight, so rounds find several calls
 * waiting; the counters (rdma.doorbells against rdma.posted on the agent,
 * the session's doorbells against its calls on the server) show they went
 * out together. Before batching every message was its own post: the
 * counters did not exist, and the ratio was 1.
 *
 * One WQE a message (layout 4: descriptor and payload share a slot, so one
 * WRITE WITH IMMEDIATE carries both): the agent's request and RECLAIM
 * messages took exactly one WR each (rdma.msg_wqes against rdma.posted +
 * rdma.reclaim_msgs), the server's replies one each (the session's wqes
 * against its calls). Before layout 4 a message with a payload was two.
 *
 * Cases:
 *   EAGER GETs and PUTs of 1 KiB, LAZY GETs of 20 KiB: exact, fewer posts
 *     than messages on both ends, one WQE a message.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "e2e.h"

#define T_PROCS	 4
#define T_WINDOW 16
#define T_CALLS	 3000 /* per process */
#define T_KEYS	 32
#define T_SMALL	 1024
#define T_LARGE	 (20u << 10) /* LAZY in AUTO: over the 16 KiB response slot */

static struct e2e e;

static uint32_t size_of_key(int k)
{
	return k % 2 ? T_LARGE : T_SMALL;
}

static void value_of(int k, uint8_t *buf)
{
	e2e_fill(buf, size_of_key(k), (uint32_t)k * 7 + 1);
}

static int exact(const struct rdmem_rpc *c, int k, const uint8_t *want)
{
	return c->rlen == size_of_key(k) && memcmp(c->rval, want, c->rlen) == 0;
}

/* A client process: GETs (and a PUT of the same bytes now and then) of
 * random keys, T_WINDOW in flight; exits 0 when every reply was exact. */
static void client(void)
{
	static uint8_t want[T_KEYS][T_LARGE];
	struct rdmem_rpc rpc[T_WINDOW];
	char keys[T_WINDOW][32];
	int key[T_WINDOW], sent = 0, done = 0, bad = 0, i;
	rdmem_t *h;

	srand((unsigned)getpid());
	if (rdmem_open(e.shm, &h) < 0)
		_exit(2);
	for (i = 0; i < T_KEYS; i++)
		value_of(i, want[i]);
	for (i = 0; i < T_WINDOW; i++)
		key[i] = -1;
	while (done < T_CALLS) {
		for (i = 0; i < T_WINDOW; i++) {
			if (key[i] < 0 && sent < T_CALLS) {
				int k = rand() % T_KEYS, put = rand() % 8 == 0;

				snprintf(keys[i], sizeof(keys[i]), "bell-%d", k);
				rdmem_rpc_init(&rpc[i], put ? RDMEM_OP_KV_PUT : RDMEM_OP_KV_GET);
				rpc[i].key = keys[i];
				rpc[i].key_len = (uint32_t)strlen(keys[i]);
				if (put) {
					rpc[i].val = want[k];
					rpc[i].val_len = size_of_key(k);
				}
				rpc[i].timeout_ms = 20000;
				if (rdmem_submit(h, &rpc[i]) < 0)
					_exit(3);
				key[i] = k;
				sent++;
			}
			if (key[i] >= 0 && rdmem_poll(h, &rpc[i]) == 1) {
				int k = key[i];

				bad += rpc[i].rc != 0 || (rpc[i].op == RDMEM_OP_KV_GET &&
							  !exact(&rpc[i], k, want[k]));
				rdmem_rpc_free(&rpc[i]);
				key[i] = -1;
				done++;
			}
		}
	}
	rdmem_close(h);
	_exit(bad ? 1 : 0);
}

/* The server's session: its calls, reply posts and reply WQEs, from
 * `rdmem stats --json`. */
static void server_posts(long long *calls, long long *posts, long long *wqes)
{
	static char json[1 << 16];
	const char *p;

	*calls = *posts = *wqes = -1;
	if (e2e_server_json(&e, json, sizeof(json)) < 0 || !(p = strstr(json, "\"sessions\":[{")))
		return;
	*calls = e2e_json_num(p, "completed");
	*posts = e2e_json_num(p, "doorbells");
	*wqes = e2e_json_num(p, "wqes");
}

/* The agent's counters from ONE stats snapshot: a RECLAIM the housekeeping
 * sends between two queries would otherwise count in one and not the other. */
struct agent_posts {
	long long posted, bells, msgw, recl;
};

static struct agent_posts agent_posts(void)
{
	struct agent_posts a = { -1, -1, -1, -1 };
	char *text = NULL;
	uint32_t len;

	if (rdmem_agent_stats(e.h, 1, &text, &len, NULL) < 0)
		return a;
	a.posted = e2e_json_num(text, "rdma.posted");
	a.bells = e2e_json_num(text, "rdma.doorbells");
	a.msgw = e2e_json_num(text, "rdma.msg_wqes");
	a.recl = e2e_json_num(text, "rdma.reclaim_msgs");
	free(text);
	return a;
}

static void test_batched_posts(void)
{
	struct agent_posts a0 = agent_posts(), a1;
	long long calls0, sposts0, swqes0, calls, sposts, swqes, posted, bells, msgw, recl;
	pid_t kids[T_PROCS];
	int i, status;

	server_posts(&calls0, &sposts0, &swqes0);
	for (i = 0; i < T_PROCS; i++)
		if ((kids[i] = fork()) == 0)
			client();
	for (i = 0; i < T_PROCS; i++) {
		CHECK(waitpid(kids[i], &status, 0) == kids[i]);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* every reply exact */
	}
	a1 = agent_posts();
	posted = a1.posted - a0.posted;
	bells = a1.bells - a0.bells;
	msgw = a1.msgw - a0.msgw;
	recl = a1.recl - a0.recl;
	server_posts(&calls, &sposts, &swqes);
	calls -= calls0;
	sposts -= sposts0;
	swqes -= swqes0;
	printf("# agent: %lld calls in %lld posts (%.1f a post); server: %lld replies in %lld "
	       "posts (%.1f a post)\n",
	       posted, bells, bells > 0 ? (double)posted / bells : 0.0, calls, sposts,
	       sposts > 0 ? (double)calls / sposts : 0.0);
	CHECK(posted >= T_PROCS * T_CALLS);
	CHECK(e2e_stat(&e, "rdma.lazy_reads") > 0);
	/* Batched: fewer posts than messages. READs and RECLAIMs are posts'
	 * passengers too, so one post a call would already be a ratio above 1. */
	CHECK(bells > 0 && bells < posted);
	CHECK(sposts > 0 && sposts < calls);
	printf("# WQEs a message: agent %lld for %lld requests + %lld RECLAIMs; server %lld for "
	       "%lld replies\n",
	       msgw, posted, recl, swqes, calls);
	CHECK(recl > 0); /* the LAZY GETs' objects went back */
	CHECK_EQ(msgw, posted + recl);
	CHECK_EQ(swqes, calls);
}

static void start_stack(void)
{
	static uint8_t val[T_LARGE];
	int k;

	REQUIRE(e2e_init(&e, "shm") == 0);
	snprintf(e.clients, sizeof(e.clients), "%d", T_PROCS + 1);
	REQUIRE(e2e_server(&e, "shm", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0);
	for (k = 0; k < T_KEYS; k++) {
		char key[32];

		value_of(k, val);
		snprintf(key, sizeof(key), "bell-%d", k);
		REQUIRE(rdmem_put(e.h, key, (uint32_t)strlen(key), val, size_of_key(k), NULL) == 0);
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	RUN(start_stack);
	if (!check_cases_failed)
		RUN(test_batched_posts);
	e2e_fini(&e);
	return check_done();
}
