/* ucx_kv_server.c - the UCX comparison server (bench/ucx_kv.h): a hash map
 * of keys to values behind UCP active messages, one thread busy-polling its
 * worker, as a UCX user would write it.
 *
 *   ucx_kv_server [--bind ADDR] [--port P]   (port 0: any; prints "listening on P")
 *
 * Values are reference counted: a GET reply holds its value until UCX says
 * the send is complete (a rendezvous reply is read by the peer later), so a
 * SET of the same key meanwhile never frees bytes a reply still sends.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ucx_kv.h"

#define USRV_SLOTS     (1u << 16)    /* hash slots: the bench stores ~1,030 keys */
#define USRV_VALUE_MAX (64ull << 20) /* the largest value a SET may store */

struct usrv_val {
	uint32_t refs;
	uint64_t len;
	uint8_t bytes[];
};

struct usrv_slot {
	uint32_t key_len; /* 0: empty */
	char key[UKV_KEY_MAX];
	struct usrv_val *val;
};

/* One reply in flight: its header must outlive the send, its value too. */
struct usrv_send {
	struct ukv_reply hdr;
	struct usrv_val *val;
};

/* One SET whose value UCX still brings in (rendezvous). */
struct usrv_recv {
	ucp_ep_h ep;
	uint64_t tag;
	uint32_t key_len;
	char key[UKV_KEY_MAX];
	struct usrv_val *val;
};

static struct ukv_net g_net;
static struct usrv_slot *g_map;
static volatile sig_atomic_t g_stop;
static unsigned g_recvs_pending; /* rendezvous SET values still coming in */

static void usrv_val_put(struct usrv_val *v)
{
	if (v && --v->refs == 0)
		free(v);
}

static uint64_t usrv_hash(const char *k, uint32_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	while (n--)
		h = (h ^ (uint8_t)*k++) * 1099511628211ull;
	return h;
}

/* The slot holding key, or the empty slot where it goes; NULL when full. */
static struct usrv_slot *usrv_find(const char *key, uint32_t n)
{
	uint32_t i = (uint32_t)usrv_hash(key, n), probes;

	for (probes = 0; probes < USRV_SLOTS; probes++, i++) {
		struct usrv_slot *s = &g_map[i & (USRV_SLOTS - 1)];

		if (s->key_len == 0 || (s->key_len == n && memcmp(s->key, key, n) == 0))
			return s;
	}
	return NULL;
}

static void usrv_send_done(void *req, ucs_status_t status, void *user)
{
	struct usrv_send *sc = user;

	if (status != UCS_OK)
		fprintf(stderr, "ucx_kv_server: reply: %s\n", ucs_status_string(status));
	usrv_val_put(sc->val);
	free(sc);
	ucp_request_free(req);
}

/* Answers call tag on ep; val (may be NULL) is the value, whose ref it takes. */
static void usrv_reply(ucp_ep_h ep, uint64_t tag, int status, struct usrv_val *val)
{
	struct usrv_send *sc = malloc(sizeof(*sc));
	ucp_request_param_t p;
	ucs_status_ptr_t r;

	if (!sc) {
		usrv_val_put(val);
		fprintf(stderr, "ucx_kv_server: out of memory for a reply\n");
		return;
	}
	memset(sc, 0, sizeof(*sc));
	sc->hdr.status = status;
	sc->hdr.tag = tag;
	sc->hdr.value_len = val ? val->len : 0;
	sc->val = val;
	memset(&p, 0, sizeof(p));
	p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
	p.cb.send = usrv_send_done;
	p.user_data = sc;
	r = ucp_am_send_nbx(ep, UKV_AM_REPLY, &sc->hdr, sizeof(sc->hdr), val ? val->bytes : NULL,
			    val ? val->len : 0, &p);
	if (UCS_PTR_IS_PTR(r))
		return; /* usrv_send_done releases */
	if (UCS_PTR_IS_ERR(r))
		fprintf(stderr, "ucx_kv_server: reply: %s\n", ucs_status_string(UCS_PTR_STATUS(r)));
	usrv_val_put(val);
	free(sc);
}

static int usrv_store(const char *key, uint32_t n, struct usrv_val *v)
{
	struct usrv_slot *s = usrv_find(key, n);

	if (!s)
		return -ENOSPC;
	usrv_val_put(s->val);
	memcpy(s->key, key, n);
	s->key_len = n;
	s->val = v;
	return 0;
}

