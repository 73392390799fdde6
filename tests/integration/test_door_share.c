/* test_door_share.c - the front door shared among local users: one uid in
 * the socket's group cannot take every client entry (--clients-per-uid,
 * -EDQUOT, counted, logged); a flood of connect/close and silent
 * connections from such a user costs honest attaches nothing (every one
 * succeeds; success and latency printed, quiet and flooded, in one run);
 * an agent in a child PID namespace (SO_PEERCRED pid 0 for its clients)
 * serves and reclaims clients by their connection. The agent is
 * tests/tools/fd_loopback (the real front door) in its own process; the
 * hostile user is uid/gid HOG_ID, given the socket's group by chown.
 */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libclient/rdmem.h"
#include "rdmem/util.h"
#include "shm/door.h"
#include "tests/check.h"
#include "tests/door_client.h"
#include "tests/proc.h"
#include "tests/tmpdir.h"

#define HOG_ID 4242 /* a uid and gid nobody else uses, not the overflow uid */

static char dir[64], sock[108];

static void next_paths(void)
{
	static int n;

	snprintf(dir, sizeof(dir), "%s/rdmem-share-%d-%d", test_tmpdir(), (int)getpid(), ++n);
	snprintf(sock, sizeof(sock), "%s/door.sock", dir);
}

/* The agent, wrapped (unshare ...) when wrap is given, with --clients
 * clients and any extra flag; then the socket's group is HOG_ID's. */
static int agent_start(struct proc *p, const char *clients, const char *extra,
		       const char *extra_val, char **wrap)
{
	char bin[512];
	char *argv[16];
	int n = 0;

	snprintf(bin, sizeof(bin), "%s/tests/fd_loopback", proc_bin());
	while (wrap && *wrap)
		argv[n++] = *wrap++;
	argv[n++] = bin;
	argv[n++] = "--socket";
	argv[n++] = sock;
	argv[n++] = "--clients";
	argv[n++] = (char *)clients;
	argv[n++] = "--slots";
	argv[n++] = "2";
	argv[n++] = "--max-value";
	argv[n++] = "4096";
	if (extra) {
		argv[n++] = (char *)extra;
		argv[n++] = (char *)extra_val;
	}
	argv[n] = NULL;
	if (proc_start(p, "share-agent", argv, "ready", 5000))
		return -1;
	/* What --shm-group does, done here so the same test runs against any
	 * build: the directory (0750) and the socket (0660) become the group's. */
	return chown(dir, (uid_t)-1, HOG_ID) || chown(sock, (uid_t)-1, HOG_ID) ? -1 : 0;
}

static void agent_stop(struct proc *p)
{
	char cmd[256];

	proc_stop(p, SIGTERM, 5000);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "  cannot remove %s\n", dir);
}

/* In a child: become HOG_ID (uid and gid, no other groups), or exit 20. */
static void become_hog(void)
{
	gid_t g = HOG_ID;

	if (setgroups(1, &g) < 0 || setgid(HOG_ID) < 0 || setuid(HOG_ID) < 0)
		_exit(20);
}

/* ---- per-uid share of the client table ------------------------------------ */

/*
 * As HOG_ID, attaches up to want times and keeps them all; writes how many
 * worked and the first error to w, then waits for a byte on r and, if it is
 * 'c', closes one and attaches again, writing that result.
 */
static void hog_client(int w, int r, int want)
{
	rdmem_t *h[64];
	int got = 0, err = 0, rc, i;
	char cmd;

	become_hog();
	for (i = 0; i < want; i++) {
		rc = rdmem_open(sock, &h[got]);
		if (rc == 0 && door_echo_ok(h[got], "hog"))
			got++;
		else if (!err)
			err = rc ? rc : -EIO;
	}
	if (write(w, &got, sizeof(got)) != sizeof(got) ||
	    write(w, &err, sizeof(err)) != sizeof(err))
		_exit(21);
	while (read(r, &cmd, 1) == 1 && cmd == 'c' && got > 0) {
		rdmem_close(h[--got]);
		rc = rdmem_open(sock, &h[got]);
		got += rc == 0;
		if (write(w, &rc, sizeof(rc)) != sizeof(rc))
			_exit(22);
	}
	while (got > 0)
		rdmem_close(h[--got]);
	_exit(0);
}

struct hog {
	pid_t pid;
	int up, down;
};

