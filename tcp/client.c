/* client.c - the TCP client on io_uring: one sendmsg and one recv in
 * flight at most, a fixed window of call slots, replies matched by req_id.
 *
 * Requests go out with sendmsg over iovecs that point at the caller's
 * descriptor, key and value (with frame tags: at a private copy of key and
 * value, the bytes that were tagged), many calls per syscall. Replies are
 * read into a staging buffer, which keeps small replies cheap (many per
 * recv); once a large value's header is parsed, the rest of it is received
 * straight into the caller's reply buffer, so at most one staging buffer's
 * worth is copied.
 * req_id = (sequence << 16) | slot: a reply names its slot, and the sequence
 * catches a stale or forged id.
 */
#include "tcp/client.h"
#include "common/uring.h"

#include "rdmem/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp/frame.h"
#include "tcp/frame_mac.h"
#include "tcp/tls.h"
#include "rdmem/util.h"

#define CLI_RBUF       (64u << 10)
#define CLI_DIRECT_MIN (4u << 10) /* bodies at least this long skip the staging buffer */
#define CLI_SEND_CALLS 64u	  /* calls per sendmsg */
#define CLI_SLOT_BITS  16
/* Ciphertext per recv with TLS: one connection per agent, so a large one
 * (fewer recvs for a large value; without TLS it lands in the caller's buffer). */
#define CLI_TLS_IN    (256u << 10)
#define CLI_TLS_CHUNK (1u << 20) /* request bytes encrypted per send */

enum cli_ud { UD_SEND = 1, UD_RECV, UD_WATCH, UD_CANCEL };

struct cli_slot {
	struct rdmem_tcp_call *call; /* NULL: free, or withdrawn (then busy is set) */
	struct rdmem_desc hdr;	     /* the request's header as sent: wire byte order */
	uint64_t req_id;
	int busy;
	int sent;    /* every request byte is with the kernel */
	int replied; /* reply complete while the request was still being sent */
	int result;  /* ... and its result, delivered once sent */
	int tagged;  /* tag holds this request's tag, for sequence number tag_seq */
	uint64_t tag_seq;
	uint8_t tag[RDMEM_FRAME_TAG];
	/* With tags: the key and value as tagged, what goes on the wire. The
	 * caller's bytes may be shared memory its client can still rewrite;
	 * tagging them and letting the kernel read them later would let that
	 * client make the frame fail its MAC and break the connection for all. */
	uint8_t *copy;
	size_t copy_cap;
};

#define CLI_COPY_KEEP (64u << 10) /* a slot keeps a copy buffer this small for reuse */

struct cli_body { /* the reply whose value is being received */
	int active;
	struct rdmem_desc hdr;
	unsigned slot;
	uint32_t got;
	int drain; /* withdrawn call or value over reply_cap: discard the bytes */
};

struct rdmem_tcp_client {
	int fd;
	char peer[300];
	struct io_uring ring;
	int dead;	/* connection lost: calls fail once the kernel is done with them */
	int failed_all; /* every call was handed back after the loss */
	uint64_t protocol_errors;
	/* After AUTH with a secret: frame tags (tcp/frame_mac.h), each way's count. */
	struct rdmem_frame_mac *mac;
	uint64_t tx_seq, rx_seq;
	uint64_t mac_failures;
	/*
	 * With TLS (tcp/tls.h): requests are encrypted into tls_out and sent
	 * from there, so once a batch is encrypted the caller's bytes are no
	 * longer read; ciphertext is received into the session and the
	 * plaintext parsed as without TLS. No frame tags then.
	 */
	struct rdmem_tls *tls;
	uint8_t *tls_out;
	size_t tls_out_len, tls_out_cap, tls_out_sent;
	size_t tls_plain; /* request bytes in tls_out (of the send_batch calls) */
	int tls_err;	  /* why the handshake failed (-errno), 0 if it did not */
	uint64_t tls_record_failures;
	int tls_refused; /* the server sent a fatal alert after the handshake */
	int send_busy;	 /* a send (TLS) or sendmsg is in flight */

	struct cli_slot slots[RDMEM_TCP_CLIENT_WINDOW];
	uint16_t free_slots[RDMEM_TCP_CLIENT_WINDOW];
	unsigned nfree;
	uint64_t seq;

	uint16_t sendq[RDMEM_TCP_CLIENT_WINDOW]; /* slots with unsent bytes, in order */
	unsigned sq_head, sq_len;
	size_t head_off;     /* bytes of the first queued call already sent */
	unsigned send_batch; /* queued calls covered by the sendmsg in flight (0: none) */
	struct iovec iov[CLI_SEND_CALLS * 4]; /* header, key, value, tag */
	struct msghdr msg;

	uint8_t rbuf[CLI_RBUF];
	size_t rlen;
	int recv_busy;
	int recv_direct; /* the recv in flight targets the body's reply buffer */
	struct cli_body body;

	int watch_fd;
	int watch_busy;
	int watch_fired;

	struct rdmem_tcp_call *done_head, *done_tail;
};

static uint64_t ud_of(enum cli_ud kind)
{
	return kind;
}

static struct io_uring_sqe *cli_sqe(struct rdmem_tcp_client *c)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);

	if (!sqe && io_uring_submit(&c->ring) >= 0)
		sqe = io_uring_get_sqe(&c->ring);
	return sqe;
}

static size_t cli_tag_len(const struct rdmem_tcp_client *c)
{
	return c->mac ? RDMEM_FRAME_TAG : 0;
}

static uint64_t cli_call_len(const struct rdmem_tcp_client *c, const struct rdmem_tcp_call *call)
{
	return RDMEM_DESC_SIZE + rdmem_desc_payload_len(&call->req) + cli_tag_len(c);
}

static void cli_push_done(struct rdmem_tcp_client *c, struct rdmem_tcp_call *call, int result)
{
	call->result = result;
	RDMEM_FIFO_PUSH(c->done_head, c->done_tail, call);
}

