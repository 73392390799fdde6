/* test_door_attach.c - attaching through the front door's socket (shm/door.h):
 * the segment cannot be truncated or grown by anyone it was handed to; an
 * impostor socket or a directory others own or can write is refused by the
 * client and by the agent; a client's forged pid word decides nothing (the
 * agent reclaims by the kernel-reported pid); a client in another PID
 * namespace attaches; silent, garbage and half-hello connections cost the
 * others nothing and are counted. The agent is tests/tools/fd_loopback (the
 * real front door, loopback responder) in its own process.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/frontdoor.h"
#include "libclient/rdmem.h"
#include "libclient/rdmem_priv.h" /* white box: the attachment's fds and entry */
#include "rdmem/util.h"
#include "shm/door.h"
#include "tests/check.h"
#include "tests/door_client.h"
#include "tests/proc.h"

static char dir[64], sock[RDMEM_DOOR_PATH_MAX];

/* A fresh directory name per test (the agent creates it), so runs never meet. */
static void next_paths(void)
{
	static int n;

	snprintf(dir, sizeof(dir), "/tmp/rdmem-door-%d-%d", (int)getpid(), ++n);
	snprintf(sock, sizeof(sock), "%s/door.sock", dir);
}

static int agent_start(struct proc *p)
{
	char bin[512];
	char *argv[] = { bin,	    "--socket", sock,	       "--clients", "6",
			 "--slots", "4",	"--max-value", "4096",	    NULL };

	snprintf(bin, sizeof(bin), "%s/tests/fd_loopback", proc_bin());
	return proc_start(p, "door-agent", argv, "ready", 5000);
}

static void agent_stop(struct proc *p)
{
	char cmd[256];

	proc_stop(p, SIGTERM, 5000);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "  cannot remove %s\n", dir);
}

static uid_t nobody_uid(gid_t *gid)
{
	struct passwd *pw = getpwnam("nobody");

	*gid = pw ? pw->pw_gid : 65534;
	return pw ? pw->pw_uid : 65534;
}

/* The client's entry's pid word, in h's own mapping. */
static int32_t entry_word(rdmem_t *h, uint32_t c)
{
	return atomic_load(&rdmem_shm_client_at(h->att->base, &h->att->geom, c)->pid);
}

/* ---- seals ----------------------------------------------------------------- */

/* Both memfds of an attach are sealed: no size change by anyone, no new seals. */
static void check_sealed(int mfd)
{
	struct stat st;
	off_t len;

	REQUIRE(fstat(mfd, &st) == 0);
	len = st.st_size;
	CHECK_EQ(fcntl(mfd, F_GET_SEALS), RDMEM_DOOR_SEALS);
	errno = 0;
	CHECK(ftruncate(mfd, 4096) < 0 && errno == EPERM);
	errno = 0;
	CHECK(ftruncate(mfd, len + 4096) < 0 && errno == EPERM);
	errno = 0;
	CHECK(fallocate(mfd, 0, len, 4096) < 0 && errno == EPERM);
	errno = 0;
	CHECK(fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE) < 0 && errno == EPERM);
	CHECK(fstat(mfd, &st) == 0 && st.st_size == len);
}

static void test_door_truncate_refused_agent_and_clients_live(void)
{
	struct proc agent = { 0 };
	struct rdmem_door_welcome w;
	rdmem_t *h = NULL, *h2 = NULL;
	struct stat st;
	int fds[2], s, status;

	next_paths();
	REQUIRE(agent_start(&agent) == 0);
	REQUIRE(rdmem_open(sock, &h) == 0);
	REQUIRE(rdmem_open(sock, &h2) == 0);
	/* The agent made its directory private: 0750, ours. */
	REQUIRE(stat(dir, &st) == 0);
	CHECK_EQ(st.st_mode & 07777, 0750);
	CHECK_EQ(st.st_uid, geteuid());
	s = door_raw_attach(sock, &w, fds);
	REQUIRE(s >= 0);
	check_sealed(fds[0]);
	check_sealed(fds[1]);
	usleep(300000); /* before the seals the agent died of SIGBUS within this */
	CHECK_EQ(waitpid(agent.pid, &status, WNOHANG), 0);
	CHECK(door_echo_ok(h, "still here"));
	CHECK(door_echo_ok(h2, "me too"));
	CHECK_EQ(door_stat(h, "door_attached"), 3);
	door_raw_detach(s, fds);
	rdmem_close(h2);
	rdmem_close(h);
	agent_stop(&agent);
}

/* ---- isolation ------------------------------------------------------------- */

/* True when len bytes at p contain needle. */
static int holds(const uint8_t *p, size_t len, const char *needle)
{
	return memmem(p, len, needle, strlen(needle)) != NULL;
}

/* A child touches addr (write: stores to it): the signal it died of, 0 when
 * it could, -1 when it failed otherwise. */
static int touch_in_child(volatile uint8_t *addr, int write)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		/* The kernel's verdict, not a sanitizer's handler (ASan turns a
		 * SIGSEGV into exit 1). */
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		if (write)
			*addr = 0x5a;
		_exit(*addr == 0x77 ? 3 : 0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFSIGNALED(st))
		return WTERMSIG(st);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/*
 * Another client's requests and replies are out of reach: its area is not
 * mapped in ours (a read or write faults), and its bytes are nowhere in
 * what we were given (the common part, our own area, the fds a raw attach
 * gets). Before per-client areas every client mapped every slot.
 */
