/* test_session_reap.c - a killed agent's session is closed within a bound,
 * whatever the server's grouping and polling mode, so its lease comes back
 * and a new agent gets an RDMA session instead of "too many sessions".
 *
 *   test_session_reap [shm|verbs]   (default shm)
 *
 * Each case: agents connect to a server that groups every session on its
 * own (--group-threshold 1 --group-size 1), bench processes keep some
 * sessions busy so their group holds the worker, and one agent (idle, or
 * busy in mid-slice) is killed with -9; the server's session count must drop
 * within reap_ms, the busy agent's calls must go on, and a new agent must then carry calls over RDMA (its EAGER
 * counter moves, its TCP counter does not).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "e2e.h"

#define T_MAX_AGENTS 4

struct reap_case {
	const char *server_args[8]; /* extra server flags, NULL-terminated */
	const char *agent_arg;	    /* an extra agent flag, or NULL */
	int agents;		    /* sessions besides the new one: the last is killed */
	int busy;		    /* agents (from the first) kept busy by a bench */
	int victim;		    /* the agent killed (0: the last, an idle one) */
};

static struct e2e e;
static const char *fabric = "shm";
/* The server's sweep is 100 ms: 1 s leaves room for a loaded host; 5 s for
 * Soft-RoCE under TCG, where the CM's disconnect itself is slow. */
static int reap_ms = 1000;

/* A number from the JSON text op (STATS or AGENT_STATS) of handle h, or -1. */
static long long text_num(rdmem_t *h, int agent, const char *path)
{
	char *text = NULL;
	uint32_t len;
	long long v;
	int ret = agent ? rdmem_agent_stats(h, 1, &text, &len, NULL)
			: rdmem_stats(h, 1, &text, &len, NULL);

	if (ret < 0)
		return -1;
	v = e2e_json_num(text, path);
	free(text);
	return v;
}