static void cli_free_slot(struct rdmem_tcp_client *c, unsigned i)
{
	if (c->slots[i].copy_cap > CLI_COPY_KEEP) { /* the kernel is done with it */
		free(c->slots[i].copy);
		c->slots[i].copy = NULL;
		c->slots[i].copy_cap = 0;
	}
	c->slots[i].call = NULL;
	c->slots[i].busy = 0;
	c->slots[i].sent = 0;
	c->slots[i].replied = 0;
	c->slots[i].tagged = 0;
	c->free_slots[c->nfree++] = (uint16_t)i;
}

/* Breaks the connection; calls are failed once no kernel op can touch them. */
static void cli_kill(struct rdmem_tcp_client *c, const char *why)
{
	if (c->dead)
		return;
	rdmem_warn_limited("tcp client %s: connection lost: %s", c->peer, why);
	c->dead = 1;
	shutdown(c->fd, SHUT_RDWR);
}

static void cli_fail_all(struct rdmem_tcp_client *c)
{
	unsigned i;

	if (c->failed_all || c->send_busy || c->recv_busy)
		return;
	c->send_batch = 0; /* with TLS: a batch whose ciphertext never all went */
	for (i = 0; i < RDMEM_TCP_CLIENT_WINDOW; i++) {
		if (!c->slots[i].busy)
			continue;
		if (c->slots[i].call)
			cli_push_done(c, c->slots[i].call, -ECONNRESET);
		cli_free_slot(c, i);
	}
	c->sq_len = 0;
	c->body.active = 0;
	c->failed_all = 1;
}

static void cli_protocol_error(struct rdmem_tcp_client *c, const char *why)
{
	c->protocol_errors++;
	cli_kill(c, why);
}

static void cli_finish(struct rdmem_tcp_client *c, unsigned slot);

/* ---- send ----------------------------------------------------------------- */

/* The value's place in the copy (NULL when there is no copy: no arithmetic on NULL). */
static const uint8_t *cli_copy_val(const struct cli_slot *s, size_t klen)
{
	return s->copy ? s->copy + klen : NULL;
}

/*
 * Requests are tagged in the order they go on the wire, when they first join
 * a send; a withdrawn request that never went out gives its sequence number
 * back (see cli_untag_from).
 */
static int cli_tag(struct rdmem_tcp_client *c, struct cli_slot *s)
{
	const struct rdmem_tcp_call *call = s->call;
	size_t klen = call->req.key_len, vlen = call->req.val_len;

	if (!c->mac || s->tagged)
		return 0;
	if (klen + vlen > s->copy_cap) {
		uint8_t *p = realloc(s->copy, klen + vlen);

		if (!p)
			return -ENOMEM;
		s->copy = p;
		s->copy_cap = klen + vlen;
	}
	if (klen)
		memcpy(s->copy, call->key, klen);
	if (vlen)
		memcpy(s->copy + klen, call->val, vlen);
	s->tag_seq = c->tx_seq++;
	rdmem_frame_mac_sign(c->mac, s->tag_seq, &s->hdr, s->copy, klen, cli_copy_val(s, klen),
			     vlen, s->tag);
	s->tagged = 1;
	return 0;
}

/* Unsent requests from queue position k on lose their tags (they are retagged in order). */
static void cli_untag_from(struct rdmem_tcp_client *c, unsigned k)
{
	for (; k < c->sq_len; k++) {
		struct cli_slot *s =
		    &c->slots[c->sendq[(c->sq_head + k) % RDMEM_TCP_CLIENT_WINDOW]];

		if (!s->tagged)
			break; /* tagged ones form a prefix of the queue */
		if (s->tag_seq < c->tx_seq)
			c->tx_seq = s->tag_seq;
		s->tagged = 0;
	}
}

static void cli_iov_add(struct rdmem_tcp_client *c, unsigned *n, const void *p, size_t len,
			size_t *skip)
{
	if (*skip >= len) {
		*skip -= len;
		return;
	}
	c->iov[*n].iov_base = (uint8_t *)p + *skip;
	c->iov[*n].iov_len = len - *skip;
	*skip = 0;
	(*n)++;
}

/* iovecs for the next calls of the send queue: returns how many calls, 0 when killed. */
static unsigned cli_build_iov(struct rdmem_tcp_client *c, unsigned *niov)
{
	unsigned n = 0, k, calls = RDMEM_MIN(c->sq_len, CLI_SEND_CALLS);
	size_t skip = c->head_off;

	for (k = 0; k < calls; k++) {
		unsigned slot = c->sendq[(c->sq_head + k) % RDMEM_TCP_CLIENT_WINDOW];
		struct cli_slot *s = &c->slots[slot];
		const struct rdmem_tcp_call *call = s->call;
		const uint8_t *key = call->key, *val = call->val;

		if (cli_tag(c, s) < 0) {
			cli_kill(c, "out of memory copying a request to tag");
			return 0;
		}
		if (c->mac) { /* send exactly the bytes that were tagged */
			key = s->copy;
			val = cli_copy_val(s, call->req.key_len);
		}
		cli_iov_add(c, &n, &s->hdr, RDMEM_DESC_SIZE, &skip);
		cli_iov_add(c, &n, key, call->req.key_len, &skip);
		cli_iov_add(c, &n, val, call->req.val_len, &skip);
		cli_iov_add(c, &n, s->tag, cli_tag_len(c), &skip);
	}
	*niov = n;
	return calls;
}

/* Cuts the iovecs to at most cap bytes: their plaintext length. */
static size_t cli_iov_cap(struct rdmem_tcp_client *c, unsigned *n, size_t cap)
{
	size_t sum = 0;
	unsigned i;

	for (i = 0; i < *n && sum < cap; i++) {
		if (c->iov[i].iov_len > cap - sum)
			c->iov[i].iov_len = cap - sum;
		sum += c->iov[i].iov_len;
	}
	*n = i;
	return sum;
}

/* How many calls of the send queue the next plain bytes (from head_off) reach. */
static unsigned cli_calls_in(const struct rdmem_tcp_client *c, size_t plain)
{
	unsigned k = 0;

	plain += c->head_off;
	while (k < c->sq_len && plain) {
		unsigned slot = c->sendq[(c->sq_head + k) % RDMEM_TCP_CLIENT_WINDOW];
		uint64_t len = cli_call_len(c, c->slots[slot].call);

		k++;
		if (plain <= len)
			break;
		plain -= len;
	}
	return k;
}

