/* tcp_frames.c - what the TCP path does with the bytes a connection
 * received: every complete frame buffered is parsed (tcp/frame.h),
 * checked against its tag after AUTH (tcp/frame_mac.h), dispatched through
 * the shared service, and its reply appended to the connection's fill
 * buffer. A well-formed but refused frame is answered with a status and its
 * payload drained; bytes that are no frame at all close the connection.
 * The I/O around it is server/tcp_loop.c.
 */
#include "server/tcp_conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tcp/frame.h"
#include "tcp/frame_mac.h"
#include "rdmem/util.h"

struct tcp_sink {
	struct rdmem_reply_sink base;
	struct outbuf *ob;
	size_t hdr_at;
	uint32_t max;
	int used;
};

/* ---- replies -------------------------------------------------------------- */

static int tcp_sink_reserve(struct rdmem_reply_sink *base, uint32_t len, void **buf)
{
	struct tcp_sink *sink = (struct tcp_sink *)base;

	if (sink->used)
		return RDMEM_S_IO;
	if (len > sink->max)
		return RDMEM_S_TOO_BIG;
	if (rdmem_tcp_outbuf_reserve(sink->ob, sink->hdr_at + RDMEM_DESC_SIZE + len) < 0)
		return RDMEM_S_BUSY;
	sink->used = 1;
	*buf = sink->ob->p + sink->hdr_at + RDMEM_DESC_SIZE;
	return RDMEM_S_OK;
}

/* After AUTH, a reply just written at hdr_at (it ends at ob->len) gets its tag. */
static int conn_seal(struct conn *c, struct outbuf *ob, size_t hdr_at)
{
	size_t end = ob->len;

	if (!c->mac)
		return 0;
	if (rdmem_tcp_outbuf_reserve(ob, end + RDMEM_FRAME_TAG) < 0)
		return -ENOMEM;
	rdmem_frame_mac_sign(c->mac, c->tx_seq++, ob->p + hdr_at, ob->p + hdr_at + RDMEM_DESC_SIZE,
			     end - hdr_at - RDMEM_DESC_SIZE, NULL, 0, ob->p + end);
	ob->len = end + RDMEM_FRAME_TAG;
	return 0;
}

/* A reply with no value: refused frames and failed calls. */
int rdmem_tcp_conn_reply_status(struct conn *c, const struct rdmem_desc *req, uint16_t status)
{
	struct outbuf *ob = &c->out[c->fill];
	size_t hdr_at = ob->len;
	struct rdmem_desc rep;

	if (rdmem_tcp_outbuf_reserve(ob, ob->len + RDMEM_DESC_SIZE) < 0)
		return -ENOMEM;
	rdmem_frame_reply_init(&rep, req);
	rep.status = status;
	rdmem_frame_put(ob->p + ob->len, &rep);
	ob->len += RDMEM_DESC_SIZE;
	return conn_seal(c, ob, hdr_at);
}

static int conn_dispatch(struct conn *c, const struct rdmem_desc *req, const uint8_t *payload)
{
	struct outbuf *ob = &c->out[c->fill];
	struct tcp_sink sink = { { tcp_sink_reserve }, ob, ob->len, c->srv->cfg.max_value, 0 };
	struct rdmem_call call = { .req = req, .key = payload, .val = payload + req->key_len };
	struct rdmem_desc rep;

	if (rdmem_tcp_outbuf_reserve(ob, ob->len + RDMEM_DESC_SIZE) < 0)
		return -ENOMEM;
	rdmem_frame_reply_init(&rep, req);
	rdmem_service_dispatch_peer(c->srv->svc, &call, &c->ident, &sink.base, &rep,
				    rdmem_now_ns());
	if (rep.val_len && !sink.used) {
		rdmem_err("tcp %s: %s reply claims %u bytes it never reserved", c->srv->name,
			  rdmem_op_name(req->op), rep.val_len);
		rep.val_len = 0;
		rep.status = RDMEM_S_IO;
	}
	rdmem_frame_put(ob->p + sink.hdr_at, &rep);
	ob->len = sink.hdr_at + RDMEM_DESC_SIZE + rep.val_len;
	return conn_seal(c, ob, sink.hdr_at);
}

/* ---- frames --------------------------------------------------------------- */

static void conn_log_bad(struct conn *c, const struct rdmem_frame *f)
{
	rdmem_warn_limited("tcp %s: bad frame from %s: %s (op %u, key %u B, value %u B)",
			   c->srv->name, c->peer, f->why, f->desc.op, f->desc.key_len,
			   f->desc.val_len);
	rdmem_service_count_bad_input(c->srv->svc);
}