static void test_door_clients_cannot_reach_each_other(void)
{
	struct proc agent = { 0 };
	struct rdmem_door_welcome w;
	rdmem_t *h1 = NULL, *h2 = NULL;
	char secret[64];
	uint8_t *common, *own;
	int fds[2], s;
	const struct rdmem_shm_geom *g;

	next_paths();
	REQUIRE(agent_start(&agent) == 0);
	REQUIRE(rdmem_open(sock, &h1) == 0);
	REQUIRE(rdmem_open(sock, &h2) == 0);
	REQUIRE(door_echo_ok(h1, "warm") && door_echo_ok(h2, "warm"));
	g = &h1->att->geom;
	CHECK(h1->att->client != h2->att->client);
	snprintf(secret, sizeof(secret), "h2-secret-%d-%llu", (int)getpid(),
		 (unsigned long long)rdmem_now_ns());
	CHECK(door_echo_ok(h2, secret));
	/* h1's mapping of h2's area, and of a free entry's: nothing there. */
	CHECK_EQ(touch_in_child(rdmem_shm_client_area(h1->att->base, g, h2->att->client), 0),
		 SIGSEGV);
	CHECK_EQ(touch_in_child(rdmem_shm_client_area(h1->att->base, g, h2->att->client) +
				    RDMEM_SHM_SLOT_HDR + 100,
				1),
		 SIGSEGV);
	CHECK_EQ(touch_in_child(rdmem_shm_client_area(h1->att->base, g, g->clients - 1), 0),
		 SIGSEGV);
	/* Our own area is ours: readable and writable. */
	CHECK_EQ(touch_in_child(rdmem_shm_client_area(h1->att->base, g, h1->att->client), 1), 0);
	CHECK(!holds(h1->att->base, g->slots_off, secret));
	CHECK(!holds(rdmem_shm_client_area(h1->att->base, g, h1->att->client),
		     rdmem_shm_client_size(g), secret));
	CHECK(holds(rdmem_shm_client_area(h2->att->base, g, h2->att->client),
		    rdmem_shm_client_size(g),
		    secret)); /* the check itself can see it where it is */
	/* What a third client is handed holds none of it either. */
	s = door_raw_attach(sock, &w, fds);
	REQUIRE(s >= 0);
	CHECK_EQ(w.size, g->slots_off);
	CHECK_EQ(w.client_size, rdmem_shm_client_size(g));
	common = mmap(NULL, w.size, PROT_READ, MAP_SHARED, fds[0], 0);
	own = mmap(NULL, w.client_size, PROT_READ, MAP_SHARED, fds[1], 0);
	REQUIRE(common != MAP_FAILED && own != MAP_FAILED);
	CHECK(!holds(common, w.size, secret));
	CHECK(!holds(own, w.client_size, secret));
	munmap(common, w.size);
	munmap(own, w.client_size);
	door_raw_detach(s, fds);
	rdmem_close(h2);
	rdmem_close(h1);
	agent_stop(&agent);
}

/*
 * An entry's next owner gets memory of its own: a process that detached
 * and kept its old area mapped sees none of the next owner's calls, and the
 * next owner's slots start FREE whatever the last one left in them.
 */
