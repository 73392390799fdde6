/* client.h - a TCP connection to rdmem-server on io_uring: a window of
 * pipelined calls, matched to replies by req_id, with request bytes sent from
 * the caller's buffers and reply values received into the caller's buffer.
 *
 * One thread drives a client (the agent's TCP actor, a test thread); the
 * functions are not thread-safe. A call struct belongs to the client from a
 * successful submit until progress() hands it back (or close() ends it).
 */
#ifndef RDMEM_FABRIC_TCP_CLIENT_H
#define RDMEM_FABRIC_TCP_CLIENT_H

#include <stdint.h>

#include "rdmem/wire.h"

#define RDMEM_TCP_CLIENT_WINDOW 256u /* calls in flight per connection */

struct rdmem_tcp_client;

struct rdmem_tcp_call { /* caller-owned until it completes */
	struct rdmem_desc
	    req; /* op, flags, path, key_len, val_len, aux, args; the client sets state/req_id */
	const void *key, *val; /* sent straight from here (iovecs), no copy */
	void *reply;	       /* the reply value bytes are received straight into here */
	uint32_t reply_cap;
	struct rdmem_desc rep; /* reply descriptor, on completion */
	/*
	 * 0 (see rep.status), or -errno: -ECONNRESET (connection lost),
	 * -EMSGSIZE (reply > reply_cap; bytes drained, not written), -ETIMEDOUT
	 * (sync call only).
	 */
	int result;
	void *user;		     /* for the caller */
	struct rdmem_tcp_call *next; /* client-internal link */
};

/*
 * Connects with a timeout (host: name or address). Errors are logged with
 * host:port and errno text; -ETIMEDOUT, -ECONNREFUSED, -EHOSTUNREACH, ...
 */
int rdmem_tcp_client_connect(const char *host, uint16_t port, int timeout_ms,
			     struct rdmem_tcp_client **out);
/*
 * Closes the connection and frees the client. Calls still in flight, or
 * completed but not yet returned by progress(), get result -ECONNRESET
 * written into them and are never touched again: they are not returned
 * anywhere, so a caller that needs them tracks its own submitted calls.
 */
void rdmem_tcp_client_close(struct rdmem_tcp_client *c);
/*
 * Breaks the connection (if not already broken), waits until no kernel op
 * can touch a call's buffers, and hands back up to max of the calls it still
 * holds: replies that arrived (result 0) and every call in flight (result
 * -ECONNRESET). Call it until it returns 0 before close() so that no
 * submitted call is dropped. The client takes no new call afterwards.
 */
/*
 * Takes back a submitted call that has not completed (its deadline passed):
 * returns 1 when the client held it and now lets it go (a reply that comes
 * later is read and dropped; a call half on the wire breaks the connection,
 * whose other calls then fail as usual), 0 when the client does not hold it
 * (completed, or never submitted). After 1 the client touches none of the
 * call's buffers again.
 */
/* 1 while the client holds call (submitted, not completed, not withdrawn). */
int rdmem_tcp_client_holds(const struct rdmem_tcp_client *c, const struct rdmem_tcp_call *call);
/* 1 while withdrawing call would break the connection: its request is in
 * the send in flight or half sent, or its reply's value is being received
 * into its buffer. A caller that shares the connection (the agent) waits
 * until this clears, so one caller's deadline cannot cut off the others. */
int rdmem_tcp_client_withdraw_tears(const struct rdmem_tcp_client *c,
				    const struct rdmem_tcp_call *call);
int rdmem_tcp_client_withdraw(struct rdmem_tcp_client *c, struct rdmem_tcp_call *call);
int rdmem_tcp_client_abort(struct rdmem_tcp_client *c, struct rdmem_tcp_call **done, int max);
/* -EAGAIN when the window is full, -ECONNRESET when the connection is dead, -EINVAL. */
int rdmem_tcp_client_submit(struct rdmem_tcp_client *c, struct rdmem_tcp_call *call);
/*
 * Sends queued calls, receives replies; waits up to timeout_ms (0 = don't
 * block, -1 = forever) for at least one completion or for the watched fd to
 * become readable. Returns the number of completed calls written to done[]
 * (at most max), or -ECONNRESET once the connection is lost and every call
 * has been handed back (each with result -ECONNRESET).
 */
int rdmem_tcp_client_progress(struct rdmem_tcp_client *c, int timeout_ms,
			      struct rdmem_tcp_call **done, int max);
/*
 * Also wake progress() when fd is readable (e.g. the eventfd doorbell of the
 * caller's inbound queue); the caller drains it. -1 stops watching.
 */
int rdmem_tcp_client_watch(struct rdmem_tcp_client *c, int fd);
/*
 * Submits and waits for this call (timeout_ms: -1 = forever). Returns
 * call->result. Other calls completing meanwhile stay queued for progress().
 * On -ETIMEDOUT the call is withdrawn: unsent, it is dropped; sent, its reply
 * will be drained; half-sent, the connection is reset (the stream would be
 * torn otherwise).
 */
int rdmem_tcp_client_call(struct rdmem_tcp_client *c, struct rdmem_tcp_call *call, int timeout_ms);
/*
 * Proves the shared secret (an AUTH call, include/rdmem/auth.h) and checks the
 * server's proof in return: 0, or -EACCES when either side lacks the secret
 * (-EPROTO: a server of wire version 2). The first call on a connection; every
 * later frame both ways then carries a MAC (tcp/frame_mac.h).
 */
struct rdmem_auth;
int rdmem_tcp_client_auth(struct rdmem_tcp_client *c, struct rdmem_auth *auth, int timeout_ms);
/*
 * TLS 1.3 on this connection (tcp/tls.h), before any call: the handshake,
 * checking the server's certificate against the context's CA and name (host
 * when the context names none). 0, -EACCES (certificate refused), -EPROTO
 * (handshake failed, e.g. the server wants a client certificate),
 * -ECONNRESET, -ETIMEDOUT; the reason is logged.
 */
struct rdmem_tls_ctx;
int rdmem_tcp_client_starttls(struct rdmem_tcp_client *c, struct rdmem_tls_ctx *x, const char *host,
			      int timeout_ms);
/* TLS records that failed to decrypt: each closed the connection. */
uint64_t rdmem_tcp_client_tls_record_failures(struct rdmem_tcp_client *c);
/* 1 when the server ended the session with a fatal alert (refused our certificate). */
int rdmem_tcp_client_tls_refused(const struct rdmem_tcp_client *c);
/* Calls submitted and not yet handed back (withdrawn ones included until their reply). */
int rdmem_tcp_client_inflight(struct rdmem_tcp_client *c);
/* Replies that broke the protocol (unknown req_id, bad header): each closed the connection. */
uint64_t rdmem_tcp_client_protocol_errors(struct rdmem_tcp_client *c);
/* Replies after AUTH whose MAC failed (tcp/frame_mac.h): each closed the connection. */
uint64_t rdmem_tcp_client_mac_failures(struct rdmem_tcp_client *c);

#endif
