/* tcp_admit.c - who may connect to the TCP path and stay: per-address
 * limits, the share kept for proven peers (the oldest unproven connection
 * makes room), AUTH with the shared secret, half-finished frames, and the
 * deadlines (prove within --tcp-auth-ms, idle past --tcp-idle-ms, a peer
 * that stops reading while we flush). server/tcp_loop.c does the I/O.
 */
#include "server/tcp_conn.h"

#include <string.h>

#include "rdmem/auth.h"
#include "rdmem/util.h"
#include "tcp/frame.h"
#include "tcp/frame_mac.h"
#include "tcp/tls.h"

void rdmem_tcp_admit_prove(struct conn *c)
{
	if (c->proven)
		return;
	c->proven = 1;
	c->srv->nunproven--;
}

/* Live connections from host; partial: only unproven ones mid-frame. */
static unsigned srv_count_addr(const struct rdmem_tcp_server *s, const char *host, int partial)
{
	const struct conn *c;
	unsigned n = 0;

	for (c = s->conns; c; c = c->next)
		n += !c->dead && (!partial || (c->partial && !c->proven)) &&
		     strcmp(c->host, host) == 0;
	return n;
}

/*
 * Room for one more unproven connection: closes the oldest unproven one when
 * they fill their share (or all of --tcp-max-conns), so idle connections
 * cannot lock newer peers out; proven ones are never evicted for it.
 */
static int srv_make_room(struct rdmem_tcp_server *s, const char *host)
{
	struct conn *c, *oldest = NULL;

	if (s->nunproven < s->unproven_cap && s->nlive < s->cfg.max_conns)
		return 0;
	for (c = s->conns; c; c = c->next) /* newest first: the last match is the oldest */
		if (!c->dead && !c->proven)
			oldest = c;
	if (!oldest) {
		rdmem_service_count_net(s->svc, RDMEM_NET_TCP_REFUSED_FULL);
		rdmem_warn_limited("tcp %s: refusing a connection from %s: %u connections open "
				   "(--tcp-max-conns), all proven",
				   s->name, host, s->nlive);
		return -1;
	}
	rdmem_service_count_net(s->svc, RDMEM_NET_TCP_EVICTED);
	rdmem_warn_limited("tcp %s: closing %s, unproven for %llu ms, to admit %s "
			   "(%u unproven connections: the --tcp-reserved-pct share is kept)",
			   s->name, oldest->peer,
			   (unsigned long long)((rdmem_now_ns() - oldest->born_ns) / 1000000), host,
			   s->nunproven);
	rdmem_tcp_conn_kill(oldest, "evicted");
	return 0;
}

int rdmem_tcp_admit(struct rdmem_tcp_server *s, const char *host)
{
	if (srv_count_addr(s, host, 0) >= s->cfg.max_per_addr) {
		rdmem_service_count_net(s->svc, RDMEM_NET_TCP_REFUSED_ADDR);
		rdmem_warn_limited("tcp %s: refusing a connection from %s: %u open from that "
				   "address (--tcp-max-per-addr)",
				   s->name, host, s->cfg.max_per_addr);
		return -1;
	}
	return srv_make_room(s, host);
}

/*
 * With a secret, the first frame must be AUTH with a fresh proof; we answer
 * with ours. Anything else, or a wrong proof, is refused, counted, and the
 * connection closed once the refusal is sent.
 */
