/* test_secret.c - the shared secret (--secret-file) on both paths: agents
 * with it work over RDMA and TCP; agents without it or with another are
 * refused and counted; an agent with it refuses a server without it; a
 * replayed proof is refused; a secret file others can read is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "check.h"
#include "e2e.h"
#include "raw_tcp.h"
#include "tcp/client.h"
#include "tcp/frame.h"
#include "rdmem/auth.h"

/* In a directory of our own (mkdtemp): a fixed name under /tmp is one
 * another user can plant a link at first. */
static char dir[64] = "/tmp/rdmem-secret-XXXXXX";
static char secret[128], other[128], loose[128], foreign[128], fifo[128];

static void write_secret(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		abort();
	fchmod(fd, mode);
	close(fd);
}

static long long server_auth_failures(struct e2e *e)
{
	return e2e_server_stat_auth(e, secret, "auth_failures");
}

static void test_with_the_secret(void)
{
	struct e2e e;
	struct rdmem_opts tcp = { RDMEM_PATH_TCP, 2000, NULL };
	struct rdmem_info info;
	struct rdmem_opts eager = { RDMEM_PATH_EAGER, 2000, &info };

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", "--secret-file", secret, NULL) == 0);
	REQUIRE(e2e_agent(&e, "--secret-file", secret, NULL) == 0);
	CHECK_EQ(rdmem_put(e.h, "s", 1, "v", 1, &eager), 0);
	CHECK_EQ(info.path, RDMEM_PATH_EAGER);
	CHECK_EQ(rdmem_put(e.h, "s", 1, "w", 1, &tcp), 0);
	CHECK_EQ(e2e_stat(&e, "link_up"), 1);
	CHECK_EQ(server_auth_failures(&e), 0);
	e2e_fini(&e);
}

/* Without the secret, or with another one: refused on both paths, counted. */
static void refused_agent(const char *extra)
{
	struct rdmem_opts tcp = { RDMEM_PATH_TCP, 1500, NULL };
	struct rdmem_opts eager = { RDMEM_PATH_EAGER, 500, NULL };
	struct e2e e;
	int rc;

	REQUIRE(e2e_init(&e, "shm") == 0);
	e.rdma_optional = 1; /* refused: no session is the point */
	e.rdma_settled = "refused the session: authentication failed";
	REQUIRE(e2e_server(&e, "shm", "--secret-file", secret, NULL) == 0);
	REQUIRE((extra ? e2e_agent(&e, "--secret-file", extra, NULL) : e2e_agent(&e, NULL)) == 0);
	CHECK_EQ(e2e_stat(&e, "link_up"), 0);
	rc = rdmem_put(e.h, "s", 1, "v", 1, &tcp);
	CHECK(rc == -EACCES || rc == -EHOSTUNREACH);
	CHECK_EQ(rdmem_put(e.h, "s", 1, "v", 1, &eager), -EHOSTUNREACH);
	CHECK(server_auth_failures(&e) >= 2); /* at least one RDMA and one TCP refusal */
	CHECK(proc_log_has(&e.server, "authentication failed"));
	e2e_fini(&e);
}

static void test_without_a_secret(void)
{
	refused_agent(NULL);
}

static void test_with_another_secret(void)
{
	refused_agent(other);
}

/* Mutual: an agent with a secret refuses a server that cannot prove it. */
static void test_server_without_the_secret(void)
{
	struct rdmem_opts tcp = { RDMEM_PATH_TCP, 1000, NULL };
	struct e2e e;

	REQUIRE(e2e_init(&e, "shm") == 0);
	e.rdma_optional = 1; /* refused: no session is the point */
	e.rdma_settled = "did not prove the shared secret";
	REQUIRE(e2e_server(&e, "shm", NULL) == 0);
	REQUIRE(e2e_agent(&e, "--secret-file", secret, NULL) == 0);
	CHECK_EQ(e2e_stat(&e, "link_up"), 0);
	CHECK_EQ(rdmem_ping(e.h, &tcp), -EHOSTUNREACH);
	CHECK(proc_log_has(&e.agent, "did not prove the shared secret"));
	e2e_fini(&e);
}

/* Sends one AUTH proof on a new TCP connection; returns the reply status. */
static int send_proof(const struct e2e *e, struct rdmem_auth_tcp *tok)
{
	struct rdmem_tcp_client *c;
	struct rdmem_tcp_call call;
	uint8_t reply[64];
	int st = -1;

	if (rdmem_tcp_client_connect(e2e_addr(), (uint16_t)(e->port + 1), 2000, &c) < 0)
		return -1;
	memset(&call, 0, sizeof(call));
	call.req.op = RDMEM_OP_AUTH;
	call.req.val_len = sizeof(*tok);
	call.val = tok;
	call.reply = reply;
	call.reply_cap = sizeof(reply);
	if (rdmem_tcp_client_call(c, &call, 2000) == 0)
		st = call.rep.status;
	rdmem_tcp_client_close(c);
	return st;
}

