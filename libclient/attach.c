/* attach.c - librdmem's attachments and handles: attach through the agent's
 * socket (check who answers, take the sealed segment and the client entry
 * the agent assigned), notice a dead or replaced agent, re-attach. */
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "libclient/rdmem_priv.h"
#include "shm/door.h"

/*
 * Gone when its connection is: the kernel closes the agent's end when it
 * exits, even as a zombie, whatever PID namespace we are in. Readable means
 * EOF or bytes the agent never sends: either way, it is not ours any more.
 */
static int att_agent_gone(int sock)
{
	struct pollfd p = { sock, POLLIN, 0 };
	int n;

	do /* a signal is no news about the agent */
		n = poll(&p, 1, 0);
	while (n < 0 && errno == EINTR);
	return n > 0;
}

void rdmem__att_unmap(struct rdmem_att *pub)
{
	struct rdmem_att_lib *a = rdmem__lib(pub);

	/*
	 * Closing the connection hands the entry back: the agent frees it once
	 * nothing of ours is in flight. Slots we abandoned stay ABANDONED until
	 * the agent frees them.
	 */
	munmap(pub->base, a->len);
	/* Shut down, not just close: a child forked since holds a copy of the
	 * socket, and the agent must still see us leave. */
	shutdown(a->sock, SHUT_RDWR);
	close(a->sock);
	free(a);
}

/*
 * Any uid of the three reading as the overflow uid means our user namespace
 * does not map it: the identities cannot be told apart (shm/door.h). Says
 * so on stderr, since -EPERM alone would send the user to the permissions.
 */
static int att_unmapped(uid_t owner, uid_t peer)
{
	uid_t ov = rdmem_door_overflow_uid();

	if (geteuid() != ov && owner != ov && peer != ov)
		return 0;
	fprintf(stderr,
		"librdmem: refusing the agent socket: uid %u (the overflow uid, "
		"/proc/sys/kernel/overflowuid) is ours, its directory's or the agent's; "
		"in a user namespace without a uid mapping nobody can be told apart\n",
		(unsigned)ov);
	return 1;
}

/*
 * Connects to the door and checks the agent: its uid (SO_PEERCRED) must be
 * the owner of the socket's directory, which must be root's or ours and
 * writable by nobody else (shm/door.h). Anyone else there is an impostor.
 */
static int att_dial(const char *path)
{
	char dir[RDMEM_DOOR_PATH_MAX];
	struct timeval tv = { (time_t)(RDMEM_ATTACH_NS / 1000000000ull),
			      (suseconds_t)(RDMEM_ATTACH_NS % 1000000000ull / 1000) };
	struct ucred cred;
	socklen_t len = sizeof(cred);
	uid_t owner = (uid_t)-1;
	int s, rc;

	if ((rc = rdmem_door_dir_of(path, dir, sizeof(dir))) ||
	    (rc = rdmem_door_dir_trusted(dir, geteuid(), &owner)))
		return rc == -ENOENT ? -ECONNREFUSED : rc;
	/* Bounded, connect included: an agent that never answers (stopped, its
	 * backlog full) costs one attach this long. */
	s = rdmem_door_connect(path, &tv);
	if (s < 0)
		return s == -ENOENT ? -ECONNREFUSED : s;
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != owner) {
		close(s);
		return -EPERM;
	}
	if (att_unmapped(owner, cred.uid)) {
		close(s);
		return -EPERM;
	}
	return s;
}

