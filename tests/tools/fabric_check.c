/* fabric_check.c - conformance check of a fabric backend (verbs or shm) over
 * the public interface in rdmem/fabric.h, run as a server and a client.
 *
 *   fabric_check --fabric verbs|shm server ADDR PORT [options]
 *   fabric_check --fabric verbs|shm client ADDR PORT [options]
 *     --iters N     WRITE/READ iterations (default 200)
 *     --cycles N    connect/disconnect cycles (default 100)
 *     --src ADDR    client: local address to connect from (picks the device)
 *     --timeout S   limit for every wait, in seconds (default 30)
 *     --break read-before-exchange
 *                   client: post the READs with rkey 0 and address 0, as if
 *                   the peer's region were not known yet; the check must fail
 *     -v            debug logging
 *
 * The server registers a remote-write region W and a remote-read region R
 * (filled with a seeded pattern) and sends {addr, rkey, len} of both in the
 * accept private data; the client sends its own reply region in the connect
 * private data. The client then checks: multi-SGE WRITE (the server verifies
 * every byte and answers with a WRITE WITH IMM), immediates in order, READ
 * (the client verifies every byte), a ping-pong, private data limits and a
 * refused request, access violations (write to R, write past W's end) that
 * must complete with a remote access error and break the connection, N
 * connect/disconnect cycles without fd growth on either side, and (verbs)
 * that a low memlock limit gives an error naming `ulimit -l`.
 * Output: one "ok - " / "not ok - " line per case; exit status 1 on failure.
 * The ping-pong figure is a '#' comment: on Soft-RoCE in a VM it is no
 * performance figure.
 */
#include "rdmem/fabric.h"
#include "rdmem/pctl.h"
#include "rdmem/util.h"
#include "tests/check.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define FC_MAGIC       0x314b4346u /* "FCK1" */
#define FC_VERSION     1
#define FC_HELLO_LEN   28
#define FC_WELCOME_LEN 44
#define FC_REGION      (64u * 1024)
#define FC_LOCAL       4096u
#define FC_IMMQ	       1024
#define FC_RECV_DEPTH  128
#define FC_SEQ_IMMS    64
#define FC_PINGS       200
#define FC_CHAIN       8

enum fc_mode { FC_MAIN = 1, FC_VIOLATION, FC_CYCLE, FC_QUIT, FC_MODE_MAX = FC_QUIT };
/* immediate = cmd << 24 | 24-bit argument */
enum fc_cmd { FC_CHECK_WRITE = 1, FC_IMM_SEQ, FC_IMM_END, FC_PING, FC_RESULT, FC_PONG };

struct fc_region {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

struct fc_hello {
	uint8_t mode;
	uint8_t version;
	uint32_t seed;
	struct fc_region reply; /* the client's remote-write region */
};

struct fc_welcome {
	uint32_t seed; /* pattern of the read region */
	struct fc_region w, r;
};

/* One connection and what its completions told us. */
struct fc_peer {
	struct rdmem_conn *c;
	uint32_t imms[FC_IMMQ];
	unsigned ih, it;
	uint64_t next_wr, done_wr;
	int errors;
	uint8_t err_status;
	uint64_t err_wr;
};

static struct {
	enum rdmem_fab_kind kind;
	const char *addr, *src, *brk;
	uint16_t port;
	unsigned iters, cycles, timeout_s;
} opt = { .iters = 200, .cycles = 100, .timeout_s = 30 };

static struct rdmem_fab_attr fc_attr(void)
{
	return (struct rdmem_fab_attr){ .max_send_wr = 64,
					.max_recv_wr = FC_RECV_DEPTH,
					.max_inline = 64,
					.signal_every = 16,
					.src_addr = opt.src };
}

static uint64_t fc_deadline(void)
{
	return rdmem_now_ns() + (uint64_t)opt.timeout_s * 1000000000ull;
}

static uint8_t fc_byte(uint32_t seed, uint64_t i)
{
	uint32_t x = seed + (uint32_t)i * 0x9e3779b1u;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	return (uint8_t)(x >> 24);
}

static uint64_t fc_word(uint32_t seed, uint64_t k)
{
	uint64_t v = 0;

	for (int b = 0; b < 8; b++)
		v = v << 8 | fc_byte(seed ^ 0x5bd1e995u, k * 8 + (uint64_t)b);
	return v;
}

static int fc_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ".", ".." and the directory's own fd */
}

/* ---- wire encoding of the private data (little-endian, fixed width) ---- */

static void fc_put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void fc_put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static uint32_t fc_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint64_t fc_get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static void fc_put_region(uint8_t *p, const struct fc_region *r)
{
	fc_put64(p, r->addr);
	fc_put32(p + 8, r->rkey);
	fc_put32(p + 12, r->len);
}

static void fc_get_region(const uint8_t *p, struct fc_region *r)
{
	r->addr = fc_get64(p);
	r->rkey = fc_get32(p + 8);
	r->len = fc_get32(p + 12);
}

static void fc_hello_encode(const struct fc_hello *h, uint8_t *b)
{
	memset(b, 0, FC_HELLO_LEN);
	fc_put32(b, FC_MAGIC);
	b[4] = h->version;
	b[5] = h->mode;
	fc_put32(b + 8, h->seed);
	fc_put_region(b + 12, &h->reply);
}

