/* emu_cm.c - the RDMA emulator's connection management: the
 * listener, the one-message-each-way handshake that exchanges private data,
 * registrations and fds, validation of everything the peer sends, and
 * connection events (socket EOF = the peer is gone or broke the connection).
 *
 * Naming: the listener is "@rdmem-shm:<port>" in the abstract Unix namespace
 * of the current network namespace. listen() ignores addr; resolve() accepts
 * only a host that is this machine (loopback, wildcard or a local interface
 * address), so a remote server name never silently reaches a local one.
 */
/* Also when a sanitizer build replaces CFLAGS (and -D_GNU_SOURCE with it). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fabric/emu.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/magic.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "rdmem/util.h"

/* A client may alloc/register for a while between resolve and connect. */
#define SHMFAB_PENDING_NS (30ull * 1000000000ull)
/* A full pending list gives up a connection at least this old for a new
 * one: honest clients send CONNECT within milliseconds of connecting, so a
 * flood of fresh connections cannot push them out. */
#define SHMFAB_PENDING_EVICT_NS 1000000000ull
/* Out of fds, pending connections at least SHMFAB_PENDING_EVICT_NS old are
 * given up this many at a time, for a new connection and its regions. */
#define SHMFAB_EMFILE_EVICT 16
/* Out of fds, accept is left alone this long: the backlog stays readable. */
#define SHMFAB_ACCEPT_PAUSE_NS 100000000ull

struct shmfab_pending {
	int fd;
	uint64_t since_ns;
};

struct shmfab_listener {
	struct rdmem_listener base;
	int sock;
	int epfd;  /* the listening socket + pending connections + timer: listener_fd */
	int timer; /* timerfd: a paused accept resumes (it is in epfd) */
	int paused;
	char name[40];
	int npend;
	struct shmfab_pending pend[SHMFAB_MAX_PENDING];
};

socklen_t shmfab_sockaddr(uint16_t port, struct sockaddr_un *sun, char *name, size_t n)
{
	int k;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	k = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "rdmem-shm:%u", port);
	snprintf(name, n, "@rdmem-shm:%u", port);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
}

static void shmfab_close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

/* ---- messages ---- */

static int shmfab_send_msg(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SHMFAB_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds) {
		struct cmsghdr *cm;

		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static int shmfab_take_fds(struct msghdr *msg, int *fds, int *nfds)
{
	int overflow = 0;

	for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
			if (*nfds < SHMFAB_MAX_FDS) {
				fds[(*nfds)++] = fd;
			} else {
				close(fd);
				overflow = 1;
			}
		}
	}
	return overflow;
}

/* One message without waiting. Returns its length, -EAGAIN, -ECONNRESET on
 * EOF, or -EPROTO when it or its fds did not fit; *nfds fds are ours. */
static ssize_t shmfab_recv_msg(int sock, struct shmfab_msg *m, int *fds, int *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SHMFAB_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = m, .iov_len = sizeof(*m) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	ssize_t n;
	int overflow;

	*nfds = 0;
	n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	overflow = shmfab_take_fds(&msg, fds, nfds);
	if (n == 0 || overflow || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		shmfab_close_fds(fds, *nfds);
		*nfds = 0;
		return n == 0 ? -ECONNRESET : -EPROTO;
	}
	return n;
}

static int shmfab_region_bad(const struct shmfab_wire_region *r, uint8_t *seen)
{
	const unsigned rights = RDMEM_ACCESS_REMOTE_WRITE | RDMEM_ACCESS_REMOTE_READ;
	unsigned idx = SHMFAB_KEY_IDX(r->rkey);

	if (!r->access || (r->access & ~rights) || !r->len || r->len > SHMFAB_MAX_REGION ||
	    r->addr > UINT64_MAX - r->len || !r->rkey || seen[idx])
		return 1;
	seen[idx] = 1;
	return 0;
}

