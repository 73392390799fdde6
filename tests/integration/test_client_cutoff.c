/* test_client_cutoff.c - a client that keeps misbehaving is disconnected and
 * counted (--client-strikes); an honest one that glitches once is not.
 *
 * A front door (the loopback responder of tests/frontdoor_loopback.h in place
 * of the session actor) with --client-strikes STRIKES; two honest client
 * processes run a checked ECHO workload (random bytes, every reply compared
 * byte for byte). Then:
 *  - the test's own client glitches once: one ring entry for a slot it never
 *    submitted. Counted as a strike, and it stays attached and working.
 *  - a hostile process attaches through the normal library and, through the
 *    mapping it holds, keeps pushing entries for its own slots that it never
 *    submitted and slots with a forged descriptor (an unknown op: answered
 *    -EINVAL, not scored; its entry pushed again finds the slot answered,
 *    which is). It must be cut off within CUT_MS (frontdoor.cut_off), see its calls fail with a
 *    clear error instead of hanging, and be refused when it attaches again
 *    (-EACCES, frontdoor.door_cut_refused).
 *  - (as root) a process of another uid (FOREIGN_UID) attaches and forges
 *    entries naming the test's own client: refused and counted as
 *    frontdoor.unattributed, never scored, and nobody is cut off; then it
 *    misbehaves in its own slots and is cut off itself.
 * Throughout: the honest clients see 0 wrong replies and 0 timeouts, and the
 * front door logs at most LOG_MAX lines.
 *
 * Until the foreign process attaches, every process here has the same uid,
 * so what names the hostile client is attributable to it
 * (docs/architecture.md, "Cutting off a misbehaving client").
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libclient/rdmem.h"
#include "libclient/rdmem_priv.h" /* white box: the attachment's mapping */
#include "tests/check.h"

#include "tests/frontdoor_loopback.h"
#include "tests/tmpdir.h"

#define CLIENTS	    8
#define SLOTS	    8
#define MAX_VALUE   4096
#define HONEST	    2
#define STRIKES	    8
#define CUT_MS	    2000  /* STRIKES bad entries take ms; the rest is the door's tick, sanitizers */
#define LOG_MAX	    24	  /* rate-limited sites: 5 lines per 10 s each, plus "more" lines */
#define FOREIGN_UID 54321 /* no user needed; not the overflow uid (the library refuses it) */
#define FORGED	    64	  /* entries the foreign process forges in another's name */

static char shm_name[128];
static _Atomic uint64_t log_lines; /* front-door lines seen on stderr */
static int log_out = -1;

static void *log_pump(void *arg)
{
	FILE *in = fdopen((int)(intptr_t)arg, "r");
	char line[2048];

	if (!in)
		return NULL;
	while (fgets(line, sizeof(line), in)) {
		if (strstr(line, "front door "))
			atomic_fetch_add(&log_lines, 1);
		if (write(log_out, line, strlen(line)) < 0)
			break;
	}
	fclose(in);
	return NULL;
}

/* Routes fd 2 through a pipe so the test can count the front door's lines. */
static int log_capture(void)
{
	pthread_t t;
	int p[2];

	log_out = dup(2);
	if (log_out < 0 || pipe(p) || dup2(p[1], 2) < 0)
		return -1;
	close(p[1]);
	if (pthread_create(&t, NULL, log_pump, (void *)(intptr_t)p[0]))
		return -1;
	pthread_detach(t);
	return 0;
}

/* ---- the child processes (exec'd: this process has threads) -------------- */

struct shared {
	_Atomic int go;
	_Atomic int stop;
	_Atomic uint64_t ok, wrong, timeouts, failed;
	_Atomic int hostile_rc;	       /* the error the hostile's call got once cut off */
	_Atomic int hostile_reopen_rc; /* what attaching again gave it */
	_Atomic int phase;	       /* foreign: 1 forged, 2 the parent checked */
};