/* Returns NULL when valid, else why not. */
static const char *fc_hello_decode(const uint8_t *b, size_t len, struct fc_hello *h)
{
	if (len != FC_HELLO_LEN || fc_get32(b) != FC_MAGIC)
		return "fabric_check: malformed hello";
	if (b[4] != FC_VERSION)
		return "fabric_check: unsupported hello version";
	h->version = b[4];
	h->mode = b[5];
	h->seed = fc_get32(b + 8);
	fc_get_region(b + 12, &h->reply);
	if (h->mode < FC_MAIN || h->mode > FC_MODE_MAX)
		return "fabric_check: unknown mode";
	if ((h->mode == FC_MAIN || h->mode == FC_CYCLE) && h->reply.len < FC_LOCAL)
		return "fabric_check: reply region too small";
	return NULL;
}

static void fc_welcome_encode(const struct fc_welcome *w, uint8_t *b)
{
	memset(b, 0, FC_WELCOME_LEN);
	fc_put32(b, FC_MAGIC);
	b[4] = FC_VERSION;
	fc_put32(b + 8, w->seed);
	fc_put_region(b + 12, &w->w);
	fc_put_region(b + 28, &w->r);
}

static int fc_welcome_decode(const uint8_t *b, size_t len, struct fc_welcome *w)
{
	if (len != FC_WELCOME_LEN || fc_get32(b) != FC_MAGIC || b[4] != FC_VERSION)
		return -EPROTO;
	w->seed = fc_get32(b + 8);
	fc_get_region(b + 12, &w->w);
	fc_get_region(b + 28, &w->r);
	return w->w.len >= FC_REGION && w->r.len >= FC_REGION ? 0 : -EPROTO;
}

/* ---- completions -------------------------------------------------------- */

static void fc_take(struct fc_peer *p, const struct rdmem_wc *wc)
{
	if (wc->status != RDMEM_WC_SUCCESS) {
		if (!p->errors++) {
			p->err_status = wc->status;
			p->err_wr = wc->wr_id;
		}
		return;
	}
	if (wc->op == RDMEM_WC_RECV_IMM) {
		if (p->it - p->ih < FC_IMMQ)
			p->imms[p->it++ % FC_IMMQ] = wc->imm;
		else
			p->errors++;
		/* -ECONNRESET: the break shows up as its own completions */
		if (rdmem_fab_post_recv(p->c, 1) && rdmem_fab_check(p->c) == 0)
			p->errors++;
	} else if (wc->wr_id > p->done_wr) {
		p->done_wr = wc->wr_id; /* the send queue completes in order */
	}
}

/* Handles completions; sleeps on the completion and event fds when idle.
 * Returns -ECONNRESET once the connection is gone, -ETIMEDOUT past deadline. */
static int fc_pump(struct fc_peer *p, uint64_t deadline)
{
	struct rdmem_wc wc[16];
	int n = rdmem_fab_poll(p->c, wc, 16);
	struct pollfd fds[2];
	uint64_t now;

	if (n == 0 && rdmem_fab_arm(p->c) == 0)
		n = rdmem_fab_poll(p->c, wc, 16);
	for (int i = 0; i < n; i++)
		fc_take(p, &wc[i]);
	if (n != 0)
		return n < 0 ? n : 0;
	if (rdmem_fab_check(p->c))
		return -ECONNRESET;
	now = rdmem_now_ns();
	if (now >= deadline)
		return -ETIMEDOUT;
	fds[0] = (struct pollfd){ .fd = rdmem_fab_comp_fd(p->c), .events = POLLIN };
	fds[1] = (struct pollfd){ .fd = rdmem_fab_event_fd(p->c), .events = POLLIN };
	poll(fds, 2, (int)RDMEM_MIN((deadline - now) / 1000000ull + 1, 100));
	if (fds[0].revents)
		rdmem_fab_ack(p->c);
	return 0;
}

static int fc_wait_imm(struct fc_peer *p, uint32_t *imm)
{
	uint64_t deadline = fc_deadline();

	while (p->ih == p->it) {
		int rc = p->errors ? -EIO : fc_pump(p, deadline);

		if (rc)
			return rc;
	}
	*imm = p->imms[p->ih++ % FC_IMMQ];
	return 0;
}

static int fc_wait_wr(struct fc_peer *p, uint64_t wr_id)
{
	uint64_t deadline = fc_deadline();

	while (p->done_wr < wr_id && !p->errors) {
		int rc = fc_pump(p, deadline);

		if (rc)
			return rc;
	}
	return p->errors ? -EIO : 0;
}

/* Posts n WRs, numbering them; waits for room while the send queue is full. */
static int fc_post(struct fc_peer *p, struct rdmem_wr *wrs, int n)
{
	uint64_t deadline = fc_deadline();
	int rc;

	for (int i = 0; i < n; i++)
		wrs[i].wr_id = ++p->next_wr;
	while ((rc = rdmem_fab_post(p->c, wrs, n)) == -EAGAIN) {
		rc = fc_pump(p, deadline);
		if (rc)
			return rc;
	}
	return rc;
}

static struct rdmem_wr fc_wr(uint8_t op, const struct fc_region *r, uint64_t off)
{
	return (struct rdmem_wr){ .op = op, .remote_addr = r->addr + off, .rkey = r->rkey };
}

