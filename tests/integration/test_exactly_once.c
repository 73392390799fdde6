/* test_exactly_once.c - a non-idempotent call retried after the server ran
 * it runs once: the retry is answered from the server's dedup window.
 *
 *   test_exactly_once [shm|verbs]   (default shm)
 *
 * The faults strike after the server executed the call: the agent drops the
 * RDMA reply (agent-ctl simulate-rdma-reply-loss N, AUTO retries on TCP) or
 * the TCP reply (simulate-tcp-reply-loss N: the connection is redialled and
 * the call sent again on the new one). The server's ops.<op>.calls count runs,
 * dedup.replayed counts answers from the window. Raw TCP connections then
 * drive the window itself: rebinding the same agent on a new connection, a
 * flood past the window (a retry older than it is answered STALE and not
 * run), and an agent forgotten after --dedup-idle. A last case runs the same
 * fault against a --no-dedup server and sees the retried DEL answer ENOENT:
 * the fault really re-sends a call the server already ran.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "check.h"
#include "e2e.h"
#include "tcp/client.h"
#include "rdmem/content.h"

#define T_WINDOW  "64"
#define T_IDLE_MS "1500"
#define T_CALL_MS 10000

static struct e2e e;

static const struct rdmem_opts auto_opts = { RDMEM_PATH_AUTO, T_CALL_MS, NULL };

/* A number from the server's JSON STATS, e.g. "ops.put.calls", "dedup.replayed". */
static long long srv_stat(const char *path)
{
	char *text = NULL;
	uint32_t len;
	long long v;

	if (rdmem_stats(e.h, 1, &text, &len, NULL) < 0)
		return -1;
	v = e2e_json_num(text, path);
	free(text);
	return v;
}

static int put_str(const char *key, const char *val)
{
	return rdmem_put(e.h, key, (uint32_t)strlen(key), val, (uint32_t)strlen(val), &auto_opts);
}

/* 1: the key holds exactly val; 0: other bytes; -errno: the GET failed. */
static int get_is(const char *key, const char *val)
{
	void *got = NULL;
	uint32_t len = 0;
	int ret = rdmem_get(e.h, key, (uint32_t)strlen(key), &got, &len, &auto_opts);

	if (ret == 0)
		ret = len == strlen(val) && memcmp(got, val, len) == 0;
	free(got);
	return ret;
}

/* Since the counts r0 (runs of the op, by its STATS name) and p0 (replays)
 * were taken: the op ran dr more times and dp retries were replayed. */
#define CHECK_RUNS(stat, r0, p0, dr, dp)                                                           \
	do {                                                                                       \
		CHECK_EQ(srv_stat(stat) - (r0), dr);                                               \
		CHECK_EQ(srv_stat("dedup.replayed") - (p0), dp);                                   \
	} while (0)

/* ---- through the agent ---------------------------------------------------- */

static void test_del_retried_runs_once(void)
{
	long long runs, replayed, fallbacks;

	REQUIRE(put_str("eo-del", "x") == 0);
	runs = srv_stat("ops.del.calls");
	replayed = srv_stat("dedup.replayed");
	fallbacks = e2e_stat(&e, "fallbacks");
	REQUIRE(e2e_ctl(&e, "simulate-rdma-reply-loss 1") == 0);
	/* On RDMA the server deletes; the reply is lost; AUTO sends it again on TCP. */
	CHECK_EQ(rdmem_del(e.h, "eo-del", 6, &auto_opts), 0);
	CHECK_RUNS("ops.del.calls", runs, replayed, 1, 1);
	CHECK_EQ(e2e_stat(&e, "fallbacks") - fallbacks, 1);
	CHECK_EQ(get_is("eo-del", "x"), -ENOENT);
	/* A new DEL is a new call: it runs and finds nothing. */
	CHECK_EQ(rdmem_del(e.h, "eo-del", 6, &auto_opts), -ENOENT);
}

/* A PUT whose reply was lost runs once: on RDMA then TCP (AUTO's retry), and
 * on TCP then a new TCP connection of the same agent (the TCP actor's retry). */
