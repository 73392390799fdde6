/* ucx_kv_client.c - the UCX comparison client (bench/ucx_kv.h): the bench
 * workload (workload.h) as UCP active messages to ucx_kv_server, one worker
 * busy-polling, up to --window calls in flight. The ops map as Redis's do:
 *   get -> GET of a preloaded key          put, bigput -> SET
 *   large-get -> GET of a preloaded "big:<size>" value holding the same
 *                bytes as RDMemRPC's generated object
 * Every reply is checked byte for byte (replies of large values arrive by
 * rendezvous, straight into the call's buffer); after PUTs every key written
 * reads back. A wrong reply counts as a failure, exit status 1.
 *
 *   ucx_kv_client --port P --op get|put|large-get|bigput [--size B] [--window W] [-n N]
 * Prints one JSON record (latency.h) on stdout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "latency.h"
#include "ucx_kv.h"
#include "workload.h"

#define UCL_STALL_NS (30ull * 1000000000ull) /* no reply for this long: the run fails */

/* One call in flight: done when both its send and its reply are. */
struct ucl_call {
	uint8_t busy;	  /* issued, and not both sent and answered */
	uint8_t sent;	  /* its send completed */
	uint8_t heard;	  /* its reply's header came (a duplicate is a failure) */
	uint8_t answered; /* its reply is in whole (a rendezvous value comes later) */
	uint64_t tag;
	uint64_t t0;
	const uint8_t *expect; /* GET: the value it must return */
	uint64_t expect_len;
	uint8_t hdr[sizeof(struct ukv_req) + UKV_KEY_MAX];
	uint8_t *rbuf; /* a rendezvous reply lands here */
};

struct ucl {
	struct bench_opts o;
	struct ukv_net net;
	ucp_ep_h ep;
	struct ucl_call *calls; /* o.window of them, call i in i % window */
	char (*keys)[BENCH_KEY_LEN + 1];
	uint8_t *values; /* keys x size: value of key i at i * size */
	uint8_t *object; /* LARGE_GET: the expected object */
	char big_key[32];
	uint64_t issued, completed, failures;
	struct lat_stats *st; /* NULL outside the measured phase */
};

static struct ucl g;

static void ucl_fail(uint64_t tag, const char *why)
{
	if (g.failures++ < 5)
		fprintf(stderr, "ucx_kv_client: %s call %llu: %s\n", g.o.op_name,
			(unsigned long long)tag, why);
}

static void ucl_part_done(struct ucl_call *c)
{
	if (!c->busy || !c->sent || !c->answered)
		return;
	c->busy = 0;
	if (g.st)
		lat_add(g.st, c->t0, lat_now_ns());
	g.completed++;
}

static void ucl_send_done(void *req, ucs_status_t status, void *user)
{
	struct ucl_call *c = user;

	if (status != UCS_OK)
		ucl_fail(c->tag, ucs_status_string(status));
	c->sent = 1;
	ucl_part_done(c);
	ucp_request_free(req);
}

static void ucl_check_value(struct ucl_call *c, const void *bytes, size_t len)
{
	if (len != c->expect_len || memcmp(bytes, c->expect, len) != 0)
		ucl_fail(c->tag, "wrong value");
}

static void ucl_recv_done(void *req, ucs_status_t status, size_t length, void *user)
{
	struct ucl_call *c = user;

	if (status != UCS_OK)
		ucl_fail(c->tag, ucs_status_string(status));
	else
		ucl_check_value(c, c->rbuf, length);
	c->answered = 1;
	ucl_part_done(c);
	ucp_request_free(req);
}

/* Brings a rendezvous reply's value into the call's buffer, then checks it. */
static void ucl_take_rndv(struct ucl_call *c, void *desc, size_t len)
{
	ucp_request_param_t p;
	ucs_status_ptr_t r;

	memset(&p, 0, sizeof(p));
	p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
	p.cb.recv_am = ucl_recv_done;
	p.user_data = c;
	r = ucp_am_recv_data_nbx(g.net.worker, desc, c->rbuf, len, &p);
	if (UCS_PTR_IS_PTR(r))
		return;
	if (UCS_PTR_IS_ERR(r))
		ucl_fail(c->tag, ucs_status_string(UCS_PTR_STATUS(r)));
	else
		ucl_check_value(c, c->rbuf, len);
	c->answered = 1;
	ucl_part_done(c);
}

