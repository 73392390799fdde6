/* test_ring_hostile.c - the front door's shared MPSC ring against a hostile
 * local process. Clients map the segment read-write, so any of them can write
 * any word of the ring; the agent must survive whatever it finds there.
 *
 * Each case starts a front door (with the loopback responder of
 * tests/frontdoor_loopback.h in place of the session actor), two honest
 * client processes running a checked ECHO workload (random bytes, every reply
 * compared byte for byte), then a hostile process that maps the segment by
 * name, like any client, and writes: the ring head one back, the head 100,000
 * ahead, every cell as the next lap (what a tail out of range would leave),
 * random words into every cell, forged entries, claims it never publishes,
 * a head rewritten back in a loop, a head kept a whole lap ahead (the ring
 * full), a flood of take requests on its own connection, and a pid word of
 * -1.
 *
 * After each attack: the honest clients saw 0 wrong replies and 0 timeouts
 * (a call whose entry was overwritten is picked up by the agent's scan) and keep going,
 * RECOVER_PINGS local pings complete within RECOVER_MS of the attack's end,
 * the front door's log lines stay under LOG_MAX for the case, and the
 * frontdoor.* counter of the repair it needed moved. (The consumer's tail is
 * agent-private memory: a client cannot write it, only the cells it reads.)
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libclient/rdmem.h"
#include "libclient/rdmem_priv.h" /* white box: the attachment's mapping */
#include "tests/check.h"

#include "shm/door.h"
#include "tests/frontdoor_loopback.h"

#define CLIENTS	      16
#define SLOTS	      32
#define MAX_VALUE     4096
#define HONEST	      2
#define RECOVER_PINGS 200
#define RECOVER_MS    500  /* the bound: a 1 ms stall plus repairs, with room for sanitizers */
#define LOG_MAX	      24   /* rate-limited sites: 5 lines per 10 s each, plus one "more" line */
#define JAM_MS	      1500 /* test_hostile_ring_kept_full: how long the ring is kept full */
#define JAM_PINGS     20
/* No ping slower: a ping the ring kept out waits for the orphan scan,
 * 90-200 ms (396-588 ms the slowest with producers waiting for room). */
#define JAM_SLOW_MS	150
#define JAM_SLOW_SAN_MS 1000 /* under a sanitizer (RDMEM_SANITIZER) */

static char shm_name[64];
static _Atomic uint64_t log_lines; /* front-door lines seen on stderr */

/* ---- stderr: forwarded, front-door lines counted ------------------------ */

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

/* Routes fd 2 through a pipe so the test can count the agent's lines. */
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

/* ---- honest clients ----------------------------------------------------- */

struct shared {
	_Atomic int go; /* the segment exists: attach */
	_Atomic int stop;
	_Atomic uint64_t ok, wrong, timeouts;
};

static void fill_random(uint8_t *p, size_t n, uint64_t *seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (uint8_t)(*seed >> 56);
	}
}

/* Child: echoes random bytes until told to stop, checking every reply. */
static void honest_main(struct shared *sh, unsigned id)
{
	struct rdmem_opts opts = { RDMEM_PATH_AUTO, 3000, NULL };
	uint64_t seed = 0x9e3779b97f4a7c15ull * (id + 1);
	uint8_t buf[512];
	rdmem_t *h = NULL;

	while (!atomic_load(&sh->go))
		usleep(1000);
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
		} else {
			fprintf(stderr, "  honest %u: wrong reply: rc %d, %u of %u bytes\n", id, rc,
				got_len, n);
			atomic_fetch_add(&sh->wrong, 1);
		}
		free(got);
	}
	rdmem_close(h);
	_exit(0);
}

/*
 * An honest client is this program run again ("--honest ID NAME FD"), not a
 * plain fork: this process has threads (the log pump, the in-process agent),
 * and a child forked from a threaded process can find a lock another thread
 * held at fork() held for good (it hung in ASan's allocator in CI). exec gives
 * it a fresh process; struct shared travels as a memfd (FD, inherited).
 */
static pid_t honest_spawn(int shared_fd, unsigned id)
{
	char ids[16], fds[16];
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed test leaves no client behind */
	snprintf(ids, sizeof(ids), "%u", id);
	snprintf(fds, sizeof(fds), "%d", shared_fd);
	execl("/proc/self/exe", "test_ring_hostile", "--honest", ids, shm_name, fds, (char *)NULL);
	_exit(127);
}

/* The exec'd side of honest_spawn. */
static int honest_exec_main(char **argv)
{
	int fd = atoi(argv[4]);
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (sh == MAP_FAILED)
		return 2;
	close(fd);
	snprintf(shm_name, sizeof(shm_name), "%s", argv[3]);
	honest_main(sh, (unsigned)atoi(argv[2]));
	return 0;
}

/* ---- the fixture -------------------------------------------------------- */