static void usrv_set_done(struct usrv_recv *rc, ucs_status_t status)
{
	int rcode = -EIO;

	if (status == UCS_OK && (rcode = usrv_store(rc->key, rc->key_len, rc->val)) == 0)
		rc->val = NULL;
	usrv_val_put(rc->val);
	usrv_reply(rc->ep, rc->tag, rcode, NULL);
	free(rc);
}

static void usrv_recv_done(void *req, ucs_status_t status, size_t length, void *user)
{
	(void)length;
	g_recvs_pending--;
	usrv_set_done(user, status);
	ucp_request_free(req);
}

/* A SET: copies an eager value, or has UCX bring in a rendezvous one. */
static void usrv_set(const struct ukv_req *q, const char *key, void *data, size_t len,
		     const ucp_am_recv_param_t *param)
{
	struct usrv_recv *rc = calloc(1, sizeof(*rc));
	struct usrv_val *v = malloc(sizeof(*v) + len);
	ucp_request_param_t p;
	ucs_status_ptr_t r;

	if (!rc || !v) {
		free(rc);
		free(v);
		usrv_reply(param->reply_ep, q->tag, -ENOMEM, NULL);
		return;
	}
	v->refs = 1;
	v->len = len;
	*rc = (struct usrv_recv){ param->reply_ep, q->tag, q->key_len, { 0 }, v };
	memcpy(rc->key, key, q->key_len);
	if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
		memcpy(v->bytes, data, len);
		usrv_set_done(rc, UCS_OK);
		return;
	}
	memset(&p, 0, sizeof(p));
	p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
	p.cb.recv_am = usrv_recv_done;
	p.user_data = rc;
	r = ucp_am_recv_data_nbx(g_net.worker, data, v->bytes, len, &p);
	if (UCS_PTR_IS_PTR(r))
		g_recvs_pending++; /* usrv_recv_done answers */
	else
		usrv_set_done(rc, UCS_PTR_STATUS(r));
}

static ucs_status_t usrv_on_request(void *arg, const void *header, size_t hlen, void *data,
				    size_t len, const ucp_am_recv_param_t *param)
{
	struct ukv_req q;
	const char *key = (const char *)header + sizeof(q);
	struct usrv_slot *s;

	(void)arg;
	if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
		return UCS_OK; /* nowhere to answer (the client sends with REPLY) */
	if (hlen < sizeof(q) || (memcpy(&q, header, sizeof(q)), hlen != sizeof(q) + q.key_len) ||
	    q.key_len == 0 || q.key_len > UKV_KEY_MAX || (q.op != UKV_GET && q.op != UKV_SET)) {
		usrv_reply(param->reply_ep, hlen >= sizeof(q) ? q.tag : 0, -EINVAL, NULL);
		return param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV ? UCS_ERR_INVALID_PARAM
								     : UCS_OK;
	}
	if (q.op == UKV_SET) {
		if (len > USRV_VALUE_MAX) {
			/* A rendezvous value is dropped: its sender's send fails. */
			usrv_reply(param->reply_ep, q.tag, -E2BIG, NULL);
			return param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV ? UCS_ERR_EXCEEDS_LIMIT
									     : UCS_OK;
		}
		usrv_set(&q, key, data, len, param);
		return UCS_OK;
	}
	s = usrv_find(key, q.key_len);
	if (!s || !s->key_len) {
		usrv_reply(param->reply_ep, q.tag, -ENOENT, NULL);
		return UCS_OK;
	}
	s->val->refs++;
	usrv_reply(param->reply_ep, q.tag, 0, s->val);
	return UCS_OK;
}

/*
 * Endpoints of clients that said BYE, closed from the main loop (not inside
 * UCX's callback) once no rendezvous SET is being received (its reply would
 * go to the endpoint): a flushing close, since a forced one needs peer error
 * handling, which shared memory lacks. Close requests still running are
 * kept and freed when done. A BYE that finds the list full is dropped and
 * counted: that endpoint stays open until the server exits.
 */
#define USRV_BYES 256
static ucp_ep_h g_bye[USRV_BYES];
static void *g_closing[USRV_BYES];
static unsigned g_nbye, g_nclosing;
static unsigned long g_byes_dropped;

