/* test_frontdoor.c - the SHM front door end to end, with libclient as the
 * client and a loopback responder (tests/frontdoor_loopback.h) in place of
 * the session actor: every op byte-exact, many threads and processes,
 * hostile ring entries and slots, killed clients, timeouts and late replies,
 * agent stop, kill and restart, takeover rules, and the rdmem CLI.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libclient/rdmem.h"
#include "libclient/rdmem_priv.h" /* white box: the handle's attachment */
#include "tests/check.h"

#include "shm/door.h"
#include "tests/frontdoor_loopback.h"

static char shm_name[64];

/* A fresh segment name per test, so parallel runs on one host never meet. */
static const char *next_name(void)
{
	static int n;

	snprintf(shm_name, sizeof(shm_name), "/rdmem-test-%d-%d", (int)getpid(), ++n);
	return shm_name;
}

static struct rdmem_frontdoor_config config(uint32_t clients, uint32_t slots, uint32_t max_value)
{
	struct rdmem_frontdoor_config cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.shm_name = shm_name;
	cfg.clients = clients;
	cfg.slots = slots;
	cfg.max_value = max_value;
	cfg.group = (gid_t)-1;
	return cfg;
}

static struct lb *start(uint32_t clients, uint32_t slots, uint32_t max_value)
{
	struct rdmem_frontdoor_config cfg = config(clients, slots, max_value);
	struct lb *lb = NULL;
	int rc = lb_start(&lb, &cfg);

	if (rc)
		fprintf(stderr, "  lb_start(%s): %s\n", shm_name, strerror(-rc));
	return lb;
}

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (uint8_t)(seed >> 56);
	}
}

static struct rdmem_frontdoor_stats stats_of(struct lb *lb)
{
	struct rdmem_frontdoor_stats s;

	rdmem_frontdoor_get_stats(lb->fd, &s);
	return s;
}

/* Waits up to ms for cond (re-evaluated) to hold. */
#define WAIT_FOR(cond, ms)                                                                         \
	do {                                                                                       \
		uint64_t wait_end_ = rdmem_now_ns() + (uint64_t)(ms)*1000000ull;                   \
		while (!(cond) && rdmem_now_ns() < wait_end_)                                      \
			usleep(1000);                                                              \
	} while (0)

static const uint32_t sizes[] = { 0, 1, 100, 1023, 1024, 4095, 4096, 4097, 65536, 65537, 1u << 20 };

static void test_fd_ops_byte_exact_0_to_1mib(void)
{
	struct lb *lb = (next_name(), start(2, 4, 1u << 20));
	uint8_t *buf = malloc((1u << 20) + 1), *small = malloc(1u << 20);
	struct rdmem_info info;
	struct rdmem_opts opts = { RDMEM_PATH_AUTO, 2000, &info };
	rdmem_t *h = NULL;
	unsigned i;

	REQUIRE(lb && buf && small);
	REQUIRE(rdmem_open(shm_name, &h) == 0);
	CHECK_EQ(rdmem_ping(h, &opts), 0);
	CHECK_EQ(info.path, RDMEM_PATH_TCP);
	CHECK_EQ(rdmem_local_ping(h, &opts), 0);
	CHECK_EQ(info.path, RDMEM_PATH_AUTO);
	for (i = 0; i < RDMEM_ARRAY_SIZE(sizes); i++) {
		uint32_t n = sizes[i], got_len = 0;
		void *got = NULL;
		char key[32];

		fill_random(buf, n, n + 7);
		CHECK_EQ(rdmem_echo(h, buf, n, &got, &got_len, &opts), 0);
		CHECK(got && got_len == n && !memcmp(got, buf, n));
		free(got);
		got = NULL;
		snprintf(key, sizeof(key), "key-%u", n);
		CHECK_EQ(rdmem_put(h, key, (uint32_t)strlen(key), buf, n, &opts), 0);
		CHECK_EQ(rdmem_get(h, key, (uint32_t)strlen(key), &got, &got_len, &opts), 0);
		CHECK(got && got_len == n && !memcmp(got, buf, n));
		free(got);
		/* Into a buffer: one byte short is refused whole, with the length. */
		if (n > 0) {
			CHECK_EQ(rdmem_get_into(h, key, (uint32_t)strlen(key), small, n - 1,
						&got_len, &opts),
				 -ENOBUFS);
			CHECK_EQ(got_len, n);
		}
		CHECK_EQ(rdmem_get_into(h, key, (uint32_t)strlen(key), small, n, &got_len, &opts),
			 0);
		CHECK(got_len == n && !memcmp(small, buf, n));
		/* No buffer at all: the length, and -ENOBUFS unless the value is
		 * empty (it said 0 with no bytes copied, and leaked a reply). */
		got_len = 12345;
		CHECK_EQ(rdmem_get_into(h, key, (uint32_t)strlen(key), NULL, 0, &got_len, &opts),
			 n ? -ENOBUFS : 0);
		CHECK_EQ(got_len, n);
	}
	/* Over max_value: refused locally, never truncated. */
	CHECK_EQ(rdmem_put(h, "big", 3, buf, (1u << 20) + 1, &opts), -E2BIG);
	CHECK_EQ(rdmem_del(h, "key-1", 5, &opts), 0);
	CHECK_EQ(rdmem_del(h, "key-1", 5, &opts), -ENOENT);
	{
		void *got = NULL;
		uint32_t got_len;
		CHECK_EQ(rdmem_get(h, "key-1", 5, &got, &got_len, &opts), -ENOENT);
		CHECK(got == NULL);
	}
	rdmem_close(h);
	lb_stop(lb);
	free(buf);
	free(small);
}