static void fc_add_sge(struct rdmem_wr *w, const struct rdmem_mr *mr, const void *p, uint32_t len)
{
	w->sge[w->nsge++] =
	    (struct rdmem_sge){ .addr = (uintptr_t)p, .len = len, .lkey = mr->lkey };
}

/* ---- the write plan both sides compute ---------------------------------- */

struct fc_plan {
	uint32_t off;	 /* in W */
	uint32_t len[4]; /* per SGE */
	uint32_t total;
};

static void fc_write_plan(unsigned i, struct fc_plan *pl)
{
	pl->off = (i * 64u) % 4096u;
	pl->total = 0;
	for (unsigned k = 0; k < 4; k++) {
		pl->len[k] = 1 + (i * 7919u + k * 104729u) % 4000u;
		pl->total += pl->len[k];
	}
	if (i % 5 == 0) { /* an empty SGE now and then */
		pl->total -= pl->len[0];
		pl->len[0] = 0;
	}
}

/* ====================================================================== */
/* server                                                                  */
/* ====================================================================== */

struct fc_srv {
	struct fc_peer p;
	struct fc_hello hello;
	uint8_t *w, *r, *out;
	struct rdmem_mr wmr, rmr, omr;
	unsigned out_next, seq_next, failures;
	int seq_bad;
};

static struct {
	int sessions, bad_sessions, violations, violations_seen, rejected;
	int cycles, fd_first_cycle, fd_last_cycle;
} srv_stat = { .fd_first_cycle = -1 };

/* Replies to the client with a WRITE WITH IMM of one 8-byte word. */
static int fc_srv_reply(struct fc_srv *s, uint32_t imm, uint64_t value, uint32_t off)
{
	uint8_t *slot = s->out + (s->out_next++ % (FC_LOCAL / 8)) * 8;
	int inl = rdmem_fab_max_inline(s->p.c) >= 8;
	struct rdmem_wr w = fc_wr(RDMEM_WR_WRITE_IMM, &s->hello.reply, off);
	int rc;

	memcpy(slot, &value, 8);
	fc_add_sge(&w, &s->omr, slot, 8);
	w.imm = imm;
	/* Inline copies the word at post time; otherwise wait before reuse. */
	w.flags = inl ? RDMEM_WR_INLINE : RDMEM_WR_SIGNALED;
	rc = fc_post(&s->p, &w, 1);
	if (rc == 0 && !inl)
		rc = fc_wait_wr(&s->p, w.wr_id);
	return rc;
}

static int fc_srv_check_write(struct fc_srv *s, uint32_t i)
{
	struct fc_plan pl;
	int ok = 1;

	fc_write_plan(i, &pl);
	for (uint32_t j = 0; j < pl.total && ok; j++)
		ok = s->w[pl.off + j] == fc_byte(s->hello.seed ^ i, j);
	if (!ok)
		s->failures++;
	return fc_srv_reply(s, FC_RESULT << 24 | i, (uint64_t)i << 8 | (unsigned)ok, 0);
}

static void fc_srv_seq(struct fc_srv *s, uint32_t arg)
{
	uint64_t v;
	unsigned k = s->seq_next++;

	memcpy(&v, s->w + 8 * (k % (FC_REGION / 8)), 8);
	if (arg != ((k ^ 0xa5a5a5u) & 0xffffffu) || v != fc_word(s->hello.seed, k))
		s->seq_bad = 1;
}

static int fc_srv_seq_end(struct fc_srv *s, uint32_t arg)
{
	int ok = !s->seq_bad && s->seq_next == arg;

	if (!ok)
		s->failures++;
	s->seq_next = 0;
	s->seq_bad = 0;
	return fc_srv_reply(s, FC_RESULT << 24 | arg, (uint64_t)arg << 8 | (unsigned)ok, 0);
}

static int fc_srv_dispatch(struct fc_srv *s, uint32_t imm)
{
	uint32_t arg = imm & 0xffffffu;
	uint64_t v;

	switch (imm >> 24) {
	case FC_CHECK_WRITE:
		return fc_srv_check_write(s, arg);
	case FC_IMM_SEQ:
		fc_srv_seq(s, arg);
		return 0;
	case FC_IMM_END:
		return fc_srv_seq_end(s, arg);
	case FC_PING:
		memcpy(&v, s->w, 8);
		return fc_srv_reply(s, FC_PONG << 24 | arg, v, 8);
	}
	fprintf(stderr, "  server: unknown immediate 0x%08x\n", imm);
	s->failures++;
	return 0;
}

/* Serves requests until the client goes away. */
static void fc_srv_serve(struct fc_srv *s)
{
	uint64_t idle = fc_deadline();

	for (;;) {
		uint32_t imm;
		int rc;

		while (s->p.ih != s->p.it) {
			imm = s->p.imms[s->p.ih++ % FC_IMMQ];
			if (fc_srv_dispatch(s, imm)) {
				s->failures++;
				break;
			}
			idle = fc_deadline();
		}
		rc = fc_pump(&s->p, idle);
		if (rc == -ECONNRESET && s->p.ih == s->p.it)
			return;
		if (rc && rc != -ECONNRESET) {
			fprintf(stderr, "  server: session with %s: %s\n", rdmem_fab_peer(s->p.c),
				strerror(-rc));
			s->failures++;
			return;
		}
	}
}

