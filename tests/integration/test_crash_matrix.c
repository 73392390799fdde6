/* test_crash_matrix.c - kill -9 at random moments under load: client
 * processes (mid-submit, mid-wait), the agent, the server, while 16 client
 * processes run mixed ops. Afterwards: no wrong reply was ever delivered,
 * every acknowledged PUT was readable while its server lived, every call
 * succeeded or failed with a clear error within its timeout, nothing hung,
 * the agent came back to a restarted server in bounded time, and clients
 * recovered from agent restarts. The fault schedule is seeded (RDMEM_SEED)
 * and printed, so a failure can be replayed.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "check.h"
#include "e2e.h"

#define WORKERS	     16
#define RUN_MS	     8000
#define CALL_TIMEOUT 1000 /* ms */
#define LATE_SLACK   700  /* ms a call may overrun its timeout by, on a loaded 2-vCPU box */

/* Shared between the controller and the workers (MAP_SHARED). */
struct shared {
	atomic_uint server_gen; /* odd while the server is down or restarting */
	atomic_int stop;
	atomic_ullong calls, ok, clear_errors, timeouts, wrong, unclear, overdue, lost_puts;
	atomic_ullong puts_checked; /* GETs of a PUT acked by the server still living */
	/* clear errors by kind, printed so a low success fraction says why */
	atomic_ullong unreach, shutdown, refused, busy, stale;
	atomic_int first_unclear;
};

static struct e2e e;
static struct shared *sh;

/* Errors that name what went wrong (the server or agent is gone, refused,
 * busy; for a PUT also ESTALE: sent to a server that then restarted, it may
 * have run there). A timeout names nothing: it is counted on its own and
 * bounded. A GET, LARGE_GET or ECHO never gets ESTALE on AUTO. */
static int clear_error(int rc, int put)
{
	return rc == -EHOSTUNREACH || rc == -ESHUTDOWN || rc == -ECONNREFUSED || rc == -EBUSY ||
	       (put && rc == -ESTALE);
}

/* Accounts one finished call; a non-zero rc must be a clear error or a timeout. */
static void account(int rc, uint64_t t0, int put)
{
	uint64_t ms = (rdmem_now_ns() - t0) / 1000000;

	atomic_fetch_add(&sh->calls, 1);
	if (rc == 0)
		atomic_fetch_add(&sh->ok, 1);
	else if (clear_error(rc, put)) {
		atomic_fetch_add(&sh->clear_errors, 1);
		atomic_fetch_add(rc == -EHOSTUNREACH   ? &sh->unreach
				 : rc == -ESHUTDOWN    ? &sh->shutdown
				 : rc == -ECONNREFUSED ? &sh->refused
				 : rc == -EBUSY	       ? &sh->busy
						       : &sh->stale,
				 1);
	} else if (rc == -ETIMEDOUT)
		atomic_fetch_add(&sh->timeouts, 1);
	else if (atomic_fetch_add(&sh->unclear, 1) == 0)
		atomic_store(&sh->first_unclear, rc);
	if (ms > CALL_TIMEOUT + LATE_SLACK)
		atomic_fetch_add(&sh->overdue, 1);
	/* No agent (it is restarting): back off like the rdmem_open retry below.
	 * A refusal costs ~7 us through the agent's socket, 3x less than the
	 * old /dev/shm attach; unpaced, refusals flooded the count of calls and
	 * sank the success fraction checked at the end. */
	if (rc == -ECONNREFUSED)
		proc_sleep_ms(1);
}

struct acked {
	unsigned gen; /* server generation the PUT was acknowledged in */
	uint32_t len, seed;
};

static void worker_get_back(rdmem_t *h, int id, int k, const struct acked *a, uint8_t *buf)
{
	struct rdmem_opts o = { RDMEM_PATH_AUTO, CALL_TIMEOUT, NULL };
	char key[32];
	void *got = NULL;
	uint32_t len = 0;
	uint64_t t0 = rdmem_now_ns();
	int rc;

	snprintf(key, sizeof(key), "cm-%d-%d", id, k);
	rc = rdmem_get(h, key, (uint32_t)strlen(key), &got, &len, &o);
	if (rc == -ENOENT) {
		/* Acceptable only if the server restarted since the PUT was acked. */
		if (atomic_load(&sh->server_gen) == a->gen)
			atomic_fetch_add(&sh->lost_puts, 1);
		rc = 0;
	} else if (rc == 0) {
		e2e_fill(buf, a->len, a->seed);
		if (len != a->len || memcmp(got, buf, len) != 0)
			atomic_fetch_add(&sh->wrong, 1);
		if (atomic_load(&sh->server_gen) == a->gen)
			atomic_fetch_add(&sh->puts_checked, 1);
	}
	free(got);
	account(rc, t0, 0);
}

