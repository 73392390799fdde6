/* fabric_pair.h - in-process pairs of shm fabric connections for the fabric
 * tests (test_fabric_shm, test_fabric_shm_forged): one end per thread, three
 * memfd areas of least access on each, and the counts of fds and memfd
 * mappings a test compares before and after.
 */
#ifndef RDMEM_TESTS_FABRIC_PAIR_H
#define RDMEM_TESTS_FABRIC_PAIR_H

/* Also when a sanitizer build replaces CFLAGS (and -D_GNU_SOURCE with it). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fabric/emu.h"
#include "rdmem/fabric.h"
#include "rdmem/pctl.h"
#include "rdmem/util.h"
#include "tests/check.h"
#include "tests/e2e.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* REQUIRE() evaluates its condition twice; this runs expr once. */
#define T_OK(expr)                                                                                 \
	do {                                                                                       \
		long long t_rc_ = (long long)(expr);                                               \
		if (t_rc_ != 0) {                                                                  \
			check_case_failed = 1;                                                     \
			fprintf(stderr, "  %s:%d: %s returned %lld\n", __FILE__, __LINE__, #expr,  \
				t_rc_);                                                            \
			return;                                                                    \
		}                                                                                  \
	} while (0)

#define T_AREA	  (1u << 20)
#define T_TIMEOUT 3000 /* ms for anything that should take microseconds */
#define T_REPLY	  0x80000000u
#define T_STOP	  0x7fffffffu

enum { T_RW, T_RO, T_WO, T_NAREA };

/* One end: three memfd areas of least access (each an allocation of its
 * own, as fabric.h asks), a local-only buffer, and the peer's areas as
 * learnt from its private data. */
struct t_side {
	struct rdmem_conn *c;
	uint8_t *area[T_NAREA];
	struct rdmem_mr mr[T_NAREA];
	uint8_t *local;
	struct rdmem_mr lmr;
	struct rdmem_remote peer[T_NAREA];
};

struct t_srv {
	struct rdmem_listener *l;
	struct rdmem_fab_attr attr;
	int recvs;
	const char *reject;
	struct t_side s;
	int rc;
	pthread_t th;
};

struct t_pair {
	struct rdmem_listener *l;
	uint16_t port;
	struct t_srv srv;
	struct t_side cli;
};

static uint16_t t_port_next;

static inline struct rdmem_listener *t_listen(uint16_t *port)
{
	struct rdmem_listener *l = NULL;

	if (!t_port_next)
		t_port_next = (uint16_t)(20000 + (getpid() % 4000) * 8);
	for (int i = 0; i < 64; i++) {
		*port = t_port_next++;
		if (rdmem_fab_listen(RDMEM_FAB_SHM, "0.0.0.0", *port, &l) == 0)
			return l;
	}
	return NULL;
}

static inline int t_side_regs(struct t_side *s)
{
	static const unsigned acc[T_NAREA] = {
		RDMEM_ACCESS_REMOTE_WRITE | RDMEM_ACCESS_REMOTE_READ,
		RDMEM_ACCESS_REMOTE_READ,
		RDMEM_ACCESS_REMOTE_WRITE,
	};
	int rc;

	for (int i = 0; i < T_NAREA; i++) {
		s->area[i] = rdmem_fab_alloc(s->c, T_AREA);
		if (!s->area[i])
			return -ENOMEM;
		rc = rdmem_fab_reg(s->c, s->area[i], T_AREA, acc[i], &s->mr[i]);
		if (rc)
			return rc;
	}
	s->local = aligned_alloc(4096, T_AREA);
	if (!s->local)
		return -ENOMEM;
	memset(s->local, 0, T_AREA);
	return rdmem_fab_reg(s->c, s->local, T_AREA, RDMEM_ACCESS_LOCAL, &s->lmr);
}

static inline void t_side_priv(const struct t_side *s, struct rdmem_remote *out)
{
	for (int i = 0; i < T_NAREA; i++)
		out[i] = (struct rdmem_remote){ (uintptr_t)s->mr[i].addr, s->mr[i].rkey, T_AREA };
}

static inline void t_side_close(struct t_side *s)
{
	if (s->c) {
		for (int i = 0; i < T_NAREA; i++)
			rdmem_fab_dereg(s->c, &s->mr[i]);
		rdmem_fab_dereg(s->c, &s->lmr);
		for (int i = 0; i < T_NAREA; i++)
			if (s->area[i])
				rdmem_fab_free(s->c, s->area[i], T_AREA);
		rdmem_fab_close(s->c);
	}
	free(s->local);
	memset(s, 0, sizeof(*s));
}

static inline int t_get_request(struct rdmem_listener *l, const struct rdmem_fab_attr *attr,
				struct rdmem_conn **c, void *priv, size_t *plen)
{
	struct pollfd p = { .fd = rdmem_fab_listener_fd(l), .events = POLLIN };

	for (int i = 0; i < 100; i++) {
		int rc;

		if (poll(&p, 1, T_TIMEOUT) <= 0)
			return -ETIMEDOUT;
		rc = rdmem_fab_get_request(l, attr, c, priv, plen);
		if (rc != -EAGAIN)
			return rc;
	}
	return -ETIMEDOUT;
}

