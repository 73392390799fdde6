/* test_tls.c - TLS 1.3 on the TCP path (tcp/tls.c): the agent (--fabric tcp)
 * reaches the server through a relay in this process that records every
 * byte and can flip one. Throw-away certificates are made with openssl.
 *
 * - Calls over TLS return exact bytes (PUT/GET small and 1 MiB, MGET), and
 *   a known value never appears in the capture; without TLS, through the
 *   same relay, it does (so the capture check can fail).
 * - An agent with the wrong CA fails, says why, counts it.
 * - With --tls-ca on the server, an agent without a client certificate is
 *   refused; with one signed by that CA it works.
 * - One flipped byte in a record, either way, breaks the connection (never
 *   wrong data), is counted where it was found, and the agent reconnects.
 * - Peers that stall mid-handshake are closed within --tcp-auth-ms and
 *   counted, and an honest agent works meanwhile.
 */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include "check.h"
#include "rdmem/auth.h"
#include "e2e.h"
#include "tcp/client.h"
#include "tcp/frame.h"
#include "tcp/tls.h"
#include "tmpdir.h"

#define CAP_MAX	  (16u << 20) /* bytes the relay records, both ways */
#define RELAY_BUF (256u << 10)

static char dir[128];
static char ca[160], ca_key[160], srv_cert[160], srv_key[160], cli_cert[160], cli_key[160];
static char other_ca[160], other_cli_cert[160], other_cli_key[160];
/* From the right CA for the wrong end: server-only (serverAuth), client-only (clientAuth). */
static char srvonly_cert[160], srvonly_key[160], clionly_cert[160], clionly_key[160];

/* ---- certificates ------------------------------------------------------------ */

static int sh(const char *cmd)
{
	int st = system(cmd);

	if (st != 0)
		fprintf(stderr, "  failed (%d): %s\n", st, cmd);
	return st == 0 ? 0 : -1;
}

/* A P-256 key and a certificate for cn signed by the CA at ca_name (NULL: self-signed CA). */
static int make_cert(const char *name, const char *cn, const char *ca_name, const char *san)
{
	char cmd[1536];

	if (!ca_name) {
		snprintf(cmd, sizeof(cmd),
			 "cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
			 "-nodes -keyout %s.key -out %s.pem -days 2 -subj /CN=%s 2>/dev/null",
			 dir, name, name, cn);
		return sh(cmd);
	}
	snprintf(cmd, sizeof(cmd),
		 "cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
		 "-keyout %s.key -out %s.csr -subj /CN=%s 2>/dev/null && "
		 "printf '%s\\n' > %s.ext && "
		 "openssl x509 -req -in %s.csr -CA %s.pem -CAkey %s.key -CAcreateserial "
		 "-out %s.pem -days 2 -extfile %s.ext 2>/dev/null && chmod 600 %s.key",
		 dir, name, name, cn, san, name, name, ca_name, ca_name, name, name, name);
	return sh(cmd);
}

/* The server's names, then (the shell's printf makes the \\n a newline) its purpose. */
#define SRV_EXT "subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage="

static int make_certs(void)
{
	snprintf(dir, sizeof(dir), "%s/rdmem-tls-%d", test_tmpdir(), (int)getpid());
	mkdir(dir, 0700);
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	snprintf(ca_key, sizeof(ca_key), "%s/ca.key", dir);
	snprintf(srv_cert, sizeof(srv_cert), "%s/srv.pem", dir);
	snprintf(srv_key, sizeof(srv_key), "%s/srv.key", dir);
	snprintf(cli_cert, sizeof(cli_cert), "%s/cli.pem", dir);
	snprintf(cli_key, sizeof(cli_key), "%s/cli.key", dir);
	snprintf(other_ca, sizeof(other_ca), "%s/other.pem", dir);
	snprintf(other_cli_cert, sizeof(other_cli_cert), "%s/ocli.pem", dir);
	snprintf(other_cli_key, sizeof(other_cli_key), "%s/ocli.key", dir);
	snprintf(srvonly_cert, sizeof(srvonly_cert), "%s/srvonly.pem", dir);
	snprintf(srvonly_key, sizeof(srvonly_key), "%s/srvonly.key", dir);
	snprintf(clionly_cert, sizeof(clionly_cert), "%s/clionly.pem", dir);
	snprintf(clionly_key, sizeof(clionly_key), "%s/clionly.key", dir);
	return make_cert("ca", "rdmem-test-ca", NULL, NULL) ||
		       make_cert("other", "rdmem-other-ca", NULL, NULL) ||
		       make_cert("srv", "localhost", "ca", SRV_EXT "serverAuth") ||
		       make_cert("cli", "agent-1", "ca", "extendedKeyUsage=clientAuth") ||
		       make_cert("ocli", "agent-x", "other", "extendedKeyUsage=clientAuth") ||
		       make_cert("srvonly", "agent-s", "ca", "extendedKeyUsage=serverAuth") ||
		       make_cert("clionly", "localhost", "ca", SRV_EXT "clientAuth")
		   ? -1
		   : 0;
}

/* ---- the relay ------------------------------------------------------------------ */