/*
 * With TLS: once the last ciphertext is all sent, the next calls are
 * encrypted (with any handshake or alert bytes the session has waiting)
 * and sent from tls_out; a short send resumes where it stopped. At most
 * CLI_TLS_CHUNK bytes of them at a time: a batch of large values is not
 * held twice more (GnuTLS's cork buffer, all its ciphertext) while it goes;
 * the rest follows once that much is with the kernel (cli_sent: head_off).
 */
static void cli_tls_arm_send(struct rdmem_tcp_client *c)
{
	struct io_uring_sqe *sqe;
	unsigned n = 0;

	if (c->tls_out_len == 0) {
		if (rdmem_tls_ready(c->tls) && c->sq_len) {
			if (!cli_build_iov(c, &n))
				return;
			c->tls_plain = cli_iov_cap(c, &n, CLI_TLS_CHUNK);
			c->send_batch = cli_calls_in(c, c->tls_plain);
			if (rdmem_tls_sendv(c->tls, c->iov, n) < 0) {
				c->send_batch = 0;
				cli_kill(c, "TLS could not encrypt a request");
				return;
			}
		}
		rdmem_tls_out_take(c->tls, &c->tls_out, &c->tls_out_len, &c->tls_out_cap);
		c->tls_out_sent = 0;
	}
	if (c->tls_out_len == c->tls_out_sent)
		return;
	sqe = cli_sqe(c);
	if (!sqe) {
		cli_kill(c, "io_uring submission queue full");
		return;
	}
	io_uring_prep_send(sqe, c->fd, c->tls_out + c->tls_out_sent,
			   c->tls_out_len - c->tls_out_sent, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, ud_of(UD_SEND));
	c->send_busy = 1;
}

static void cli_arm_send(struct rdmem_tcp_client *c)
{
	struct io_uring_sqe *sqe;
	unsigned n = 0, calls;

	if (c->dead || c->send_busy)
		return;
	if (c->tls) {
		cli_tls_arm_send(c);
		return;
	}
	if (!c->sq_len || !(calls = cli_build_iov(c, &n)))
		return;
	sqe = cli_sqe(c);
	if (!sqe) {
		cli_kill(c, "io_uring submission queue full");
		return;
	}
	memset(&c->msg, 0, sizeof(c->msg));
	c->msg.msg_iov = c->iov;
	c->msg.msg_iovlen = n;
	io_uring_prep_sendmsg(sqe, c->fd, &c->msg, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, ud_of(UD_SEND));
	c->send_batch = calls;
	c->send_busy = 1;
}

/* left request bytes of the send queue are with the kernel. */
static void cli_sent(struct rdmem_tcp_client *c, size_t left)
{
	while (left && c->sq_len) {
		unsigned slot = c->sendq[c->sq_head];
		size_t rest = cli_call_len(c, c->slots[slot].call) - c->head_off;
		size_t take = RDMEM_MIN(rest, left);

		c->head_off += take;
		left -= take;
		if (take == rest) {
			c->slots[slot].sent = 1;
			c->sq_head = (c->sq_head + 1) % RDMEM_TCP_CLIENT_WINDOW;
			c->sq_len--;
			c->head_off = 0;
			cli_finish(c, slot);
		}
	}
}

static void cli_on_send(struct rdmem_tcp_client *c, int res)
{
	c->send_busy = 0;
	if (res <= 0) {
		c->send_batch = 0;
		cli_kill(c, res ? strerror(-res) : "send made no progress");
		return;
	}
	if (!c->tls) {
		c->send_batch = 0;
		cli_sent(c, (size_t)res);
		return;
	}
	c->tls_out_sent += (size_t)res;
	if (c->tls_out_sent < c->tls_out_len)
		return; /* cli_tls_arm_send sends the rest */
	c->tls_out_len = c->tls_out_sent = 0;
	if (c->send_batch) { /* all of the batch's records are with the kernel */
		c->send_batch = 0;
		cli_sent(c, c->tls_plain);
	}
}

/* ---- receive -------------------------------------------------------------- */

static void cli_arm_recv(struct rdmem_tcp_client *c)
{
	struct io_uring_sqe *sqe;
	struct cli_body *b = &c->body;

	if (c->dead || c->recv_busy)
		return;
	if (c->tls && !rdmem_tls_in_empty(c->tls))
		return; /* the session has not taken all of the last recv yet */
	sqe = cli_sqe(c);
	if (!sqe) {
		cli_kill(c, "io_uring submission queue full");
		return;
	}
	c->recv_busy = 1;
	if (c->tls) {
		size_t len;
		uint8_t *p = rdmem_tls_in_space(c->tls, &len);

		c->recv_direct = 0;
		io_uring_prep_recv(sqe, c->fd, p, len, 0);
		io_uring_sqe_set_data64(sqe, ud_of(UD_RECV));
		return;
	}
	c->recv_direct =
	    b->active && !b->drain && c->rlen == 0 && b->hdr.val_len - b->got >= CLI_DIRECT_MIN;
	if (c->recv_direct) {
		struct rdmem_tcp_call *call = c->slots[b->slot].call;

		io_uring_prep_recv(sqe, c->fd, (uint8_t *)call->reply + b->got,
				   b->hdr.val_len - b->got, 0);
	} else {
		io_uring_prep_recv(sqe, c->fd, c->rbuf + c->rlen, CLI_RBUF - c->rlen, 0);
	}
	io_uring_sqe_set_data64(sqe, ud_of(UD_RECV));
}

/* Hands a call back once both its reply arrived and the kernel is done sending it. */
static void cli_finish(struct rdmem_tcp_client *c, unsigned slot)
{
	struct cli_slot *s = &c->slots[slot];

	if (!s->sent || !s->replied)
		return;
	if (s->call)
		cli_push_done(c, s->call, s->result);
	cli_free_slot(c, slot);
}

/* The reply's last tag byte is in: 0 when it is authentic, else the connection goes. */
static int cli_check_tag(struct rdmem_tcp_client *c)
{
	uint64_t seq = c->rx_seq++;

	if (rdmem_frame_mac_verify(c->mac) == 0)
		return 0;
	c->mac_failures++;
	rdmem_warn_limited("tcp client %s: reply %llu fails its MAC (changed, replayed, dropped or "
			   "reflected on the way)",
			   c->peer, (unsigned long long)seq);
	cli_kill(c, "a reply failed its MAC");
	return -1;
}