static void fill_random(uint8_t *p, size_t n, uint64_t *seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (uint8_t)(*seed >> 56);
	}
}

static void honest_main(struct shared *sh, unsigned id)
{
	struct rdmem_opts opts = { RDMEM_PATH_AUTO, 3000, NULL };
	uint64_t seed = 0x9e3779b97f4a7c15ull * (id + 1);
	uint8_t buf[512];
	rdmem_t *h = NULL;

	if (rdmem_open(shm_name, &h))
		_exit(2);
	while (!atomic_load(&sh->stop)) {
		uint32_t n = 1 + (uint32_t)(seed >> 40) % sizeof(buf), got_len = 0;
		void *got = NULL;
		int rc;

		fill_random(buf, n, &seed);
		rc = rdmem_echo(h, buf, n, &got, &got_len, &opts);
		if (rc == 0 && got && got_len == n && !memcmp(got, buf, n)) {
			atomic_fetch_add(&sh->ok, 1);
		} else if (rc == -ETIMEDOUT) {
			atomic_fetch_add(&sh->timeouts, 1);
		} else if (rc) {
			fprintf(stderr, "  honest %u: call failed: %s\n", id, rdmem_strerror(rc));
			atomic_fetch_add(&sh->failed, 1);
		} else {
			fprintf(stderr, "  honest %u: wrong reply: %u of %u bytes\n", id, got_len,
				n);
			atomic_fetch_add(&sh->wrong, 1);
		}
		free(got);
	}
	rdmem_close(h);
	_exit(0);
}

/* One bad entry for client c: slot s, never submitted (FREE), or forged (unknown op). */
static void push_bad(struct rdmem_att *a, uint32_t s, int forged)
{
	struct rdmem_shm_slot *slot = rdmem_shm_slot_at(a->base, &a->geom, a->client, s);

	if (forged) {
		slot->req.op = 0xfff0;
		atomic_store(&slot->state, RDMEM_SLOT_SUBMITTED);
	}
	rdmem_ring_push(&a->ring, (uint16_t)a->client, (uint16_t)s);
}

/*
 * Misbehaves through its own mapping until a call of its fails (it was cut
 * off) or 5 s pass; then attaches again. Exit 0: cut off, with the errors
 * recorded in sh.
 */
static int misbehave_until_cut(rdmem_t *h);

static void hostile_main(struct shared *sh)
{
	rdmem_t *h = NULL, *again = NULL;
	int rc;

	if (rdmem_open(shm_name, &h))
		_exit(2);
	rc = misbehave_until_cut(h);
	atomic_store(&sh->hostile_rc, rc);
	atomic_store(&sh->hostile_reopen_rc, rdmem_open(shm_name, &again));
	if (again)
		rdmem_close(again);
	rdmem_close(h);
	_exit(rc ? 0 : 4);
}

/* Misbehaves until a call fails (cut off) or 5 s pass; returns the call's error. */
static int misbehave_until_cut(rdmem_t *h)
{
	struct rdmem_opts opts = { RDMEM_PATH_AUTO, 200, NULL };
	uint64_t end = rdmem_now_ns() + 5000000000ull;
	uint32_t i = 0;
	int rc = 0;

	while (rdmem_now_ns() < end) {
		struct rdmem_att *a = h->att;

		push_bad(a, a->geom.slots - 1 - (i % 2), (int)(i % 2));
		i++;
		usleep(500);
		if (i % 4 == 0 && (rc = rdmem_local_ping(h, &opts)) != 0)
			break;
	}
	return rc;
}

/*
 * Another user's process: forges FORGED entries naming client victim (slots
 * it never submitted), waits for the parent's checks, then misbehaves in its
 * own slots. Exit 0: it was cut off in the end.
 */