struct relay {
	int lfd;
	unsigned port, upstream;
	pthread_t thread;
	atomic_int stop;
	pthread_mutex_t lock; /* below: the test reads and arms, the relay thread writes */
	uint8_t *cap;	      /* every byte either way, in arrival order */
	size_t cap_len;
	int flip_down, flip_up; /* armed: flip a byte of the next chunk that way */
	int flipped;
	unsigned accepted;
};

static int send_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One chunk from -> to: recorded, maybe with a byte flipped past its record header. */
static int relay_pass(struct relay *r, int from, int to, uint8_t *buf, int down)
{
	ssize_t n = recv(from, buf, RELAY_BUF, 0);

	if (n <= 0)
		return -1;
	pthread_mutex_lock(&r->lock);
	if (n > 32 && (down ? r->flip_down : r->flip_up)) {
		buf[n / 2] ^= 0x01;
		r->flip_down = r->flip_up = 0;
		r->flipped++;
	}
	if (r->cap_len + (size_t)n <= CAP_MAX) {
		memcpy(r->cap + r->cap_len, buf, (size_t)n);
		r->cap_len += (size_t)n;
	}
	pthread_mutex_unlock(&r->lock);
	return send_all(to, buf, (size_t)n);
}

static int relay_dial(unsigned port)
{
	struct sockaddr_in a = {
		AF_INET, htons((uint16_t)port), { htonl(INADDR_LOOPBACK) }, { 0 }
	};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void relay_serve(struct relay *r, int cfd)
{
	uint8_t *buf = malloc(RELAY_BUF);
	int sfd = relay_dial(r->upstream), one = 1;

	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	while (buf && sfd >= 0 && !atomic_load(&r->stop)) {
		struct pollfd p[2] = { { cfd, POLLIN, 0 }, { sfd, POLLIN, 0 } };

		if (poll(p, 2, 100) < 0)
			break;
		if ((p[0].revents && relay_pass(r, cfd, sfd, buf, 0) < 0) ||
		    (p[1].revents && relay_pass(r, sfd, cfd, buf, 1) < 0))
			break;
	}
	if (sfd >= 0)
		close(sfd);
	close(cfd);
	free(buf);
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;

	while (!atomic_load(&r->stop)) {
		struct pollfd p = { r->lfd, POLLIN, 0 };
		int cfd;

		if (poll(&p, 1, 100) <= 0)
			continue;
		cfd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0)
			continue;
		pthread_mutex_lock(&r->lock);
		r->accepted++;
		pthread_mutex_unlock(&r->lock);
		relay_serve(r, cfd);
	}
	return NULL;
}

static int relay_start(struct relay *r, unsigned upstream)
{
	struct sockaddr_in a = { AF_INET, 0, { htonl(INADDR_LOOPBACK) }, { 0 } };
	socklen_t len = sizeof(a);

	memset(r, 0, sizeof(*r));
	r->upstream = upstream;
	pthread_mutex_init(&r->lock, NULL);
	r->cap = malloc(CAP_MAX);
	r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!r->cap || r->lfd < 0 || bind(r->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(r->lfd, 8) < 0 || getsockname(r->lfd, (struct sockaddr *)&a, &len) < 0)
		return -1;
	r->port = ntohs(a.sin_port);
	return pthread_create(&r->thread, NULL, relay_main, r) ? -1 : 0;
}

static void relay_stop(struct relay *r)
{
	atomic_store(&r->stop, 1);
	pthread_join(r->thread, NULL);
	close(r->lfd);
	free(r->cap);
	pthread_mutex_destroy(&r->lock);
}

/* 1 when the capture holds needle. */
static int relay_saw(struct relay *r, const void *needle, size_t n)
{
	int seen;

	pthread_mutex_lock(&r->lock);
	seen = memmem(r->cap, r->cap_len, needle, n) != NULL;
	pthread_mutex_unlock(&r->lock);
	return seen;
}

static void relay_arm(struct relay *r, int down)
{
	pthread_mutex_lock(&r->lock);
	if (down)
		r->flip_down = 1;
	else
		r->flip_up = 1;
	pthread_mutex_unlock(&r->lock);
}

static unsigned relay_get(struct relay *r, int *flipped)
{
	unsigned acc;

	pthread_mutex_lock(&r->lock);
	acc = r->accepted;
	*flipped = r->flipped;
	pthread_mutex_unlock(&r->lock);
	return acc;
}

/* ---- the rig -------------------------------------------------------------------- */

static const struct rdmem_opts tcp_opts = { RDMEM_PATH_TCP, 3000, NULL };

/* The server's STATS over TLS (as the agent would, with a client certificate),
 * after AUTH when the server has a secret (secret: its file, else NULL). */