static void test_door_reused_entry_gets_fresh_memory(void)
{
	struct proc agent = { 0 };
	struct rdmem_door_welcome w;
	rdmem_t *probe = NULL, *h = NULL;
	struct rdmem_shm_geom g;
	char secret[64];
	uint8_t *old;
	int fds[2], s, i;
	uint32_t sl;

	next_paths();
	REQUIRE(agent_start(&agent) == 0);
	s = door_raw_attach(sock, &w, fds);
	REQUIRE(s >= 0);
	REQUIRE(rdmem_shm_geom_compute(w.clients, w.slots, w.max_value, &g) == 0);
	old = mmap(NULL, w.client_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
	REQUIRE(old != MAP_FAILED);
	/* Leave every slot looking busy and a mark in its payload, then
	 * detach with the mapping kept. */
	for (sl = 0; sl < g.slots; sl++) {
		atomic_store(&((struct rdmem_shm_slot *)(old + (uint64_t)sl * g.slot_size))->state,
			     RDMEM_SLOT_DONE);
		memcpy(old + (uint64_t)sl * g.slot_size + RDMEM_SHM_SLOT_HDR, "left-behind", 11);
	}
	/* The probe takes the lowest free entry while the raw one still holds
	 * its own; once that is reclaimed, the next attach gets it. */
	REQUIRE(rdmem_open(sock, &probe) == 0);
	CHECK(probe->att->client != w.client);
	door_raw_detach(s, fds);
	CHECK(door_wait_stat(probe, "dead_clients", 1, 3000));
	/* The agent freed the area's pages when it reclaimed the entry (its
	 * memory does not grow with clients that keep their fds): zeros here. */
	CHECK(!holds(old, w.client_size, "left-behind"));
	CHECK_EQ(atomic_load(&((struct rdmem_shm_slot *)old)->state), RDMEM_SLOT_FREE);
	REQUIRE(rdmem_open(sock, &h) == 0);
	CHECK_EQ(h->att->client, w.client);
	snprintf(secret, sizeof(secret), "next-owner-%d-%llu", (int)getpid(),
		 (unsigned long long)rdmem_now_ns());
	for (i = 0; i < 8; i++) /* every slot the library cycles through */
		CHECK(door_echo_ok(h, secret));
	CHECK(!holds(old, w.client_size, secret));
	for (sl = 0; sl < g.slots; sl++)
		CHECK(RDMEM_SLOT_PHASE(atomic_load(
			  &rdmem_shm_slot_at(h->att->base, &g, h->att->client, sl)->state)) ==
		      RDMEM_SLOT_FREE);
	munmap(old, w.client_size);
	rdmem_close(h);
	rdmem_close(probe);
	agent_stop(&agent);
}

/* A librdmem of another door version is told so, not just hung up on. */
static void test_door_other_version_told(void)
{
	struct rdmem_door_hello hello = { RDMEM_DOOR_MAGIC_HELLO, RDMEM_DOOR_VERSION - 1,
					  RDMEM_SHM_VERSION - 1, 0, 0 };
	const struct timeval tv = { 2, 0 };
	struct proc agent = { 0 };
	struct rdmem_door_welcome w;
	int s, fds[2];
	ssize_t n;

	next_paths();
	REQUIRE(agent_start(&agent) == 0);
	s = rdmem_door_connect(sock, &tv);
	REQUIRE(s >= 0);
	CHECK_EQ(send(s, &hello, sizeof(hello), MSG_NOSIGNAL), (ssize_t)sizeof(hello));
	n = rdmem_door_recv(s, &w, sizeof(w), fds, 2);
	CHECK_EQ(n, (ssize_t)sizeof(w));
	CHECK_EQ(w.magic, RDMEM_DOOR_MAGIC_WELCOME);
	CHECK_EQ(w.version, RDMEM_DOOR_VERSION);
	CHECK_EQ(w.status, EPROTONOSUPPORT);
	CHECK(fds[0] < 0 && fds[1] < 0);
	close(s);
	agent_stop(&agent);
}

/* ---- impostors ------------------------------------------------------------- */

/*
 * An impostor listening on path: it binds as root (in a directory root
 * owns), or creates dir itself as nobody, and listens as nobody. Returns its
 * pid once it listens; it answers nothing and exits when killed.
 */
static pid_t impostor_start_as(const char *path, uid_t u, gid_t g, int make_dir);

static pid_t impostor_start(const char *path, int make_dir_as_nobody)
{
	gid_t g;
	uid_t u = nobody_uid(&g);

	return impostor_start_as(path, u, g, make_dir_as_nobody);
}

/* The same as uid u: dir made 0755 and the socket 0666, so anyone may connect. */
static pid_t impostor_start_as(const char *path, uid_t u, gid_t g, int make_dir_as_nobody)
{
	int p[2];
	pid_t pid;
	char c = 'n';

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct sockaddr_un sa = { AF_UNIX, { 0 } };
		int s = socket(AF_UNIX, SOCK_STREAM, 0);

		if (make_dir_as_nobody && (setgid(g) || setuid(u) || mkdir(dir, 0755)))
			_exit(1);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0666))
			_exit(2);
		/* The listener's credentials are taken at listen(): nobody's. */
		if ((!make_dir_as_nobody && (setgid(g) || setuid(u))) || listen(s, 8) < 0)
			_exit(3);
		c = 'y';
		if (write(p[1], &c, 1) != 1)
			_exit(4);
		for (;;)
			pause();
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &c, 1) != 1 || c != 'y') {
		close(p[0]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		return -1;
	}
	close(p[0]);
	return pid;
}

static void impostor_stop(pid_t pid)
{
	char cmd[256];

	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "  cannot remove %s\n", dir);
}

/* Creating the front door at path must fail with want. */
static int agent_refuses(const char *path, int want)
{
	struct rdmem_frontdoor_config cfg;
	struct rdmem_frontdoor *fd = NULL;
	int rc;

	memset(&cfg, 0, sizeof(cfg));
	cfg.shm_name = "/rdmem-door-test";
	cfg.socket_path = path;
	cfg.clients = 2;
	cfg.slots = 2;
	cfg.max_value = 4096;
	cfg.group = (gid_t)-1;
	rc = rdmem_frontdoor_create(&cfg, &fd);
	if (rc == 0)
		rdmem_frontdoor_destroy(fd);
	if (rc != want)
		fprintf(stderr, "  create at %s: %d, want %d\n", path, rc, want);
	return rc == want;
}

static void test_door_impostor_refused_by_client_and_agent(void)
{
	rdmem_t *h = NULL;
	pid_t imp;

	/* A directory nobody created (the agent was down): not root's, not ours. */
	next_paths();
	imp = impostor_start(sock, 1);
	REQUIRE(imp > 0);
	CHECK_EQ(rdmem_open(sock, &h), -EPERM);
	CHECK(agent_refuses(sock, -EPERM)); /* and the real agent will not use it */
	impostor_stop(imp);

	/* Root's private directory, but the socket's listener is nobody. */
	next_paths();
	REQUIRE(mkdir(dir, 0755) == 0);
	imp = impostor_start(sock, 0);
	REQUIRE(imp > 0);
	CHECK_EQ(rdmem_open(sock, &h), -EPERM);
	impostor_stop(imp);

	/* A directory others can write: neither side trusts it. */
	next_paths();
	REQUIRE(mkdir(dir, 0700) == 0 && chmod(dir, 0777) == 0);
	CHECK(agent_refuses(sock, -EPERM));
	CHECK_EQ(rdmem_open(sock, &h), -EPERM);
	CHECK(rmdir(dir) == 0);
	CHECK(agent_refuses("/tmp/rdmem-door-in-tmp.sock", -EPERM)); /* /tmp is 1777 */

	/* Nobody there at all: a plain refusal, not a hang. */
	next_paths();
	CHECK_EQ(rdmem_open(sock, &h), -ECONNREFUSED);
}

/*
 * Child: uid 2001, then (if userns) a user namespace with no uid mapping
 * written, then rdmem_open(path). Exits with -rc (0 on success).
 */