struct fx {
	struct lb *lb;
	struct shared *sh;
	pid_t honest[HONEST];
	int shared_fd;	/* struct shared, for the exec'd honest clients */
	rdmem_t *probe; /* the parent's own client: pings */
	uint64_t log0;
};

static long long fx_stat(struct fx *f, const char *name);

static int fx_start(struct fx *f, const char *label)
{
	struct rdmem_frontdoor_config cfg;
	static int n;
	unsigned i;

	memset(f, 0, sizeof(*f));
	snprintf(shm_name, sizeof(shm_name), "/rdmem-hostile-%d-%d", (int)getpid(), ++n);
	memset(&cfg, 0, sizeof(cfg));
	cfg.shm_name = shm_name;
	cfg.clients = CLIENTS;
	cfg.slots = SLOTS;
	cfg.max_value = MAX_VALUE;
	cfg.group = (gid_t)-1;
	f->shared_fd = memfd_create("rdmem-hostile-shared", 0); /* inherited by exec */
	if (f->shared_fd < 0 || ftruncate(f->shared_fd, sizeof(*f->sh)))
		return -1;
	f->sh = mmap(NULL, sizeof(*f->sh), PROT_READ | PROT_WRITE, MAP_SHARED, f->shared_fd, 0);
	if (f->sh == MAP_FAILED)
		return -1;
	for (i = 0; i < HONEST; i++) {
		f->honest[i] = honest_spawn(f->shared_fd, i);
		if (f->honest[i] < 0)
			return -1;
	}
	if (lb_start(&f->lb, &cfg)) {
		atomic_store(&f->sh->stop, 1); /* the children find no segment and exit */
		atomic_store(&f->sh->go, 1);
		return -1;
	}
	atomic_store(&f->sh->go, 1);
	if (rdmem_open(shm_name, &f->probe))
		return -1;
	/* The workload runs before the attack, every honest client attached:
	 * one alone can make the 200 calls, and a late one would take the
	 * entry a case looks for (test_hostile_negative_pid, under load). */
	for (i = 0;
	     i < 2000 && (atomic_load(&f->sh->ok) < 200 || fx_stat(f, "clients") != HONEST + 1);
	     i++)
		usleep(1000);
	f->log0 = atomic_load(&log_lines);
	printf("# %s: %s, %u honest clients, %" PRIu64 " checked calls before the attack\n", label,
	       shm_name, HONEST, atomic_load(&f->sh->ok));
	return atomic_load(&f->sh->ok) >= 200 ? 0 : -1;
}

/* A frontdoor.* counter by its name in the agent-stats text, or -1 if absent. */
static long long fx_stat(struct fx *f, const char *name)
{
	char buf[8192], key[64], *p;
	int n = rdmem_frontdoor_format_stats(f->lb->fd, 0, buf, sizeof(buf));

	if (n < 0)
		return -1;
	snprintf(key, sizeof(key), "frontdoor.%s ", name);
	p = strstr(buf, key);
	return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* ms until RECOVER_PINGS local pings completed (each retried on failure), capped at 3 s. */
static uint64_t fx_recover_ms(struct fx *f)
{
	struct rdmem_opts opts = { RDMEM_PATH_AUTO, 50, NULL };
	uint64_t t0 = rdmem_now_ns(), end = t0 + 3000000000ull;
	unsigned done = 0;

	while (done < RECOVER_PINGS && rdmem_now_ns() < end)
		done += rdmem_local_ping(f->probe, &opts) == 0;
	return (rdmem_now_ns() - t0) / 1000000;
}

/* Checks what every case promises and stops the honest clients. */
static void fx_finish(struct fx *f, uint64_t recover_ms)
{
	uint64_t ok0 = atomic_load(&f->sh->ok), lines;
	unsigned i;
	int status;

	printf("# recovered in %" PRIu64 " ms (bound %u)\n", recover_ms, RECOVER_MS);
	CHECK(recover_ms <= RECOVER_MS);
	/* The honest clients go on after the attack. */
	for (i = 0; i < 3000 && atomic_load(&f->sh->ok) < ok0 + 200; i++)
		usleep(1000);
	CHECK(atomic_load(&f->sh->ok) >= ok0 + 200);
	atomic_store(&f->sh->stop, 1);
	for (i = 0; i < HONEST; i++) {
		CHECK(waitpid(f->honest[i], &status, 0) == f->honest[i]);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	CHECK_EQ(atomic_load(&f->sh->wrong), 0);
	/* A call whose ring entry the attack overwrote is taken by the agent's
	 * scan (frontdoor.orphans) within 200 ms: none may time out (3 s). */
	CHECK_EQ(atomic_load(&f->sh->timeouts), 0);
	lines = atomic_load(&log_lines) - f->log0;
	printf("# honest: %" PRIu64 " checked, 0 wrong expected, %" PRIu64 " wrong, %" PRIu64
	       " timed out; %" PRIu64 " front-door log lines (bound %u)\n",
	       atomic_load(&f->sh->ok), atomic_load(&f->sh->wrong), atomic_load(&f->sh->timeouts),
	       lines, LOG_MAX);
	CHECK(lines <= LOG_MAX);
}

static void fx_stop(struct fx *f)
{
	rdmem_close(f->probe);
	munmap(f->sh, sizeof(*f->sh));
	close(f->shared_fd);
	lb_stop(f->lb);
}

/* ---- the hostile process ------------------------------------------------ */

struct hostile {
	void *base;
	size_t len;
	struct rdmem_shm_header *hdr;
	struct rdmem_ring ring;
	struct rdmem_shm_geom geom;
	int sock; /* its connection to the agent */
};

/* Attaches through the agent's socket, as any local client can, then
 * attacks the bytes of the mapping it was given. */
static int hostile_map(struct hostile *x)
{
	rdmem_t *h;

	if (rdmem_open(shm_name, &h))
		return -1;
	x->base = h->att->base;
	x->len = rdmem__lib(h->att)->len;
	x->sock = rdmem__lib(h->att)->sock;
	x->hdr = x->base;
	if (rdmem_shm_header_check(x->hdr, x->len, &x->geom))
		return -1;
	rdmem_shm_ring_view(x->base, &x->geom, &x->ring);
	return 0; /* the handle stays open until the attacker exits */
}

typedef void (*attack_fn)(struct hostile *x);

/* Starts attack in a child that maps the segment; its pid, or -1. */
static pid_t spawn_hostile(attack_fn attack)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct hostile x;

		if (hostile_map(&x))
			_exit(3);
		attack(&x);
		_exit(0);
	}
	return pid;
}

