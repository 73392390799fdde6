/* test_frame_mac.c - with a shared secret, no one on the path can change a
 * TCP frame after AUTH: a man-in-the-middle proxy in this process sits
 * between the agent (--fabric tcp) and the server and, frame by frame, flips
 * a bit of a reply value, of a reply header field or of a request key,
 * replays an earlier request, drops one, or reflects one back to its sender.
 * Each is detected: the call fails with an error or (retried on a new
 * connection) returns the right bytes, never wrong bytes with status OK; the
 * detecting side counts a MAC failure; the connection is made again and
 * later calls succeed. Unmodified, the same proxy passes every call.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include "check.h"
#include "e2e.h"
#include "tcp/client.h"
#include "rdmem/auth.h"
#include "tmpdir.h"

/*
 * Tag bytes after each frame once AUTH is done (tcp/frame_mac.h). The proxy
 * finds frame boundaries by itself; build with -DMITM_TAG=0 to run this test
 * against daemons of wire version 2 (before tags), where it must fail.
 */
#ifndef MITM_TAG
#define MITM_TAG 16
#endif

#define MITM_BUF (1u << 20)

enum attack {
	ATT_NONE,
	ATT_FLIP_VALUE,	 /* server->agent: one bit of the next reply value */
	ATT_FLIP_STATUS, /* server->agent: the low bit of the next reply's status */
	ATT_FLIP_KEY,	 /* agent->server: one bit of the next PUT's key */
	ATT_REPLAY,	 /* agent->server: the next PUT again, before the frame after it */
	ATT_DROP,	 /* agent->server: the next PUT never arrives */
	ATT_REFLECT,	 /* agent->server: the next PING goes back to the agent */
};

struct dir {
	int from, to;
	uint8_t *buf;
	size_t len;
	unsigned frames; /* seen on this connection: the first is AUTH, untagged */
};

struct mitm {
	int lfd;
	unsigned port, upstream;
	pthread_t thread;
	atomic_int stop;
	pthread_mutex_t lock; /* the fields below: the test arms, the proxy fires */
	enum attack attack;
	int fired;	   /* the attack armed was carried out */
	unsigned accepted; /* connections from the agent */
	uint8_t *saved;	   /* ATT_REPLAY: the recorded request */
	size_t saved_len;
};

static char secret[128];

