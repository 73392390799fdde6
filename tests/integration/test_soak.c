/* test_soak.c - 64 client processes x mixed calls with random sizes
 * (0 B .. 1 MiB, log-uniform) through one agent: zero mismatches, and the
 * agent's and server's private memory and open files back at their baseline
 * afterwards. CI runs RDMEM_SOAK_CALLS (default 1000) calls per process;
 * `RDMEM_SOAK_CALLS=20000 build/tests/test_soak` is the full run.
 */
#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "check.h"
#include "e2e.h"

#define PROCS 64

struct shared {
	atomic_ullong calls, bytes, mismatches, failures;
	atomic_int first_rc;
};

static struct e2e e;
static struct shared *sh;
static unsigned soak_seed; /* printed; RDMEM_SEED replays a run */

/* log-uniform in [0, 1 MiB]: every size class gets traffic, small ones most. */
static uint32_t soak_size(unsigned *seed)
{
	unsigned bits = (unsigned)rand_r(seed) % 21;
	uint32_t top = 1u << bits;

	return RDMEM_MIN((uint32_t)rand_r(seed) % (top + 1), 1u << 20);
}

static void soak_fail(int rc)
{
	if (atomic_fetch_add(&sh->failures, 1) == 0)
		atomic_store(&sh->first_rc, rc);
}

static void soak_one(rdmem_t *h, int id, unsigned *seed, uint8_t *buf)
{
	uint32_t len = soak_size(seed), r = (uint32_t)rand_r(seed);
	void *got = NULL;
	uint32_t glen = 0;
	char key[32];
	int rc;

	snprintf(key, sizeof(key), "soak-%d-%u", id, r % 8);
	e2e_fill(buf, len, r);
	switch (r % 3) {
	case 0:
		rc = rdmem_put(h, key, (uint32_t)strlen(key), buf, len, NULL);
		if (rc == 0)
			rc = rdmem_get(h, key, (uint32_t)strlen(key), &got, &glen, NULL);
		break;
	case 1:
		rc = rdmem_echo(h, buf, len, &got, &glen, NULL);
		break;
	default: {
		char spec[32];

		snprintf(spec, sizeof(spec), "big:%u", len);
		rc = rdmem_large_get(h, spec, &got, &glen, NULL);
		if (rc == 0 && (glen != len || rdmem_big_verify(len, 0, got, glen) != glen))
			atomic_fetch_add(&sh->mismatches, 1);
		free(got);
		got = NULL;
		glen = len;
		rdmem_big_fill(len, 0, buf, len);
	}
	}
	if (rc)
		soak_fail(rc);
	else if (got && (glen != len || memcmp(got, buf, len) != 0))
		atomic_fetch_add(&sh->mismatches, 1);
	free(got);
	atomic_fetch_add(&sh->calls, 1);
	atomic_fetch_add(&sh->bytes, len);
}

static void soak_proc(int id, int calls)
{
	unsigned seed = soak_seed + (unsigned)id * 7919u;
	uint8_t *buf = malloc(1u << 20);
	rdmem_t *h;
	int i;

	if (!buf || rdmem_open(e.shm, &h) < 0)
		_exit(1);
	for (i = 0; i < calls; i++)
		soak_one(h, id, &seed, buf);
	for (i = 0; i < 8; i++) {
		char key[32];

		snprintf(key, sizeof(key), "soak-%d-%d", id, i);
		rdmem_del(h, key, (uint32_t)strlen(key), NULL);
	}
	rdmem_close(h);
	free(buf);
	_exit(0);
}

static int soak_round(int calls)
{
	pid_t pids[PROCS];
	int i, bad = 0, st;

	for (i = 0; i < PROCS; i++)
		if ((pids[i] = fork()) == 0)
			soak_proc(i, calls);
	for (i = 0; i < PROCS; i++)
		bad += waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st);
	return bad;
}