static void test_fd_mget_profile_large_get_stats_ctl(void)
{
	struct lb *lb = (next_name(), start(2, 4, 1u << 20));
	const char *keys[] = { "a", "missing", "bb" };
	const uint32_t klens[] = { 1, 7, 2 };
	struct rdmem_mget m;
	struct rdmem_profile p;
	struct rdmem_info info;
	struct rdmem_opts opts = { RDMEM_PATH_LAZY, 2000, &info };
	rdmem_t *h = NULL;
	const void *d;
	uint32_t len;
	char *text = NULL;
	void *big = NULL;

	REQUIRE(lb);
	REQUIRE(rdmem_open(shm_name, &h) == 0);
	CHECK_EQ(rdmem_put(h, "a", 1, "alpha", 5, &opts), 0);
	CHECK_EQ(info.path, RDMEM_PATH_LAZY); /* a forced path travels with the call */
	CHECK_EQ(rdmem_put(h, "bb", 2, "", 0, &opts), 0);
	CHECK_EQ(rdmem_mget(h, keys, klens, 3, &m, &opts), 0);
	CHECK(m.arr.count == 3);
	CHECK(rdmem_mget_value(&m, 0, &d, &len) == 1 && len == 5 && !memcmp(d, "alpha", 5));
	CHECK(rdmem_mget_value(&m, 1, &d, &len) == 0);
	CHECK(rdmem_mget_value(&m, 2, &d, &len) == 1 && len == 0);
	rdmem_mget_free(&m);
	CHECK_EQ(rdmem_profile(h, 1001, &p, &opts), 0);
	CHECK(p.view.id == 1001 && p.view.name_len == 12 &&
	      !memcmp(p.view.name, "profile-1001", 12));
	CHECK_EQ(p.view.tag_count, 2);
	rdmem_profile_free(&p);
	CHECK_EQ(rdmem_large_get(h, "big:1m", &big, &len, &opts), 0);
	CHECK_EQ(rdmem_large_verify("big:1m", big, len), 0);
	((uint8_t *)big)[12345] ^= 1;
	CHECK_EQ(rdmem_large_verify("big:1m", big, len), -EBADMSG);
	free(big);
	CHECK_EQ(rdmem_large_get(h, "nope", &big, &len, &opts), -EINVAL);
	CHECK_EQ(rdmem_stats(h, 1, &text, &len, &opts), 0);
	CHECK(text && text[0] == '{' && strlen(text) == len);
	free(text);
	CHECK_EQ(rdmem_agent_stats(h, 0, &text, &len, NULL), 0);
	CHECK(text && strstr(text, "frontdoor.calls "));
	free(text);
	CHECK_EQ(rdmem_agent_ctl(h, "fault drop 3", &text, &len, NULL), 0);
	CHECK(text && !strcmp(text, "ok fault drop 3"));
	free(text);
	rdmem_close(h);
	lb_stop(lb);
}

struct progress {
	uint64_t calls, last;
};

static void on_progress(void *arg, uint64_t done, uint64_t total)
{
	struct progress *p = arg;

	(void)total;
	if (done > p->last)
		p->calls++;
	p->last = done;
}

static void test_fd_image_put_3mib_in_chunks(void)
{
	struct lb *lb = (next_name(), start(2, 2, 256u << 10));
	uint32_t n = 3u << 20, got_len = 0;
	uint8_t *img = malloc(n);
	struct progress prog = { 0, 0 };
	struct rdmem_image_opts io = { 0, on_progress, &prog, 0 };
	rdmem_t *h = NULL;
	void *got = NULL;

	REQUIRE(lb && img);
	REQUIRE(rdmem_open(shm_name, &h) == 0);
	fill_random(img, n, 99);
	CHECK_EQ(rdmem_image_put(h, "cat.jpg", img, n, &io, NULL), 0);
	CHECK_EQ(prog.calls, (n + RDMEM_IMAGE_CHUNK_DEFAULT - 1) / RDMEM_IMAGE_CHUNK_DEFAULT);
	CHECK(io.upload_id != 0);
	/* The loopback service keeps committed images under "image:<key>". The
	 * image is larger than max_value, so read it back as an image of 1 KiB
	 * chunks instead: here a small one. */
	io.chunk_size = 1000;
	CHECK_EQ(rdmem_image_put(h, "small", img, 4097, &io, NULL), 0);
	CHECK_EQ(rdmem_get(h, "image:small", 11, &got, &got_len, NULL), 0);
	CHECK(got_len == 4097 && !memcmp(got, img, 4097));
	free(got);
	CHECK_EQ(rdmem_image_put(h, "empty", img, 0, &io, NULL), 0);
	io.chunk_size = (256u << 10) + 1;
	CHECK_EQ(rdmem_image_put(h, "x", img, 10, &io, NULL), -E2BIG);
	rdmem_close(h);
	lb_stop(lb);
	free(img);
}

