/* test_many_sessions.c - one server, hundreds of sessions: 256 sessions at
 * once with every reply byte-exact; a session flooding at its full lease
 * does not starve the others; a quiet session is served from the quiet lane;
 * a client killed mid-run gives its leases back; sessions join and leave
 * under load, grouped;
 * admission beyond --max-sessions is refused with a reason. The sessions are
 * real links driven by tests/tools/scale_bench (one process, many links).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "e2e.h"

static struct proc server;
static unsigned port;

/* The server with --max-sessions and up to 6 more arguments (NULL-ended). */
static int start_server(const char *max_sessions, ...)
{
	char bin[512], p[16], tp[16];
	va_list ap;
	int n = 15;
	char *argv[24] = { bin,
			   "-b",
			   "127.0.0.1",
			   "-p",
			   p,
			   "--tcp-port",
			   tp,
			   "--fabric",
			   "shm",
			   "--ring-slots",
			   "64",
			   "--objpool-slabs",
			   "8",
			   "--max-sessions",
			   (char *)max_sessions,
			   NULL };

	va_start(ap, max_sessions);
	while (n < 21 && (argv[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;

	port = proc_free_port_pair();
	snprintf(bin, sizeof(bin), "%s/rdmem-server", proc_bin());
	snprintf(p, sizeof(p), "%u", port);
	snprintf(tp, sizeof(tp), "%u", port + 1);
	return proc_start(&server, "server", argv, "listening shm", 10000);
}

/* A number from the server's STATS JSON (e.g. "rdma.leases_taken"), or -1. */
static long long server_stat(const char *path)
{
	static char text[1 << 18];

	return e2e_server_json_at(port + 1, text, sizeof(text)) == 0 ? e2e_json_num(text, path)
								     : -1;
}

/* Runs scale_bench with args; its JSON line into out; returns its exit status. */
static int scale(char *out, size_t cap, const char *args)
{
	char cmd[512];
	FILE *f;
	int st;

	snprintf(cmd, sizeof(cmd), "%s/tests/scale_bench --port %u %s", proc_bin(), port, args);
	if (!(f = popen(cmd, "r")))
		return -1;
	out[0] = '\0';
	if (!fgets(out, (int)cap, f))
		out[0] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_256_sessions_byte_exact(void)
{
	char line[1024];

	char args[128];
	int i;

	REQUIRE(start_server("300", NULL) == 0);
	snprintf(args, sizeof(args), "-n 256 --window 4 --seconds 2 --stats-port %u", port + 1);
	CHECK_EQ(scale(line, sizeof(line), args), 0);
	printf("# %s", line);
	/* What the server says the sessions hold (STATS resources.*, the
	 * scaling curve's columns): one QP, one CQ, four registrations and
	 * 64 + RDMEM_SESSION_RECV_BATCH (32) receives each, and the bytes it
	 * lists per session, 256 times. */
	CHECK_EQ(e2e_json_num(line, "qps_held"), 256);
	CHECK_EQ(e2e_json_num(line, "cqs"), 256);
	CHECK_EQ(e2e_json_num(line, "mrs"), 4 * 256);
	CHECK_EQ(e2e_json_num(line, "recv_wqes"), 256 * (64 + 32));
	CHECK(e2e_json_num(line, "registered_bytes_per_session") > 0);
	CHECK_EQ(e2e_json_num(line, "registered_bytes"),
		 256 * e2e_json_num(line, "registered_bytes_per_session"));
	CHECK_EQ(e2e_json_num(line, "sessions"), 256);
	CHECK(e2e_json_num(line, "ops") > 1000);
	CHECK_EQ(e2e_json_num(line, "wrong"), 0);
	CHECK_EQ(e2e_json_num(line, "errors"), 0);
	/* A lease is a fixed small share of one pool, not a full private region. */
	CHECK(e2e_json_num(line, "reach_bytes_per_session") < (16ll << 20));
	/* 256 sessions on one worker is above --group-threshold (64): grouping
	 * ran, sessions were told to yield at the end of their group's slice.
	 * A hint goes out only from a round that starts in its slice's last
	 * quarter; under TSan a round outlasts that, so no hint is sent there. */
	if (getenv("RDMEM_SANITIZER") && !strcmp(getenv("RDMEM_SANITIZER"), "tsan"))
		printf("# yield hints not checked under TSan (a round outlasts the slice's last "
		       "quarter); the plain and ASan builds check them\n");
	else
		CHECK(e2e_json_num(line, "yields") > 0);
	/* Closed sessions give it all back (a worker closes one within 100 ms). */
	for (i = 0; i < 300 && server_stat("resources.registered_bytes") != 0; i++)
		proc_sleep_ms(10);
	CHECK_EQ(server_stat("resources.qps"), 0);
	CHECK_EQ(server_stat("resources.cqs"), 0);
	CHECK_EQ(server_stat("resources.mrs"), 0);
	CHECK_EQ(server_stat("resources.registered_bytes"), 0);
	CHECK_EQ(server_stat("resources.recv_wqes"), 0);
	proc_stop(&server, SIGTERM, 5000);
}

/*
 * Session 0 floods at its full lease; the other 15 keep their p99 and their
 * share. Grouping is on (--group-threshold 8: groups of at most 4 busy
 * sessions taking turns), so the turns are what is tested, and the flood
 * run must show yields.
 */
static void test_flood_does_not_starve(void)
{
	char calm[1024], flood[1024];
	long long p99_calm, p99_flood, ops_calm, ops_flood;

	REQUIRE(start_server("64", "--group-threshold", "8", "--group-size", "4", NULL) == 0);
	CHECK_EQ(scale(calm, sizeof(calm), "-n 16 --window 1 --seconds 2"), 0);
	CHECK_EQ(scale(flood, sizeof(flood), "-n 16 --window 1 --flood 64 --seconds 2"), 0);
	printf("# calm: %s# flood: %s", calm, flood);
	p99_calm = e2e_json_num(calm, "others_p99_us");
	p99_flood = e2e_json_num(flood, "others_p99_us");
	ops_calm = e2e_json_num(calm, "others_ops");
	ops_flood = e2e_json_num(flood, "others_ops");
	CHECK(e2e_json_num(flood, "yields") > 0);
	/*
	 * Served a batch each in turn: the flooder adds its batch, not its
	 * backlog. docs/reliability.md measured 3.2 ms vs 2.7 ms (1.2x); the
	 * bound is 3x the calm p99 plus 2 ms, for scheduler noise on a shared
	 * 2-vCPU host (a calm p99 moves 2-4 ms between runs here).
	 */
	CHECK(p99_calm > 0 && p99_flood > 0);
	if (getenv("RDMEM_SANITIZER") && !strcmp(getenv("RDMEM_SANITIZER"), "tsan")) {
		/* TSan slows each side 5-15x, unevenly: timings, not turns. */
		printf("# p99 and share bounds not checked under TSan (measured %lld vs %lld us, "
		       "%lld vs %lld calls); the plain and ASan builds check them\n",
		       p99_flood, p99_calm, ops_flood, ops_calm);
		proc_stop(&server, SIGTERM, 5000);
		return;
	}
	CHECK(p99_flood < 3 * p99_calm + 2000);
	/* And the others keep a quarter of the calls they made alone (measured
	 * about half here: the flooder's batches take the rest of the CPU). */
	CHECK(ops_calm > 0 && ops_flood * 4 >= ops_calm);
	proc_stop(&server, SIGTERM, 5000);
}

/* The server's STATS figure once it is above zero (published every 100 ms
 * and when the worker sleeps), or what it is after 3 s. */
static long long server_stat_settled(const char *path)
{
	long long v = -1;
	int i;

	for (i = 0; i < 150 && (v = server_stat(path)) <= 0; i++)
		proc_sleep_ms(20);
	return v;
}

/* The stat once it reads want (up to 3 s): sessions of an earlier run may
 * still be closing, and new ones still connecting (a run under TSan failed
 * on a count taken as soon as it was above 0). */
static long long server_stat_until(const char *path, long long want)
{
	long long v = -1;
	int i;

	for (i = 0; i < 150 && (v = server_stat(path)) != want; i++)
		proc_sleep_ms(20);
	return v;
}

/* A scale_bench run in the background (argv after the port, NULL-ended). */
static pid_t scale_spawn(char *const *args)
{
	char bin[512], p[16];
	char *argv[16] = { bin, "--port", p };
	int n = 3;
	pid_t pid;

	while (n < 15 && (argv[n] = args[n - 3]))
		n++;
	argv[n] = NULL;
	snprintf(bin, sizeof(bin), "%s/tests/scale_bench", proc_bin());
	snprintf(p, sizeof(p), "%u", port);
	if ((pid = fork()) == 0) {
		execv(bin, argv);
		_exit(127);
	}
	return pid;
}

/*
 * The quiet lane (server/lane.h, docs/architecture.md "The quiet lane"):
 * one session at window 1 among 32 flooding at window 16, grouped (groups of
 * 4 busy sessions, so its turn comes about one slice in nine). Its calls are served from
 * the lane, whatever the turn, and every reply stays exact; with
 * --quiet-lane 0 the lane is never polled. A lane member killed mid-run
 * leaves the lane with its session (under ASan a dangling member is a
 * use-after-free). What the lane does to latency is a benchmark figure
 * (scripts/scale_bench.sh), printed here, not asserted.
 */
static void test_quiet_lane(void)
{
	static char *const forever[] = { "-n", "2",	    "--window", "16", "--flood",
					 "1",  "--seconds", "60",	NULL };
	char on[1024], off[1024];
	const char *load = "-n 33 --window 16 --flood 1 --seconds 2";
	long long served;
	pid_t pid;

	REQUIRE(start_server("64", "--group-threshold", "8", "--group-size", "4", NULL) == 0);
	CHECK_EQ(scale(on, sizeof(on), load), 0);
	served = server_stat_settled("lane_served");
	printf("# lane: %s# lane polls %lld served %lld\n", on, server_stat("lane_polls"), served);
	CHECK(e2e_json_num(on, "first_ops") > 0);
	/* A member is never told to hold: at most the hold told before it
	 * joined, which its first lane poll ends with a turn. */
	CHECK(e2e_json_num(on, "first_yields") * 100 <= e2e_json_num(on, "first_ops"));
	CHECK(server_stat("lane_polls") > 0);
	CHECK(served > 0);
	/* A member that dies: its session closes and leaves the lane. */
	pid = scale_spawn(forever);
	CHECK(pid > 0);
	CHECK_EQ(server_stat_until("sessions", 2), 2);
	CHECK(server_stat_settled("lane") >= 1); /* the quiet one is a member */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	for (int i = 0; i < 250 && server_stat("sessions") != 0; i++)
		proc_sleep_ms(20);
	CHECK_EQ(server_stat("sessions"), 0);
	CHECK_EQ(scale(on, sizeof(on), "-n 4 --window 1 --seconds 1"), 0); /* still serves */
	proc_stop(&server, SIGTERM, 5000);

	REQUIRE(start_server("64", "--group-threshold", "8", "--group-size", "4", "--quiet-lane",
			     "0", NULL) == 0);
	CHECK_EQ(scale(off, sizeof(off), load), 0);
	printf("# no lane: %s", off);
	proc_sleep_ms(300); /* a publish (100 ms) after the run */
	CHECK_EQ(server_stat("lane_polls"), 0);
	CHECK_EQ(server_stat("lane_served"), 0);
	proc_stop(&server, SIGTERM, 5000);
}

/* A client killed mid-run: the server notices and every lease comes back. */
static void test_killed_client_frees_leases(void)
{
	static char *const args[] = { "-n", "32", "--window", "4", "--seconds", "60", NULL };
	pid_t pid;
	int i;

	REQUIRE(start_server("64", NULL) == 0);
	pid = scale_spawn(args); /* after the server: it dials the server's port */
	CHECK(pid > 0);
	for (i = 0; i < 500 && server_stat("rdma.leases_taken") != 32; i++)
		proc_sleep_ms(20);
	CHECK_EQ(server_stat("rdma.leases_taken"), 32);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	for (i = 0; i < 500 && server_stat("rdma.leases_taken") != 0; i++)
		proc_sleep_ms(20);
	CHECK_EQ(server_stat("rdma.leases_taken"), 0);
	CHECK_EQ(server_stat("sessions"), 0);
	proc_stop(&server, SIGTERM, 5000);
}

/*
 * Sessions joining and leaving under load, grouped (groups of 2 busy
 * sessions above 4): while 16 sessions keep calling, three clients of 4
 * sessions each join, call for a second and leave, and one more is killed
 * -9 mid-run. Every reply of every run stays exact (scale_bench exits 1 on
 * a wrong byte or a failed call), and every lease comes back.
 */
static void test_churn_under_load(void)
{
	static char *const killed[] = { "-n", "4", "--window", "2", "--seconds", "60", NULL };
	char cmd[512], line[1024], flood[1024] = "";
	FILE *bg;
	pid_t pid;
	int i, st;

	REQUIRE(start_server("64", "--group-threshold", "4", "--group-size", "2", NULL) == 0);
	snprintf(cmd, sizeof(cmd), "%s/tests/scale_bench --port %u -n 16 --window 4 --seconds 6",
		 proc_bin(), port);
	REQUIRE((bg = popen(cmd, "r")) != NULL);
	CHECK_EQ(server_stat_until("sessions", 16), 16);
	for (i = 0; i < 3; i++) {
		CHECK_EQ(scale(line, sizeof(line), "-n 4 --window 2 --seconds 1"), 0);
		CHECK(e2e_json_num(line, "ops") > 0);
	}
	pid = scale_spawn(killed);
	CHECK(pid > 0);
	CHECK_EQ(server_stat_until("sessions", 20), 20);
	proc_sleep_ms(200); /* mid-run: its calls in flight */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	if (!fgets(flood, sizeof(flood), bg))
		flood[0] = '\0';
	st = pclose(bg);
	printf("# the 16 under churn: %s", flood);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(e2e_json_num(flood, "ops") > 0);
	CHECK_EQ(e2e_json_num(flood, "wrong"), 0);
	CHECK_EQ(server_stat_until("rdma.leases_taken", 0), 0);
	CHECK_EQ(server_stat("sessions"), 0);
	CHECK_EQ(scale(line, sizeof(line), "-n 4 --window 2 --seconds 1"), 0); /* still serves */
	proc_stop(&server, SIGTERM, 5000);
}

/*
 * STATS is a reply like any other, at most --max-value bytes: with 64
 * sessions listed (~150 B each) it no longer fits 4 KiB, and it used to fail
 * whole. It answers, the counters and the pool's summary in it, the list
 * left out and said so.
 */
static void test_stats_past_max_value(void)
{
	char line[1024], args[128];

	REQUIRE(start_server("80", "--max-value", "4096", NULL) == 0);
	snprintf(args, sizeof(args), "-n 64 --window 1 --seconds 1 --stats-port %u", port + 1);
	CHECK_EQ(scale(line, sizeof(line), args), 0);
	printf("# %s", line);
	CHECK_EQ(e2e_json_num(line, "qps_held"), 64);
	CHECK_EQ(e2e_json_num(line, "mrs"), 4 * 64);
	CHECK_EQ(e2e_json_num(line, "registered_sessions_listed"), 0);
	CHECK_EQ(e2e_json_num(line, "leases_taken"), 64); /* the summary stays */
	proc_stop(&server, SIGTERM, 5000);
}

static void test_admission_refused_clearly(void)
{
	char line[1024];

	REQUIRE(start_server("8", NULL) == 0);
	CHECK(scale(line, sizeof(line), "-n 9 --window 1 --seconds 1") != 0);
	CHECK(proc_log_has(&server, "too many sessions") ||
	      proc_log_has(&server, "--max-sessions"));
	CHECK_EQ(scale(line, sizeof(line), "-n 8 --window 1 --seconds 1"), 0);
	proc_stop(&server, SIGTERM, 5000);
}

int main(void)
{
	rdmem_log_init("test_many_sessions", 0);
	RUN(test_256_sessions_byte_exact);
	RUN(test_flood_does_not_starve);
	RUN(test_quiet_lane);
	RUN(test_killed_client_frees_leases);
	RUN(test_churn_under_load);
	RUN(test_admission_refused_clearly);
	RUN(test_stats_past_max_value);
	return check_done();
}