static int fc_srv_regions(struct fc_srv *s, struct fc_welcome *wel)
{
	struct rdmem_conn *c = s->p.c;

	s->w = rdmem_fab_alloc(c, FC_REGION);
	s->r = rdmem_fab_alloc(c, FC_REGION);
	s->out = malloc(FC_LOCAL);
	if (!s->w || !s->r || !s->out)
		return -ENOMEM;
	wel->seed = (uint32_t)rdmem_now_ns();
	for (uint32_t j = 0; j < FC_REGION; j++)
		s->r[j] = fc_byte(wel->seed, j);
	if (rdmem_fab_reg(c, s->w, FC_REGION, RDMEM_ACCESS_REMOTE_WRITE, &s->wmr) ||
	    rdmem_fab_reg(c, s->r, FC_REGION, RDMEM_ACCESS_REMOTE_READ, &s->rmr) ||
	    rdmem_fab_reg(c, s->out, FC_LOCAL, RDMEM_ACCESS_LOCAL, &s->omr))
		return -EIO;
	wel->w = (struct fc_region){ (uintptr_t)s->w, s->wmr.rkey, FC_REGION };
	wel->r = (struct fc_region){ (uintptr_t)s->r, s->rmr.rkey, FC_REGION };
	return rdmem_fab_post_recv(c, FC_RECV_DEPTH);
}

/* Frees the session's memory; closes the conn unless s->p.c was cleared. */
static void fc_srv_release(struct fc_srv *s, struct rdmem_conn *c)
{
	rdmem_fab_dereg(c, &s->wmr);
	rdmem_fab_dereg(c, &s->rmr);
	rdmem_fab_dereg(c, &s->omr);
	rdmem_fab_free(c, s->w, FC_REGION);
	rdmem_fab_free(c, s->r, FC_REGION);
	free(s->out);
	if (s->p.c)
		rdmem_fab_close(c);
}

static void fc_srv_account(const struct fc_srv *s)
{
	switch (s->hello.mode) {
	case FC_MAIN:
	case FC_CYCLE:
		srv_stat.sessions++;
		srv_stat.bad_sessions +=
		    s->failures || (s->p.errors && s->p.err_status != RDMEM_WC_FLUSH_ERR);
		break;
	case FC_VIOLATION:
		srv_stat.violations++;
		srv_stat.violations_seen += rdmem_fab_check(s->p.c) == -ECONNRESET;
		break;
	}
}

/* One connection, start to end; returns 1 when the client said quit. */
static int fc_srv_session(struct rdmem_conn *c, const uint8_t *priv, size_t priv_len)
{
	struct fc_srv s = { .p.c = c };
	uint8_t buf[FC_WELCOME_LEN];
	struct fc_welcome wel;
	const char *why = fc_hello_decode(priv, priv_len, &s.hello);

	if (why) {
		srv_stat.rejected++;
		rdmem_fab_reject(c, why, strlen(why) + 1);
		return 0;
	}
	if (fc_srv_regions(&s, &wel)) {
		why = "fabric_check: server out of resources";
		s.p.c = NULL; /* released below, then refused */
		fc_srv_release(&s, c);
		rdmem_fab_reject(c, why, strlen(why) + 1);
		srv_stat.bad_sessions++;
		return 0;
	}
	fc_welcome_encode(&wel, buf);
	/* Every mode waits for the client to close: closing right after the
	 * accept could reach the client before its connection is established. */
	if (rdmem_fab_accept(c, buf, sizeof(buf)))
		s.failures++;
	else
		fc_srv_serve(&s);
	fc_srv_account(&s);
	fc_srv_release(&s, c);
	if (s.hello.mode == FC_CYCLE) {
		srv_stat.cycles++;
		srv_stat.fd_last_cycle = fc_open_fds();
		if (srv_stat.fd_first_cycle < 0)
			srv_stat.fd_first_cycle = srv_stat.fd_last_cycle;
	}
	return s.hello.mode == FC_QUIT;
}

static int fc_srv_next(struct rdmem_listener *l, struct rdmem_conn **c, uint8_t *priv, size_t *len)
{
	struct rdmem_fab_attr attr = fc_attr();
	uint64_t deadline = rdmem_now_ns() + 4ull * opt.timeout_s * 1000000000ull;

	for (;;) {
		struct pollfd p = { .fd = rdmem_fab_listener_fd(l), .events = POLLIN };
		int rc;

		*len = RDMEM_FAB_CONNECT_PRIV_MAX;
		rc = rdmem_fab_get_request(l, &attr, c, priv, len);
		if (rc != -EAGAIN)
			return rc;
		if (rdmem_now_ns() >= deadline)
			return -ETIMEDOUT;
		poll(&p, 1, 100);
	}
}