struct worker {
	const char *name;
	rdmem_t *h; /* shared handle, or NULL: open one */
	unsigned id, calls;
	unsigned failures;
};

static unsigned echo_loop(rdmem_t *h, unsigned id, unsigned calls)
{
	unsigned i, bad = 0;

	for (i = 0; i < calls; i++) {
		char msg[64];
		void *got = NULL;
		uint32_t len = 0;
		int n = snprintf(msg, sizeof(msg), "worker %u call %u", id, i);

		if (rdmem_echo(h, msg, (uint32_t)n, &got, &len, NULL) || len != (uint32_t)n ||
		    memcmp(got, msg, (size_t)n))
			bad++;
		free(got);
	}
	return bad;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	w->failures = echo_loop(w->h, w->id, w->calls);
	return NULL;
}

/* One thread keeps a window of async calls in flight and checks each reply. */
static unsigned async_window(rdmem_t *h, unsigned window, unsigned calls)
{
	struct rdmem_rpc *rpc = calloc(window, sizeof(*rpc));
	char(*msg)[32] = calloc(window, 32);
	unsigned sent = 0, done = 0, bad = 0, i;

	if (!rpc || !msg)
		return calls;
	while (done < calls) {
		for (i = 0; i < window && sent < calls; i++) {
			if (rpc[i].op)
				continue;
			rdmem_rpc_init(&rpc[i], RDMEM_OP_ECHO);
			snprintf(msg[i], 32, "async %u", sent++);
			rpc[i].val = msg[i];
			rpc[i].val_len = (uint32_t)strlen(msg[i]);
			if (rdmem_submit(h, &rpc[i])) {
				bad++, done++;
				rpc[i].op = 0;
			}
		}
		for (i = 0; i < window; i++) {
			if (!rpc[i].op || !rdmem_poll(h, &rpc[i]))
				continue;
			bad += rpc[i].rc || rpc[i].rlen != strlen(msg[i]) ||
			       memcmp(rpc[i].rval, msg[i], rpc[i].rlen);
			rdmem_rpc_free(&rpc[i]);
			rpc[i].op = 0;
			done++;
		}
	}
	free(rpc);
	free(msg);
	return bad;
}