static long long server_stat_auth(struct e2e *e, const char *secret, const char *name)
{
	struct rdmem_tls_files f = { cli_cert, cli_key, ca, NULL };
	struct rdmem_tls_ctx *x = NULL;
	struct rdmem_tcp_client *c = NULL;
	struct rdmem_auth *a = NULL;
	struct rdmem_tcp_call call;
	static char text[16384];
	long long v = -1;

	if (rdmem_tls_ctx_create(&f, 0, &x) < 0 || (secret && rdmem_auth_load(secret, &a) < 0)) {
		rdmem_tls_ctx_free(x);
		return -1;
	}
	memset(&call, 0, sizeof(call));
	call.req.op = RDMEM_OP_STATS;
	call.req.flags = RDMEM_F_JSON;
	call.reply = text;
	call.reply_cap = sizeof(text) - 1;
	if (rdmem_tcp_client_connect("127.0.0.1", (uint16_t)(e->port + 1), 2000, &c) == 0 &&
	    rdmem_tcp_client_starttls(c, x, "127.0.0.1", 2000) == 0 &&
	    (!a || rdmem_tcp_client_auth(c, a, 2000) == 0) &&
	    rdmem_tcp_client_call(c, &call, 5000) == 0 && call.rep.status == RDMEM_S_OK) {
		text[call.rep.val_len] = '\0';
		v = e2e_json_num(text, name);
	}
	rdmem_tcp_client_close(c);
	rdmem_auth_free(a);
	rdmem_tls_ctx_free(x);
	return v;
}

static long long server_stat(struct e2e *e, const char *name)
{
	return server_stat_auth(e, NULL, name);
}

/*
 * Server (with TLS when tls), agent over TCP through the relay; extra agent
 * arguments after the relay's port (NULL-terminated, at most 8).
 */
static int rig_start(struct e2e *e, struct relay *r, int tls, const char *server_ca, const char *a0,
		     const char *a1, const char *a2, const char *a3)
{
	char port[16];

	if (e2e_init(e, "tcp") < 0)
		return -1;
	if (tls && e2e_server(e, "shm", "--tls-cert", srv_cert, "--tls-key", srv_key,
			      server_ca ? "--tls-ca" : NULL, server_ca, NULL) < 0)
		return -1;
	if (!tls && e2e_server(e, "shm", NULL) < 0)
		return -1;
	if (relay_start(r, e->port + 1) < 0)
		return -1;
	snprintf(port, sizeof(port), "%u", r->port);
	return e2e_agent(e, "--tcp-port", port, "--connect-timeout", "1000", a0, a1, a2, a3, NULL);
}

static void rig_stop(struct e2e *e, struct relay *r)
{
	e2e_fini(e);
	relay_stop(r);
}

/* 0 when key holds exactly want (len bytes). */
static int get_is(struct e2e *e, const char *key, const uint8_t *want, uint32_t len)
{
	void *v = NULL;
	uint32_t n = 0;
	int rc = rdmem_get(e->h, key, (uint32_t)strlen(key), &v, &n, &tcp_opts);

	rc = rc ? rc : (n == len && memcmp(v, want, len) == 0) ? 0 : -EILSEQ;
	free(v);
	return rc;
}

/* A value whose bytes the capture is searched for. */
static void marker_value(uint8_t *v, uint32_t n)
{
	static const char m[] = "rdmem-plaintext-marker-0123456789abcdef";
	uint32_t i;

	for (i = 0; i < n; i++)
		v[i] = (uint8_t)m[i % (sizeof(m) - 1)];
}

/* PUT, GET and MGET of small values and one of 1 MiB: every byte back as put. */
static void exact_calls(struct e2e *e)
{
	static uint8_t big[1u << 20], small[3][700];
	const char *keys[3] = { "s0", "s1", "s2" };
	uint32_t lens[3] = { 2, 2, 2 }, i;
	struct rdmem_mget m;

	for (i = 0; i < 3; i++) {
		marker_value(small[i], sizeof(small[i]));
		small[i][0] = (uint8_t)i;
		CHECK_EQ(rdmem_put(e->h, keys[i], 2, small[i], sizeof(small[i]), &tcp_opts), 0);
		CHECK_EQ(get_is(e, keys[i], small[i], sizeof(small[i])), 0);
	}
	e2e_fill(big, sizeof(big), 7);
	CHECK_EQ(rdmem_put(e->h, "big", 3, big, sizeof(big), &tcp_opts), 0);
	CHECK_EQ(get_is(e, "big", big, sizeof(big)), 0);
	memset(&m, 0, sizeof(m));
	CHECK_EQ(rdmem_mget(e->h, keys, lens, 3, &m, &tcp_opts), 0);
	for (i = 0; i < 3; i++) {
		const void *d = NULL;
		uint32_t n = 0;

		CHECK_EQ(rdmem_mget_value(&m, i, &d, &n), 1);
		CHECK(n == sizeof(small[i]) && d && memcmp(d, small[i], n) == 0);
	}
	rdmem_mget_free(&m);
}

/* A ping through the agent on segment shm (not the rig's): its result. */
static int ping_via(const char *shm)
{
	rdmem_t *h = NULL;
	int rc = rdmem_open(shm, &h);

	if (rc == 0)
		rc = rdmem_ping(h, &(struct rdmem_opts){ RDMEM_PATH_TCP, 1500, NULL });
	if (h)
		rdmem_close(h);
	return rc;
}

/* ---- cases ---------------------------------------------------------------------- */