static pid_t victim_open(const char *path, int userns)
{
	pid_t pid = fork();

	if (pid == 0) {
		rdmem_t *h = NULL;
		int rc;

		/* The default runtime directory, as for a user with no session. */
		if (unsetenv("XDG_RUNTIME_DIR") || unsetenv("RDMEM_RUNTIME_DIR") ||
		    setgroups(0, NULL) || setgid(2001) || setuid(2001))
			_exit(100);
		if (userns && unshare(CLONE_NEWUSER))
			_exit(101);
		rc = rdmem_open(path, &h);
		rdmem_close(h);
		/* Every errno fits an exit status (ECONNREFUSED is 111). */
		_exit(rc < 0 && rc > -255 ? -rc : rc ? 255 : 0);
	}
	return pid;
}

static int victim_rc(pid_t pid)
{
	int st = 0;

	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1000;
	return -WEXITSTATUS(st);
}

/*
 * Uid 3000 listens in a directory it owns. In a user namespace that maps
 * nobody, uid 2001 sees itself, the directory and the listener all as the
 * overflow uid: the client must refuse rather than take "owner == me".
 */
static int tsan_run(void)
{
	const char *san = getenv("RDMEM_SANITIZER");

	return san && !strcmp(san, "tsan");
}

static void test_door_unmapped_userns_impostor_refused(void)
{
	pid_t imp;
	int rc;

	next_paths();
	imp = impostor_start_as(sock, 3000, 3000, 1);
	REQUIRE(imp > 0);
	CHECK_EQ(victim_rc(victim_open(sock, 0)), -EPERM);
	rc = victim_rc(victim_open(sock, 1));
	impostor_stop(imp);
	/* TSan's runtime thread makes the process multithreaded, and
	 * unshare(CLONE_NEWUSER) refuses that (EINVAL): the plain run covers it. */
	if (rc == -101 && tsan_run())
		check_skip("test_door_attach", "unshare(CLONE_NEWUSER) is refused under TSan");
	else
		CHECK_EQ(rc, -EPERM);
}

/*
 * Uid 2002 makes /tmp/rdmem-2001 first (sticky /tmp: 2001 cannot remove it)
 * and listens in it under the name 2001 will open. Uid 2001, with no
 * XDG_RUNTIME_DIR, must not be stopped there (-EPERM) but go on to
 * /run/rdmem, where no agent of that name runs (refused, or not searchable).
 */
static void test_door_precreated_tmp_dir_blocks_no_one(void)
{
	char name[32], def[RDMEM_DOOR_PATH_MAX], *xdg = getenv("XDG_RUNTIME_DIR");
	pid_t imp;
	int rc;

	snprintf(name, sizeof(name), "door-tmp-%d", (int)getpid());
	snprintf(dir, sizeof(dir), "/tmp/rdmem-2001");
	snprintf(sock, sizeof(sock), "%s/%s.sock", dir, name);
	if (system("rm -rf /tmp/rdmem-2001") != 0)
		fprintf(stderr, "  cannot clear /tmp/rdmem-2001\n");
	imp = impostor_start_as(sock, 2002, 2002, 1);
	REQUIRE(imp > 0);
	rc = victim_rc(victim_open(name, 0));
	printf("# uid 2001 opening %s with /tmp/rdmem-2001 taken: %d\n", name, rc);
	CHECK(rc == -ECONNREFUSED || rc == -EACCES);
	impostor_stop(imp);
	/* And the agent's default without a session is never in /tmp either. */
	xdg = xdg ? strdup(xdg) : NULL;
	unsetenv("XDG_RUNTIME_DIR");
	CHECK(getenv("RDMEM_RUNTIME_DIR") == NULL);
	CHECK(rdmem_door_default_dir(2001, def, sizeof(def)) == 0);
	CHECK(!strcmp(def, RDMEM_DOOR_ROOT_DIR));
	if (xdg)
		setenv("XDG_RUNTIME_DIR", xdg, 1);
	free(xdg);
}

/* ---- the header ----------------------------------------------------------- */

/* Attach and call both work: a fresh rdmem_open, and a call on h. */
static int attach_and_call_ok(rdmem_t *h)
{
	rdmem_t *h3 = NULL;
	int ok =
	    rdmem_open(sock, &h3) == 0 && door_echo_ok(h3, "fresh") && door_echo_ok(h, "honest");

	rdmem_close(h3);
	return ok;
}

/*
 * A client writes the header's epoch, state and a geometry word. Once every
 * attach and call failed until the agent restarted; then until the agent's
 * scan put them back (~110 ms). Now clients trust only the welcome and
 * their connection: nothing fails, and the scan still puts the words back.
 */
static void test_door_header_overwrite_repaired(void)
{
	struct proc agent = { 0 };
	rdmem_t *bad = NULL, *h = NULL;
	struct rdmem_shm_header *hdr;
	uint64_t t0, ms;

	next_paths();
	REQUIRE(agent_start(&agent) == 0);
	REQUIRE(rdmem_open(sock, &bad) == 0 && rdmem_open(sock, &h) == 0);
	CHECK(door_echo_ok(h, "before"));
	CHECK_EQ(door_stat(h, "header_repaired"), 0);
	hdr = bad->att->hdr;
	t0 = rdmem_now_ns();
	atomic_store(&hdr->epoch, 1);
	atomic_store(&hdr->state, RDMEM_SHM_CLOSED);
	hdr->slots = 3;
	CHECK(attach_and_call_ok(h)); /* costs the others nothing */
	CHECK(door_wait_stat(h, "header_repaired", 1, 2000));
	ms = (rdmem_now_ns() - t0) / 1000000;
	printf("# header put back %llu ms after it was overwritten; calls and attaches "
	       "never failed\n",
	       (unsigned long long)ms);
	CHECK(ms < 400);
	CHECK(atomic_load(&hdr->state) == RDMEM_SHM_RUNNING && atomic_load(&hdr->epoch) != 1 &&
	      hdr->slots == h->att->geom.slots);
	CHECK(attach_and_call_ok(h));
	CHECK_EQ(bad->n_reattach + h->n_reattach, 0);
	rdmem_close(bad);
	rdmem_close(h);
	agent_stop(&agent);
}