static void test_fd_many_threads_one_handle_and_async_window(void)
{
	struct lb *lb = (next_name(), start(4, 16, 4096));
	struct worker w[8];
	pthread_t t[8];
	rdmem_t *h = NULL;
	unsigned i, bad = 0;

	REQUIRE(lb);
	REQUIRE(rdmem_open(shm_name, &h) == 0);
	for (i = 0; i < 8; i++) {
		w[i] = (struct worker){ shm_name, h, i, 2000, 0 };
		REQUIRE(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0);
	}
	bad += async_window(h, 8, 4000);
	for (i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		bad += w[i].failures;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(async_window(h, 16, 4000), 0); /* the whole slot set in flight */
	CHECK_EQ(stats_of(lb).bad_entries, 0);
	CHECK_EQ(stats_of(lb).inflight, 0);
	rdmem_close(h);
	lb_stop(lb);
}

static void test_fd_many_processes(void)
{
	struct lb *lb = (next_name(), start(16, 8, 4096));
	pid_t pids[8];
	int i, status, ok = 0;

	REQUIRE(lb);
	for (i = 0; i < 8; i++) {
		pids[i] = fork();
		REQUIRE(pids[i] >= 0);
		if (pids[i] == 0) {
			rdmem_t *h;

			if (rdmem_open(shm_name, &h))
				_exit(2);
			status = echo_loop(h, (unsigned)i, 1000) ? 1 : 0;
			status |= async_window(h, 8, 1000) ? 1 : 0;
			rdmem_close(h);
			_exit(status);
		}
	}
	for (i = 0; i < 8; i++)
		ok += waitpid(pids[i], &status, 0) == pids[i] && WIFEXITED(status) &&
		      WEXITSTATUS(status) == 0;
	CHECK_EQ(ok, 8);
	/* Detach is the connection's close: the agent frees the entries at once. */
	WAIT_FOR(stats_of(lb).attached == 0, 2000);
	CHECK_EQ(stats_of(lb).attached, 0);
	CHECK_EQ(stats_of(lb).door_attached, 8);
	CHECK_EQ(stats_of(lb).door_hangups, 8);
	CHECK_EQ(stats_of(lb).bad_entries, 0);
	lb_stop(lb);
}

/* ---- hostile clients ---------------------------------------------------- */

/* A raw view of the segment, to misbehave in ways libclient never does. */
struct raw {
	rdmem_t *h; /* attached legitimately, through the door */
	void *base;
	struct rdmem_shm_geom g;
	struct rdmem_ring ring;
	uint32_t client;
};

static int raw_attach(struct raw *r)
{
	if (rdmem_open(shm_name, &r->h))
		return -1;
	r->base = r->h->att->base;
	r->g = r->h->att->geom;
	r->ring = r->h->att->ring;
	r->client = r->h->att->client;
	return 0;
}

/* Writes a request into our own slot s and marks it SUBMITTED, with any fields, no ring entry. */
static struct rdmem_shm_slot *raw_fill(struct raw *r, uint32_t s, uint16_t op, uint32_t key_len,
				       uint32_t val_len, uint8_t path, uint64_t deadline)
{
	struct rdmem_shm_slot *slot = rdmem_shm_slot_at(r->base, &r->g, r->client, s);

	memset(&slot->req, 0, sizeof(slot->req));
	slot->req.op = op;
	slot->req.key_len = (uint16_t)key_len;
	slot->req.val_len = val_len;
	slot->path = path;
	slot->seq++;
	slot->deadline_ns = deadline ? deadline : rdmem_now_ns() + 5000000000ull;
	atomic_store(&slot->state, RDMEM_SLOT_SUBMITTED);
	return slot;
}

/* raw_fill, then the ring entry, as libclient would. */
static struct rdmem_shm_slot *raw_submit(struct raw *r, uint32_t s, uint16_t op, uint32_t key_len,
					 uint32_t val_len, uint8_t path, uint64_t deadline)
{
	struct rdmem_shm_slot *slot = raw_fill(r, s, op, key_len, val_len, path, deadline);

	rdmem_ring_push(&r->ring, (uint16_t)r->client, (uint16_t)s);
	return slot;
}

static int raw_wait_done(struct rdmem_shm_slot *slot)
{
	WAIT_FOR(atomic_load(&slot->state) == RDMEM_SLOT_DONE, 2000);
	return atomic_load(&slot->state) == RDMEM_SLOT_DONE ? slot->rep.status : -1;
}

static void *good_client_main(void *arg)
{
	struct worker *w = arg;
	rdmem_t *h;

	if (rdmem_open(w->name, &h)) {
		w->failures = w->calls;
		return NULL;
	}
	w->failures = echo_loop(h, w->id, w->calls);
	rdmem_close(h);
	return NULL;
}

static void test_fd_hostile_entries_refused_good_client_unharmed(void)
{
	struct lb *lb = (next_name(), start(4, 4, 4096));
	struct worker good = { shm_name, NULL, 1, 3000, 0 };
	struct rdmem_shm_slot *slot;
	rdmem_t *idle = NULL;
	struct raw r;
	pthread_t t;
	uint64_t bad0;
	int status;

	REQUIRE(lb);
	REQUIRE(raw_attach(&r) == 0);					 /* client 0 */
	REQUIRE(rdmem_open(shm_name, &idle) == 0);			 /* client 1, never calls */
	REQUIRE(pthread_create(&t, NULL, good_client_main, &good) == 0); /* client 2 */
	/* Entries naming clients and slots that do not exist. */
	rdmem_ring_push(&r.ring, 999, 0);
	rdmem_ring_push(&r.ring, (uint16_t)r.client, 4);
	rdmem_ring_push(&r.ring, (uint16_t)r.client, 0xfffe);
	/* A FREE slot of another attached client, and a slot of an unclaimed entry. */
	rdmem_ring_push(&r.ring, (uint16_t)idle->att->client, 0);
	rdmem_ring_push(&r.ring, 3, 1);
	WAIT_FOR(stats_of(lb).bad_entries >= 5, 2000);
	CHECK_EQ(stats_of(lb).bad_entries, 5);
	/* Bad slot contents: answered with a status in our own slot. */
	bad0 = stats_of(lb).bad_entries;
	slot = raw_submit(&r, 0, 77, 0, 0, 0, 0);
	CHECK_EQ(raw_wait_done(slot), RDMEM_S_BAD_REQUEST);
	slot = raw_submit(&r, 1, RDMEM_OP_ECHO, RDMEM_MAX_KEY + 1, 0, 0, 0);
	CHECK_EQ(raw_wait_done(slot), RDMEM_S_BAD_REQUEST);
	slot = raw_submit(&r, 2, RDMEM_OP_ECHO, 0, 4097, 0, 0);
	CHECK_EQ(raw_wait_done(slot), RDMEM_S_TOO_BIG);
	slot = raw_submit(&r, 3, RDMEM_OP_ECHO, 0, 0xffffffffu, 0, 0);
	CHECK_EQ(raw_wait_done(slot), RDMEM_S_TOO_BIG);
	atomic_store(&rdmem_shm_slot_at(r.base, &r.g, r.client, 0)->state, RDMEM_SLOT_FREE);
	slot = raw_submit(&r, 0, RDMEM_OP_PING, 0, 0, RDMEM_PATH__COUNT, 0);
	CHECK_EQ(raw_wait_done(slot), RDMEM_S_BAD_REQUEST);
	atomic_store(&rdmem_shm_slot_at(r.base, &r.g, r.client, 1)->state, RDMEM_SLOT_FREE);
	slot = raw_submit(&r, 1, RDMEM_OP_RECLAIM, 0, 0, 0, 0);
	CHECK_EQ(raw_wait_done(slot), RDMEM_S_BAD_REQUEST);
	CHECK_EQ(stats_of(lb).bad_entries - bad0, 6);
	/* A duplicate entry for a slot that is DONE (not submitted) is refused. */
	rdmem_ring_push(&r.ring, (uint16_t)r.client, 1);
	WAIT_FOR(stats_of(lb).bad_entries - bad0 >= 7, 2000);
	CHECK_EQ(stats_of(lb).bad_entries - bad0, 7);
	CHECK_EQ(slot->rep.status, RDMEM_S_BAD_REQUEST);
	/* A good call from the same raw client still works. */
	atomic_store(&rdmem_shm_slot_at(r.base, &r.g, r.client, 2)->state, RDMEM_SLOT_FREE);
	slot = raw_submit(&r, 2, RDMEM_OP_PING, 0, 0, RDMEM_PATH_EAGER, 0);
	CHECK_EQ(raw_wait_done(slot), RDMEM_S_OK);
	CHECK_EQ(slot->rep.path, RDMEM_PATH_EAGER);
	CHECK_EQ(slot->rep.seq, slot->seq);
	/* A deadline already past: answered TIMEOUT at once, never run. */
	atomic_store(&slot->state, RDMEM_SLOT_FREE);
	slot = raw_submit(&r, 2, RDMEM_OP_ECHO, 0, 0, 0, 1);
	CHECK_EQ(raw_wait_done(slot), RDMEM_S_TIMEOUT);
	CHECK_EQ(stats_of(lb).expired, 1);
	status = pthread_join(t, NULL);
	CHECK_EQ(status, 0);
	CHECK_EQ(good.failures, 0);
	CHECK_EQ(stats_of(lb).bad_entries - bad0, 7);
	rdmem_close(idle);
	rdmem_close(r.h);
	lb_stop(lb);
}

/* ---- dead clients, timeouts, agent stop and restart ---------------------- */

static void test_fd_client_killed_mid_wait_is_reclaimed(void)
{
	struct lb *lb = (next_name(), start(2, 4, 4096));
	rdmem_t *h = NULL, *h2 = NULL;
	struct rdmem_frontdoor_stats s;
	pid_t pid;
	int status;

	REQUIRE(lb);
	REQUIRE(rdmem_open(shm_name, &h) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		rdmem_t *c;
		void *got;
		uint32_t len;

		if (rdmem_open(shm_name, &c))
			_exit(2);
		rdmem_echo(c, "sleep:300", 9, &got, &len, NULL); /* killed meanwhile */
		_exit(3);
	}
	WAIT_FOR(stats_of(lb).inflight == 1, 2000);
	CHECK_EQ(stats_of(lb).attached, 2);
	/* Both entries taken: a third client is refused for now. */
	CHECK_EQ(rdmem_open(shm_name, &h2), -EUSERS);
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
	CHECK_EQ(echo_loop(h, 0, 100), 0);
	WAIT_FOR(stats_of(lb).dead_clients == 1, 3000);
	s = stats_of(lb);
	CHECK_EQ(s.dead_clients, 1);
	CHECK_EQ(s.attached, 1);
	CHECK_EQ(s.inflight, 0);
	CHECK(s.dropped >= 1); /* its late reply went nowhere */
	/* Its entry is free again. */
	REQUIRE(rdmem_open(shm_name, &h2) == 0);
	CHECK_EQ(echo_loop(h2, 1, 100), 0);
	rdmem_close(h2);
	rdmem_close(h);
	lb_stop(lb);
}

static void test_fd_timeout_abandons_and_late_reply_never_delivered(void)
{
	struct lb *lb = (next_name(), start(1, 1, 4096)); /* one slot: it must be reused */
	struct rdmem_opts quick = { RDMEM_PATH_AUTO, 50, NULL };
	struct rdmem_counters cnt;
	rdmem_t *h = NULL;
	void *got = NULL;
	uint32_t len = 0;
	uint64_t t0;

	REQUIRE(lb);
	REQUIRE(rdmem_open(shm_name, &h) == 0);
	t0 = rdmem_now_ns();
	CHECK_EQ(rdmem_echo(h, "sleep:300", 9, &got, &len, &quick), -ETIMEDOUT);
	CHECK(rdmem_now_ns() - t0 < 250000000ull);
	/* The next call waits for the agent to free the slot, then gets its own reply. */
	CHECK_EQ(rdmem_echo(h, "mine", 4, &got, &len, NULL), 0);
	CHECK(got && len == 4 && !memcmp(got, "mine", 4));
	free(got);
	CHECK(rdmem_now_ns() - t0 >= 250000000ull);
	CHECK_EQ(stats_of(lb).dropped, 1);
	rdmem_get_counters(h, &cnt);
	CHECK_EQ(cnt.timeouts, 1);
	CHECK_EQ(cnt.bad_replies, 0);
	rdmem_close(h);
	lb_stop(lb);
}

struct holder {
	rdmem_t *h;
	int rc;
	uint64_t done_ns;
};

static void *hold_main(void *arg)
{
	struct holder *x = arg;
	struct rdmem_opts o = { RDMEM_PATH_AUTO, 10000, NULL };
	void *got = NULL;
	uint32_t len;

	x->rc = rdmem_echo(x->h, "hold", 4, &got, &len, &o);
	x->done_ns = rdmem_now_ns();
	free(got);
	return NULL;
}

static void test_fd_agent_stop_then_restart(void)
{
	struct lb *lb = (next_name(), start(2, 4, 4096));
	struct holder x = { NULL, 1, 0 };
	struct rdmem_counters cnt;
	uint64_t t0;
	pthread_t t;

	REQUIRE(lb);
	REQUIRE(rdmem_open(shm_name, &x.h) == 0);
	REQUIRE(pthread_create(&t, NULL, hold_main, &x) == 0);
	WAIT_FOR(stats_of(lb).inflight == 1, 2000);
	usleep(100000); /* let the client go to sleep on its futex */
	t0 = rdmem_now_ns();
	lb_stop(lb);
	pthread_join(t, NULL);
	CHECK_EQ(x.rc, -ESHUTDOWN);
	CHECK(x.done_ns - t0 < 100000000ull); /* promptly, not after its 10 s timeout */
	/* No agent: a clear error, not a hang. */
	CHECK_EQ(rdmem_ping(x.h, NULL), -ECONNREFUSED);
	lb = start(2, 4, 4096);
	REQUIRE(lb);
	CHECK_EQ(echo_loop(x.h, 0, 100), 0);
	rdmem_get_counters(x.h, &cnt);
	CHECK_EQ(cnt.shutdowns, 1);
	CHECK_EQ(cnt.reattach, 1);
	rdmem_close(x.h);
	lb_stop(lb);
}

/* Runs a front door in a child process until it is killed. */
static pid_t spawn_agent(void)
{
	int p[2];
	pid_t pid;
	char c;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct lb *lb = start(2, 4, 4096);

		c = lb ? 'y' : 'n';
		if (write(p[1], &c, 1) != 1 || !lb)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &c, 1) != 1 || c != 'y') {
		close(p[0]);
		return -1;
	}
	close(p[0]);
	return pid;
}