/*
 * A refused request (over the cap) is answered as soon as the server has its
 * header, so a reply can beat the end of our own send.
 */
static void cli_complete_body(struct rdmem_tcp_client *c)
{
	struct cli_body *b = &c->body;
	struct cli_slot *s = &c->slots[b->slot];

	if (s->call) {
		s->call->rep = b->hdr;
		s->result = b->hdr.val_len > s->call->reply_cap ? -EMSGSIZE : 0;
	}
	s->replied = 1;
	b->active = 0;
	cli_finish(c, b->slot);
}

/* Where slot stands in the send queue (sq_len: not queued). */
static unsigned cli_queue_pos(const struct rdmem_tcp_client *c, unsigned slot)
{
	unsigned k;

	for (k = 0; k < c->sq_len; k++)
		if (c->sendq[(c->sq_head + k) % RDMEM_TCP_CLIENT_WINDOW] == slot)
			break;
	return k;
}

/* 1 while slot's request is in the send in flight (the kernel reads the
 * caller's buffers until it completes; with TLS it is in the ciphertext) or
 * half sent. */
static int cli_on_the_wire(const struct rdmem_tcp_client *c, unsigned slot)
{
	unsigned k;

	if (c->slots[slot].sent)
		return 0;
	k = cli_queue_pos(c, slot);
	return k < c->send_batch || (k == 0 && c->head_off);
}

/* 1 while a recv in flight writes slot's reply value into the caller's
 * buffer. Without one, the rest of the value can be read and dropped. */
static int cli_receiving_into(const struct rdmem_tcp_client *c, unsigned slot)
{
	return c->body.active && c->body.slot == slot && !c->body.drain && c->recv_busy &&
	       c->recv_direct;
}

/* Validates a reply header and starts its body; -1 on a protocol error. */
static int cli_start_body(struct rdmem_tcp_client *c, const uint8_t *p)
{
	struct cli_body *b = &c->body;
	struct rdmem_tcp_call *call;
	unsigned slot;

	memcpy(&b->hdr, p, RDMEM_DESC_SIZE); /* the stream is unaligned */
	rdmem_desc_from_wire(&b->hdr);
	slot = (unsigned)(b->hdr.req_id & ((1u << CLI_SLOT_BITS) - 1));
	if (b->hdr.state != RDMEM_FRAME_MAGIC || b->hdr.key_len ||
	    b->hdr.val_len > RDMEM_FRAME_DRAIN_LIMIT || b->hdr.status >= RDMEM_S__WIRE) {
		cli_protocol_error(c, "malformed reply header");
		return -1;
	}
	if (slot >= RDMEM_TCP_CLIENT_WINDOW || !c->slots[slot].busy ||
	    c->slots[slot].req_id != b->hdr.req_id || c->slots[slot].replied) {
		cli_protocol_error(c, "reply with an unknown req_id");
		return -1;
	}
	/* A reply may beat the end of its request (a refusal after the header),
	 * never its first byte: the slot could be withdrawn unsent meanwhile. */
	if (!c->slots[slot].sent && !cli_on_the_wire(c, slot)) {
		cli_protocol_error(c, "reply to a request not sent yet");
		return -1;
	}
	call = c->slots[slot].call;
	if (call && b->hdr.op != call->req.op) {
		cli_protocol_error(c, "reply op differs from the request's");
		return -1;
	}
	b->active = 1;
	b->slot = slot;
	b->got = 0;
	b->drain = !call || b->hdr.val_len > call->reply_cap;
	if (c->mac) /* completes after its tag, in cli_parse */
		rdmem_frame_mac_begin(c->mac, c->rx_seq, p, b->hdr.val_len);
	else if (!b->hdr.val_len)
		cli_complete_body(c);
	return 0;
}

static void cli_parse(struct rdmem_tcp_client *c)
{
	struct cli_body *b = &c->body;
	size_t pos = 0;

	while (!c->dead) {
		if (b->active) {
			uint32_t take = (uint32_t)RDMEM_MIN(c->rlen - pos, b->hdr.val_len - b->got);

			if (!b->drain && take)
				memcpy((uint8_t *)c->slots[b->slot].call->reply + b->got,
				       c->rbuf + pos, take);
			if (c->mac && take) /* drained bytes too: the tag covers them */
				rdmem_frame_mac_absorb(c->mac, c->rbuf + pos, take);
			b->got += take;
			pos += take;
			if (b->got < b->hdr.val_len)
				break;
			if (c->mac) {
				pos += rdmem_frame_mac_absorb(c->mac, c->rbuf + pos, c->rlen - pos);
				if (!rdmem_frame_mac_done(c->mac))
					break;
				if (cli_check_tag(c) < 0)
					return;
			}
			cli_complete_body(c);
			continue;
		}
		if (c->rlen - pos < RDMEM_DESC_SIZE)
			break;
		if (cli_start_body(c, c->rbuf + pos) < 0)
			return;
		pos += RDMEM_DESC_SIZE;
	}
	memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
	c->rlen -= pos;
}

static void cli_tls_input(struct rdmem_tcp_client *c);

/* n reply bytes landed: in the caller's buffer (recv_direct) or at rbuf + rlen. */
static void cli_take(struct rdmem_tcp_client *c, size_t res)
{
	if (c->recv_direct) {
		if (c->mac) /* the tag comes after, into rbuf: cli_parse checks it */
			rdmem_frame_mac_absorb(
			    c->mac, (uint8_t *)c->slots[c->body.slot].call->reply + c->body.got,
			    (size_t)res);
		c->body.got += (uint32_t)res;
		if (c->body.got == c->body.hdr.val_len && !c->mac)
			cli_complete_body(c);
		return;
	}
	c->rlen += res;
	cli_parse(c);
}

/* Without TLS, a reply that starts as a TLS alert record (type 21, version 3.x). */
static int cli_saw_tls(const struct rdmem_tcp_client *c)
{
	return !c->tls && c->rlen >= 2 && c->rbuf[0] == 0x15 && c->rbuf[1] == 0x03;
}