static int fc_server(void)
{
	struct rdmem_listener *l;
	uint8_t priv[RDMEM_FAB_CONNECT_PRIV_MAX];
	int quit = 0, rc;

	rc = rdmem_fab_listen(opt.kind, opt.addr, opt.port, &l);
	printf("%s - server: listen on %s:%u\n", rc ? "not ok" : "ok", opt.addr, opt.port);
	if (rc)
		return 1;
	printf("# listening\n");
	fflush(stdout);
	while (!quit) {
		struct rdmem_conn *c;
		size_t len;

		rc = fc_srv_next(l, &c, priv, &len);
		if (rc == -ETIMEDOUT || rc == -ENOMEM) {
			fprintf(stderr, "  server: no client: %s\n", strerror(-rc));
			break;
		}
		if (rc == 0)
			quit = fc_srv_session(c, priv, len);
	}
	rdmem_fab_listener_close(l);
	printf("%s - server: %d sessions served, every byte verified\n",
	       srv_stat.sessions && !srv_stat.bad_sessions ? "ok" : "not ok", srv_stat.sessions);
	printf("%s - server: %d refused hello(s) rejected with a reason\n",
	       srv_stat.rejected ? "ok" : "not ok", srv_stat.rejected);
	printf("%s - server: %d/%d sessions broken by the peer's access violation\n",
	       srv_stat.violations && srv_stat.violations == srv_stat.violations_seen ? "ok"
										      : "not ok",
	       srv_stat.violations_seen, srv_stat.violations);
	printf("%s - server: %d cycles, open fds %d after the first and %d after the last\n",
	       srv_stat.fd_first_cycle == srv_stat.fd_last_cycle ? "ok" : "not ok", srv_stat.cycles,
	       srv_stat.fd_first_cycle, srv_stat.fd_last_cycle);
	printf("%s - server: survived and quit on request\n", quit ? "ok" : "not ok");
	return !quit || srv_stat.bad_sessions || !srv_stat.sessions ||
	       srv_stat.fd_first_cycle != srv_stat.fd_last_cycle ||
	       srv_stat.violations != srv_stat.violations_seen;
}

/* ====================================================================== */
/* client                                                                  */
/* ====================================================================== */

struct fc_cli {
	struct fc_peer p;
	uint8_t *l, *src, *dst;
	struct rdmem_mr lmr, smr, dmr;
	struct fc_welcome wel;
	uint32_t seed;
};

static struct fc_cli cli;

static int fc_cli_open(struct fc_cli *k, uint8_t mode, uint8_t version)
{
	struct rdmem_fab_attr attr = fc_attr();
	uint8_t hello[FC_HELLO_LEN], peer[RDMEM_FAB_ACCEPT_PRIV_MAX];
	size_t peer_len = sizeof(peer);
	struct fc_hello h = { .mode = mode, .version = version };
	int rc;

	memset(k, 0, sizeof(*k));
	rc = rdmem_fab_resolve(opt.kind, opt.addr, opt.port, &attr, 1000 * (int)opt.timeout_s,
			       &k->p.c);
	if (rc)
		return rc;
	k->l = rdmem_fab_alloc(k->p.c, FC_LOCAL);
	if (!k->l)
		return -ENOMEM;
	rc = rdmem_fab_reg(k->p.c, k->l, FC_LOCAL, RDMEM_ACCESS_REMOTE_WRITE, &k->lmr);
	if (rc == 0)
		rc = rdmem_fab_post_recv(k->p.c, 16);
	if (rc)
		return rc;
	k->seed = (uint32_t)rdmem_now_ns();
	h.seed = k->seed;
	h.reply = (struct fc_region){ (uintptr_t)k->l, k->lmr.rkey, FC_LOCAL };
	fc_hello_encode(&h, hello);
	rc = rdmem_fab_connect(k->p.c, hello, sizeof(hello), peer, &peer_len,
			       1000 * (int)opt.timeout_s);
	if (rc)
		return rc;
	return fc_welcome_decode(peer, peer_len, &k->wel);
}

static void fc_cli_close(struct fc_cli *k)
{
	if (!k->p.c)
		return;
	rdmem_fab_dereg(k->p.c, &k->lmr);
	rdmem_fab_dereg(k->p.c, &k->smr);
	rdmem_fab_dereg(k->p.c, &k->dmr);
	rdmem_fab_free(k->p.c, k->l, FC_LOCAL);
	free(k->src);
	free(k->dst);
	rdmem_fab_close(k->p.c);
	memset(k, 0, sizeof(*k));
}

static void case_connect(void)
{
	int rc = fc_cli_open(&cli, FC_MAIN, FC_VERSION);

	/* REQUIRE evaluates its condition twice: only plain values in it */
	REQUIRE(rc == 0);
	cli.src = malloc(FC_REGION);
	cli.dst = malloc(FC_REGION);
	REQUIRE(cli.src && cli.dst);
	/* local-only registrations of ordinary heap memory */
	CHECK_EQ(rdmem_fab_reg(cli.p.c, cli.src, FC_REGION, RDMEM_ACCESS_LOCAL, &cli.smr), 0);
	CHECK_EQ(rdmem_fab_reg(cli.p.c, cli.dst, FC_REGION, RDMEM_ACCESS_LOCAL, &cli.dmr), 0);
	printf("# connected to %s, max inline %u\n", rdmem_fab_peer(cli.p.c),
	       rdmem_fab_max_inline(cli.p.c));
}

/* Waits for the server's verdict on request arg: imm and the word it wrote. */
static int fc_cli_verdict(uint32_t arg)
{
	uint32_t imm;
	uint64_t v;

	if (fc_wait_imm(&cli.p, &imm))
		return 0;
	memcpy(&v, cli.l, 8);
	return imm == (FC_RESULT << 24 | arg) && v == ((uint64_t)arg << 8 | 1);
}