static void foreign_main(struct shared *sh, uint32_t victim)
{
	rdmem_t *h = NULL;
	int i, rc;

	if (setgroups(0, NULL) || setgid(FOREIGN_UID) || setuid(FOREIGN_UID))
		_exit(5);
	if ((rc = rdmem_open(shm_name, &h))) {
		fprintf(stderr, "  foreign: attach: %s\n", rdmem_strerror(rc));
		_exit(2);
	}
	for (i = 0; i < FORGED; i++) {
		rdmem_ring_push(&h->att->ring, (uint16_t)victim, (uint16_t)(SLOTS - 1));
		usleep(500);
	}
	atomic_store(&sh->phase, 1);
	while (atomic_load(&sh->phase) != 2)
		usleep(1000);
	rc = misbehave_until_cut(h);
	rdmem_close(h);
	_exit(rc ? 0 : 4);
}

static pid_t spawn(int shared_fd, const char *role, unsigned id)
{
	char ids[16], fds[16];
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed test leaves no client behind */
	snprintf(ids, sizeof(ids), "%u", id);
	snprintf(fds, sizeof(fds), "%d", shared_fd);
	execl("/proc/self/exe", "test_client_cutoff", role, ids, shm_name, fds, (char *)NULL);
	_exit(127);
}

static int child_exec_main(char **argv)
{
	int fd = atoi(argv[4]);
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (sh == MAP_FAILED)
		return 2;
	close(fd);
	snprintf(shm_name, sizeof(shm_name), "%s", argv[3]);
	if (!strcmp(argv[1], "--hostile"))
		hostile_main(sh);
	if (!strcmp(argv[1], "--foreign"))
		foreign_main(sh, (uint32_t)atoi(argv[2]));
	honest_main(sh, (unsigned)atoi(argv[2]));
	return 0;
}

/* ---- the fixture -------------------------------------------------------- */

static struct lb *lb;
static struct shared *sh;
static int shared_fd = -1;
static pid_t honest[HONEST];
static rdmem_t *probe; /* the test's own client: the one glitch */
static uint64_t log0;
static char door_dir[64];
static long long cuts_expected;

static long long stat_of(const char *name)
{
	char buf[8192], key[64], *p;
	int n = rdmem_frontdoor_format_stats(lb->fd, 0, buf, sizeof(buf));

	if (n < 0)
		return -1;
	snprintf(key, sizeof(key), "frontdoor.%s ", name);
	p = strstr(buf, key);
	return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

static int fx_start(void)
{
	struct rdmem_frontdoor_config cfg;
	unsigned i;

	/* A socket of our own, its group FOREIGN_UID's (as root): another user
	 * may attach. The clients attach by its path. */
	snprintf(door_dir, sizeof(door_dir), "%s/rdmem-cutoff-%d", test_tmpdir(), (int)getpid());
	snprintf(shm_name, sizeof(shm_name), "%s/door.sock", door_dir);
	memset(&cfg, 0, sizeof(cfg));
	cfg.shm_name = "/rdmem-cutoff";
	cfg.socket_path = shm_name;
	cfg.clients = CLIENTS;
	cfg.slots = SLOTS;
	cfg.max_value = MAX_VALUE;
	cfg.group = geteuid() == 0 ? (gid_t)FOREIGN_UID : (gid_t)-1;
	cfg.client_strikes = STRIKES;
	shared_fd = memfd_create("rdmem-cutoff-shared", 0); /* inherited by exec */
	if (shared_fd < 0 || ftruncate(shared_fd, sizeof(*sh)))
		return -1;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, shared_fd, 0);
	if (sh == MAP_FAILED || lb_start(&lb, &cfg))
		return -1;
	for (i = 0; i < HONEST; i++)
		if ((honest[i] = spawn(shared_fd, "--honest", i)) < 0)
			return -1;
	if (rdmem_open(shm_name, &probe))
		return -1;
	for (i = 0; i < 3000 && (atomic_load(&sh->ok) < 200 || stat_of("clients") != HONEST + 1);
	     i++)
		usleep(1000);
	log0 = atomic_load(&log_lines);
	printf("# %s: %u honest clients, %" PRIu64 " checked calls before the test\n", shm_name,
	       HONEST, atomic_load(&sh->ok));
	return atomic_load(&sh->ok) >= 200 ? 0 : -1;
}

