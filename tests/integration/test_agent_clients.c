/* test_agent_clients.c - many client processes through one agent, and the
 * faults around them: a client killed mid-run, the agent restarted, the
 * server restarted, a second agent killed next to a working one. Real
 * processes over the fabric named by argv[1] (shm by default; the rxe suite
 * passes verbs), and the path counters prove the calls went over RDMA.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "e2e.h"

static struct e2e e;

/* One client process: n rounds of PUT, GET (verified), ECHO, DEL on its own keys. */
static int client_work(const char *shm, int id, int n, int tolerate_outage)
{
	uint8_t val[512], echo_in[64];
	rdmem_t *h;
	int i, bad = 0, outage = 0;

	if (rdmem_open(shm, &h) < 0)
		return 100;
	for (i = 0; i < n && bad < 5; i++) {
		char key[32];
		void *got = NULL;
		uint32_t len = 0, sz = (uint32_t)((id * 131 + i * 17) % sizeof(val));
		int rc;

		snprintf(key, sizeof(key), "c%d-%d", id, i % 50);
		e2e_fill(val, sz, (uint32_t)(id * 100000 + i));
		rc = rdmem_put(h, key, (uint32_t)strlen(key), val, sz, NULL);
		if (rc == 0)
			rc = rdmem_get(h, key, (uint32_t)strlen(key), &got, &len, NULL);
		if (rc == 0 && (len != sz || memcmp(got, val, sz) != 0)) {
			fprintf(stderr, "client %d: wrong value for %s\n", id, key);
			bad += 5; /* a wrong reply is never tolerated */
		}
		free(got);
		got = NULL;
		if (rc == 0) {
			e2e_fill(echo_in, sizeof(echo_in), (uint32_t)i);
			rc = rdmem_echo(h, echo_in, sizeof(echo_in), &got, &len, NULL);
			if (rc == 0 && (len != sizeof(echo_in) || memcmp(got, echo_in, len)))
				bad += 5;
			free(got);
		}
		if (rc == 0)
			continue;
		/* During a restart a call may fail, clearly, and the next one recovers. */
		if (tolerate_outage && (rc == -ESHUTDOWN || rc == -ECONNREFUSED ||
					rc == -EHOSTUNREACH || rc == -ETIMEDOUT)) {
			outage++;
			proc_sleep_ms(20);
			continue;
		}
		fprintf(stderr, "client %d: call %d failed: %s\n", id, i, rdmem_strerror(rc));
		bad++;
	}
	rdmem_close(h);
	return bad ? 1 : (outage > n / 2 ? 2 : 0);
}

static pid_t spawn_client(const char *shm, int id, int n, int tolerate)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(client_work(shm, id, n, tolerate));
	return pid;
}