/* What is wrong with a message from the peer, or NULL. */
static const char *shmfab_msg_bad(const struct shmfab_msg *m, size_t len, int nfds, int want)
{
	const struct shmfab_hello *h = &m->hdr;
	uint8_t seen[SHMFAB_MAX_MRS] = { 0 };

	if (len < sizeof(*h))
		return "message too short";
	if (h->magic != SHMFAB_MAGIC || h->version != SHMFAB_VERSION || h->reserved)
		return "bad magic, version or reserved field";
	if (h->type == SHMFAB_MSG_REJECT && want == SHMFAB_MSG_ACCEPT)
		return h->priv_len > SHMFAB_PRIV_REJECT || h->nregions || nfds || len != sizeof(*h)
			   ? "malformed reject"
			   : NULL;
	if (h->type != want)
		return "unexpected message type";
	if (h->priv_len > (want == SHMFAB_MSG_CONNECT ? SHMFAB_PRIV_CONNECT : SHMFAB_PRIV_ACCEPT))
		return "private data too long";
	if (h->nregions > SHMFAB_MAX_REGIONS ||
	    len != sizeof(*h) + h->nregions * sizeof(m->region[0]))
		return "region count does not match the length";
	if (nfds != SHMFAB_FD_REGION0 + (int)h->nregions)
		return "fd count does not match the region count";
	if (!h->rq_cap || h->rq_cap > SHMFAB_MAX_QUEUE || (h->rq_cap & (h->rq_cap - 1)))
		return "bad receive ring size";
	for (uint32_t i = 0; i < h->nregions; i++)
		if (shmfab_region_bad(&m->region[i], seen))
			return "bad region entry (access, length, rkey)";
	return NULL;
}

/* Our CONNECT or ACCEPT: every remote-access registration goes to the peer. */
static size_t shmfab_msg_build(struct shmfab_conn *c, int type, const void *priv, size_t plen,
			       struct shmfab_msg *m, int *fds, int *nfds)
{
	struct shmfab_hello *h = &m->hdr;
	uint32_t n = 0;

	memset(h, 0, sizeof(*h));
	*h = (struct shmfab_hello){ .magic = SHMFAB_MAGIC,
				    .version = SHMFAB_VERSION,
				    .type = (uint16_t)type,
				    .priv_len = (uint32_t)plen,
				    .rq_cap = c->rq_cap };
	if (plen)
		memcpy(h->priv, priv, plen);
	*nfds = 0;
	if (type == SHMFAB_MSG_REJECT)
		return sizeof(*h);
	fds[SHMFAB_FD_PAGE] = c->page_fd;
	fds[SHMFAB_FD_DOORBELL] = c->bell_tx;
	for (int i = 0; i < SHMFAB_MAX_MRS; i++) {
		struct shmfab_mr *mr = &c->mr[i];

		if (!mr->in_use || !mr->access)
			continue;
		m->region[n] = (struct shmfab_wire_region){ .addr = (uintptr_t)mr->addr,
							    .len = mr->len,
							    .offset = 0, /* a whole allocation */
							    .rkey = mr->rkey,
							    .access = mr->access };
		fds[SHMFAB_FD_REGION0 + n++] = mr->fd;
		mr->exported = 1;
		/* relaxed: the peer looks only after receiving this message,
		 * which the socket orders after the store. */
		atomic_store_explicit(&c->page->live[i], mr->rkey, memory_order_relaxed);
	}
	h->nregions = n;
	*nfds = SHMFAB_FD_REGION0 + (int)n;
	return sizeof(*h) + n * sizeof(m->region[0]);
}

/* ---- the peer's resources ---- */

/* Maps [off, off+len) of a peer fd. Only sealed memfds: their size cannot
 * shrink under our mapping, so a copy checked against it never faults. */
static int shmfab_map_fd(struct shmfab_conn *c, const char *what, int fd, uint64_t off,
			 uint64_t len, int prot, void **map, size_t *map_len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	int seals = fcntl(fd, F_GET_SEALS);
	struct statfs fs;
	struct stat st;
	uint64_t moff;

	if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rdmem_err_limited("shm: handshake with %s: the %s fd is not a memfd sealed against "
				  "shrinking",
				  c->name, what);
		return -EPROTO;
	}
	/* Shared memory (tmpfs) only: a hugetlbfs memfd passes the checks
	 * above, yet its sender can punch a hole and take every free huge page,
	 * and our next write into it is a SIGBUS (found by review). */
	if (fstatfs(fd, &fs) < 0 || fs.f_type != TMPFS_MAGIC) {
		rdmem_err_limited("shm: handshake with %s: the %s fd is not plain shared memory "
				  "(hugetlbfs or another file system)",
				  c->name, what);
		return -EPROTO;
	}
	if (off > (uint64_t)st.st_size || len > (uint64_t)st.st_size - off) {
		rdmem_err_limited(
		    "shm: handshake with %s: %s %llu+%llu past its memfd's %lld bytes", c->name,
		    what, (unsigned long long)off, (unsigned long long)len, (long long)st.st_size);
		return -EPROTO;
	}
	moff = off & ~(uint64_t)(pg - 1);
	*map_len = (size_t)(off + len - moff);
	*map = mmap(NULL, *map_len, prot, MAP_SHARED, fd, (off_t)moff);
	if (*map == MAP_FAILED) {
		*map = NULL;
		return shmfab_syserr("handshake with %s: mapping its %s of %zu bytes", c->name,
				     what, *map_len);
	}
	return 0;
}