/* ---- cases -------------------------------------------------------------- */

static void test_setup(void)
{
	CHECK_EQ(fx_start(), 0);
}

/* One entry for a slot it never submitted: a strike, not a cut. */
static void test_single_glitch_not_cut(void)
{
	struct rdmem_opts opts = { RDMEM_PATH_AUTO, 1000, NULL };
	long long strikes = stat_of("strikes");
	unsigned i;

	push_bad(probe->att, SLOTS - 1, 0);
	for (i = 0; i < 1000 && stat_of("strikes") == strikes; i++)
		usleep(1000);
	CHECK_EQ(stat_of("strikes"), strikes + 1);
	usleep(300000); /* three scans: a cut would have closed its connection */
	CHECK_EQ(stat_of("cut_off"), 0);
	for (i = 0; i < 100; i++)
		CHECK_EQ(rdmem_local_ping(probe, &opts), 0);
	CHECK_EQ(stat_of("clients"), HONEST + 1);
}

static void test_hostile_cut_off(void)
{
	uint64_t t0 = rdmem_now_ns(), cut_ms = 0;
	int status;
	pid_t pid = spawn(shared_fd, "--hostile", 0);

	CHECK(pid > 0);
	while (stat_of("cut_off") < 1 && rdmem_now_ns() - t0 < 5000000000ull)
		usleep(1000);
	cut_ms = (rdmem_now_ns() - t0) / 1000000;
	printf("# hostile cut off after %" PRIu64 " ms (bound %u): %lld strikes, %lld bad "
	       "entries\n",
	       cut_ms, CUT_MS, stat_of("strikes"), stat_of("bad_entries"));
	CHECK_EQ(stat_of("cut_off"), ++cuts_expected);
	CHECK(cut_ms <= CUT_MS);
	CHECK(waitpid(pid, &status, 0) == pid);
	/* It saw its calls fail (not hang) and could not come straight back. */
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	printf("# hostile's call: %s; attaching again: %s\n",
	       rdmem_strerror(atomic_load(&sh->hostile_rc)),
	       rdmem_strerror(atomic_load(&sh->hostile_reopen_rc)));
	CHECK(atomic_load(&sh->hostile_rc) == -ESHUTDOWN ||
	      atomic_load(&sh->hostile_rc) == -EACCES);
	CHECK_EQ(atomic_load(&sh->hostile_reopen_rc), -EACCES);
	CHECK(stat_of("door_cut_refused") >= 1);
	/* Its entry came back as a dead client's does. */
	while (stat_of("clients") != HONEST + 1 && rdmem_now_ns() - t0 < 8000000000ull)
		usleep(1000);
	CHECK_EQ(stat_of("clients"), HONEST + 1);
}

/*
 * Another user forges entries naming our client: not attributable to it
 * (the forger could be anyone holding the segment), so never scored; the
 * forger's misbehaviour in its own slots is its own, and cuts it off.
 */