static ucs_status_t ucl_on_reply(void *arg, const void *header, size_t hlen, void *data, size_t len,
				 const ucp_am_recv_param_t *param)
{
	struct ukv_reply rp;
	struct ucl_call *c;

	(void)arg;
	if (hlen != sizeof(rp)) {
		ucl_fail(0, "reply header of a wrong size");
		return UCS_OK;
	}
	memcpy(&rp, header, sizeof(rp));
	c = &g.calls[rp.tag % g.o.window];
	if (!c->busy || c->heard || c->tag != rp.tag) {
		ucl_fail(rp.tag, "reply to no call in flight");
		return UCS_OK;
	}
	c->heard = 1;
	if (rp.status != 0 || len != (c->expect ? c->expect_len : 0) || len > g.o.size) {
		ucl_fail(rp.tag, rp.status ? strerror(-rp.status) : "reply of a wrong length");
	} else if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
		ucl_take_rndv(c, data, len);
		return UCS_OK;
	} else if (c->expect) {
		ucl_check_value(c, data, len);
	}
	c->answered = 1;
	ucl_part_done(c);
	return UCS_OK;
}

/* Sends call tag: op on key, with value (SET) or expecting it back (GET). */
static int ucl_issue(uint64_t tag, uint32_t op, const char *key, const uint8_t *value, uint64_t len)
{
	struct ucl_call *c = &g.calls[tag % g.o.window];
	struct ukv_req q = { op, (uint32_t)strlen(key), tag };
	ucp_request_param_t p;
	ucs_status_ptr_t r;

	*c = (struct ucl_call){ .busy = 1, .tag = tag, .rbuf = c->rbuf };
	c->expect = op == UKV_GET ? value : NULL;
	c->expect_len = op == UKV_GET ? len : 0;
	memcpy(c->hdr, &q, sizeof(q));
	memcpy(c->hdr + sizeof(q), key, q.key_len);
	memset(&p, 0, sizeof(p));
	p.op_attr_mask =
	    UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
	p.flags = UCP_AM_SEND_FLAG_REPLY;
	p.cb.send = ucl_send_done;
	p.user_data = c;
	c->t0 = lat_now_ns();
	r = ucp_am_send_nbx(g.ep, UKV_AM_REQUEST, c->hdr, sizeof(q) + q.key_len,
			    op == UKV_SET ? value : NULL, op == UKV_SET ? len : 0, &p);
	if (UCS_PTR_IS_PTR(r))
		return 0;
	if (UCS_PTR_IS_ERR(r)) {
		ucl_fail(tag, ucs_status_string(UCS_PTR_STATUS(r)));
		c->busy = 0; /* nothing of it is in flight */
		g.completed++;
		return -1;
	}
	c->sent = 1;
	ucl_part_done(c);
	return 0;
}

/* Progresses the worker while busy(arg); -1 after a stall. */
static int ucl_progress_while(int (*busy)(const void *), const void *arg)
{
	uint64_t last = g.completed, since = lat_now_ns();

	while (busy(arg)) {
		if (ucp_worker_progress(g.net.worker) || g.completed != last) {
			last = g.completed;
			since = lat_now_ns();
		} else if (lat_now_ns() - since > UCL_STALL_NS) {
			fprintf(stderr, "ucx_kv_client: no reply for 30 s\n");
			return -1;
		}
	}
	return 0;
}

static int ucl_call_busy(const void *c)
{
	return ((const struct ucl_call *)c)->busy;
}

static int ucl_any_busy(const void *unused)
{
	(void)unused;
	return g.completed < g.issued;
}

/* Call i of the workload. */
static int ucl_issue_workload(uint64_t i)
{
	unsigned k = (unsigned)(i % g.o.keys);
	const uint8_t *v = g.values + (size_t)k * g.o.size;

	switch (g.o.op) {
	case BENCH_GET:
		return ucl_issue(g.issued++, UKV_GET, g.keys[k], v, g.o.size);
	case BENCH_LARGE_GET:
		return ucl_issue(g.issued++, UKV_GET, g.big_key, g.object, g.o.size);
	default:
		return ucl_issue(g.issued++, UKV_SET, g.keys[k], v, g.o.size);
	}
}

/* Runs count workload calls with up to window in flight. */
static int ucl_run(uint64_t count)
{
	uint64_t i;

	for (i = 0; i < count; i++) {
		/* The next call takes the place of the one window calls back
		 * (replies may come out of order): wait until that one is done. */
		if (ucl_progress_while(ucl_call_busy, &g.calls[g.issued % g.o.window]) < 0)
			return -1;
		if (ucl_issue_workload(i) < 0)
			return -1;
	}
	return ucl_progress_while(ucl_any_busy, NULL);
}

/* One call at a time, for preloading and reading back. */
static int ucl_one(uint32_t op, const char *key, const uint8_t *v, uint64_t len)
{
	uint64_t f = g.failures;

	if (ucl_issue(g.issued++, op, key, v, len) < 0 ||
	    ucl_progress_while(ucl_any_busy, NULL) < 0)
		return -1;
	return g.failures == f ? 0 : -1;
}

