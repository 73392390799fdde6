/* emu.c - the RDMA emulator's (the "shm" fabric backend) memory and data path:
 * memfd-backed allocations, registrations with NIC-like keys, WRITE/WRITE_IMM/READ done
 * as copies by the poster with NIC-like checks, the completion queue with
 * selective signalling, receives for immediates and the doorbell.
 * Connection management is in emu_cm.c; shared layout in emu.h.
 *
 * Contract where fabric.h leaves room (the verbs backend behaves the same):
 *  - A WR holds a send queue slot from post until poll() reaps its completion
 *    or a later one; post() fails with -EAGAIN (nothing posted) when n WRs do
 *    not fit in max_send_wr. We signal every signal_every-th unsignaled WR
 *    ourselves and hide that completion, so a caller that keeps polling never
 *    sees -EAGAIN from unsignaled WRs alone.
 *  - Errors complete even when unsignaled. The first error breaks the
 *    connection on both sides; every later WR completes with FLUSH_ERR, and
 *    receives still posted complete with FLUSH_ERR (op RECV_IMM) after the
 *    immediates that arrived before the break.
 *  - post_recv() fails with -EAGAIN when posted-but-unpolled receives would
 *    exceed max_recv_wr (so the CQ of send + recv depth cannot overflow).
 *  - A zero-length WR checks no rkey (as IB does): a bare doorbell
 *    WRITE_IMM needs no remote region.
 *  - WRITE_IMM with no receive posted by the peer writes nothing and
 *    completes with RNR_ERR (rnr_retry exhausted).
 */
/* Also when a sanitizer build replaces CFLAGS (and -D_GNU_SOURCE with it). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fabric/emu.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdmem/util.h"

static size_t shmfab_pagesize(void)
{
	long pg = sysconf(_SC_PAGESIZE);

	return pg > 0 ? (size_t)pg : 4096;
}

static int shmfab_round_page(uint64_t len, size_t *out)
{
	size_t pg = shmfab_pagesize();

	if (len > SIZE_MAX - pg)
		return -EINVAL;
	*out = (size_t)((len + pg - 1) & ~(uint64_t)(pg - 1));
	return 0;
}

size_t shmfab_page_bytes(uint32_t cap)
{
	size_t n = 0;

	shmfab_round_page(offsetof(struct shmfab_page, ring) + (size_t)cap * sizeof(uint32_t), &n);
	return n;
}

static uint32_t shmfab_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

int shmfab_syserr(const char *fmt, ...)
{
	int err = errno;
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	rdmem_err("shm: %s: %s", what, strerror(err));
	return -err;
}

/* A sealed memfd: neither side can shrink it under the other's mapping (a
 * SIGBUS). final: no seal can be added either; else the seals are closed
 * when the file is first exported (shmfab_seal_export). */
