/* tls.c - TLS 1.3 sessions over memory buffers (GnuTLS); see tls.h.
 *
 * Why memory buffers: both TCP loops run on io_uring and must not block or
 * make a syscall per record, so GnuTLS gets push/pull functions that only
 * move bytes between its records and two buffers the loops fill and drain.
 * Pull says EAGAIN when the in-buffer is empty; push never fails but for
 * memory. TLS 1.3 only, no session tickets (no resumption state to keep).
 */
#include "tcp/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdmem/util.h"

#define TLS_PRIORITY "NORMAL:-VERS-ALL:+VERS-TLS1.3"
#define TLS_CORK_MAX (16u << 10) /* a piece this large fills a record alone */
#define TLS_NAME_MAX 253	 /* characters in a DNS name (RFC 1035) */

struct rdmem_tls_ctx {
	gnutls_certificate_credentials_t cred;
	gnutls_priority_t prio;
	int server;
	int verify_peer; /* server: client certificates required (--tls-ca) */
	char server_name[256];
};

struct rdmem_tls {
	struct rdmem_tls_ctx *x;
	gnutls_session_t s;
	uint8_t *in;
	size_t in_len, in_pos, in_cap;
	uint8_t *out;
	size_t out_len, out_cap;
	int ready;
	int out_of_memory;
	char why[256];
	/* What the peer's certificate must carry, read by GnuTLS during the
	 * handshake: gnutls_session_set_verify_cert2 may keep the pointer. */
	gnutls_typed_vdata_st vdata[2];
	char name[256];
};

/* ---- files ----------------------------------------------------------------- */

const char *rdmem_tls_files_misuse(const struct rdmem_tls_files *f, int server)
{
	if (!f->cert != !f->key)
		return f->cert ? "--tls-cert needs --tls-key (the certificate's private key)"
			       : "--tls-key needs --tls-cert (the certificate it belongs to)";
	if (server && !f->cert && f->ca)
		return "--tls-ca needs --tls-cert and --tls-key (the server's own certificate)";
	if (!server && !f->ca && (f->cert || f->server_name))
		return "--tls-cert, --tls-key and --tls-server-name need --tls-ca (the CA the "
		       "server's certificate must be signed by)";
	/* A DNS name has at most 253 characters; empty would mean no check at all. */
	if (f->server_name && (!*f->server_name || strlen(f->server_name) > TLS_NAME_MAX))
		return "--tls-server-name needs 1 to 253 characters (the name the server's "
		       "certificate carries)";
	return NULL;
}

/* Files of PEM: a certificate chain or a CA bundle fits this many times over. */
#define TLS_FILE_MAX (1u << 20)

/* One PEM file, checked and read through one open (common/conf_file.c); a
 * key also private to its owner, as --secret-file. */
struct tls_pem {
	uint8_t *data;
	size_t len;
};

static int tls_pem_read(const char *flag, const char *path, int secret, struct tls_pem *p)
{
	return rdmem_conf_file_read(flag, path, secret, TLS_FILE_MAX, &p->data, &p->len);
}

static gnutls_datum_t tls_pem_datum(const struct tls_pem *p)
{
	return (gnutls_datum_t){ .data = p->data, .size = (unsigned)p->len };
}

static int tls_load_key(struct rdmem_tls_ctx *x, const struct rdmem_tls_files *f,
			const struct tls_pem *cert, const struct tls_pem *key)
{
	gnutls_datum_t c = tls_pem_datum(cert), k = tls_pem_datum(key);
	int r = gnutls_certificate_set_x509_key_mem(x->cred, &c, &k, GNUTLS_X509_FMT_PEM);

	if (r < 0)
		rdmem_err("--tls-cert %s / --tls-key %s: cannot load: %s", f->cert, f->key,
			  gnutls_strerror(r));
	return r < 0 ? -EINVAL : 0;
}