static void cli_on_recv(struct rdmem_tcp_client *c, int res)
{
	c->recv_busy = 0;
	if (res <= 0) {
		if (!c->dead)
			cli_kill(c, res		     ? strerror(-res)
				    : cli_saw_tls(c) ? "the server answered in TLS: it runs "
						       "--tls-cert, give this agent --tls-ca"
						     : "server closed the connection");
		return;
	}
	if (c->dead)
		return;
	if (c->tls) {
		rdmem_tls_in_add(c->tls, (size_t)res);
		cli_tls_input(c);
		return;
	}
	cli_take(c, (size_t)res);
}

/* Where the next plaintext goes: as cli_arm_recv picks for a socket recv. */
static uint8_t *cli_tls_dest(struct rdmem_tcp_client *c, size_t *room)
{
	struct cli_body *b = &c->body;

	c->recv_direct =
	    b->active && !b->drain && c->rlen == 0 && b->hdr.val_len - b->got >= CLI_DIRECT_MIN;
	if (c->recv_direct) {
		*room = b->hdr.val_len - b->got;
		return (uint8_t *)c->slots[b->slot].call->reply + b->got;
	}
	*room = CLI_RBUF - c->rlen;
	return c->rbuf + c->rlen;
}

/* Ciphertext arrived: the handshake moves on, then every whole record is read. */
static void cli_tls_input(struct rdmem_tcp_client *c)
{
	int r;

	if (!rdmem_tls_ready(c->tls)) {
		r = rdmem_tls_handshake(c->tls);
		if (r == -EAGAIN)
			return;
		if (r < 0) {
			c->tls_err = r;
			cli_kill(c, rdmem_tls_why(c->tls));
			return;
		}
	}
	while (!c->dead) {
		size_t room;
		uint8_t *p = cli_tls_dest(c, &room);
		ssize_t n = rdmem_tls_recv(c->tls, p, room);

		if (n == -EAGAIN)
			return;
		if (n == 0) {
			cli_kill(c, "the server ended the TLS session");
			return;
		}
		if (n == -EACCES) {
			c->tls_refused = 1;
			rdmem_err_limited("tcp: %s refused our TLS session (%s): does it require a "
					  "client certificate (--tls-cert, --tls-key) signed by "
					  "another CA?",
					  c->peer, rdmem_tls_why(c->tls));
			cli_kill(c, rdmem_tls_why(c->tls));
			return;
		}
		if (n < 0) {
			c->tls_record_failures++;
			rdmem_warn_limited("tcp client %s: a TLS record failed (%s): changed on "
					   "the way, or not from the server",
					   c->peer, rdmem_tls_why(c->tls));
			cli_kill(c, "a TLS record failed");
			return;
		}
		cli_take(c, (size_t)n);
	}
}

/* ---- the loop ------------------------------------------------------------- */

static void cli_arm_watch(struct rdmem_tcp_client *c)
{
	struct io_uring_sqe *sqe;

	if (c->watch_fd < 0 || c->watch_busy)
		return;
	sqe = cli_sqe(c);
	if (!sqe)
		return;
	io_uring_prep_poll_add(sqe, c->watch_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, ud_of(UD_WATCH));
	c->watch_busy = 1;
}

static void cli_on_cqe(struct rdmem_tcp_client *c, uint64_t ud, int res)
{
	switch (ud) {
	case UD_SEND:
		cli_on_send(c, res);
		break;
	case UD_RECV:
		cli_on_recv(c, res);
		break;
	case UD_WATCH:
		c->watch_busy = 0;
		if (res != -ECANCELED)
			c->watch_fired = 1;
		break;
	default:
		break;
	}
}

static unsigned cli_reap(struct rdmem_tcp_client *c)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&c->ring, head, cqe)
	{
		cli_on_cqe(c, cqe->user_data, cqe->res);
		n++;
	}
	io_uring_cq_advance(&c->ring, n);
	return n;
}

static int64_t cli_ms_left(uint64_t deadline_ns)
{
	uint64_t now = rdmem_now_ns();

	return now >= deadline_ns ? 0 : (int64_t)((deadline_ns - now + 999999) / 1000000);
}

/* What cli_pump() waits for. */
enum cli_until {
	UNTIL_ANY,  /* any completion queued, or the watched fd readable (progress) */
	UNTIL_CALL, /* this call completed (sync call) */
	UNTIL_SLOT, /* a window slot is free (sync call into a full window) */
	UNTIL_TLS,  /* the TLS handshake finished (or the connection died) */
};

static int cli_on_done_list(const struct rdmem_tcp_client *c, const struct rdmem_tcp_call *call)
{
	const struct rdmem_tcp_call *p;

	for (p = c->done_head; p; p = p->next)
		if (p == call)
			return 1;
	return 0;
}

static int cli_done_waiting(struct rdmem_tcp_client *c, enum cli_until until,
			    const struct rdmem_tcp_call *want)
{
	if (c->failed_all)
		return 1;
	switch (until) {
	case UNTIL_ANY:
		return c->done_head || c->watch_fired;
	case UNTIL_CALL:
		return cli_on_done_list(c, want);
	case UNTIL_SLOT:
		return c->nfree > 0;
	case UNTIL_TLS:
		return c->dead || rdmem_tls_ready(c->tls);
	}
	return 1;
}

/*
 * Runs I/O until the condition holds or the time is up (timeout_ms < 0: no
 * limit). Returns 0, or a fatal io_uring error.
 */
static int cli_pump(struct rdmem_tcp_client *c, int timeout_ms, enum cli_until until,
		    const struct rdmem_tcp_call *want)
{
	uint64_t deadline =
	    rdmem_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;

	for (;;) {
		struct __kernel_timespec ts;
		struct io_uring_cqe *cqe;
		unsigned reaped;
		int64_t left;
		int ret;

		cli_arm_send(c);
		cli_arm_recv(c);
		if (until == UNTIL_ANY)
			cli_arm_watch(c);
		if (c->dead)
			cli_fail_all(c);
		ret = io_uring_submit(&c->ring);
		if (ret < 0 && ret != -EINTR && ret != -EBUSY)
			return ret;
		reaped = cli_reap(c);
		if (c->dead)
			cli_fail_all(c);
		if (cli_done_waiting(c, until, want))
			return 0;
		if (reaped)
			continue; /* completions may need their next op armed before we sleep */
		left = timeout_ms < 0 ? -1 : cli_ms_left(deadline);
		if (left == 0)
			return 0;
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (left % 1000) * 1000000;
		ret = io_uring_wait_cqe_timeout(&c->ring, &cqe, left < 0 ? NULL : &ts);
		if (ret < 0 && ret != -ETIME && ret != -EINTR)
			return ret;
	}
}