static int hog_start(struct hog *hg, int want, int *got, int *err)
{
	int up[2], down[2];

	if (pipe(up) < 0 || pipe(down) < 0)
		return -1;
	hg->pid = fork();
	if (hg->pid == 0) {
		close(up[0]);
		close(down[1]);
		hog_client(up[1], down[0], want);
	}
	close(up[1]);
	close(down[0]);
	hg->up = up[0];
	hg->down = down[1];
	return hg->pid > 0 && read(hg->up, got, sizeof(*got)) == sizeof(*got) &&
		       read(hg->up, err, sizeof(*err)) == sizeof(*err)
		   ? 0
		   : -1;
}

static int hog_stop(struct hog *hg)
{
	int st = -1;

	close(hg->down);
	close(hg->up);
	if (waitpid(hg->pid, &st, 0) != hg->pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Default share: half the table. The hog gets 3 of 6, then -EDQUOT,
 * counted and logged; root (the agent's user) still gets the other 3. */
static void test_share_one_uid_cannot_take_the_table(void)
{
	struct proc agent = { 0 };
	rdmem_t *mine[4] = { 0 };
	struct hog hg;
	int got = -1, err = 0, rc = 1, i;

	next_paths();
	REQUIRE(agent_start(&agent, "6", NULL, NULL, NULL) == 0);
	REQUIRE(hog_start(&hg, 6, &got, &err) == 0);
	printf("# hog uid %d: %d of 6 attaches, then %s\n", HOG_ID, got, rdmem_strerror(err));
	CHECK_EQ(got, 3);
	CHECK_EQ(err, -EDQUOT);
	for (i = 0; i < 3; i++) {
		CHECK(rdmem_open(sock, &mine[i]) == 0);
		CHECK(mine[i] && door_echo_ok(mine[i], "root's share"));
	}
	if (mine[0]) {
		CHECK_EQ(door_stat(mine[0], "door_uid_full"), 3);
		CHECK_EQ(door_stat(mine[0], "door_full"), 0);
		CHECK_EQ(door_stat(mine[0], "clients"), 6);
	}
	/* The table is full now: root gets -EUSERS, not -EDQUOT. */
	CHECK_EQ(rdmem_open(sock, &mine[3]), -EUSERS);
	/* A hog entry that leaves is the hog's again (it waits for the reclaim). */
	CHECK(write(hg.down, "c", 1) == 1);
	CHECK(read(hg.up, &rc, sizeof(rc)) == sizeof(rc));
	CHECK_EQ(rc, 0);
	CHECK(proc_log_has(&agent, "refused: uid 4242 holds 3 client entries, its share "
				   "(--clients-per-uid)"));
	CHECK_EQ(hog_stop(&hg), 0);
	for (i = 0; i < 4; i++)
		if (mine[i])
			rdmem_close(mine[i]);
	agent_stop(&agent);
}

/* --clients-per-uid 1: one entry for the hog; root is never capped. */
static void test_share_flag_sets_the_share(void)
{
	struct proc agent = { 0 };
	rdmem_t *mine[4] = { 0 };
	struct hog hg;
	int got = -1, err = 0, i;

	next_paths();
	REQUIRE(agent_start(&agent, "6", "--clients-per-uid", "1", NULL) == 0);
	REQUIRE(hog_start(&hg, 3, &got, &err) == 0);
	CHECK_EQ(got, 1);
	CHECK_EQ(err, -EDQUOT);
	for (i = 0; i < 4; i++)
		CHECK(rdmem_open(sock, &mine[i]) == 0);
	if (mine[0])
		CHECK_EQ(door_stat(mine[0], "door_uid_full"), 2);
	CHECK_EQ(hog_stop(&hg), 0);
	for (i = 0; i < 4; i++)
		if (mine[i])
			rdmem_close(mine[i]);
	agent_stop(&agent);
}

/* ---- handshake floods ----------------------------------------------------- */

static int flood_connect(void)
{
	struct sockaddr_un sa = { AF_UNIX, { 0 } };
	struct timeval tv = { 0, 100000 }; /* a full backlog: try again */
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (s >= 0 && (setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
		       connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)) {
		close(s);
		return -1;
	}
	return s;
}

#define SILENT_HELD 128 /* connections the silent flooder keeps open at once */

/* As HOG_ID until killed: connect and close at once (silent == 0), or
 * connect and stay silent, keeping the last SILENT_HELD open. */
static void flooder(int silent)
{
	int held[SILENT_HELD], i = 0, s;

	become_hog();
	memset(held, -1, sizeof(held));
	for (;;) {
		s = flood_connect();
		if (s < 0 || !silent) {
			if (s >= 0)
				close(s);
			continue;
		}
		if (held[i] >= 0)
			close(held[i]);
		held[i] = s;
		i = (i + 1) % SILENT_HELD;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

#define HONEST	      300
#define SLOW	      100  /* honest clients paused between connect and hello */
#define SLOW_PAUSE_US 5000 /* as a client preempted there would be */
#ifndef FLOODERS
#define FLOODERS 4 /* processes, half connect/close, half silent */
#endif

/* HONEST attach, echo, detach rounds as root; returns the failures and
 * prints the attach latency (p50, p99, max, in microseconds). */
static int honest_rounds(const char *what)
{
	static uint64_t us[HONEST];
	int i, fails = 0, firsterr = 0;

	for (i = 0; i < HONEST; i++) {
		uint64_t t0 = rdmem_now_ns();
		rdmem_t *h = NULL;
		int rc = rdmem_open(sock, &h);

		us[i] = (rdmem_now_ns() - t0) / 1000;
		if (rc == 0 && !door_echo_ok(h, "honest"))
			rc = -EIO;
		if (rc && !firsterr)
			firsterr = rc;
		fails += rc != 0;
		if (h)
			rdmem_close(h);
	}
	qsort(us, HONEST, sizeof(us[0]), cmp_u64);
	printf("# %s: %d/%d honest attaches ok (first error: %s); attach p50 %llu us, p99 %llu "
	       "us, max %llu us\n",
	       what, HONEST - fails, HONEST, firsterr ? rdmem_strerror(firsterr) : "none",
	       (unsigned long long)us[HONEST / 2], (unsigned long long)us[HONEST * 99 / 100],
	       (unsigned long long)us[HONEST - 1]);
	return fails;
}

/* A client preempted between connect and hello: attaches as librdmem does,
 * with a pause there. 0, or -errno (-ECONNRESET: evicted). */
static int slow_attach(void)
{
	struct rdmem_door_hello hello = { RDMEM_DOOR_MAGIC_HELLO, RDMEM_DOOR_VERSION,
					  RDMEM_SHM_VERSION, 0, 0 };
	const struct timeval tv = { 2, 0 };
	struct rdmem_door_welcome w;
	int s = rdmem_door_connect(sock, &tv), mfd[2] = { -1, -1 };
	ssize_t n;

	if (s < 0)
		return s;
	usleep(SLOW_PAUSE_US);
	n = send(s, &hello, sizeof(hello), MSG_NOSIGNAL);
	if (n == (ssize_t)sizeof(hello))
		n = rdmem_door_recv(s, &w, sizeof(w), mfd, 2);
	if (mfd[0] >= 0)
		close(mfd[0]);
	if (mfd[1] >= 0)
		close(mfd[1]);
	close(s);
	if (n < 0)
		return (int)n;
	return n == (ssize_t)sizeof(w) && w.magic == RDMEM_DOOR_MAGIC_WELCOME && !w.status
		   ? 0
		   : (n == 0 ? -ECONNRESET : -EPROTO);
}

static int slow_rounds(const char *what)
{
	int i, fails = 0;

	for (i = 0; i < SLOW; i++)
		fails += slow_attach() != 0;
	printf("# %s: %d/%d slow-hello attaches ok\n", what, SLOW - fails, SLOW);
	return fails;
}

static void test_share_handshake_flood_costs_honest_attaches_nothing(void)
{
	struct proc agent = { 0 };
	pid_t fl[FLOODERS];
	rdmem_t *probe = NULL;
	int i, quiet, flooded, slow_quiet, slow_flooded;

	next_paths();
	REQUIRE(agent_start(&agent, "8", NULL, NULL, NULL) == 0);
	quiet = honest_rounds("quiet");
	slow_quiet = slow_rounds("quiet");
	for (i = 0; i < FLOODERS; i++) {
		fl[i] = fork();
		if (fl[i] == 0)
			flooder(i & 1);
	}
	usleep(200000); /* the flood is on: the pending handshakes are full */
	flooded = honest_rounds("connect/close + silent flood from another uid");
	slow_flooded = slow_rounds("connect/close + silent flood from another uid");
	for (i = 0; i < FLOODERS; i++)
		if (fl[i] > 0) {
			kill(fl[i], SIGKILL);
			waitpid(fl[i], NULL, 0);
		}
	CHECK_EQ(quiet, 0);
	CHECK_EQ(flooded, 0);
	CHECK_EQ(slow_quiet, 0);
	CHECK_EQ(slow_flooded, 0);
	REQUIRE(rdmem_open(sock, &probe) == 0);
	printf("# door: attached %lld, evicted %lld, timeouts %lld, bad hellos %lld\n",
	       door_stat(probe, "door_attached"), door_stat(probe, "door_evicted"),
	       door_stat(probe, "door_timeouts"), door_stat(probe, "door_bad_hello"));
	/* The flood did fill the handshakes: it was evicted, honest ones not. */
	CHECK(door_stat(probe, "door_evicted") > 0);
	CHECK_EQ(door_stat(probe, "door_attached"), 2 * HONEST + 2 * SLOW + 1);
	rdmem_close(probe);
	agent_stop(&agent);
}

/* ---- an agent in a child PID namespace ------------------------------------ */

/* The agent process under unshare(1): its only child. */
static pid_t child_of(pid_t pid)
{
	char path[64];
	FILE *f;
	int c = -1;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%d", &c) != 1)
			c = -1;
		fclose(f);
	}
	return c;
}

static void test_share_agent_in_child_pid_namespace_serves_outside_clients(void)
{
	char *wrap[] = { "/usr/bin/unshare", "--pid", "--fork", "--kill-child=SIGTERM", NULL };
	struct proc agent = { 0 };
	rdmem_t *h = NULL, *h2 = NULL;
	pid_t inner, kid;
	int p[2], st;
	char b;

	if (access(wrap[0], X_OK) != 0) {
		check_skip("pidns agent", "no /usr/bin/unshare");
		return;
	}
	next_paths();
	REQUIRE(agent_start(&agent, "4", NULL, NULL, wrap) == 0);
	inner = child_of(agent.pid);
	CHECK(inner > 0);
	/* We are outside its namespace: SO_PEERCRED shows it pid 0 for us. */
	CHECK_EQ(rdmem_open(sock, &h), 0);
	if (h) {
		CHECK(door_echo_ok(h, "from the parent namespace"));
		CHECK_EQ(door_stat(h, "door_pid_unknown"), 1);
		/* A detach frees the entry (the connection is the signal)... */
		CHECK_EQ(rdmem_open(sock, &h2), 0);
		if (h2)
			rdmem_close(h2);
		CHECK(door_wait_stat(h, "clients", 1, 2000));
		/* ...and so does a client killed without detaching. */
		REQUIRE(pipe(p) == 0);
		kid = fork();
		REQUIRE(kid >= 0);
		if (kid == 0) {
			rdmem_t *k = NULL;

			b = rdmem_open(sock, &k) == 0 && door_echo_ok(k, "doomed") ? 'y' : 'n';
			if (write(p[1], &b, 1) != 1)
				_exit(1);
			for (;;)
				pause();
		}
		CHECK(read(p[0], &b, 1) == 1 && b == 'y');
		CHECK(door_wait_stat(h, "clients", 2, 1000));
		kill(kid, SIGKILL);
		waitpid(kid, &st, 0);
		CHECK(door_wait_stat(h, "clients", 1, 2000));
		CHECK_EQ(door_stat(h, "dead_clients"), 2);
		CHECK_EQ(door_stat(h, "door_pid_unknown"), 3);
		CHECK_EQ(door_stat(h, "door_hangups"), 2);
		close(p[0]);
		close(p[1]);
		rdmem_close(h);
	}
	CHECK(proc_log_has(&agent, "from outside our PID namespace"));
	/* unshare waits for its child: stop the agent itself, then unshare exits. */
	if (inner > 0)
		kill(inner, SIGTERM);
	agent_stop(&agent);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0) {
		check_skip("test_door_share", "needs root (setuid to another uid, unshare)");
		return check_done();
	}
	RUN(test_share_one_uid_cannot_take_the_table);
	RUN(test_share_flag_sets_the_share);
	RUN(test_share_handshake_flood_costs_honest_attaches_nothing);
	RUN(test_share_agent_in_child_pid_namespace_serves_outside_clients);
	return check_done();
}