/* 0 once the attack of child pid ended well. */
static int wait_hostile(pid_t pid)
{
	int status;

	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* Runs attack in a child that maps the segment; returns once it is done. */
static int run_hostile(attack_fn attack)
{
	return wait_hostile(spawn_hostile(attack));
}

static void attack_head_minus_one(struct hostile *x)
{
	atomic_fetch_sub(&x->hdr->ring.head, 1);
}

static void attack_head_plus_100000(struct hostile *x)
{
	atomic_fetch_add(&x->hdr->ring.head, 100000);
}

/* Every cell as the lap after the one it serves: what a consumer tail moved
 * out of range would leave behind. */
static void attack_cells_next_lap(struct hostile *x)
{
	uint64_t head = atomic_load(&x->hdr->ring.head), i;

	for (i = 0; i < x->ring.size; i++)
		atomic_store(&x->ring.cells[(head + i) & x->ring.mask],
			     rdmem_ring_empty_word(head + i + 2 * x->ring.size));
}

/* Random words into every cell, over and over for 100 ms. */
static void attack_random_cells(struct hostile *x)
{
	uint64_t end = rdmem_now_ns() + 100000000ull, seed = 12345, i;

	while (rdmem_now_ns() < end)
		for (i = 0; i < x->ring.size; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			atomic_store(&x->ring.cells[i], seed);
		}
}

/* Entries for the next positions, naming slots of other clients and of none. */
static void attack_forged_cells(struct hostile *x)
{
	uint64_t head = atomic_load(&x->hdr->ring.head), i;

	for (i = 0; i < 32; i++)
		atomic_store(&x->ring.cells[(head + i) & x->ring.mask],
			     rdmem_ring_entry_word(head + i, (uint16_t)(i * 977 % 0xfffe),
						   (uint16_t)(i * 31)));
}

/* The head written back by one, every 100 us for one second. */
static void attack_head_flood(struct hostile *x)
{
	uint64_t end = rdmem_now_ns() + 1000000000ull;

	while (rdmem_now_ns() < end) {
		atomic_fetch_sub(&x->hdr->ring.head, 1);
		usleep(100);
	}
}

/* Stops (sig SIGSTOP) or resumes (SIGCONT) the honest clients. */
static void fx_signal(struct fx *f, int sig)
{
	unsigned i;

	for (i = 0; i < HONEST; i++)
		CHECK(kill(f->honest[i], sig) == 0);
}

/*
 * quiet: the attack lands on an idle ring (the honest clients are stopped
 * for it and resumed after), as in the report that a head written back by
 * one on an idle ring stopped every call; on a busy ring such a head may
 * still be in range and need no repair.
 */
static void run_case_ex(const char *label, attack_fn attack, const char *counter, int quiet)
{
	struct fx f;
	long long before;

	REQUIRE(fx_start(&f, label) == 0);
	before = fx_stat(&f, counter);
	CHECK(before >= 0);
	if (quiet) {
		fx_signal(&f, SIGSTOP);
		usleep(50000); /* what they published is taken; a stopped claim is skipped */
	}
	CHECK_EQ(run_hostile(attack), 0);
	if (quiet)
		fx_signal(&f, SIGCONT);
	fx_finish(&f, fx_recover_ms(&f));
	printf("# frontdoor.%s: %lld -> %lld; frontdoor.orphans %lld\n", counter, before,
	       fx_stat(&f, counter), fx_stat(&f, "orphans"));
	CHECK(fx_stat(&f, counter) > before);
	fx_stop(&f);
}

static void run_case(const char *label, attack_fn attack, const char *counter)
{
	run_case_ex(label, attack, counter, 0);
}

static void test_hostile_head_minus_one(void)
{
	run_case_ex("head - 1 on an idle ring", attack_head_minus_one, "head_repaired", 1);
}

static void test_hostile_head_plus_100000(void)
{
	run_case("head + 100000", attack_head_plus_100000, "head_repaired");
}

static void test_hostile_cells_next_lap(void)
{
	run_case("every cell a lap ahead", attack_cells_next_lap, "repaired");
}

static void test_hostile_random_cells(void)
{
	run_case("random words in every cell", attack_random_cells, "repaired");
}

static void test_hostile_forged_cells(void)
{
	run_case("forged entries", attack_forged_cells, "bad_entries");
}

static void test_hostile_head_flood(void)
{
	run_case("head - 1 every 100 us for 1 s", attack_head_flood, "head_repaired");
}

/*
 * Claims every free position and never publishes, alive and stopped: the
 * others pay one stall (frontdoor.stalls moves by one), not one per position.
 */
static void test_hostile_claims_never_published(void)
{
	struct hostile x;
	struct fx f;
	uint64_t recover, *claimed;
	long long stalls, skipped;
	int status;
	pid_t pid;

	REQUIRE(fx_start(&f, "claims never published") == 0);
	claimed =
	    mmap(NULL, sizeof(*claimed), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(claimed != MAP_FAILED);
	*claimed = 0;
	stalls = fx_stat(&f, "stalls");
	skipped = fx_stat(&f, "skipped");
	CHECK(stalls >= 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		uint64_t pos;

		if (hostile_map(&x))
			_exit(3);
		while (*claimed < x.ring.size && rdmem_ring_claim(&x.ring, &pos) == 0)
			(*claimed)++;
		raise(SIGSTOP);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, WUNTRACED) == pid && WIFSTOPPED(status));
	recover = fx_recover_ms(&f);
	printf("# the hostile process claimed %" PRIu64 " positions\n", *claimed);
	CHECK(*claimed > 100);
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, &status, 0) == pid);
	fx_finish(&f, recover);
	printf("# frontdoor.stalls %lld -> %lld, frontdoor.skipped %lld -> %lld\n", stalls,
	       fx_stat(&f, "stalls"), skipped, fx_stat(&f, "skipped"));
	/* One stall for the whole burst; a second only if an honest producer
	 * was preempted mid-publish on this loaded machine. */
	CHECK(fx_stat(&f, "stalls") - stalls >= 1 && fx_stat(&f, "stalls") - stalls <= 3);
	CHECK(fx_stat(&f, "skipped") - skipped >= (long long)*claimed);
	munmap(claimed, sizeof(*claimed));
	fx_stop(&f);
}