static void test_tls_exact_and_opaque(void)
{
	static const char m[] = "rdmem-plaintext-marker-0123456789abcdef";
	struct e2e e;
	struct relay r;
	int flipped;

	REQUIRE(rig_start(&e, &r, 1, NULL, "--tls-ca", ca, "--tls-server-name", "localhost") == 0);
	exact_calls(&e);
	CHECK(!relay_saw(&r, m, sizeof(m) - 1));
	CHECK_EQ(e2e_stat(&e, "tls.handshakes"), 1);
	CHECK_EQ(e2e_stat(&e, "tls.handshake_failures"), 0);
	CHECK_EQ(e2e_stat(&e, "tcp.connects"), 1);
	CHECK_EQ(relay_get(&r, &flipped), 1);
	CHECK(server_stat(&e, "tls.handshakes") >= 1);
	rig_stop(&e, &r);
}

/* The same through the same relay without TLS: the marker is there to see. */
static void test_plain_capture_shows_values(void)
{
	static const char m[] = "rdmem-plaintext-marker-0123456789abcdef";
	struct e2e e;
	struct relay r;

	REQUIRE(rig_start(&e, &r, 0, NULL, NULL, NULL, NULL, NULL) == 0);
	exact_calls(&e);
	CHECK(relay_saw(&r, m, sizeof(m) - 1));
	CHECK_EQ(e2e_stat(&e, "tls.handshakes"), 0);
	rig_stop(&e, &r);
}

static void test_wrong_ca_refused(void)
{
	struct e2e e;
	struct relay r;

	REQUIRE(rig_start(&e, &r, 1, NULL, "--tls-ca", other_ca, NULL, NULL) == 0);
	CHECK(rdmem_ping(e.h, &(struct rdmem_opts){ RDMEM_PATH_TCP, 1500, NULL }) < 0);
	CHECK(e2e_stat(&e, "tls.handshake_failures") >= 1);
	CHECK_EQ(e2e_stat(&e, "tls.handshakes"), 0);
	CHECK(proc_log_has(&e.agent, "the server's certificate refused"));
	CHECK(server_stat(&e, "tls.handshake_failures") >= 1);
	rig_stop(&e, &r);
}

/* A name the certificate does not carry fails like a wrong CA. */
static void test_wrong_name_refused(void)
{
	struct e2e e;
	struct relay r;

	REQUIRE(rig_start(&e, &r, 1, NULL, "--tls-ca", ca, "--tls-server-name",
			  "not-the-server.example") == 0);
	CHECK(rdmem_ping(e.h, &(struct rdmem_opts){ RDMEM_PATH_TCP, 1500, NULL }) < 0);
	CHECK(e2e_stat(&e, "tls.handshake_failures") >= 1);
	CHECK(proc_log_has(&e.agent, "does not match"));
	rig_stop(&e, &r);
}

static void test_client_cert_required(void)
{
	struct e2e e;
	struct relay r;
	struct proc p2;
	char port[16];

	/* No client certificate: refused, both sides say and count it. */
	REQUIRE(rig_start(&e, &r, 1, ca, "--tls-ca", ca, NULL, NULL) == 0);
	CHECK(rdmem_ping(e.h, &(struct rdmem_opts){ RDMEM_PATH_TCP, 1500, NULL }) < 0);
	CHECK(e2e_stat(&e, "tls.handshake_failures") >= 1);
	CHECK_EQ(e2e_stat(&e, "tls.handshakes"), 0);
	CHECK(proc_log_has(&e.server, "TLS handshake failed"));
	CHECK(proc_log_has(&e.agent, "refused our TLS session"));
	CHECK(server_stat(&e, "tls.handshake_failures") >= 1);
	e2e_stop_agent(&e);

	/* A certificate from another CA: refused too. */
	snprintf(port, sizeof(port), "%u", r.port);
	memset(&p2, 0, sizeof(p2));
	{
		char shm[96];

		snprintf(shm, sizeof(shm), "%s-o", e.shm);
		REQUIRE(e2e_second_agent(&e, &p2, shm, "--tcp-port", port, "--tls-ca", ca,
					 "--tls-cert", other_cli_cert, "--tls-key", other_cli_key,
					 NULL) == 0);
		CHECK(ping_via(shm) < 0);
		CHECK(proc_log_has(&p2, "refused our TLS session"));
		CHECK(!proc_log_has(&p2, "tcp: connected"));
		proc_stop(&p2, SIGTERM, 5000);
		shm_unlink(shm);
	}

	/* With one signed by the server's CA: calls work. */
	REQUIRE(e2e_agent(&e, "--tcp-port", port, "--tls-ca", ca, "--tls-cert", cli_cert,
			  "--tls-key", cli_key, NULL) == 0);
	exact_calls(&e);
	CHECK_EQ(e2e_stat(&e, "tls.handshakes"), 1);
	rig_stop(&e, &r);
}

/*
 * Certificates from the right CA but for the other end are refused
 * (extended key usage): a server-only one offered by an agent, a
 * client-only one offered by a server. Both sides count it.
 */