static void worker_put(rdmem_t *h, int id, int k, struct acked *a, uint8_t *buf, uint32_t seed)
{
	struct rdmem_opts o = { RDMEM_PATH_AUTO, CALL_TIMEOUT, NULL };
	uint32_t len = seed % 9000; /* EAGER and BULK sizes */
	unsigned gen = atomic_load(&sh->server_gen);
	uint64_t t0 = rdmem_now_ns();
	char key[32];
	int rc;

	snprintf(key, sizeof(key), "cm-%d-%d", id, k);
	e2e_fill(buf, len, seed);
	rc = rdmem_put(h, key, (uint32_t)strlen(key), buf, len, &o);
	/* Remember it only if the same server generation saw it start and end. */
	if (rc == 0 && !(gen & 1) && atomic_load(&sh->server_gen) == gen)
		*a = (struct acked){ gen, len, seed };
	else
		a->gen = 1; /* odd: never checked */
	account(rc, t0, 1);
}

static void worker_other(rdmem_t *h, uint32_t r)
{
	struct rdmem_opts o = { RDMEM_PATH_AUTO, CALL_TIMEOUT, NULL };
	uint64_t t0 = rdmem_now_ns();
	void *out = NULL;
	uint32_t len;
	int rc;

	if (r % 2) {
		rc = rdmem_large_get(h, "big:100k", &out, &len, &o);
		if (rc == 0 && rdmem_big_verify(100 << 10, 0, out, len) != len)
			atomic_fetch_add(&sh->wrong, 1);
	} else {
		rc = rdmem_echo(h, &r, sizeof(r), &out, &len, &o);
		if (rc == 0 && (len != sizeof(r) || memcmp(out, &r, len) != 0))
			atomic_fetch_add(&sh->wrong, 1);
	}
	free(out);
	account(rc, t0, 0);
}

static void worker(int id, unsigned seed)
{
	struct acked acked[64] = { 0 };
	uint8_t *buf = malloc(16384);
	rdmem_t *h = NULL;

	while (!atomic_load(&sh->stop)) {
		uint32_t r = (uint32_t)rand_r(&seed);
		/* Not r % 64: with r % 4 choosing the op, a GET-back (r % 4 == 1)
		 * would only ever pick keys no PUT (r % 4 == 0) wrote. */
		int k = (int)((r >> 8) % 64);

		if (!h && rdmem_open(e.shm, &h) < 0) {
			h = NULL; /* the agent is restarting: try again shortly */
			proc_sleep_ms(20);
			continue;
		}
		if (r % 4 == 0)
			worker_put(h, id, k, &acked[k], buf, r);
		else if (r % 4 == 1 && !(acked[k].gen & 1) && acked[k].gen)
			worker_get_back(h, id, k, &acked[k], buf);
		else
			worker_other(h, r);
	}
	rdmem_close(h);
	free(buf);
	_exit(0);
}

static pid_t spawn_worker(int id, unsigned seed)
{
	pid_t pid = fork();

	if (pid == 0)
		worker(id, seed);
	return pid;
}

/* Waits until the agent's RDMA link is back up; returns the milliseconds, or -1. */
static long wait_link_up(void)
{
	uint64_t t0 = rdmem_now_ns();
	int i;

	for (i = 0; i < 1000; i++) {
		if (e.h && e2e_stat(&e, "link_up") == 1)
			return (long)((rdmem_now_ns() - t0) / 1000000);
		proc_sleep_ms(10);
	}
	return -1;
}

/* Kills and restarts the server; returns -1 when it would not start again
 * (a failure of the run: lost-PUT checking would be off from then on). */
static int restart_server(long *reconnect_ms)
{
	atomic_fetch_add(&sh->server_gen, 1); /* odd: down */
	kill(e.server.pid, SIGKILL);
	proc_stop(&e.server, SIGKILL, 2000);
	proc_sleep_ms(300);
	if (e2e_server(&e, "shm", NULL) < 0)
		return -1;
	*reconnect_ms = wait_link_up();
	atomic_fetch_add(&sh->server_gen, 1); /* even: up */
	return 0;
}

/* Kills and restarts the agent; -1 when it would not start again. */
static int restart_agent(void)
{
	kill(e.agent.pid, SIGKILL);
	proc_stop(&e.agent, SIGKILL, 2000);
	rdmem_close(e.h);
	e.h = NULL;
	proc_sleep_ms(200);
	if (e2e_agent(&e, NULL) < 0) {
		e.h = NULL;
		return -1;
	}
	return 0;
}