static int shmfab_map_region(struct shmfab_conn *c, const struct shmfab_wire_region *w, int fd)
{
	struct shmfab_rmr *r = &c->rmr[c->nrmr];
	int prot = (w->access & RDMEM_ACCESS_REMOTE_WRITE ? PROT_WRITE : 0) |
		   (w->access & RDMEM_ACCESS_REMOTE_READ ? PROT_READ : 0);
	int rc = shmfab_map_fd(c, "region", fd, w->offset, w->len, prot, &r->map, &r->map_len);

	if (rc)
		return rc;
	r->addr = w->addr;
	r->len = w->len;
	r->rkey = w->rkey;
	r->access = w->access;
	r->base = (uint8_t *)r->map + (w->offset & (uint64_t)(sysconf(_SC_PAGESIZE) - 1));
	c->rmr_pos[SHMFAB_KEY_IDX(w->rkey)] = (uint8_t)++c->nrmr;
	return 0;
}

/* The peer's regions, in number and bytes in all, within what this side
 * agreed to map: 0 or -EPROTO. Each region is a mapping of its own (a VMA),
 * so their count is a resource as much as their bytes. */
static int shmfab_peer_regions_ok(struct shmfab_conn *c, const struct shmfab_msg *m)
{
	uint64_t total = 0;

	/* No overflow: at most SHMFAB_MAX_REGIONS regions of SHMFAB_MAX_REGION. */
	for (uint32_t i = 0; i < m->hdr.nregions; i++)
		total += m->region[i].len;
	if (m->hdr.nregions <= c->max_peer_regions && total <= c->max_peer_bytes)
		return 0;
	rdmem_err_limited("shm: %s declares %u regions of %llu bytes in all: more than the "
			  "%u regions and %llu bytes this side maps for a connection; refused",
			  c->name, m->hdr.nregions, (unsigned long long)total, c->max_peer_regions,
			  (unsigned long long)c->max_peer_bytes);
	return -EPROTO;
}

/* Maps what a validated CONNECT/ACCEPT hands us; closes every fd in fds. */
static int shmfab_peer_setup(struct shmfab_conn *c, const struct shmfab_msg *m, int *fds, int nfds)
{
	void *page = NULL;
	int rc;

	if ((rc = shmfab_peer_regions_ok(c, m)) < 0) {
		shmfab_close_fds(fds, nfds);
		return rc;
	}
	rc = shmfab_map_fd(c, "receive page", fds[SHMFAB_FD_PAGE], 0,
			   shmfab_page_bytes(m->hdr.rq_cap), PROT_READ | PROT_WRITE, &page,
			   &c->peer_page_len);
	if (!rc) {
		c->peer_page = page;
		c->peer_rq_cap = m->hdr.rq_cap;
		rc = shmfab_take_doorbell(c, &fds[SHMFAB_FD_DOORBELL]);
	}
	for (uint32_t i = 0; !rc && i < m->hdr.nregions; i++)
		rc = shmfab_map_region(c, &m->region[i], fds[SHMFAB_FD_REGION0 + i]);
	shmfab_close_fds(fds, nfds);
	return rc;
}

static int shmfab_copy_priv(struct shmfab_conn *c, const struct shmfab_msg *m, void *buf,
			    size_t *len)
{
	size_t cap = buf && len ? *len : 0;

	if (m->hdr.priv_len > cap) {
		rdmem_err_limited("shm: %s sent %u bytes of private data, the buffer holds %zu",
				  c->name, m->hdr.priv_len, cap);
		return -EMSGSIZE;
	}
	if (len) {
		memcpy(buf, m->hdr.priv, m->hdr.priv_len);
		*len = m->hdr.priv_len;
	}
	return 0;
}

/* ---- server side ---- */

int shmfab_listen(const char *addr, uint16_t port, struct rdmem_listener **out)
{
	struct shmfab_listener *l = calloc(1, sizeof(*l));
	struct epoll_event ev = { .events = EPOLLIN };
	struct sockaddr_un sun;
	socklen_t sl;

	if (!l) {
		rdmem_err_limited("shm: listen on port %u: out of memory", port);
		return -ENOMEM;
	}
	l->base.ops = &rdmem_fab_shm_ops;
	l->epfd = l->timer = -1;
	sl = shmfab_sockaddr(port, &sun, l->name, sizeof(l->name));
	rdmem_debug("shm: listening on %s (same host; address %s not used)", l->name,
		    addr ? addr : "none");
	l->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->sock < 0 || bind(l->sock, (struct sockaddr *)&sun, sl) < 0 ||
	    listen(l->sock, 128) < 0 || (l->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (ev.data.fd = l->sock, epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->sock, &ev)) < 0 ||
	    (l->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0 ||
	    (ev.data.fd = l->timer, epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->timer, &ev)) < 0) {
		int err = errno;

		rdmem_err_limited("shm: listen on %s: %s%s", l->name, strerror(err),
				  err == EADDRINUSE ? " (another server on this port?)" : "");
		shmfab_listener_close(&l->base);
		return -err;
	}
	*out = &l->base;
	return 0;
}