static int fc_cli_write_once(unsigned i)
{
	struct rdmem_wr w[2];
	struct fc_plan pl;
	uint32_t pos = 0;

	fc_write_plan(i, &pl);
	w[0] = fc_wr(RDMEM_WR_WRITE, &cli.wel.w, pl.off);
	w[0].flags = RDMEM_WR_INLINE; /* honoured only when it fits */
	for (unsigned k = 0; k < 4; k++) {
		/* gathered from scattered, reversed places in src */
		uint8_t *from = cli.src + (3 - k) * (FC_REGION / 4);

		for (uint32_t j = 0; j < pl.len[k]; j++)
			from[j] = fc_byte(cli.seed ^ i, pos + j);
		fc_add_sge(&w[0], &cli.smr, from, pl.len[k]);
		pos += pl.len[k];
	}
	w[1] = fc_wr(RDMEM_WR_WRITE_IMM, &cli.wel.w, 0);
	w[1].imm = FC_CHECK_WRITE << 24 | i;
	if (fc_post(&cli.p, w, 2))
		return 0;
	return fc_cli_verdict(i);
}

static void case_write(void)
{
	unsigned bad = 0;

	REQUIRE(cli.p.c);
	for (unsigned i = 0; i < opt.iters && !cli.p.errors; i++)
		bad += !fc_cli_write_once(i);
	CHECK_EQ(bad, 0);
	CHECK_EQ(cli.p.errors, 0);
}

static void case_imm(void)
{
	struct rdmem_wr w[FC_CHAIN];
	uint64_t *words;
	int rc;

	REQUIRE(cli.p.c);
	words = (uint64_t *)cli.src;
	for (unsigned k = 0; k < FC_SEQ_IMMS; k += FC_CHAIN) {
		for (unsigned j = 0; j < FC_CHAIN; j++) {
			words[k + j] = fc_word(cli.seed, k + j);
			w[j] = fc_wr(RDMEM_WR_WRITE_IMM, &cli.wel.w, 8 * (k + j));
			fc_add_sge(&w[j], &cli.smr, &words[k + j], 8);
			w[j].imm = FC_IMM_SEQ << 24 | (((k + j) ^ 0xa5a5a5u) & 0xffffffu);
			w[j].flags = RDMEM_WR_INLINE;
		}
		rc = fc_post(&cli.p, w, FC_CHAIN);
		REQUIRE(rc == 0);
	}
	w[0] = fc_wr(RDMEM_WR_WRITE_IMM, &cli.wel.w, 0);
	w[0].imm = FC_IMM_END << 24 | FC_SEQ_IMMS;
	rc = fc_post(&cli.p, w, 1);
	REQUIRE(rc == 0);
	CHECK(fc_cli_verdict(FC_SEQ_IMMS));
}

static int fc_cli_read_once(unsigned i)
{
	uint32_t off = (i * 4093u) % (FC_REGION - 16384), len = 2 + (i * 7919u) % 16000u;
	uint32_t first = len / 3;
	struct rdmem_wr w = fc_wr(RDMEM_WR_READ, &cli.wel.r, off);

	if (opt.brk && strcmp(opt.brk, "read-before-exchange") == 0)
		w.remote_addr = 0, w.rkey = 0; /* as if the peer's region were unknown */
	memset(cli.dst, 0, FC_REGION);
	/* scattered into two places of dst */
	fc_add_sge(&w, &cli.dmr, cli.dst + FC_REGION / 2, first);
	fc_add_sge(&w, &cli.dmr, cli.dst, len - first);
	w.flags = RDMEM_WR_SIGNALED;
	if (fc_post(&cli.p, &w, 1) || fc_wait_wr(&cli.p, w.wr_id))
		return 0;
	for (uint32_t j = 0; j < len; j++) {
		uint8_t got = j < first ? cli.dst[FC_REGION / 2 + j] : cli.dst[j - first];

		if (got != fc_byte(cli.wel.seed, off + j))
			return 0;
	}
	return 1;
}

static void case_read(void)
{
	unsigned bad = 0;

	REQUIRE(cli.p.c);
	for (unsigned i = 0; i < opt.iters && !cli.p.errors; i++)
		bad += !fc_cli_read_once(i);
	CHECK_EQ(bad, 0);
	CHECK_EQ(cli.p.errors, 0);
	if (cli.p.errors)
		fprintf(stderr, "  first failed completion: %s\n",
			rdmem_wc_status_name(cli.p.err_status));
}