static void test_crash_matrix(void)
{
	unsigned seed = check_seed("crash matrix", (unsigned)rdmem_now_ns());
	pid_t pids[WORKERS];
	long reconnect_ms[8];
	int nreconnect = 0, i, hung = 0, kills = 0, restart_failed = 0, restarts = 0;
	uint64_t end;

	/* Even and non-zero: PUTs acked by the first server are checked too
	 * (an acked generation of 0 reads as "never acked"). */
	atomic_store(&sh->server_gen, 2);
	for (i = 0; i < WORKERS; i++)
		pids[i] = spawn_worker(i, seed + (unsigned)i);
	end = rdmem_now_ns() + RUN_MS * 1000000ull;
	while (rdmem_now_ns() < end) {
		unsigned r = (unsigned)rand_r(&seed);
		int w = (int)(r % WORKERS);

		proc_sleep_ms(150 + (int)(r % 400));
		switch (r % 7) {
		case 0:
			if (restart_server(&reconnect_ms[nreconnect]) < 0) {
				restart_failed++;
				goto out; /* nothing more to learn without a server */
			}
			nreconnect += nreconnect < 7;
			restarts++;
			break;
		case 1:
			if (restart_agent() < 0) {
				restart_failed++;
				goto out;
			}
			restarts++;
			break;
		default: /* a client, at whatever point of a call it is */
			kill(pids[w], SIGKILL);
			waitpid(pids[w], NULL, 0);
			pids[w] = spawn_worker(w, r);
			kills++;
		}
	}
out:
	atomic_store(&sh->stop, 1);
	for (i = 0; i < WORKERS; i++) {
		int waited;

		for (waited = 0; waited < 5000 && waitpid(pids[i], NULL, WNOHANG) == 0;
		     waited += 10)
			proc_sleep_ms(10);
		if (waited >= 5000) {
			hung++;
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
		}
	}
	printf("# %llu calls: %llu ok, %llu clear errors, %llu timeouts; %llu acked PUTs read "
	       "back; %d clients killed; %d server restarts, %d restarts in all\n",
	       (unsigned long long)sh->calls, (unsigned long long)sh->ok,
	       (unsigned long long)sh->clear_errors, (unsigned long long)sh->timeouts,
	       (unsigned long long)sh->puts_checked, kills, nreconnect, restarts);
	printf("# clear errors: EHOSTUNREACH %llu, ESHUTDOWN %llu, ECONNREFUSED %llu, EBUSY %llu, "
	       "ESTALE %llu\n",
	       (unsigned long long)sh->unreach, (unsigned long long)sh->shutdown,
	       (unsigned long long)sh->refused, (unsigned long long)sh->busy,
	       (unsigned long long)sh->stale);
	for (i = 0; i < nreconnect; i++)
		printf("# agent back on RDMA %ld ms after server restart %d\n", reconnect_ms[i],
		       i + 1);
	CHECK_EQ(sh->wrong, 0);
	CHECK_EQ(sh->lost_puts, 0);
	CHECK_EQ(sh->unclear, 0);
	if (sh->unclear)
		fprintf(stderr, "  first unclear error: %s\n", rdmem_strerror(sh->first_unclear));
	CHECK_EQ(sh->overdue, 0);
	CHECK_EQ(hung, 0);
	/* Every restart worked (else lost-PUT checking would have stopped), and
	 * the lost-PUT check did check: acked PUTs were read back. */
	CHECK_EQ(restart_failed, 0);
	CHECK(sh->puts_checked > 0);
	/* A timeout is not a clear error: at most one per worker per restart
	 * (the call in flight when its server or agent died; measured: none). */
	CHECK(sh->timeouts <= (unsigned long long)(restarts * WORKERS));
	/* Most calls succeed: measured 83-95 % in five runs here, so three in
	 * four must. Under make asan/tsan a served call costs several times
	 * more while a refused one stays cheap (measured 49 % ok under ASan on
	 * a loaded 2-vCPU box): there one in three must. */
	CHECK(sh->ok * (getenv("RDMEM_SANITIZER") ? 3 : 4) >=
	      sh->calls * (getenv("RDMEM_SANITIZER") ? 1 : 3));
	for (i = 0; i < nreconnect; i++)
		CHECK(reconnect_ms[i] >= 0 && reconnect_ms[i] < 5000);
	/* And the system still serves. */
	REQUIRE(e.h);
	CHECK_EQ(rdmem_put(e.h, "after", 5, "ok", 2, NULL), 0);
}

int main(void)
{
	rdmem_log_init("test_crash_matrix", 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || e2e_init(&e, "shm") < 0)
		return 1;
	snprintf(e.clients, sizeof(e.clients), "40");
	snprintf(e.slots, sizeof(e.slots), "2");
	if (e2e_server(&e, "shm", NULL) < 0 || e2e_agent(&e, NULL) < 0) {
		printf("not ok - start server and agent\n");
		e2e_fini(&e);
		return 1;
	}
	RUN(test_crash_matrix);
	e2e_fini(&e);
	return check_done();
}