static void test_put_retried_applies_once(void)
{
	long long runs, replayed, retried;

	runs = srv_stat("ops.put.calls");
	replayed = srv_stat("dedup.replayed");
	REQUIRE(e2e_ctl(&e, "simulate-rdma-reply-loss 1") == 0);
	CHECK_EQ(e2e_stat(&e, "simulate.reply_loss"), 1); /* agent-stats shows it pending */
	CHECK_EQ(put_str("eo-put", "first"), 0);
	CHECK_EQ(e2e_stat(&e, "simulate.reply_loss"), 0);
	CHECK_RUNS("ops.put.calls", runs, replayed, 1, 1);
	CHECK_EQ(get_is("eo-put", "first"), 1);
	REQUIRE(e2e_ctl(&e, "force-path tcp") == 0);
	retried = e2e_stat(&e, "paths.tcp.retried");
	runs = srv_stat("ops.put.calls");
	replayed = srv_stat("dedup.replayed");
	REQUIRE(e2e_ctl(&e, "simulate-tcp-reply-loss 1") == 0);
	CHECK_EQ(e2e_stat(&e, "simulate.tcp_reply_loss"), 1);
	CHECK_EQ(put_str("eo-put2", "old"), 0);
	CHECK_EQ(e2e_stat(&e, "simulate.tcp_reply_loss"), 0);
	CHECK_RUNS("ops.put.calls", runs, replayed, 1, 1);
	CHECK_EQ(e2e_stat(&e, "paths.tcp.retried") - retried, 1);
	CHECK_EQ(get_is("eo-put2", "old"), 1);
	REQUIRE(e2e_ctl(&e, "force-path auto") == 0);
}

/* Every chunk's RDMA reply is lost; each retry is answered from the window. */
static void test_image_chunks_retried(void)
{
	const uint32_t chunk = 16 << 10, total = 3 * chunk + 1000;
	struct rdmem_image_opts io = { .chunk_size = chunk };
	uint8_t *img = malloc(total), *back = malloc(total);
	long long runs, replayed;
	char path[256];
	int fd;

	REQUIRE(img && back);
	e2e_fill(img, total, 42);
	runs = srv_stat("ops.image_chunk.calls");
	replayed = srv_stat("dedup.replayed");
	REQUIRE(e2e_ctl(&e, "simulate-rdma-reply-loss 4") == 0);
	CHECK_EQ(rdmem_image_put(e.h, "eo-image", img, total, &io, &auto_opts), 0);
	CHECK_RUNS("ops.image_chunk.calls", runs, replayed, 4, 4);
	snprintf(path, sizeof(path), "%s/eo-image", e.image_dir);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_EQ(read(fd, back, total), total);
		CHECK(memcmp(img, back, total) == 0);
		close(fd);
	}
	free(img);
	free(back);
}

/* ---- raw connections: the window itself --------------------------------- */

static struct rdmem_tcp_client *raw_connect(void)
{
	struct rdmem_tcp_client *c = NULL;

	if (rdmem_tcp_client_connect(e2e_addr(), (uint16_t)(e.port + 1), 2000, &c) < 0)
		return NULL;
	return c;
}

static uint64_t server_run; /* the server instance the last BIND reply named */

/* BIND; prev: the server instance bound before (0: none). Returns the window. */
static int raw_bind(struct rdmem_tcp_client *c, uint64_t agent, uint32_t next, uint64_t prev)
{
	struct rdmem_tcp_call t;

	memset(&t, 0, sizeof(t));
	t.req.op = RDMEM_OP_BIND;
	t.req.path = RDMEM_PATH_TCP;
	t.req.aux = next;
	t.req.args.raw[0] = agent;
	t.req.args.raw[1] = prev;
	if (rdmem_tcp_client_call(c, &t, 2000) < 0)
		return -EIO;
	if (t.rep.status != RDMEM_S_OK)
		return -(int)t.rep.status - 1000;
	server_run = t.rep.args.raw[1];
	return (int)t.rep.aux;
}

/* A PUT with call id `id`; returns the reply status or -1. */
static int raw_put(struct rdmem_tcp_client *c, uint32_t id, const char *key, const char *val)
{
	struct rdmem_tcp_call t;

	memset(&t, 0, sizeof(t));
	t.req.op = RDMEM_OP_KV_PUT;
	t.req.path = RDMEM_PATH_TCP;
	t.req.flags = RDMEM_F_CALL_ID;
	t.req.aux = id;
	t.req.key_len = (uint16_t)strlen(key);
	t.req.val_len = (uint32_t)strlen(val);
	t.key = key;
	t.val = val;
	if (rdmem_tcp_client_call(c, &t, 2000) < 0)
		return -1;
	return t.rep.status;
}