static void test_fd_agent_killed_zombie_then_restarted_over_its_segment(void)
{
	struct holder x = { NULL, 1, 0 };
	struct lb *lb;
	pthread_t t;
	uint64_t t0;
	pid_t pid;
	int status;

	next_name();
	pid = spawn_agent();
	REQUIRE(pid > 0);
	REQUIRE(rdmem_open(shm_name, &x.h) == 0);
	CHECK_EQ(echo_loop(x.h, 0, 50), 0);
	REQUIRE(pthread_create(&t, NULL, hold_main, &x) == 0);
	usleep(100000);
	t0 = rdmem_now_ns();
	CHECK(kill(pid, SIGKILL) == 0);
	/* Not reaped yet: a zombie still answers kill(pid, 0), its lock does not. */
	pthread_join(t, NULL);
	CHECK_EQ(x.rc, -ESHUTDOWN);
	CHECK(x.done_ns - t0 < 200000000ull);
	/* The dead agent's segment is still there: a new agent takes it over. */
	CHECK_EQ(rdmem_ping(x.h, NULL), -ECONNREFUSED);
	lb = start(2, 4, 4096);
	CHECK(waitpid(pid, &status, 0) == pid);
	REQUIRE(lb);
	CHECK_EQ(echo_loop(x.h, 1, 50), 0);
	rdmem_close(x.h);
	lb_stop(lb);
}