static ucs_status_t usrv_on_bye(void *arg, const void *header, size_t hlen, void *data, size_t len,
				const ucp_am_recv_param_t *param)
{
	(void)arg, (void)header, (void)hlen, (void)data, (void)len;
	if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
		return UCS_OK;
	if (g_nbye < USRV_BYES)
		g_bye[g_nbye++] = param->reply_ep;
	else if (g_byes_dropped++ == 0)
		fprintf(stderr, "ucx_kv_server: more than %d goodbyes pending; endpoints kept\n",
			USRV_BYES);
	return UCS_OK;
}

static void usrv_close_byes(void)
{
	ucp_request_param_t p;
	ucs_status_ptr_t r;
	unsigned i;

	for (i = 0; i < g_nclosing;) {
		if (ucp_request_check_status(g_closing[i]) == UCS_INPROGRESS) {
			i++;
			continue;
		}
		ucp_request_free(g_closing[i]);
		g_closing[i] = g_closing[--g_nclosing];
	}
	memset(&p, 0, sizeof(p));
	while (g_nbye && !g_recvs_pending && g_nclosing < USRV_BYES) {
		r = ucp_ep_close_nbx(g_bye[--g_nbye], &p);
		if (UCS_PTR_IS_PTR(r))
			g_closing[g_nclosing++] = r;
		else if (UCS_PTR_IS_ERR(r))
			fprintf(stderr, "ucx_kv_server: close: %s\n",
				ucs_status_string(UCS_PTR_STATUS(r)));
	}
}

/* Takes one waiting connection, if any: the address exchange (ucx_kv.h). */
static void usrv_accept(int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	ucp_ep_h ep;

	if (fd < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			perror("ucx_kv_server: accept");
		return;
	}
	/* The exchange blocks for one round trip: set-up, not the data path. */
	if (ukv_ep_by_exchange(&g_net, fd, &ep, "ucx_kv_server") < 0)
		fprintf(stderr, "ucx_kv_server: a client could not connect\n");
	close(fd);
}

static int usrv_listen(const char *bind_addr, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	socklen_t sl = sizeof(sa);
	int one = 1, fd;

	if (inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "ucx_kv_server: --bind %s: not an IPv4 address\n", bind_addr);
		return -1;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		fprintf(stderr, "ucx_kv_server: listen on %s:%d: %s\n", bind_addr, port,
			strerror(errno));
		return -1;
	}
	printf("listening on %u\n", ntohs(sa.sin_port));
	fflush(stdout);
	return fd;
}

static void usrv_on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "bind", required_argument, NULL, 'b' },
					    { "port", required_argument, NULL, 'p' },
					    { NULL, 0, NULL, 0 } };
	struct sigaction stop = { .sa_handler = usrv_on_signal };
	const char *bind_addr = "127.0.0.1";
	unsigned long spins = 0;
	char *end;
	long port = 0;
	int c, lfd;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'b') {
			bind_addr = optarg;
		} else if (c == 'p') {
			port = strtol(optarg, &end, 10);
			if (*end || port < 0 || port > 65535) {
				fprintf(stderr, "ucx_kv_server: --port %s: 0 to 65535\n", optarg);
				return 2;
			}
		} else {
			fprintf(stderr, "usage: ucx_kv_server [--bind ADDR] [--port P]\n");
			return 2;
		}
	}
	g_map = calloc(USRV_SLOTS, sizeof(*g_map));
	if (!g_map || ukv_net_open(&g_net, "ucx_kv_server") < 0)
		return 1;
	if (ukv_set_handler(&g_net, UKV_AM_REQUEST, usrv_on_request, NULL, "ucx_kv_server") < 0 ||
	    ukv_set_handler(&g_net, UKV_AM_BYE, usrv_on_bye, NULL, "ucx_kv_server") < 0 ||
	    (lfd = usrv_listen(bind_addr, (int)port)) < 0)
		return 1;
	/* No SA_RESTART: a stop ends an address exchange in progress too; a
	 * client gone mid-exchange is an EPIPE, not a SIGPIPE. */
	sigaction(SIGTERM, &stop, NULL);
	sigaction(SIGINT, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);
	while (!g_stop) {
		/* Busy-polls, UCX's own way; a look for new clients costs a
		 * syscall, so only every 4096 idle turns. */
		if (!ucp_worker_progress(g_net.worker) && ++spins % 4096 == 0) {
			usrv_close_byes();
			usrv_accept(lfd);
		}
	}
	close(lfd);
	return 0;
}