static uint64_t random_agent(void)
{
	uint64_t id = 0;

	if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
		id = (uint64_t)getpid() << 20;
	return id | 1;
}

/* The same agent on a new connection: its window is still there. */
static void test_rebind_keeps_window(void)
{
	uint64_t agent = random_agent();
	struct rdmem_tcp_client *c = raw_connect();
	long long runs;

	REQUIRE(c);
	CHECK_EQ(raw_bind(c, agent, 5, 0), atoi(T_WINDOW));
	CHECK_EQ(raw_put(c, 5, "eo-rebind", "one"), RDMEM_S_OK);
	rdmem_tcp_client_close(c);
	c = raw_connect();
	REQUIRE(c);
	CHECK_EQ(raw_bind(c, agent, 6, server_run), atoi(T_WINDOW));
	runs = srv_stat("ops.put.calls");
	CHECK_EQ(raw_put(c, 5, "eo-rebind", "two"), RDMEM_S_OK); /* the retry */
	CHECK_EQ(srv_stat("ops.put.calls") - runs, 0);
	CHECK_EQ(get_is("eo-rebind", "one"), 1);
	/* A second bind of another agent on a bound connection is refused. */
	CHECK(raw_bind(c, agent + 2, 7, 0) < 0);
	rdmem_tcp_client_close(c);
}

/* Past the window: a retry older than it is answered STALE and not run. */
static void test_flood_past_window(void)
{
	uint32_t window = (uint32_t)atoi(T_WINDOW), i;
	struct rdmem_tcp_client *c = raw_connect();
	long long runs, stale;
	char key[32];

	REQUIRE(c);
	CHECK_EQ(raw_bind(c, random_agent(), 1, 0), window);
	for (i = 1; i <= window + 10; i++) {
		snprintf(key, sizeof(key), "eo-flood-%u", i);
		CHECK_EQ(raw_put(c, i, key, "v1"), RDMEM_S_OK);
	}
	runs = srv_stat("ops.put.calls");
	stale = srv_stat("dedup.stale");
	/* Ids 1..10 left the window: their entries hold ids 65..74. */
	CHECK_EQ(raw_put(c, 1, "eo-flood-1", "v2"), RDMEM_S_STALE);
	CHECK_EQ(raw_put(c, 10, "eo-flood-10", "v2"), RDMEM_S_STALE);
	/* Ids 11..74 are in it: replayed, not run. */
	CHECK_EQ(raw_put(c, 11, "eo-flood-11", "v2"), RDMEM_S_OK);
	CHECK_EQ(raw_put(c, window + 10, "eo-flood-74", "v2"), RDMEM_S_OK);
	CHECK_EQ(srv_stat("ops.put.calls") - runs, 0);
	CHECK_EQ(srv_stat("dedup.stale") - stale, 2);
	CHECK_EQ(get_is("eo-flood-1", "v1"), 1);
	CHECK_EQ(get_is("eo-flood-11", "v1"), 1);
	CHECK_EQ(get_is("eo-flood-74", "v1"), 1);
	/* A new id runs. */
	CHECK_EQ(raw_put(c, window + 11, "eo-flood-75", "v1"), RDMEM_S_OK);
	CHECK_EQ(srv_stat("ops.put.calls") - runs, 1);
	rdmem_tcp_client_close(c);
}

/* An agent with no connection is forgotten after --dedup-idle; coming back
 * to the same server run, its older ids are of unknown outcome: STALE, not
 * run. So are they coming from another server run (this one restarted):
 * they may have run there and been seen before the restart undid them. */