/* Private (anonymous) resident memory and open files of a process. */
/* What /proc/<pid>/fd holds: a count and, for a failure, the targets. */
struct fd_list {
	int n;
	char text[4096];
};

static void fd_list_of(pid_t pid, struct fd_list *out)
{
	char path[64], link[64 + 1 + 256], target[256];
	struct dirent *d;
	DIR *dir;
	size_t used = 0;

	out->n = 0;
	out->text[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if (!(dir = opendir(path)))
		return;
	while ((d = readdir(dir))) {
		ssize_t len;

		if (d->d_name[0] == '.')
			continue;
		out->n++;
		snprintf(link, sizeof(link), "%s/%s", path, d->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		target[len > 0 ? len : 0] = '\0';
		if (used + strlen(target) + 16 < sizeof(out->text))
			used += (size_t)snprintf(out->text + used, sizeof(out->text) - used,
						 " %s:%s", d->d_name, target);
	}
	closedir(dir);
}

static long anon_kb_of(pid_t pid)
{
	return proc_status_kb(pid, "RssAnon");
}

/*
 * The agent holds one door connection per attached process and frees it
 * when it sees the hang-up; 64 processes that just exited can take it a
 * while under a sanitizer (CI once counted one the baseline still held).
 * Snapshots are taken with only the test's own handle attached.
 */
static void soak_quiesce(void)
{
	int i;

	/* inflight counts the stats call itself. */
	for (i = 0; i < 500 && (e2e_stat(&e, "frontdoor.clients") != 1 ||
				e2e_stat(&e, "frontdoor.inflight") != 1);
	     i++)
		proc_sleep_ms(20);
	CHECK_EQ(e2e_stat(&e, "frontdoor.clients"), 1);
	proc_sleep_ms(300);
}

/*
 * The agent dials its TCP fallback connection on the first call that needs
 * it (a ring-full BUSY retried over TCP, say) and keeps it: two fds in the
 * agent, one in the server. Open it before the baseline so that, with or
 * without such a retry in the run, growth past the baseline is a leak.
 */
static void soak_open_tcp(void)
{
	struct rdmem_opts tcp = { RDMEM_PATH_TCP, 2000, NULL };
	rdmem_t *h;

	CHECK_EQ(rdmem_open(e.shm, &h), 0);
	CHECK_EQ(rdmem_ping(h, &tcp), 0);
	rdmem_close(h);
}

static void test_soak(void)
{
	int calls = getenv("RDMEM_SOAK_CALLS") ? atoi(getenv("RDMEM_SOAK_CALLS")) : 1000;
	struct fd_list af0, sf0, af1, sf1;
	long a0, s0, a1, s1;
	int i;
	uint64_t t0;

	soak_seed = check_seed("soak", 1);
	/*
	 * Baseline after a warm-up round of the same mix: malloc keeps what it
	 * freed for reuse (MiB-sized values raise its mmap threshold), so the
	 * baseline is the warmed-up process; a leak shows as growth past it.
	 */
	CHECK_EQ(soak_round(calls / 2), 0);
	soak_open_tcp();
	soak_quiesce();
	a0 = anon_kb_of(e.agent.pid), s0 = anon_kb_of(e.server.pid);
	fd_list_of(e.agent.pid, &af0);
	fd_list_of(e.server.pid, &sf0);
	t0 = rdmem_now_ns();
	CHECK_EQ(soak_round(calls), 0);
	printf("# soak: %d processes x %d calls, %.1f s, %.1f GB moved\n", PROCS, calls,
	       (rdmem_now_ns() - t0) / 1e9, sh->bytes / 1e9);
	CHECK_EQ(sh->mismatches, 0);
	CHECK_EQ(sh->failures, 0);
	if (sh->failures)
		fprintf(stderr, "  first failure: %s\n", rdmem_strerror(sh->first_rc));
	/* Objects reclaimed, sessions idle: give the agent and server a moment. */
	for (i = 0; i < 50 && e2e_stat(&e, "server.objects_live") != 0; i++)
		proc_sleep_ms(20);
	CHECK_EQ(e2e_stat(&e, "server.objects_live"), 0);
	soak_quiesce();
	a1 = anon_kb_of(e.agent.pid), s1 = anon_kb_of(e.server.pid);
	fd_list_of(e.agent.pid, &af1);
	fd_list_of(e.server.pid, &sf1);
	printf(
	    "# agent: %ld -> %ld KiB private, %d -> %d fds; server: %ld -> %ld KiB, %d -> %d fds\n",
	    a0, a1, af0.n, af1.n, s0, s1, sf0.n, sf1.n);
	CHECK_EQ(af1.n, af0.n);
	CHECK_EQ(sf1.n, sf0.n);
	if (af1.n != af0.n)
		printf("# agent fds before:%s\n# agent fds after:%s\n", af0.text, af1.text);
	if (sf1.n != sf0.n)
		printf("# server fds before:%s\n# server fds after:%s\n", sf0.text, sf1.text);
	/*
	 * ASan's quarantine holds freed memory back (256 MiB by default), and
	 * TSan's allocator keeps freed blocks in per-thread caches and grows its
	 * shadow with every page touched, so RSS grows under both: no bound to
	 * check there. LeakSanitizer checks every process for leaks at exit; the
	 * plain build checks the bound.
	 */
	if (getenv("RDMEM_SANITIZER")) {
		printf("# RSS bound not checked under %s (its allocator keeps freed memory; the "
		       "plain build checks it)\n",
		       getenv("RDMEM_SANITIZER"));
		return;
	}
	/*
	 * The agent does not grow at all (docs/reliability.md: 700 -> 700 KiB;
	 * 524-528 KiB, +0, in six runs here): 1 MiB leaves room for allocator
	 * placement, and a leak of 16 bytes a call (64 x 1000 calls) fails it.
	 * The server's private memory, with glibc's mmap threshold pinned (see
	 * main), grew +0 .. +2.0 MiB in four runs here (unpinned it moved -6.5
	 * .. +8.8 MiB and failed CI): 4 MiB, so a leak of 64 bytes a call
	 * (64 x 1000 calls) fails it.
	 */
	CHECK(a1 - a0 < 1024);
	if (s1 - s0 >= 4096) {
		/* CI once saw the server step up exactly 4 MiB in a round (an arena
		 * or a buffer taking a new heap) with no leak behind it: a leak
		 * grows again in the next round, a one-off step does not. */
		long s2;

		printf("# server +%ld KiB in the round: one more round tells a step from a leak\n",
		       s1 - s0);
		CHECK_EQ(soak_round(calls), 0);
		soak_quiesce();
		s2 = anon_kb_of(e.server.pid);
		printf("# server: %ld -> %ld KiB in the extra round\n", s1, s2);
		CHECK(s2 - s1 < 4096);
	}
}

int main(void)
{
	rdmem_log_init("test_soak", 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || e2e_init(&e, "shm") < 0)
		return 1;
	/*
	 * glibc's mmap threshold moves with the sizes freed (up to 32 MiB), so
	 * whether a freed 1 MiB value goes back to the kernel or stays in an
	 * arena depended on the run's history: the server's RSS moved -6.5 ..
	 * +8.8 MiB between identical runs. Pinned, a value above 128 KiB is
	 * mapped and unmapped, and RSS growth is what is still held.
	 */
	setenv("MALLOC_MMAP_THRESHOLD_", "131072", 1);
	snprintf(e.clients, sizeof(e.clients), "%d", PROCS + 2);
	snprintf(e.slots, sizeof(e.slots), "2");
	if (e2e_server(&e, "shm", NULL) < 0 || e2e_agent(&e, NULL) < 0) {
		printf("not ok - start server and agent\n");
		e2e_fini(&e);
		return 1;
	}
	RUN(test_soak);
	e2e_fini(&e);
	return check_done();
}
