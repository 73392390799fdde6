/* frontdoor_door.c - the front door's attach socket: its directory (ours,
 * writable by nobody else), a dead agent's socket removed, a live one's
 * segment retired on --shm-reset, and the door thread, which accepts
 * clients, reads their SO_PEERCRED and hello within a deadline, assigns each
 * a client entry under its kernel-reported pid and hands it the sealed memfd.
 * The connection stays open: its close tells the actor the client is gone.
 * Protocol: shm/door.h.
 */
#include "agent/frontdoor_impl.h"
#include "agent/unix_at.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "rdmem/util.h"

#define RDMEM_DOOR_ACCEPTS 16 /* accepts per round: the rest wait in the backlog */
/* Without an inotify watch (out of watches) the door looks at its socket
 * path this often; with one it sleeps until something happens. */
#define RDMEM_DOOR_TICK_MS   50
#define RDMEM_DOOR_FIXED_FDS 4 /* wake pipe, listener, bell, watch: then the rest */
#define RDMEM_DOOR_BACKLOG   64

static void rdmem_door_count(_Atomic uint64_t *n)
{
	atomic_fetch_add_explicit(n, 1, memory_order_relaxed); /* statistics only */
}

/* ---- the directory and the socket ---------------------------------------- */

/* Gives the directory we just made its mode and group through a descriptor
 * (O_NOFOLLOW): by path, a user who may rename a directory above it could
 * swap it for a link first and have chmod and chown act on the link's target. */
static int rdmem_door_dir_mode(const char *dir, gid_t group)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), ret = 0;
	struct stat st;

	/* The umask may have cut the mode; group members must search it. */
	if (dfd < 0 || fstat(dfd, &st) < 0 || fchmod(dfd, 0750) < 0 ||
	    (group != (gid_t)-1 && group != 0 && fchown(dfd, (uid_t)-1, group) < 0))
		ret = -errno;
	else if (st.st_uid != geteuid())
		ret = -EPERM; /* not the directory we made */
	if (ret)
		rdmem_err("front door: socket directory %s: chmod/chown: %s", dir, strerror(-ret));
	if (dfd >= 0)
		close(dfd);
	return ret;
}