static void test_wrong_purpose_refused(void)
{
	struct e2e e;

	REQUIRE(e2e_init(&e, "tcp") == 0);
	REQUIRE(e2e_server(&e, "shm", "--tls-cert", srv_cert, "--tls-key", srv_key, "--tls-ca", ca,
			   NULL) == 0);
	REQUIRE(e2e_agent(&e, "--tls-ca", ca, "--tls-cert", srvonly_cert, "--tls-key", srvonly_key,
			  "--connect-timeout", "1000", NULL) == 0);
	CHECK(rdmem_ping(e.h, &(struct rdmem_opts){ RDMEM_PATH_TCP, 1500, NULL }) < 0);
	CHECK(proc_log_has(&e.server, "does not match the intended purpose"));
	CHECK(proc_log_has(&e.agent, "refused our TLS session"));
	CHECK(server_stat(&e, "tls.handshake_failures") >= 1);
	CHECK_EQ(e2e_stat(&e, "tls.handshakes"), 0);
	e2e_fini(&e);

	REQUIRE(e2e_init(&e, "tcp") == 0);
	REQUIRE(e2e_server(&e, "shm", "--tls-cert", clionly_cert, "--tls-key", clionly_key, NULL) ==
		0);
	REQUIRE(e2e_agent(&e, "--tls-ca", ca, "--connect-timeout", "1000", NULL) == 0);
	CHECK(rdmem_ping(e.h, &(struct rdmem_opts){ RDMEM_PATH_TCP, 1500, NULL }) < 0);
	CHECK(proc_log_has(&e.agent, "the server's certificate refused"));
	CHECK(proc_log_has(&e.agent, "does not match the intended purpose"));
	CHECK(e2e_stat(&e, "tls.handshake_failures") >= 1);
	CHECK_EQ(e2e_stat(&e, "tls.handshakes"), 0);
	e2e_fini(&e);
}

/* One byte flipped in a record: the connection breaks, never wrong bytes. */
static void flip_case(int down)
{
	struct e2e e;
	struct relay r;
	uint8_t v[2000];
	unsigned acc;
	int flipped, i, rc;

	REQUIRE(rig_start(&e, &r, 1, NULL, "--tls-ca", ca, NULL, NULL) == 0);
	e2e_fill(v, sizeof(v), 3);
	CHECK_EQ(rdmem_put(e.h, "f", 1, v, sizeof(v), &tcp_opts), 0);
	acc = relay_get(&r, &flipped);
	relay_arm(&r, down);
	rc = get_is(&e, "f", v, sizeof(v)); /* retried on the next connection, or failed */
	CHECK(rc == 0 || (rc != -EILSEQ && rc < 0));
	relay_get(&r, &flipped);
	CHECK_EQ(flipped, 1);
	if (down)
		CHECK_EQ(e2e_stat(&e, "tls.record_failures"), 1);
	else
		CHECK_EQ(server_stat(&e, "tls.record_failures"), 1);
	for (i = 0; i < 3; i++) {
		e2e_fill(v, sizeof(v), 40u + (unsigned)i);
		CHECK_EQ(rdmem_put(e.h, "f", 1, v, sizeof(v), &tcp_opts), 0);
		CHECK_EQ(get_is(&e, "f", v, sizeof(v)), 0);
	}
	CHECK(relay_get(&r, &flipped) > acc); /* dialled again */
	CHECK_EQ(e2e_stat(&e, "tls.handshakes"), 2);
	rig_stop(&e, &r);
}

static void test_flipped_reply_record(void)
{
	flip_case(1);
}

static void test_flipped_request_record(void)
{
	flip_case(0);
}

/* The secret file (s1) and a wrong one (s2), each 160 bytes. */
static int make_secrets(char *s1, char *s2)
{
	char cmd[512];

	snprintf(s1, 160, "%s/secret", dir);
	snprintf(s2, 160, "%s/wrong", dir);
	snprintf(cmd, sizeof(cmd),
		 "umask 077 && echo rdmem-tls-test-secret-0123456789abcdef > %s && "
		 "echo rdmem-tls-test-wrong-0123456789abcdef > %s",
		 s1, s2);
	return sh(cmd);
}

/* A TLS server with the secret s1 (s2: a wrong one), the relay before it at port. */
static int secret_rig(struct e2e *e, struct relay *r, char *s1, char *s2, char *port)
{
	if (make_secrets(s1, s2) < 0 || e2e_init(e, "tcp") < 0 ||
	    e2e_server(e, "shm", "--tls-cert", srv_cert, "--tls-key", srv_key, "--secret-file", s1,
		       NULL) < 0 ||
	    relay_start(r, e->port + 1) < 0)
		return -1;
	snprintf(port, 16, "%u", r->port);
	return 0;
}

/*
 * Secret and certificates combine: AUTH runs inside TLS (no frame tags
 * there: the records authenticate every byte), and a wrong secret is still
 * refused after a good handshake.
 */