/* Keeps the head a whole lap ahead of the tail (every position claimed,
 * none published) for JAM_MS: producers find the ring full, and the
 * consumer's skip of a lap is undone at once. A review's attack: calls
 * took 100-200 ms each (the orphan scan's two looks) while it ran. */
static void attack_lap_ahead(struct hostile *x)
{
	uint64_t end = rdmem_now_ns() + JAM_MS * 1000000ull;

	while (rdmem_now_ns() < end) {
		uint64_t h = atomic_load(&x->hdr->ring.head);

		if (atomic_load(&x->ring.cells[h & x->ring.mask]) == rdmem_ring_empty_word(h))
			atomic_compare_exchange_strong(&x->hdr->ring.head, &h, h + x->ring.size);
	}
}

/* The probe's local pings while an attack runs (JAM_MS less 200 ms): how
 * many, how many over the bound (JAM_SLOW_MS, more under a sanitizer), the
 * slowest. Every ping must succeed. */
struct pings {
	uint64_t n, slow, worst_us, bound_ms;
};

static struct pings pings_during_attack(struct fx *f)
{
	struct rdmem_opts opts = { RDMEM_PATH_AUTO, 3000, NULL };
	struct pings r = { 0, 0, 0, getenv("RDMEM_SANITIZER") ? JAM_SLOW_SAN_MS : JAM_SLOW_MS };
	uint64_t end = rdmem_now_ns() + (JAM_MS - 200) * 1000000ull;

	for (; rdmem_now_ns() < end; r.n++) {
		uint64_t t0 = rdmem_now_ns(), us;

		CHECK_EQ(rdmem_local_ping(f->probe, &opts), 0);
		us = (rdmem_now_ns() - t0) / 1000;
		r.worst_us = us > r.worst_us ? us : r.worst_us;
		r.slow += us > r.bound_ms * 1000;
	}
	return r;
}

