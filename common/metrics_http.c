/* metrics_http.c - the /metrics endpoint (see metrics_http.h).
 *
 * The socket faces a network, so nothing a client sends is trusted: the
 * request is read into a fixed buffer (too long: 400), only its request
 * line is parsed and checked byte by byte, and a slow or silent client
 * costs one connection slot until its deadline. The page is rendered into
 * a buffer owned by this thread, so the callback runs on one thread only.
 */
#include "common/metrics_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdmem/util.h"

#define MH_BODY_START	   (64u << 10)
#define MH_BACKLOG	   16
#define MH_IDLE_POLL_MS	   1000
#define MH_ACCEPT_PAUSE_NS 100000000ull /* out of fds: stop accepting for 100 ms */

struct mh_conn {
	int fd; /* -1: free */
	uint64_t deadline_ns;
	size_t req_len;
	char req[RDMEM_METRICS_REQ_MAX + 1];
	char *out; /* the whole answer, once the request was read */
	size_t out_len, out_off;
};

struct rdmem_metrics_http {
	struct rdmem_metrics_http_config cfg;
	char bind[64];
	int lfd, stop_efd;
	uint16_t port;
	pthread_t thread;
	uint64_t accept_pause_until;
	char *body;
	size_t body_cap;
	struct mh_conn conns[RDMEM_METRICS_MAX_CONNS];
};

int rdmem_metrics_bind_ok(const char *addr)
{
	unsigned char buf[sizeof(struct in6_addr)];

	if (!addr || strlen(addr) >= 64)
		return -EINVAL;
	return inet_pton(AF_INET, addr, buf) == 1 || inet_pton(AF_INET6, addr, buf) == 1 ? 0
											 : -EINVAL;
}

/* ---- connections ------------------------------------------------------- */

static void mh_close(struct mh_conn *c)
{
	if (c->fd >= 0 && close(c->fd) < 0)
		rdmem_debug("metrics: close: %s", strerror(errno));
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	c->out_len = c->out_off = c->req_len = 0;
}

/* Renders the page, growing the buffer while the callback says it is too small. */
static int mh_render(struct rdmem_metrics_http *m)
{
	for (;;) {
		int n;

		if (!m->body) {
			m->body = malloc(m->body_cap);
			if (!m->body)
				return -ENOMEM;
		}
		n = m->cfg.render(m->cfg.ctx, m->body, m->body_cap);
		if (n != -E2BIG)
			return n;
		if (m->body_cap >= RDMEM_METRICS_BODY_MAX)
			return -E2BIG;
		free(m->body);
		m->body = NULL;
		m->body_cap *= 2;
	}
}

/* Prepares the answer: status line, headers, and the body unless head_only. */
static int mh_answer(struct mh_conn *c, int code, const char *reason, const char *extra,
		     const char *body, size_t body_len, int head_only)
{
	char head[512];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\n"
			 "Content-Type: %s\r\n"
			 "Content-Length: %zu\r\n"
			 "Cache-Control: no-store\r\n"
			 "Connection: close\r\n%s\r\n",
			 code, reason,
			 code == 200 ? "text/plain; version=0.0.4; charset=utf-8"
				     : "text/plain; charset=utf-8",
			 body_len, extra ? extra : "");
	size_t total;

	if (n < 0 || (size_t)n >= sizeof(head))
		return -EOVERFLOW;
	total = (size_t)n + (head_only ? 0 : body_len);
	c->out = malloc(total);
	if (!c->out)
		return -ENOMEM;
	memcpy(c->out, head, (size_t)n);
	if (!head_only && body_len)
		memcpy(c->out + n, body, body_len);
	c->out_len = total;
	c->out_off = 0;
	return 0;
}

static int mh_error(struct mh_conn *c, int code, const char *reason, const char *extra)
{
	char body[64];
	int n = snprintf(body, sizeof(body), "%d %s\n", code, reason);

	return mh_answer(c, code, reason, extra, body, (size_t)n, 0);
}

/* A token of the request line: visible ASCII only (no spaces, controls, 8-bit). */
static int mh_visible(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7f)
			return 0;
	return n > 0;
}