/* A fresh agent, a client h of it, a pipe p, then fork(): its result, or -1. */
static pid_t agent_client_fork(struct proc *agent, rdmem_t **h, int p[2])
{
	next_paths();
	if (agent_start(agent) || rdmem_open(sock, h) || pipe(p))
		return -1;
	return fork();
}

/*
 * Child: attaches, says so on w, then writes a made-up pid into every
 * entry's pid word, over and over, for ms milliseconds.
 */
static void pid_forger(int w, int ms)
{
	rdmem_t *h = NULL;
	uint64_t end;
	uint32_t c;
	char y = 'y';

	if (rdmem_open(sock, &h) != 0 || write(w, &y, 1) != 1)
		_exit(1);
	end = rdmem_now_ns() + (uint64_t)ms * 1000000ull;
	while (rdmem_now_ns() < end)
		for (c = 0; c < h->att->geom.clients; c++)
			atomic_store(&rdmem_shm_client_at(h->att->base, &h->att->geom, c)->pid,
				     424242);
	_exit(0);
}

/*
 * Another client forging every entry's pid word costs an honest client
 * nothing: no failed call, no re-attach (the word is not the client's
 * liveness test; its connection is).
 */
static void test_door_forged_pid_words_cost_honest_clients_nothing(void)
{
	struct proc agent = { 0 };
	struct rdmem_counters cnt;
	rdmem_t *h = NULL;
	int p[2], fails = 0, calls = 0, st;
	pid_t pid;
	char y;

	pid = agent_client_fork(&agent, &h, p);
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		pid_forger(p[1], 300);
	}
	close(p[1]);
	CHECK(read(p[0], &y, 1) == 1);
	close(p[0]);
	while (calls < 2000 || waitpid(pid, &st, WNOHANG) == 0) {
		fails += !door_echo_ok(h, "honest");
		calls++;
	}
	rdmem_get_counters(h, &cnt);
	printf("# %d calls while the pid words were forged: %d failed, %llu re-attaches, "
	       "pid_forged %lld\n",
	       calls, fails, (unsigned long long)cnt.reattach, door_stat(h, "pid_forged"));
	CHECK_EQ(fails, 0);
	CHECK_EQ(cnt.reattach, 0);
	waitpid(pid, &st, 0);
	rdmem_close(h);
	agent_stop(&agent);
}

/* ---- credentialed pid ------------------------------------------------------ */

/*
 * A client that forges its pid word to 1 (a process that never dies) and
 * dies is still reclaimed: by its connection, and, while a forked child
 * keeps that connection open, by the pid the kernel reported at attach.
 */
static void test_door_forged_pid_word_decides_nothing(void)
{
	struct proc agent = { 0 };
	rdmem_t *h = NULL;
	long long hangups;
	int p[2], status;
	pid_t pid, holder = 0;
	uint32_t c = 0;

	pid = agent_client_fork(&agent, &h, p);
	REQUIRE(pid >= 0);
	if (pid == 0) {
		rdmem_t *mine;
		pid_t keeper;

		if (rdmem_open(sock, &mine))
			_exit(2);
		/* A child that keeps our connection open after we die. */
		keeper = fork();
		if (keeper == 0) {
			for (;;)
				pause();
		}
		c = mine->att->client;
		atomic_store(&rdmem_shm_client_at(mine->att->base, &mine->att->geom, c)->pid, 1);
		if (write(p[1], &c, sizeof(c)) != sizeof(c) ||
		    write(p[1], &keeper, sizeof(keeper)) != sizeof(keeper))
			_exit(3);
		_exit(0); /* no rdmem_close: it just dies */
	}
	close(p[1]);
	CHECK(read(p[0], &c, sizeof(c)) == sizeof(c));
	CHECK(read(p[0], &holder, sizeof(holder)) == sizeof(holder));
	close(p[0]);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	hangups = door_stat(h, "door_hangups");
	/* Reclaimed while its connection is still open, whatever its word said. */
	CHECK(door_wait_stat(h, "clients", 1, 2000));
	CHECK(door_stat(h, "dead_clients") >= 1);
	CHECK(door_stat(h, "pid_forged") >= 1);
	CHECK_EQ(door_stat(h, "door_hangups"), hangups);
	CHECK_EQ(entry_word(h, c), 0);
	if (holder > 0) {
		kill(holder, SIGKILL);
		waitpid(holder, NULL, 0); /* not ours to reap: init's; this may fail */
	}
	CHECK(door_echo_ok(h, "after the forger"));
	rdmem_close(h);
	agent_stop(&agent);
}

/*
 * An idle agent has no scan tick: a client that dies while a process it
 * forked keeps its connection open is still reclaimed, because the door
 * polls a pidfd of every owner. The keeper sees the agent close that
 * connection (the entry's reclaim) with nobody calling the agent, and the
 * pidfd, not a scan of the pid, told it (frontdoor.door_owner_exits).
 */