static void test_tls_with_secret(void)
{
	struct e2e e;
	struct relay r;
	struct proc p2;
	char port[16], s1[160], s2[160], shm[96];
	uint8_t v[4096];

	REQUIRE(secret_rig(&e, &r, s1, s2, port) == 0);
	REQUIRE(e2e_agent(&e, "--tcp-port", port, "--tls-ca", ca, "--secret-file", s1, NULL) == 0);
	e2e_fill(v, sizeof(v), 5);
	CHECK_EQ(rdmem_put(e.h, "sec", 3, v, sizeof(v), &tcp_opts), 0);
	CHECK_EQ(get_is(&e, "sec", v, sizeof(v)), 0);
	CHECK_EQ(e2e_stat(&e, "tls.handshakes"), 1);
	CHECK_EQ(e2e_stat(&e, "tcp.mac_failures"), 0);
	snprintf(shm, sizeof(shm), "%s-w", e.shm);
	snprintf(port, sizeof(port), "%u", e.port + 1); /* straight: the relay serves one */
	memset(&p2, 0, sizeof(p2));
	REQUIRE(e2e_second_agent(&e, &p2, shm, "--tcp-port", port, "--tls-ca", ca, "--secret-file",
				 s2, NULL) == 0);
	CHECK(ping_via(shm) < 0);
	CHECK(proc_log_has(&p2, "refused our proof of the shared secret"));
	CHECK(!proc_log_has(&p2, "tcp: connected"));
	proc_stop(&p2, SIGTERM, 5000);
	shm_unlink(shm);
	rig_stop(&e, &r);
}

/* Sends the AUTH value tok (a captured one) in a TLS session of our own: the reply's status. */
static int replay_auth_over_tls(unsigned port, const uint8_t *tok)
{
	struct rdmem_tls_files f = { NULL, NULL, ca, NULL };
	struct rdmem_tls_ctx *x = NULL;
	struct rdmem_tcp_client *c = NULL;
	struct rdmem_auth_tcp_reply theirs;
	struct rdmem_tcp_call call;
	int st = -1;

	if (rdmem_tls_ctx_create(&f, 0, &x) < 0)
		return -1;
	memset(&call, 0, sizeof(call));
	call.req.op = RDMEM_OP_AUTH;
	call.req.path = RDMEM_PATH_TCP;
	call.req.val_len = sizeof(struct rdmem_auth_tcp);
	call.val = tok;
	call.reply = &theirs;
	call.reply_cap = sizeof(theirs);
	if (rdmem_tcp_client_connect("127.0.0.1", (uint16_t)port, 2000, &c) == 0 &&
	    rdmem_tcp_client_starttls(c, x, "127.0.0.1", 2000) == 0 &&
	    rdmem_tcp_client_call(c, &call, 3000) == 0)
		st = call.rep.status;
	rdmem_tcp_client_close(c);
	rdmem_tls_ctx_free(x);
	return st;
}

/*
 * Under TLS frames carry no tags, so AUTH must be bound to the session: a
 * plain agent with the secret dials the TLS server and sends its AUTH in the
 * clear (the relay records it); replayed inside another TLS session, still
 * fresh and never seen by the server, it is refused and counted. The honest
 * TLS agent with the secret works.
 */
static void test_auth_replay_over_tls_refused(void)
{
	struct e2e e;
	struct relay r;
	struct proc p2;
	char port[16], s1[160], s2[160], shm[96];
	uint8_t auth[RDMEM_DESC_SIZE + sizeof(struct rdmem_auth_tcp)], v[700];
	uint16_t op = 0;

	REQUIRE(secret_rig(&e, &r, s1, s2, port) == 0);
	snprintf(shm, sizeof(shm), "%s-p", e.shm);
	memset(&p2, 0, sizeof(p2));
	REQUIRE(e2e_second_agent(&e, &p2, shm, "--tcp-port", port, "--connect-timeout", "1000",
				 "--secret-file", s1, NULL) == 0);
	CHECK(ping_via(shm) < 0);
	proc_stop(&p2, SIGTERM, 5000);
	shm_unlink(shm);
	/* The agent speaks first: the capture starts with its AUTH frame. */
	pthread_mutex_lock(&r.lock);
	REQUIRE(r.cap_len >= sizeof(auth));
	memcpy(auth, r.cap, sizeof(auth));
	pthread_mutex_unlock(&r.lock);
	memcpy(&op, auth + 8, sizeof(op));
	REQUIRE(op == RDMEM_OP_AUTH);
	CHECK_EQ(replay_auth_over_tls(e.port + 1, auth + RDMEM_DESC_SIZE), RDMEM_S_DENIED);
	CHECK(proc_log_has(&e.server, "did not prove the shared secret (wrong proof)"));
	CHECK_EQ(server_stat_auth(&e, s1, "auth_failures"), 1);
	/* The honest agent, TLS and the secret: AUTH bound to its session checks. */
	REQUIRE(e2e_agent(&e, "--tls-ca", ca, "--secret-file", s1, NULL) == 0);
	e2e_fill(v, sizeof(v), 9);
	CHECK_EQ(rdmem_put(e.h, "hb", 2, v, sizeof(v), &tcp_opts), 0);
	CHECK_EQ(get_is(&e, "hb", v, sizeof(v)), 0);
	CHECK_EQ(e2e_stat(&e, "tls.handshakes"), 1);
	CHECK_EQ(server_stat_auth(&e, s1, "auth_failures"), 1);
	rig_stop(&e, &r);
}