int rdmem_tcp_admit_auth(struct conn *c, const struct rdmem_desc *req, const uint8_t *payload)
{
	struct rdmem_auth *auth = c->srv->cfg.auth;
	struct outbuf *ob = &c->out[c->fill];
	struct rdmem_auth_tcp tok;
	struct rdmem_auth_tcp_reply ours;
	struct rdmem_desc rep;
	uint8_t bind[RDMEM_AUTH_BINDING], *b = NULL;
	const char *why = "its first frame is not AUTH";
	int ret;

	if (req->op != RDMEM_OP_AUTH || req->key_len || req->val_len != sizeof(tok))
		goto refuse;
	memcpy(&tok, payload, sizeof(tok));
	/* Under TLS the proof must be bound to this session: one seen elsewhere
	 * (a plain AUTH, another session) proves nothing here. */
	if (c->tls && rdmem_tls_binding(c->tls, (b = bind), sizeof(bind)) < 0) {
		why = rdmem_tls_why(c->tls);
		goto refuse;
	}
	why = "wrong proof";
	if (rdmem_auth_tcp_check(auth, 0, tok.nonce, 0, b, tok.mac) < 0)
		goto refuse;
	why = "stale or replayed proof";
	if (rdmem_auth_fresh(auth, rdmem_le64(tok.nonce)) < 0) /* the MACs cover its wire bytes */
		goto refuse;
	/* Our nonce makes this connection's frame keys ours too (random bytes: no order). */
	ours.nonce = rdmem_auth_random64();
	rdmem_auth_tcp_proof(auth, 1, tok.nonce, ours.nonce, b, ours.mac);
	/* Under TLS every record is authenticated and encrypted already: the
	 * secret proves who the peer is, frame tags would add nothing. */
	c->mac = c->tls ? NULL : rdmem_frame_mac_tcp(auth, tok.nonce, ours.nonce, 1);
	if ((!c->mac && !c->tls) ||
	    rdmem_tcp_outbuf_reserve(ob, ob->len + RDMEM_DESC_SIZE + sizeof(ours)) < 0)
		return -ENOMEM;
	rdmem_frame_reply_init(&rep, req);
	rep.val_len = sizeof(ours);
	rdmem_frame_put(ob->p + ob->len, &rep);
	memcpy(ob->p + ob->len + RDMEM_DESC_SIZE, &ours, sizeof(ours));
	ob->len += RDMEM_DESC_SIZE + sizeof(ours);
	/* Not proven yet: an AUTH can be replayed by whoever saw it; the first
	 * frame whose tag checks shows the peer holds this connection's keys. */
	c->authed = 1; /* every frame from here on, both ways, carries a tag */
	return 0;
refuse:
	rdmem_warn_limited("tcp %s: %s did not prove the shared secret (%s): refused", c->srv->name,
			   c->peer, why);
	rdmem_service_count_auth_failure(c->srv->svc);
	ret = rdmem_tcp_conn_reply_status(c, req, RDMEM_S_DENIED);
	rdmem_tcp_conn_refuse(c);
	return ret;
}

/*
 * A connection holding part of a frame ties up a buffer and the peer's
 * promise to finish it; one address gets --tcp-max-partial-per-addr unproven
 * ones at once (slowloris). Proven connections are exempt: agents behind one
 * address stream large values at once, and an attacker sharing that address
 * must not get them killed (a proven peer is held by the per-address
 * connection limit and the idle reaper). Returns -1 when c was closed for it.
 */
int rdmem_tcp_admit_partial(struct conn *c)
{
	struct rdmem_tcp_server *s = c->srv;
	int partial = !c->dead && (c->rlen || c->drain);

	if (!partial || c->partial || c->proven) {
		c->partial = partial;
		return 0;
	}
	if (srv_count_addr(s, c->host, 1) >= s->cfg.max_partial_per_addr) {
		rdmem_service_count_net(s->svc, RDMEM_NET_TCP_PARTIAL_LIMIT);
		rdmem_warn_limited("tcp %s: closing %s: %u connections from %s hold half a frame "
				   "(--tcp-max-partial-per-addr)",
				   s->name, c->peer, s->cfg.max_partial_per_addr, c->host);
		rdmem_tcp_conn_kill(c, "too many half-finished frames");
		return -1;
	}
	c->partial = 1;
	return 0;
}