static size_t conn_tag_len(const struct conn *c)
{
	return c->mac ? RDMEM_FRAME_TAG : 0;
}

/* A frame after AUTH failed its tag: nothing more from this peer is believed. */
static void conn_mac_failure(struct conn *c, uint64_t seq)
{
	rdmem_warn_limited("tcp %s: frame %llu from %s fails its MAC (changed, replayed, dropped "
			   "or reflected on the way): closing the connection",
			   c->srv->name, (unsigned long long)seq, c->peer);
	rdmem_service_count_mac_failure(c->srv->svc);
	rdmem_tcp_conn_refuse(c);
}

/* 0 when the whole frame at p (f->len bytes, tag included) is authentic. */
static int conn_check_tag(struct conn *c, const uint8_t *p, const struct rdmem_frame *f)
{
	uint64_t seq = c->rx_seq++;

	rdmem_frame_mac_begin(c->mac, seq, p, f->len - RDMEM_DESC_SIZE - RDMEM_FRAME_TAG);
	rdmem_frame_mac_absorb(c->mac, p + RDMEM_DESC_SIZE, f->len - RDMEM_DESC_SIZE);
	if (rdmem_frame_mac_verify(c->mac) == 0)
		return 0;
	conn_mac_failure(c, seq);
	return -1;
}

/* The refused frame's last byte is in: its status goes out if its tag holds. */
static int conn_reject_end(struct conn *c)
{
	c->reject_pending = 0;
	if (rdmem_frame_mac_verify(c->mac) < 0) {
		conn_mac_failure(c, c->rx_seq - 1);
		return 0;
	}
	return rdmem_tcp_conn_reply_status(c, &c->reject_req, c->reject_status);
}

/*
 * A refused frame after AUTH: its payload is drained, not buffered, so its
 * tag is checked as the bytes go by, and the refusal is sent only after.
 */
static int conn_reject_tagged(struct conn *c, const struct rdmem_frame *f, const uint8_t *p,
			      size_t have)
{
	rdmem_frame_mac_begin(c->mac, c->rx_seq++, p, f->len - RDMEM_DESC_SIZE - RDMEM_FRAME_TAG);
	rdmem_frame_mac_absorb(c->mac, p + RDMEM_DESC_SIZE, have - RDMEM_DESC_SIZE);
	c->reject_req = f->desc;
	c->reject_status = f->status;
	c->reject_pending = 1;
	return c->drain ? 0 : conn_reject_end(c);
}

/* What the buffered bytes need: TCP_RBUF_MIN, what is there, or all of
 * the frame begun at the start. */
static size_t conn_rbuf_need(const struct conn *c)
{
	size_t need = RDMEM_MAX((size_t)TCP_RBUF_MIN, c->rlen);
	struct rdmem_frame f;

	if (rdmem_frame_parse_tagged(c->rbuf, c->rlen, c->srv->cfg.max_value, conn_tag_len(c),
				     &f) == RDMEM_FRAME_NEED &&
	    f.len > need)
		need = f.len; /* header seen and valid: len is under the caps */
	return need;
}

/*
 * Makes room for the frame at the buffer start. It grows only for a header
 * not seen before: after a recv completed, or after frames held back were
 * served (none is armed while they wait), so never with a recv in flight
 * into the buffer it moves. A grown buffer is kept
 * while large frames come and given back once the connection rests
 * (rdmem_tcp_conn_rbuf_shrink): shrunk after each one, every 1 MiB frame
 * faulted its pages in afresh (a fresh server's first connection echoed
 * 1 MiB values at 170 MB/s, later ones at 1.2 GB/s, once malloc's mmap
 * threshold had risen and the heap served them).
 */
static int conn_fit_rbuf(struct conn *c)
{
	size_t need = conn_rbuf_need(c);
	uint8_t *p;

	if (need <= c->rcap)
		return 0;
	p = realloc(c->rbuf, need);
	if (!p)
		return -ENOMEM;
	c->rbuf = p;
	c->rcap = need;
	rdmem_tcp_conn_account(c);
	return 0;
}

int rdmem_tcp_conn_rbuf_spare(const struct conn *c)
{
	return c->rcap > conn_rbuf_need(c);
}

/* Never below what the bytes held need: a partial 1 MiB frame whose first
 * 64 KiB were there had its buffer cut to exactly those, and the recv
 * armed next had no room: the connection stalled until --tcp-idle-ms. */
void rdmem_tcp_conn_rbuf_shrink(struct conn *c)
{
	size_t need = conn_rbuf_need(c);
	uint8_t *p;

	if (need >= c->rcap)
		return;
	p = realloc(c->rbuf, need);
	if (!p)
		return; /* kept as it was */
	c->rbuf = p;
	c->rcap = need;
	rdmem_tcp_conn_account(c);
}