/* A proof made with this nonce and the secret. */
static struct rdmem_auth_tcp make_proof(const struct rdmem_auth *a, uint64_t nonce)
{
	struct rdmem_auth_tcp tok;

	tok.nonce = nonce;
	rdmem_auth_mac(a, "agent-tcp", &tok.nonce, sizeof(tok.nonce), NULL, 0, tok.mac,
		       sizeof(tok.mac));
	return tok;
}

/* A server with the secret, and the secret loaded here to make proofs. */
static int proof_server(struct e2e *e, struct rdmem_auth **a)
{
	if (e2e_init(e, "shm") < 0 || e2e_server(e, "shm", "--secret-file", secret, NULL) < 0)
		return -1;
	return rdmem_auth_load(secret, a);
}

/* A proof recorded and sent again on a new connection is refused. */
static void test_replayed_proof(void)
{
	struct rdmem_auth_tcp tok;
	struct rdmem_auth *a;
	struct e2e e;

	REQUIRE(proof_server(&e, &a) == 0);
	tok = make_proof(a, rdmem_auth_nonce());
	CHECK_EQ(send_proof(&e, &tok), RDMEM_S_OK);
	CHECK_EQ(send_proof(&e, &tok), RDMEM_S_DENIED);
	rdmem_auth_free(a);
	e2e_fini(&e);
}

/* A proof whose nonce carries a clock outside the window (either way) is
 * refused though its MAC is right; the same proof made now is accepted. */
static void test_stale_clock_proof(void)
{
	uint64_t now = (uint64_t)time(NULL), low = rdmem_auth_nonce() & 0xffffffffu;
	uint64_t off = RDMEM_AUTH_WINDOW_S + 60;
	struct rdmem_auth_tcp tok;
	struct rdmem_auth *a;
	struct e2e e;

	REQUIRE(proof_server(&e, &a) == 0);
	tok = make_proof(a, ((now - off) << 32) | low);
	CHECK_EQ(send_proof(&e, &tok), RDMEM_S_DENIED);
	tok = make_proof(a, ((now + off) << 32) | low);
	CHECK_EQ(send_proof(&e, &tok), RDMEM_S_DENIED);
	tok = make_proof(a, (now << 32) | low);
	CHECK_EQ(send_proof(&e, &tok), RDMEM_S_OK);
	rdmem_auth_free(a);
	e2e_fini(&e);
}

/*
 * A valid AUTH alone does not prove a TCP connection: whoever saw one can
 * send it again (to another server with the secret, or once the replay
 * cache forgot it). The first frame whose MAC checks does; a connection
 * that sends AUTH and nothing else is closed at --tcp-auth-ms like one that
 * sent nothing. (Before, AUTH made it proven: held until --tcp-idle-ms.)
 */
static void test_auth_alone_does_not_prove(void)
{
	uint8_t frame[RDMEM_DESC_SIZE + sizeof(struct rdmem_auth_tcp)], buf[256];
	struct rdmem_auth_tcp tok;
	struct rdmem_auth *a;
	struct rdmem_desc d;
	struct e2e e;
	ssize_t n;
	size_t got = 0;
	int fd, err, said;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", "--secret-file", secret, "--tcp-auth-ms", "1000", NULL) == 0);
	REQUIRE(rdmem_auth_load(secret, &a) == 0);
	tok = make_proof(a, rdmem_auth_nonce());
	d = raw_tcp_desc(RDMEM_OP_AUTH, 0, sizeof(tok), 0);
	rdmem_frame_put(frame, &d);
	memcpy(frame + RDMEM_DESC_SIZE, &tok, sizeof(tok));
	fd = raw_tcp_connect(e2e_addr(), e.port + 1, 5);
	REQUIRE(fd >= 0);
	CHECK(send(fd, frame, sizeof(frame), MSG_NOSIGNAL) == (ssize_t)sizeof(frame));
	/* The AUTH reply comes, then (with nothing more sent) the end, within
	 * the 5 s receive timeout: the deadline is 1 s; before, it was held for
	 * 300 s. */
	/* EINTR (a stop and continue of this process ends a timed recv that
	 * way; seen in CI and on a loaded host) is not the server's answer. */
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0 || (n < 0 && errno == EINTR))
		got += n > 0 ? (size_t)n : 0;
	err = errno;
	CHECK(got >= RDMEM_DESC_SIZE); /* AUTH was accepted: a reply came */
	CHECK_EQ(n, 0);		       /* then the server closed it, within 5 s */
	said = proc_log_has(&e.server, "no frame whose MAC checks within --tcp-auth-ms");
	CHECK(said);
	if (got < RDMEM_DESC_SIZE || n != 0 || !said) { /* CI saw this fail once: say how */
		fprintf(stderr, "  got %zu reply bytes, then recv %zd (%s)\n", got, n,
			n < 0 ? strerror(err) : "end");
		proc_dump_log(&e.server);
	}
	close(fd);
	rdmem_auth_free(a);
	e2e_fini(&e);
}

/*
 * Nothing after a refused AUTH counts: a wrong proof followed, in the same
 * send, by a right one gets one reply, DENIED, then the end. (A refused
 * connection that went on parsing would take the second proof: a guesser
 * would get as many tries as it could pipeline.)
 */