/* Whole TLS records of plaintext until n bytes came; 0, or -1 (3 s passed, closed). */
static int gnutls_recv_all(gnutls_session_t s, uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = gnutls_record_recv(s, p, n);

		/* A timed recv is not restarted: EINTR comes with no signal when
		 * this thread's io_uring is torn down (test_server_tcp's read_full). */
		if (r == GNUTLS_E_INTERRUPTED)
			continue;
		if (r <= 0)
			return -1; /* E_AGAIN here is SO_RCVTIMEO: no answer */
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/*
 * A GnuTLS peer (blocking, in this thread) that updates its keys right after
 * the handshake (a TLS 1.3 KeyUpdate record) and then pings: the reply's
 * status, or -1 when none came within 3 s.
 */
static int keyupdate_then_ping(unsigned port)
{
	gnutls_certificate_credentials_t cred = NULL;
	gnutls_session_t s = NULL;
	struct timeval tv = { 3, 0 };
	struct rdmem_desc d;
	struct rdmem_frame f;
	uint8_t req[RDMEM_DESC_SIZE], rep[RDMEM_DESC_SIZE];
	int fd = relay_dial(port), r = -1, st = -1;

	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    gnutls_certificate_allocate_credentials(&cred) < 0 ||
	    gnutls_certificate_set_x509_trust_file(cred, ca, GNUTLS_X509_FMT_PEM) <= 0 ||
	    gnutls_init(&s, GNUTLS_CLIENT) < 0)
		goto out;
	if (gnutls_priority_set_direct(s, "NORMAL:-VERS-ALL:+VERS-TLS1.3", NULL) < 0 ||
	    gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred) < 0)
		goto out;
	gnutls_transport_set_int(s, fd);
	do
		r = gnutls_handshake(s);
	while (r < 0 && !gnutls_error_is_fatal(r));
	if (r < 0 || gnutls_session_key_update(s, 0) < 0)
		goto out;
	memset(&d, 0, sizeof(d));
	d.state = RDMEM_FRAME_MAGIC;
	d.op = RDMEM_OP_PING;
	d.path = RDMEM_PATH_TCP;
	d.req_id = 7;
	rdmem_frame_put(req, &d);
	if (gnutls_record_send(s, req, sizeof(req)) == (ssize_t)sizeof(req) &&
	    gnutls_recv_all(s, rep, sizeof(rep)) == 0 &&
	    rdmem_frame_parse(rep, sizeof(rep), 0, &f) == RDMEM_FRAME_OK && f.desc.req_id == 7)
		st = f.desc.status;
out:
	if (s)
		gnutls_deinit(s);
	if (cred)
		gnutls_certificate_free_credentials(cred);
	if (fd >= 0)
		close(fd);
	return st;
}

/* A KeyUpdate leaves records in the session's in-buffer: they are read on. */
static void test_key_update_answered(void)
{
	struct e2e e;

	REQUIRE(e2e_init(&e, "tcp") == 0);
	REQUIRE(e2e_server(&e, "shm", "--tls-cert", srv_cert, "--tls-key", srv_key, NULL) == 0);
	CHECK_EQ(keyupdate_then_ping(e.port + 1), RDMEM_S_OK);
	CHECK_EQ(server_stat(&e, "tls.handshakes"), 2);
	e2e_fini(&e);
}

/* The peak resident memory of process pid, in MiB (VmHWM), or -1. */
static long peak_mib(pid_t pid)
{
	long kb = proc_status_kb(pid, "VmHWM");

	return kb < 0 ? -1 : kb / 1024;
}

/*
 * PUTs of 4 MiB values, 16 in flight, through a TLS agent: it encrypts at
 * most 1 MiB per send, so a batch is not held twice more (GnuTLS's cork
 * buffer and the whole batch's ciphertext) while it goes. Its peak memory
 * stays near the plain agent's (measured: 71 MiB plain; 203 MiB before).
 */
static void test_large_batch_memory(void)
{
	struct e2e e;
	char cmd[512];
	long peak;

	REQUIRE(e2e_init(&e, "tcp") == 0);
	REQUIRE(e2e_server(&e, "shm", "--tls-cert", srv_cert, "--tls-key", srv_key, "--max-value",
			   "4m", NULL) == 0);
	REQUIRE(e2e_agent(&e, "--tls-ca", ca, "--max-value", "4m", NULL) == 0);
	snprintf(cmd, sizeof(cmd),
		 "%s/rdmem --shm-name %s --path tcp --timeout 20000 bench --op put --size 4194304 "
		 "--window 16 -n 96 --keys 16 >/dev/null",
		 proc_bin(), e.shm);
	CHECK_EQ(sh(cmd), 0);
	peak = peak_mib(e.agent.pid);
	printf("# TLS agent's peak memory, 96 PUTs of 4 MiB, window 16: %ld MiB\n", peak);
	CHECK(peak > 0);
	if (!getenv("RDMEM_SANITIZER")) /* their allocators and shadow hold much more */
		CHECK(peak < 140);
	CHECK_EQ(e2e_stat(&e, "tls.handshakes"), 1);
	e2e_fini(&e);
}