/* The socket's directory as clients need it: ours, writable by nobody else. */
static int rdmem_door_dir_ours(const struct stat *st)
{
	return S_ISDIR(st->st_mode) && st->st_uid == geteuid() &&
	       !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* Creates dir 0750 (group: cfg's), or checks an existing one is ours and private. */
static int rdmem_door_dir(const char *dir, gid_t group)
{
	struct stat st;

	if (mkdir(dir, 0750) == 0)
		return rdmem_door_dir_mode(dir, group);
	if (errno != EEXIST) {
		rdmem_err("front door: cannot create the socket directory %s: %s (create it "
			  "with mode 0750, or pass --socket PATH)",
			  dir, strerror(errno));
		return -errno;
	}
	if (lstat(dir, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode) && st.st_uid == geteuid() && group != (gid_t)-1 && group != 0 &&
	    st.st_gid != group && chown(dir, (uid_t)-1, group) < 0)
		rdmem_warn("front door: socket directory %s: chown to group %u: %s", dir,
			   (unsigned)group, strerror(errno));
	if (!rdmem_door_dir_ours(&st)) {
		rdmem_err("front door: socket directory %s is %s (owner uid %u, mode %04o): "
			  "clients could not trust it; remove it (the agent creates it 0750) or "
			  "chown it to uid %u and chmod go-w",
			  dir, !S_ISDIR(st.st_mode) ? "not a directory" : "not ours alone",
			  (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
		return -EPERM;
	}
	return 0;
}

/* A socket connected to path within 2 s, with 2 s timeouts, or -errno
 * (-ETIMEDOUT: an agent is there but does not accept, e.g. stopped). */
static int rdmem_door_dial(const char *path)
{
	const struct timeval tv = { 2, 0 };

	return rdmem_door_connect(path, &tv);
}

/*
 * Attaches to the live agent on path as a client would, then marks its
 * segment CLOSED with a new epoch so its clients re-attach (to us).
 */
int rdmem_door_retire_live(const char *path, uint64_t *epoch)
{
	struct rdmem_door_hello hello = { RDMEM_DOOR_MAGIC_HELLO, RDMEM_DOOR_VERSION,
					  RDMEM_SHM_VERSION, 0, 0 };
	struct rdmem_door_welcome w;
	struct rdmem_shm_header *h;
	int s = rdmem_door_dial(path), mfd[2] = { -1, -1 }, rc = -EPROTO;
	uint64_t next;
	ssize_t n;

	if (s < 0)
		return s;
	if (send(s, &hello, sizeof(hello), MSG_NOSIGNAL) != (ssize_t)sizeof(hello))
		goto out;
	/* The header is at the start of the first fd. An agent of another door
	 * version refuses our hello: the retire fails (its clients stay with it
	 * until it stops: upgrade by stopping the old agent). */
	n = rdmem_door_recv(s, &w, sizeof(w), mfd, 2);
	if (n < (ssize_t)offsetof(struct rdmem_door_welcome, client_size) ||
	    w.magic != RDMEM_DOOR_MAGIC_WELCOME || w.status || mfd[0] < 0 ||
	    w.size < RDMEM_SHM_HEADER_SIZE)
		goto out;
	h = mmap(NULL, RDMEM_SHM_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd[0], 0);
	if (h == MAP_FAILED) {
		rc = -errno;
		goto out;
	}
	next = atomic_fetch_add_explicit(&h->epoch, 1, memory_order_relaxed) + 2;
	if (next > *epoch) /* ours must follow the one its clients saw */
		*epoch = next;
	/* Release: pairs with the clients' acquire load of state (libclient). */
	atomic_store_explicit(&h->state, RDMEM_SHM_CLOSED, memory_order_release);
	munmap(h, RDMEM_SHM_HEADER_SIZE);
	rc = 0;
out:
	for (n = 0; n < 2; n++)
		if (mfd[n] >= 0)
			close(mfd[n]);
	close(s);
	return rc;
}

/*
 * Clears the way for our socket: nothing there, or a dead agent's socket of
 * ours (connect refused: removed). A live agent: -EBUSY, or with reset its
 * segment is retired. Anything else there: -EEXIST unless reset.
 */
static int rdmem_door_clear(const char *path, int reset, uint64_t *epoch)
{
	struct stat st;
	int s;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
		if (!reset) {
			rdmem_err("front door: %s exists and is not our socket; remove it or use "
				  "--shm-reset",
				  path);
			return -EEXIST;
		}
		rdmem_warn("front door: replacing %s, not our socket (--shm-reset)", path);
	} else if ((s = rdmem_door_dial(path)) >= 0 || s == -ETIMEDOUT) {
		/* Timed out: an agent holds the socket but accepts nothing (stopped). */
		if (s >= 0)
			close(s);
		if (!reset) {
			rdmem_err("front door %s: in use by a running agent; stop it or use "
				  "--shm-reset",
				  path);
			return -EBUSY;
		}
		rdmem_warn("front door %s: taking over from the running agent (--shm-reset)", path);
		if (rdmem_door_retire_live(path, epoch) < 0)
			rdmem_warn("front door %s: could not retire the old agent's segment", path);
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		rdmem_err("front door: cannot remove the old socket %s: %s", path, strerror(errno));
		return -errno;
	}
	return 0;
}

/* The directory as bound through (agent/unix_at.c): checked again on its
 * descriptor, so a directory above it renamed since rdmem_door_dir looked
 * cannot put another user's directory, or a link, under our chmod. */
static int rdmem_door_dir_held(const char *path, const struct rdmem_unix_at *at)
{
	struct stat st;

	if (fstat(at->dirfd, &st) < 0)
		return -errno;
	if (!rdmem_door_dir_ours(&st)) {
		rdmem_err("front door: the directory of %s changed under us (owner uid %u, mode "
			  "%04o): not ours alone",
			  path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

static int rdmem_door_listen(struct rdmem_door *d, gid_t group)
{
	struct rdmem_unix_at at;
	struct stat st;
	int rc;

	if ((rc = rdmem_unix_at_open("front door: socket", d->path, &at)) < 0)
		return rc;
	if ((rc = rdmem_door_dir_held(d->path, &at)) < 0)
		goto out;
	d->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (d->listen_fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = rdmem_unix_at_bind(&at, d->listen_fd, 0660, group != 0 ? group : (gid_t)-1, &st);
	if (rc == 0 && listen(d->listen_fd, RDMEM_DOOR_BACKLOG) < 0)
		rc = -errno;
	if (rc < 0) {
		rdmem_err("front door: socket %s: %s", d->path, strerror(-rc));
		rdmem_unix_at_unlink(&at, &st); /* ours only */
		goto out;
	}
	d->dev = st.st_dev;
	d->ino = st.st_ino;
out:
	rdmem_unix_at_close(&at);
	return rc;
}

/*
 * Entries one capped uid may hold: n, or by default half the table (at
 * least 1), so one local user in the socket's group cannot take every entry
 * and still a single app user gets many; never more than the table.
 */
static uint32_t rdmem_door_per_uid(uint32_t n, uint32_t clients)
{
	if (!n)
		n = clients / 2 ? clients / 2 : 1;
	return n < clients ? n : clients;
}

/*
 * Watches the socket's directory for the path changing hands (another
 * agent's --shm-reset unlinks it and binds its own): the door thread then
 * looks at once instead of every tick. Without a watch (the inotify limits)
 * it falls back to the tick, and says so.
 */
static void rdmem_door_watch(struct rdmem_door *d, const char *dir)
{
	const uint32_t what = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |
			      IN_DELETE_SELF | IN_MOVE_SELF;

	d->watch = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (d->watch >= 0 && inotify_add_watch(d->watch, dir, what) >= 0)
		return;
	rdmem_warn("front door: cannot watch %s (inotify: %s): looking at the socket every %d ms "
		   "instead",
		   dir, strerror(errno), RDMEM_DOOR_TICK_MS);
	if (d->watch >= 0)
		close(d->watch);
	d->watch = -1;
}

void rdmem_door_nudge(struct rdmem_frontdoor *fd)
{
	uint64_t one = 1;

	/* EAGAIN: the counter is full, the door will look anyway. */
	if (fd->door.bell >= 0 && write(fd->door.bell, &one, sizeof(one)) < 0 && errno != EAGAIN)
		rdmem_warn_limited("front door %s: waking the door thread: %s", fd->name,
				   strerror(errno));
}

/* Empties a nonblocking fd that only says "look" (an eventfd, inotify). */
static void rdmem_door_drain(int fd)
{
	char buf[4096] __attribute__((aligned(8)));

	while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
		;
}

int rdmem_door_open(struct rdmem_frontdoor *fd, const struct rdmem_frontdoor_config *cfg)
{
	struct rdmem_door *d = &fd->door;
	char dir[RDMEM_DOOR_PATH_MAX];
	uint32_t c;
	int rc;

	d->listen_fd = d->wake[0] = d->wake[1] = d->bell = d->watch = -1;
	d->self_uid = geteuid();
	atomic_store_explicit(&d->writer_uid, -1, memory_order_relaxed);
	d->admin_group = cfg->admin_group;
	d->has_admin_group = cfg->has_admin_group;
	for (c = 0; c < RDMEM_DOOR_PENDING; c++)
		d->pending[c].fd = -1;
	rc = rdmem_door_path(cfg->socket_path ? cfg->socket_path : fd->name, NULL, geteuid(),
			     d->path, sizeof(d->path));
	if (rc || (cfg->socket_path && cfg->socket_path[0] != '/')) {
		rdmem_err("front door: socket path '%s' is not absolute or longer than %zu bytes "
			  "(--socket)",
			  cfg->socket_path ? cfg->socket_path : fd->name, RDMEM_DOOR_PATH_MAX - 1);
		return -ENAMETOOLONG;
	}
	d->per_uid = rdmem_door_per_uid(cfg->clients_per_uid, fd->geom.clients);
	d->conn = malloc(fd->geom.clients * sizeof(*d->conn));
	d->pidfd = malloc(fd->geom.clients * sizeof(*d->pidfd));
	d->claimed = calloc(fd->geom.clients, sizeof(*d->claimed));
	d->quiet_until = calloc(fd->geom.clients, sizeof(*d->quiet_until));
	d->owner = calloc(fd->geom.clients, sizeof(*d->owner));
	d->sweep = calloc(fd->geom.clients, sizeof(*d->sweep));
	for (c = 0; d->conn && d->pidfd && c < fd->geom.clients; c++)
		d->conn[c] = d->pidfd[c] = -1; /* before any return: close() reads them */
	if (!d->conn || !d->pidfd || !d->claimed || !d->quiet_until || !d->owner || !d->sweep ||
	    pipe2(d->wake, O_CLOEXEC | O_NONBLOCK) < 0)
		return -ENOMEM;
	if ((rc = rdmem_door_dir_of(d->path, dir, sizeof(dir))))
		return rc;
	if ((rc = rdmem_door_dir(dir, cfg->group))) {
		if (!cfg->socket_path && geteuid() != 0 && !strcmp(dir, RDMEM_DOOR_ROOT_DIR))
			rdmem_err("front door: no XDG_RUNTIME_DIR, so the socket would be in %s, "
				  "which only root can give a non-root agent: set XDG_RUNTIME_DIR "
				  "or RDMEM_RUNTIME_DIR, or pass --socket PATH",
				  RDMEM_DOOR_ROOT_DIR);
		return rc;
	}
	if ((rc = rdmem_door_clear(d->path, cfg->reset, &fd->epoch)))
		return rc;
	if ((d->bell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		return -errno;
	rdmem_door_watch(d, dir);
	return rdmem_door_listen(d, cfg->group);
}

/* ---- the door thread ---------------------------------------------------- */

static void rdmem_door_drop(struct rdmem_door_pending *p)
{
	close(p->fd);
	p->fd = -1;
}

/*
 * Picks a free entry for p's process, gives it a fresh area (*area_fd, its
 * memfd), claims it in the segment and for the actor. Returns the entry,
 * -EUSERS (none free) or -ENOMEM (no area could be made).
 */
static int rdmem_door_assign(struct rdmem_frontdoor *fd, const struct rdmem_door_pending *p,
			     struct rdmem_door_welcome *w, int *area_fd)
{
	pid_t pid = p->pid;
	struct rdmem_door *d = &fd->door;
	uint32_t c;

	for (c = 0; c < fd->geom.clients; c++) {
		struct rdmem_fd_client *cl = &fd->clients[c];
		struct rdmem_shm_client *e = rdmem_shm_client_at(fd->base, &fd->geom, c);
		uint32_t gen;

		/* Acquire: pairs with the actor's release of claim in reclaim(),
		 * after it reset the slots. */
		if (d->conn[c] >= 0 || atomic_load_explicit(&cl->claim, memory_order_acquire) ||
		    atomic_load_explicit(&cl->cut, memory_order_acquire))
			continue;
		*area_fd = rdmem_frontdoor_client_map(fd, c);
		if (*area_fd < 0) {
			rdmem_door_count(&d->n_no_memory);
			rdmem_warn_limited(
			    "front door %s: no memory for client %u's area (%llu "
			    "MiB): %s",
			    fd->name, c,
			    (unsigned long long)(rdmem_shm_client_size(&fd->geom) >> 20),
			    strerror(-*area_fd));
			return -ENOMEM;
		}
		gen = ++d->next_gen ? d->next_gen : ++d->next_gen;
		atomic_store_explicit(&e->gen, gen, memory_order_relaxed);
		e->attach_ns = rdmem_now_ns();
		atomic_store_explicit(&e->pid, (int32_t)pid, memory_order_relaxed);
		atomic_store_explicit(&cl->gone, 0, memory_order_relaxed);
		atomic_store_explicit(&cl->pid_unwatched, 0, memory_order_relaxed);
		/* Release: pairs with the actor's acquire load when it checks an
		 * agent-ctl call; the client learns its entry (and can call) only
		 * after this, from the welcome. */
		atomic_store_explicit(&cl->admin, p->admin, memory_order_release);
		atomic_store_explicit(&cl->uid, (uint32_t)p->uid, memory_order_relaxed);
		atomic_store_explicit(&cl->serial, ++d->next_serial, memory_order_relaxed);
		d->owner[c] = p->uid;
		d->claimed[c] = (uint64_t)gen << 32 | (uint32_t)pid;
		/* Release: the entry words above before the actor sees the owner. */
		atomic_store_explicit(&cl->claim, d->claimed[c], memory_order_release);
		w->client = c;
		w->pid = (int32_t)pid;
		w->gen = gen;
		return (int)c;
	}
	return -EUSERS;
}

/* Sends the welcome, with the two memfds (common, the client's area) when status is 0. */
static int rdmem_door_send(struct rdmem_frontdoor *fd, int s, struct rdmem_door_welcome *w,
			   int area_fd)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	int fds[2] = { fd->shm_fd, area_fd };
	struct iovec iov = { w, sizeof(*w) };
	struct msghdr msg = { 0 };
	struct cmsghdr *c;

	w->magic = RDMEM_DOOR_MAGIC_WELCOME;
	w->version = RDMEM_DOOR_VERSION;
	w->shm_version = RDMEM_SHM_VERSION;
	w->epoch = fd->epoch;
	w->size = fd->geom.slots_off;
	w->client_size = rdmem_shm_client_size(&fd->geom);
	w->clients = fd->geom.clients;
	w->slots = fd->geom.slots;
	w->max_value = fd->geom.max_value;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (!w->status) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(fds));
		memcpy(CMSG_DATA(c), fds, sizeof(fds));
	}
	/* A fresh connection's buffer is empty: the welcome fits or the peer is gone. */
	return sendmsg(s, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(*w) ? 0 : -EPIPE;
}

/*
 * Entries held by uid (all of them with any), attached or left and not
 * reclaimed yet; *leaving: one of those has left (the actor frees it
 * within a round). An entry is held from assign() until the actor's
 * reclaim clears its claim (the connection is then closed too).
 */
static uint32_t rdmem_door_held(const struct rdmem_frontdoor *fd, uid_t uid, int any, int *leaving)
{
	const struct rdmem_door *d = &fd->door;
	uint32_t c, n = 0;

	*leaving = 0;
	for (c = 0; c < fd->geom.clients; c++) {
		int claimed =
		    atomic_load_explicit(&fd->clients[c].claim, memory_order_relaxed) != 0;

		if ((d->conn[c] < 0 && !claimed) || (!any && d->owner[c] != uid))
			continue;
		n++;
		*leaving |= d->conn[c] < 0;
	}
	return n;
}

/* Root and the agent's own user have no share: either can stop the agent anyway. */
static int rdmem_door_capped(uid_t uid)
{
	return uid != 0 && uid != geteuid();
}

/* An entry for p (its index, its area in *area_fd), or -EDQUOT (its uid
 * holds its share), -EUSERS or -ENOMEM. */
static int rdmem_door_take(struct rdmem_frontdoor *fd, const struct rdmem_door_pending *p,
			   struct rdmem_door_welcome *w, int *leaving, int *area_fd)
{
	if (rdmem_door_capped(p->uid) &&
	    rdmem_door_held(fd, p->uid, 0, leaving) >= fd->door.per_uid)
		return -EDQUOT;
	rdmem_door_held(fd, p->uid, 1, leaving);
	return rdmem_door_assign(fd, p, w, area_fd);
}

static void rdmem_door_readable(struct rdmem_frontdoor *fd, uint32_t c, uint64_t now,
				short revents);

/* What to poll client c's connection for: a hang-up only while it rests
 * after a take request (rdmem_door_readable), else anything. */
static short rdmem_door_events(const struct rdmem_door *d, uint32_t c, uint64_t now)
{
	return now < d->quiet_until[c] ? POLLRDHUP : POLLIN;
}

/*
 * Looks at every attached connection now (one poll, no wait) and handles
 * those that hung up (and the take requests of those that did not). A
 * hello answered at accept would otherwise find the entry of a client that
 * detached a moment ago still held (its hangup not polled yet) and be
 * refused. Returns the hangups found.
 */
static int rdmem_door_sweep(struct rdmem_frontdoor *fd)
{
	struct rdmem_door *d = &fd->door;
	uint64_t now = rdmem_now_ns();
	uint32_t c, n = 0, k = 0;
	int found = 0;

	for (c = 0; c < fd->geom.clients; c++)
		if (d->conn[c] >= 0)
			d->sweep[n++] =
			    (struct pollfd){ d->conn[c], rdmem_door_events(d, c, now), 0 };
	if (!n || poll(d->sweep, n, 0) <= 0)
		return 0;
	for (c = 0; c < fd->geom.clients && k < n; c++) {
		if (d->conn[c] < 0 || d->sweep[k].fd != d->conn[c])
			continue;
		if (d->sweep[k++].revents) {
			rdmem_door_readable(fd, c, now, d->sweep[k - 1].revents);
			found += d->conn[c] < 0;
		}
	}
	return found;
}

/* Counts and logs (rate-limited: any client can provoke it) a refused attach. */
static void rdmem_door_refused(struct rdmem_frontdoor *fd, const struct rdmem_door_pending *p,
			       int err)
{
	if (err == -ENOMEM)
		return; /* counted and said where it failed */
	if (err == -EDQUOT) {
		rdmem_door_count(&fd->door.n_uid_full);
		rdmem_warn_limited("front door %s: attach of pid %d refused: uid %u holds %u "
				   "client entries, its share (--clients-per-uid)",
				   fd->name, (int)p->pid, (unsigned)p->uid, fd->door.per_uid);
		return;
	}
	rdmem_door_count(&fd->door.n_full);
	rdmem_warn_limited("front door %s: attach of pid %d refused: all %u client "
			   "entries in use (--clients)",
			   fd->name, (int)p->pid, fd->geom.clients);
}

/* A client outside our PID namespace (SO_PEERCRED pid 0) got an entry. */
static void rdmem_door_pid_unknown(struct rdmem_frontdoor *fd, const struct rdmem_door_pending *p)
{
	rdmem_door_count(&fd->door.n_pid_unknown);
	rdmem_log_limited(RDMEM_LOG_INFO,
			  "front door %s: a client of uid %u attached from outside our PID "
			  "namespace (pid 0): its connection alone tells when it is gone",
			  fd->name, (unsigned)p->uid);
}

/*
 * Records that uid is about to map the segment (see struct rdmem_door):
 * before the memfd leaves, so the actor never attributes a misbehaviour
 * to one user while another could have written it.
 */
static void rdmem_door_writer(struct rdmem_door *d, uid_t uid)
{
	int64_t w = atomic_load_explicit(&d->writer_uid, memory_order_relaxed);

	if (uid == 0 || uid == d->self_uid || w == (int64_t)uid)
		return;
	/* Release: pairs with the actor's acquire loads in rdmem_frontdoor_attributable(). */
	if (w < 0)
		atomic_store_explicit(&d->writer_uid, (int64_t)uid, memory_order_release);
	else
		atomic_store_explicit(&d->writers_mixed, 1, memory_order_release);
}

/* The process was cut off (--client-strikes) within RDMEM_FD_CUT_HOLD_NS. */
static int rdmem_door_held_off(const struct rdmem_door *d, pid_t pid, uint64_t now)
{
	int i;

	for (i = 0; pid > 0 && i < RDMEM_DOOR_PENDING; i++)
		if (d->cut_pid[i] == (int32_t)pid && now < d->cut_until[i])
			return 1;
	return 0;
}

/*
 * Empties the watch. Once the directory itself is moved or removed the watch
 * cannot see its path any more: the door then looks every tick (the path
 * may be bound anew by another agent), and says so once.
 */
static void rdmem_door_read_watch(struct rdmem_frontdoor *fd)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct rdmem_door *d = &fd->door;
	uint32_t blind = 0;
	ssize_t n, off;

	while (d->watch >= 0 && (n = read(d->watch, buf, sizeof(buf))) > 0)
		for (off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
			const struct inotify_event *ev = (const void *)(buf + off);

			blind |= ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED);
			off += (ssize_t)sizeof(*ev) + ev->len;
		}
	if (!blind)
		return;
	rdmem_warn("front door %s: the directory of %s was moved or removed: looking at the "
		   "socket path every %d ms from now on",
		   fd->name, d->path, RDMEM_DOOR_TICK_MS);
	close(d->watch);
	d->watch = -1;
}

/* Closes the connection of every client the actor cut off; holds its pid off. */
static void rdmem_door_cut(struct rdmem_frontdoor *fd, uint64_t now)
{
	struct rdmem_door *d = &fd->door;
	uint32_t c, oldest;
	int32_t pid;
	int i;

	for (c = 0; c < fd->geom.clients; c++) {
		/* Acquire: pairs with the actor's release store of cut. */
		if (!atomic_load_explicit(&fd->clients[c].cut, memory_order_acquire))
			continue;
		pid = (int32_t)(uint32_t)d->claimed[c];
		for (i = 0, oldest = 0; i < RDMEM_DOOR_PENDING; i++)
			if (d->cut_until[i] < d->cut_until[oldest])
				oldest = (uint32_t)i;
		d->cut_pid[oldest] = pid;
		d->cut_until[oldest] = now + RDMEM_FD_CUT_HOLD_NS;
		/* Shut down: a child it forked may hold a copy of the socket. */
		if (d->conn[c] >= 0)
			shutdown(d->conn[c], SHUT_RDWR);
		rdmem_door_owner_forget(d, c);
		/* Relaxed: only the door reads it back (assign skips a cut entry). */
		atomic_store_explicit(&fd->clients[c].cut, 0, memory_order_relaxed);
		rdmem_door_tell_actor(fd, c);
	}
}

/*
 * Answers a pending connection whose hello is good: an entry and the memfd,
 * or EDQUOT (its uid's share taken) or EUSERS (table full). While an entry
 * that would let it in is being reclaimed (one actor round), it waits for
 * it, up to its deadline.
 */
static void rdmem_door_answer(struct rdmem_frontdoor *fd, struct rdmem_door_pending *p,
			      uint64_t now)
{
	struct rdmem_door_welcome w = { 0 };
	int leaving = 0, c, area_fd = -1, sent;

	if (rdmem_door_held_off(&fd->door, p->pid, now)) {
		rdmem_door_count(&fd->door.n_cut_refused);
		rdmem_warn_limited("front door %s: attach of pid %d refused: cut off less than "
				   "%llu s ago (--client-strikes)",
				   fd->name, (int)p->pid,
				   (unsigned long long)(RDMEM_FD_CUT_HOLD_NS / 1000000000ull));
		w.status = EACCES;
		if (rdmem_door_send(fd, p->fd, &w, -1))
			rdmem_log_limited(RDMEM_LOG_INFO, "front door %s: pid %d left first",
					  fd->name, (int)p->pid);
		rdmem_door_drop(p);
		return;
	}
	c = rdmem_door_take(fd, p, &w, &leaving, &area_fd);

	if (c == -EUSERS && !leaving && rdmem_door_sweep(fd))
		c = rdmem_door_take(fd, p, &w, &leaving, &area_fd);
	p->waiting = c < 0 && c != -ENOMEM && now < p->deadline_ns && leaving;
	if (p->waiting)
		return;
	if (c < 0) {
		w.status = -c;
		rdmem_door_refused(fd, p, c);
	} else {
		rdmem_door_writer(&fd->door, p->uid);
	}
	sent = rdmem_door_send(fd, p->fd, &w, area_fd);
	if (area_fd >= 0)
		close(area_fd); /* the client has its own copy; our mapping holds the pages */
	if (sent == 0 && c >= 0) {
		fd->door.conn[c] = p->fd;
		p->fd = -1;
		rdmem_door_owner_watch(fd, (uint32_t)c, p->pid);
		rdmem_door_count(&fd->door.n_attached);
		if (!p->pid)
			rdmem_door_pid_unknown(fd, p);
		return;
	}
	if (c >= 0) /* the client left before its welcome: the actor frees the entry */
		rdmem_door_tell_actor(fd, (uint32_t)c);
	rdmem_door_drop(p);
}

static void rdmem_door_bad(struct rdmem_frontdoor *fd, struct rdmem_door_pending *p,
			   const char *why)
{
	rdmem_door_count(&fd->door.n_bad_hello);
	rdmem_warn_limited("front door %s: connection of pid %d closed: %s", fd->name, (int)p->pid,
			   why);
	rdmem_door_drop(p);
}

/* Reads what the hello still lacks; checks it once whole. */
static void rdmem_door_read_hello(struct rdmem_frontdoor *fd, struct rdmem_door_pending *p)
{
	ssize_t n =
	    recv(p->fd, (char *)&p->hello + p->got, sizeof(p->hello) - p->got, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		rdmem_door_bad(fd, p, "closed before its hello");
		return;
	}
	p->got += (uint32_t)n;
	if (p->got < sizeof(p->hello))
		return;
	if (p->hello.magic == RDMEM_DOOR_MAGIC_HELLO &&
	    (p->hello.version != RDMEM_DOOR_VERSION || p->hello.shm_version != RDMEM_SHM_VERSION)) {
		/* A librdmem of another release: told so (a welcome with our
		 * versions and no fds makes it fail -EPROTO), not just hung up on. */
		struct rdmem_door_welcome w = { .status = EPROTONOSUPPORT };

		rdmem_warn_limited(
		    "front door %s: pid %d speaks door %u / layout %u, we speak %u / "
		    "%u: refused (upgrade librdmem and the agent together)",
		    fd->name, (int)p->pid, p->hello.version, p->hello.shm_version,
		    RDMEM_DOOR_VERSION, RDMEM_SHM_VERSION);
		rdmem_door_send(fd, p->fd, &w, -1);
		rdmem_door_count(&fd->door.n_bad_hello);
		rdmem_door_drop(p);
		return;
	}
	if (p->hello.magic != RDMEM_DOOR_MAGIC_HELLO || p->hello.flags || p->hello.reserved) {
		rdmem_door_bad(fd, p, "bad hello (not an rdmem client)");
		return;
	}
	rdmem_door_answer(fd, p, rdmem_now_ns());
}

/*
 * Whether the peer of s may run agent-ctl: root, the agent's own user, or a
 * member of --admin-group by its primary or (SO_PEERGROUPS, as of connect)
 * a supplementary group. Credentials are the kernel's, not the client's word.
 */
static int rdmem_door_admin(const struct rdmem_door *d, int s, const struct ucred *cred)
{
	gid_t groups[256];
	socklen_t len = sizeof(groups);
	size_t i;

	if (cred->uid == 0 || cred->uid == geteuid())
		return 1;
	if (!d->has_admin_group)
		return 0;
	if (cred->gid == d->admin_group)
		return 1;
	/* ERANGE (more than 256 groups): judged by the primary group alone. */
	if (getsockopt(s, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
		return 0;
	for (i = 0; i < len / sizeof(gid_t); i++)
		if (groups[i] == d->admin_group)
			return 1;
	return 0;
}

/*
 * Whether p goes before than when a handshake must be evicted: a partial
 * hello (an honest client sends its 16 bytes in one write) before a silent
 * one, those waiting for an entry (hello good) last; the older first, since
 * an honest client sends its hello right after connect.
 */
static int rdmem_door_evict_before(const struct rdmem_door_pending *p,
				   const struct rdmem_door_pending *than)
{
	int a = p->waiting ? 2 : p->got == 0, b;

	if (!than)
		return 1;
	b = than->waiting ? 2 : than->got == 0;
	return a != b ? a < b : p->seq < than->seq;
}

/*
 * A place for a handshake of uid: a free one, else one evicted. A uid that
 * already holds RDMEM_DOOR_PENDING_PER_UID of them evicts its own, so a
 * flood of connections from one user only ever displaces itself; others
 * evict the likeliest hostile one (rdmem_door_evict_before).
 */
static struct rdmem_door_pending *rdmem_door_place(struct rdmem_door *d, uid_t uid)
{
	struct rdmem_door_pending *own = NULL, *any = NULL, *p;
	uint32_t mine = 0;
	int k;

	for (k = 0; k < RDMEM_DOOR_PENDING; k++) {
		p = &d->pending[k];
		if (p->fd < 0)
			return p;
		if (p->uid == uid && ++mine && rdmem_door_evict_before(p, own))
			own = p;
		if (rdmem_door_evict_before(p, any))
			any = p;
	}
	p = mine >= RDMEM_DOOR_PENDING_PER_UID ? own : any;
	rdmem_door_count(&d->n_evicted);
	rdmem_door_drop(p);
	return p;
}

static void rdmem_door_accept(struct rdmem_frontdoor *fd, uint64_t now)
{
	struct rdmem_door *d = &fd->door;
	int i;

	for (i = 0; i < RDMEM_DOOR_ACCEPTS; i++) {
		struct rdmem_door_pending np;
		struct ucred cred;
		socklen_t len = sizeof(cred);
		int s = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (s < 0 &&
		    (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
			/* The backlog stays readable: look again in a tick, not in a spin. */
			d->accept_pause_until = now + RDMEM_DOOR_TICK_MS * 1000000ull;
			rdmem_warn_limited("front door %s: accept: %s (raise the open-files "
					   "limit, LimitNOFILE)",
					   fd->name, strerror(errno));
		}
		if (s < 0)
			return;
		/* Pid 0: a client outside our PID namespace; its connection tells
		 * when it is gone, as for every client. */
		if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid < 0) {
			close(s);
			continue;
		}
		memset(&np, 0, sizeof(np));
		np.fd = s;
		np.pid = cred.pid;
		np.uid = cred.uid;
		np.admin = rdmem_door_admin(d, s, &cred);
		np.deadline_ns = now + RDMEM_DOOR_HELLO_NS;
		np.seq = ++d->accepted;
		/* Most hellos are here already: answered without taking a place
		 * that a flood could evict them from. */
		rdmem_door_read_hello(fd, &np);
		if (np.fd >= 0)
			*rdmem_door_place(d, np.uid) = np;
	}
}

/* Bytes other than RDMEM_DOOR_TAKE in b[0, n)? */
static int rdmem_door_stray(const char *b, ssize_t n)
{
	ssize_t i;

	for (i = 0; i < n; i++)
		if (b[i] != RDMEM_DOOR_TAKE)
			return 1;
	return 0;
}

/* Client c's connection is over (it hung up, sent a stray byte, or we
 * are handing our clients to another agent). */
static void rdmem_door_hangup(struct rdmem_frontdoor *fd, uint32_t c)
{
	rdmem_door_owner_forget(&fd->door, c);
	rdmem_door_count(&fd->door.n_hangups);
	rdmem_door_tell_actor(fd, c);
}

/*
 * An attached client's connection is readable: it asks the actor to take
 * its marked slots (RDMEM_DOOR_TAKE), hung up, or sent bytes it must not.
 * Everything it sent is read in one go (up to a buffer a round): any number
 * of take bytes asks once, so a client flooding them costs the door one
 * read per buffer, not a round (poll, lstat, a wake of the actor) per
 * 64 bytes, as a review's flood did (1.2-1.4 s of the door's CPU in 1.5 s
 * for 5-7 ms of the client's).
 *
 * Then the connection rests RDMEM_DOOR_TAKE_GAP_NS (the door polls it for a
 * hang-up only): a client can make every byte a read of its own (an fd
 * passed with each, or bytes from two processes, which the kernel never
 * merges), and each read costs the door a round and the actor a wake and
 * a pass over every client. A review's flood so took 2.4 and 1.5 s of
 * their CPU in 3 s. No client can be hurt by another's rest, and an honest
 * client asks only when the ring is full (kept full by someone else): its
 * second request within the gap waits for the rest of it.
 */
static void rdmem_door_readable(struct rdmem_frontdoor *fd, uint32_t c, uint64_t now, short revents)
{
	char b[64 << 10]; /* on the door thread's stack: one per front door */
	ssize_t n;

	/* Resting, it is polled for a hang-up only: whatever it still sent is
	 * not read. A review's client shut its side after each batch of bytes,
	 * and reading on at each such event gave it a read per round again.
	 * POLLIN alone: seen before a sweep in this round read it and started
	 * its rest; not a hang-up. */
	if (now < fd->door.quiet_until[c]) {
		if (revents & (POLLRDHUP | POLLHUP | POLLERR))
			rdmem_door_hangup(fd, c);
		return;
	}
	n = recv(fd->door.conn[c], b, sizeof(b), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0 && !rdmem_door_stray(b, n)) {
		rdmem_door_count(&fd->n_take_reqs);
		rdmem_door_ask_take(fd, c);
		fd->door.quiet_until[c] = now + RDMEM_DOOR_TAKE_GAP_NS;
		return;
	}
	if (n > 0) { /* nothing else comes after the hello: cut it off */
		rdmem_door_count(&fd->door.n_bad_hello);
		rdmem_warn_limited("front door %s: client %u sent bytes after its hello: "
				   "disconnected",
				   fd->name, c);
	}
	rdmem_door_hangup(fd, c);
}

int rdmem_door_taken(const struct rdmem_frontdoor *fd)
{
	struct stat st;

	return lstat(fd->door.path, &st) == 0 && S_ISSOCK(st.st_mode) &&
	       (st.st_dev != fd->door.dev || st.st_ino != fd->door.ino);
}

/*
 * Taken over: every client's connection closes, so each re-attaches,
 * through the socket path, to the agent that has it now. Looked at every
 * door round, whatever the header says (the new agent may have failed to
 * mark it, and any client can write it back): a round runs on every change
 * in the socket's directory (inotify) and on the actor's nudge when its
 * scan finds the path taken (the watch goes blind if the directory itself
 * is removed or moved).
 */
static void rdmem_door_hangup_all(struct rdmem_frontdoor *fd)
{
	uint32_t c;

	for (c = 0; c < fd->geom.clients; c++) {
		if (fd->door.conn[c] < 0)
			continue;
		shutdown(fd->door.conn[c], SHUT_RDWR);
		rdmem_door_hangup(fd, c);
	}
}

/* Closes connections whose entry the actor reclaimed (its pid died first). */
static void rdmem_door_forget_reclaimed(struct rdmem_frontdoor *fd)
{
	uint32_t c;

	for (c = 0; c < fd->geom.clients; c++)
		if (fd->door.conn[c] >= 0 &&
		    atomic_load_explicit(&fd->clients[c].claim, memory_order_relaxed) !=
			fd->door.claimed[c])
			rdmem_door_owner_forget(&fd->door, c);
}

/* Handles one round of poll results: pending handshakes first, then attached clients. */
static void rdmem_door_round(struct rdmem_frontdoor *fd, struct pollfd *pf, uint32_t *who, int n,
			     uint64_t now)
{
	struct rdmem_door *d = &fd->door;
	int i;

	/* Read before looking: a nudge or event after this read stays for the next poll. */
	rdmem_door_drain(d->bell);
	rdmem_door_read_watch(fd);
	rdmem_door_scan_again(fd);
	rdmem_door_cut(fd, now);
	if (!atomic_load_explicit(&fd->retired, memory_order_relaxed) && rdmem_door_taken(fd)) {
		/* Relaxed: the flag alone; the actor only stops repairing the header. */
		atomic_store_explicit(&fd->retired, 1, memory_order_relaxed);
		rdmem_warn("front door %s: another agent took over our socket (--shm-reset): "
			   "hanging up on our clients",
			   fd->name);
	}
	if (atomic_load_explicit(&fd->retired, memory_order_relaxed))
		rdmem_door_hangup_all(fd);
	for (i = RDMEM_DOOR_FIXED_FDS; i < n; i++) {
		if (!pf[i].revents)
			continue;
		if (who[i] & 0x80000000u)
			rdmem_door_read_hello(fd, &d->pending[who[i] & 0xffffu]);
		else if (who[i] & 0x40000000u) {
			if (d->pidfd[who[i] & 0xffffu] == pf[i].fd)
				rdmem_door_owner_exited(fd, who[i] & 0xffffu);
		} else if (d->conn[who[i]] == pf[i].fd)
			rdmem_door_readable(fd, who[i], now, pf[i].revents);
	}
	for (i = 0; i < RDMEM_DOOR_PENDING; i++) {
		struct rdmem_door_pending *p = &d->pending[i];

		if (p->fd >= 0 && p->waiting)
			rdmem_door_answer(fd, p, now);
		else if (p->fd >= 0 && now >= p->deadline_ns) {
			rdmem_door_count(&d->n_timeouts);
			rdmem_warn_limited("front door %s: connection of pid %d closed: no hello "
					   "within %llu ms",
					   fd->name, (int)p->pid,
					   (unsigned long long)(RDMEM_DOOR_HELLO_NS / 1000000));
			rdmem_door_drop(p);
		}
	}
	if (pf[1].revents)
		rdmem_door_accept(fd, now);
	rdmem_door_forget_reclaimed(fd);
	/* Once more after the answers and accepts above: a client attached in
	 * this round of a retired door is hung up now, not at a tick. */
	if (atomic_load_explicit(&fd->retired, memory_order_relaxed))
		rdmem_door_hangup_all(fd);
}

/* Milliseconds until the nanosecond time t (rounded up), at most *ms. */
static void rdmem_door_until(uint64_t t, uint64_t now, int *ms)
{
	uint64_t left = t > now ? (t - now + 999999) / 1000000 : 0;

	if (*ms < 0 || left < (uint64_t)*ms)
		*ms = (int)RDMEM_MIN(left, (uint64_t)INT_MAX);
}

/* Fills pf (wake pipe, listener, bell, watch, pending, attached); returns the
 * count and the poll timeout: none unless a hello or a paused accept is due. */
static int rdmem_door_fds(struct rdmem_frontdoor *fd, struct pollfd *pf, uint32_t *who,
			  int *timeout_ms)
{
	struct rdmem_door *d = &fd->door;
	uint64_t now = rdmem_now_ns();
	int n = RDMEM_DOOR_FIXED_FDS, i;
	uint32_t c;

	pf[0] = (struct pollfd){ d->wake[0], POLLIN, 0 };
	pf[1] = (struct pollfd){ d->listen_fd, now < d->accept_pause_until ? 0 : POLLIN, 0 };
	pf[2] = (struct pollfd){ d->bell, POLLIN, 0 };
	pf[3] = (struct pollfd){ d->watch, POLLIN, 0 }; /* -1: ignored by poll */
	*timeout_ms = d->watch < 0 ? RDMEM_DOOR_TICK_MS : -1;
	/* Relaxed: a hint; until the actor takes the request, ring it again. */
	if (atomic_load_explicit(&fd->scan_req, memory_order_relaxed) ||
	    atomic_load_explicit(&fd->take_req, memory_order_relaxed))
		rdmem_door_until(now + RDMEM_DOOR_TICK_MS * 1000000ull, now, timeout_ms);
	if (now < d->accept_pause_until)
		rdmem_door_until(d->accept_pause_until, now, timeout_ms);
	for (i = 0; i < RDMEM_DOOR_PENDING; i++) {
		if (d->pending[i].fd < 0)
			continue;
		if (d->pending[i].waiting) { /* for an entry, not for bytes: retry soon */
			rdmem_door_until(now + 1000000, now, timeout_ms);
			continue;
		}
		rdmem_door_until(d->pending[i].deadline_ns, now, timeout_ms);
		who[n] = 0x80000000u | (uint32_t)i;
		pf[n++] = (struct pollfd){ d->pending[i].fd, POLLIN, 0 };
	}
	for (c = 0; c < fd->geom.clients; c++) {
		if (d->conn[c] >= 0) {
			short ev = rdmem_door_events(d, c, now);

			if (ev != POLLIN) /* resting: read it when the rest ends */
				rdmem_door_until(d->quiet_until[c], now, timeout_ms);
			who[n] = c;
			pf[n++] = (struct pollfd){ d->conn[c], ev, 0 };
		}
		if (d->pidfd[c] >= 0) { /* readable once the owner exits */
			who[n] = 0x40000000u | c;
			pf[n++] = (struct pollfd){ d->pidfd[c], POLLIN, 0 };
		}
	}
	return n;
}

static void *rdmem_door_main(void *arg)
{
	struct rdmem_frontdoor *fd = arg;
	size_t cap = RDMEM_DOOR_FIXED_FDS + RDMEM_DOOR_PENDING + 2 * (size_t)fd->geom.clients;
	struct pollfd *pf = calloc(cap, sizeof(*pf));
	uint32_t *who = calloc(cap, sizeof(*who));

	if (!pf || !who) {
		rdmem_err("front door %s: door thread: out of memory; no new attaches", fd->name);
		free(pf);
		free(who);
		return NULL;
	}
	for (;;) {
		int timeout, n = rdmem_door_fds(fd, pf, who, &timeout);

		if (poll(pf, (nfds_t)n, timeout) < 0 && errno != EINTR) {
			rdmem_err("front door %s: door thread: poll: %s", fd->name,
				  strerror(errno));
			break;
		}
		if (pf[0].revents)
			break; /* destroy() */
		rdmem_door_round(fd, pf, who, n, rdmem_now_ns());
	}
	free(pf);
	free(who);
	return NULL;
}

int rdmem_door_start(struct rdmem_frontdoor *fd)
{
	int rc = pthread_create(&fd->door.thread, NULL, rdmem_door_main, fd);

	if (rc) {
		rdmem_err("front door %s: cannot start the door thread: %s", fd->name,
			  strerror(rc));
		return -rc;
	}
	pthread_setname_np(fd->door.thread, "rdmem-door");
	fd->door.started = 1;
	return 0;
}

/* Stops the thread, closes every connection (clients see the agent leave),
 * removes the socket while it is still ours. */
void rdmem_door_close(struct rdmem_frontdoor *fd)
{
	struct rdmem_door *d = &fd->door;
	struct stat st;
	uint32_t c;

	if (d->started) {
		if (write(d->wake[1], "x", 1) < 0)
			rdmem_warn("front door %s: wake the door thread: %s", fd->name,
				   strerror(errno));
		pthread_join(d->thread, NULL);
		d->started = 0;
	}
	for (c = 0; d->conn && d->pidfd && c < fd->geom.clients; c++)
		rdmem_door_owner_forget(d, c);
	for (c = 0; c < RDMEM_DOOR_PENDING; c++)
		if (d->pending[c].fd >= 0)
			rdmem_door_drop(&d->pending[c]);
	if (d->listen_fd >= 0) {
		if (lstat(d->path, &st) == 0 && st.st_dev == d->dev && st.st_ino == d->ino &&
		    unlink(d->path) < 0 && errno != ENOENT)
			rdmem_warn("front door %s: unlink: %s", d->path, strerror(errno));
		close(d->listen_fd);
	}
	if (d->wake[0] >= 0) {
		close(d->wake[0]);
		close(d->wake[1]);
	}
	if (d->bell >= 0)
		close(d->bell);
	if (d->watch >= 0)
		close(d->watch);
	d->bell = d->watch = -1;
	free(d->conn);
	free(d->pidfd);
	free(d->claimed);
	free(d->quiet_until);
	free(d->owner);
	free(d->sweep);
	d->sweep = NULL;
	d->conn = d->pidfd = NULL;
	d->claimed = NULL;
	d->quiet_until = NULL;
	d->owner = NULL;
}
