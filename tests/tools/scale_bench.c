/* scale_bench.c - many RDMA sessions against one rdmem-server: each session
 * is a real link (own connection, regions, handshake) driven from this one
 * process, running GET at a fixed window, every reply checked byte for byte.
 * Prints one JSON line: sessions, aggregate QPS, p50/p99 latency, the
 * server's RSS, and the bytes each session registered that its peer can reach.
 *
 *   scale_bench --port P -n SESSIONS [--window W] [--seconds S] [--server-pid PID]
 *               [--flood W] [--fabric shm|verbs] [--addr A] [--stats-port T]
 *               [--hold-file F] [--busy B]
 *
 * --flood W runs session 0 at window W (up to its lease): above --window, a
 * flooder that must not starve the others (their p99 is reported on its
 * own, others_p99_us, -1 when there are none); below it, a quiet session
 * among flooders, whose own p99 is first_p99_us, driven by a thread of its
 * own (quiet_main).
 * --stats-port T asks the server's STATS (its TCP port) once every session is
 * open and reports the bytes the server registered per session, as it counts
 * them (registered_bytes_per_session: mean over the sessions it lists), and
 * what all sessions hold of the device, summed by the server (qps_held, cqs,
 * mrs, registered_bytes, recv_wqes: its "resources" gauges).
 * --busy B: only B sessions send, spread evenly through the rest (which stay
 * open and idle), for grouping that must cost nothing for an idle session.
 * --hold-file F: once every session is open (and the server asked), say so
 * on stderr ("N sessions open") and wait while F exists (at most 5 minutes)
 * before the GETs, for a caller that looks at the device meanwhile (the rxe
 * suite's many_sessions) and then removes F.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/link.h"
#include "fabric/dataplane.h"
#include "rdmem/pctl.h"
#include "rdmem/util.h"
#include "tcp/client.h"

#define VALUE_LEN   32
#define MAX_WIN	    64
#define HOLD_MAX_NS (300ull * 1000000000ull) /* --hold-file: a caller that died */

struct sess {
	struct rdmem_link *l;
	struct rdmem_mr src;
	uint8_t buf[128]; /* key, then the value for the initial PUT */
	uint32_t key_len, window;
	uint64_t free_slots; /* bit k: slot k has no request outstanding */
	uint32_t seq[MAX_WIN];
	uint64_t sent_ns[MAX_WIN];
	uint64_t hold_until;
	struct rdmem_turn_view turn;
	uint16_t wakes; /* turns that came with RDMEM_TURN_IMM: told in every hint */
	uint8_t want[VALUE_LEN];
	int flood;
};

struct opts {
	const char *addr;
	enum rdmem_fab_kind fabric;
	uint16_t port, stats_port;
	uint32_t n, window, flood, seconds, busy;
	const char *hold_file;
	int server_pid;
};

struct samples {
	uint64_t *v;
	size_t n, cap;
	size_t sorted; /* n when they were last sorted: each report sorts once */
};

/* What one driving thread saw; the quiet session's thread has its own. */
struct tally {
	struct samples all, others, first; /* first: session 0's */
	uint64_t wrong, errors, yields, ops, first_yields, wakes;
};

static struct tally loop_tally, quiet_tally;

static void record(struct samples *s, uint64_t x)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1 << 16;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			abort();
	}
	s->v[s->n++] = x;
}

static int send_req(struct sess *s, uint32_t slot, uint16_t op, uint32_t val_len)
{
	struct rdmem_desc *d = &s->l->stage[slot];
	struct rdmem_sge sge = { (uintptr_t)s->buf, s->key_len + val_len, s->src.lkey };
	struct rdmem_dp_msg m = { .slot = slot,
				  .desc = d,
				  .desc_lkey = s->l->mr_local.lkey,
				  .slot_addr = s->l->w.req.addr + slot * s->l->req_stride,
				  .rkey = s->l->w.req.rkey,
				  .payload = &sge,
				  .npayload = 1 };

	memset(d, 0, sizeof(*d));
	d->op = op;
	d->path = RDMEM_PATH_EAGER;
	d->key_len = (uint16_t)s->key_len;
	d->val_len = val_len;
	d->seq = ++s->seq[slot];
	d->data_off = (uint32_t)rdmem_slot_data_off(slot, s->l->slot_bytes);
	d->req_id = slot;
	d->hint = s->wakes;
	s->sent_ns[slot] = rdmem_now_ns();
	s->free_slots &= ~(1ull << slot);
	return rdmem_dp_publish(s->l->conn, &m);
}

