/* test_tcp_withdraw.c - taking back a timed-out call from the TCP client
 * (tcp/client.c) without tearing the connection others share, against a
 * server played by the test on a loopback socket.
 *
 *   A reply's value read through the staging buffer (under CLI_DIRECT_MIN,
 *   4 KiB) half in when its call is withdrawn: nothing writes the caller's
 *   buffer any more, so the rest is read and dropped, the connection stays,
 *   and the next call's reply is delivered right.
 *
 *   A large value received straight into the caller's buffer, the server
 *   stalled mid-value: withdrawing would tear (a recv in flight targets the
 *   buffer), rdmem_tcp_client_withdraw_tears says so, and the agent holds
 *   such a call (agent/tcp_actor.c). A review stalled a fake server so and
 *   the call was held for good, which the actor's cap now ends.
 *
 *   A reply for a request of which no byte went out yet is a protocol
 *   error: the call could be withdrawn unsent meanwhile, its slot freed
 *   and reused while the body was read into it. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdmem/util.h"
#include "rdmem/wire.h"
#include "tcp/client.h"
#include "tests/check.h"

#define BIG (1u << 20)

struct peer {
	int lfd, fd;
	uint16_t port;
	struct rdmem_tcp_client *c;
};

static int peer_start(struct peer *p)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	p->c = NULL;
	p->fd = -1;
	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(p->lfd, 1) < 0 || getsockname(p->lfd, (struct sockaddr *)&a, &len) < 0)
		return -1;
	p->port = ntohs(a.sin_port);
	if (rdmem_tcp_client_connect("127.0.0.1", p->port, 2000, &p->c) < 0)
		return -1;
	p->fd = accept(p->lfd, NULL, NULL);
	return p->fd < 0 ? -1 : 0;
}

static void peer_stop(struct peer *p)
{
	if (p->c)
		rdmem_tcp_client_close(p->c);
	if (p->fd >= 0)
		close(p->fd);
	close(p->lfd);
}

static int read_all(int fd, void *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, (uint8_t *)buf + got, n - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* The server's side: reads one GET request (header and key), returns its header. */
static int serve_read_get(struct peer *p, struct rdmem_desc *req)
{
	char key[64];

	if (read_all(p->fd, req, sizeof(*req)) < 0)
		return -1;
	rdmem_desc_from_wire(req);
	return req->key_len <= sizeof(key) ? read_all(p->fd, key, req->key_len) : -1;
}

/* The server's side: a reply header for req with val_len bytes to follow. */
static int serve_reply_header(struct peer *p, const struct rdmem_desc *req, uint32_t val_len)
{
	struct rdmem_desc rep = *req;

	rep.state = RDMEM_FRAME_MAGIC;
	rep.key_len = 0;
	rep.val_len = val_len;
	rep.status = RDMEM_S_OK;
	rdmem_desc_to_wire(&rep);
	return write(p->fd, &rep, sizeof(rep)) == (ssize_t)sizeof(rep) ? 0 : -1;
}

static int serve_bytes(struct peer *p, uint8_t fill, size_t n)
{
	uint8_t *b = malloc(n);
	int ok;

	if (!b)
		return -1;
	memset(b, fill, n);
	ok = write(p->fd, b, n) == (ssize_t)n;
	free(b);
	return ok ? 0 : -1;
}

static void get_call(struct rdmem_tcp_call *t, const char *key, void *reply, uint32_t cap)
{
	memset(t, 0, sizeof(*t));
	t->req.op = RDMEM_OP_KV_GET;
	t->req.path = RDMEM_PATH_TCP;
	t->req.key_len = (uint16_t)strlen(key);
	t->key = key;
	t->reply = reply;
	t->reply_cap = cap;
}

/* Runs the client until call completes or ms pass; 1 if it completed. */
static int pump_until(struct peer *p, struct rdmem_tcp_call *call, int ms)
{
	uint64_t end = rdmem_now_ns() + (uint64_t)ms * 1000000ull;
	struct rdmem_tcp_call *done[8];

	while (rdmem_now_ns() < end) {
		int n = rdmem_tcp_client_progress(p->c, 10, done, 8);

		for (int i = 0; i < n; i++)
			if (done[i] == call)
				return 1;
		if (n < 0)
			return 0;
	}
	return 0;
}

static void test_staged_value_drained_after_withdraw(void)
{
	static uint8_t buf[8192], buf2[8192];
	struct rdmem_tcp_call a, b;
	struct rdmem_desc ra, rb;
	struct peer p;

	REQUIRE(peer_start(&p) == 0);
	get_call(&a, "a", buf, sizeof(buf));
	get_call(&b, "b", buf2, sizeof(buf2));
	REQUIRE(rdmem_tcp_client_submit(p.c, &a) == 0);
	REQUIRE(rdmem_tcp_client_submit(p.c, &b) == 0);
	pump_until(&p, NULL, 50); /* both go out */
	REQUIRE(serve_read_get(&p, &ra) == 0 && serve_read_get(&p, &rb) == 0);
	/* a's 3000-byte value, 1000 bytes of it now. */
	REQUIRE(serve_reply_header(&p, &ra, 3000) == 0 && serve_bytes(&p, 0xaa, 1000) == 0);
	pump_until(&p, NULL, 50);
	CHECK_EQ(rdmem_tcp_client_withdraw_tears(p.c, &a), 0);
	CHECK_EQ(rdmem_tcp_client_withdraw(p.c, &a), 1);
	memset(buf, 0, sizeof(buf));
	REQUIRE(serve_bytes(&p, 0xaa, 2000) == 0);
	REQUIRE(serve_reply_header(&p, &rb, 100) == 0 && serve_bytes(&p, 0xbb, 100) == 0);
	CHECK(pump_until(&p, &b, 2000));
	CHECK_EQ(b.result, 0);
	CHECK_EQ(b.rep.val_len, 100);
	CHECK(buf2[0] == 0xbb && buf2[99] == 0xbb);
	CHECK_EQ(buf[0], 0); /* the withdrawn call's buffer untouched after */
	CHECK_EQ(rdmem_tcp_client_protocol_errors(p.c), 0);
	peer_stop(&p);
}

static void test_direct_value_stalled_tears(void)
{
	static uint8_t big[BIG];
	struct rdmem_tcp_call a;
	struct rdmem_desc ra;
	struct peer p;

	REQUIRE(peer_start(&p) == 0);
	get_call(&a, "big", big, sizeof(big));
	REQUIRE(rdmem_tcp_client_submit(p.c, &a) == 0);
	pump_until(&p, NULL, 50);
	REQUIRE(serve_read_get(&p, &ra) == 0);
	REQUIRE(serve_reply_header(&p, &ra, BIG) == 0 && serve_bytes(&p, 0xcc, 100000) == 0);
	pump_until(&p, NULL, 100); /* the rest goes straight into big: a recv waits there */
	CHECK_EQ(rdmem_tcp_client_withdraw_tears(p.c, &a), 1);
	CHECK(rdmem_tcp_client_holds(p.c, &a));
	peer_stop(&p);
}

int main(void)
{
	rdmem_log_init("test_tcp_withdraw", 0);
	RUN(test_staged_value_drained_after_withdraw);
	RUN(test_direct_value_stalled_tears);
	return check_done();
}