int shmfab_listener_fd(struct rdmem_listener *lb)
{
	return ((struct shmfab_listener *)lb)->epfd;
}

static void shmfab_pend_drop(struct shmfab_listener *l, int i, int close_fd)
{
	if (epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->pend[i].fd, NULL) < 0)
		rdmem_warn_limited("shm: %s: epoll_ctl del: %s", l->name, strerror(errno));
	if (close_fd)
		close(l->pend[i].fd);
	l->pend[i] = l->pend[--l->npend];
}

/* The pending connection that came first. */
static int shmfab_pend_oldest(const struct shmfab_listener *l)
{
	int o = 0;

	for (int i = 1; i < l->npend; i++)
		if (l->pend[i].since_ns < l->pend[o].since_ns)
			o = i;
	return o;
}

/* Arms the pause timer: a failure leaves accept unpaused (a spin beats a
 * listener that never accepts again). */
static int shmfab_accept_timer(struct shmfab_listener *l)
{
	struct itimerspec t = { .it_value = { 0, (long)SHMFAB_ACCEPT_PAUSE_NS } };

	if (timerfd_settime(l->timer, 0, &t, NULL) == 0)
		return 0;
	rdmem_err_limited("shm: %s: arming the accept timer: %s", l->name, strerror(errno));
	return -1;
}

/*
 * Out of fds or memory: the listening socket leaves the epoll set (its
 * backlog would keep the listener fd readable, and the caller would spin)
 * and comes back when the timer fires. Pending connections stay served.
 */
static void shmfab_accept_pause(struct shmfab_listener *l, int err)
{
	if (shmfab_accept_timer(l) < 0)
		return;
	if (epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->sock, NULL) < 0) {
		rdmem_err_limited("shm: %s: pausing accept: %s", l->name, strerror(errno));
		return; /* the timer fires into a listener not paused: a read, no harm */
	}
	l->paused = 1;
	rdmem_warn_limited("shm: accept on %s: %s: accepting again in %llu ms (raise the "
			   "open-files limit, LimitNOFILE)",
			   l->name, strerror(err), SHMFAB_ACCEPT_PAUSE_NS / 1000000);
}

static void shmfab_accept_resume(struct shmfab_listener *l)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = l->sock };
	uint64_t fired;

	/* Read whenever it fired, paused or not: a readable timer left in the
	 * epoll set would keep the listener fd readable (a spin). */
	if (read(l->timer, &fired, sizeof(fired)) != sizeof(fired) || !l->paused)
		return; /* the pause is not over, or there is none */
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->sock, &ev) < 0) {
		rdmem_err_limited("shm: %s: resuming accept: %s", l->name, strerror(errno));
		shmfab_accept_timer(l); /* try again, not never */
		return;
	}
	l->paused = 0;
}

/* Gives up the oldest pending connection if it is old enough (see
 * SHMFAB_PENDING_EVICT_NS): 1 if it did. */
static int shmfab_pend_evict(struct shmfab_listener *l, uint64_t now)
{
	int o;

	if (!l->npend)
		return 0;
	o = shmfab_pend_oldest(l);
	if (now - l->pend[o].since_ns < SHMFAB_PENDING_EVICT_NS)
		return 0;
	rdmem_warn_limited("shm: %s: %d handshakes pending: dropping one %llu ms old", l->name,
			   l->npend, (unsigned long long)((now - l->pend[o].since_ns) / 1000000));
	shmfab_pend_drop(l, o, 1);
	return 1;
}

/* Up to SHMFAB_EMFILE_EVICT of them, the oldest first: 1 if any. */
static int shmfab_pend_evict_some(struct shmfab_listener *l, uint64_t now)
{
	int n = 0;

	while (n < SHMFAB_EMFILE_EVICT && shmfab_pend_evict(l, now))
		n++;
	return n > 0;
}

/* Room for one more pending connection: a free entry, or the oldest one. */
static int shmfab_pend_room(struct shmfab_listener *l, uint64_t now)
{
	return l->npend < SHMFAB_MAX_PENDING || shmfab_pend_evict(l, now);
}

