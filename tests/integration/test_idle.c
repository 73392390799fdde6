/* test_idle.c - what an idle agent and server cost: wake-ups per thread and
 * CPU over two quiet seconds after some traffic (docs/architecture.md, "Idle
 * sessions").
 *
 * Asserted: the agent's session actor, connector, TCP actor and door thread
 * (it woke every 50 ms to look for cut or reclaimed entries and a taken
 * socket path; now the actor nudges it and inotify watches the path), the
 * front-door actor (it scanned its clients every 100 ms; now only within
 * 200 ms of ring activity or while a scan left work, and pidfds tell it an
 * owner died), and the server's TCP loop, RDMA listener, main thread and
 * session worker, do not wake at all while idle (they woke every 50, 200,
 * 50, 100, 100, 100, 100 and 100 ms before), with a client attached, and
 * the session posts no RDMA operation (the control page was READ 20 times a
 * second). Every thread's wake-ups and both daemons' CPU are printed.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "e2e.h"

#define QUIET_MS    2000
#define MAX_THREADS 64

struct thread_use {
	char name[32];
	long tid;
	long long switches; /* voluntary + involuntary context switches */
};

struct proc_use {
	struct thread_use t[MAX_THREADS];
	int n;
	long long cpu_ticks; /* utime + stime, clock ticks */
};

/* A /proc status field, or -1. */
static long long status_field(const char *path, const char *field)
{
	char line[256];
	long long v = -1, x;
	size_t n = strlen(field);
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && sscanf(line + n, " %lld", &x) == 1)
			v = v < 0 ? x : v + x;
	fclose(f);
	return v;
}