static void case_pingpong(void)
{
	static uint64_t t[FC_PINGS];
	uint64_t *word = (uint64_t *)cli.src;
	unsigned done = 0;

	REQUIRE(cli.p.c);
	for (unsigned i = 0; i < FC_PINGS; i++, done++) {
		struct rdmem_wr w = fc_wr(RDMEM_WR_WRITE_IMM, &cli.wel.w, 0);
		uint64_t t0 = rdmem_now_ns(), echo;
		uint32_t imm;

		*word = fc_word(cli.seed, 1000 + i);
		fc_add_sge(&w, &cli.smr, word, 8);
		w.imm = FC_PING << 24 | i;
		w.flags = RDMEM_WR_INLINE;
		if (fc_post(&cli.p, &w, 1) || fc_wait_imm(&cli.p, &imm))
			break;
		t[i] = rdmem_now_ns() - t0;
		memcpy(&echo, cli.l + 8, 8);
		if (imm != (FC_PONG << 24 | i) || echo != *word)
			break;
	}
	CHECK_EQ(done, FC_PINGS);
	REQUIRE(done == FC_PINGS);
	rdmem_pctl_sort(t, FC_PINGS);
	printf("# ping-pong over %s: %d round trips (8-byte WRITE WITH IMM each way), median "
	       "%.1f us, p99 %.1f us; a functional figure, not a performance claim (on "
	       "Soft-RoCE in a VM it measures qemu)\n",
	       rdmem_fab_kind_name(opt.kind), FC_PINGS, rdmem_pctl_us(t, FC_PINGS, 0.5),
	       rdmem_pctl_us(t, FC_PINGS, 0.99));
}

static void case_close_main(void)
{
	REQUIRE(cli.p.c);
	CHECK_EQ(rdmem_fab_check(cli.p.c), 0);
	fc_cli_close(&cli);
}

/* Private data over the limit fails locally; a bad hello is refused with
 * the server's reason. */
static void case_limits_reject(void)
{
	struct rdmem_fab_attr attr = fc_attr();
	uint8_t big[RDMEM_FAB_CONNECT_PRIV_MAX + 1] = { 0 }, hello[FC_HELLO_LEN];
	char reason[RDMEM_FAB_ACCEPT_PRIV_MAX] = "";
	size_t rlen = sizeof(reason) - 1;
	struct fc_hello h = { .mode = FC_MAIN, .version = 99 };
	struct rdmem_conn *c;

	int rc =
	    rdmem_fab_resolve(opt.kind, opt.addr, opt.port, &attr, 1000 * (int)opt.timeout_s, &c);

	REQUIRE(rc == 0);
	CHECK_EQ(rdmem_fab_connect(c, big, sizeof(big), reason, &rlen, 1000), -EMSGSIZE);
	rlen = sizeof(reason) - 1;
	fc_hello_encode(&h, hello);
	CHECK_EQ(
	    rdmem_fab_connect(c, hello, sizeof(hello), reason, &rlen, 1000 * (int)opt.timeout_s),
	    -ECONNREFUSED);
	reason[RDMEM_MIN(rlen, sizeof(reason) - 1)] = '\0';
	CHECK(strstr(reason, "unsupported hello version") != NULL);
	rdmem_fab_close(c);
}

/* A WRITE the peer must refuse: remote access error, connection broken. */
static void fc_violation(int past_end)
{
	struct fc_cli k;
	struct rdmem_wr w;
	uint64_t *word;

	int rc = fc_cli_open(&k, FC_VIOLATION, FC_VERSION);

	if (rc)
		fc_cli_close(&k);
	REQUIRE(rc == 0);
	word = (uint64_t *)k.l;
	*word = 42;
	w = past_end ? fc_wr(RDMEM_WR_WRITE, &k.wel.w, k.wel.w.len - 4)
		     : fc_wr(RDMEM_WR_WRITE, &k.wel.r, 0);
	fc_add_sge(&w, &k.lmr, word, 8);
	w.flags = RDMEM_WR_SIGNALED;
	CHECK_EQ(fc_post(&k.p, &w, 1), 0);
	CHECK_EQ(fc_wait_wr(&k.p, w.wr_id), -EIO);
	CHECK_EQ(k.p.err_status, RDMEM_WC_REM_ACCESS_ERR);
	CHECK_EQ(k.p.err_wr, w.wr_id);
	CHECK_EQ(rdmem_fab_check(k.p.c), -ECONNRESET);
	CHECK(rdmem_fab_post(k.p.c, &w, 1) < 0);
	fc_cli_close(&k);
}

static void case_violation_readonly(void)
{
	fc_violation(0);
}

static void case_violation_bounds(void)
{
	fc_violation(1);
}

static int fc_cycle_once(void)
{
	struct fc_cli k;
	struct rdmem_wr w;
	uint32_t imm;
	int ok;

	ok = fc_cli_open(&k, FC_CYCLE, FC_VERSION) == 0;
	if (ok) {
		w = fc_wr(RDMEM_WR_WRITE_IMM, &k.wel.w, 0);
		fc_add_sge(&w, &k.lmr, k.l + 64, 8);
		w.imm = FC_PING << 24;
		ok = fc_post(&k.p, &w, 1) == 0 && fc_wait_imm(&k.p, &imm) == 0 &&
		     imm == FC_PONG << 24;
	}
	fc_cli_close(&k);
	return ok;
}

static void case_cycles(void)
{
	int first = -1, last = -1;
	unsigned bad = 0;

	for (unsigned i = 0; i < opt.cycles; i++) {
		bad += !fc_cycle_once();
		last = fc_open_fds();
		if (i == 0)
			first = last;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(last, first);
	printf("# %u cycles, open fds %d after the first and %d after the last\n", opt.cycles,
	       first, last);
}

static void case_quit(void)
{
	struct fc_cli k;

	CHECK_EQ(fc_cli_open(&k, FC_QUIT, FC_VERSION), 0);
	fc_cli_close(&k);
}

/* ---- memlock (verbs): a child without CAP_IPC_LOCK under a 64 KiB limit --- */

static int fc_drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[0].effective &= ~(1u << CAP_IPC_LOCK);
	d[0].permitted &= ~(1u << CAP_IPC_LOCK);
	d[0].inheritable &= ~(1u << CAP_IPC_LOCK);
	return (int)syscall(SYS_capset, &h, d);
}