static void write_secret(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		abort();
	close(fd);
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static uint16_t le16_at(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Bytes of the frame at the start of d->buf, 0 while it is incomplete. */
static size_t frame_len(const struct dir *d)
{
	size_t n;

	if (d->len < RDMEM_DESC_SIZE)
		return 0;
	n = RDMEM_DESC_SIZE + le16_at(d->buf + offsetof(struct rdmem_desc, key_len)) +
	    le32_at(d->buf + offsetof(struct rdmem_desc, val_len)) + (d->frames ? MITM_TAG : 0);
	return d->len >= n ? n : 0;
}

/* What the armed attack does to frame f of direction d (to_agent: server->agent). */
static int mitm_frame(struct mitm *m, struct dir *d, int to_agent, uint8_t *f, size_t n)
{
	uint16_t op = le16_at(f + offsetof(struct rdmem_desc, op));
	uint16_t key_len = le16_at(f + offsetof(struct rdmem_desc, key_len));
	uint32_t val_len = le32_at(f + offsetof(struct rdmem_desc, val_len));
	int ret = 0, fire;

	pthread_mutex_lock(&m->lock);
	fire = !m->fired && d->frames > 0; /* never AUTH itself */
	if (fire && m->attack == ATT_REPLAY && m->saved && !to_agent) {
		/* The recorded request goes in again just before this one. */
		ret = write_all(d->to, m->saved, m->saved_len);
		m->fired = 1;
	} else if (fire && to_agent) {
		if (m->attack == ATT_FLIP_VALUE && val_len) {
			f[RDMEM_DESC_SIZE + val_len / 2] ^= 0x10;
			m->fired = 1;
		} else if (m->attack == ATT_FLIP_STATUS && op == RDMEM_OP_KV_GET) {
			f[offsetof(struct rdmem_desc, status)] ^= 1;
			m->fired = 1;
		}
	} else if (fire && op == RDMEM_OP_KV_PUT) {
		if (m->attack == ATT_FLIP_KEY && key_len) {
			f[RDMEM_DESC_SIZE] ^= 0x01;
			m->fired = 1;
		} else if (m->attack == ATT_REPLAY && !m->saved) {
			m->saved = malloc(n);
			if (m->saved) {
				memcpy(m->saved, f, n);
				m->saved_len = n;
			}
		} else if (m->attack == ATT_DROP) {
			m->fired = 1;
			pthread_mutex_unlock(&m->lock);
			return 0;
		}
	} else if (fire && op == RDMEM_OP_PING && m->attack == ATT_REFLECT) {
		m->fired = 1;
		pthread_mutex_unlock(&m->lock);
		return write_all(d->from, f, n);
	}
	pthread_mutex_unlock(&m->lock);
	return ret < 0 ? ret : write_all(d->to, f, n);
}

/* Reads what came on d and passes on every whole frame; -1 when a side closed. */
static int mitm_pump(struct mitm *m, struct dir *d, int to_agent)
{
	ssize_t r = recv(d->from, d->buf + d->len, MITM_BUF - d->len, 0);
	size_t n;

	if (r <= 0)
		return -1;
	d->len += (size_t)r;
	while ((n = frame_len(d)) > 0) {
		if (mitm_frame(m, d, to_agent, d->buf, n) < 0)
			return -1;
		d->frames++;
		memmove(d->buf, d->buf + n, d->len - n);
		d->len -= n;
	}
	return d->len == MITM_BUF ? -1 : 0;
}

static int mitm_dial(unsigned port)
{
	struct sockaddr_in a = {
		AF_INET, htons((uint16_t)port), { htonl(INADDR_LOOPBACK) }, { 0 }
	};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* One agent connection, spliced to a new server connection until either ends. */
static void mitm_serve(struct mitm *m, int cfd)
{
	struct dir up = { cfd, -1, malloc(MITM_BUF), 0, 0 };
	struct dir down = { -1, cfd, malloc(MITM_BUF), 0, 0 };
	int sfd = mitm_dial(m->upstream), one = 1;

	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	up.to = down.from = sfd;
	while (sfd >= 0 && up.buf && down.buf && !atomic_load(&m->stop)) {
		struct pollfd p[2] = { { cfd, POLLIN, 0 }, { sfd, POLLIN, 0 } };

		if (poll(p, 2, 100) < 0)
			break;
		if ((p[0].revents && mitm_pump(m, &up, 0) < 0) ||
		    (p[1].revents && mitm_pump(m, &down, 1) < 0))
			break;
	}
	if (sfd >= 0)
		close(sfd);
	close(cfd);
	free(up.buf);
	free(down.buf);
}

static void *mitm_main(void *arg)
{
	struct mitm *m = arg;

	while (!atomic_load(&m->stop)) {
		struct pollfd p = { m->lfd, POLLIN, 0 };
		int cfd;

		if (poll(&p, 1, 100) <= 0)
			continue;
		cfd = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0)
			continue;
		pthread_mutex_lock(&m->lock);
		m->accepted++;
		pthread_mutex_unlock(&m->lock);
		mitm_serve(m, cfd);
	}
	return NULL;
}

static int mitm_start(struct mitm *m, unsigned upstream)
{
	struct sockaddr_in a = { AF_INET, 0, { htonl(INADDR_LOOPBACK) }, { 0 } };
	socklen_t len = sizeof(a);

	memset(m, 0, sizeof(*m));
	m->upstream = upstream;
	pthread_mutex_init(&m->lock, NULL);
	m->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (m->lfd < 0 || bind(m->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(m->lfd, 8) < 0 || getsockname(m->lfd, (struct sockaddr *)&a, &len) < 0)
		return -1;
	m->port = ntohs(a.sin_port);
	return pthread_create(&m->thread, NULL, mitm_main, m) ? -1 : 0;
}

static void mitm_stop(struct mitm *m)
{
	atomic_store(&m->stop, 1);
	pthread_join(m->thread, NULL);
	close(m->lfd);
	free(m->saved);
	pthread_mutex_destroy(&m->lock);
}

static void mitm_arm(struct mitm *m, enum attack a)
{
	pthread_mutex_lock(&m->lock);
	m->attack = a;
	m->fired = 0;
	free(m->saved);
	m->saved = NULL;
	pthread_mutex_unlock(&m->lock);
}

static int mitm_get(struct mitm *m, int *fired)
{
	int accepted;

	pthread_mutex_lock(&m->lock);
	*fired = m->fired;
	accepted = (int)m->accepted;
	pthread_mutex_unlock(&m->lock);
	return accepted;
}

/* A counter from the server's STATS, asked with the secret straight, not through the proxy. */
static long long server_stat(struct e2e *e, const char *name)
{
	return e2e_server_stat_auth(e, secret, name);
}

/* Server with the secret (and max_value, if not NULL); the agent reaches its
 * TCP port only through the proxy. */
static int rig_start_capped(struct e2e *e, struct mitm *m, const char *max_value)
{
	char port[16];

	if (e2e_init(e, "tcp") < 0 ||
	    e2e_server(e, "shm", "--secret-file", secret, max_value ? "--max-value" : NULL,
		       max_value, NULL) < 0 ||
	    mitm_start(m, e->port + 1) < 0)
		return -1;
	snprintf(port, sizeof(port), "%u", m->port);
	return e2e_agent(e, "--secret-file", secret, "--tcp-port", port, NULL);
}

static int rig_start(struct e2e *e, struct mitm *m)
{
	return rig_start_capped(e, m, NULL);
}

static void rig_stop(struct e2e *e, struct mitm *m)
{
	e2e_fini(e);
	mitm_stop(m);
}

static const struct rdmem_opts tcp_opts = { RDMEM_PATH_TCP, 3000, NULL };

/* 0 when key holds exactly want (len bytes) as seen through the agent. */
static int get_is(struct e2e *e, const char *key, const uint8_t *want, uint32_t len)
{
	void *v = NULL;
	uint32_t n = 0;
	int rc = rdmem_get(e->h, key, (uint32_t)strlen(key), &v, &n, &tcp_opts);

	rc = rc ? rc : (n == len && memcmp(v, want, len) == 0) ? 0 : -EILSEQ;
	free(v);
	return rc;
}

/*
 * After an attack: it was carried out, the right side counted it, the
 * agent connected again, and calls work as before.
 */
static void check_detected(struct e2e *e, struct mitm *m, int accepted_before, int at_agent,
			   long long before)
{
	uint8_t v[64];
	int fired, i;

	mitm_get(m, &fired);
	CHECK(fired);
	if (at_agent) {
		CHECK_EQ(e2e_stat(e, "tcp.mac_failures"), before + 1);
		CHECK(proc_log_has(&e->agent, "fails its MAC"));
	} else {
		CHECK_EQ(server_stat(e, "mac_failures"), before + 1);
		CHECK(proc_log_has(&e->server, "fails its MAC"));
	}
	for (i = 0; i < 3; i++) { /* later calls succeed, with the right bytes */
		e2e_fill(v, sizeof(v), 900u + (unsigned)i);
		CHECK_EQ(rdmem_put(e->h, "after", 5, v, sizeof(v), &tcp_opts), 0);
		CHECK_EQ(get_is(e, "after", v, sizeof(v)), 0);
	}
	CHECK(mitm_get(m, &fired) > accepted_before); /* closed and dialled again */
}

/* Unmodified, every call passes the proxy, and nothing is counted as tampering. */
static void test_honest_path(void)
{
	struct e2e e;
	struct mitm m;
	uint8_t v[3000];
	int i, fired;

	REQUIRE(rig_start(&e, &m) == 0);
	for (i = 0; i < 20; i++) {
		char key[16];
		uint32_t len = 1 + (uint32_t)i * 149;

		snprintf(key, sizeof(key), "k%d", i);
		e2e_fill(v, len, (unsigned)i);
		CHECK_EQ(rdmem_put(e.h, key, (uint32_t)strlen(key), v, len, &tcp_opts), 0);
		CHECK_EQ(get_is(&e, key, v, len), 0);
	}
	CHECK_EQ(rdmem_ping(e.h, &tcp_opts), 0);
	CHECK_EQ(e2e_stat(&e, "tcp.mac_failures"), 0);
	CHECK_EQ(e2e_stat(&e, "tcp.connects"), 1);
	CHECK_EQ(server_stat(&e, "mac_failures"), 0);
	CHECK_EQ(mitm_get(&m, &fired), 1);
	rig_stop(&e, &m);
}

/* A reply value changed on the way: never handed over as OK. */
static void test_flipped_reply_value(void)
{
	struct e2e e;
	struct mitm m;
	uint8_t v[256];
	int fired, acc, rc;

	REQUIRE(rig_start(&e, &m) == 0);
	e2e_fill(v, sizeof(v), 7);
	CHECK_EQ(rdmem_put(e.h, "val", 3, v, sizeof(v), &tcp_opts), 0);
	acc = mitm_get(&m, &fired);
	mitm_arm(&m, ATT_FLIP_VALUE);
	rc = get_is(&e, "val", v, sizeof(v));
	CHECK(rc != -EILSEQ); /* an error, or the right bytes (retried): never wrong bytes */
	check_detected(&e, &m, acc, 1, 0);
	rig_stop(&e, &m);
}

/* A reply header field (status OK -> NOT_FOUND) changed on the way. */
static void test_flipped_reply_status(void)
{
	struct e2e e;
	struct mitm m;
	uint8_t v[32];
	int fired, acc, rc;

	REQUIRE(rig_start(&e, &m) == 0);
	e2e_fill(v, sizeof(v), 8);
	CHECK_EQ(rdmem_put(e.h, "st", 2, v, sizeof(v), &tcp_opts), 0);
	acc = mitm_get(&m, &fired);
	mitm_arm(&m, ATT_FLIP_STATUS);
	rc = get_is(&e, "st", v, sizeof(v));
	CHECK(rc != -ENOENT && rc != -EILSEQ); /* the key is there: never "not found" */
	check_detected(&e, &m, acc, 1, 0);
	rig_stop(&e, &m);
}

/* A request key changed on the way: the server runs nothing of it. */
static void test_flipped_request_key(void)
{
	struct e2e e;
	struct mitm m;
	uint8_t v[48];
	int fired, acc;
	void *got = NULL;
	uint32_t n;

	REQUIRE(rig_start(&e, &m) == 0);
	CHECK_EQ(rdmem_ping(e.h, &tcp_opts), 0);
	acc = mitm_get(&m, &fired);
	mitm_arm(&m, ATT_FLIP_KEY);
	e2e_fill(v, sizeof(v), 9);
	CHECK_EQ(rdmem_put(e.h, "b", 1, v, sizeof(v), &tcp_opts), 0); /* retried intact */
	CHECK_EQ(get_is(&e, "b", v, sizeof(v)), 0);
	/* "b" ^ 1 is "c": nothing may have been stored there. */
	CHECK_EQ(rdmem_get(e.h, "c", 1, &got, &n, &tcp_opts), -ENOENT);
	free(got);
	check_detected(&e, &m, acc, 0, 0);
	rig_stop(&e, &m);
}

/* An earlier request sent again on the same connection. */
static void test_replayed_request(void)
{
	struct e2e e;
	struct mitm m;
	uint8_t v[40];
	int fired, acc;

	REQUIRE(rig_start(&e, &m) == 0);
	CHECK_EQ(rdmem_ping(e.h, &tcp_opts), 0);
	acc = mitm_get(&m, &fired);
	mitm_arm(&m, ATT_REPLAY);
	e2e_fill(v, sizeof(v), 10);
	CHECK_EQ(rdmem_put(e.h, "r", 1, v, sizeof(v), &tcp_opts), 0); /* recorded */
	CHECK_EQ(rdmem_ping(e.h, &tcp_opts), 0); /* the replay goes just before it */
	check_detected(&e, &m, acc, 0, 0);
	rig_stop(&e, &m);
}

/* A request that never arrives: the next one gives it away. */
static void test_dropped_request(void)
{
	struct rdmem_rpc a, b;
	struct e2e e;
	struct mitm m;
	uint8_t va[24], vb[24];
	int fired, acc;

	REQUIRE(rig_start(&e, &m) == 0);
	CHECK_EQ(rdmem_ping(e.h, &tcp_opts), 0);
	acc = mitm_get(&m, &fired);
	mitm_arm(&m, ATT_DROP);
	e2e_fill(va, sizeof(va), 11);
	e2e_fill(vb, sizeof(vb), 12);
	rdmem_rpc_init(&a, RDMEM_OP_KV_PUT);
	rdmem_rpc_init(&b, RDMEM_OP_KV_PUT);
	a.key = "da";
	b.key = "db";
	a.key_len = b.key_len = 2;
	a.val = va;
	b.val = vb;
	a.val_len = b.val_len = sizeof(va);
	a.path = b.path = RDMEM_PATH_TCP;
	a.timeout_ms = b.timeout_ms = 3000;
	REQUIRE(rdmem_submit(e.h, &a) == 0);
	REQUIRE(rdmem_submit(e.h, &b) == 0);
	rdmem_wait(e.h, &a);
	rdmem_wait(e.h, &b);
	/* Both were sent again on the new connection. */
	CHECK_EQ(a.rc, 0);
	CHECK_EQ(b.rc, 0);
	rdmem_rpc_free(&a);
	rdmem_rpc_free(&b);
	CHECK_EQ(get_is(&e, "da", va, sizeof(va)), 0);
	CHECK_EQ(get_is(&e, "db", vb, sizeof(vb)), 0);
	check_detected(&e, &m, acc, 0, 0);
	rig_stop(&e, &m);
}

/*
 * A value over the server's cap is refused after its bytes were drained, not
 * buffered: the tag is checked as they pass, and the refusal (E2BIG) goes out
 * only then. Intact, the connection stays; with its key changed, the server
 * finds out at the end of the drain and closes.
 */
static void test_refused_frame(void)
{
	static uint8_t big[200000];
	struct e2e e;
	struct mitm m;
	int fired, acc;

	REQUIRE(rig_start_capped(&e, &m, "4096") == 0);
	e2e_fill(big, sizeof(big), 13);
	CHECK_EQ(rdmem_put(e.h, "big", 3, big, sizeof(big), &tcp_opts), -E2BIG);
	CHECK_EQ(rdmem_put(e.h, "small", 5, big, 100, &tcp_opts), 0);
	CHECK_EQ(e2e_stat(&e, "tcp.connects"), 1);
	CHECK_EQ(server_stat(&e, "mac_failures"), 0);
	acc = mitm_get(&m, &fired);
	mitm_arm(&m, ATT_FLIP_KEY);
	CHECK_EQ(rdmem_put(e.h, "big", 3, big, sizeof(big), &tcp_opts), -E2BIG); /* retried */
	check_detected(&e, &m, acc, 0, 0);
	rig_stop(&e, &m);
}

/* The agent's own PING sent back to it as if it were the server's reply. */
static void test_reflected_frame(void)
{
	struct e2e e;
	struct mitm m;
	long long pings;
	int fired, acc;

	REQUIRE(rig_start(&e, &m) == 0);
	CHECK_EQ(rdmem_ping(e.h, &tcp_opts), 0);
	pings = server_stat(&e, "ops.ping.calls");
	acc = mitm_get(&m, &fired);
	mitm_arm(&m, ATT_REFLECT);
	CHECK_EQ(rdmem_ping(e.h, &tcp_opts), 0);
	/* It returns only once the server itself answered (retried). */
	CHECK(server_stat(&e, "ops.ping.calls") >= pings + 1);
	check_detected(&e, &m, acc, 1, 0);
	rig_stop(&e, &m);
}

/*
 * A local client rewrites its own request bytes (shared memory) while the
 * agent tags and sends them. The agent tags and sends a private copy, so the
 * frame stays authentic: no MAC failure, no reconnect, nothing that breaks
 * the connection other clients share. (Tagging the shared bytes and letting
 * the kernel read them later failed the server's check here.)
 */
static void test_client_rewrites_its_request(void)
{
	static uint8_t v[256u << 10];
	struct e2e e;
	struct mitm m;
	int i, fired, done = 0;

	REQUIRE(rig_start(&e, &m) == 0);
	e2e_fill(v, sizeof(v), 7);
	for (i = 0; i < 16; i++) {
		struct rdmem_rpc c;
		uint8_t *p;
		uint32_t n = 0;

		rdmem_rpc_init(&c, RDMEM_OP_KV_PUT);
		c.key = "scribble";
		c.key_len = 8;
		c.val = v;
		c.val_len = sizeof(v);
		c.path = RDMEM_PATH_TCP;
		c.timeout_ms = 3000;
		REQUIRE(rdmem_submit(e.h, &c) == 0);
		p = rdmem_shm_payload(rdmem__slot(c.p_.att, c.p_.slot)) + RDMEM_SHM_VALUE_OFF;
		while (!rdmem_poll(e.h, &c)) /* the agent reads these bytes meanwhile */
			p[(n++ * 4099u) % sizeof(v)] ^= 0x5a;
		done += c.rc == 0;
		rdmem_rpc_free(&c);
	}
	printf("# 16 PUTs of 256 KiB rewritten while sent: %d ok\n", done);
	CHECK_EQ(done, 16);
	CHECK_EQ(server_stat(&e, "mac_failures"), 0);
	CHECK_EQ(e2e_stat(&e, "tcp.connects"), 1);
	CHECK_EQ(mitm_get(&m, &fired), 1); /* one connection throughout */
	rig_stop(&e, &m);
}

int main(void)
{
	snprintf(secret, sizeof(secret), "%s/rdmem-mac-secret-%d", test_tmpdir(), (int)getpid());
	write_secret(secret, "a secret the path does not know\n");
	rdmem_log_init("test_frame_mac", 0);
	RUN(test_honest_path);
	RUN(test_flipped_reply_value);
	RUN(test_flipped_reply_status);
	RUN(test_flipped_request_key);
	RUN(test_replayed_request);
	RUN(test_dropped_request);
	RUN(test_reflected_frame);
	RUN(test_refused_frame);
	RUN(test_client_rewrites_its_request);
	unlink(secret);
	return check_done();
}