static void test_door_owner_exit_seen_while_idle(void)
{
	struct proc agent = { 0 };
	rdmem_t *h = NULL;
	uint64_t t0, waited_ms;
	long long exits = -1;
	int p[2], status;
	char got = 0;
	pid_t pid;

	pid = agent_client_fork(&agent, &h, p);
	REQUIRE(pid >= 0);
	if (pid > 0)
		exits = door_stat(h, "door_owner_exits");
	if (pid == 0) {
		struct pollfd pf;
		rdmem_t *mine;
		char r = 't';

		close(p[0]);
		if (rdmem_open(sock, &mine))
			_exit(2);
		if (fork() == 0) { /* the keeper: holds the connection, reports its end */
			pf = (struct pollfd){ rdmem__lib(mine->att)->sock, POLLIN, 0 };
			if (poll(&pf, 1, 3000) == 1)
				r = 'h';
			_exit(write(p[1], &r, 1) == 1 ? 0 : 3);
		}
		/* Long enough for the actor's last scan after any ring activity. */
		proc_sleep_ms(600);
		_exit(0);
	}
	close(p[1]);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	t0 = rdmem_now_ns();
	CHECK(read(p[0], &got, 1) == 1);
	waited_ms = (rdmem_now_ns() - t0) / 1000000;
	close(p[0]);
	printf("# the keeper saw its connection closed %llu ms after the owner exited ('%c')\n",
	       (unsigned long long)waited_ms, got);
	CHECK_EQ(got, 'h');
	CHECK(exits >= 0 && door_stat(h, "door_owner_exits") == exits + 1);
	CHECK(door_stat(h, "dead_clients") >= 1);
	CHECK(door_echo_ok(h, "after the owner's exit"));
	rdmem_close(h);
	agent_stop(&agent);
}

/* A client that forged its word and was killed -9 is reclaimed at once (its connection). */
static void test_door_forged_pid_killed_reclaimed(void)
{
	struct proc agent = { 0 };
	rdmem_t *h = NULL;
	int p[2], status;
	uint32_t c = 0;
	pid_t pid;

	pid = agent_client_fork(&agent, &h, p);
	REQUIRE(pid >= 0);
	if (pid == 0) {
		rdmem_t *mine;

		if (rdmem_open(sock, &mine))
			_exit(2);
		c = mine->att->client;
		atomic_store(&rdmem_shm_client_at(mine->att->base, &mine->att->geom, c)->pid, -7);
		if (write(p[1], &c, sizeof(c)) != sizeof(c))
			_exit(3);
		for (;;)
			pause();
	}
	close(p[1]);
	CHECK(read(p[0], &c, sizeof(c)) == sizeof(c));
	close(p[0]);
	/* While it lives, its word is put back to its credentialed pid. */
	usleep(250000);
	CHECK_EQ(entry_word(h, c), pid);
	CHECK(door_stat(h, "pid_forged") >= 1);
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(door_wait_stat(h, "clients", 1, 1000));
	CHECK_EQ(door_stat(h, "door_hangups"), 1);
	CHECK_EQ(door_stat(h, "dead_clients"), 1);
	rdmem_close(h);
	agent_stop(&agent);
}

/* ---- PID namespaces ---------------------------------------------------------- */

static void pidns_client(int wfd, int rfd)
{
	rdmem_t *h;
	uint32_t c;
	char go;
	int ok;

	if (rdmem_open(sock, &h))
		_exit(2);
	ok = getpid() == 1 && door_echo_ok(h, "from another pid namespace");
	c = ok ? h->att->client : UINT32_MAX;
	if (write(wfd, &c, sizeof(c)) != sizeof(c) || read(rfd, &go, 1) != 1)
		_exit(3);
	ok = ok && door_echo_ok(h, "still attached");
	rdmem_close(h);
	_exit(ok ? 0 : 1);
}

static void test_door_attach_from_another_pid_namespace(void)
{
	struct proc agent = { 0 };
	rdmem_t *h = NULL;
	int up[2], down[2], pp[2], status;
	pid_t pid, inner = 0;
	uint32_t c = UINT32_MAX;

	next_paths();
	REQUIRE(agent_start(&agent) == 0);
	REQUIRE(rdmem_open(sock, &h) == 0);
	REQUIRE(pipe(up) == 0 && pipe(down) == 0 && pipe(pp) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		if (unshare(CLONE_NEWPID) < 0)
			_exit(10);
		inner = fork(); /* pid 1 of the new namespace */
		if (inner == 0)
			pidns_client(up[1], down[0]);
		if (inner < 0 || write(pp[1], &inner, sizeof(inner)) != sizeof(inner) ||
		    waitpid(inner, &status, 0) != inner)
			_exit(11);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 12);
	}
	close(up[1]);
	close(down[0]);
	close(pp[1]);
	CHECK(read(pp[0], &inner, sizeof(inner)) == sizeof(inner));
	CHECK(read(up[0], &c, sizeof(c)) == sizeof(c));
	REQUIRE(c < 6);
	/* The agent wrote the client's pid as this namespace sees it, not 1. */
	CHECK(inner > 1);
	CHECK_EQ(entry_word(h, c), inner);
	CHECK(write(down[1], "g", 1) == 1);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(up[0]);
	close(down[1]);
	close(pp[0]);
	rdmem_close(h);
	agent_stop(&agent);
}

/* ---- misbehaving connections -------------------------------------------------- */

static int raw_connect(void)
{
	struct sockaddr_un sa = { AF_UNIX, { 0 } };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(s);
		return -1;
	}
	return s;
}

#define HANGERS 20 /* more than the door's RDMEM_DOOR_PENDING handshakes */

