/* tls.h - TLS 1.3 (GnuTLS) on the TCP path, over memory buffers.
 *
 * Both io_uring loops (server/tcp_loop.c, tcp/client.c) keep doing their own
 * socket I/O: ciphertext they receive goes into a session's in-buffer
 * (rdmem_tls_in_space/in_add), and ciphertext GnuTLS produces collects in
 * its out-buffer, which the loop takes (rdmem_tls_out_take) and sends.
 * GnuTLS itself never touches the socket: its pull function reads the
 * in-buffer and says EAGAIN when it is empty, its push function appends to
 * the out-buffer. One module serves both ends; a context holds the
 * credentials of one daemon (--tls-cert, --tls-key, --tls-ca).
 */
#ifndef RDMEM_TCP_TLS_H
#define RDMEM_TCP_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct rdmem_tls_ctx;
struct rdmem_tls;

struct rdmem_tls_files {
	const char *cert;	 /* --tls-cert: our chain (PEM); server: required */
	const char *key;	 /* --tls-key: its private key (PEM), mode 0600 */
	const char *ca;		 /* --tls-ca: agent: the server's CA (required);
				  * server: require client certificates it signed */
	const char *server_name; /* agent, --tls-server-name: the name the server's
				  * certificate must carry (NULL: the --server host) */
};

/*
 * Checks the files (readable; the key not readable by group or others) and
 * loads them. Errors name the flag and the file, on stderr through the log.
 * server: the server's rules (cert and key required) or the agent's (ca
 * required, cert and key together or neither).
 */
int rdmem_tls_ctx_create(const struct rdmem_tls_files *f, int server, struct rdmem_tls_ctx **out);
void rdmem_tls_ctx_free(struct rdmem_tls_ctx *x);
/* The option-level rules only (no file access): NULL, or what is wrong. */
const char *rdmem_tls_files_misuse(const struct rdmem_tls_files *f, int server);

/* One connection. host: the name or address the agent dialled (the name to
 * verify when no server_name was set); NULL on the server. in_cap: bytes of
 * ciphertext one recv takes (what a connection holds; larger, fewer recvs). */
int rdmem_tls_new(struct rdmem_tls_ctx *x, const char *host, size_t in_cap, struct rdmem_tls **out);
void rdmem_tls_free(struct rdmem_tls *t);

/* Ciphertext in: when in_empty, receive into in_space and report with in_add. */
int rdmem_tls_in_empty(const struct rdmem_tls *t);
uint8_t *rdmem_tls_in_space(struct rdmem_tls *t, size_t *len);
void rdmem_tls_in_add(struct rdmem_tls *t, size_t n);
/*
 * Ciphertext out: bytes waiting, and taking them: the caller's buffer
 * (*p, *len == 0, *cap) is swapped with the session's, so the bytes move
 * without a copy and the session appends into the caller's old storage.
 * The caller keeps (and frees) what it holds.
 */
size_t rdmem_tls_out_pending(const struct rdmem_tls *t);
void rdmem_tls_out_take(struct rdmem_tls *t, uint8_t **p, size_t *len, size_t *cap);
/* Frees the session's (empty) out-buffer if it is over keep bytes. */
void rdmem_tls_out_trim(struct rdmem_tls *t, size_t keep);
/* Bytes the session's out-buffer holds allocated (what a server budgets). */
size_t rdmem_tls_out_cap(const struct rdmem_tls *t);

/* 0: done; -EAGAIN: send what is pending and feed more; else failed (rdmem_tls_why). */
int rdmem_tls_handshake(struct rdmem_tls *t);
int rdmem_tls_ready(const struct rdmem_tls *t);
/* The version and cipher suite agreed, for log lines (overwrites rdmem_tls_why). */
const char *rdmem_tls_desc(struct rdmem_tls *t);
/*
 * After the handshake: RFC 8446 exporter keying material, label
 * "EXPORTER-rdmem-auth", RDMEM_AUTH_BINDING (32) bytes. Both ends of one
 * session get the same bytes, no other session does: the AUTH proofs mix it
 * in (rdmem/auth.h). 0, or -EPROTO (the reason in rdmem_tls_why).
 */
int rdmem_tls_binding(struct rdmem_tls *t, uint8_t *out, size_t len);
/* Why the last call failed, for log lines. */
const char *rdmem_tls_why(const struct rdmem_tls *t);

/*
 * Plaintext. recv: bytes, 0 when the peer closed the session, -EAGAIN when
 * it needs more ciphertext, -EBADMSG when a record failed (changed on the
 * way, or garbage), -EACCES when the peer sent a fatal alert (a TLS 1.3
 * server refusing our certificate does so after our handshake ended): the
 * connection is finished. send: encrypts all of it
 * into the out-buffer (as few records as fit), 0 or -errno.
 */
ssize_t rdmem_tls_recv(struct rdmem_tls *t, void *buf, size_t len);
int rdmem_tls_sendv(struct rdmem_tls *t, const struct iovec *iov, unsigned n);

#endif