static int shmfab_memfd(const char *what, size_t size, int final, int *out)
{
	int fd = memfd_create(what, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int seals = F_SEAL_SHRINK | F_SEAL_GROW | (final ? F_SEAL_SEAL : 0);

	if (fd < 0)
		return shmfab_syserr("memfd_create(%s)", what);
	/* 0600, not memfd's 0777: a peer of another uid cannot reopen our fd
	 * (through /proc) with more rights than it was given, nor advise our
	 * pages out (MADV_PAGEOUT checks write permission on the file). */
	if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, seals) < 0) {
		int rc = shmfab_syserr("sizing/sealing memfd %s of %zu bytes", what, size);

		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

void shmfab_ring(int fd, const char *what, const char *peer)
{
	/* EAGAIN: rings are queued, the waiter wakes anyway. ECONNREFUSED: the
	 * peer is gone, which check() reports. Rate-limited: the peer holds a
	 * dup of our own bell's send end and can make every ring fail (EPIPE
	 * after its shutdown()), which costs only this connection's wake-ups. */
	if (send(fd, "", 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN &&
	    errno != ECONNREFUSED)
		rdmem_warn_limited("shm: ringing %s doorbell (%s): %s", what, peer,
				   strerror(errno));
}

int shmfab_take_doorbell(struct shmfab_conn *c, int *fd)
{
	struct ucred bell, peer;
	socklen_t bl = sizeof(bell), pl = sizeof(peer), dl = sizeof(int), tl = sizeof(int);
	int dom = 0, type = 0;

	/* Only socket pair ends carry peer credentials: no datagram socket
	 * connected elsewhere (a logger, say) gets our rings. */
	if (getsockopt(*fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) < 0 ||
	    getsockopt(*fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
	    getsockopt(*fd, SOL_SOCKET, SO_PEERCRED, &bell, &bl) < 0 ||
	    getsockopt(c->sock, SOL_SOCKET, SO_PEERCRED, &peer, &pl) < 0 || dom != AF_UNIX ||
	    type != SOCK_DGRAM || bell.pid <= 0 || bell.uid != peer.uid) {
		rdmem_err("shm: handshake with %s: the doorbell fd is not one of its datagram "
			  "socket pairs",
			  c->name);
		return -EPROTO;
	}
	c->peer_bell = *fd;
	*fd = -1;
	return 0;
}

static int shmfab_conn_attr(struct shmfab_conn *c, const struct rdmem_fab_attr *attr)
{
	uint32_t sq = attr && attr->max_send_wr ? attr->max_send_wr : SHMFAB_DEF_QUEUE;
	uint32_t rq = attr && attr->max_recv_wr ? attr->max_recv_wr : SHMFAB_DEF_QUEUE;
	uint32_t every = attr ? attr->signal_every : 0;

	/* Granted, not refused, as a device clamps to its max_qp_wr: callers
	 * size themselves to rdmem_fab_queue_caps(). */
	if (sq > SHMFAB_MAX_QUEUE || rq > SHMFAB_MAX_QUEUE) {
		rdmem_debug("shm: queue depths send %u / recv %u for %s clamped to %u", sq, rq,
			    c->name, SHMFAB_MAX_QUEUE);
		sq = sq > SHMFAB_MAX_QUEUE ? SHMFAB_MAX_QUEUE : sq;
		rq = rq > SHMFAB_MAX_QUEUE ? SHMFAB_MAX_QUEUE : rq;
	}
	c->max_send = sq;
	c->max_recv = rq;
	c->max_peer_bytes = attr && attr->max_peer_bytes ? attr->max_peer_bytes : SHMFAB_MAX_REGION;
	c->max_peer_regions =
	    attr && attr->max_peer_regions && attr->max_peer_regions < SHMFAB_MAX_REGIONS
		? attr->max_peer_regions
		: SHMFAB_MAX_REGIONS;
	/* Must be <= max_send_wr, or unsignaled WRs alone could fill the queue. */
	c->signal_every = every && every <= sq ? every : (sq + 1) / 2;
	c->rq_cap = shmfab_pow2(rq);
	c->cq_mask = shmfab_pow2(sq) - 1;
	return 0;
}

static int shmfab_conn_page(struct shmfab_conn *c)
{
	int bell[2], rc;

	c->page_len = shmfab_page_bytes(c->rq_cap);
	rc = shmfab_memfd("rdmem-shm-rq", c->page_len, 1, &c->page_fd);
	if (rc)
		return rc;
	c->page = mmap(NULL, c->page_len, PROT_READ | PROT_WRITE, MAP_SHARED, c->page_fd, 0);
	if (c->page == MAP_FAILED) {
		c->page = NULL;
		return shmfab_syserr("mapping the receive page for %s", c->name);
	}
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, bell) < 0)
		return shmfab_syserr("socket pair for the doorbell of %s", c->name);
	c->bell_rx = bell[0];
	c->bell_tx = bell[1];
	return 0;
}

/* Reads the test-only knobs (emu.h); -EINVAL on a bad value. */
static int shmfab_test_knobs(struct shmfab_conn *c)
{
	const char *delay = getenv("RDMEM_SHM_TEST_DELAY_MS");
	const char *hole = getenv("RDMEM_SHM_TEST_BLACKHOLE");
	char *end = NULL;
	unsigned long ms = 0;

	if (delay && *delay) {
		errno = 0;
		ms = strtoul(delay, &end, 10);
		if (errno || *end || ms > SHMFAB_TEST_MAX_DELAY_MS) {
			rdmem_err("shm: RDMEM_SHM_TEST_DELAY_MS=%s: want 0..%d (ms)", delay,
				  SHMFAB_TEST_MAX_DELAY_MS);
			return -EINVAL;
		}
	}
	if (hole && *hole &&
	    snprintf(c->test_hole, sizeof(c->test_hole), "%s", hole) >= (int)sizeof(c->test_hole)) {
		rdmem_err("shm: RDMEM_SHM_TEST_BLACKHOLE: path longer than %zu bytes",
			  sizeof(c->test_hole) - 1);
		return -EINVAL;
	}
	if (!ms && !c->test_hole[0])
		return 0;
	c->test_delay_ns = ms * 1000000ull;
	c->dq = calloc(c->max_send, sizeof(*c->dq));
	if (!c->dq)
		return -ENOMEM;
	rdmem_warn("shm: TEST MODE on the connection to %s: WRs run %lu ms late%s%s", c->name, ms,
		   c->test_hole[0] ? ", black hole while this exists: " : "", c->test_hole);
	return 0;
}

int shmfab_test_holed(const struct shmfab_conn *c)
{
	return c->test_hole[0] && access(c->test_hole, F_OK) == 0;
}

int shmfab_conn_new(const struct rdmem_fab_attr *attr, int sock, int state, const char *name,
		    struct shmfab_conn **out)
{
	struct shmfab_conn *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		rdmem_err("shm: no memory for a connection to %s", name);
		close(sock);
		return -ENOMEM;
	}
	c->base.ops = &rdmem_fab_shm_ops;
	c->sock = sock;
	c->state = state;
	c->page_fd = c->bell_rx = c->bell_tx = c->peer_bell = -1;
	snprintf(c->name, sizeof(c->name), "%s", name);
	for (int i = 0; i < SHMFAB_MAX_MRS; i++)
		c->mr[i].fd = -1;
	rc = pthread_mutex_init(&c->lock, NULL);
	if (rc) {
		rdmem_err("shm: mutex for %s: %s", name, strerror(rc));
		close(sock);
		free(c);
		return -rc;
	}
	rc = shmfab_conn_attr(c, attr);
	if (!rc)
		rc = shmfab_test_knobs(c);
	if (!rc) {
		c->cq = calloc((size_t)c->cq_mask + 1, sizeof(*c->cq));
		rc = c->cq ? shmfab_conn_page(c) : -ENOMEM;
	}
	if (rc) {
		shmfab_conn_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

static void shmfab_unmap(void *p, size_t len)
{
	if (p && munmap(p, len) < 0)
		rdmem_warn("shm: munmap %p+%zu: %s", p, len, strerror(errno));
}

static void shmfab_closefd(int fd)
{
	if (fd >= 0 && close(fd) < 0)
		rdmem_warn("shm: close fd %d: %s", fd, strerror(errno));
}

void shmfab_conn_free(struct shmfab_conn *c)
{
	for (uint32_t i = 0; i < c->nrmr; i++)
		shmfab_unmap(c->rmr[i].map, c->rmr[i].map_len);
	for (int i = 0; i < SHMFAB_MAX_MRS; i++)
		shmfab_closefd(c->mr[i].fd);
	while (c->allocs) {
		struct shmfab_alloc *a = c->allocs;

		c->allocs = a->next;
		shmfab_unmap(a->addr, a->len);
		shmfab_closefd(a->fd);
		free(a);
	}
	shmfab_unmap(c->peer_page, c->peer_page_len);
	shmfab_unmap(c->page, c->page_len);
	shmfab_closefd(c->peer_bell);
	shmfab_closefd(c->bell_rx);
	shmfab_closefd(c->bell_tx);
	shmfab_closefd(c->page_fd);
	shmfab_closefd(c->sock);
	free(c->cq);
	free(c->dq); /* WRs still held die with the QP, unrun */
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Immediates the peer queued, validated against the credits we gave it: a
 * peer that queued more broke the protocol. Returns -1 then. */
static int shmfab_rq_produced(struct shmfab_conn *c, uint64_t *out)
{
	/* acquire: pairs with the peer's release store of produced in
	 * shmfab_queue_imm(), so the ring entries and the data written before
	 * them are visible once we see the count. */
	uint64_t p = atomic_load_explicit(&c->page->produced, memory_order_acquire);

	if (p - c->rq_consumed > c->rq_posted - c->rq_consumed)
		return -1;
	*out = p;
	return 0;
}

void shmfab_break(struct shmfab_conn *c)
{
	if (c->broken)
		return;
	c->broken = 1;
	if (shmfab_rq_produced(c, &c->rq_frozen))
		c->rq_frozen = c->rq_consumed;
	/* relaxed: the flag publishes nothing; it only tells the peer's next
	 * post or poll to stop early, the socket EOF being the reliable signal. */
	atomic_store_explicit(&c->page->broken, 1, memory_order_relaxed);
	if (c->peer_page)
		atomic_store_explicit(&c->peer_page->broken, 1, memory_order_relaxed);
	if (shutdown(c->sock, SHUT_RDWR) < 0 && errno != ENOTCONN)
		rdmem_warn("shm: shutdown of the connection to %s: %s", c->name, strerror(errno));
	/* Wake sleepers on both sides: their posted receives now flush. */
	if (c->peer_bell >= 0)
		shmfab_ring(c->peer_bell, "the peer's", c->name);
	shmfab_ring(c->bell_tx, "our", c->name);
}

int shmfab_peer_broke(struct shmfab_conn *c)
{
	/* relaxed: see shmfab_break(). */
	if (c->broken || !atomic_load_explicit(&c->page->broken, memory_order_relaxed))
		return 0;
	rdmem_warn("shm: connection to %s: the peer broke the connection", c->name);
	shmfab_break(c);
	return 1;
}

/* ---- memory ---- */

/* Shared allocations (rdmem_fab_alloc_shared): any connection may register them. */
static pthread_mutex_t shmfab_shared_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shmfab_alloc *shmfab_shared;

/* A page-rounded memfd mapping; NULL (logged) on failure. */
static struct shmfab_alloc *shmfab_alloc_map(size_t len, const char *whose)
{
	struct shmfab_alloc *a;
	size_t size;

	if (len == 0 || shmfab_round_page(len, &size)) {
		rdmem_err("shm: alloc of %zu bytes for %s: bad size", len, whose);
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		rdmem_err("shm: alloc of %zu bytes for %s: out of memory", len, whose);
		return NULL;
	}
	if (shmfab_memfd("rdmem-shm-region", size, 0, &a->fd)) {
		free(a);
		return NULL;
	}
	a->addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
	if (a->addr == MAP_FAILED) {
		rdmem_err("shm: mapping %zu bytes for %s: %s", size, whose, strerror(errno));
		shmfab_closefd(a->fd);
		free(a);
		return NULL;
	}
	a->len = size;
	return a;
}

static void *shmfab_alloc_shared(size_t len)
{
	struct shmfab_alloc *a = shmfab_alloc_map(len, "a shared pool");

	if (!a)
		return NULL;
	pthread_mutex_lock(&shmfab_shared_lock);
	a->next = shmfab_shared;
	shmfab_shared = a;
	pthread_mutex_unlock(&shmfab_shared_lock);
	return a->addr;
}

static void shmfab_free_shared(void *p, size_t len)
{
	struct shmfab_alloc **pp, *a = NULL;

	(void)len;
	pthread_mutex_lock(&shmfab_shared_lock);
	for (pp = &shmfab_shared; *pp; pp = &(*pp)->next) {
		if ((*pp)->addr == p) {
			a = *pp;
			*pp = a->next;
			break;
		}
	}
	pthread_mutex_unlock(&shmfab_shared_lock);
	if (!a) {
		rdmem_err("shm: free of %p: not a shared pool", p);
		return;
	}
	/* Registrations hold their own fd: peers' mappings stay valid. */
	shmfab_unmap(a->addr, a->len);
	shmfab_closefd(a->fd);
	free(a);
}

static void *shmfab_alloc(struct rdmem_conn *conn, size_t len)
{
	struct shmfab_conn *c = (struct shmfab_conn *)conn;
	struct shmfab_alloc *a = shmfab_alloc_map(len, c->name);

	if (!a)
		return NULL;
	pthread_mutex_lock(&c->lock);
	a->next = c->allocs;
	c->allocs = a;
	pthread_mutex_unlock(&c->lock);
	return a->addr;
}

static void shmfab_free(struct rdmem_conn *conn, void *p, size_t len)
{
	struct shmfab_conn *c = (struct shmfab_conn *)conn;
	struct shmfab_alloc **pp, *a = NULL;

	pthread_mutex_lock(&c->lock);
	for (pp = &c->allocs; *pp; pp = &(*pp)->next) {
		if ((*pp)->addr == p) {
			a = *pp;
			*pp = a->next;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (!a) {
		rdmem_err("shm: free of %p (%zu bytes) for %s: not from rdmem_fab_alloc", p, len,
			  c->name);
		return;
	}
	/* Registrations hold their own fd: the peer's mapping stays valid. */
	shmfab_unmap(a->addr, a->len);
	shmfab_closefd(a->fd);
	free(a);
}

static struct shmfab_alloc *shmfab_alloc_in(struct shmfab_alloc *list, uintptr_t addr, uint64_t len)
{
	for (struct shmfab_alloc *a = list; a; a = a->next) {
		uintptr_t base = (uintptr_t)a->addr;

		if (addr >= base && addr - base <= a->len && len <= a->len - (addr - base))
			return a;
	}
	return NULL;
}

/* The memfd mapping holding [addr, addr + len): the conn's own, or a shared pool. */
static struct shmfab_alloc *shmfab_alloc_of(struct shmfab_conn *c, uintptr_t addr, uint64_t len)
{
	struct shmfab_alloc *a = shmfab_alloc_in(c->allocs, addr, len);

	if (!a) {
		pthread_mutex_lock(&shmfab_shared_lock);
		a = shmfab_alloc_in(shmfab_shared, addr, len);
		pthread_mutex_unlock(&shmfab_shared_lock);
	}
	return a;
}

/* The fd the peer gets: read-only regions go as a read-only file
 * description. The guard is the seal (shmfab_seal_export): the peer could
 * reopen the file writable through /proc if it had our uid or the mode. */
static int shmfab_peer_fd(struct shmfab_conn *c, int fd, unsigned access)
{
	char path[64];
	int nfd;

	if (access & RDMEM_ACCESS_REMOTE_WRITE) {
		nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	} else {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		nfd = open(path, O_RDONLY | O_CLOEXEC);
	}
	return nfd < 0 ? shmfab_syserr("fd for a registration shared with %s", c->name) : nfd;
}

static int shmfab_keys(struct shmfab_conn *c, int idx, struct shmfab_mr *m)
{
	uint32_t r[2];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		rdmem_err("shm: getrandom for the keys of a registration (%s): %s", c->name,
			  strerror(errno));
		return -EIO;
	}
	m->lkey = (r[0] << 8) | (uint32_t)idx;
	m->rkey = (r[1] << 8) | (uint32_t)idx;
	if (!m->rkey) /* 0 marks a revoked registration in the live table */
		m->rkey = 1u << 8;
	return 0;
}

/*
 * Fixes what the peer may do with the file before it gets it. Its fd's open
 * mode is no limit: a peer that may open the file (root, our uid; anyone
 * while memfds had their default mode 0777) reopens a read-only fd through
 * /proc/self/fd writable. The seals are: F_SEAL_FUTURE_WRITE for a
 * read-only export (no new writable mapping, no write(): ours, made before,
 * stays), and F_SEAL_SEAL for every export, so the peer can add none. An
 * allocation is therefore exported with one access only; a registration
 * asking for another is refused. (Memory has no write-only mapping: a
 * peer may read what it may write.)
 */
static int shmfab_seal_export(struct shmfab_conn *c, const struct shmfab_alloc *a, unsigned access)
{
	int want = access & RDMEM_ACCESS_REMOTE_WRITE ? 0 : F_SEAL_FUTURE_WRITE;
	int seals = fcntl(a->fd, F_GET_SEALS);

	if (seals < 0)
		return shmfab_syserr("reading the seals of an allocation for %s", c->name);
	if (seals & F_SEAL_SEAL) {
		if ((seals & F_SEAL_FUTURE_WRITE) == want)
			return 0;
		rdmem_err("shm: remote-access registration %p for %s: its allocation was "
			  "exported %s before, and one file has one access",
			  a->addr, c->name, want ? "writable" : "read-only");
		return -EINVAL;
	}
	if (fcntl(a->fd, F_ADD_SEALS, want | F_SEAL_SEAL) < 0)
		return shmfab_syserr("sealing an allocation for %s (Linux 5.1 or later "
				     "seals a read-only export)",
				     c->name);
	return 0;
}

/* 1 when [addr, addr + len) is all of allocation a: its start, into its last page. */
static int shmfab_whole_alloc(const struct shmfab_alloc *a, const void *addr, uint64_t len)
{
	size_t whole;

	return addr == a->addr && !shmfab_round_page(len, &whole) && whole == a->len;
}

static int shmfab_reg_remote(struct shmfab_conn *c, struct shmfab_mr *m, uint64_t len,
			     unsigned access)
{
	struct shmfab_alloc *a;
	int nremote = 0, rc;

	if (c->state == SHMFAB_CONNECTED) {
		rdmem_err("shm: remote-access registration %p+%llu for %s after connect/accept: "
			  "the peer learns regions only during the handshake",
			  (void *)m->addr, (unsigned long long)len, c->name);
		return -EINVAL;
	}
	for (int i = 0; i < SHMFAB_MAX_MRS; i++)
		nremote += c->mr[i].in_use && c->mr[i].access;
	if (nremote >= SHMFAB_MAX_REGIONS) {
		rdmem_err("shm: more than %d remote-access registrations for %s",
			  SHMFAB_MAX_REGIONS, c->name);
		return -ENOSPC;
	}
	a = shmfab_alloc_of(c, (uintptr_t)m->addr, len);
	if (!a) {
		rdmem_err("shm: remote-access registration %p+%llu for %s lies outside memory "
			  "from rdmem_fab_alloc (the peer could not map it)",
			  (void *)m->addr, (unsigned long long)len, c->name);
		return -EINVAL;
	}
	/* The peer gets the allocation's file, and a file cannot be handed out
	 * in part: whatever else it held, the peer could map too (a read-only
	 * area through a writable region's fd, or memory never registered). */
	if (!shmfab_whole_alloc(a, m->addr, len)) {
		rdmem_err("shm: remote-access registration %p+%llu for %s is not a whole "
			  "allocation (%p+%zu): the peer would reach all of it (fabric.h)",
			  (void *)m->addr, (unsigned long long)len, c->name, a->addr, a->len);
		return -EINVAL;
	}
	if ((rc = shmfab_seal_export(c, a, access)) < 0)
		return rc;
	m->fd = shmfab_peer_fd(c, a->fd, access);
	return m->fd < 0 ? m->fd : 0;
}

static int shmfab_reg_locked(struct shmfab_conn *c, void *addr, uint64_t len, unsigned access,
			     struct rdmem_mr *out)
{
	const unsigned remote = RDMEM_ACCESS_REMOTE_WRITE | RDMEM_ACCESS_REMOTE_READ;
	struct shmfab_mr *m = NULL;
	int idx, rc;

	if (!addr || !len || (access & ~remote) || len > UINTPTR_MAX - (uintptr_t)addr) {
		rdmem_err("shm: registration %p+%llu access 0x%x for %s: invalid", addr,
			  (unsigned long long)len, access, c->name);
		return -EINVAL;
	}
	for (idx = 0; idx < SHMFAB_MAX_MRS && !m; idx++)
		m = c->mr[idx].in_use ? NULL : &c->mr[idx];
	if (!m) {
		/* A device's max_mr reached: the agent treats it as pressure. */
		rdmem_warn_limited("shm: more than %d registrations for %s", SHMFAB_MAX_MRS,
				   c->name);
		return -ENOSPC;
	}
	idx = (int)(m - c->mr);
	m->addr = addr;
	m->len = len;
	m->access = access;
	rc = shmfab_keys(c, idx, m);
	if (!rc && access)
		rc = shmfab_reg_remote(c, m, len, access);
	if (rc) {
		memset(m, 0, sizeof(*m));
		m->fd = -1;
		return rc;
	}
	m->in_use = 1;
	*out = (struct rdmem_mr){ .addr = addr,
				  .len = len,
				  .lkey = m->lkey,
				  .rkey = m->rkey,
				  .access = access,
				  .impl = m };
	return 0;
}

static int shmfab_reg(struct rdmem_conn *conn, void *addr, uint64_t len, unsigned access,
		      struct rdmem_mr *out)
{
	struct shmfab_conn *c = (struct shmfab_conn *)conn;
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = shmfab_reg_locked(c, addr, len, access, out);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static void shmfab_dereg(struct rdmem_conn *conn, struct rdmem_mr *mr)
{
	struct shmfab_conn *c = (struct shmfab_conn *)conn;
	uintptr_t at = (uintptr_t)mr->impl, base = (uintptr_t)c->mr;
	struct shmfab_mr *m = mr->impl;

	pthread_mutex_lock(&c->lock);
	if (at < base || at >= base + sizeof(c->mr) || (at - base) % sizeof(*m) || !m->in_use ||
	    m->lkey != mr->lkey) {
		pthread_mutex_unlock(&c->lock);
		rdmem_err("shm: deregistration of an unknown registration (%s)", c->name);
		return;
	}
	/* relaxed: revocation publishes nothing; a peer copy already past its
	 * check may still land, as an RDMA op in flight may with a NIC. */
	if (m->exported)
		atomic_store_explicit(&c->page->live[SHMFAB_KEY_IDX(m->rkey)], 0,
				      memory_order_relaxed);
	shmfab_closefd(m->fd);
	memset(m, 0, sizeof(*m));
	m->fd = -1;
	pthread_mutex_unlock(&c->lock);
	memset(mr, 0, sizeof(*mr));
}

/* ---- send path ---- */

static const char *shmfab_op_name(unsigned op)
{
	return op == RDMEM_WR_WRITE	  ? "WRITE"
	       : op == RDMEM_WR_WRITE_IMM ? "WRITE_IMM"
	       : op == RDMEM_WR_READ	  ? "READ"
					  : "?";
}

__attribute__((format(printf, 4, 5))) static unsigned shmfab_wr_fail(struct shmfab_conn *c,
								     const struct rdmem_wr *wr,
								     unsigned status,
								     const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	rdmem_err("shm: %s wr_id %llu on the connection to %s: %s: %s; connection broken",
		  shmfab_op_name(wr->op), (unsigned long long)wr->wr_id, c->name, why,
		  rdmem_wc_status_name(status));
	return status;
}

static uint64_t shmfab_wr_len(const struct rdmem_wr *wr)
{
	uint64_t total = 0;

	for (int i = 0; i < wr->nsge; i++)
		total += wr->sge[i].len;
	return total;
}

/* Structure errors fail the whole post, as ibv_post_send() does. */
static int shmfab_wr_valid(struct shmfab_conn *c, const struct rdmem_wr *wr)
{
	const unsigned flags = RDMEM_WR_SIGNALED | RDMEM_WR_INLINE;
	const char *why = NULL;

	if (wr->op < RDMEM_WR_WRITE || wr->op > RDMEM_WR_READ)
		why = "unknown op";
	else if (wr->nsge > RDMEM_FAB_MAX_SGE)
		why = "too many SGEs";
	else if (wr->flags & ~flags)
		why = "unknown flags";
	else if ((wr->flags & RDMEM_WR_INLINE) && wr->op == RDMEM_WR_READ)
		why = "inline only for writes";
	if (!why)
		return 0;
	rdmem_err("shm: post of %s wr_id %llu (op %u, %u SGEs, flags 0x%x) to %s: %s",
		  shmfab_op_name(wr->op), (unsigned long long)wr->wr_id, wr->op, wr->nsge,
		  wr->flags, c->name, why);
	return -EINVAL;
}

static unsigned shmfab_check_local(struct shmfab_conn *c, const struct rdmem_wr *wr)
{
	/* Inline data is copied from wherever it lies, without an lkey. */
	if ((wr->flags & RDMEM_WR_INLINE) && wr->op != RDMEM_WR_READ)
		return RDMEM_WC_SUCCESS;
	for (int i = 0; i < wr->nsge; i++) {
		const struct rdmem_sge *s = &wr->sge[i];
		const struct shmfab_mr *m = &c->mr[SHMFAB_KEY_IDX(s->lkey)];
		uint64_t off = s->addr - (uintptr_t)m->addr;

		if (!m->in_use || m->lkey != s->lkey)
			return shmfab_wr_fail(c, wr, RDMEM_WC_LOC_PROT_ERR,
					      "SGE %d: lkey 0x%x unknown", i, s->lkey);
		if (s->addr < (uintptr_t)m->addr || off > m->len || s->len > m->len - off)
			return shmfab_wr_fail(c, wr, RDMEM_WC_LOC_PROT_ERR,
					      "SGE %d: 0x%llx+%u outside its registration "
					      "%p+%llu",
					      i, (unsigned long long)s->addr, s->len,
					      (void *)m->addr, (unsigned long long)m->len);
	}
	return RDMEM_WC_SUCCESS;
}

/* The responder's checks: rkey known and still registered, right granted,
 * range inside (overflow-safe). Sets *dst to the range in our mapping. */
static unsigned shmfab_check_remote(struct shmfab_conn *c, const struct rdmem_wr *wr,
				    uint64_t total, uint8_t **dst)
{
	unsigned need =
	    wr->op == RDMEM_WR_READ ? RDMEM_ACCESS_REMOTE_READ : RDMEM_ACCESS_REMOTE_WRITE;
	unsigned pos = c->rmr_pos[SHMFAB_KEY_IDX(wr->rkey)];
	const struct shmfab_rmr *r = pos ? &c->rmr[pos - 1] : NULL;
	uint64_t off;

	/* relaxed: see the revocation store in shmfab_dereg(). */
	if (!r || r->rkey != wr->rkey ||
	    atomic_load_explicit(&c->peer_page->live[SHMFAB_KEY_IDX(wr->rkey)],
				 memory_order_relaxed) != wr->rkey)
		return shmfab_wr_fail(c, wr, RDMEM_WC_REM_ACCESS_ERR, "rkey 0x%x unknown",
				      wr->rkey);
	if (!(r->access & need))
		return shmfab_wr_fail(c, wr, RDMEM_WC_REM_ACCESS_ERR,
				      "rkey 0x%x grants no remote %s", wr->rkey,
				      need == RDMEM_ACCESS_REMOTE_READ ? "read" : "write");
	off = wr->remote_addr - r->addr;
	if (wr->remote_addr < r->addr || off > r->len || total > r->len - off)
		return shmfab_wr_fail(c, wr, RDMEM_WC_REM_ACCESS_ERR,
				      "0x%llx+%llu outside rkey 0x%x's region 0x%llx+%llu",
				      (unsigned long long)wr->remote_addr,
				      (unsigned long long)total, wr->rkey,
				      (unsigned long long)r->addr, (unsigned long long)r->len);
	*dst = r->base + off;
	return RDMEM_WC_SUCCESS;
}

static void shmfab_gather(const struct rdmem_wr *wr, uint8_t *dst)
{
	for (int i = 0; i < wr->nsge; i++) {
		memcpy(dst, (const void *)(uintptr_t)wr->sge[i].addr, wr->sge[i].len);
		dst += wr->sge[i].len;
	}
}

static void shmfab_scatter(const struct rdmem_wr *wr, const uint8_t *src)
{
	for (int i = 0; i < wr->nsge; i++) {
		memcpy((void *)(uintptr_t)wr->sge[i].addr, src, wr->sge[i].len);
		src += wr->sge[i].len;
	}
}

/*
 * The data plane's receivers act on the immediate, which shmfab_queue_imm()
 * publishes with a release store after every copy: that is what makes a
 * message visible. A 4- or 8-byte naturally aligned write is one release
 * store as well, so a peer polling such a word (a NIC gives that for an
 * aligned 8-byte WRITE in practice) sees every earlier WR's copy first.
 * Larger copies cannot be atomic; the release fence ahead of them keeps
 * them after the stores and loads of earlier WRs, as a NIC executes WRITEs
 * of one QP in order.
 */
static void shmfab_copy_write(const struct rdmem_wr *wr, uint8_t *dst, uint64_t total)
{
	uint8_t tmp[8];

	if (total == 8 && ((uintptr_t)dst & 7) == 0) {
		uint64_t v;

		shmfab_gather(wr, tmp);
		memcpy(&v, tmp, sizeof(v));
		atomic_store_explicit((_Atomic uint64_t *)(void *)dst, v, memory_order_release);
	} else if (total == 4 && ((uintptr_t)dst & 3) == 0) {
		uint32_t v;

		shmfab_gather(wr, tmp);
		memcpy(&v, tmp, sizeof(v));
		atomic_store_explicit((_Atomic uint32_t *)(void *)dst, v, memory_order_release);
	} else {
		atomic_thread_fence(memory_order_release);
		shmfab_gather(wr, dst);
	}
}

/*
 * A READ reads what the peer published before the message that told the
 * caller to read: the acquire (load of a 4/8-byte word, or fence ahead of a
 * larger copy) keeps the copy after the caller's earlier loads - the
 * immediate (or a polled word) - so it sees everything published before.
 */
static void shmfab_copy_read(const struct rdmem_wr *wr, const uint8_t *src, uint64_t total)
{
	uint8_t tmp[8];

	if (total == 8 && ((uintptr_t)src & 7) == 0) {
		uint64_t v =
		    atomic_load_explicit((_Atomic uint64_t *)(void *)src, memory_order_acquire);

		memcpy(tmp, &v, sizeof(v));
		shmfab_scatter(wr, tmp);
	} else if (total == 4 && ((uintptr_t)src & 3) == 0) {
		uint32_t v =
		    atomic_load_explicit((_Atomic uint32_t *)(void *)src, memory_order_acquire);

		memcpy(tmp, &v, sizeof(v));
		shmfab_scatter(wr, tmp);
	} else {
		atomic_thread_fence(memory_order_acquire);
		shmfab_scatter(wr, src);
	}
}

static int shmfab_has_credit(struct shmfab_conn *c)
{
	/* acquire: pairs with the release store of posted in shmfab_post_recv(),
	 * so the peer finished reading the ring slot this credit frees before we
	 * overwrite it. A hostile count only lets us write its own ring. */
	uint64_t posted = atomic_load_explicit(&c->peer_page->posted, memory_order_acquire);

	return (int64_t)(posted - c->produced) > 0;
}

static void shmfab_queue_imm(struct shmfab_conn *c, uint32_t imm)
{
	struct shmfab_page *pp = c->peer_page;

	/* relaxed: published by the release store of produced just below. */
	atomic_store_explicit(&pp->ring[c->produced & (c->peer_rq_cap - 1)], imm,
			      memory_order_relaxed);
	c->produced++;
	/* release: pairs with the acquire load in the peer's shmfab_rq_produced();
	 * publishes the ring entry and this WR's data copy. */
	atomic_store_explicit(&pp->produced, c->produced, memory_order_release);
	/*
	 * Dekker with shmfab_arm(): we store produced then read armed, the
	 * receiver stores armed then reads produced. The seq_cst fences on both
	 * sides forbid both reading the old value, so either the receiver's
	 * "poll once more" sees this immediate or we see armed and ring.
	 */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&pp->armed, memory_order_relaxed) &&
	    atomic_exchange_explicit(&pp->armed, 0, memory_order_relaxed))
		shmfab_ring(c->peer_bell, "the peer's", c->name);
}

static unsigned shmfab_exec(struct shmfab_conn *c, const struct rdmem_wr *wr)
{
	uint64_t total = shmfab_wr_len(wr);
	uint8_t *remote = NULL;
	unsigned st;

	st = shmfab_check_local(c, wr);
	if (st)
		return st;
	if (total) {
		st = shmfab_check_remote(c, wr, total, &remote);
		if (st)
			return st;
	}
	if (wr->op == RDMEM_WR_WRITE_IMM && !shmfab_has_credit(c))
		return shmfab_wr_fail(c, wr, RDMEM_WC_RNR_ERR, "the peer posted no receive");
	if (wr->op == RDMEM_WR_READ)
		shmfab_copy_read(wr, remote, total);
	else if (total)
		shmfab_copy_write(wr, remote, total);
	if (wr->op == RDMEM_WR_WRITE_IMM)
		shmfab_queue_imm(c, wr->imm);
	return RDMEM_WC_SUCCESS;
}

static void shmfab_cq_push(struct shmfab_conn *c, const struct rdmem_wr *wr, uint64_t seq,
			   unsigned status, int hidden)
{
	struct shmfab_cqe *e = &c->cq[c->cq_tail++ & c->cq_mask];

	e->wc = (struct rdmem_wc){ .wr_id = wr->wr_id,
				   .status = (uint8_t)status,
				   .op = wr->op == RDMEM_WR_READ ? RDMEM_WC_READ : RDMEM_WC_WRITE };
	e->seq = seq;
	e->hidden = (uint8_t)hidden;
	c->unsig_run = 0;
}

/* Runs one WR to completion; returns 1 when it produced a visible CQE. */
static int shmfab_run(struct shmfab_conn *c, const struct rdmem_wr *wr)
{
	uint64_t seq = c->sq_posted++;
	unsigned st = c->broken ? RDMEM_WC_FLUSH_ERR : shmfab_exec(c, wr);

	if (st != RDMEM_WC_SUCCESS) {
		shmfab_break(c);
		shmfab_cq_push(c, wr, seq, st, 0);
		return 1;
	}
	if (wr->flags & RDMEM_WR_SIGNALED) {
		shmfab_cq_push(c, wr, seq, st, 0);
		return 1;
	}
	if (++c->unsig_run >= c->signal_every)
		shmfab_cq_push(c, wr, seq, st, 1);
	return 0;
}

/* Test-only: holds a WR to run later; inline data is copied now. */
static void shmfab_defer(struct shmfab_conn *c, const struct rdmem_wr *wr, uint64_t now)
{
	struct shmfab_deferred *d = &c->dq[(c->dq_head + c->dq_n++) % c->max_send];
	uint64_t total = shmfab_wr_len(wr);

	d->wr = *wr;
	d->due_ns = now + c->test_delay_ns;
	if ((wr->flags & RDMEM_WR_INLINE) && wr->op != RDMEM_WR_READ &&
	    total <= SHMFAB_MAX_INLINE) {
		shmfab_gather(wr, d->inl);
		d->wr.nsge = total ? 1 : 0;
		d->wr.sge[0] = (struct rdmem_sge){ (uintptr_t)d->inl, (uint32_t)total, 0 };
	}
}

/* Test-only: runs the held WRs that are due, in order; 1 if one showed a CQE. */
static int shmfab_run_due(struct shmfab_conn *c)
{
	uint64_t now = rdmem_now_ns();
	int shown = 0;

	if (!c->dq_n || shmfab_test_holed(c))
		return 0;
	while (c->dq_n && c->dq[c->dq_head].due_ns <= now) {
		shown |= shmfab_run(c, &c->dq[c->dq_head].wr);
		c->dq_head = (c->dq_head + 1) % c->max_send;
		c->dq_n--;
	}
	return shown;
}

static int shmfab_post_locked(struct shmfab_conn *c, const struct rdmem_wr *wrs, int n)
{
	int shown = 0;

	if (c->state != SHMFAB_CONNECTED) {
		rdmem_err("shm: post to %s before the connection is established", c->name);
		return -ENOTCONN;
	}
	for (int i = 0; i < n; i++) {
		int rc = shmfab_wr_valid(c, &wrs[i]);

		if (rc)
			return rc;
	}
	/* As an RC QP in the error state: nothing more is accepted. */
	shmfab_peer_broke(c);
	if (c->broken)
		return -ECONNRESET;
	if (c->sq_posted - c->sq_retired + c->dq_n + (uint64_t)n > c->max_send)
		return -EAGAIN;
	if (c->dq) {
		uint64_t now = rdmem_now_ns();

		for (int i = 0; i < n; i++)
			shmfab_defer(c, &wrs[i], now);
		shown = shmfab_run_due(c);
	}
	for (int i = 0; !c->dq && i < n; i++)
		shown |= shmfab_run(c, &wrs[i]);
	if (shown && c->armed_local) {
		c->armed_local = 0;
		shmfab_ring(c->bell_tx, "our", c->name);
	}
	return 0;
}

static int shmfab_post(struct rdmem_conn *conn, const struct rdmem_wr *wrs, int n)
{
	struct shmfab_conn *c = (struct shmfab_conn *)conn;
	int rc;

	if (n < 0 || (n && !wrs))
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	rc = shmfab_post_locked(c, wrs, n);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Every WR ran as a copy when it was posted: once broken, nothing of ours
 * can land later, which is what the QP's move to error and flush give. */
static void shmfab_shutdown(struct rdmem_conn *conn)
{
	struct shmfab_conn *c = (struct shmfab_conn *)conn;

	pthread_mutex_lock(&c->lock);
	if (c->state == SHMFAB_CONNECTED)
		shmfab_break(c);
	pthread_mutex_unlock(&c->lock);
}

/* ---- receive path and completions ---- */

static int shmfab_post_recv(struct rdmem_conn *conn, int n)
{
	struct shmfab_conn *c = (struct shmfab_conn *)conn;
	int rc = 0;

	if (n <= 0)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if (c->rq_posted - c->rq_consumed + (uint64_t)n > c->max_recv) {
		rc = -EAGAIN;
	} else {
		c->rq_posted += (uint64_t)n;
		/* release: pairs with the acquire in the peer's shmfab_has_credit();
		 * our reads of the ring slots these credits free come first. */
		atomic_store_explicit(&c->page->posted, c->rq_posted, memory_order_release);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static int shmfab_poll_send(struct shmfab_conn *c, struct rdmem_wc *wc, int max)
{
	int n = 0;

	/* Hidden entries retire slots even when the caller's array is full. */
	while (c->cq_head != c->cq_tail) {
		struct shmfab_cqe *e = &c->cq[c->cq_head & c->cq_mask];

		if (!e->hidden && n == max)
			break;
		c->cq_head++;
		c->sq_retired = e->seq + 1;
		if (!e->hidden)
			wc[n++] = e->wc;
	}
	return n;
}

static int shmfab_poll_recv(struct shmfab_conn *c, struct rdmem_wc *wc, int max)
{
	uint64_t limit;
	int n = 0;

	if (shmfab_test_holed(c))
		return 0; /* test black hole: nothing arrives */
	shmfab_peer_broke(c);
	if (c->broken) {
		limit = c->rq_frozen;
	} else if (shmfab_rq_produced(c, &limit)) {
		rdmem_err("shm: %s queued immediates beyond the receives we posted; "
			  "connection broken",
			  c->name);
		shmfab_break(c);
		limit = c->rq_frozen;
	}
	for (; n < max && c->rq_consumed < limit; n++, c->rq_consumed++) {
		/* relaxed: ordered by the acquire load of produced. */
		uint32_t imm = atomic_load_explicit(
		    &c->page->ring[c->rq_consumed & (c->rq_cap - 1)], memory_order_relaxed);

		wc[n] = (struct rdmem_wc){ .imm = imm, .op = RDMEM_WC_RECV_IMM };
	}
	for (; c->broken && n < max && c->rq_consumed < c->rq_posted; n++, c->rq_consumed++)
		wc[n] = (struct rdmem_wc){ .status = RDMEM_WC_FLUSH_ERR, .op = RDMEM_WC_RECV_IMM };
	return n;
}

static int shmfab_poll(struct rdmem_conn *conn, struct rdmem_wc *wc, int max)
{
	struct shmfab_conn *c = (struct shmfab_conn *)conn;
	int n;

	if (max < 0 || (max && !wc))
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if (c->dq)
		shmfab_run_due(c);
	n = shmfab_poll_send(c, wc, max);
	if (n < max)
		n += shmfab_poll_recv(c, wc + n, max - n);
	pthread_mutex_unlock(&c->lock);
	return n;
}

static int shmfab_arm(struct rdmem_conn *conn)
{
	struct shmfab_conn *c = (struct shmfab_conn *)conn;

	pthread_mutex_lock(&c->lock);
	c->armed_local = 1;
	atomic_store_explicit(&c->page->armed, 1, memory_order_relaxed);
	/* seq_cst: the receiver's half of the Dekker in shmfab_queue_imm(); the
	 * caller's next poll loads produced after this fence. */
	atomic_thread_fence(memory_order_seq_cst);
	/* A broken connection has flushes to report and no sender to ring. */
	if (c->broken)
		shmfab_ring(c->bell_tx, "our", c->name);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static int shmfab_comp_fd(struct rdmem_conn *conn)
{
	return ((struct shmfab_conn *)conn)->bell_rx;
}

#define SHMFAB_ACK_MAX 64

static void shmfab_ack(struct rdmem_conn *conn)
{
	struct shmfab_conn *c = (struct shmfab_conn *)conn;
	/* No buffers: a ring's byte means nothing, only that it came. The
	 * kernel writes only msg_len, msg_flags and msg_controllen (0) back,
	 * so the zeroed array stays reusable without clearing. */
	static _Thread_local struct mmsghdr rings[SHMFAB_ACK_MAX];

	/* Every ring queued in one syscall (one recv each, and one more to
	 * see EAGAIN, cost a wake-up two or more). Bounded: a peer flooding
	 * rings leaves the bell readable, not us stuck. */
	if (recvmmsg(c->bell_rx, rings, SHMFAB_ACK_MAX, MSG_DONTWAIT, NULL) < 0 &&
	    errno != EAGAIN && errno != EINTR)
		rdmem_warn("shm: reading our doorbell (%s): %s", c->name, strerror(errno));
}

/* Copies have no depth limit; report what an RC NIC typically agrees on, so
 * callers run the same READ accounting here as over verbs. */
static uint32_t shmfab_max_reads(struct rdmem_conn *conn)
{
	(void)conn;
	return SHMFAB_MAX_READS;
}

static void shmfab_queue_caps(struct rdmem_conn *conn, uint32_t *max_send, uint32_t *max_recv)
{
	const struct shmfab_conn *c = (const struct shmfab_conn *)conn;

	*max_send = c->max_send;
	*max_recv = c->max_recv;
}

static uint32_t shmfab_max_inline(struct rdmem_conn *conn)
{
	(void)conn;
	return SHMFAB_MAX_INLINE;
}

static uint32_t shmfab_max_send_sge(struct rdmem_conn *conn)
{
	(void)conn;
	return RDMEM_FAB_MAX_SGE;
}

const struct rdmem_fab_ops rdmem_fab_shm_ops = {
	.name = "shm",
	.listen = shmfab_listen,
	.listener_fd = shmfab_listener_fd,
	.get_request = shmfab_get_request,
	.accept = shmfab_accept,
	.reject = shmfab_reject,
	.listener_close = shmfab_listener_close,
	.resolve = shmfab_resolve,
	.connect = shmfab_connect,
	.alloc = shmfab_alloc,
	.free = shmfab_free,
	.alloc_shared = shmfab_alloc_shared,
	.free_shared = shmfab_free_shared,
	.reg = shmfab_reg,
	.dereg = shmfab_dereg,
	.post = shmfab_post,
	.post_recv = shmfab_post_recv,
	.poll = shmfab_poll,
	.arm = shmfab_arm,
	.comp_fd = shmfab_comp_fd,
	.ack = shmfab_ack,
	.event_fd = shmfab_event_fd,
	.check = shmfab_check,
	.max_inline = shmfab_max_inline,
	.max_send_sge = shmfab_max_send_sge,
	.max_reads = shmfab_max_reads,
	.queue_caps = shmfab_queue_caps,
	.peer = shmfab_peer,
	.shutdown = shmfab_shutdown,
	.close = shmfab_close,
};