static void test_door_silent_garbage_and_half_hellos_block_no_one(void)
{
	struct rdmem_door_hello bad = { 0x41414141u, 1, RDMEM_SHM_VERSION, 0, 0 };
	struct proc agent = { 0 };
	int hang[HANGERS], g1, g2, half, i;
	rdmem_t *h = NULL, *h2 = NULL;
	uint64_t t0, took;
	char b;

	next_paths();
	REQUIRE(agent_start(&agent) == 0);
	for (i = 0; i < HANGERS; i++)
		hang[i] = raw_connect();
	g1 = raw_connect();
	g2 = raw_connect();
	half = raw_connect();
	REQUIRE(hang[HANGERS - 1] >= 0 && g1 >= 0 && g2 >= 0 && half >= 0);
	CHECK(write(g1, &bad, sizeof(bad)) == sizeof(bad));
	CHECK(write(g2, "GET / HTTP/1.0\r\n\r\n", 18) == 18);
	CHECK(write(half, "DORH", 3) == 3);
	/* An honest client attaches at once, silent connections or not. */
	t0 = rdmem_now_ns();
	REQUIRE(rdmem_open(sock, &h) == 0);
	took = (rdmem_now_ns() - t0) / 1000000;
	printf("# attach with %d silent connections waiting: %llu ms\n", HANGERS,
	       (unsigned long long)took);
	CHECK(took < 500);
	CHECK(door_echo_ok(h, "not blocked"));
	CHECK(door_wait_stat(h, "door_bad_hello", 2, 1000));
	/* Silent and half-hello connections: evicted by newer ones (more than
	 * the door holds at once) or closed at the hello deadline, all of them. */
	t0 = rdmem_now_ns();
	while (door_stat(h, "door_timeouts") + door_stat(h, "door_evicted") < HANGERS + 1 &&
	       rdmem_now_ns() - t0 < 3000000000ull)
		usleep(5000);
	printf("# timeouts %lld, evicted %lld, bad hellos %lld\n", door_stat(h, "door_timeouts"),
	       door_stat(h, "door_evicted"), door_stat(h, "door_bad_hello"));
	CHECK_EQ(door_stat(h, "door_timeouts") + door_stat(h, "door_evicted"), HANGERS + 1);
	CHECK(door_stat(h, "door_evicted") >= 1);
	CHECK(door_stat(h, "door_timeouts") >= 1);
	CHECK_EQ(door_stat(h, "door_bad_hello"), 2);
	CHECK(read(hang[HANGERS - 1], &b, 1) == 0); /* closed by the agent */
	/* An attached client that sends bytes it must not is cut off and counted. */
	REQUIRE(rdmem_open(sock, &h2) == 0);
	CHECK(write(rdmem__lib(h2->att)->sock, "x", 1) == 1);
	CHECK(door_wait_stat(h, "door_hangups", 1, 1000));
	CHECK(door_wait_stat(h, "clients", 1, 1000));
	CHECK_EQ(door_stat(h, "door_bad_hello"), 3);
	CHECK_EQ(door_stat(h, "door_attached"), 2);
	rdmem_close(h2);
	for (i = 0; i < HANGERS; i++)
		if (hang[i] >= 0)
			close(hang[i]);
	close(g1);
	close(g2);
	close(half);
	rdmem_close(h);
	agent_stop(&agent);
}

/* Detach is the connection's close; a fast attach/detach loop on a small
 * table waits the one actor round a leaving entry needs, never EUSERS. */
static void test_door_attach_detach_loop_never_runs_out(void)
{
	struct proc agent = { 0 };
	rdmem_t *h = NULL, *probe = NULL;
	int i, fails = 0;

	next_paths();
	REQUIRE(agent_start(&agent) == 0); /* 6 entries */
	REQUIRE(rdmem_open(sock, &probe) == 0);
	for (i = 0; i < 300; i++) {
		if (rdmem_open(sock, &h) != 0) {
			fails++;
			continue;
		}
		rdmem_close(h);
	}
	CHECK_EQ(fails, 0);
	CHECK_EQ(door_stat(probe, "door_full"), 0);
	CHECK_EQ(door_stat(probe, "door_attached"), 301);
	CHECK(door_wait_stat(probe, "dead_clients", 300, 2000));
	CHECK(door_wait_stat(probe, "clients", 1, 2000));
	rdmem_close(probe);
	agent_stop(&agent);
}

/* rdmem_close is seen by the agent even while a forked child holds a copy of
 * the connection (it shuts the socket down, not just closes its fd). */
static void test_door_close_seen_with_a_forked_child_holding_the_socket(void)
{
	struct proc agent = { 0 };
	rdmem_t *h = NULL, *probe = NULL;
	pid_t child;

	next_paths();
	REQUIRE(agent_start(&agent) == 0);
	REQUIRE(rdmem_open(sock, &probe) == 0);
	REQUIRE(rdmem_open(sock, &h) == 0);
	CHECK_EQ(door_stat(probe, "clients"), 2);
	child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		for (;;)
			pause();
	}
	rdmem_close(h);
	CHECK(door_wait_stat(probe, "clients", 1, 1000));
	CHECK_EQ(door_stat(probe, "door_hangups"), 1);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	rdmem_close(probe);
	agent_stop(&agent);
}

/* Out of file descriptors, the door leaves its backlog alone for a tick
 * instead of spinning on a listener that stays readable; it attaches
 * again once connections go. */