static int ucl_preload(void)
{
	unsigned i;

	if (g.o.op == BENCH_LARGE_GET)
		return ucl_one(UKV_SET, g.big_key, g.object, g.o.size);
	for (i = 0; g.o.op == BENCH_GET && i < g.o.keys; i++)
		if (ucl_one(UKV_SET, g.keys[i], g.values + (size_t)i * g.o.size, g.o.size) < 0)
			return -1;
	return 0;
}

/* After PUTs: every key written must read back as its value. */
static int ucl_verify_puts(uint64_t written)
{
	unsigned i;

	for (i = 0; bench_is_put(g.o.op) && i < g.o.keys && i < written; i++)
		if (ucl_one(UKV_GET, g.keys[i], g.values + (size_t)i * g.o.size, g.o.size) < 0) {
			fprintf(stderr, "ucx_kv_client: %s does not read back\n", g.keys[i]);
			return -1;
		}
	return 0;
}

static int ucl_make_expected(void)
{
	unsigned i, nk = g.o.op == BENCH_LARGE_GET ? 0 : g.o.keys;

	g.keys = calloc(g.o.keys, sizeof(*g.keys));
	g.values = malloc((size_t)nk * g.o.size + 1);
	g.object = malloc(g.o.op == BENCH_LARGE_GET ? g.o.size : 1);
	g.calls = calloc(g.o.window, sizeof(*g.calls));
	if (!g.keys || !g.values || !g.object || !g.calls)
		return -1;
	for (i = 0; i < g.o.window; i++)
		if (!(g.calls[i].rbuf = malloc(g.o.size)))
			return -1;
	for (i = 0; i < g.o.keys; i++)
		bench_key(g.keys[i], i);
	for (i = 0; i < nk; i++)
		bench_value(g.values + (size_t)i * g.o.size, g.o.size, i, g.o.seed);
	if (g.o.op == BENCH_LARGE_GET)
		rdmem_big_fill(g.o.size, 0, g.object, g.o.size);
	snprintf(g.big_key, sizeof(g.big_key), "big:%llu", (unsigned long long)g.o.size);
	return 0;
}

/* Tells the server this client is done, and waits until UCX sent it. */
static void ucl_bye(void)
{
	ucp_request_param_t p;
	ucs_status_t s;

	memset(&p, 0, sizeof(p));
	p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
	p.flags = UCP_AM_SEND_FLAG_REPLY;
	s = ukv_wait(&g.net, ucp_am_send_nbx(g.ep, UKV_AM_BYE, NULL, 0, NULL, 0, &p));
	if (s == UCS_OK) {
		memset(&p, 0, sizeof(p)); /* a flushing close: BYE gets there first */
		s = ukv_wait(&g.net, ucp_ep_close_nbx(g.ep, &p));
	}
	if (s != UCS_OK)
		fprintf(stderr, "ucx_kv_client: goodbye: %s\n", ucs_status_string(s));
}

static int ucl_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)g.o.port) };
	int fd, rc;

	if (inet_pton(AF_INET, g.o.host, &sa.sin_addr) != 1) {
		fprintf(stderr, "ucx_kv_client: --host %s: not an IPv4 address\n", g.o.host);
		return -1;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "ucx_kv_client: connect %s:%d: %s\n", g.o.host, g.o.port,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rc = ukv_ep_by_exchange(&g.net, fd, &g.ep, "ucx_kv_client");
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	struct lat_stats st;
	int rc;

	signal(SIGPIPE, SIG_IGN); /* a server gone mid-exchange is an EPIPE */
	if (bench_parse_args(argc, argv, &g.o, "ucx") < 0 || lat_init(&st, g.o.n) < 0)
		return 2;
	if (ucl_make_expected() < 0 || ukv_net_open(&g.net, "ucx_kv_client") < 0 ||
	    ukv_set_handler(&g.net, UKV_AM_REPLY, ucl_on_reply, NULL, "ucx_kv_client") < 0 ||
	    ucl_connect() < 0 || ucl_preload() < 0) {
		fprintf(stderr, "ucx_kv_client: setup failed\n");
		return 1;
	}
	if (ucl_run(g.o.warmup) < 0 || g.failures) {
		fprintf(stderr, "ucx_kv_client: warm-up failed\n");
		return 1;
	}
	g.st = &st;
	lat_begin(&st);
	rc = ucl_run(g.o.n);
	lat_end(&st);
	g.st = NULL;
	st.failures =
	    g.failures + (rc < 0) + (ucl_verify_puts(g.o.warmup > g.o.n ? g.o.warmup : g.o.n) < 0);
	lat_print_json(stdout, &st, g.o.system, g.o.op_name, g.o.size, g.o.window);
	lat_free(&st);
	ucl_bye();
	ukv_net_close(&g.net);
	return st.failures ? 1 : 0;
}