static void test_forgotten_agent(void)
{
	uint64_t agent = random_agent();
	struct rdmem_tcp_client *c;
	long long expired, runs, base, prev;
	int i;

	/* The earlier cases' raw agents expire too: wait until they have, so
	 * the count below moves for ours alone (a global counter that moved
	 * for another agent let this case go on with ours still remembered). */
	base = srv_stat("dedup.agents");
	do {
		prev = base;
		proc_sleep_ms(atoi(T_IDLE_MS) + 500);
		base = srv_stat("dedup.agents");
	} while (base != prev);
	c = raw_connect();
	REQUIRE(c);
	CHECK_EQ(raw_bind(c, agent, 100, 0), atoi(T_WINDOW));
	CHECK_EQ(raw_put(c, 100, "eo-forgot", "one"), RDMEM_S_OK);
	CHECK_EQ(srv_stat("dedup.agents"), base + 1);
	rdmem_tcp_client_close(c);
	expired = srv_stat("dedup.expired");
	for (i = 0; i < 200 && srv_stat("dedup.agents") > base; i++)
		proc_sleep_ms(50);
	CHECK_EQ(srv_stat("dedup.agents"), base);
	CHECK(srv_stat("dedup.expired") > expired);
	c = raw_connect();
	REQUIRE(c);
	CHECK_EQ(raw_bind(c, agent, 101, server_run), atoi(T_WINDOW));
	runs = srv_stat("ops.put.calls");
	CHECK_EQ(raw_put(c, 100, "eo-forgot", "two"), RDMEM_S_STALE);
	CHECK_EQ(raw_put(c, 101, "eo-forgot", "three"), RDMEM_S_OK);
	CHECK_EQ(srv_stat("ops.put.calls") - runs, 1);
	CHECK_EQ(get_is("eo-forgot", "three"), 1);
	rdmem_tcp_client_close(c);
	c = raw_connect();
	REQUIRE(c);
	CHECK_EQ(raw_bind(c, agent + 2, 50, server_run ^ 2), atoi(T_WINDOW));
	runs = srv_stat("ops.put.calls");
	CHECK_EQ(raw_put(c, 49, "eo-restart", "one"), RDMEM_S_STALE);
	CHECK_EQ(get_is("eo-restart", "one"), -ENOENT);
	CHECK_EQ(raw_put(c, 50, "eo-restart", "two"), RDMEM_S_OK);
	CHECK_EQ(srv_stat("ops.put.calls") - runs, 1);
	CHECK_EQ(get_is("eo-restart", "two"), 1);
	rdmem_tcp_client_close(c);
	/* Naming no run is no way around it: an agent whose first BIND reply
	 * never came (the server died first) may have sent ids all the same. */
	c = raw_connect();
	REQUIRE(c);
	CHECK_EQ(raw_bind(c, agent + 3, 50, 0), atoi(T_WINDOW));
	CHECK_EQ(raw_put(c, 49, "eo-restart", "three"), RDMEM_S_STALE);
	CHECK_EQ(get_is("eo-restart", "two"), 1);
	rdmem_tcp_client_close(c);
}

/* Without the window the same fault runs the DEL twice: the retry says ENOENT. */
static void test_no_dedup_control(void)
{
	e2e_stop_agent(&e);
	proc_stop(&e.server, SIGTERM, 5000);
	REQUIRE(e2e_server(&e, e.fabric, "--no-dedup", NULL) == 0);
	REQUIRE(e2e_agent(&e, "--error-threshold", "100", NULL) == 0);
	REQUIRE(put_str("eo-ctl", "x") == 0);
	REQUIRE(e2e_ctl(&e, "simulate-rdma-reply-loss 1") == 0);
	CHECK_EQ(rdmem_del(e.h, "eo-ctl", 6, &auto_opts), -ENOENT);
	CHECK_EQ(srv_stat("dedup.window"), 0);
}

int main(int argc, char **argv)
{
	const char *fabric = argc > 1 ? argv[1] : "shm";

	if (e2e_init(&e, fabric) < 0 ||
	    e2e_server(&e, fabric, "--dedup-window", T_WINDOW, "--dedup-idle", T_IDLE_MS, NULL) <
		0 ||
	    e2e_agent(&e, "--error-threshold", "100", NULL) < 0) {
		printf("not ok - setup\n");
		e2e_fini(&e);
		return 1;
	}
	RUN(test_del_retried_runs_once);
	RUN(test_put_retried_applies_once);
	RUN(test_image_chunks_retried);
	RUN(test_rebind_keeps_window);
	RUN(test_flood_past_window);
	RUN(test_forgotten_agent);
	RUN(test_no_dedup_control);
	e2e_fini(&e);
	return check_done();
}