static int cli_pop_done(struct rdmem_tcp_client *c, struct rdmem_tcp_call **done, int max)
{
	int n = 0;

	while (n < max && c->done_head) {
		struct rdmem_tcp_call *call = c->done_head;

		c->done_head = call->next;
		if (!c->done_head)
			c->done_tail = NULL;
		call->next = NULL;
		done[n++] = call;
	}
	return n;
}

int rdmem_tcp_client_progress(struct rdmem_tcp_client *c, int timeout_ms,
			      struct rdmem_tcp_call **done, int max)
{
	int n, ret;

	if (max <= 0 || !done)
		return -EINVAL;
	if (!c->done_head) {
		ret = cli_pump(c, timeout_ms, UNTIL_ANY, NULL);
		if (ret < 0) {
			rdmem_err("tcp client %s: io_uring: %s", c->peer, strerror(-ret));
			cli_kill(c, "io_uring failed");
			return ret;
		}
	}
	c->watch_fired = 0;
	n = cli_pop_done(c, done, max);
	if (n == 0 && c->failed_all)
		return -ECONNRESET;
	return n;
}

int rdmem_tcp_client_submit(struct rdmem_tcp_client *c, struct rdmem_tcp_call *call)
{
	unsigned slot;

	if (c->dead)
		return -ECONNRESET;
	if ((call->req.key_len && !call->key) || (call->req.val_len && !call->val) ||
	    (call->reply_cap && !call->reply) || call->req.key_len > RDMEM_MAX_KEY ||
	    call->req.op == 0 || call->req.op >= RDMEM_OP__COUNT)
		return -EINVAL;
	if (!c->nfree)
		return -EAGAIN;
	slot = c->free_slots[--c->nfree];
	c->seq++;
	call->req.state = RDMEM_FRAME_MAGIC;
	call->req.req_id = (c->seq << CLI_SLOT_BITS) | slot;
	call->result = 0;
	call->next = NULL;
	c->slots[slot].call = call;
	c->slots[slot].req_id = call->req.req_id;
	c->slots[slot].hdr = call->req; /* what goes out: wire bytes */
	rdmem_desc_to_wire(&c->slots[slot].hdr);
	c->slots[slot].busy = 1;
	c->slots[slot].sent = 0;
	c->slots[slot].replied = 0;
	c->sendq[(c->sq_head + c->sq_len) % RDMEM_TCP_CLIENT_WINDOW] = (uint16_t)slot;
	c->sq_len++;
	return 0;
}

/* Takes call off the done list if it is there. */
static int cli_take_done(struct rdmem_tcp_client *c, struct rdmem_tcp_call *call)
{
	struct rdmem_tcp_call **link, *prev = NULL;

	for (link = &c->done_head; *link; prev = *link, link = &(*link)->next) {
		if (*link != call)
			continue;
		*link = call->next;
		if (c->done_tail == call)
			c->done_tail = prev;
		call->next = NULL;
		return 1;
	}
	return 0;
}

/* After cli_kill(): returns once no kernel op can touch a caller's buffer. */
static void cli_wait_idle(struct rdmem_tcp_client *c)
{
	while (c->send_busy || c->recv_busy) {
		struct io_uring_cqe *cqe;

		io_uring_submit(&c->ring);
		if (io_uring_wait_cqe(&c->ring, &cqe) < 0)
			break;
		cli_reap(c);
	}
}

int rdmem_tcp_client_withdraw_tears(const struct rdmem_tcp_client *c,
				    const struct rdmem_tcp_call *call)
{
	unsigned slot = (unsigned)(call->req.req_id & ((1u << CLI_SLOT_BITS) - 1));

	return rdmem_tcp_client_holds(c, call) &&
	       (cli_on_the_wire(c, slot) || cli_receiving_into(c, slot));
}

/* A timed-out call leaves the window; only a call the kernel still reads or
 * writes tears the stream (rdmem_tcp_client_withdraw_tears). Returns 0 if
 * the call completed while the kernel let go of it (it is on the done list,
 * progress() hands it back), else 1: the client touches it no more. */
static int cli_withdraw(struct rdmem_tcp_client *c, struct rdmem_tcp_call *call)
{
	unsigned slot = (unsigned)(call->req.req_id & ((1u << CLI_SLOT_BITS) - 1)), k;
	int on_wire;

	if (cli_take_done(c, call) || c->slots[slot].call != call)
		return 1;
	on_wire = cli_on_the_wire(c, slot);
	if (on_wire || cli_receiving_into(c, slot)) {
		cli_kill(c, on_wire ? "a call timed out half-sent"
				    : "a call timed out while its reply arrived");
		cli_wait_idle(c);
		if (cli_on_done_list(c, call)) /* its send and reply ended in the wait */
			return 0;
	}
	if (c->body.active && c->body.slot == slot)
		c->body.drain = 1; /* the rest of its value is read and dropped */
	if (c->slots[slot].sent || on_wire) {
		c->slots[slot].call = NULL; /* its reply will be drained, or the slot failed */
		return 1;
	}
	k = cli_queue_pos(c, slot);
	cli_untag_from(c, k);
	for (; k + 1 < c->sq_len; k++)
		c->sendq[(c->sq_head + k) % RDMEM_TCP_CLIENT_WINDOW] =
		    c->sendq[(c->sq_head + k + 1) % RDMEM_TCP_CLIENT_WINDOW];
	c->sq_len--;
	if (c->body.active && c->body.slot == slot) {
		/* A reply already coming for a request a short send left unsent (a
		 * server's lie): the slot stays out of use until that body ends, so
		 * its header is never stamped on the slot's next call. */
		c->slots[slot].call = NULL;
		c->slots[slot].sent = 1;
		return 1;
	}
	cli_free_slot(c, slot);
	return 1;
}