static void test_fd_second_frontdoor_refused_unless_reset(void)
{
	struct rdmem_frontdoor_config cfg = (next_name(), config(2, 2, 4096));
	struct rdmem_frontdoor *other = NULL;
	struct lb *lb = start(2, 2, 4096), *lb2;
	char path[RDMEM_DOOR_PATH_MAX];
	rdmem_t *h = NULL;
	int f;

	REQUIRE(lb);
	REQUIRE(rdmem_open(shm_name, &h) == 0);
	CHECK_EQ(rdmem_frontdoor_create(&cfg, &other), -EBUSY);
	/* --shm-reset takes over; the old agent's clients move to the new one. */
	cfg.reset = 1;
	REQUIRE(lb_start(&lb2, &cfg) == 0);
	CHECK(stats_of(lb2).epoch > stats_of(lb).epoch);
	/*
	 * The old agent, still running, finds its socket taken (its door looks
	 * when the directory changes, and its actor's scan every 100 ms) and
	 * hangs up on its clients: they attach to the new one
	 * (the header, which any client can write, sends nobody away by
	 * itself). A call in flight at the hang-up fails -ESHUTDOWN, as at any
	 * agent's stop. Waited for: the client on the new agent, and its entry
	 * in the old one reclaimed (up to a scan period after the hang-up).
	 */
	for (f = 0; f < 300 && (stats_of(lb2).attached < 1 || stats_of(lb).attached > 0); f++) {
		rdmem_ping(h, NULL);
		usleep(10000);
	}
	CHECK_EQ(stats_of(lb2).attached, 1);
	CHECK_EQ(stats_of(lb).attached, 0);
	lb_stop(lb); /* must not unlink the new agent's segment */
	CHECK_EQ(rdmem_ping(h, NULL), 0);
	rdmem_close(h);
	lb_stop(lb2);
	/* A foreign file where the socket goes is not removed without reset. */
	REQUIRE(rdmem_door_path(shm_name, NULL, geteuid(), path, sizeof(path)) == 0);
	f = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	REQUIRE(f >= 0);
	CHECK(write(f, "not a front door, but longer than a page? no", 44) == 44);
	cfg.reset = 0;
	CHECK_EQ(rdmem_frontdoor_create(&cfg, &other), -EEXIST);
	cfg.reset = 1;
	CHECK_EQ(rdmem_frontdoor_create(&cfg, &other), 0);
	rdmem_frontdoor_destroy(other);
	close(f);
	/* Bad names and geometry are refused up front. */
	cfg.shm_name = "a/b";
	CHECK_EQ(rdmem_frontdoor_create(&cfg, &other), -EINVAL);
	cfg.shm_name = shm_name;
	cfg.slots = 65;
	CHECK_EQ(rdmem_frontdoor_create(&cfg, &other), -EINVAL);
	CHECK_EQ(rdmem_open("a/b", &h), -EINVAL);
	CHECK_EQ(rdmem_open(shm_name, &h), -ECONNREFUSED);
}