/* The server half: request, regions, receives, accept (or reject). */
static inline void *t_srv_main(void *arg)
{
	struct t_srv *v = arg;
	struct rdmem_remote mine[T_NAREA];
	size_t plen = sizeof(v->s.peer);

	v->rc = t_get_request(v->l, &v->attr, &v->s.c, v->s.peer, &plen);
	if (v->rc)
		return NULL;
	if (v->reject) {
		rdmem_fab_reject(v->s.c, v->reject, strlen(v->reject) + 1);
		v->s.c = NULL;
		return NULL;
	}
	v->rc = plen == sizeof(v->s.peer) ? t_side_regs(&v->s) : -EPROTO;
	if (!v->rc && v->recvs)
		v->rc = rdmem_fab_post_recv(v->s.c, v->recvs);
	t_side_priv(&v->s, mine);
	if (!v->rc)
		v->rc = rdmem_fab_accept(v->s.c, mine, sizeof(mine));
	return NULL;
}

static inline int t_client(struct t_pair *p, const struct rdmem_fab_attr *attr, int recvs,
			   void *reason, size_t *reason_len)
{
	struct rdmem_remote mine[T_NAREA];
	size_t plen = sizeof(p->cli.peer);
	int rc;

	rc = rdmem_fab_resolve(RDMEM_FAB_SHM, "127.0.0.1", p->port, attr, T_TIMEOUT, &p->cli.c);
	if (!rc)
		rc = t_side_regs(&p->cli);
	if (!rc && recvs)
		rc = rdmem_fab_post_recv(p->cli.c, recvs);
	t_side_priv(&p->cli, mine);
	if (!rc)
		rc = rdmem_fab_connect(p->cli.c, mine, sizeof(mine), reason ? reason : p->cli.peer,
				       reason ? reason_len : &plen, T_TIMEOUT);
	if (!rc && plen != sizeof(p->cli.peer))
		rc = -EPROTO;
	return rc;
}

/* Connects a client to a server thread on p->l; the client's rc. */
static inline int t_connect(struct t_pair *p, const struct rdmem_fab_attr *attr, int srv_recvs,
			    int cli_recvs, const char *reject, void *reason, size_t *reason_len)
{
	int rc;

	p->srv.l = p->l;
	p->srv.attr = attr ? *attr : (struct rdmem_fab_attr){ 0 };
	p->srv.recvs = srv_recvs;
	p->srv.reject = reject;
	if (pthread_create(&p->srv.th, NULL, t_srv_main, &p->srv))
		return -EAGAIN;
	rc = t_client(p, attr, cli_recvs, reason, reason_len);
	pthread_join(p->srv.th, NULL);
	return rc;
}

static inline int t_pair_open(struct t_pair *p, const struct rdmem_fab_attr *attr, int srv_recvs,
			      int cli_recvs)
{
	int rc;

	memset(p, 0, sizeof(*p));
	p->l = t_listen(&p->port);
	if (!p->l)
		return -EADDRINUSE;
	rc = t_connect(p, attr, srv_recvs, cli_recvs, NULL, NULL, NULL);
	return rc ? rc : p->srv.rc;
}

static inline void t_pair_close(struct t_pair *p)
{
	t_side_close(&p->cli);
	t_side_close(&p->srv.s);
	rdmem_fab_listener_close(p->l);
	p->l = NULL;
}

static inline struct rdmem_wr t_wr(uint64_t id, int op, int flags, const struct rdmem_remote *r,
				   uint64_t off)
{
	return (struct rdmem_wr){ .wr_id = id,
				  .op = (uint8_t)op,
				  .flags = (uint8_t)flags,
				  .remote_addr = r->addr + off,
				  .rkey = r->rkey };
}

static inline void t_sge(struct rdmem_wr *w, const void *addr, uint32_t len, uint32_t lkey)
{
	w->sge[w->nsge++] = (struct rdmem_sge){ (uintptr_t)addr, len, lkey };
}

/* Busy-polls until want completions arrived or the timeout. */
static inline int t_poll(struct rdmem_conn *c, struct rdmem_wc *wc, int want)
{
	uint64_t end = rdmem_now_ns() + T_TIMEOUT * 1000000ull;
	int n = 0;

	while (n < want) {
		int r = rdmem_fab_poll(c, wc + n, want - n);

		if (r < 0)
			return r;
		n += r;
		if (n < want && rdmem_now_ns() > end)
			break;
		if (n < want)
			sched_yield();
	}
	return n;
}

/* Waits as an idle actor does, without spinning: poll, arm, poll once more,
 * sleep on comp_fd. -ETIMEDOUT would be a lost wake-up. */
static inline int t_wait(struct rdmem_conn *c, struct rdmem_wc *wc, int max, int *sleeps)
{
	struct pollfd pf = { .fd = rdmem_fab_comp_fd(c), .events = POLLIN };

	for (;;) {
		int n = rdmem_fab_poll(c, wc, max);

		if (n)
			return n;
		if (rdmem_fab_arm(c))
			return -EIO;
		n = rdmem_fab_poll(c, wc, max);
		if (n)
			return n;
		if (sleeps)
			(*sleeps)++;
		n = poll(&pf, 1, 5000);
		if (n == 0)
			return -ETIMEDOUT;
		if (n < 0 && errno != EINTR)
			return -errno;
		rdmem_fab_ack(c);
	}
}

static inline int t_readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, timeout_ms) == 1;
}

/* Mappings of memfds: all the backend maps (a sanitizer's allocator adds
 * anonymous ones of its own). */
static inline int t_count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "/memfd:") != NULL;
	fclose(f);
	return n;
}

#endif
