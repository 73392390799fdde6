/* test_hook.c - the post-commit hook (server/hook.c): a hook that hangs is
 * killed at its timeout with what it started, commits past the 8 running
 * wait their turn and all run, and past the 64 waiting one is refused and
 * counted, and a reap on another thread never kills a hook being started.
 * Real processes (/bin/sh), no server.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "rdmem/util.h"
#include "server/hook.h"
#include "tmpdir.h"

/* pid is gone or a zombie (killed; whoever adopted it reaps it later). */
static int dead(int pid)
{
	char path[64], state = '?';
	FILE *f;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 1;
	if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
		state = '?';
	fclose(f);
	return state == 'Z' || state == 'X';
}

/* Reaps until nothing runs or waits, up to ms; the time it took, in ms. */
static long reap_all(struct rdmem_hook *h, long ms)
{
	uint64_t t0 = rdmem_now_ns();

	while (rdmem_hook_reap(h) && (long)((rdmem_now_ns() - t0) / 1000000) < ms)
		usleep(10 * 1000);
	return (long)((rdmem_now_ns() - t0) / 1000000);
}

/* A hook that never ends (and starts a child that never ends either) is
 * killed, child included, shortly after its timeout. */
static void test_hung_hook_killed(void)
{
	char cmd[128], pidfile[64];
	struct rdmem_hook *h;
	struct rdmem_hook_stats st;
	long took;
	FILE *f;
	int child = 0;

	snprintf(pidfile, sizeof(pidfile), "%s/rdmem-test-hook.%d", test_tmpdir(), (int)getpid());
	snprintf(cmd, sizeof(cmd), "sleep 30 & echo $! > %s; wait; :", pidfile);
	REQUIRE(rdmem_hook_create(cmd, 300, &h) == 0);
	REQUIRE(rdmem_hook_run(h, "/nonexistent/image") == 0);
	took = reap_all(h, 5000);
	rdmem_hook_stats(h, &st);
	printf("# hung hook: gone after %ld ms (timeout 300 ms)\n", took);
	CHECK(took >= 300 && took < 2000);
	CHECK_EQ(st.timed_out, 1);
	CHECK_EQ(st.failures, 1);
	CHECK_EQ(st.running, 0);
	f = fopen(pidfile, "r");
	REQUIRE(f);
	CHECK(fscanf(f, "%d", &child) == 1);
	fclose(f);
	unlink(pidfile);
	/* The background sleep was in the hook's process group: killed too. */
	CHECK(child > 0 && dead(child));
	rdmem_hook_destroy(h);
}

/* 12 commits at once: 8 run, 4 wait, and every one runs in the end. */
static void test_commits_wait_their_turn(void)
{
	struct rdmem_hook *h;
	struct rdmem_hook_stats st;
	char path[32];
	int i;

	REQUIRE(rdmem_hook_create("sleep 0.2; true", 10000, &h) == 0);
	for (i = 0; i < 12; i++) {
		snprintf(path, sizeof(path), "/img/%d", i);
		CHECK_EQ(rdmem_hook_run(h, path), 0);
	}
	rdmem_hook_stats(h, &st);
	CHECK_EQ(st.running, RDMEM_HOOK_MAX_RUNNING);
	CHECK_EQ(st.waiting, 12 - RDMEM_HOOK_MAX_RUNNING);
	reap_all(h, 5000);
	rdmem_hook_stats(h, &st);
	CHECK_EQ(st.runs, 12);
	CHECK_EQ(st.failures, 0);
	CHECK_EQ(st.waiting, 0);
	rdmem_hook_destroy(h);
}

/* Past 8 running and 64 waiting, a commit's hook is refused and counted. */
static void test_queue_full_refused(void)
{
	struct rdmem_hook *h;
	struct rdmem_hook_stats st;
	unsigned i;

	REQUIRE(rdmem_hook_create("sleep 5; :", 10000, &h) == 0);
	for (i = 0; i < RDMEM_HOOK_MAX_RUNNING + RDMEM_HOOK_QUEUE; i++)
		CHECK_EQ(rdmem_hook_run(h, "/img/x"), 0);
	CHECK_EQ(rdmem_hook_run(h, "/img/one-too-many"), -EBUSY);
	rdmem_hook_stats(h, &st);
	CHECK_EQ(st.failures, 1);
	CHECK_EQ(st.waiting, RDMEM_HOOK_QUEUE);
	rdmem_hook_destroy(h); /* stops the 8 running, drops the 64 waiting */
}

/* The service tick reaps on its thread while a worker starts hooks on
 * another (server/service.c). A reap that read the clock before it waited
 * for the lock a spawn held saw the new hook start after "now", and the
 * unsigned age wrapped past any timeout: the hook was killed at birth.
 * In CI that killed the stand-in of tests/integration/yolo.sh. */
struct reaper {
	struct rdmem_hook *h;
	_Atomic int stop;
};

static void *reap_loop(void *arg)
{
	struct reaper *r = arg;

	while (!atomic_load_explicit(&r->stop, memory_order_relaxed))
		rdmem_hook_reap(r->h);
	return NULL;
}

static void test_reap_racing_a_start_kills_nothing(void)
{
	struct reaper r = { 0 };
	struct rdmem_hook_stats st;
	pthread_t t;
	int i;

	REQUIRE(rdmem_hook_create("exit 0", 60000, &r.h) == 0);
	REQUIRE(pthread_create(&t, NULL, reap_loop, &r) == 0);
	for (i = 0; i < 200; i++) {
		CHECK_EQ(rdmem_hook_run(r.h, "/img/raced"), 0);
		usleep(1000);
	}
	atomic_store_explicit(&r.stop, 1, memory_order_relaxed);
	pthread_join(t, NULL);
	reap_all(r.h, 5000);
	rdmem_hook_stats(r.h, &st);
	printf("# 200 hooks started while another thread reaped: %llu timed out, %llu failed\n",
	       (unsigned long long)st.timed_out, (unsigned long long)st.failures);
	CHECK_EQ(st.runs, 200);
	CHECK_EQ(st.timed_out, 0);
	CHECK_EQ(st.failures, 0);
	rdmem_hook_destroy(r.h);
}

/* A hook that ignores SIGTERM does not hold the server's stop past ~1 s. */
static void test_stop_kills_a_stubborn_hook(void)
{
	struct rdmem_hook *h;
	uint64_t t0;

	REQUIRE(rdmem_hook_create("trap '' TERM; sleep 30; :", 60000, &h) == 0);
	REQUIRE(rdmem_hook_run(h, "/img/stubborn") == 0);
	usleep(100 * 1000); /* the trap is set */
	t0 = rdmem_now_ns();
	rdmem_hook_destroy(h);
	printf("# stubborn hook stopped in %llu ms\n",
	       (unsigned long long)((rdmem_now_ns() - t0) / 1000000));
	CHECK(rdmem_now_ns() - t0 < 3000000000ull);
}

int main(void)
{
	rdmem_log_init("test_hook", 0);
	RUN(test_hung_hook_killed);
	RUN(test_commits_wait_their_turn);
	RUN(test_queue_full_refused);
	RUN(test_stop_kills_a_stubborn_hook);
	RUN(test_reap_racing_a_start_kills_nothing);
	return check_done();
}