void rdmem_tcp_conn_set_yielded(struct conn *c, int yielded)
{
	if (c->yielded != yielded)
		c->srv->nyielded += yielded ? 1u : (unsigned)-1;
	c->yielded = yielded;
}

void rdmem_tcp_conn_end_turn(struct conn *c)
{
	rdmem_tcp_conn_set_yielded(c, 1);
	rdmem_service_count_net(c->srv->svc, RDMEM_NET_TCP_TURNS_ENDED);
}

/*
 * The turn is over: TCP_TURN_NS since start, looked at after every frame
 * (a vDSO clock read, ~20 ns, against microseconds a frame: eight MGETs of
 * 4,096 keys between looks would run milliseconds). While the server stops,
 * every frame received is answered before the connection closes, so the
 * turn goes on, but only until the stop's drain deadline: then the sweep
 * closes what is left. Before, a stop with thousands of connections each
 * holding a buffer of 4,096-key MGETs served them all, seconds past the
 * deadline and past the loop's own last look at the clock.
 */
int rdmem_tcp_conn_turn_over(const struct conn *c, uint64_t start)
{
	uint64_t now = rdmem_now_ns();

	if (c->srv->stopping)
		return now > c->srv->stop_deadline_ns;
	return now - start >= TCP_TURN_NS;
}

/*
 * One turn: frames until none is complete, replies back up, or TCP_TURN_NS
 * passed. Before, a connection was served until its buffer held no complete
 * frame: with 64 KiB of STATS requests (about 1,000 frames, 12 us each) one
 * peer held the loop for milliseconds at a time, and another's PING waited
 * 1.1 ms at p50, 6.6 ms at p99. The loop serves the other connections'
 * completions, then this one's next turn (srv_resume_yielded).
 */
int rdmem_tcp_conn_process(struct conn *c)
{
	uint64_t start = rdmem_now_ns();
	unsigned frames = 0;
	size_t pos = 0;
	int ret = 0;

	rdmem_tcp_conn_set_yielded(c, 0);
	if (c->reject_pending && !c->drain && !c->refused)
		ret = conn_reject_end(c);
	while (ret == 0 && !c->refused &&
	       rdmem_tcp_conn_out_pending(c) <= rdmem_tcp_conn_out_high(c)) {
		struct rdmem_frame f;
		size_t avail = c->rlen - pos;
		enum rdmem_frame_kind k;

		/* A stop past its deadline serves not even a first frame. */
		if ((frames || c->srv->stopping) && rdmem_tcp_conn_turn_over(c, start)) {
			rdmem_tcp_conn_end_turn(c);
			break;
		}
		k = rdmem_frame_parse_tagged(c->rbuf + pos, avail, c->srv->cfg.max_value,
					     conn_tag_len(c), &f);
		if (k == RDMEM_FRAME_NEED)
			break;
		frames++;
		if (k == RDMEM_FRAME_BAD) {
			conn_log_bad(c, &f);
			pos = c->rlen;
			rdmem_tcp_conn_refuse(c);
			break;
		}
		if (k == RDMEM_FRAME_REJECT) {
			conn_log_bad(c, &f);
			if (f.len > avail)
				c->drain = f.len - avail;
			ret = c->mac ? conn_reject_tagged(c, &f, c->rbuf + pos,
							  RDMEM_MIN(f.len, avail))
				     : rdmem_tcp_conn_reply_status(c, &f.desc, f.status);
			pos += RDMEM_MIN(f.len, avail);
		} else if (!c->authed) {
			ret = rdmem_tcp_admit_auth(c, &f.desc, c->rbuf + pos + RDMEM_DESC_SIZE);
			pos += f.len;
		} else if (c->mac && conn_check_tag(c, c->rbuf + pos, &f) < 0) {
			pos = c->rlen;
			break;
		} else {
			rdmem_tcp_admit_prove(c); /* a valid frame (with a secret: after AUTH) */
			ret = conn_dispatch(c, &f.desc, c->rbuf + pos + RDMEM_DESC_SIZE);
			pos += f.len;
		}
		if (ret < 0)
			break;
	}
	memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
	c->rlen -= pos;
	if (ret == 0 && !c->closing)
		ret = conn_fit_rbuf(c);
	if (ret < 0) {
		rdmem_err_limited("tcp %s: out of memory serving %s", c->srv->name, c->peer);
		rdmem_tcp_conn_kill(c, "out of memory");
		return -1;
	}
	return 0;
}