/*
 * The ring kept full by another client: a producer that finds it full
 * marks its slot and asks the agent on its own connection (shm/door.h,
 * RDMEM_DOOR_TAKE), which no other client can jam. While the jam runs the
 * probe's local pings go on, none slower than JAM_SLOW_MS (before, 3 to 5
 * of every few hundred took the orphan scan's 90-200 ms or more), and
 * frontdoor.no_entry counts the marked slots.
 */
static void test_hostile_ring_kept_full(void)
{
	struct pings r;
	long long marked;
	struct fx f;
	pid_t pid;

	REQUIRE(fx_start(&f, "head kept a lap ahead") == 0);
	marked = fx_stat(&f, "no_entry");
	CHECK(marked >= 0);
	pid = spawn_hostile(attack_lap_ahead);
	REQUIRE(pid >= 0);
	usleep(20000); /* the jam takes hold */
	r = pings_during_attack(&f);
	CHECK_EQ(wait_hostile(pid), 0);
	printf("# %" PRIu64 " local pings during the jam (at least %u), %" PRIu64 " over %" PRIu64
	       " ms, the slowest %" PRIu64 " us; frontdoor.no_entry %lld -> %lld\n",
	       r.n, JAM_PINGS, r.slow, r.bound_ms, r.worst_us, marked, fx_stat(&f, "no_entry"));
	CHECK(r.n >= JAM_PINGS);
	CHECK_EQ(r.slow, 0);
	CHECK(fx_stat(&f, "no_entry") > marked);
	fx_finish(&f, fx_recover_ms(&f));
	fx_stop(&f);
}

/* Take requests (RDMEM_DOOR_TAKE) on its own connection, as fast as the
 * socket takes them, for JAM_MS; the bytes sent go to *flood_bytes. */
static uint64_t *flood_bytes;
static uint64_t *flood_attaches; /* shared too: connections the flooder made after its first */

static void attack_take_flood(struct hostile *x)
{
	static char b[64 << 10];
	uint64_t end = rdmem_now_ns() + JAM_MS * 1000000ull;

	memset(b, RDMEM_DOOR_TAKE, sizeof(b));
	while (rdmem_now_ns() < end) {
		ssize_t n = send(x->sock, b, sizeof(b), MSG_NOSIGNAL);

		if (n <= 0)
			_exit(4); /* cut off: the byte is legal, that is a failure */
		*flood_bytes += (uint64_t)n;
	}
}

/*
 * A client floods the take byte. It is legal (the agent must not cut it
 * off), and the door reads all a client sent at once: one take request per
 * read, not per 64 bytes as when a review's flood held the door thread
 * busy 1.2-1.4 s of 1.5 s (its pings fell to 888 in one run). Pings go on,
 * none slower than the jam's bound, and honest clients see nothing.
 */
static void test_hostile_take_flood(void)
{
	struct pings r;
	long long reqs;
	struct fx f;
	pid_t pid;

	REQUIRE(fx_start(&f, "take byte flood") == 0);
	flood_bytes = mmap(NULL, sizeof(*flood_bytes), PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(flood_bytes != MAP_FAILED);
	*flood_bytes = 0;
	reqs = fx_stat(&f, "take_requests");
	CHECK(reqs >= 0);
	pid = spawn_hostile(attack_take_flood);
	REQUIRE(pid >= 0);
	r = pings_during_attack(&f);
	CHECK_EQ(wait_hostile(pid), 0);
	reqs = fx_stat(&f, "take_requests") - reqs;
	printf("# %" PRIu64 " take bytes flooded in %lld reads; %" PRIu64
	       " local pings meanwhile, %" PRIu64 " over %" PRIu64 " ms, the slowest %" PRIu64
	       " us\n",
	       *flood_bytes, reqs, r.n, r.slow, r.bound_ms, r.worst_us);
	CHECK(*flood_bytes > 0);
	CHECK(reqs > 0 && (uint64_t)reqs <= *flood_bytes / 1024);
	CHECK_EQ(r.slow, 0);
	munmap(flood_bytes, sizeof(*flood_bytes));
	fx_finish(&f, fx_recover_ms(&f));
	fx_stop(&f);
}

/* One take byte with an fd (our stdin) passed along: the kernel never
 * merges such messages into one read. sendmsg's result. */
static ssize_t send_take_with_fd(int sock)
{
	char byte = RDMEM_DOOR_TAKE, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)
	};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	int in = 0;

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &in, sizeof(in));
	return sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Take bytes that cannot merge, as fast as they go, for JAM_MS: every byte
 * would be a read of the door's and a wake of the actor's. */
static void attack_take_flood_fds(struct hostile *x)
{
	uint64_t end = rdmem_now_ns() + JAM_MS * 1000000ull;

	while (rdmem_now_ns() < end) {
		if (send_take_with_fd(x->sock) == 1)
			(*flood_bytes)++;
		else if (errno == EAGAIN || errno == ETOOMANYREFS)
			usleep(50); /* the socket (or our fds in flight) full: the door rests */
		else
			_exit(4); /* cut off: the byte is legal, that is a failure */
	}
}