static void test_foreign_forgery_not_attributed(void)
{
	long long bad = stat_of("bad_entries"), strikes = stat_of("strikes");
	long long unattributed = stat_of("unattributed");
	struct rdmem_opts opts = { RDMEM_PATH_AUTO, 1000, NULL };
	uint64_t t0;
	int status;
	pid_t pid;

	if (geteuid() != 0) {
		check_skip("test_foreign_forgery_not_attributed",
			   "needs root to run a process of another uid");
		return;
	}
	pid = spawn(shared_fd, "--foreign", probe->att->client);
	CHECK(pid > 0);
	for (t0 = rdmem_now_ns();
	     atomic_load(&sh->phase) != 1 && rdmem_now_ns() - t0 < 5000000000ull;)
		usleep(1000);
	while (stat_of("bad_entries") < bad + FORGED && rdmem_now_ns() - t0 < 5000000000ull)
		usleep(1000);
	printf("# foreign uid %u forged %u entries naming client %u: %lld refused, %lld "
	       "unattributed, %lld strikes\n",
	       FOREIGN_UID, FORGED, probe->att->client, stat_of("bad_entries") - bad,
	       stat_of("unattributed") - unattributed, stat_of("strikes") - strikes);
	CHECK_EQ(atomic_load(&sh->phase), 1);
	CHECK(stat_of("bad_entries") >= bad + FORGED);
	CHECK(stat_of("unattributed") >= unattributed + FORGED);
	CHECK_EQ(stat_of("strikes"), strikes);
	CHECK_EQ(stat_of("cut_off"), cuts_expected);
	CHECK_EQ(rdmem_local_ping(probe, &opts), 0);
	t0 = rdmem_now_ns();
	atomic_store(&sh->phase, 2);
	while (stat_of("cut_off") <= cuts_expected && rdmem_now_ns() - t0 < 5000000000ull)
		usleep(1000);
	printf("# foreign cut off after %" PRIu64 " ms (bound %u)\n",
	       (rdmem_now_ns() - t0) / 1000000, CUT_MS);
	CHECK_EQ(stat_of("cut_off"), ++cuts_expected);
	CHECK((rdmem_now_ns() - t0) / 1000000 <= CUT_MS);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(rdmem_local_ping(probe, &opts), 0);
}

/* The honest clients, the glitched one included, never noticed. */
static void test_honest_unharmed(void)
{
	struct rdmem_opts opts = { RDMEM_PATH_AUTO, 1000, NULL };
	uint64_t ok0 = atomic_load(&sh->ok), lines;
	unsigned i;
	int status;

	for (i = 0; i < 3000 && atomic_load(&sh->ok) < ok0 + 200; i++)
		usleep(1000);
	CHECK(atomic_load(&sh->ok) >= ok0 + 200);
	CHECK_EQ(rdmem_local_ping(probe, &opts), 0);
	atomic_store(&sh->stop, 1);
	for (i = 0; i < HONEST; i++) {
		CHECK(waitpid(honest[i], &status, 0) == honest[i]);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	lines = atomic_load(&log_lines) - log0;
	printf("# honest: %" PRIu64 " checked, %" PRIu64 " wrong, %" PRIu64 " failed, %" PRIu64
	       " timed out; %" PRIu64 " front-door log lines (bound %u)\n",
	       atomic_load(&sh->ok), atomic_load(&sh->wrong), atomic_load(&sh->failed),
	       atomic_load(&sh->timeouts), lines, LOG_MAX);
	CHECK_EQ(atomic_load(&sh->wrong), 0);
	CHECK_EQ(atomic_load(&sh->failed), 0);
	CHECK_EQ(atomic_load(&sh->timeouts), 0);
	CHECK_EQ(stat_of("cut_off"), cuts_expected);
	CHECK(lines <= LOG_MAX);
	rdmem_close(probe);
	lb_stop(lb);
	rmdir(door_dir);
	munmap(sh, sizeof(*sh));
	close(shared_fd);
}

int main(int argc, char **argv)
{
	if (argc == 5 && (!strcmp(argv[1], "--honest") || !strcmp(argv[1], "--hostile") ||
			  !strcmp(argv[1], "--foreign")))
		return child_exec_main(argv);
	signal(SIGPIPE, SIG_IGN);
	if (log_capture())
		perror("log capture");
	RUN(test_setup);
	RUN(test_single_glitch_not_cut);
	RUN(test_hostile_cut_off);
	RUN(test_foreign_forgery_not_attributed);
	RUN(test_honest_unharmed);
	return check_done();
}