static void test_fd_refuses_a_segment_memory_cannot_hold(void)
{
	/* 1024 x 64 slots of 64 MiB: far more than any host here. */
	struct rdmem_frontdoor_config cfg = (next_name(), config(1024, 64, 64u << 20));
	struct rdmem_frontdoor *fd = NULL;
	char path[RDMEM_DOOR_PATH_MAX];

	CHECK_EQ(rdmem_frontdoor_create(&cfg, &fd), -ENOSPC);
	REQUIRE(rdmem_door_path(shm_name, NULL, geteuid(), path, sizeof(path)) == 0);
	CHECK(access(path, F_OK) < 0 && errno == ENOENT); /* and nothing is left behind */
}

static void test_fd_producer_died_mid_publish(void)
{
	struct lb *lb = (next_name(), start(2, 4, 4096));
	rdmem_t *h = NULL;
	pid_t pid;
	int status;

	REQUIRE(lb);
	REQUIRE(rdmem_open(shm_name, &h) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		rdmem_t *c;
		struct rdmem_att *a;
		uint64_t pos;

		if (rdmem_open(shm_name, &c))
			_exit(2);
		a = c->att;
		atomic_store(&rdmem__slot(a, 0)->state, RDMEM_SLOT_SUBMITTED);
		if (rdmem_ring_claim(&a->ring, &pos))
			_exit(3);
		raise(SIGSTOP); /* killed here, between claim and publish */
		_exit(4);
	}
	CHECK(waitpid(pid, &status, WUNTRACED) == pid);
	CHECK(WIFSTOPPED(status));
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK_EQ(echo_loop(h, 0, 200), 0);
	CHECK_EQ(stats_of(lb).skipped, 1);
	WAIT_FOR(stats_of(lb).dead_clients == 1, 3000);
	CHECK_EQ(stats_of(lb).dead_clients, 1);
	rdmem_close(h);
	lb_stop(lb);
}

/* Our slot s holding an ECHO of text, SUBMITTED, without a ring entry. */
static struct rdmem_shm_slot *raw_submit_no_entry(struct raw *r, uint32_t s, const char *text)
{
	struct rdmem_shm_slot *slot = rdmem_shm_slot_at(r->base, &r->g, r->client, s);

	/* The value before the state word raw_fill publishes it with. */
	memcpy(rdmem_shm_payload(slot) + RDMEM_SHM_VALUE_OFF, text, strlen(text));
	return raw_fill(r, s, RDMEM_OP_ECHO, 0, (uint32_t)strlen(text), 0, 0);
}

/*
 * An honest producer preempted between its slot word and its ring cell for
 * longer than two orphan scans (a loaded host does it): the scan serves the
 * call, and the entry that comes afterwards is ignored and counted, neither
 * refused nor scored against the client (CI saw it refused), whether the
 * call is done by then or still held. Strikes are on (--client-strikes 4), so
 * a strike would show.
 */
static void test_fd_producer_preempted_past_the_scan(void)
{
	struct rdmem_frontdoor_config cfg = (next_name(), config(2, 4, 4096));
	struct rdmem_shm_slot *slot;
	struct lb *lb = NULL;
	uint64_t t0;
	struct raw r;

	cfg.client_strikes = 4;
	REQUIRE(lb_start(&lb, &cfg) == 0);
	REQUIRE(raw_attach(&r) == 0);
	/* Done before its entry comes. Meanwhile another process attaches and
	 * leaves every few ms: each hang-up asks for a scan at once, and two
	 * looks that close together must not take the slot. */
	t0 = rdmem_now_ns();
	slot = raw_submit_no_entry(&r, 0, "late");
	while (rdmem_now_ns() - t0 < 60000000ull) {
		rdmem_t *other = NULL;

		if (rdmem_open(shm_name, &other) == 0)
			rdmem_close(other);
		usleep(3000);
	}
	CHECK(stats_of(lb).door_hangups >= 5);
	CHECK_EQ(RDMEM_SLOT_PHASE(atomic_load(&slot->state)), RDMEM_SLOT_SUBMITTED);
	CHECK_EQ(raw_wait_done(slot), RDMEM_S_OK); /* served by the scan, no entry yet */
	printf("# taken by the scan after %.0f ms (two looks >= 90 ms apart)\n",
	       (rdmem_now_ns() - t0) / 1e6);
	CHECK(rdmem_now_ns() - t0 >= 90000000ull);
	CHECK_EQ(stats_of(lb).orphans, 1);
	CHECK_EQ(rdmem_ring_push(&r.ring, (uint16_t)r.client, 0), 0); /* the late entry */
	WAIT_FOR(stats_of(lb).late_entries == 1, 2000);
	CHECK_EQ(stats_of(lb).late_entries, 1);
	CHECK_EQ(stats_of(lb).bad_entries, 0);
	CHECK_EQ(stats_of(lb).strikes, 0);
	CHECK_EQ(atomic_load(&slot->state), RDMEM_SLOT_DONE); /* not taken twice */
	/* Still held (never answered) when its entry comes. */
	slot = raw_submit_no_entry(&r, 1, "hold");
	WAIT_FOR(stats_of(lb).orphans == 2, 2000);
	CHECK_EQ(stats_of(lb).orphans, 2);
	/* The scan counts an orphan, then takes it: the state may lag the count. */
	WAIT_FOR(RDMEM_SLOT_PHASE(atomic_load(&slot->state)) == RDMEM_SLOT_TAKEN, 2000);
	CHECK_EQ(RDMEM_SLOT_PHASE(atomic_load(&slot->state)), RDMEM_SLOT_TAKEN);
	CHECK_EQ(rdmem_ring_push(&r.ring, (uint16_t)r.client, 1), 0);
	WAIT_FOR(stats_of(lb).late_entries == 2, 2000);
	CHECK_EQ(stats_of(lb).late_entries, 2);
	CHECK_EQ(stats_of(lb).bad_entries, 0);
	CHECK_EQ(stats_of(lb).strikes, 0);
	/* Only the first entry after a scan take is forgiven: a second is refused, scored. */
	CHECK_EQ(rdmem_ring_push(&r.ring, (uint16_t)r.client, 0), 0);
	WAIT_FOR(stats_of(lb).bad_entries == 1, 2000);
	CHECK_EQ(stats_of(lb).bad_entries, 1);
	CHECK_EQ(stats_of(lb).strikes, 1);
	CHECK_EQ(stats_of(lb).late_entries, 2);
	CHECK_EQ(stats_of(lb).cut_off, 0);
	lb_stop(lb);
	rdmem_close(r.h);
}