/*
 * Takes waiting connections onto the pending list, at most one list's worth
 * a call (a flood cannot keep us here); their CONNECT comes when the client
 * is done registering, so we never wait for it here. A full list takes a
 * new connection only in place of one at least SHMFAB_PENDING_EVICT_NS old,
 * else the new one is closed: a flood of fresh connections cannot push out
 * an honest client that is about to speak, and silent ones cannot hold the
 * list for SHMFAB_PENDING_NS.
 */
static void shmfab_pend_accept(struct shmfab_listener *l, uint64_t now)
{
	for (int taken = 0; !l->paused && taken < SHMFAB_MAX_PENDING; taken++) {
		struct epoll_event ev = { .events = EPOLLIN };
		int fd = accept4(l->sock, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			int err = errno;

			if (err == EINTR || err == ECONNABORTED)
				continue;
			/* Out of fds, silent connections may hold them all:
			 * those old enough give theirs up, enough for a new
			 * connection and the regions its CONNECT brings. */
			if ((err == EMFILE || err == ENFILE) && shmfab_pend_evict_some(l, now))
				continue;
			if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM)
				shmfab_accept_pause(l, err);
			else if (err != EAGAIN)
				rdmem_warn_limited("shm: accept on %s: %s", l->name, strerror(err));
			return;
		}
		ev.data.fd = fd;
		if (!shmfab_pend_room(l, now)) {
			rdmem_warn_limited("shm: %s: dropping a connection: %d handshakes pending",
					   l->name, l->npend);
			close(fd);
			continue;
		}
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			rdmem_warn_limited("shm: %s: dropping a connection: epoll_ctl: %s", l->name,
					   strerror(errno));
			close(fd);
			continue;
		}
		l->pend[l->npend++] = (struct shmfab_pending){ fd, now };
	}
}

static void shmfab_peer_name(int sock, const char *base, const char *who, char *out, size_t n)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0)
		snprintf(out, n, "%s (%s pid %d)", base, who, (int)cr.pid);
	else
		snprintf(out, n, "%s (%s)", base, who);
}

/* A CONNECT received on a pending socket becomes a conn. Owns fd and fds. */
static int shmfab_request_conn(struct shmfab_listener *l, int fd, struct shmfab_msg *m, ssize_t len,
			       int *fds, int nfds, const struct rdmem_fab_attr *attr,
			       struct rdmem_conn **out, void *priv, size_t *priv_len)
{
	struct shmfab_conn *c;
	const char *bad;
	char name[64];
	int rc;

	shmfab_peer_name(fd, l->name, "client", name, sizeof(name));
	bad = shmfab_msg_bad(m, (size_t)len, nfds, SHMFAB_MSG_CONNECT);
	if (bad) {
		rdmem_err_limited("shm: connect request from %s: %s", name, bad);
		shmfab_close_fds(fds, nfds);
		close(fd);
		return -EPROTO;
	}
	rc = shmfab_conn_new(attr, fd, SHMFAB_REQUESTED, name, &c);
	if (rc) {
		shmfab_close_fds(fds, nfds);
		return rc;
	}
	rc = shmfab_peer_setup(c, m, fds, nfds);
	if (!rc)
		rc = shmfab_copy_priv(c, m, priv, priv_len);
	if (rc) {
		shmfab_conn_free(c);
		return rc;
	}
	*out = &c->base;
	return 0;
}

/* An error return concerns one request (logged); the listener stays usable. */
int shmfab_get_request(struct rdmem_listener *lb, const struct rdmem_fab_attr *attr,
		       struct rdmem_conn **out, void *priv, size_t *priv_len)
{
	struct shmfab_listener *l = (struct shmfab_listener *)lb;
	uint64_t now = rdmem_now_ns();
	struct shmfab_msg m;
	int fds[SHMFAB_MAX_FDS];

	/* Pending connections first (a CONNECT waiting is served before new
	 * connections take fds it may need), then new ones. */
	shmfab_accept_resume(l);
	for (int i = 0; i < l->npend; i++) {
		int nfds, fd = l->pend[i].fd;
		ssize_t n = shmfab_recv_msg(fd, &m, fds, &nfds);

		if (n == -EAGAIN || n == -EINTR) {
			if (now - l->pend[i].since_ns <= SHMFAB_PENDING_NS)
				continue;
			rdmem_warn_limited(
			    "shm: %s: a client sent no connect request in %llu s; dropped", l->name,
			    SHMFAB_PENDING_NS / 1000000000ull);
			shmfab_pend_drop(l, i--, 1);
			continue;
		}
		shmfab_pend_drop(l, i, 0);
		if (n < 0) {
			rdmem_warn_limited("shm: %s: a client left before its connect request: %s",
					   l->name, strerror((int)-n));
			close(fd);
			return (int)n;
		}
		return shmfab_request_conn(l, fd, &m, n, fds, nfds, attr, out, priv, priv_len);
	}
	shmfab_pend_accept(l, now);
	return -EAGAIN;
}