static int tls_load_ca(struct rdmem_tls_ctx *x, const struct rdmem_tls_files *f,
		       const struct tls_pem *ca)
{
	gnutls_datum_t d = tls_pem_datum(ca);
	int r = gnutls_certificate_set_x509_trust_mem(x->cred, &d, GNUTLS_X509_FMT_PEM);

	if (r <= 0)
		rdmem_err("--tls-ca %s: %s", f->ca,
			  r < 0 ? gnutls_strerror(r) : "no certificate in it");
	return r <= 0 ? -EINVAL : 0;
}

/* Every file is read (and checked) before any is parsed, so a missing or
 * loose file is named before a PEM error in another. */
static int tls_load(struct rdmem_tls_ctx *x, const struct rdmem_tls_files *f)
{
	struct tls_pem cert = { 0 }, key = { 0 }, ca = { 0 };
	int ret = 0;

	if (f->cert && (ret = tls_pem_read("--tls-cert", f->cert, 0, &cert)) == 0)
		ret = tls_pem_read("--tls-key", f->key, 1, &key);
	if (ret == 0 && f->ca)
		ret = tls_pem_read("--tls-ca", f->ca, 0, &ca);
	if (ret == 0 && f->cert)
		ret = tls_load_key(x, f, &cert, &key);
	if (ret == 0 && f->ca)
		ret = tls_load_ca(x, f, &ca);
	rdmem_conf_file_free(cert.data, cert.len);
	rdmem_conf_file_free(key.data, key.len);
	rdmem_conf_file_free(ca.data, ca.len);
	return ret < 0 ? -EINVAL : 0;
}