/* One end with TLS, the other without: no call goes through, each says why. */
static void test_mismatched_ends(void)
{
	struct e2e e;

	REQUIRE(e2e_init(&e, "tcp") == 0);
	REQUIRE(e2e_server(&e, "shm", "--tls-cert", srv_cert, "--tls-key", srv_key, NULL) == 0);
	REQUIRE(e2e_agent(&e, "--connect-timeout", "1000", NULL) == 0);
	CHECK(rdmem_ping(e.h, &(struct rdmem_opts){ RDMEM_PATH_TCP, 1500, NULL }) < 0);
	CHECK(proc_log_has(&e.agent, "the server answered in TLS"));
	CHECK(proc_log_has(&e.server, "An unexpected TLS packet was received"));
	e2e_fini(&e);

	REQUIRE(e2e_init(&e, "tcp") == 0);
	REQUIRE(e2e_server(&e, "shm", NULL) == 0);
	REQUIRE(e2e_agent(&e, "--tls-ca", ca, "--connect-timeout", "1000", NULL) == 0);
	CHECK(rdmem_ping(e.h, &(struct rdmem_opts){ RDMEM_PATH_TCP, 1500, NULL }) < 0);
	CHECK(proc_log_has(&e.agent, "closed the connection during the TLS handshake"));
	CHECK(e2e_stat(&e, "tls.handshake_failures") >= 1);
	e2e_fini(&e);
}

/* A raw connection that sends the first bytes of a ClientHello and stops. */
static int stall_dial(unsigned port)
{
	static const uint8_t hello[] = { 0x16, 0x03, 0x01, 0x01, 0x00, 0x01, 0x00, 0x00, 0xfc };
	int fd = relay_dial(port);

	if (fd >= 0 && send_all(fd, hello, sizeof(hello)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ms until the server closes fd (reads EOF or an error), at most limit. */
static int closed_after(int fd, int limit, uint64_t t0)
{
	struct pollfd p = { fd, POLLIN, 0 };
	uint8_t b[256];

	while ((int)((rdmem_now_ns() - t0) / 1000000) < limit) {
		if (poll(&p, 1, 50) > 0 && recv(fd, b, sizeof(b), MSG_DONTWAIT) <= 0)
			return (int)((rdmem_now_ns() - t0) / 1000000);
	}
	return -1;
}

/* More than --tcp-max-conns (16): the oldest are evicted for newer ones,
 * the honest agent's connection among them, the rest meet the deadline. */
#define STALLERS 30

static void test_stalled_handshake_closed(void)
{
	struct e2e e;
	int fds[STALLERS], i, ms, worst = 0;
	long long deadline, evicted;
	uint64_t t0;
	uint8_t v[512];

	REQUIRE(e2e_init(&e, "tcp") == 0);
	REQUIRE(e2e_server(&e, "shm", "--tls-cert", srv_cert, "--tls-key", srv_key, "--tcp-auth-ms",
			   "1000", "--tcp-max-conns", "16", NULL) == 0);
	t0 = rdmem_now_ns();
	for (i = 0; i < STALLERS; i++)
		fds[i] = stall_dial(e.port + 1);
	/* An honest agent while they hang: its calls work. */
	REQUIRE(e2e_agent(&e, "--tls-ca", ca, NULL) == 0);
	e2e_fill(v, sizeof(v), 11);
	CHECK_EQ(rdmem_put(e.h, "h", 1, v, sizeof(v), &tcp_opts), 0);
	CHECK_EQ(get_is(&e, "h", v, sizeof(v)), 0);
	for (i = 0; i < STALLERS; i++) {
		CHECK(fds[i] >= 0);
		if (fds[i] < 0)
			continue;
		ms = closed_after(fds[i], 4000, t0);
		CHECK(ms >= 0);
		worst = ms > worst ? ms : worst;
		close(fds[i]);
	}
	deadline = server_stat(&e, "net.tcp_deadline");
	evicted = server_stat(&e, "net.tcp_evicted");
	printf("# %d stalled handshakes closed by %d ms (--tcp-auth-ms 1000): %lld at the "
	       "deadline, %lld evicted for newer connections\n",
	       STALLERS, worst, deadline, evicted);
	CHECK(worst >= 900 && worst <= 2500);
	CHECK(deadline >= 1 && evicted >= 1);
	CHECK_EQ(deadline + evicted, STALLERS);
	CHECK_EQ(server_stat(&e, "tls.handshake_failures"), deadline);
	CHECK(proc_log_has(&e.server, "TLS handshake not finished within --tcp-auth-ms"));
	CHECK_EQ(get_is(&e, "h", v, sizeof(v)), 0);
	e2e_fini(&e);
}

int main(void)
{
	if (make_certs() < 0) {
		printf("not ok - make_certs (is openssl installed? scripts/install-deps.sh)\n");
		return 1;
	}
	RUN(test_tls_exact_and_opaque);
	RUN(test_plain_capture_shows_values);
	RUN(test_wrong_ca_refused);
	RUN(test_wrong_name_refused);
	RUN(test_client_cert_required);
	RUN(test_wrong_purpose_refused);
	RUN(test_tls_with_secret);
	RUN(test_auth_replay_over_tls_refused);
	RUN(test_mismatched_ends);
	RUN(test_key_update_answered);
	RUN(test_large_batch_memory);
	RUN(test_flipped_reply_record);
	RUN(test_flipped_request_record);
	RUN(test_stalled_handshake_closed);
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "  could not remove %s\n", dir);
	}
	return check_done();
}