/* 0 when len bytes of private data fit the handshake message's max, else
 * -EMSGSIZE (logged: "shm: <what> <peer>: ..."). */
static int shmfab_priv_fits(const struct shmfab_conn *c, const char *what, size_t len, int max)
{
	if (len <= (size_t)max)
		return 0;
	rdmem_err_limited("shm: %s %s: %zu bytes of private data, over %d", what, c->name, len,
			  max);
	return -EMSGSIZE;
}

int shmfab_accept(struct rdmem_conn *cb, const void *priv, size_t len)
{
	struct shmfab_conn *c = (struct shmfab_conn *)cb;
	struct shmfab_msg m;
	int fds[SHMFAB_MAX_FDS], nfds, rc;
	size_t mlen;

	if ((rc = shmfab_priv_fits(c, "accept of", len, SHMFAB_PRIV_ACCEPT)))
		return rc;
	if (c->state != SHMFAB_REQUESTED || (len && !priv)) {
		rdmem_err_limited("shm: accept of %s: not a pending request", c->name);
		return -EINVAL;
	}
	pthread_mutex_lock(&c->lock);
	mlen = shmfab_msg_build(c, SHMFAB_MSG_ACCEPT, priv, len, &m, fds, &nfds);
	rc = shmfab_send_msg(c->sock, &m, mlen, fds, nfds);
	if (rc) {
		rdmem_err_limited("shm: accept of %s: sending the reply: %s", c->name,
				  strerror(-rc));
		shmfab_break(c);
	}
	c->state = SHMFAB_CONNECTED;
	pthread_mutex_unlock(&c->lock);
	return rc == -EPIPE ? -ECONNRESET : rc;
}

void shmfab_reject(struct rdmem_conn *cb, const void *priv, size_t len)
{
	struct shmfab_conn *c = (struct shmfab_conn *)cb;
	struct shmfab_msg m;
	int fds[SHMFAB_MAX_FDS], nfds, rc;
	size_t mlen;

	if (len > SHMFAB_PRIV_REJECT || (len && !priv)) {
		rdmem_warn_limited("shm: reject of %s: reason cut to %d bytes", c->name,
				   priv ? SHMFAB_PRIV_REJECT : 0);
		len = priv ? SHMFAB_PRIV_REJECT : 0;
	}
	mlen = shmfab_msg_build(c, SHMFAB_MSG_REJECT, priv, len, &m, fds, &nfds);
	rc = shmfab_send_msg(c->sock, &m, mlen, NULL, 0);
	if (rc)
		rdmem_warn_limited("shm: reject of %s: sending the reason: %s", c->name,
				   strerror(-rc));
	shmfab_conn_free(c);
}

void shmfab_listener_close(struct rdmem_listener *lb)
{
	struct shmfab_listener *l = (struct shmfab_listener *)lb;

	for (int i = 0; i < l->npend; i++)
		close(l->pend[i].fd);
	if (l->epfd >= 0)
		close(l->epfd);
	if (l->timer >= 0)
		close(l->timer);
	if (l->sock >= 0)
		close(l->sock);
	free(l);
}

/* ---- client side ---- */

static int shmfab_addr_local(const struct sockaddr *sa, const struct ifaddrs *ifs)
{
	if (sa->sa_family == AF_INET) {
		uint32_t a = ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr);

		if ((a >> 24) == 127 || a == INADDR_ANY)
			return 1;
	} else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a =
		    &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;

		if (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a))
			return 1;
	} else {
		return 0;
	}
	for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		const struct sockaddr *ia = i->ifa_addr;

		if (!ia || ia->sa_family != sa->sa_family)
			continue;
		if (sa->sa_family == AF_INET &&
		    ((const struct sockaddr_in *)(const void *)ia)->sin_addr.s_addr ==
			((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr)
			return 1;
		if (sa->sa_family == AF_INET6 &&
		    !memcmp(&((const struct sockaddr_in6 *)(const void *)ia)->sin6_addr,
			    &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
			    sizeof(struct in6_addr)))
			return 1;
	}
	return 0;
}