/* Sends take bytes that cannot merge on sock until it is full; how many went. */
static uint64_t flood_until_full(int sock)
{
	uint64_t sent = 0;

	while (send_take_with_fd(sock) == 1)
		sent++;
	return sent;
}

/* A review's way past the rest: fill the socket with unmergeable bytes,
 * shut our side (the door then sees a hang-up event at every round) and
 * attach again, for JAM_MS. Exits 0; attaches refused count as the end. */
static void attack_take_flood_hangups(struct hostile *x)
{
	uint64_t end = rdmem_now_ns() + JAM_MS * 1000000ull;
	int sock = x->sock;

	while (rdmem_now_ns() < end) {
		rdmem_t *h;

		*flood_bytes += flood_until_full(sock);
		shutdown(sock, SHUT_WR);
		if (rdmem_open(shm_name, &h))
			break; /* a process held off: fine, it reads nothing then */
		(*flood_attaches)++;
		sock = rdmem__lib(h->att)->sock;
	}
}

/*
 * The same flood with every byte a read of its own. After a take request
 * the door leaves a client's connection unread for RDMEM_DOOR_TAKE_GAP_NS
 * (2 ms), so the flood gets at most one read per gap (about 750 in its
 * 1.5 s), where a review's got 75,968 and cost the door and the actor 2.4
 * and 1.5 s of CPU in 3 s. Pings go on within the jam's bound.
 */
/* attack floods take bytes while honest pings go on: the door reads them
 * at most once per RDMEM_DOOR_TAKE_GAP_NS, plus once per connection the
 * attack made after its first (an attach costs more than that read). */
static void take_flood_bounded(attack_fn attack, const char *what)
{
	long long reqs, most;
	struct pings r;
	uint64_t t0;
	struct fx f;
	pid_t pid;

	REQUIRE(fx_start(&f, what) == 0);
	flood_bytes = mmap(NULL, 2 * sizeof(*flood_bytes), PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(flood_bytes != MAP_FAILED);
	flood_attaches = flood_bytes + 1;
	*flood_bytes = *flood_attaches = 0;
	reqs = fx_stat(&f, "take_requests");
	CHECK(reqs >= 0);
	t0 = rdmem_now_ns();
	pid = spawn_hostile(attack);
	REQUIRE(pid >= 0);
	r = pings_during_attack(&f);
	CHECK_EQ(wait_hostile(pid), 0);
	reqs = fx_stat(&f, "take_requests") - reqs;
	/* One read per gap from the first byte to the count read: the bytes
	 * left in the socket when the flooder stops are read on after it. */
	most = (long long)((rdmem_now_ns() - t0) / RDMEM_DOOR_TAKE_GAP_NS) +
	       (long long)*flood_attaches + 10;
	printf("# %s: %" PRIu64 " take bytes, each with an fd, %" PRIu64
	       " attaches more, read in %lld reads (at most %lld); "
	       "%" PRIu64 " local pings meanwhile, %" PRIu64 " over %" PRIu64
	       " ms, the slowest %" PRIu64 " us\n",
	       what, *flood_bytes, *flood_attaches, reqs, most, r.n, r.slow, r.bound_ms,
	       r.worst_us);
	CHECK(*flood_bytes > 0);
	CHECK(reqs > 0 && reqs <= most);
	CHECK_EQ(r.slow, 0);
	munmap(flood_bytes, 2 * sizeof(*flood_bytes));
	fx_finish(&f, fx_recover_ms(&f));
	fx_stop(&f);
}

static void test_hostile_take_flood_unmergeable(void)
{
	take_flood_bounded(attack_take_flood_fds, "take bytes that cannot merge");
}

/* A connection that rests and hangs up is hung up on, its bytes unread:
 * each connection buys one read, and a new one takes an attach (a review
 * got 80,763-136,039 reads in 1.5 s past the rest before). */
static void test_hostile_take_flood_hangups(void)
{
	take_flood_bounded(attack_take_flood_hangups, "take bytes, then a hang-up, again");
}

/*
 * The agent's sleeping word held at 0 on an idle ring: producers then never
 * ring the doorbell, and an idle actor has no scan tick to find their
 * entries. A call the agent has not taken rings the bell itself after a
 * liveness period (20 ms, libclient/call.c), so calls go on, slower, and
 * none times out.
 */
static void test_hostile_sleeping_word_cleared(void)
{
	struct rdmem_opts opts = { RDMEM_PATH_AUTO, 1000, NULL };
	uint64_t ok0, t0, ms;
	struct fx f;
	int status;
	pid_t pid;

	REQUIRE(fx_start(&f, "sleeping word held at 0") == 0);
	fx_signal(&f, SIGSTOP);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct hostile x;
		uint64_t end;

		if (hostile_map(&x))
			_exit(3);
		end = rdmem_now_ns() + 1500000000ull;
		while (rdmem_now_ns() < end) {
			atomic_store(&x.hdr->ring.sleeping, 0);
			usleep(50);
		}
		_exit(0);
	}
	usleep(400000); /* the actor scans for 200 ms after the ring's last entry, then sleeps */
	t0 = rdmem_now_ns();
	CHECK_EQ(rdmem_local_ping(f.probe, &opts), 0);
	ms = (rdmem_now_ns() - t0) / 1000000;
	printf("# a local ping on an idle ring with the sleeping word held at 0: %" PRIu64
	       " ms (bound 200)\n",
	       ms);
	CHECK(ms <= 200);
	ok0 = atomic_load(&f.sh->ok);
	fx_signal(&f, SIGCONT);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	printf("# honest calls checked while the word was held: %" PRIu64 "\n",
	       atomic_load(&f.sh->ok) - ok0);
	CHECK(atomic_load(&f.sh->ok) - ok0 >= 10);
	fx_finish(&f, fx_recover_ms(&f));
	fx_stop(&f);
}