static void fc_memlock_child(int errfd)
{
	struct rlimit rl = { 64 * 1024, 64 * 1024 };
	struct rdmem_fab_attr attr = fc_attr();
	struct rdmem_conn *c;
	struct rdmem_mr mr;
	size_t len = 4u << 20;
	void *p;
	int rc;

	dup2(errfd, STDERR_FILENO);
	if (fc_drop_ipc_lock() || setrlimit(RLIMIT_MEMLOCK, &rl))
		_exit(3);
	if (rdmem_fab_resolve(opt.kind, opt.addr, opt.port, &attr, 1000 * (int)opt.timeout_s, &c))
		_exit(4);
	p = rdmem_fab_alloc(c, len);
	rc = p ? rdmem_fab_reg(c, p, len, RDMEM_ACCESS_REMOTE_WRITE, &mr) : -ENOMEM;
	if (rc == 0)
		rdmem_fab_dereg(c, &mr);
	rdmem_fab_free(c, p, len);
	rdmem_fab_close(c);
	_exit(rc == -ENOMEM || rc == -EPERM ? 0 : 5);
}

static void case_memlock(void)
{
	char buf[4096] = "";
	size_t got = 0;
	int fds[2], st = -1;
	ssize_t n;
	pid_t pid;

	int rc = pipe(fds);

	REQUIRE(rc == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		fc_memlock_child(fds[1]);
	close(fds[1]);
	while (got < sizeof(buf) - 1 && (n = read(fds[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	close(fds[0]);
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(strstr(buf, "ulimit -l") != NULL);
	fprintf(stderr, "  memlock child said: %s", buf);
}

static int fc_client(void)
{
	char name[128];

	if (opt.kind == RDMEM_FAB_VERBS)
		check_run("memlock: a 64 KiB limit fails registration with a hint naming ulimit -l",
			  case_memlock);
	else
		check_skip("memlock", "verbs only");
	check_run("connect: region exchange in private data", case_connect);
	snprintf(name, sizeof(name),
		 "write: %u multi-SGE WRITEs verified byte by byte by the "
		 "server",
		 opt.iters);
	check_run(name, case_write);
	check_run("write with immediate: 64 immediates in order, data before each", case_imm);
	snprintf(name, sizeof(name), "read: %u scattering READs verified byte by byte", opt.iters);
	check_run(name, case_read);
	check_run("ping-pong: WRITE WITH IMM each way, echo verified", case_pingpong);
	check_run("close: connection healthy until closed", case_close_main);
	check_run("private data: over the limit -> EMSGSIZE; refused hello -> ECONNREFUSED "
		  "with the reason",
		  case_limits_reject);
	check_run("violation: WRITE to the read-only region -> remote access error, broken",
		  case_violation_readonly);
	check_run("violation: WRITE past the region's end -> remote access error, broken",
		  case_violation_bounds);
	snprintf(name, sizeof(name), "cycles: %u connect/disconnect cycles, no fd growth",
		 opt.cycles);
	check_run(name, case_cycles);
	check_run("quit: the server still answers", case_quit);
	return check_done();
}

static void fc_usage(void)
{
	fprintf(stderr, "usage: fabric_check --fabric verbs|shm server|client ADDR PORT "
			"[--iters N] [--cycles N] [--src ADDR] [--timeout SECS] "
			"[--break read-before-exchange] [-v]\n");
	exit(2);
}

static unsigned fc_uint(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v > 1000000)
		fc_usage();
	return (unsigned)v;
}

int main(int argc, char **argv)
{
	const char *role = NULL, *fabric = "verbs";
	int verbose = 0, pos = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-v"))
			verbose = 1;
		else if (i + 1 < argc && !strcmp(a, "--fabric"))
			fabric = argv[++i];
		else if (i + 1 < argc && !strcmp(a, "--iters"))
			opt.iters = fc_uint(argv[++i]);
		else if (i + 1 < argc && !strcmp(a, "--cycles"))
			opt.cycles = fc_uint(argv[++i]);
		else if (i + 1 < argc && !strcmp(a, "--timeout"))
			opt.timeout_s = fc_uint(argv[++i]);
		else if (i + 1 < argc && !strcmp(a, "--src"))
			opt.src = argv[++i];
		else if (i + 1 < argc && !strcmp(a, "--break"))
			opt.brk = argv[++i];
		else if (a[0] == '-')
			fc_usage();
		else if (pos == 0)
			role = a, pos++;
		else if (pos == 1)
			opt.addr = a, pos++;
		else if (pos == 2)
			opt.port = (uint16_t)fc_uint(a), pos++;
		else
			fc_usage();
	}
	if (pos != 3 || rdmem_fab_kind_parse(fabric, &opt.kind) || opt.timeout_s == 0 ||
	    (opt.brk && strcmp(opt.brk, "read-before-exchange")))
		fc_usage();
	rdmem_log_init(role, verbose);
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(role, "server"))
		return fc_server();
	if (!strcmp(role, "client"))
		return fc_client();
	fc_usage();
	return 2;
}