/* Sends the hello; receives the welcome and the two memfds (common, ours). */
static int att_handshake(int s, struct rdmem_door_welcome *w, int mfd[2])
{
	struct rdmem_door_hello hello = { RDMEM_DOOR_MAGIC_HELLO, RDMEM_DOOR_VERSION,
					  RDMEM_SHM_VERSION, 0, 0 };
	ssize_t n = send(s, &hello, sizeof(hello), MSG_NOSIGNAL);

	if (n != (ssize_t)sizeof(hello))
		return n < 0 && errno != EAGAIN ? -ECONNREFUSED : -ETIMEDOUT;
	n = rdmem_door_recv(s, w, sizeof(*w), mfd, 2);
	if (n == -EAGAIN)
		return -ETIMEDOUT;
	/* Reset or closed before a welcome: the agent stopped with our
	 * connection still in its backlog. That is an agent not running, as
	 * the caller already handles it, not a failure of this call's I/O. */
	if (n == 0 || n == -ECONNRESET || n == -EPIPE)
		return -ECONNREFUSED;
	if (n < 0)
		return (int)n;
	if (n != (ssize_t)sizeof(*w) || w->magic != RDMEM_DOOR_MAGIC_WELCOME ||
	    w->version != RDMEM_DOOR_VERSION || w->shm_version != RDMEM_SHM_VERSION)
		return -EPROTO;
	if (w->status)
		return w->status > 0 && w->status < 4096 ? -w->status : -EPROTO;
	return mfd[0] >= 0 && mfd[1] >= 0 ? 0 : -EPROTO;
}