/* The sleeping word cleared once, then the head moved out of range: an
 * honest push fails, and its kick rings nothing. */
static void attack_sleeping_then_head(struct hostile *x)
{
	atomic_store(&x->hdr->ring.sleeping, 0);
	atomic_fetch_add(&x->hdr->ring.head, 2 * x->ring.size);
}

static void *park_on_doorbell(void *arg)
{
	struct hostile *x = arg;

	for (;;)
		rdmem_futex_wait(&x->hdr->ring.doorbell, atomic_load(&x->hdr->ring.doorbell), 0);
	return NULL;
}

/* 64 threads parked on the doorbell futex: a wake of one waiter would wake
 * them, in arrival order, instead of the agent. */
static void attack_park_on_doorbell(struct hostile *x)
{
	pthread_t t;
	int i;

	for (i = 0; i < 64; i++)
		if (pthread_create(&t, NULL, park_on_doorbell, x) == 0)
			pthread_detach(t);
	usleep(50000); /* parked */
}

/*
 * The attacker of an idle case, exec'd ("--idle-attack N NAME FD"): a child
 * forked from this threaded process may not start threads (TSan refuses,
 * and a lock held at fork() could be held for good). Attacks once the
 * actor went idle, says so on FD, and stays until killed.
 */
static const attack_fn idle_attacks[] = { attack_sleeping_then_head, attack_park_on_doorbell };

static int idle_attack_exec_main(char **argv)
{
	unsigned which = (unsigned)atoi(argv[2]);
	int fd = atoi(argv[4]);
	struct hostile x;

	snprintf(shm_name, sizeof(shm_name), "%s", argv[3]);
	if (which >= RDMEM_ARRAY_SIZE(idle_attacks) || hostile_map(&x))
		return 3;
	usleep(400000); /* the actor's scans end 200 ms after the last entry */
	idle_attacks[which](&x);
	if (write(fd, "y", 1) != 1)
		return 4;
	for (;;)
		pause();
}

/*
 * An idle agent (no scan tick) under an attack that stays: local pings
 * still answer, each within bound_ms (a call not taken rings the doorbell
 * itself after 20 ms, waking every waiter), then the honest workload goes on.
 */
static void run_idle_case(const char *label, unsigned which, uint64_t bound_ms)
{
	struct rdmem_opts opts = { RDMEM_PATH_AUTO, 1000, NULL };
	int ready[2], status, i;
	char whichs[16], fds[16], y = 0;
	uint64_t t0, ms;
	struct fx f;
	pid_t pid;

	REQUIRE(fx_start(&f, label) == 0);
	fx_signal(&f, SIGSTOP);
	REQUIRE(pipe(ready) == 0);
	snprintf(whichs, sizeof(whichs), "%u", which);
	snprintf(fds, sizeof(fds), "%d", ready[1]);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl("/proc/self/exe", "test_ring_hostile", "--idle-attack", whichs, shm_name, fds,
		      (char *)NULL);
		_exit(127);
	}
	close(ready[1]); /* an attacker that dies says so: EOF */
	CHECK(read(ready[0], &y, 1) == 1 && y == 'y');
	for (i = 0; i < 3; i++) {
		usleep(50000); /* the actor blocks again (behind any parked thread) */
		t0 = rdmem_now_ns();
		CHECK_EQ(rdmem_local_ping(f.probe, &opts), 0);
		ms = (rdmem_now_ns() - t0) / 1000000;
		printf("# %s: local ping %d on an idle agent in %" PRIu64 " ms (bound %" PRIu64
		       ")\n",
		       label, i, ms, bound_ms);
		CHECK(ms <= bound_ms);
	}
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, &status, 0) == pid);
	close(ready[0]);
	fx_signal(&f, SIGCONT);
	fx_finish(&f, fx_recover_ms(&f));
	fx_stop(&f);
}