static void test_door_out_of_fds_does_not_spin(void)
{
	struct rlimit old, low;
	struct proc agent = { 0 };
	int hang[40], i, started;
	long long t0, t1;
	rdmem_t *h = NULL;

	next_paths();
	REQUIRE(getrlimit(RLIMIT_NOFILE, &old) == 0);
	low = (struct rlimit){ 24, old.rlim_max }; /* the agent inherits it */
	REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
	started = agent_start(&agent);
	REQUIRE(setrlimit(RLIMIT_NOFILE, &old) == 0);
	REQUIRE(started == 0);
	for (i = 0; i < 40; i++)
		hang[i] = raw_connect();
	usleep(300000);
	t0 = proc_cpu_ticks(agent.pid);
	usleep(1000000);
	t1 = proc_cpu_ticks(agent.pid);
	printf("# agent CPU over 1 s with its fds used up: %lld ticks\n", t1 - t0);
	CHECK(t0 >= 0 && t1 - t0 < 30); /* a spin would be ~100 per second */
	for (i = 0; i < 40; i++)
		if (hang[i] >= 0)
			close(hang[i]);
	usleep(1500000); /* the hello deadline frees the ones it took */
	CHECK_EQ(rdmem_open(sock, &h), 0);
	if (h) {
		CHECK(door_echo_ok(h, "fds back"));
		rdmem_close(h);
	}
	agent_stop(&agent);
}

/* ---- a stopped agent ------------------------------------------------------- */

/* Fills the listen backlog of sock with non-blocking connects; returns how many. */
static int backlog_fill(int *fds, int cap)
{
	struct sockaddr_un sa = { AF_UNIX, { 0 } };
	int n = 0;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	while (n < cap) {
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

		if (s < 0)
			break;
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			close(s);
			break;
		}
		fds[n++] = s;
	}
	return n;
}

/* rdmem_open(sock) in a child whose exit status is the errno it returned. */
static pid_t open_in_child(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		rdmem_t *h = NULL;
		int rc = rdmem_open(sock, &h);

		_exit(rc < 0 && rc > -256 ? -rc : 255);
	}
	return pid;
}

/*
 * The agent stopped (SIGSTOP) with its backlog full: connect itself would
 * block. rdmem_open must still give up within its 2 s, in a child so that
 * a hang fails the test instead of stalling it.
 */
static void test_door_stopped_agent_full_backlog_open_times_out(void)
{
	struct proc agent = { 0 };
	int fds[512], n, st = 0, i;
	uint64_t t0;
	pid_t pid, got = 0;

	next_paths();
	REQUIRE(agent_start(&agent) == 0);
	/* Stopped for real before the fill: a door thread still running would
	 * accept (and evict) connects, and the backlog might never fill (CI
	 * under ASan queued all 512). */
	REQUIRE(proc_stop_wait(agent.pid, 5000) == 0);
	n = backlog_fill(fds, 512);
	CHECK(n > 0 && n < 512);
	t0 = rdmem_now_ns();
	pid = open_in_child();
	REQUIRE(pid >= 0);
	while (rdmem_now_ns() - t0 < 5000000000ull && (got = waitpid(pid, &st, WNOHANG)) == 0)
		usleep(10000);
	printf("# rdmem_open with the agent stopped and %d connects queued: %s after %llu ms\n", n,
	       got == pid ? "returned" : "still blocked",
	       (unsigned long long)((rdmem_now_ns() - t0) / 1000000));
	CHECK(got == pid && WIFEXITED(st) && WEXITSTATUS(st) == ETIMEDOUT);
	CHECK(rdmem_now_ns() - t0 < 2500000000ull);
	if (got != pid) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	for (i = 0; i < n; i++)
		close(fds[i]);
	kill(agent.pid, SIGCONT);
	agent_stop(&agent);
}

/*
 * The agent dies while our hello waits in its backlog: the connection is
 * reset before any welcome. rdmem_open must say "no agent" (-ECONNREFUSED,
 * which callers retry), not pass the socket's -ECONNRESET up as if a call
 * had failed mid-flight (CI's Soft-RoCE agent-restart check saw that).
 */
static void test_door_agent_gone_mid_handshake_is_refused(void)
{
	struct proc agent = { 0 };
	int st = 0;
	pid_t pid;

	next_paths();
	REQUIRE(agent_start(&agent) == 0);
	REQUIRE(proc_stop_wait(agent.pid, 5000) == 0); /* no welcome can come */
	pid = open_in_child();
	REQUIRE(pid >= 0);
	proc_sleep_ms(300); /* connected, hello sent, waiting for the welcome */
	kill(agent.pid, SIGKILL);
	REQUIRE(waitpid(pid, &st, 0) == pid);
	printf("# rdmem_open when the agent died mid-handshake: %s\n",
	       WIFEXITED(st) ? strerror(WEXITSTATUS(st)) : "killed");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == ECONNREFUSED);
	agent_stop(&agent);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0) {
		check_skip("test_door_attach", "needs root (setuid nobody, unshare)");
		return check_done();
	}
	RUN(test_door_truncate_refused_agent_and_clients_live);
	RUN(test_door_clients_cannot_reach_each_other);
	RUN(test_door_reused_entry_gets_fresh_memory);
	RUN(test_door_other_version_told);
	RUN(test_door_impostor_refused_by_client_and_agent);
	RUN(test_door_unmapped_userns_impostor_refused);
	RUN(test_door_precreated_tmp_dir_blocks_no_one);
	RUN(test_door_header_overwrite_repaired);
	RUN(test_door_forged_pid_word_decides_nothing);
	RUN(test_door_owner_exit_seen_while_idle);
	RUN(test_door_forged_pid_words_cost_honest_clients_nothing);
	RUN(test_door_forged_pid_killed_reclaimed);
	RUN(test_door_attach_from_another_pid_namespace);
	RUN(test_door_silent_garbage_and_half_hellos_block_no_one);
	RUN(test_door_attach_detach_loop_never_runs_out);
	RUN(test_door_close_seen_with_a_forked_child_holding_the_socket);
	RUN(test_door_out_of_fds_does_not_spin);
	RUN(test_door_stopped_agent_full_backlog_open_times_out);
	RUN(test_door_agent_gone_mid_handshake_is_refused);
	return check_done();
}