/* The reply in slot: checked, timed, and the slot freed. */
static void take_reply(struct sess *s, uint32_t slot, int is_get, struct tally *t)
{
	uint8_t *resp = s->l->resp + (uint64_t)slot * s->l->w.resp_stride;
	uint64_t now = rdmem_now_ns();
	struct rdmem_desc d;

	if (slot >= MAX_WIN || rdmem_dp_take((struct rdmem_desc *)resp, &d) < 0) {
		t->errors++;
		return;
	}
	if (d.seq != s->seq[slot] || d.status != RDMEM_S_OK)
		t->errors++;
	else if (is_get && (d.val_len != VALUE_LEN ||
			    memcmp(resp + RDMEM_DESC_SIZE, s->want, VALUE_LEN) != 0))
		t->wrong++;
	s->free_slots |= 1ull << slot;
	if (!is_get)
		return;
	t->ops++;
	record(&t->all, now - s->sent_ns[slot]);
	record(s->flood ? &t->first : &t->others, now - s->sent_ns[slot]);
}

static int drain(struct sess *s, int is_get, struct tally *t)
{
	struct rdmem_wc wc[32];
	int n = rdmem_fab_poll(s->l->conn, wc, 32), i;

	if (n < 0)
		return n;
	for (i = 0; i < n; i++) {
		if (wc[i].status != RDMEM_WC_SUCCESS)
			return -EIO;
		if (wc[i].op != RDMEM_WC_RECV_IMM)
			continue;
		if (rdmem_fab_post_recv(s->l->conn, 1) < 0)
			return -EIO;
		if (wc[i].imm == RDMEM_TURN_IMM) { /* the word is in place: refill looks */
			s->wakes++;
			t->wakes++;
			continue;
		}
		take_reply(s, wc[i].imm, is_get, t);
	}
	return n;
}

static int open_session(struct sess *s, const struct opts *o, uint32_t i)
{
	struct rdmem_link_config cfg = { .fabric = o->fabric,
					 .host = o->addr,
					 .port = o->port,
					 .ring_slots = MAX_WIN,
					 .resp_bytes = 4096,
					 .timeout_ms = 10000 };
	uint64_t end;
	int ret;

	if ((ret = rdmem_link_open(&cfg, &s->l)) < 0)
		return ret;
	if ((ret = rdmem_fab_reg(s->l->conn, s->buf, sizeof(s->buf), RDMEM_ACCESS_LOCAL, &s->src)) <
	    0)
		return ret;
	s->free_slots = s->l->slots >= 64 ? ~0ull : (1ull << s->l->slots) - 1;
	s->key_len = (uint32_t)snprintf((char *)s->buf, 64, "scale-%u", i);
	memset(s->want, (int)('a' + i % 26), VALUE_LEN);
	memcpy(s->buf + s->key_len, s->want, VALUE_LEN);
	if ((ret = send_req(s, 0, RDMEM_OP_KV_PUT, VALUE_LEN)) < 0)
		return ret;
	for (end = rdmem_now_ns() + 10000000000ull; rdmem_now_ns() < end;) {
		if ((ret = drain(s, 0, &loop_tally)) < 0)
			return ret;
		if (s->free_slots & 1)
			return 0;
	}
	return -ETIMEDOUT;
}

/* Closes sessions [0, n), the last possibly half open, and frees the table. */
static void close_sessions(struct sess *ss, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		if (!ss[i].l)
			continue;
		rdmem_fab_dereg(ss[i].l->conn, &ss[i].src);
		rdmem_link_close(ss[i].l);
	}
	free(ss);
}

/* The server's turn word, as the agent reads it (agent/rdma.c): a hold
 * (our group's slice ends), or our turn. now was read before this look. */
static void look_turn(struct sess *s, uint64_t now, struct tally *t)
{
	uint64_t until = 0;

	switch (rdmem_link_turn_look(s->l, &s->turn, &until)) {
	case RDMEM_TURN_HOLD:
		s->hold_until = until;
		t->yields++;
		t->first_yields += s->flood;
		break;
	case RDMEM_TURN_GO:
		s->hold_until = 0;
		break;
	}
	s->turn.look_ns = now;
}