/* A bench on agent segment shm for up to 20 s (killed sooner). */
static pid_t bench_start(const char *shm)
{
	char bin[512];
	pid_t pid;

	snprintf(bin, sizeof(bin), "%s/rdmem", proc_bin());
	pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl(bin, bin, "--shm-name", shm, "--timeout", "3000", "bench", "--op", "get",
		      "-n", "50000000", "--window", "4", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void bench_stop(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* An agent on segment shm, logging under name, with the extra flags up to a
 * NULL (a NULL first flag: none). */
static int agent_start(struct proc *p, const char *name, const char *shm, ...)
{
	va_list ap;
	int ret;

	va_start(ap, shm);
	ret = e2e_agent_named(&e, p, name, shm, ap);
	va_end(ap);
	return ret;
}

/* Waits until the server counts want sessions; returns the ms it took, or -1. */
static int sessions_become(long long want, int ms)
{
	uint64_t t0 = rdmem_now_ns();

	while ((rdmem_now_ns() - t0) / 1000000 < (uint64_t)ms) {
		if (text_num(e.h, 0, "sessions") == want)
			return (int)((rdmem_now_ns() - t0) / 1000000);
		proc_sleep_ms(10);
	}
	return -1;
}

/* The first agent's bench goes on: calls complete after the kill too. */
static void check_schedule_goes_on(void)
{
	long long before = text_num(e.h, 1, "paths.eager.ok"), after = before;
	int i;

	for (i = 0; i < 200 && after - before < 10; i++) {
		proc_sleep_ms(10);
		after = text_num(e.h, 1, "paths.eager.ok");
	}
	printf("# %lld calls of the busy agent completed after the kill\n", after - before);
	CHECK(before >= 0 && after - before >= 10);
}

/* A fresh agent gets a session and its calls go over RDMA, not TCP. */
static void check_new_agent_on_rdma(const char *arg)
{
	char shm[96];
	struct proc p;
	rdmem_t *h = NULL;
	struct rdmem_opts o = { RDMEM_PATH_AUTO, 5000, NULL };
	long long eager;

	snprintf(shm, sizeof(shm), "%s-new", e.shm);
	REQUIRE(agent_start(&p, "agent-new", shm, arg, NULL) == 0);
	if (rdmem_open(shm, &h) == 0) {
		CHECK_EQ(text_num(h, 1, "link_up"), 1);
		eager = text_num(h, 1, "paths.eager.ok");
		CHECK_EQ(rdmem_put(h, "reap-k", 6, "v", 1, &o), 0);
		CHECK_EQ(text_num(h, 1, "paths.eager.ok") - eager, 1);
		CHECK_EQ(text_num(h, 1, "paths.tcp.ok"), 0);
		rdmem_close(h);
	} else {
		CHECK(!"rdmem_open of the new agent");
	}
	proc_stop(&p, SIGTERM, 5000);
	e2e_unlink_door(shm);
}

/* One case's processes, so a failed REQUIRE still stops them all. */
static struct {
	struct proc agents[T_MAX_AGENTS]; /* [0] unused: e's own agent */
	char shms[T_MAX_AGENTS][96];
	pid_t bench[T_MAX_AGENTS];
} rig;

/* Soft-RoCE under TCG (2 vCPUs): agents spinning with --busy-poll starve the
 * server's listener there, so on verbs only the server busy-polls. */
static const char *agent_flag(const struct reap_case *c)
{
	return strcmp(fabric, "shm") ? NULL : c->agent_arg;
}

static void case_start(const struct reap_case *c)
{
	const char *sargs[16] = { NULL };
	char max[8];
	int i, n = 0;

	/* Room for exactly these agents: a leaked session leaves no lease. */
	snprintf(max, sizeof(max), "%d", c->agents);
	sargs[n++] = "--max-sessions";
	sargs[n++] = max;
	sargs[n++] = "--group-threshold";
	sargs[n++] = "1";
	sargs[n++] = "--group-size";
	sargs[n++] = "1";
	for (i = 0; c->server_args[i]; i++)
		sargs[n++] = c->server_args[i];
	REQUIRE(e2e_server(&e, fabric, sargs[0], sargs[1], sargs[2], sargs[3], sargs[4], sargs[5],
			   sargs[6], sargs[7], sargs[8], sargs[9], NULL) == 0);
	/* The first agent is e's own (its handle reads the server's STATS). */
	REQUIRE(e2e_agent(&e, agent_flag(c), NULL) == 0);
	snprintf(rig.shms[0], sizeof(rig.shms[0]), "%s", e.shm);
	for (i = 1; i < c->agents; i++) {
		char name[24];

		snprintf(rig.shms[i], sizeof(rig.shms[i]), "%s-%d", e.shm, i);
		snprintf(name, sizeof(name), "agent-%d", i);
		REQUIRE(agent_start(&rig.agents[i], name, rig.shms[i], agent_flag(c), NULL) == 0);
	}
	REQUIRE(sessions_become(c->agents, 30000) >= 0);
	for (i = 0; i < c->busy; i++)
		rig.bench[i] = bench_start(rig.shms[i]);
}

static void case_body(const struct reap_case *c)
{
	int took, v = c->victim ? c->victim : c->agents - 1;

	case_start(c);
	REQUIRE(check_case_failed == 0);
	proc_sleep_ms(300);
	/* An agent in a group of its own dies: idle, or busy in mid-slice. */
	kill(rig.agents[v].pid, SIGKILL);
	waitpid(rig.agents[v].pid, NULL, 0);
	rig.agents[v].pid = 0;
	took = sessions_become(c->agents - 1, reap_ms);
	printf("# killed agent's session closed after %d ms (bound %d)\n", took, reap_ms);
	CHECK(took >= 0);
	check_schedule_goes_on();
	/* Its lease is free again: a new agent gets RDMA while the load goes on. */
	check_new_agent_on_rdma(agent_flag(c));
}

static void run_case(const struct reap_case *c)
{
	int i;

	memset(&rig, 0, sizeof(rig));
	REQUIRE(e2e_init(&e, fabric) == 0);
	case_body(c);
	for (i = 0; i < T_MAX_AGENTS; i++)
		bench_stop(rig.bench[i]);
	for (i = 1; i < c->agents; i++) {
		proc_stop(&rig.agents[i], SIGTERM, 5000);
		e2e_unlink_door(rig.shms[i]);
	}
	e2e_fini(&e);
}

/* --busy-poll on both sides: the worker never sleeps on event fds. */
static void test_reap_grouped_busy_poll(void)
{
	struct reap_case c = { { "--busy-poll", NULL }, "--busy-poll", 2, 1, 0 };

	run_case(&c);
}

/* Sleeping workers too: a busy group keeps the worker from ever blocking. */
static void test_reap_grouped_sleeping(void)
{
	struct reap_case c = { { NULL }, NULL, 2, 1, 0 };

	run_case(&c);
}

/* Two workers, each grouping two sessions, both kept busy by one of them. */
static void test_reap_grouped_two_workers(void)
{
	struct reap_case c = { { "--busy-poll", "--workers", "2", NULL }, "--busy-poll", 4, 2, 0 };

	run_case(&c);
}

/* The killed agent was busy: its group was being served when it died. */
static void test_reap_busy_session_mid_slice(void)
{
	struct reap_case c = { { "--busy-poll", NULL }, "--busy-poll", 3, 2, 1 };

	run_case(&c);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		fabric = argv[1];
	if (strcmp(fabric, "shm"))
		reap_ms = 5000;
	rdmem_log_init("test_session_reap", 0);
	RUN(test_reap_grouped_busy_poll);
	RUN(test_reap_grouped_sleeping);
	RUN(test_reap_grouped_two_workers);
	RUN(test_reap_busy_session_mid_slice);
	return check_done();
}
