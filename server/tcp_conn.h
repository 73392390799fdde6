/* tcp_conn.h - what server/tcp_loop.c (I/O, TLS), server/tcp_frames.c
 * (framing, dispatch, replies) and server/tcp_admit.c (who may connect and
 * stay: limits, AUTH, deadlines) share about the TCP path's connections.
 * Private to those three files.
 */
#ifndef RDMEM_SERVER_TCP_CONN_H
#define RDMEM_SERVER_TCP_CONN_H

#include <liburing.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rdmem/netaddr.h"
#include "server/tcp_loop.h"
#include "tcp/tls.h"

#define TCP_RBUF_MIN  (64u << 10)
#define TCP_OBUF_KEEP (256u << 10) /* larger send buffers are freed once sent */
#define TCP_OUT_HIGH  (4u << 20)   /* unsent reply bytes that pause reading */
/* The same while all connections' reply buffers hold more than
 * --tcp-out-budget (rdmem_tcp_conn_out_high). */
#define TCP_OUT_LOW	 (64u << 10)
#define TCP_RING_ENTRIES 512u
#define TCP_TICK_MS	 100
#define TCP_CLOSE_MS	 2000u
#define TCP_SWEEP_MS	 20 /* deadlines are checked this often */
/* Ciphertext per recv with TLS, held per connection as rbuf's minimum is. */
#define TCP_TLS_IN  (64u << 10)
#define TCP_REST_MS 1000 /* then a connection's reply buffers are freed */
/* A connection's turn: it serves frames for at most this long, then the
 * loop serves the others before it goes on (rdmem_tcp_conn_process). */
#define TCP_TURN_NS 200000ull

enum tcp_ud { UD_ACCEPT = 1, UD_RECV, UD_SEND, UD_STOP, UD_CANCEL };
#define UD_KIND_MASK 7ull

struct outbuf {
	uint8_t *p;
	size_t len;
	size_t cap;
};

struct conn {
	struct rdmem_tcp_server *srv;
	int fd;
	char peer[64];
	uint8_t *rbuf;
	size_t rlen;
	size_t rcap;
	uint64_t drain; /* payload bytes of a refused frame still to discard */
	struct outbuf out[2];
	size_t held;  /* what out[] and TLS's ciphertext buffer hold, counted in srv->out_held */
	size_t rheld; /* rcap as counted in srv->in_held */
	int budget_paused; /* reading paused by --tcp-out-budget (counted once a pause) */
	int fill;	   /* out[fill] takes new replies; out[!fill] may be in flight */
	size_t sent;	   /* bytes of out[!fill] the kernel took so far */
	int send_busy;
	int recv_busy;
	unsigned ops; /* SQEs in flight that name this connection */
	int authed;   /* proved the shared secret (or none is required) */
	/* After AUTH with a secret: the frame tags (tcp/frame_mac.h), each way's count. */
	struct rdmem_frame_mac *mac;
	uint64_t tx_seq, rx_seq;
	/* With --tls-cert: every byte either way goes through this session;
	 * rbuf and out[] hold plaintext (tcp/tls.h). */
	struct rdmem_tls *tls;
	/* A refused frame being drained: its reply waits until its tag is checked. */
	int reject_pending;
	uint16_t reject_status;
	struct rdmem_desc reject_req;
	/* Proved itself: authenticated (with a secret) or sent a valid frame
	 * (without). Until then it has auth_ms, and may be evicted. */
	int proven;
	int partial; /* holds part of a frame (or a refused payload to drain) */
	char host
	    [RDMEM_ADDR_GROUP_MAX]; /* the peer's address group: what per-address limits count */
	uint64_t born_ns, last_ns;  /* accepted; last byte in or out */
	uint64_t trimmed_at_ns;	    /* last_ns when its TLS buffers were last trimmed */
	/* The agent RDMEM_OP_BIND named, for exactly-once calls. */
	struct rdmem_service_peer ident;
	int yielded; /* its turn ended with complete frames left (srv_resume_yielded) */
	int closing; /* no more reads; close once flushed */
	/* A bad frame, a failed tag or AUTH: nothing more it sent is served.
	 * Without it, a closing connection still answers the complete frames
	 * it holds (the server's stop: every frame received gets its reply). */
	int refused;
	int dead;	      /* socket shut down; freed when ops == 0 */
	uint64_t close_by_ns; /* a closing peer that never reads is cut here */
	struct conn *prev, *next;
};