static void read_line(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");

	buf[0] = '\0';
	if (f) {
		if (fgets(buf, (int)cap, f))
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
}

/* Every thread's name and context switches, and the process's CPU ticks. */
static void sample(pid_t pid, struct proc_use *u)
{
	char dir[64], path[384], stat[1024], *p;
	unsigned long long ut = 0, st = 0;
	struct dirent *d;
	DIR *dd;

	memset(u, 0, sizeof(*u));
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	if (!(dd = opendir(dir)))
		return;
	while ((d = readdir(dd)) && u->n < MAX_THREADS) {
		struct thread_use *t = &u->t[u->n];

		if (d->d_name[0] == '.')
			continue;
		t->tid = strtol(d->d_name, NULL, 10);
		snprintf(path, sizeof(path), "%s/%s/comm", dir, d->d_name);
		read_line(path, t->name, sizeof(t->name));
		snprintf(path, sizeof(path), "%s/%s/status", dir, d->d_name);
		t->switches = status_field(path, "voluntary_ctxt_switches:");
		t->switches += status_field(path, "nonvoluntary_ctxt_switches:");
		u->n++;
	}
	closedir(dd);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	read_line(path, stat, sizeof(stat));
	/* Fields after the ")" that ends comm: state is 3, utime 14, stime 15. */
	if ((p = strrchr(stat, ')')) &&
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
		u->cpu_ticks = (long long)(ut + st);
}

/* Wake-ups of the threads called name between a and b (threads are listed
 * in tid order, the same in both samples), or -1 when none has it. */
static long long woke(const struct proc_use *a, const struct proc_use *b, const char *name)
{
	long long sum = -1;
	int i;

	for (i = 0; i < a->n && i < b->n; i++)
		if (!strcmp(a->t[i].name, name) && !strcmp(b->t[i].name, name))
			sum = (sum < 0 ? 0 : sum) + b->t[i].switches - a->t[i].switches;
	return sum;
}

/* Wake-ups of thread tid (a process's main thread: tid = pid; by name a
 * sanitizer's background thread would count too, it inherits the name). */
static long long woke_tid(const struct proc_use *a, const struct proc_use *b, long tid)
{
	int i;

	for (i = 0; i < a->n && i < b->n; i++)
		if (a->t[i].tid == tid && b->t[i].tid == tid)
			return b->t[i].switches - a->t[i].switches;
	return -1;
}

static void report(const char *who, const struct proc_use *a, const struct proc_use *b)
{
	long ticks = sysconf(_SC_CLK_TCK);
	int i;

	printf("# %s over %d ms idle: CPU %.2f %%; wake-ups by thread:", who, QUIET_MS,
	       100.0 * (double)(b->cpu_ticks - a->cpu_ticks) / (double)ticks / (QUIET_MS / 1000.0));
	for (i = 0; i < b->n && i < a->n; i++)
		printf(" %s %lld", b->t[i].name, b->t[i].switches - a->t[i].switches);
	printf("\n");
}

static void test_idle_agent_sleeps(void)
{
	struct proc_use a0, a1, s0, s1;
	long long r0, r1, session, connector, tcp, door, actor, tcpsrv, listener, main_thread,
	    worker;
	char dir[] = "/tmp/rdmem-idle-XXXXXX";
	struct e2e e;
	int i;

	/* A socket directory of our own: the door thread watches it, and other
	 * agents' sockets coming and going elsewhere must not wake it. */
	REQUIRE(mkdtemp(dir) != NULL);
	setenv("RDMEM_RUNTIME_DIR", dir, 1);
	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0);
	for (i = 0; i < 200; i++)
		CHECK_EQ(rdmem_ping(e.h, NULL), 0);
	/* The burst's last control-page read (10 ms after the one before) and
	 * the idle back-off (spin, yield, block) end well within this. */
	proc_sleep_ms(300);
	r0 = e2e_stat(&e, "rdma.ctrl_reads");
	/* That query is ring activity: the front-door actor scans for 200 ms
	 * after it, then sleeps. */
	proc_sleep_ms(400);
	sample(e.agent.pid, &a0);
	sample(e.server.pid, &s0);
	proc_sleep_ms(QUIET_MS);
	sample(e.agent.pid, &a1);
	sample(e.server.pid, &s1);
	r1 = e2e_stat(&e, "rdma.ctrl_reads");
	report("agent", &a0, &a1);
	report("server", &s0, &s1);
	session = woke(&a0, &a1, "rdmem-session");
	connector = woke(&a0, &a1, "rdmem-connect");
	tcp = woke(&a0, &a1, "rdmem-tcp");
	door = woke(&a0, &a1, "rdmem-door");
	actor = woke(&a0, &a1, "rdmem-frontdoor");
	tcpsrv = woke(&s0, &s1, "rdmem-tcpsrv");
	listener = woke(&s0, &s1, "rdmem-listen");
	main_thread = woke_tid(&s0, &s1, (long)e.server.pid);
	worker = woke(&s0, &s1, "rdmem-worker");
	printf("# in %d ms idle: agent session actor %lld wake-ups (it woke every 50 ms), "
	       "connector %lld (every 200 ms), TCP actor %lld (every 50 ms); control-page READs "
	       "%lld (the two stats queries' own)\n",
	       QUIET_MS, session, connector, tcp, r1 - r0);
	CHECK(session >= 0 && connector >= 0 && tcp >= 0); /* the threads are there and named */
	CHECK(session <= 2);
	CHECK(connector <= 2);
	CHECK(tcp <= 2);
	printf("# agent door thread %lld wake-ups (every 50 ms before)\n", door);
	CHECK(door >= 0 && door <= 2);
	printf("# agent front-door actor %lld wake-ups (every 100 ms before)\n", actor);
	CHECK(actor >= 0 && actor <= 2);
	CHECK(r1 - r0 <= 1);
	/* The server's TCP loop sleeps until its next deadline (the agent's
	 * connection idles out after --tcp-idle-ms, 300 s); its listener until
	 * a connection comes. */
	printf("# server TCP loop %lld wake-ups (every 100 ms before), listener %lld (every "
	       "100 ms)\n",
	       tcpsrv, listener);
	CHECK(tcpsrv >= 0 && listener >= 0);
	CHECK(tcpsrv <= 2);
	CHECK(listener <= 2);
	/* The main thread sleeps until timed work (an upload, a hook, an idle
	 * exactly-once window) is due, the worker on its sessions' fds while
	 * no object waits for its TTL (the pings made none). */
	printf("# server main thread %lld wake-ups (every 100 ms before), session worker %lld "
	       "(every 100 ms)\n",
	       main_thread, worker);
	CHECK(main_thread >= 0 && worker >= 0);
	CHECK(main_thread <= 2);
	CHECK(worker <= 2);
	e2e_fini(&e);
	rmdir(dir);
}

/*
 * A session holding an object that no RECLAIM will free (the agent withholds
 * it: agent-ctl simulate-reclaim withhold) kept its worker waking every
 * 100 ms until the TTL scan freed it; the worker now sleeps until the
 * object's expiry. With --object-ttl 1200 the object expires 1.5 s after
 * its GET (the TTL and a quarter): in a 2 s window around that the worker
 * wakes a few times, not 20, and the object is freed on time.
 */
static void test_idle_worker_sleeps_to_the_ttl(void)
{
	static const char key[] = "idle-ttl";
	struct rdmem_opts lazy = { RDMEM_PATH_LAZY, 2000, NULL };
	struct proc_use s0, s1;
	char val[8192], *got = NULL;
	uint32_t len = 0;
	long long worker, live0, live1;
	struct e2e e;

	memset(val, 'v', sizeof(val));
	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", "--object-ttl", "1200", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0);
	CHECK_EQ(rdmem_put(e.h, key, sizeof(key) - 1, val, sizeof(val), NULL), 0);
	CHECK_EQ(e2e_ctl(&e, "simulate-reclaim withhold"), 0);
	CHECK_EQ(rdmem_get(e.h, key, sizeof(key) - 1, (void **)&got, &len, &lazy), 0);
	CHECK(len == sizeof(val) && got && !memcmp(got, val, len));
	free(got);
	proc_sleep_ms(200);
	live0 = e2e_server_stat_auth(&e, NULL, "objpool.objects_live");
	sample(e.server.pid, &s0);
	proc_sleep_ms(QUIET_MS);
	sample(e.server.pid, &s1);
	live1 = e2e_server_stat_auth(&e, NULL, "objpool.objects_live");
	report("server", &s0, &s1);
	worker = woke(&s0, &s1, "rdmem-worker");
	printf("# a withheld object: live %lld, then %lld after %d ms; the session worker woke "
	       "%lld times (every 100 ms before)\n",
	       live0, live1, QUIET_MS, worker);
	CHECK_EQ(live0, 1);
	CHECK_EQ(live1, 0);
	CHECK(worker >= 0 && worker <= 4);
	CHECK_EQ(e2e_ctl(&e, "simulate-reclaim off"), 0);
	e2e_fini(&e);
}

int main(void)
{
	rdmem_log_init("test_idle", 0);
	RUN(test_idle_agent_sleeps);
	RUN(test_idle_worker_sleeps_to_the_ttl);
	return check_done();
}