int rdmem_tls_ctx_create(const struct rdmem_tls_files *f, int server, struct rdmem_tls_ctx **out)
{
	const char *misuse = rdmem_tls_files_misuse(f, server), *err_pos = NULL;
	struct rdmem_tls_ctx *x;
	int ret;

	if (misuse) {
		rdmem_err("%s", misuse);
		return -EINVAL;
	}
	if (server && !f->cert) {
		rdmem_err("TLS on the server needs --tls-cert and --tls-key");
		return -EINVAL;
	}
	if (!server && !f->ca) {
		rdmem_err("TLS on the agent needs --tls-ca");
		return -EINVAL;
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->server = server;
	x->verify_peer = server && f->ca;
	if (f->server_name)
		snprintf(x->server_name, sizeof(x->server_name), "%s", f->server_name);
	ret = gnutls_certificate_allocate_credentials(&x->cred);
	if (ret < 0) {
		rdmem_err("TLS: cannot allocate credentials: %s", gnutls_strerror(ret));
		free(x);
		return -ENOMEM;
	}
	ret = gnutls_priority_init(&x->prio, TLS_PRIORITY, &err_pos);
	if (ret < 0) {
		rdmem_err("TLS: priority string '%s' refused at '%s': %s", TLS_PRIORITY,
			  err_pos ? err_pos : "?", gnutls_strerror(ret));
		gnutls_certificate_free_credentials(x->cred);
		free(x);
		return -EINVAL;
	}
	if (tls_load(x, f) < 0) {
		rdmem_tls_ctx_free(x);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

void rdmem_tls_ctx_free(struct rdmem_tls_ctx *x)
{
	if (!x)
		return;
	gnutls_priority_deinit(x->prio);
	gnutls_certificate_free_credentials(x->cred);
	free(x);
}

/* ---- transport: memory only -------------------------------------------------- */

static ssize_t tls_pull(gnutls_transport_ptr_t p, void *buf, size_t len)
{
	struct rdmem_tls *t = p;
	size_t n = RDMEM_MIN(len, t->in_len - t->in_pos);

	if (!n) {
		gnutls_transport_set_errno(t->s, EAGAIN);
		return -1;
	}
	memcpy(buf, t->in + t->in_pos, n);
	t->in_pos += n;
	if (t->in_pos == t->in_len)
		t->in_pos = t->in_len = 0;
	return (ssize_t)n;
}

/* GnuTLS asks whether bytes are there before a blocking read; ours never block. */
static int tls_pull_timeout(gnutls_transport_ptr_t p, unsigned int ms)
{
	const struct rdmem_tls *t = p;

	(void)ms;
	return t->in_len > t->in_pos;
}

static ssize_t tls_push(gnutls_transport_ptr_t p, const void *buf, size_t len)
{
	struct rdmem_tls *t = p;

	if (t->out_len + len > t->out_cap) {
		size_t cap = t->out_cap ? t->out_cap : 4096;
		uint8_t *q;

		while (cap < t->out_len + len)
			cap *= 2;
		q = realloc(t->out, cap);
		if (!q) {
			t->out_of_memory = 1;
			gnutls_transport_set_errno(t->s, ENOMEM);
			return -1;
		}
		t->out = q;
		t->out_cap = cap;
	}
	memcpy(t->out + t->out_len, buf, len);
	t->out_len += len;
	return (ssize_t)len;
}

/* ---- sessions ------------------------------------------------------------------ */

static int tls_is_ip(const char *host)
{
	unsigned char b[16];

	return inet_pton(AF_INET, host, b) == 1 || inet_pton(AF_INET6, host, b) == 1;
}

/*
 * The peer's chain must lead to our CA, and its certificate be meant for
 * its end (extended key usage): a server certificate from the same CA is
 * not a client's, nor the reverse. A certificate without the extension
 * passes (GnuTLS: no restriction stated). name: the server's, agent only.
 */
static void tls_verify_peer(struct rdmem_tls *t, const char *purpose, const char *name)
{
	unsigned n = 0;

	t->vdata[n++] =
	    (gnutls_typed_vdata_st){ GNUTLS_DT_KEY_PURPOSE_OID, (unsigned char *)purpose, 0 };
	if (name)
		t->vdata[n++] =
		    (gnutls_typed_vdata_st){ GNUTLS_DT_DNS_HOSTNAME, (unsigned char *)name, 0 };
	gnutls_session_set_verify_cert2(t->s, t->vdata, n, 0);
}

/* The agent checks the server's chain and that it names the server. */
static int tls_client_setup(struct rdmem_tls *t, const char *host)
{
	const char *name = t->x->server_name[0] ? t->x->server_name : host;
	int r = 0;

	if (!name || !*name)
		return GNUTLS_E_INVALID_REQUEST;
	if ((size_t)snprintf(t->name, sizeof(t->name), "%s", name) >= sizeof(t->name))
		return GNUTLS_E_INVALID_REQUEST;
	if (!tls_is_ip(name)) /* SNI carries names only */
		r = gnutls_server_name_set(t->s, GNUTLS_NAME_DNS, name, strlen(name));
	if (r == 0)
		tls_verify_peer(t, GNUTLS_KP_TLS_WWW_SERVER, t->name);
	return r;
}

int rdmem_tls_new(struct rdmem_tls_ctx *x, const char *host, size_t in_cap, struct rdmem_tls **out)
{
	unsigned flags =
	    (x->server ? GNUTLS_SERVER : GNUTLS_CLIENT) | GNUTLS_NONBLOCK | GNUTLS_NO_TICKETS;
	struct rdmem_tls *t = calloc(1, sizeof(*t));
	int r;

	if (!t || !(t->in = malloc(in_cap))) {
		free(t);
		return -ENOMEM;
	}
	t->x = x;
	t->in_cap = in_cap;
	r = gnutls_init(&t->s, flags);
	if (r < 0) {
		free(t->in);
		free(t);
		return -ENOMEM;
	}
	r = gnutls_priority_set(t->s, x->prio);
	if (r == 0)
		r = gnutls_credentials_set(t->s, GNUTLS_CRD_CERTIFICATE, x->cred);
	if (r == 0 && x->verify_peer) {
		gnutls_certificate_server_set_request(t->s, GNUTLS_CERT_REQUIRE);
		tls_verify_peer(t, GNUTLS_KP_TLS_WWW_CLIENT, NULL);
	}
	if (r == 0 && !x->server)
		r = tls_client_setup(t, host);
	if (r < 0) {
		rdmem_err("TLS: cannot set up a session: %s", gnutls_strerror(r));
		rdmem_tls_free(t);
		return -EINVAL;
	}
	gnutls_transport_set_ptr(t->s, t);
	gnutls_transport_set_push_function(t->s, tls_push);
	gnutls_transport_set_pull_function(t->s, tls_pull);
	gnutls_transport_set_pull_timeout_function(t->s, tls_pull_timeout);
	gnutls_handshake_set_timeout(t->s, 0); /* the loops hold the deadline (--tcp-auth-ms) */
	*out = t;
	return 0;
}

void rdmem_tls_free(struct rdmem_tls *t)
{
	if (!t)
		return;
	gnutls_deinit(t->s);
	free(t->in);
	free(t->out);
	free(t);
}

void rdmem_tls_out_trim(struct rdmem_tls *t, size_t keep)
{
	if (t->out_len || t->out_cap <= keep)
		return;
	free(t->out);
	t->out = NULL;
	t->out_cap = 0;
}

size_t rdmem_tls_out_cap(const struct rdmem_tls *t)
{
	return t->out_cap;
}

int rdmem_tls_in_empty(const struct rdmem_tls *t)
{
	return t->in_len == 0;
}

uint8_t *rdmem_tls_in_space(struct rdmem_tls *t, size_t *len)
{
	*len = t->in_cap - t->in_len;
	return t->in + t->in_len;
}

void rdmem_tls_in_add(struct rdmem_tls *t, size_t n)
{
	t->in_len += n;
}

size_t rdmem_tls_out_pending(const struct rdmem_tls *t)
{
	return t->out_len;
}

void rdmem_tls_out_take(struct rdmem_tls *t, uint8_t **p, size_t *len, size_t *cap)
{
	uint8_t *op = *p;
	size_t ocap = *cap;

	if (*len)
		return; /* the caller still sends from it */
	*p = t->out;
	*len = t->out_len;
	*cap = t->out_cap;
	t->out = op;
	t->out_len = 0;
	t->out_cap = ocap;
}

/* Words for a failed handshake: what the certificate check said, or GnuTLS's error. */
static void tls_explain(struct rdmem_tls *t, int r)
{
	unsigned status = gnutls_session_get_verify_cert_status(t->s);
	gnutls_datum_t txt = { NULL, 0 };

	if (r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR && status &&
	    gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &txt, 0) == 0) {
		snprintf(t->why, sizeof(t->why), "%s certificate refused: %s",
			 t->x->server ? "the client's" : "the server's", (const char *)txt.data);
		gnutls_free(txt.data);
		return;
	}
	if (r == GNUTLS_E_FATAL_ALERT_RECEIVED) {
		snprintf(t->why, sizeof(t->why), "the peer refused the handshake: %s",
			 gnutls_alert_get_name(gnutls_alert_get(t->s)));
		return;
	}
	snprintf(t->why, sizeof(t->why), "%s",
		 t->out_of_memory ? "out of memory" : gnutls_strerror(r));
}

static size_t tls_in_left(const struct rdmem_tls *t)
{
	return t->in_len - t->in_pos;
}

/*
 * GnuTLS said E_AGAIN, yet it consumed ciphertext and more is waiting: after
 * a record that carries no data (a post-handshake KeyUpdate, GnuTLS 3.7)
 * it returns E_AGAIN without reading on. The loops only receive again once
 * the in-buffer is empty, so the caller must call again, or the connection
 * stalls with the next records unread.
 */
static int tls_again_with_input(const struct rdmem_tls *t, size_t before)
{
	size_t left = tls_in_left(t);

	return left && left < before;
}

int rdmem_tls_handshake(struct rdmem_tls *t)
{
	int r;

	if (t->ready)
		return 0;
	for (;;) {
		size_t before = tls_in_left(t);

		r = gnutls_handshake(t->s);
		if (r == GNUTLS_E_AGAIN && tls_again_with_input(t, before))
			continue;
		if (r >= 0 || r == GNUTLS_E_AGAIN || gnutls_error_is_fatal(r))
			break;
	}
	if (r == GNUTLS_E_AGAIN)
		return -EAGAIN;
	if (r < 0) {
		tls_explain(t, r);
		gnutls_alert_send_appropriate(t->s, r); /* tells the peer why, if it can */
		return r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR ? -EACCES : -EPROTO;
	}
	t->ready = 1;
	return 0;
}

int rdmem_tls_ready(const struct rdmem_tls *t)
{
	return t->ready;
}

const char *rdmem_tls_desc(struct rdmem_tls *t)
{
	char *d;

	if (!t->ready)
		return "handshake not done";
	d = gnutls_session_get_desc(t->s);
	snprintf(t->why, sizeof(t->why), "%s", d ? d : "?");
	gnutls_free(d);
	return t->why;
}

int rdmem_tls_binding(struct rdmem_tls *t, uint8_t *out, size_t len)
{
	static const char label[] = "EXPORTER-rdmem-auth";
	int r = t->ready
		    ? gnutls_prf_rfc5705(t->s, sizeof(label) - 1, label, 0, NULL, len, (char *)out)
		    : GNUTLS_E_INVALID_REQUEST;

	if (r < 0) {
		snprintf(t->why, sizeof(t->why), "no TLS exporter value: %s", gnutls_strerror(r));
		return -EPROTO;
	}
	return 0;
}

const char *rdmem_tls_why(const struct rdmem_tls *t)
{
	return t->why[0] ? t->why : "no error";
}

ssize_t rdmem_tls_recv(struct rdmem_tls *t, void *buf, size_t len)
{
	for (;;) {
		size_t before = tls_in_left(t);
		ssize_t r = gnutls_record_recv(t->s, buf, len);

		if (r >= 0)
			return r;
		if (r == GNUTLS_E_AGAIN && tls_again_with_input(t, before))
			continue;
		if (r == GNUTLS_E_AGAIN)
			return -EAGAIN;
		if (r == GNUTLS_E_FATAL_ALERT_RECEIVED) {
			/* TLS 1.3: a server refuses our certificate after our handshake ended */
			snprintf(t->why, sizeof(t->why), "the peer refused the session: %s",
				 gnutls_alert_get_name(gnutls_alert_get(t->s)));
			return -EACCES;
		}
		if (gnutls_error_is_fatal((int)r)) {
			snprintf(t->why, sizeof(t->why), "%s",
				 t->out_of_memory ? "out of memory" : gnutls_strerror((int)r));
			return -EBADMSG;
		}
		/* A warning alert or similar: read on. */
	}
}

/* Corks (on) or flushes what is corked into records (off): 0 or a GnuTLS error. */
static int tls_cork(struct rdmem_tls *t, int on)
{
	int r;

	if (on) {
		gnutls_record_cork(t->s);
		return 0;
	}
	r = gnutls_record_uncork(t->s, GNUTLS_RECORD_WAIT);
	return r < 0 ? r : 0;
}

int rdmem_tls_sendv(struct rdmem_tls *t, const struct iovec *iov, unsigned n)
{
	unsigned i;
	int r = 0, cork = 0;

	for (i = 0; i < n; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t off = 0;
		/* Small pieces corked together make few full records; a large one
		 * goes record by record, without GnuTLS copying it first. */
		int small = n > 1 && iov[i].iov_len < TLS_CORK_MAX;

		if (small != cork && (r = tls_cork(t, small)) < 0)
			goto fail;
		cork = small;

		while (off < iov[i].iov_len) { /* a record at a time unless corked */
			ssize_t w = gnutls_record_send(t->s, p + off, iov[i].iov_len - off);

			if (w < 0) {
				r = (int)w;
				goto fail;
			}
			off += (size_t)w;
		}
	}
	if (!cork || (r = tls_cork(t, 0)) >= 0)
		return 0;
fail:
	snprintf(t->why, sizeof(t->why), "%s",
		 t->out_of_memory ? "out of memory" : gnutls_strerror(r));
	return t->out_of_memory ? -ENOMEM : -EIO;
}