/* Parses the request line of a complete request and prepares the answer. */
static int mh_handle(struct rdmem_metrics_http *m, struct mh_conn *c)
{
	char *line = c->req, *eol = memchr(c->req, '\n', c->req_len);
	char *sp1, *sp2, *method, *target, *version, *q;
	size_t len, tlen;
	int head, n;

	if (!eol)
		return mh_error(c, 400, "Bad Request", NULL);
	len = (size_t)(eol - line);
	if (len && line[len - 1] == '\r')
		len--;
	/* METHOD SP TARGET SP VERSION, single spaces, nothing else. */
	sp1 = memchr(line, ' ', len);
	sp2 = sp1 ? memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - line)) : NULL;
	if (!sp1 || !sp2)
		return mh_error(c, 400, "Bad Request", NULL);
	method = line;
	target = sp1 + 1;
	version = sp2 + 1;
	tlen = (size_t)(sp2 - target);
	if (!mh_visible(method, (size_t)(sp1 - method)) || !mh_visible(target, tlen) ||
	    !mh_visible(version, len - (size_t)(version - line)) || target[0] != '/')
		return mh_error(c, 400, "Bad Request", NULL);
	if (len - (size_t)(version - line) != 8 ||
	    (memcmp(version, "HTTP/1.1", 8) != 0 && memcmp(version, "HTTP/1.0", 8) != 0))
		return mh_error(c, 400, "Bad Request", NULL);
	head = (size_t)(sp1 - method) == 4 && memcmp(method, "HEAD", 4) == 0;
	if (!head && ((size_t)(sp1 - method) != 3 || memcmp(method, "GET", 3) != 0))
		return mh_error(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n");
	q = memchr(target, '?', tlen);
	if (q)
		tlen = (size_t)(q - target); /* a query (scrapers add some) is ignored */
	if (tlen != 8 || memcmp(target, "/metrics", 8) != 0)
		return mh_error(c, 404, "Not Found", NULL);
	n = mh_render(m);
	if (n < 0) {
		rdmem_warn("metrics: rendering the page: %s", strerror(-n));
		return mh_error(c, 500, "Internal Server Error", NULL);
	}
	return mh_answer(c, 200, "OK", NULL, m->body, (size_t)n, head);
}

/* Reads what the client sent; answers once the headers are complete. */
static void mh_read(struct rdmem_metrics_http *m, struct mh_conn *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, c->req + c->req_len, RDMEM_METRICS_REQ_MAX - c->req_len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) { /* closed before a full request, or reset */
			mh_close(c);
			return;
		}
		c->req_len += (size_t)n;
		c->req[c->req_len] = '\0';
		if (memchr(c->req, '\0', c->req_len)) {
			if (mh_error(c, 400, "Bad Request", NULL) < 0)
				mh_close(c);
			return;
		}
		if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n")) {
			if (mh_handle(m, c) < 0)
				mh_close(c);
			return;
		}
		if (c->req_len == RDMEM_METRICS_REQ_MAX) {
			if (mh_error(c, 400, "Bad Request", NULL) < 0)
				mh_close(c);
			return;
		}
	}
}

static void mh_write(struct mh_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0) {
			mh_close(c);
			return;
		}
		c->out_off += (size_t)n;
	}
	/* All sent: tell the client we are done before the close. */
	if (shutdown(c->fd, SHUT_WR) < 0)
		rdmem_debug("metrics: shutdown: %s", strerror(errno));
	mh_close(c);
}

static struct mh_conn *mh_free_conn(struct rdmem_metrics_http *m)
{
	unsigned i;

	for (i = 0; i < RDMEM_METRICS_MAX_CONNS; i++)
		if (m->conns[i].fd < 0)
			return &m->conns[i];
	return NULL;
}

static void mh_accept(struct rdmem_metrics_http *m)
{
	struct mh_conn *c;

	while ((c = mh_free_conn(m))) {
		int fd = accept4(m->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				rdmem_warn("metrics: accept: %s; pausing for 100 ms",
					   strerror(errno));
				m->accept_pause_until = rdmem_now_ns() + MH_ACCEPT_PAUSE_NS;
			} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
				   errno != ECONNABORTED) {
				rdmem_warn("metrics: accept: %s", strerror(errno));
			}
			return;
		}
		c->fd = fd;
		c->req_len = 0;
		c->deadline_ns = rdmem_now_ns() + RDMEM_METRICS_TIMEOUT_MS * 1000000ull;
	}
}

/* ---- the thread -------------------------------------------------------- */

static int mh_timeout_ms(const struct rdmem_metrics_http *m, uint64_t now)
{
	uint64_t next = now + MH_IDLE_POLL_MS * 1000000ull;
	unsigned i;

	for (i = 0; i < RDMEM_METRICS_MAX_CONNS; i++)
		if (m->conns[i].fd >= 0 && m->conns[i].deadline_ns < next)
			next = m->conns[i].deadline_ns;
	if (m->accept_pause_until > now && m->accept_pause_until < next)
		next = m->accept_pause_until;
	return next > now ? (int)((next - now + 999999) / 1000000) : 0;
}