static void test_nothing_after_a_refused_auth(void)
{
	uint8_t frames[2 * (RDMEM_DESC_SIZE + sizeof(struct rdmem_auth_tcp))], buf[256];
	const size_t one = RDMEM_DESC_SIZE + sizeof(struct rdmem_auth_tcp);
	struct rdmem_auth_tcp tok[2];
	struct rdmem_desc d, rep;
	struct rdmem_auth *a;
	struct e2e e;
	size_t got = 0;
	ssize_t n;
	int fd, i;

	REQUIRE(proof_server(&e, &a) == 0);
	tok[0] = make_proof(a, rdmem_auth_nonce());
	tok[0].mac[0] ^= 1; /* wrong */
	tok[1] = make_proof(a, rdmem_auth_nonce());
	for (i = 0; i < 2; i++) {
		d = raw_tcp_desc(RDMEM_OP_AUTH, 0, sizeof(tok[i]), (uint64_t)i + 1);
		rdmem_frame_put(frames + i * one, &d);
		memcpy(frames + i * one + RDMEM_DESC_SIZE, &tok[i], sizeof(tok[i]));
	}
	fd = raw_tcp_connect(e2e_addr(), e.port + 1, 5);
	REQUIRE(fd >= 0);
	CHECK(send(fd, frames, sizeof(frames), MSG_NOSIGNAL) == (ssize_t)sizeof(frames));
	while ((n = recv(fd, buf + got, sizeof(buf) - got, 0)) > 0 || (n < 0 && errno == EINTR))
		got += n > 0 ? (size_t)n : 0;
	CHECK_EQ(n, 0); /* closed by the server */
	CHECK_EQ(got, (size_t)RDMEM_DESC_SIZE);
	if (got >= RDMEM_DESC_SIZE) {
		memcpy(&rep, buf, sizeof(rep)); /* little-endian wire, as this host */
		CHECK_EQ(rep.req_id, 1);
		CHECK_EQ(rep.status, RDMEM_S_DENIED);
	}
	close(fd);
	rdmem_auth_free(a);
	e2e_fini(&e);
}

static void test_loose_secret_file_refused(void)
{
	struct e2e e;

	REQUIRE(e2e_init(&e, "shm") == 0);
	CHECK(e2e_server(&e, "shm", "--secret-file", loose, NULL) < 0);
	CHECK(proc_log_has(&e.server, "chmod 600"));
	e2e_fini(&e);
}

/* A secret another user owns: they chose it and can change it. */
static void test_foreign_secret_file_refused(void)
{
	struct e2e e;

	if (geteuid() != 0) {
		check_skip("foreign secret", "needs root to give a file to another uid");
		return;
	}
	REQUIRE(e2e_init(&e, "shm") == 0);
	CHECK(e2e_server(&e, "shm", "--secret-file", foreign, NULL) < 0);
	CHECK(proc_log_has(&e.server, "owned by uid 64123"));
	e2e_fini(&e);
}

/* A FIFO at the path: refused at once (the open used to wait for a writer,
 * holding the start for good). */
static void test_fifo_secret_file_refused(void)
{
	uint64_t t0 = rdmem_now_ns();
	struct e2e e;

	REQUIRE(e2e_init(&e, "shm") == 0);
	CHECK(e2e_server(&e, "shm", "--secret-file", fifo, NULL) < 0);
	CHECK(proc_log_has(&e.server, "--secret-file"));
	CHECK(proc_log_has(&e.server, "not a regular file"));
	CHECK(rdmem_now_ns() - t0 < 5000000000ull);
	e2e_fini(&e);
}

int main(void)
{
	if (!mkdtemp(dir))
		abort();
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	snprintf(other, sizeof(other), "%s/other", dir);
	snprintf(loose, sizeof(loose), "%s/loose", dir);
	snprintf(foreign, sizeof(foreign), "%s/foreign", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	write_secret(secret, "correct horse battery staple\n", 0600);
	write_secret(other, "incorrect donkey battery staple\n", 0600);
	write_secret(loose, "correct horse battery staple\n", 0644);
	write_secret(foreign, "correct horse battery staple\n", 0600);
	if ((geteuid() == 0 && chown(foreign, 64123, 64123) < 0) || mkfifo(fifo, 0600) < 0)
		abort();
	rdmem_log_init("test_secret", 0);
	RUN(test_with_the_secret);
	RUN(test_without_a_secret);
	RUN(test_with_another_secret);
	RUN(test_server_without_the_secret);
	RUN(test_replayed_proof);
	RUN(test_stale_clock_proof);
	RUN(test_auth_alone_does_not_prove);
	RUN(test_nothing_after_a_refused_auth);
	RUN(test_loose_secret_file_refused);
	RUN(test_foreign_secret_file_refused);
	RUN(test_fifo_secret_file_refused);
	unlink(secret);
	unlink(other);
	unlink(loose);
	unlink(foreign);
	unlink(fifo);
	rmdir(dir);
	return check_done();
}