/* Fills the session's free slots with GETs, unless the server asked to hold. */
static void refill(struct sess *s, uint64_t now, struct tally *t)
{
	look_turn(s, now, t);
	while (s->hold_until <= now) {
		uint64_t usable =
		    s->free_slots & ((s->window >= 64) ? ~0ull : (1ull << s->window) - 1);

		if (!usable)
			return;
		if (send_req(s, (uint32_t)__builtin_ctzll(usable), RDMEM_OP_KV_GET, 0) < 0) {
			t->errors++;
			return;
		}
	}
}

/* Sessions [from, n) driven by one loop, the load generator, until end. */
static void run_loop(struct sess *ss, uint32_t from, uint32_t n, uint64_t end)
{
	struct tally *t = &loop_tally;
	uint32_t i;

	while (rdmem_now_ns() < end) {
		uint64_t now = rdmem_now_ns(), before = t->ops;

		for (i = from; i < n; i++) {
			if (drain(&ss[i], 1, t) < 0) {
				t->errors++;
				continue;
			}
			refill(&ss[i], now, t);
		}
		/* Nothing came back this pass: let the server run (two cores here). */
		if (t->ops == before)
			sched_yield();
	}
}

struct quiet {
	struct sess *s;
	uint64_t end;
};

/*
 * The quiet session on a thread of its own, as a client on another host
 * would be: its latency is then the server's doing, not the wait for the
 * load generator's loop to come round to it (one pass over 1,023 sessions
 * with 16 replies each takes as long as the server's own round). With no
 * reply yet it sleeps on its completion channel, as an idle agent does,
 * instead of taking a third of the two CPUs from the server and the loop.
 */
static void *quiet_main(void *arg)
{
	struct quiet *q = arg;
	struct tally *t = &quiet_tally;
	struct rdmem_conn *c = q->s->l->conn;
	struct pollfd pfd = { .fd = rdmem_fab_comp_fd(c), .events = POLLIN };
	int n;

	while (rdmem_now_ns() < q->end) {
		refill(q->s, rdmem_now_ns(), t);
		if ((n = drain(q->s, 1, t)) != 0) {
			t->errors += n < 0;
			continue;
		}
		if (rdmem_fab_arm(c) < 0) {
			t->errors++;
			break;
		}
		if ((n = drain(q->s, 1, t)) != 0) { /* came while arming */
			t->errors += n < 0;
			continue;
		}
		if (poll(&pfd, 1, 1) > 0)
			rdmem_fab_ack(c);
	}
	return NULL;
}

static void samples_append(struct samples *to, const struct samples *from)
{
	size_t i;

	for (i = 0; i < from->n; i++)
		record(to, from->v[i]);
}

static void run(struct sess *ss, const struct opts *o)
{
	uint64_t end = rdmem_now_ns() + (uint64_t)o->seconds * 1000000000ull;
	struct quiet q = { &ss[0], end };
	int threaded = o->flood && o->flood < o->window;
	pthread_t tid;
	uint32_t i;

	for (i = 0; i < o->n; i++) {
		/* With --busy B, session i sends when i * B / n steps: B of them,
		 * evenly spread (session 0 always). */
		int idle = o->busy && (uint64_t)i * o->busy % o->n >= o->busy;

		ss[i].flood = i == 0 && o->flood;
		ss[i].window =
		    idle ? 0 : RDMEM_MIN(ss[i].flood ? o->flood : o->window, ss[i].l->slots);
	}
	if (threaded && pthread_create(&tid, NULL, quiet_main, &q) != 0) {
		fprintf(stderr, "scale_bench: pthread_create for the quiet session failed\n");
		loop_tally.errors++;
		threaded = 0;
	}
	run_loop(ss, threaded ? 1 : 0, o->n, end);
	if (!threaded)
		return;
	pthread_join(tid, NULL);
	samples_append(&loop_tally.all, &quiet_tally.all);
	samples_append(&loop_tally.first, &quiet_tally.first);
	loop_tally.ops += quiet_tally.ops;
	loop_tally.wrong += quiet_tally.wrong;
	loop_tally.errors += quiet_tally.errors;
	loop_tally.yields += quiet_tally.yields;
	loop_tally.first_yields += quiet_tally.first_yields;
	loop_tally.wakes += quiet_tally.wakes;
}