static void *mh_main(void *arg)
{
	struct rdmem_metrics_http *m = arg;

	pthread_setname_np(pthread_self(), "rdmem-metrics"); /* ps -L, top -H, the idle test */
	for (;;) {
		struct pollfd pfd[2 + RDMEM_METRICS_MAX_CONNS];
		int at[RDMEM_METRICS_MAX_CONNS], lat = -1, n = 0, r;
		uint64_t now = rdmem_now_ns();
		unsigned i;

		pfd[n++] = (struct pollfd){ m->stop_efd, POLLIN, 0 };
		if (mh_free_conn(m) && now >= m->accept_pause_until) {
			lat = n;
			pfd[n++] = (struct pollfd){ m->lfd, POLLIN, 0 };
		}
		for (i = 0; i < RDMEM_METRICS_MAX_CONNS; i++) {
			struct mh_conn *c = &m->conns[i];

			at[i] = -1;
			if (c->fd < 0)
				continue;
			at[i] = n;
			pfd[n++] = (struct pollfd){ c->fd, (short)(c->out ? POLLOUT : POLLIN), 0 };
		}
		r = poll(pfd, (nfds_t)n, mh_timeout_ms(m, now));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			rdmem_err("metrics: poll: %s; the endpoint stops", strerror(errno));
			break;
		}
		if (pfd[0].revents)
			break;
		if (lat >= 0 && pfd[lat].revents)
			mh_accept(m);
		now = rdmem_now_ns();
		for (i = 0; i < RDMEM_METRICS_MAX_CONNS; i++) {
			struct mh_conn *c = &m->conns[i];

			if (at[i] >= 0 && pfd[at[i]].revents) {
				if (!c->out)
					mh_read(m, c);
				/* Not else: an answer ready after the read goes out now. */
				if (c->fd >= 0 && c->out)
					mh_write(c);
			}
			if (c->fd >= 0 && now >= c->deadline_ns) {
				rdmem_debug("metrics: dropping a client that took over %d ms",
					    RDMEM_METRICS_TIMEOUT_MS);
				mh_close(c);
			}
		}
	}
	return NULL;
}

/* ---- start / stop ------------------------------------------------------ */

static int mh_listen(struct rdmem_metrics_http *m)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	socklen_t len;
	int one = 1, e;

	if (inet_pton(AF_INET, m->bind, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(m->cfg.port);
		len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, m->bind, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(m->cfg.port);
		len = sizeof(*in6);
	} else {
		rdmem_err("metrics: '%s' is not a numeric IPv4 or IPv6 address", m->bind);
		return -EINVAL;
	}
	m->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (m->lfd < 0) {
		e = errno;
		rdmem_err("metrics: socket: %s", strerror(e));
		return -e;
	}
	if (setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(m->lfd, (struct sockaddr *)&ss, len) < 0 || listen(m->lfd, MH_BACKLOG) < 0) {
		e = errno;
		rdmem_err("metrics: listening on %s port %u: %s", m->bind, m->cfg.port,
			  strerror(e));
		return -e;
	}
	len = sizeof(ss);
	if (getsockname(m->lfd, (struct sockaddr *)&ss, &len) < 0) {
		e = errno;
		rdmem_err("metrics: getsockname: %s", strerror(e));
		return -e;
	}
	m->port = ntohs(ss.ss_family == AF_INET ? in4->sin_port : in6->sin6_port);
	return 0;
}

static void mh_free(struct rdmem_metrics_http *m)
{
	unsigned i;

	for (i = 0; i < RDMEM_METRICS_MAX_CONNS; i++)
		mh_close(&m->conns[i]);
	if (m->lfd >= 0)
		close(m->lfd);
	if (m->stop_efd >= 0)
		close(m->stop_efd);
	free(m->body);
	free(m);
}

int rdmem_metrics_http_start(const struct rdmem_metrics_http_config *cfg,
			     struct rdmem_metrics_http **out)
{
	struct rdmem_metrics_http *m;
	const char *bind = cfg->bind ? cfg->bind : RDMEM_METRICS_DEFAULT_BIND;
	unsigned i;
	int ret;

	if (!cfg->render || rdmem_metrics_bind_ok(bind) < 0)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->cfg = *cfg;
	snprintf(m->bind, sizeof(m->bind), "%s", bind);
	m->cfg.bind = m->bind;
	m->lfd = -1;
	m->body_cap = MH_BODY_START;
	for (i = 0; i < RDMEM_METRICS_MAX_CONNS; i++)
		m->conns[i].fd = -1;
	m->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (m->stop_efd < 0) {
		ret = -errno;
		rdmem_err("metrics: eventfd: %s", strerror(-ret));
		mh_free(m);
		return ret;
	}
	ret = mh_listen(m);
	if (ret == 0 && (ret = -pthread_create(&m->thread, NULL, mh_main, m)) < 0)
		rdmem_err("metrics: starting the thread: %s", strerror(-ret));
	if (ret < 0) {
		mh_free(m);
		return ret;
	}
	rdmem_info("metrics: serving http://%s%s%s:%u/metrics", strchr(m->bind, ':') ? "[" : "",
		   m->bind, strchr(m->bind, ':') ? "]" : "", m->port);
	*out = m;
	return 0;
}

uint16_t rdmem_metrics_http_port(const struct rdmem_metrics_http *m)
{
	return m->port;
}

void rdmem_metrics_http_stop(struct rdmem_metrics_http *m)
{
	uint64_t one = 1;

	if (!m)
		return;
	if (write(m->stop_efd, &one, sizeof(one)) != sizeof(one))
		rdmem_err("metrics: waking the thread to stop: %s", strerror(errno));
	pthread_join(m->thread, NULL);
	mh_free(m);
}