/* Why c must go now (NULL: it may stay), and the counter that says so. */
static const char *conn_expired(const struct conn *c, uint64_t now, enum rdmem_net_ctr *ctr)
{
	const struct rdmem_tcp_server *s = c->srv;

	if (c->closing && now > c->close_by_ns)
		return "flush timed out";
	if (s->stopping && now > s->stop_deadline_ns)
		return "flush timed out";
	if (c->closing)
		return NULL;
	if (!c->proven && now - c->born_ns > s->cfg.auth_ms * 1000000ull) {
		*ctr = RDMEM_NET_TCP_DEADLINE;
		if (c->tls && !rdmem_tls_ready(c->tls))
			return "TLS handshake not finished within --tcp-auth-ms";
		if (!s->cfg.auth)
			return "no valid frame within --tcp-auth-ms";
		return c->authed ? "AUTH (replayable) but no frame whose MAC checks within "
				   "--tcp-auth-ms"
				 : "no AUTH within --tcp-auth-ms";
	}
	/* No byte in or out for idle_ms, a send in flight or not: a peer that
	 * stops reading its replies holds its buffers no longer than an idle one. */
	if (c->proven && now - c->last_ns > s->cfg.idle_ms * 1000000ull) {
		*ctr = RDMEM_NET_TCP_IDLE;
		return "idle past --tcp-idle-ms";
	}
	return NULL;
}

/* When conn_expired or the rest trim can next have something to do for c
 * (each is "now > deadline", hence the + 1); UINT64_MAX: only after an
 * event on it, which moves last_ns and runs the loop anyway. */
static uint64_t conn_next_ns(const struct conn *c)
{
	const struct rdmem_tcp_server *s = c->srv;
	uint64_t t;

	if (c->dead)
		return UINT64_MAX; /* its ops' completions free it */
	if (c->closing)
		return c->close_by_ns + 1;
	t = c->proven ? c->last_ns + s->cfg.idle_ms * 1000000ull + 1
		      : c->born_ns + s->cfg.auth_ms * 1000000ull + 1;
	if (rdmem_tcp_conn_trimmable(c) && !c->send_busy &&
	    c->trimmed_at_ns != c->last_ns) /* busy: its completion runs the loop */
		t = RDMEM_MIN(t, c->last_ns + TCP_REST_MS * 1000000ull);
	return t;
}

/* Cuts connections past a deadline: flushing to a peer that stopped reading,
 * not proving themselves in time, idle too long. Returns the earliest time
 * it has work again, so an idle loop sleeps until then. */
uint64_t rdmem_tcp_admit_sweep(struct rdmem_tcp_server *s, uint64_t now)
{
	uint64_t next_ns = UINT64_MAX;
	struct conn *c, *next;

	if (now - s->swept_ns < TCP_SWEEP_MS * 1000000ull && !s->stopping)
		return s->swept_ns + TCP_SWEEP_MS * 1000000ull;
	s->swept_ns = now;
	for (c = s->conns; c; c = next) {
		enum rdmem_net_ctr ctr = RDMEM_NET__COUNT;
		const char *why = c->dead ? NULL : conn_expired(c, now, &ctr);

		next = c->next;
		if (why && ctr == RDMEM_NET_TCP_DEADLINE) {
			rdmem_service_count_net(s->svc, ctr);
			if (c->tls && !rdmem_tls_ready(c->tls))
				rdmem_service_count_net(s->svc, RDMEM_NET_TLS_HANDSHAKE_FAILURES);
			rdmem_warn_limited("tcp %s: closing %s: %s", s->name, c->peer, why);
		} else if (why && ctr == RDMEM_NET_TCP_IDLE) {
			rdmem_service_count_net(s->svc, ctr);
			rdmem_log_limited(RDMEM_LOG_INFO, "tcp %s: closing %s: %s", s->name,
					  c->peer, why);
		}
		if (why)
			rdmem_tcp_conn_kill(c, why);
		else if (!c->dead)
			rdmem_tcp_conn_rest_trim(c, now);
		if (!why)
			next_ns = RDMEM_MIN(next_ns, conn_next_ns(c));
		rdmem_tcp_conn_maybe_free(c);
	}
	return next_ns;
}