/* 1 when host is this machine, 0 when not, -errno when it cannot tell. */
static int shmfab_host_local(const char *host)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	struct ifaddrs *ifs;
	int rc, local = 0;

	if (!host || !*host)
		return 1;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc) {
		rdmem_err_limited("shm: resolving %s: %s", host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	if (getifaddrs(&ifs) < 0) {
		rc = -errno;
		rdmem_err_limited("shm: listing local addresses to check %s: %s", host,
				  strerror(errno));
		freeaddrinfo(res);
		return rc;
	}
	for (struct addrinfo *ai = res; ai && !local; ai = ai->ai_next)
		local = shmfab_addr_local(ai->ai_addr, ifs);
	freeifaddrs(ifs);
	freeaddrinfo(res);
	return local;
}

static int shmfab_dial(const struct sockaddr_un *sun, socklen_t sl, const char *name,
		       int timeout_ms)
{
	uint64_t deadline = rdmem_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000;
	int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (sock < 0)
		return shmfab_syserr("socket for %s", name);
	/* A non-blocking Unix connect never goes in progress: it is done, or
	 * EAGAIN while the listener's backlog is full. */
	while (connect(sock, (const struct sockaddr *)sun, sl) < 0) {
		int err = errno;

		if ((err == EAGAIN || err == EINTR) &&
		    (timeout_ms < 0 || rdmem_now_ns() < deadline)) {
			poll(NULL, 0, 1);
			continue;
		}
		rdmem_err_limited("shm: connect to %s: %s%s", name,
				  err == EAGAIN ? "backlog full until the timeout" : strerror(err),
				  err == ECONNREFUSED
				      ? " (no shm server on this port in this network "
					"namespace)"
				      : "");
		close(sock);
		return err == EAGAIN ? -ETIMEDOUT : -err;
	}
	return sock;
}

/*
 * The listener's name is abstract: no owner, no mode, so any local user may
 * bind it, and first, on a port whose server serves TCP only, uses verbs or
 * has not started. So a listener is trusted only when its user is root or
 * ours. Before, a review's unprivileged user bound the name beside a
 * TCP-only root server and took every RDMA-path call of a root agent. A
 * server of another user is not reached over this fabric; calls to it go
 * over TCP. (Trusting the user that holds the server's TCP port was tried
 * and withdrawn the same day: another user may listen on that port on
 * another local address, [::1] beside 0.0.0.0.)
 */
static int shmfab_trust_server(int sock, const char *name)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return shmfab_syserr("SO_PEERCRED of %s", name);
	if (cr.uid == 0 || cr.uid == geteuid())
		return 0;
	rdmem_err_limited("shm: %s is served by uid %u (pid %d), neither root nor ours (uid %u): "
			  "not trusted (any local user can take the name); calls go over TCP",
			  name, (unsigned)cr.uid, (int)cr.pid, (unsigned)geteuid());
	return -EACCES;
}

int shmfab_resolve(const char *host, uint16_t port, const struct rdmem_fab_attr *attr,
		   int timeout_ms, struct rdmem_conn **out)
{
	struct shmfab_conn *c;
	struct sockaddr_un sun;
	char base[40], name[64];
	socklen_t sl = shmfab_sockaddr(port, &sun, base, sizeof(base));
	int sock, rc = shmfab_host_local(host);

	if (rc <= 0) {
		if (!rc)
			rdmem_err_limited(
			    "shm: %s is not this host; the shm fabric reaches only local "
			    "servers",
			    host);
		return rc ? rc : -EHOSTUNREACH;
	}
	sock = shmfab_dial(&sun, sl, base, timeout_ms);
	if (sock < 0)
		return sock;
	rc = shmfab_trust_server(sock, base);
	if (rc) {
		close(sock);
		return rc;
	}
	shmfab_peer_name(sock, base, "server", name, sizeof(name));
	rc = shmfab_conn_new(attr, sock, SHMFAB_RESOLVED, name, &c);
	if (rc)
		return rc;
	*out = &c->base;
	return 0;
}

/* Waits for the server's single reply. */
static ssize_t shmfab_await(struct shmfab_conn *c, struct shmfab_msg *m, int *fds, int *nfds,
			    int timeout_ms)
{
	uint64_t deadline = rdmem_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000;

	for (;;) {
		ssize_t n = shmfab_recv_msg(c->sock, m, fds, nfds);
		struct pollfd p = { .fd = c->sock, .events = POLLIN };
		uint64_t now = rdmem_now_ns();
		int wait_ms;

		if (n != -EAGAIN && n != -EINTR)
			return n;
		if (timeout_ms >= 0 && now >= deadline)
			return -ETIMEDOUT;
		wait_ms = timeout_ms < 0 ? -1 : (int)((deadline - now + 999999) / 1000000);
		if (poll(&p, 1, wait_ms) < 0 && errno != EINTR)
			return -errno;
	}
}