static double pct_us(struct samples *s, double p)
{
	if (s->sorted != s->n)
		rdmem_pctl_sort(s->v, s->n);
	s->sorted = s->n;
	return rdmem_pctl_us(s->v, s->n, p);
}

static long rss_kb(int pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = { { "port", 1, NULL, 'p' },
					    { "window", 1, NULL, 'w' },
					    { "seconds", 1, NULL, 's' },
					    { "server-pid", 1, NULL, 'P' },
					    { "flood", 1, NULL, 'f' },
					    { "busy", 1, NULL, 'b' },
					    { "fabric", 1, NULL, 'F' },
					    { "addr", 1, NULL, 'a' },
					    { "stats-port", 1, NULL, 'T' },
					    { "hold-file", 1, NULL, 'z' },
					    { NULL, 0, NULL, 0 } };
	int c;

	*o = (struct opts){
		.addr = "127.0.0.1", .fabric = RDMEM_FAB_SHM, .n = 1, .window = 4, .seconds = 3
	};
	while ((c = getopt_long(argc, argv, "n:", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			o->n = (uint32_t)atoi(optarg);
			break;
		case 'p':
			o->port = (uint16_t)atoi(optarg);
			break;
		case 'w':
			o->window = (uint32_t)atoi(optarg);
			break;
		case 's':
			o->seconds = (uint32_t)atoi(optarg);
			break;
		case 'P':
			o->server_pid = atoi(optarg);
			break;
		case 'f':
			o->flood = (uint32_t)atoi(optarg);
			break;
		case 'b':
			o->busy = (uint32_t)atoi(optarg);
			break;
		case 'a':
			o->addr = optarg;
			break;
		case 'T':
			o->stats_port = (uint16_t)atoi(optarg);
			break;
		case 'z':
			o->hold_file = optarg;
			break;
		case 'F':
			if (rdmem_fab_kind_parse(optarg, &o->fabric) < 0)
				return -1;
			break;
		default:
			return -1;
		}
	}
	return o->port && o->n && o->window && o->window <= MAX_WIN && o->flood <= MAX_WIN &&
		       o->busy <= o->n
		   ? 0
		   : -1;
}

/* What the server says it holds, from its STATS JSON: the mean of the
 * sessions' "registered_bytes" over those it lists, and its "resources"
 * gauges (summed over every open session). */
struct server_view {
	long long registered_per_session; /* -1: the server could not be asked */
	uint32_t listed;
	long long qps, cqs, mrs, registered_bytes, recv_wqes;
	long long leases_taken; /* the pool's summary, listed or not */
};

static long long json_num(const char *text, const char *key)
{
	const char *p = strstr(text, key);

	return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

static void server_view(const struct opts *o, struct server_view *v)
{
	static char text[1 << 20];
	struct rdmem_tcp_client *c;
	struct rdmem_tcp_call call = { 0 };
	unsigned long long sum = 0;
	const char *p, *res;

	memset(v, 0, sizeof(*v));
	v->registered_per_session = v->qps = v->cqs = v->mrs = v->registered_bytes = -1;
	v->recv_wqes = v->leases_taken = -1;
	/* Workers publish their sessions for STATS every 100 ms. */
	usleep(300000);
	if (!o->stats_port || rdmem_tcp_client_connect(o->addr, o->stats_port, 2000, &c) < 0)
		return;
	call.req.op = RDMEM_OP_STATS;
	call.req.flags = RDMEM_F_JSON;
	call.reply = text;
	call.reply_cap = sizeof(text) - 1;
	if (rdmem_tcp_client_call(c, &call, 5000) < 0 || call.rep.status != RDMEM_S_OK) {
		rdmem_tcp_client_close(c);
		return;
	}
	rdmem_tcp_client_close(c);
	text[call.rep.val_len] = '\0';
	if ((res = strstr(text, "\"resources\":{"))) {
		v->qps = json_num(res, "\"qps\":");
		v->cqs = json_num(res, "\"cqs\":");
		v->mrs = json_num(res, "\"mrs\":");
		v->registered_bytes = json_num(res, "\"registered_bytes\":");
		v->recv_wqes = json_num(res, "\"recv_wqes\":");
	}
	v->leases_taken = json_num(text, "\"leases_taken\":");
	/* The sessions are listed in the RDMA side's section, after the gauges. */
	for (p = strstr(text, ",\"rdma\":"); p && (p = strstr(p, "\"registered_bytes\":"));) {
		p += strlen("\"registered_bytes\":");
		sum += strtoull(p, NULL, 10);
		v->listed++;
	}
	if (v->listed)
		v->registered_per_session = (long long)(sum / v->listed);
}

int main(int argc, char **argv)
{
	struct rlimit rl;
	struct opts o;
	struct sess *ss;
	uint64_t reach = 0, t0;
	struct server_view sv;
	struct tally *t = &loop_tally;
	uint32_t i;
	double secs;

	if (parse(argc, argv, &o) < 0) {
		fprintf(stderr,
			"usage: scale_bench --port P -n SESSIONS [--window W] [--seconds S] "
			"[--server-pid PID] [--flood W] [--fabric shm|verbs] [--addr A] "
			"[--stats-port T] [--hold-file F] [--busy B (<= SESSIONS)]\n");
		return 2;
	}
	rdmem_log_init("scale_bench", 0);
	/* Each session holds a handful of fds. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	ss = calloc(o.n, sizeof(*ss));
	for (i = 0; ss && i < o.n; i++) {
		int ret = open_session(&ss[i], &o, i);

		if (ret < 0) {
			/* A refusal is an expected outcome (admission tests): leave cleanly. */
			fprintf(stderr, "scale_bench: session %u: %s\n", i, strerror(-ret));
			close_sessions(ss, i + 1);
			return 1;
		}
		reach += ss[i].l->w.req.len + ss[i].l->w.objpool.len + ss[i].l->w.ctrl.len;
	}
	server_view(&o, &sv);
	if (o.hold_file) {
		uint64_t until = rdmem_now_ns() + HOLD_MAX_NS;

		fprintf(stderr, "scale_bench: %u sessions open, holding while %s exists\n", o.n,
			o.hold_file);
		while (access(o.hold_file, F_OK) == 0 && rdmem_now_ns() < until)
			usleep(10000);
	}
	t0 = rdmem_now_ns();
	run(ss, &o);
	secs = (double)(rdmem_now_ns() - t0) / 1e9;
	printf("{\"sessions\":%u,\"busy\":%u,\"window\":%u,\"flood\":%u,\"seconds\":%.2f,"
	       "\"ops\":%llu,"
	       "\"qps\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"others_p99_us\":%.1f,"
	       "\"others_ops\":%llu,\"first_p99_us\":%.1f,\"first_ops\":%llu,\"server_rss_kb\":%ld,"
	       "\"reach_bytes_per_session\":%llu,"
	       "\"registered_bytes_per_session\":%lld,\"registered_sessions_listed\":%u,"
	       "\"qps_held\":%lld,\"cqs\":%lld,\"mrs\":%lld,\"registered_bytes\":%lld,"
	       "\"recv_wqes\":%lld,\"leases_taken\":%lld,\"yields\":%llu,\"first_yields\":%llu,"
	       "\"wakes\":%llu,\"wrong\":%llu,\"errors\":%llu}\n",
	       o.n, o.busy ? o.busy : o.n, o.window, o.flood, secs, (unsigned long long)t->ops,
	       (double)t->ops / secs, pct_us(&t->all, 0.5), pct_us(&t->all, 0.99),
	       t->others.n ? pct_us(&t->others, 0.99) : -1.0, (unsigned long long)t->others.n,
	       t->first.n ? pct_us(&t->first, 0.99) : -1.0, (unsigned long long)t->first.n,
	       o.server_pid ? rss_kb(o.server_pid) : -1L, (unsigned long long)(reach / o.n),
	       sv.registered_per_session, sv.listed, sv.qps, sv.cqs, sv.mrs, sv.registered_bytes,
	       sv.recv_wqes, sv.leases_taken, (unsigned long long)t->yields,
	       (unsigned long long)t->first_yields, (unsigned long long)t->wakes,
	       (unsigned long long)t->wrong, (unsigned long long)t->errors);
	close_sessions(ss, o.n);
	return t->wrong || t->errors ? 1 : 0;
}