/* ---- the CLI against the front door ----------------------------------- */

static int run_cli(const char *bin, char *const argv[], char *out, size_t cap)
{
	int p[2], status;
	size_t used = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execv(bin, argv);
		_exit(127);
	}
	close(p[1]);
	while (used + 1 < cap && (n = read(p[0], out + used, cap - used - 1)) > 0)
		used += (size_t)n;
	out[used] = '\0';
	close(p[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void test_fd_cli_local_ping_and_bench(void)
{
	const char *dir = getenv("RDMEM_BIN");
	char bin[512], out[8192];
	struct lb *lb;

	if (!dir || snprintf(bin, sizeof(bin), "%s/rdmem", dir) >= (int)sizeof(bin) ||
	    access(bin, X_OK)) {
		check_skip("test_fd_cli_local_ping_and_bench", "RDMEM_BIN/rdmem not built");
		return;
	}
	lb = (next_name(), start(2, 32, 4096));
	REQUIRE(lb);
	{
		char *argv[] = { bin, "--shm-name", shm_name, "local-ping", NULL };
		CHECK_EQ(run_cli(bin, argv, out, sizeof(out)), 0);
	}
	{
		char *argv[] = { bin,  "--shm-name", shm_name,	 "bench", "--op",   "local-ping",
				 "-n", "3000",	     "--window", "32",	  "--json", NULL };
		CHECK_EQ(run_cli(bin, argv, out, sizeof(out)), 0);
		CHECK(strstr(out, "\"ops\":3000") && strstr(out, "\"failures\":0"));
	}
	{
		char *argv[] = { bin,	"--shm-name", shm_name, "bench",  "--op", "get", "-n",
				 "500", "--window",   "4",	"--size", "100",  NULL };
		CHECK_EQ(run_cli(bin, argv, out, sizeof(out)), 0);
		CHECK(strstr(out, "p99"));
	}
	{
		char *argv[] = { bin, "--shm-name", shm_name, "get", "no-such-key", NULL };
		CHECK_EQ(run_cli(bin, argv, out, sizeof(out)), 1);
	}
	{
		char *argv[] = { bin, "--shm-name", shm_name, "bench", "--window", "0", NULL };
		CHECK_EQ(run_cli(bin, argv, out, sizeof(out)), 2);
	}
	lb_stop(lb);
	{
		char *argv[] = { bin, "--shm-name", shm_name, "ping", NULL };
		CHECK_EQ(run_cli(bin, argv, out, sizeof(out)), 3);
	}
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	RUN(test_fd_ops_byte_exact_0_to_1mib);
	RUN(test_fd_mget_profile_large_get_stats_ctl);
	RUN(test_fd_image_put_3mib_in_chunks);
	RUN(test_fd_many_threads_one_handle_and_async_window);
	RUN(test_fd_many_processes);
	RUN(test_fd_hostile_entries_refused_good_client_unharmed);
	RUN(test_fd_client_killed_mid_wait_is_reclaimed);
	RUN(test_fd_timeout_abandons_and_late_reply_never_delivered);
	RUN(test_fd_agent_stop_then_restart);
	RUN(test_fd_agent_killed_zombie_then_restarted_over_its_segment);
	RUN(test_fd_second_frontdoor_refused_unless_reset);
	RUN(test_fd_refuses_a_segment_memory_cannot_hold);
	RUN(test_fd_producer_died_mid_publish);
	RUN(test_fd_producer_preempted_past_the_scan);
	RUN(test_fd_cli_local_ping_and_bench);
	return check_done();
}