int rdmem_tcp_client_holds(const struct rdmem_tcp_client *c, const struct rdmem_tcp_call *call)
{
	unsigned slot = (unsigned)(call->req.req_id & ((1u << CLI_SLOT_BITS) - 1));

	return slot < RDMEM_TCP_CLIENT_WINDOW && c->slots[slot].busy && c->slots[slot].call == call;
}

int rdmem_tcp_client_withdraw(struct rdmem_tcp_client *c, struct rdmem_tcp_call *call)
{
	return rdmem_tcp_client_holds(c, call) && cli_withdraw(c, call);
}

int rdmem_tcp_client_abort(struct rdmem_tcp_client *c, struct rdmem_tcp_call **done, int max)
{
	if (max <= 0 || !done)
		return -EINVAL;
	cli_kill(c, "closed by its owner");
	cli_wait_idle(c);
	/* No send or receive in flight now, so every busy slot is failed. */
	cli_fail_all(c);
	return cli_pop_done(c, done, max);
}

int rdmem_tcp_client_call(struct rdmem_tcp_client *c, struct rdmem_tcp_call *call, int timeout_ms)
{
	uint64_t deadline =
	    rdmem_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
	int ret;

	while ((ret = rdmem_tcp_client_submit(c, call)) == -EAGAIN) {
		int64_t left = timeout_ms < 0 ? -1 : cli_ms_left(deadline);

		if (left == 0)
			return call->result = -ETIMEDOUT;
		ret = cli_pump(c, (int)left, UNTIL_SLOT, NULL);
		if (ret < 0)
			return call->result = ret;
	}
	if (ret < 0)
		return call->result = ret;
	for (;;) {
		int64_t left = timeout_ms < 0 ? -1 : cli_ms_left(deadline);

		/* Others' completions stay on the done list for progress(). */
		if (cli_take_done(c, call))
			return call->result;
		if (left == 0) {
			if (!cli_withdraw(c, call) && cli_take_done(c, call))
				return call->result; /* it ended while the kernel let go */
			return call->result = -ETIMEDOUT;
		}
		ret = cli_pump(c, (int)left, UNTIL_CALL, call);
		if (ret < 0) {
			rdmem_err("tcp client %s: io_uring: %s", c->peer, strerror(-ret));
			cli_kill(c, "io_uring failed");
			cli_wait_idle(c);
			if (!cli_withdraw(c, call))
				cli_take_done(c, call);
			return call->result = ret;
		}
	}
}

int rdmem_tcp_client_watch(struct rdmem_tcp_client *c, int fd)
{
	struct io_uring_sqe *sqe;

	if (c->watch_busy) {
		sqe = cli_sqe(c);
		if (!sqe)
			return -EBUSY;
		io_uring_prep_poll_remove(sqe, ud_of(UD_WATCH));
		io_uring_sqe_set_data64(sqe, ud_of(UD_CANCEL));
		io_uring_submit(&c->ring);
	}
	c->watch_fd = fd;
	return 0;
}

int rdmem_tcp_client_inflight(struct rdmem_tcp_client *c)
{
	return (int)(RDMEM_TCP_CLIENT_WINDOW - c->nfree);
}

uint64_t rdmem_tcp_client_protocol_errors(struct rdmem_tcp_client *c)
{
	return c->protocol_errors;
}

uint64_t rdmem_tcp_client_mac_failures(struct rdmem_tcp_client *c)
{
	return c->mac_failures;
}

/* ---- connect and close ---------------------------------------------------- */

/*
 * A cut link or a vanished host sends no RST: without these the connection
 * would look alive for the kernel's ~15 minutes of retransmissions. Unacked
 * data for 3 s, or 3 unanswered probes after 5 s idle, end it, and the
 * caller redials.
 */
static int tcp_client_dead_peer_timers(int fd)
{
	int one = 1, idle = 5, intvl = 1, cnt = 3;
	unsigned user_timeout_ms = 3000;

	if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
		       sizeof(user_timeout_ms)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) < 0)
		return -1;
	return 0;
}

static int cli_connect_one(const struct addrinfo *ai, int timeout_ms)
{
	struct pollfd p;
	socklen_t len = sizeof(int);
	int fd, err = 0, one = 1;

	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			err = -errno;
			goto fail;
		}
		p.fd = fd;
		p.events = POLLOUT;
		err = poll(&p, 1, timeout_ms);
		if (err == 0) {
			err = -ETIMEDOUT;
			goto fail;
		}
		if (err < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
			err = -errno;
			goto fail;
		}
		if (err) {
			err = -err;
			goto fail;
		}
	}
	/* io_uring waits for a blocking socket by itself; O_NONBLOCK was for connect. */
	if (fcntl(fd, F_SETFL, 0) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    tcp_client_dead_peer_timers(fd) < 0) {
		err = -errno;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return err;
}

int rdmem_tcp_client_connect(const char *host, uint16_t port, int timeout_ms,
			     struct rdmem_tcp_client **out)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	struct rdmem_tcp_client *c;
	char ports[8];
	int fd = -ENOENT, ret;
	unsigned i;

	snprintf(ports, sizeof(ports), "%u", port);
	ret = getaddrinfo(host, ports, &hints, &res);
	if (ret) {
		rdmem_err("tcp client: cannot resolve %s:%u: %s", host, port, gai_strerror(ret));
		return -EHOSTUNREACH;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = cli_connect_one(ai, timeout_ms < 0 ? -1 : timeout_ms);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		rdmem_err("tcp client: cannot connect to %s:%u: %s", host, port, strerror(-fd));
		return fd;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	ret = io_uring_queue_init(16, &c->ring, 0);
	if (ret < 0) {
		rdmem_err("tcp client %s:%u: io_uring_queue_init: %s", host, port, strerror(-ret));
		close(fd);
		free(c);
		return ret;
	}
	rdmem_uring_tsan(&c->ring);
	c->fd = fd;
	c->watch_fd = -1;
	snprintf(c->peer, sizeof(c->peer), "%s:%u", host, port);
	for (i = 0; i < RDMEM_TCP_CLIENT_WINDOW; i++)
		c->free_slots[i] = (uint16_t)(RDMEM_TCP_CLIENT_WINDOW - 1 - i);
	c->nfree = RDMEM_TCP_CLIENT_WINDOW;
	*out = c;
	return 0;
}