static void test_hostile_idle_sleeping_then_head(void)
{
	/* The first ping's push fails until its bell (20 ms) has the head repaired. */
	run_idle_case("idle: sleeping word cleared, head out of range", 0, 200);
}

static void test_hostile_idle_threads_parked_on_doorbell(void)
{
	/* Woken with the parked threads at once: a wake of one took 49-50 ms
	 * here (the kick and two bells woke parked threads first). */
	run_idle_case("idle: 64 threads parked on the doorbell", 1, 15);
}

static uint32_t pid_target; /* the client entry attack_pid_minus_one writes */

static void attack_pid_minus_one(struct hostile *x)
{
	atomic_store(&rdmem_shm_client_at(x->base, &x->geom, pid_target)->pid, -1);
}

/* Writes -1 into client entry c's pid word. */
static int hostile_pid(uint32_t c)
{
	pid_target = c;
	return run_hostile(attack_pid_minus_one);
}

static int32_t entry_pid(struct fx *f, uint32_t c)
{
	size_t len;
	void *base = rdmem_frontdoor_segment(f->lb->fd, &len);
	struct rdmem_shm_geom g;

	if (rdmem_shm_header_check(base, len, &g))
		return 0;
	return atomic_load(&rdmem_shm_client_at(base, &g, c)->pid);
}

/*
 * A pid word of -1, in a free entry (the door owns the table: the next
 * client still gets the entry) and in the entry of a live client (put back
 * to its credentialed pid): neither stays lost.
 */
static void test_hostile_negative_pid(void)
{
	uint32_t c, free_c = CLIENTS, mine = CLIENTS;
	uint64_t t0, back_ms;
	long long forged, attached;
	rdmem_t *h2 = NULL;
	struct fx f;

	REQUIRE(fx_start(&f, "pid word -1") == 0);
	forged = fx_stat(&f, "pid_forged");
	attached = fx_stat(&f, "clients");
	CHECK(forged >= 0);
	for (c = 0; c < CLIENTS; c++) {
		int32_t pid = entry_pid(&f, c);

		if (pid == 0 && free_c == CLIENTS)
			free_c = c;
		if (pid == (int32_t)getpid())
			mine = c;
	}
	REQUIRE(free_c < CLIENTS && mine < CLIENTS);
	CHECK_EQ(hostile_pid(free_c), 0);
	CHECK_EQ(hostile_pid(mine), 0);
	t0 = rdmem_now_ns();
	while (entry_pid(&f, mine) != (int32_t)getpid() && rdmem_now_ns() - t0 < 3000000000ull)
		usleep(1000);
	back_ms = (rdmem_now_ns() - t0) / 1000000;
	printf("# entry back in %" PRIu64 " ms (bound %u): mine %d\n", back_ms, RECOVER_MS,
	       entry_pid(&f, mine));
	CHECK(back_ms <= RECOVER_MS); /* the dead-client scan runs every 100 ms */
	CHECK_EQ(entry_pid(&f, mine), getpid());
	/* The hostile process has left: its entry and the -1 one are handed out again. */
	for (t0 = rdmem_now_ns();
	     fx_stat(&f, "clients") != attached && rdmem_now_ns() - t0 < 2000000000ull;)
		usleep(1000);
	REQUIRE(rdmem_open(shm_name, &h2) == 0);
	CHECK_EQ(h2->att->client, free_c);
	CHECK_EQ(entry_pid(&f, free_c), getpid());
	CHECK_EQ(rdmem_ping(h2, NULL), 0);
	rdmem_close(h2);
	fx_finish(&f, fx_recover_ms(&f));
	CHECK(fx_stat(&f, "pid_forged") - forged >= 1);
	fx_stop(&f);
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "--honest"))
		return honest_exec_main(argv);
	if (argc == 5 && !strcmp(argv[1], "--idle-attack"))
		return idle_attack_exec_main(argv);
	signal(SIGPIPE, SIG_IGN);
	if (log_capture())
		perror("log capture");
	RUN(test_hostile_head_minus_one);
	RUN(test_hostile_head_plus_100000);
	RUN(test_hostile_cells_next_lap);
	RUN(test_hostile_random_cells);
	RUN(test_hostile_forged_cells);
	RUN(test_hostile_claims_never_published);
	RUN(test_hostile_head_flood);
	RUN(test_hostile_ring_kept_full);
	RUN(test_hostile_take_flood);
	RUN(test_hostile_take_flood_unmergeable);
	RUN(test_hostile_take_flood_hangups);
	RUN(test_hostile_negative_pid);
	RUN(test_hostile_sleeping_word_cleared);
	RUN(test_hostile_idle_sleeping_then_head);
	RUN(test_hostile_idle_threads_parked_on_doorbell);
	return check_done();
}