static int wait_status(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Calls the agent carried over RDMA (every RDMA path) so far. */
static long long rdma_calls(void)
{
	return e2e_stat(&e, "paths.eager.ok") + e2e_stat(&e, "paths.lazy.ok") +
	       e2e_stat(&e, "paths.bulk.ok");
}

/* 32 clients x 2000 rounds; one more client is killed -9 in the middle. */
static void test_32_clients_and_a_killed_one(void)
{
	pid_t pids[32], victim;
	long long dead_before = e2e_stat(&e, "frontdoor.dead_clients");
	long long rdma_before = rdma_calls(), tcp_before = e2e_stat(&e, "paths.tcp.ok");
	long long rdma_delta, tcp_delta;
	int i, failed = 0;

	victim = spawn_client(e.shm, 99, 1000000, 0);
	for (i = 0; i < 32; i++)
		pids[i] = spawn_client(e.shm, i, 2000, 0);
	proc_sleep_ms(300);
	kill(victim, SIGKILL);
	CHECK_EQ(wait_status(victim), 128 + SIGKILL);
	for (i = 0; i < 32; i++)
		failed += wait_status(pids[i]) != 0;
	CHECK_EQ(failed, 0);
	/* Over RDMA, not quietly over TCP: each of the 32 clients made 3 calls
	 * (PUT, GET, ECHO) a round, 2000 rounds, all on AUTO with small values,
	 * which AUTO sends EAGER while the link is up. */
	rdma_delta = rdma_calls() - rdma_before;
	tcp_delta = e2e_stat(&e, "paths.tcp.ok") - tcp_before;
	printf("# %s: %lld calls over RDMA, %lld over TCP\n", e.fabric, rdma_delta, tcp_delta);
	CHECK_EQ(e2e_stat(&e, "link_up"), 1);
	CHECK(rdma_delta >= 32 * 2000 * 3);
	CHECK_EQ(tcp_delta, 0);
	/* The agent notices the dead client and takes its entry back; the 32
	 * that exited detach asynchronously too (the agent frees an entry when
	 * it sees the connection close), so wait for both, not the first
	 * reclaim to move the counter. */
	for (i = 0; i < 150 && (e2e_stat(&e, "frontdoor.dead_clients") <= dead_before ||
				e2e_stat(&e, "frontdoor.clients") != 1);
	     i++)
		proc_sleep_ms(20);
	CHECK(e2e_stat(&e, "frontdoor.dead_clients") > dead_before);
	CHECK_EQ(e2e_stat(&e, "frontdoor.clients"), 1); /* only this test's handle */
}

static int restart_agent(void)
{
	e2e_stop_agent(&e);
	return e2e_agent(&e, NULL);
}

/* Clients keep calling across an agent restart and recover by themselves. */
static void test_agent_restart(void)
{
	pid_t pids[4];
	int i, ok = 0;

	for (i = 0; i < 4; i++)
		pids[i] = spawn_client(e.shm, 200 + i, 600, 1);
	proc_sleep_ms(200);
	REQUIRE(restart_agent() == 0);
	for (i = 0; i < 4; i++)
		ok += wait_status(pids[i]) == 0;
	CHECK_EQ(ok, 4);
	CHECK_EQ(rdmem_put(e.h, "after-agent-restart", 19, "x", 1, NULL), 0);
}

/* A killed agent: waiting clients get a clear error fast; a new agent takes over. */
static void test_agent_killed(void)
{
	rdmem_t *h;
	uint64_t t0;
	int rc;

	REQUIRE(rdmem_open(e.shm, &h) == 0);
	CHECK_EQ(rdmem_ping(h, NULL), 0);
	kill(e.agent.pid, SIGKILL);
	proc_stop(&e.agent, SIGKILL, 1000);
	t0 = rdmem_now_ns();
	rc = rdmem_ping(h, NULL);
	CHECK(rc == -ESHUTDOWN || rc == -ECONNREFUSED);
	CHECK(rdmem_now_ns() - t0 < 2000000000ull); /* well before the 5 s timeout */
	rdmem_close(e.h);
	e.h = NULL;
	REQUIRE(e2e_agent(&e, NULL) == 0);
	CHECK_EQ(rdmem_ping(h, NULL), 0); /* the old handle re-attached */
	rdmem_close(h);
}

/* The server goes away and comes back: the agent reconnects, calls succeed. */
static void test_server_restart(void)
{
	uint64_t t0;
	int rc = -1, i;

	CHECK_EQ(rdmem_put(e.h, "srv", 3, "1", 1, NULL), 0);
	proc_stop(&e.server, SIGTERM, 5000);
	{
		struct rdmem_opts o = { RDMEM_PATH_AUTO, 300, NULL };

		rc = rdmem_ping(e.h, &o);
		CHECK(rc == -EHOSTUNREACH || rc == -ETIMEDOUT);
	}
	REQUIRE(e2e_server(&e, e.fabric, NULL) == 0);
	t0 = rdmem_now_ns();
	for (i = 0; i < 500; i++) {
		if ((rc = rdmem_ping(e.h, NULL)) == 0 && e2e_stat(&e, "link_up") == 1)
			break;
		proc_sleep_ms(10);
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(e2e_stat(&e, "link_up"), 1);
	printf("# agent back on RDMA %.0f ms after the server restarted\n",
	       (rdmem_now_ns() - t0) / 1e6);
	/* The new server starts empty; writes and reads work again on every path. */
	CHECK_EQ(rdmem_put(e.h, "srv", 3, "2", 1, NULL), 0);
	{
		void *v = NULL;
		uint32_t len;

		CHECK_EQ(rdmem_get(e.h, "srv", 3, &v, &len, NULL), 0);
		CHECK(len == 1 && v && ((char *)v)[0] == '2');
		free(v);
	}
}

/* Two agents, two sessions; killing one leaves the other's calls untouched. */
static void test_two_agents(void)
{
	struct proc agent2 = { 0 };
	char shm2[80];
	pid_t c1, c2;

	snprintf(shm2, sizeof(shm2), "%s-b", e.shm);
	REQUIRE(e2e_second_agent(&e, &agent2, shm2, NULL) == 0);
	c1 = spawn_client(e.shm, 300, 3000, 0);
	c2 = spawn_client(shm2, 301, 1000000, 1);
	proc_sleep_ms(200);
	kill(agent2.pid, SIGKILL);
	proc_stop(&agent2, SIGKILL, 1000);
	CHECK_EQ(wait_status(c1), 0);
	kill(c2, SIGKILL);
	wait_status(c2);
}

int main(int argc, char **argv)
{
	const char *fabric = argc > 1 ? argv[1] : "shm";

	rdmem_log_init("test_agent_clients", 0);
	if (e2e_init(&e, fabric) == 0) {
		snprintf(e.clients, sizeof(e.clients), "40");
		snprintf(e.slots, sizeof(e.slots), "4");
	}
	if (e.port == 0 || e2e_server(&e, fabric, NULL) < 0 || e2e_agent(&e, NULL)) {
		printf("not ok - start server and agent over %s\n", fabric);
		e2e_fini(&e);
		return 1;
	}
	RUN(test_32_clients_and_a_killed_one);
	RUN(test_agent_restart);
	RUN(test_agent_killed);
	RUN(test_server_restart);
	RUN(test_two_agents);
	e2e_fini(&e);
	return check_done();
}