void rdmem_tcp_client_close(struct rdmem_tcp_client *c)
{
	struct rdmem_tcp_call *call;
	unsigned i;

	if (!c)
		return;
	c->dead = 1;
	shutdown(c->fd, SHUT_RDWR);
	rdmem_tcp_client_watch(c, -1);
	/* The kernel may still read request bytes or write reply bytes: wait it out. */
	while (c->send_busy || c->recv_busy || c->watch_busy) {
		struct io_uring_cqe *cqe;

		io_uring_submit(&c->ring);
		if (io_uring_wait_cqe(&c->ring, &cqe) < 0)
			break;
		cli_reap(c);
	}
	for (i = 0; i < RDMEM_TCP_CLIENT_WINDOW; i++)
		if (c->slots[i].busy && c->slots[i].call)
			c->slots[i].call->result = -ECONNRESET;
	for (call = c->done_head; call; call = call->next)
		call->result = -ECONNRESET;
	io_uring_queue_exit(&c->ring);
	close(c->fd);
	rdmem_frame_mac_free(c->mac);
	rdmem_tls_free(c->tls);
	free(c->tls_out);
	for (i = 0; i < RDMEM_TCP_CLIENT_WINDOW; i++)
		free(c->slots[i].copy);
	free(c);
}

int rdmem_tcp_client_auth(struct rdmem_tcp_client *c, struct rdmem_auth *auth, int timeout_ms)
{
	struct rdmem_auth_tcp tok;
	struct rdmem_auth_tcp_reply theirs;
	struct rdmem_tcp_call call;
	uint8_t bind[RDMEM_AUTH_BINDING], *b = NULL;
	int ret;

	if (c->mac || rdmem_tcp_client_inflight(c))
		return -EINVAL; /* the first call of a connection, and only once */
	/* Under TLS both proofs are bound to this session (rdmem/auth.h). */
	if (c->tls && rdmem_tls_binding(c->tls, (b = bind), sizeof(bind)) < 0) {
		rdmem_err("tcp: AUTH with %s: %s", c->peer, rdmem_tls_why(c->tls));
		return -EPROTO;
	}
	tok.nonce = rdmem_le64(rdmem_auth_nonce()); /* the wire bytes the MACs cover */
	rdmem_auth_tcp_proof(auth, 0, tok.nonce, 0, b, tok.mac);
	memset(&call, 0, sizeof(call));
	call.req.op = RDMEM_OP_AUTH;
	call.req.path = RDMEM_PATH_TCP;
	call.req.val_len = sizeof(tok);
	call.val = &tok;
	call.reply = &theirs;
	call.reply_cap = sizeof(theirs);
	ret = rdmem_tcp_client_call(c, &call, timeout_ms);
	if (ret == -EMSGSIZE ||
	    (ret == 0 && call.rep.status == RDMEM_S_OK && call.rep.val_len == RDMEM_AUTH_MAC)) {
		rdmem_err("tcp: the server %s answers AUTH as wire version 2 did (no per-frame "
			  "MACs); this agent needs version %d: upgrade the server",
			  c->peer, RDMEM_WIRE_VERSION);
		return -EPROTO;
	}
	if (ret < 0)
		return ret;
	if (call.rep.status != RDMEM_S_OK || call.rep.val_len != sizeof(theirs) ||
	    rdmem_auth_tcp_check(auth, 1, tok.nonce, theirs.nonce, b, theirs.mac) < 0) {
		rdmem_err("tcp: the server %s (status %s)",
			  call.rep.status == RDMEM_S_OK ? "did not prove the shared secret"
							: "refused our proof of the shared secret",
			  call.rep.status == RDMEM_S_OK ? "ok" : "denied");
		return -EACCES;
	}
	/* From the next frame on, both ways, every frame carries its tag; under
	 * TLS its records authenticate every byte already (as the server does). */
	if (c->tls)
		return 0;
	c->mac = rdmem_frame_mac_tcp(auth, tok.nonce, theirs.nonce, 0);
	return c->mac ? 0 : -ENOMEM;
}

int rdmem_tcp_client_starttls(struct rdmem_tcp_client *c, struct rdmem_tls_ctx *x, const char *host,
			      int timeout_ms)
{
	int ret;

	if (c->tls || c->mac || rdmem_tcp_client_inflight(c))
		return -EINVAL; /* before any call, once */
	ret = rdmem_tls_new(x, host, CLI_TLS_IN, &c->tls);
	if (ret < 0)
		return ret;
	ret = rdmem_tls_handshake(c->tls); /* our ClientHello, into tls_out */
	if (ret != -EAGAIN) {
		rdmem_err_limited("tcp: TLS with %s cannot start: %s", c->peer,
				  rdmem_tls_why(c->tls));
		return ret ? ret : -EPROTO;
	}
	ret = cli_pump(c, timeout_ms, UNTIL_TLS, NULL);
	if (ret < 0)
		return ret;
	if (rdmem_tls_ready(c->tls)) {
		rdmem_info("tcp: TLS with %s: %s", c->peer, rdmem_tls_desc(c->tls));
		return 0;
	}
	if (c->tls_err) {
		rdmem_err_limited("tcp: TLS with %s failed: %s", c->peer, rdmem_tls_why(c->tls));
		return c->tls_err;
	}
	if (c->dead) {
		rdmem_err_limited("tcp: %s closed the connection during the TLS handshake (does "
				  "it run with --tls-cert?)",
				  c->peer);
		return -ECONNRESET;
	}
	rdmem_err_limited("tcp: TLS handshake with %s not finished within %d ms", c->peer,
			  timeout_ms);
	cli_kill(c, "TLS handshake timed out");
	cli_wait_idle(c);
	return -ETIMEDOUT;
}

uint64_t rdmem_tcp_client_tls_record_failures(struct rdmem_tcp_client *c)
{
	return c->tls_record_failures;
}

int rdmem_tcp_client_tls_refused(const struct rdmem_tcp_client *c)
{
	return c->tls_refused;
}