struct rdmem_tcp_server {
	struct rdmem_service *svc;
	struct rdmem_tcp_server_config cfg;
	int lfd;
	uint16_t port;
	char name[80]; /* addr:port for log lines */
	int stop_fd;
	uint64_t stop_val;
	struct io_uring ring;
	pthread_t thread;
	int started;
	struct conn *conns;
	unsigned nconns;    /* structs, the dead ones waiting for their ops included */
	unsigned nlive;	    /* not dead: what --tcp-max-conns counts */
	unsigned nunproven; /* live and not proven */
	unsigned nyielded;  /* connections with yielded set */
	unsigned unproven_cap;
	size_t out_held; /* every connection's held: reply buffers allocated */
	size_t in_held;	 /* every connection's rcap */
	uint64_t swept_ns;
	int accept_busy;
	uint64_t accept_resume_ns; /* accept paused after EMFILE and alike */
	int stopping;
	uint64_t stop_deadline_ns;
};

/* tcp_loop.c: connection lifetime. */
int rdmem_tcp_outbuf_reserve(struct outbuf *ob, size_t need);
/* Shuts the socket so pending ops complete; the struct goes when they have. */
void rdmem_tcp_conn_kill(struct conn *c, const char *why);
void rdmem_tcp_conn_maybe_free(struct conn *c);
void rdmem_tcp_conn_close_after_flush(struct conn *c);
/* Gives a receive buffer grown for large frames back, down to what the bytes
 * it holds need (TCP_RBUF_MIN, or the frame begun); never with a recv into
 * it in flight. */
void rdmem_tcp_conn_rbuf_shrink(struct conn *c);
/* It holds more than those bytes need. */
int rdmem_tcp_conn_rbuf_spare(const struct conn *c);
/* Holds a buffer rdmem_tcp_conn_rest_trim would give back. */
static inline int rdmem_tcp_conn_trimmable(const struct conn *c)
{
	return c->held || c->rcap > TCP_RBUF_MIN;
}
/* Closes after flushing what was answered; the rest it sent is dropped. */
void rdmem_tcp_conn_refuse(struct conn *c);
void rdmem_tcp_conn_rest_trim(struct conn *c, uint64_t now);

/* tcp_frames.c: framing, dispatch and replies. */
/* A reply with no value: refused frames and failed calls. */
int rdmem_tcp_conn_reply_status(struct conn *c, const struct rdmem_desc *req, uint16_t status);
/* Handles the complete frames buffered, for one turn (TCP_TURN_NS; frames
 * left: c->yielded); returns -1 when the connection closes. */
int rdmem_tcp_conn_process(struct conn *c);
void rdmem_tcp_conn_set_yielded(struct conn *c, int yielded);
/* TCP_TURN_NS passed since start; while the server stops, its drain deadline. */
int rdmem_tcp_conn_turn_over(const struct conn *c, uint64_t start);
/* Ends c's turn with frames (or TLS records) left: the loop comes back to it. */
void rdmem_tcp_conn_end_turn(struct conn *c);

/* Brings c->held and the server's sum up to date with c's buffers. */
void rdmem_tcp_conn_account(struct conn *c);
/* Unsent reply bytes past which c's reading and dispatching pause:
 * TCP_OUT_HIGH, or TCP_OUT_LOW while the sum is over --tcp-out-budget. */
size_t rdmem_tcp_conn_out_high(struct conn *c);

/* Reply bytes not yet taken by the kernel (TLS: not yet encrypted and sent). */
static inline size_t rdmem_tcp_conn_out_pending(const struct conn *c)
{
	return c->out[0].len + c->out[1].len - c->sent +
	       (c->tls ? rdmem_tls_out_pending(c->tls) : 0);
}

/* tcp_admit.c: admission, proof and deadlines. */
/* 0: a connection from host (its address group) may be accepted. */
int rdmem_tcp_admit(struct rdmem_tcp_server *s, const char *host);
/* c proved itself (authenticated, or a valid frame without a secret). */
void rdmem_tcp_admit_prove(struct conn *c);
/* The first frame when a secret is set: AUTH, answered with our proof. */
int rdmem_tcp_admit_auth(struct conn *c, const struct rdmem_desc *req, const uint8_t *payload);
/* Counts c if it holds half a frame unproven; -1 when c was closed for it. */
int rdmem_tcp_admit_partial(struct conn *c);
/* Cuts connections past a deadline (at most every TCP_SWEEP_MS); returns
 * when it must run next (UINT64_MAX: not before something happens). */
uint64_t rdmem_tcp_admit_sweep(struct rdmem_tcp_server *s, uint64_t now);

#endif