static int shmfab_reply(struct shmfab_conn *c, struct shmfab_msg *m, ssize_t n, int *fds, int nfds,
			void *peer_priv, size_t *peer_len)
{
	const char *bad = shmfab_msg_bad(m, (size_t)n, nfds, SHMFAB_MSG_ACCEPT);
	int rc;

	if (bad) {
		rdmem_err_limited("shm: connect to %s: reply: %s", c->name, bad);
		shmfab_close_fds(fds, nfds);
		return -EPROTO;
	}
	if (m->hdr.type == SHMFAB_MSG_REJECT) {
		rc = shmfab_copy_priv(c, m, peer_priv, peer_len);
		rdmem_warn_limited("shm: connect to %s: rejected", c->name);
		return rc ? rc : -ECONNREFUSED;
	}
	rc = shmfab_peer_setup(c, m, fds, nfds);
	if (!rc)
		rc = shmfab_copy_priv(c, m, peer_priv, peer_len);
	return rc;
}

int shmfab_connect(struct rdmem_conn *cb, const void *priv, size_t len, void *peer_priv,
		   size_t *peer_len, int timeout_ms)
{
	struct shmfab_conn *c = (struct shmfab_conn *)cb;
	struct shmfab_msg m;
	int fds[SHMFAB_MAX_FDS], nfds, rc;
	ssize_t n;

	if ((rc = shmfab_priv_fits(c, "connect to", len, SHMFAB_PRIV_CONNECT)))
		return rc;
	if (c->state != SHMFAB_RESOLVED || c->broken || (len && !priv)) {
		rdmem_err_limited("shm: connect to %s: not resolved", c->name);
		return -EINVAL;
	}
	if (shmfab_test_holed(c)) {
		rdmem_err_limited("shm: connect to %s: timed out (test black hole %s)", c->name,
				  c->test_hole);
		return -ETIMEDOUT;
	}
	pthread_mutex_lock(&c->lock);
	n = (ssize_t)shmfab_msg_build(c, SHMFAB_MSG_CONNECT, priv, len, &m, fds, &nfds);
	rc = shmfab_send_msg(c->sock, &m, (size_t)n, fds, nfds);
	if (rc) {
		rdmem_err_limited("shm: connect to %s: sending the request: %s", c->name,
				  strerror(-rc));
		goto out;
	}
	n = shmfab_await(c, &m, fds, &nfds, timeout_ms);
	if (n < 0) {
		rc = (int)n;
		rdmem_err_limited("shm: connect to %s: %s", c->name,
				  rc == -ECONNRESET
				      ? "the server closed the connection during the handshake"
				      : strerror(-rc));
		goto out;
	}
	rc = shmfab_reply(c, &m, n, fds, nfds, peer_priv, peer_len);
	if (!rc)
		c->state = SHMFAB_CONNECTED;
out:
	/* One handshake per connection: a retry needs a new resolve. */
	if (rc)
		shmfab_break(c);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ---- connection events ---- */

int shmfab_event_fd(struct rdmem_conn *cb)
{
	return ((struct shmfab_conn *)cb)->sock;
}

/* Why the connection broke, or NULL while it is up. Peer death is EOF. */
static const char *shmfab_probe(struct shmfab_conn *c, int *err)
{
	char b;
	ssize_t n;

	n = recv(c->sock, &b, 1, MSG_DONTWAIT | MSG_PEEK);
	if (n == 0)
		return "the peer closed the connection or died";
	if (n > 0)
		return "unexpected data from the peer";
	*err = errno;
	return errno == EAGAIN || errno == EINTR ? NULL : "socket error";
}

int shmfab_check(struct rdmem_conn *cb)
{
	struct shmfab_conn *c = (struct shmfab_conn *)cb;
	int rc, err = 0;

	pthread_mutex_lock(&c->lock);
	if (!c->broken && c->state == SHMFAB_CONNECTED && !shmfab_peer_broke(c)) {
		const char *why = shmfab_probe(c, &err);

		if (why) {
			rdmem_warn_limited("shm: connection to %s: %s%s%s", c->name, why,
					   err ? ": " : "", err ? strerror(err) : "");
			shmfab_break(c);
		}
	}
	rc = c->broken ? -ECONNRESET : 0;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

const char *shmfab_peer(struct rdmem_conn *cb)
{
	return ((struct shmfab_conn *)cb)->name;
}

void shmfab_close(struct rdmem_conn *cb)
{
	struct shmfab_conn *c = (struct shmfab_conn *)cb;

	/* The peer sees what it would see from an RC disconnect: the event
	 * (socket EOF) and its receives flushed. */
	if (c->state == SHMFAB_CONNECTED)
		shmfab_break(c);
	shmfab_conn_free(c);
}