/* The fd must be sealed so that nobody can shrink or grow it, and as big as said. */
static int att_sealed(int mfd, uint64_t size)
{
	struct stat st;
	int seals = fcntl(mfd, F_GET_SEALS);

	if (seals < 0 || (seals & RDMEM_DOOR_SEALS) != RDMEM_DOOR_SEALS)
		return -EPERM;
	if (fstat(mfd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size)
		return -EPROTO;
	return 0;
}

/* The welcome's geometry, and both fds sealed and of the sizes it implies. */
static int att_layout(struct rdmem_att_lib *a, const struct rdmem_door_welcome *w, const int mfd[2])
{
	struct rdmem_shm_geom *g = &a->pub.geom;
	int rc;

	if (rdmem_shm_geom_compute(w->clients, w->slots, w->max_value, g) ||
	    w->client >= g->clients || w->size != g->slots_off ||
	    w->client_size != rdmem_shm_client_size(g) || g->total_size > SIZE_MAX)
		return -EPROTO;
	if ((rc = att_sealed(mfd[0], w->size)) || (rc = att_sealed(mfd[1], w->client_size)))
		return rc;
	return 0;
}

/*
 * Lays the range out as the agent has it (shm/segment.h): all of it
 * reserved and inaccessible, the common part at 0, our own area at its
 * place. Other clients' areas stay unmapped: we cannot touch them.
 */
static int att_place(struct rdmem_att_lib *a, const struct rdmem_door_welcome *w, const int mfd[2])
{
	const struct rdmem_shm_geom *g = &a->pub.geom;
	uint8_t *base;

	a->len = (size_t)g->total_size;
	base = mmap(NULL, a->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return -errno;
	if (mmap(base, g->slots_off, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, mfd[0], 0) ==
		MAP_FAILED ||
	    mmap(rdmem_shm_client_area(base, g, w->client), rdmem_shm_client_size(g),
		 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, mfd[1], 0) == MAP_FAILED) {
		int rc = -errno;

		munmap(base, a->len);
		return rc;
	}
	a->pub.base = base;
	a->pub.hdr = (struct rdmem_shm_header *)base;
	return 0;
}

/* Attaches through the door: connect, hello, sealed fds, map, check. */
static int att_map(const char *path, struct rdmem_att_lib *a)
{
	struct rdmem_door_welcome w;
	int s, mfd[2] = { -1, -1 }, rc;

	s = att_dial(path);
	if (s < 0)
		return s;
	rc = att_handshake(s, &w, mfd);
	if (!rc)
		rc = att_layout(a, &w, mfd);
	/* The header is not checked: any client can write it (the agent puts
	 * it back); the layout is the welcome's, which only the agent sends. */
	if (!rc)
		rc = att_place(a, &w, mfd);
	/* The mappings hold the memory: the fds are not needed any more. */
	if (mfd[0] >= 0)
		close(mfd[0]);
	if (mfd[1] >= 0)
		close(mfd[1]);
	if (rc) {
		close(s);
		return rc;
	}
	a->sock = s;
	a->epoch = w.epoch;
	a->pub.client = w.client;
	return 0;
}

static int att_attach(rdmem_t *h, struct rdmem_att **out)
{
	struct rdmem_att_lib *a = (struct rdmem_att_lib *)calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	rc = att_map(h->path, a);
	if (rc) {
		free(a);
		return rc;
	}
	a->pub.single_cpu = h->single_cpu;
	rdmem_shm_ring_view(a->pub.base, &a->pub.geom, &a->pub.ring);
	atomic_store_explicit(&a->pub.refs, 1, memory_order_relaxed);
	atomic_store_explicit(&a->next_liveness_ns, rdmem_now_ns() + RDMEM_LIVENESS_NS,
			      memory_order_relaxed);
	*out = &a->pub;
	return 0;
}

static void att_lock(rdmem_t *h)
{
	/* Acquire/release: the critical section is a pointer read and a ref bump. */
	while (atomic_flag_test_and_set_explicit(&h->lock, memory_order_acquire))
		sched_yield();
}

static void att_unlock(rdmem_t *h)
{
	atomic_flag_clear_explicit(&h->lock, memory_order_release);
}

/* Returns the current attachment with a reference, re-attaching after a stale one. */
struct rdmem_att *rdmem__att_get(rdmem_t *h, int *err)
{
	struct rdmem_att *a, *old = NULL;
	int rc = 0;

	att_lock(h);
	a = h->att;
	if (a && atomic_load_explicit(&a->stale, memory_order_relaxed)) {
		old = a;
		h->att = a = NULL;
	}
	if (!a) {
		rc = att_attach(h, &a);
		if (rc == 0) {
			h->att = a;
			if (h->attached_once)
				atomic_fetch_add_explicit(&h->n_reattach, 1, memory_order_relaxed);
			h->attached_once = 1;
		}
	}
	if (a)
		atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
	att_unlock(h);
	if (old)
		rdmem__att_put(old); /* the handle's reference */
	*err = rc;
	return a;
}

/*
 * Is the agent behind a still the one we attached to? Header loads are
 * cheap and run on every check; the look at the connection runs every
 * RDMEM_LIVENESS_NS.
 */
int rdmem__att_alive(struct rdmem_att *pub, uint64_t now)
{
	struct rdmem_att_lib *a = rdmem__lib(pub);
	uint64_t next;
	int hint;

	if (atomic_load_explicit(&pub->stale, memory_order_relaxed))
		return 0;
	/*
	 * Only the connection says the agent is gone: it closes it when it
	 * stops, is taken over (--shm-reset) or reclaims our entry. The header's
	 * state and epoch (CLOSED, a new epoch) only make us look sooner than
	 * the next tick, at most every RDMEM_HINT_NS: any client can write
	 * them, and one that keeps doing so must neither send every other
	 * client away nor cost each of their calls a system call. Relaxed: a
	 * hint, nothing is read through it.
	 */
	next = atomic_load_explicit(&a->next_liveness_ns, memory_order_relaxed);
	hint = atomic_load_explicit(&pub->hdr->state, memory_order_relaxed) != RDMEM_SHM_RUNNING ||
	       atomic_load_explicit(&pub->hdr->epoch, memory_order_relaxed) != a->epoch;
	if (now >= next || (hint && now + RDMEM_LIVENESS_NS - RDMEM_HINT_NS >= next)) {
		atomic_store_explicit(&a->next_liveness_ns, now + RDMEM_LIVENESS_NS,
				      memory_order_relaxed);
		if (att_agent_gone(a->sock))
			goto stale;
	}
	return 1;
stale:
	atomic_store_explicit(&pub->stale, 1, memory_order_relaxed);
	return 0;
}

void rdmem__att_ask_take(struct rdmem_att *pub)
{
	char b = RDMEM_DOOR_TAKE;

	/* Not waiting: a full socket buffer already holds a request the agent
	 * has not read, and that one takes every marked slot, ours too. A
	 * failure for any other reason is the agent gone, which the call's
	 * wait sees (rdmem__att_alive). */
	(void)send(rdmem__lib(pub)->sock, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* ---- handle ------------------------------------------------------------ */

/* A socket is at path, in a directory that passes the client rule. */
static int att_usable(const char *path)
{
	char dir[RDMEM_DOOR_PATH_MAX];
	struct stat st;
	uid_t owner;

	return lstat(path, &st) == 0 && !rdmem_door_dir_of(path, dir, sizeof(dir)) &&
	       !rdmem_door_dir_trusted(dir, geteuid(), &owner);
}

/*
 * A segment name maps to <runtime dir>/<name>.sock (shm/door.h); a name that
 * is a path is the socket itself. Not root and nothing usable in our own
 * runtime directory (no socket, or a directory the client rule refuses,
 * which someone else may have made): a root agent's /run/rdmem.
 */
static int att_resolve(const char *name, char *path, size_t cap)
{
	int rc = rdmem_door_path(name, NULL, geteuid(), path, cap);

	if (rc || rdmem_door_is_path(name) || geteuid() == 0 || getenv("RDMEM_RUNTIME_DIR") ||
	    att_usable(path))
		return rc;
	return rdmem_door_path(name, RDMEM_DOOR_ROOT_DIR, 0, path, cap) ? rc : 0;
}

int rdmem_open(const char *name, rdmem_t **out)
{
	rdmem_t *h = (rdmem_t *)calloc(1, sizeof(*h));
	struct rdmem_att *a;
	cpu_set_t set;
	int rc;

	if (!h)
		return -ENOMEM;
	atomic_flag_clear(&h->lock);
	h->timeout_ms = RDMEM_DEFAULT_TIMEOUT_MS;
	h->single_cpu = sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1;
	rc = att_resolve(name, h->path, sizeof(h->path));
	if (rc) {
		free(h);
		return rc;
	}
	a = rdmem__att_get(h, &rc);
	if (!a) {
		free(h);
		return rc;
	}
	rdmem__att_put(a);
	*out = h;
	return 0;
}

void rdmem_close(rdmem_t *h)
{
	if (!h)
		return;
	if (h->att)
		rdmem__att_put(h->att);
	free(h);
}

void rdmem_set_timeout(rdmem_t *h, uint32_t ms)
{
	h->timeout_ms = ms ? ms : RDMEM_DEFAULT_TIMEOUT_MS;
}

/* Geometry of the current attachment (0 when detached). */
static uint32_t att_geom_field(rdmem_t *h, int which)
{
	struct rdmem_att *a;
	uint32_t v;
	int rc;

	a = rdmem__att_get(h, &rc);
	if (!a)
		return 0;
	v = which == 0 ? a->geom.slots : a->geom.max_value;
	rdmem__att_put(a);
	return v;
}

uint32_t rdmem_slots(rdmem_t *h)
{
	return att_geom_field(h, 0);
}

uint32_t rdmem_max_value(rdmem_t *h)
{
	return att_geom_field(h, 1);
}

void rdmem_get_counters(rdmem_t *h, struct rdmem_counters *out)
{
	out->calls = atomic_load_explicit(&h->n_calls, memory_order_relaxed);
	out->timeouts = atomic_load_explicit(&h->n_timeouts, memory_order_relaxed);
	out->late = atomic_load_explicit(&h->n_late, memory_order_relaxed);
	out->shutdowns = atomic_load_explicit(&h->n_shutdowns, memory_order_relaxed);
	out->reattach = atomic_load_explicit(&h->n_reattach, memory_order_relaxed);
	out->bad_replies = atomic_load_explicit(&h->n_bad, memory_order_relaxed);
}

/* Relaxed: statistics only; nothing is published through them. */
void rdmem__count(rdmem_t *h, int which)
{
	_Atomic uint64_t *n = which == RDMEM__N_TIMEOUT	   ? &h->n_timeouts
			      : which == RDMEM__N_SHUTDOWN ? &h->n_shutdowns
			      : which == RDMEM__N_LATE	   ? &h->n_late
							   : &h->n_bad;

	atomic_fetch_add_explicit(n, 1, memory_order_relaxed);
}
