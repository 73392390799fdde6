/* test_slot_race.c - a hostile agent rewriting its request while the server
 * serves it. Request slots are the agent's to write (remote write access)
 * at any time: over the shm fabric this test maps them, as any peer's
 * fabric does, and stores into them from a second thread, racing the
 * server's worker, as a peer on a NIC races it with RDMA WRITEs. What the
 * server checked must be what it uses (server/session.c,
 * rdmem_session_snapshot):
 *   - an MGET whose key table's first offset flips between a good one and
 *     one 80 MiB past the slot: the server lives, every reply is OK (with
 *     the right value) or BAD_REQUEST;
 *   - an image upload whose name flips between a plain one and an absolute
 *     path out of --image-dir: no file appears outside the directory;
 *   - a PUT whose key flips between two keys of one length: deleting both
 *     leaves the store as it was (no entry stored under one key's hash and
 *     the other's bytes, which no lookup and no DEL reaches).
 * A race kills a server that reads a value in place only when the flip
 * lands between its check and its use; which ops are served in place is
 * checked without a race too (test_parsed_values_are_copied).
 * Each race runs RACE_MS and at least RACE_CALLS calls; before the fix the
 * first two failed within a few hundred calls (a review's reproducers: the
 * worker died at call 9, a file was written outside the directory at call
 * 91).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "e2e.h"
#include "fabric/emu.h"
#include "raw_peer.h"
#include "rdmem/blob.h"
#include "rdmem/content.h"
#include "server/service.h"

#define RACE_MS 1500
/* A race goes on past RACE_MS until it made RACE_CALLS calls (a loaded CI
 * host managed 159 MGETs in 1.5 s), up to RACE_MAX_MS. */
#define RACE_CALLS   500
#define RACE_MAX_MS  15000
#define MGET_KEYS    900
#define BAD_OFFSET   (80u << 20)
#define T_TIMEOUT_MS 5000

static struct proc server;
static char dir[] = "/tmp/rdmem-slot-race-XXXXXX";

/* What the flipper writes, len bytes at `at`, a and b in turn. */
struct flip {
	volatile uint8_t *at;
	const uint8_t *a, *b;
	size_t len;
	atomic_int stop;
	atomic_ulong flips;
	pthread_t thread;
};

static void flip_put(volatile uint8_t *at, const uint8_t *v, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		at[i] = v[i];
}

static void *flip_main(void *arg)
{
	struct flip *f = arg;

	while (!atomic_load_explicit(&f->stop, memory_order_relaxed)) {
		flip_put(f->at, f->b, f->len);
		for (volatile int i = 0; i < 30; i++)
			;
		flip_put(f->at, f->a, f->len);
		for (volatile int i = 0; i < 30; i++)
			;
		atomic_fetch_add_explicit(&f->flips, 1, memory_order_relaxed);
	}
	return NULL;
}

static int flip_start(struct flip *f, volatile uint8_t *at, const void *a, const void *b,
		      size_t len)
{
	f->at = at;
	f->a = a;
	f->b = b;
	f->len = len;
	atomic_init(&f->stop, 0);
	atomic_init(&f->flips, 0);
	flip_put(at, a, len);
	return pthread_create(&f->thread, NULL, flip_main, f) == 0 ? 0 : -1;
}

static unsigned long flip_stop(struct flip *f)
{
	atomic_store_explicit(&f->stop, 1, memory_order_relaxed);
	pthread_join(f->thread, NULL);
	flip_put(f->at, f->a, f->len);
	return atomic_load_explicit(&f->flips, memory_order_relaxed);
}

/* Another call of the race? */
static int race_on(uint64_t start, uint32_t calls)
{
	uint64_t ms = (rdmem_now_ns() - start) / 1000000;

	return ms < RACE_MAX_MS && (ms < RACE_MS || calls < RACE_CALLS);
}

/* An MGET reply of MGET_KEYS entries whose first holds "v": what a server
 * that read the key it checked answers (reply in response slot 0). */
static int mget_first_is_v(struct raw_peer *p, const struct rdmem_desc *rep)
{
	struct rdmem_blob_array a;
	uint32_t len, flags;
	const void *v;

	if (rep->flags & RDMEM_F_OBJREF ||
	    rdmem_blob_array_open(raw_peer_resp_data(p, 0), rep->val_len, &a) < 0 ||
	    a.count != MGET_KEYS)
		return 0;
	rdmem_blob_array_get(&a, 0, &v, &len, &flags);
	return (flags & RDMEM_BLOB_PRESENT) && len == 1 && !memcmp(v, "v", 1);
}

/* Request slot 0 of the server's region as the shm fabric maps it here:
 * the bytes a hostile peer stores into with plain writes. */
static uint8_t *slot_region(struct raw_peer *p)
{
	struct shmfab_conn *sc = (struct shmfab_conn *)p->l->conn;
	unsigned pos = sc->rmr_pos[SHMFAB_KEY_IDX(p->l->w.req.rkey)];

	if (!pos)
		return NULL;
	return sc->rmr[pos - 1].base + (p->l->w.req.addr - sc->rmr[pos - 1].addr);
}

/* A call in slot 0 whose payload (len bytes) is already in the slot. */
static int call_in_place(struct raw_peer *p, struct rdmem_desc *d, struct rdmem_desc *rep)
{
	d->data_off = raw_peer_data_off(p, 0);
	return raw_peer_call(p, 0, d, 0, rep);
}

static int alive_round_trip(struct raw_peer *p)
{
	struct rdmem_desc d = raw_peer_desc(RDMEM_OP_KV_PUT, 5, 3, 0), rep;

	memcpy(p->buf, "alivev", 6);
	memcpy(p->buf + 5, "yes", 3);
	return raw_peer_call(p, 0, &d, 8, &rep) == 0 && rep.status == RDMEM_S_OK ? 0 : -1;
}

/* kv.keys from the server's STATS over TCP; -1 when it cannot be read. */
static long long kv_keys(void)
{
	static char text[65536];

	return e2e_server_json_at(raw_peer_target.port + 1u, text, sizeof(text)) < 0
		   ? -1
		   : e2e_json_num(text, "kv.keys");
}

/*
 * The key "k" holds "v", so an honest read of the table answers "v" for
 * every entry; the flipped offset points 80 MiB past the slot, where a
 * server that reads the entry again finds other bytes (and dies, when that
 * address is not mapped).
 */
static void test_mget_offset_flip(void)
{
	struct rdmem_desc put = raw_peer_desc(RDMEM_OP_KV_PUT, 1, 1, 0), rep;
	struct raw_peer p;
	struct rdmem_blob_writer w;
	struct flip f;
	uint32_t good, bad, i, blen, calls = 0, other = 0, wrong = 0, ok = 0;
	uint64_t start;
	uint8_t *pl;

	REQUIRE(raw_peer_open(&p, 4, 10) == 0);
	memcpy(p.buf, "kv", 2);
	REQUIRE(raw_peer_call(&p, 1, &put, 2, &rep) == 0 && rep.status == RDMEM_S_OK);
	REQUIRE((pl = slot_region(&p)) != NULL);
	pl += raw_peer_data_off(&p, 0);
	REQUIRE(rdmem_blob_array_begin(&w, pl, p.l->slot_bytes, MGET_KEYS) == 0);
	for (i = 0; i < MGET_KEYS; i++)
		rdmem_blob_array_set(&w, i, "k", 1, 0);
	blen = (uint32_t)rdmem_blob_finish(&w);
	memcpy(&good, pl + RDMEM_BLOB_HDR, sizeof(good));
	bad = good + BAD_OFFSET;
	REQUIRE(flip_start(&f, pl + RDMEM_BLOB_HDR, &good, &bad, sizeof(good)) == 0);
	for (start = rdmem_now_ns(); race_on(start, calls); calls++) {
		struct rdmem_desc d = raw_peer_desc(RDMEM_OP_KV_MGET, 0, blen, 0);

		if (call_in_place(&p, &d, &rep) < 0)
			break;
		if (rep.status == RDMEM_S_OK) {
			ok++;
			wrong += !mget_first_is_v(&p, &rep);
		} else {
			other += rep.status != RDMEM_S_BAD_REQUEST;
		}
	}
	printf("# %u MGETs (%u ok, %u of them wrong) against %lu flips of the first key's "
	       "offset\n",
	       calls, ok, wrong, flip_stop(&f));
	CHECK(!race_on(start, calls)); /* every call answered: the server lives */
	CHECK_EQ(other, 0);
	CHECK_EQ(wrong, 0);
	CHECK(ok > 0);
	CHECK(kill(server.pid, 0) == 0);
	CHECK_EQ(alive_round_trip(&p), 0);
	raw_peer_close(&p);
}

static void test_image_name_flip(void)
{
	char evil[128], escaped[96], good[128];
	uint8_t data[] = "written by a hostile agent\n";
	uint32_t dlen = sizeof(data) - 1, calls = 0, id = 1000;
	struct raw_peer p;
	struct flip f;
	uint8_t *pl;
	uint64_t start;
	size_t n;

	/* Absolute: renameat() ignores the directory's fd for such a name. */
	snprintf(escaped, sizeof(escaped), "%s/escaped", dir);
	snprintf(evil, sizeof(evil), "/../../../..%s", escaped);
	n = strlen(evil);
	memset(good, 'A', n);
	REQUIRE(raw_peer_open(&p, 4, 10) == 0);
	REQUIRE((pl = slot_region(&p)) != NULL);
	pl += raw_peer_data_off(&p, 0);
	memcpy(pl + n, data, dlen);
	REQUIRE(flip_start(&f, pl, good, evil, n) == 0);
	for (start = rdmem_now_ns(); race_on(start, calls);) {
		struct rdmem_desc d = raw_peer_desc(RDMEM_OP_IMAGE_CHUNK, (uint16_t)n, dlen, 0),
				  rep;

		d.flags = RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT;
		d.args.image.upload_id = id++;
		d.args.image.total = dlen;
		d.args.image.hash = rdmem_hash_update(RDMEM_HASH_INIT, data, dlen);
		if (call_in_place(&p, &d, &rep) < 0 || access(escaped, F_OK) == 0)
			break;
		if (rep.status ==
		    RDMEM_S_BUSY) /* upload slots taken: --upload-timeout frees them */
			proc_sleep_ms(20);
		else
			calls++; /* a name the server looked at */
	}
	printf("# %u uploads (not counting refusals for want of an upload slot) against %lu "
	       "flips of the name\n",
	       calls, flip_stop(&f));
	CHECK(access(escaped, F_OK) != 0);
	CHECK(kill(server.pid, 0) == 0);
	raw_peer_close(&p);
}

static void test_put_key_flip(void)
{
	const char *ka = "race-key-a", *kb = "race-key-b";
	uint32_t klen = (uint32_t)strlen(ka), calls = 0;
	long long before = kv_keys(), after;
	struct raw_peer p;
	struct flip f;
	uint8_t *pl;
	uint64_t start;

	REQUIRE(before >= 0);
	REQUIRE(raw_peer_open(&p, 4, 10) == 0);
	REQUIRE((pl = slot_region(&p)) != NULL);
	pl += raw_peer_data_off(&p, 0);
	memset(pl + klen, 'v', 8);
	REQUIRE(flip_start(&f, pl, ka, kb, klen) == 0);
	for (start = rdmem_now_ns(); race_on(start, calls); calls++) {
		struct rdmem_desc d = raw_peer_desc(RDMEM_OP_KV_PUT, (uint16_t)klen, 8, 0), rep;

		if (call_in_place(&p, &d, &rep) < 0 || rep.status != RDMEM_S_OK)
			break;
	}
	printf("# %u PUTs against %lu flips of the key\n", calls, flip_stop(&f));
	CHECK(!race_on(start, calls));
	for (const char *const *k = (const char *const[]){ ka, kb, NULL }; *k; k++) {
		struct rdmem_desc d = raw_peer_desc(RDMEM_OP_KV_DEL, (uint16_t)klen, 0, 0), rep;

		memcpy(p.buf, *k, klen);
		CHECK(raw_peer_call(&p, 1, &d, klen, &rep) == 0);
	}
	after = kv_keys();
	printf("# kv.keys %lld before, %lld after deleting both keys\n", before, after);
	CHECK_EQ(after, before);
	raw_peer_close(&p);
}

/*
 * What the races above prove only when the worker's check and its second
 * read interleave with a flip (a loaded host may not interleave them in a
 * whole race): every op that parses its value gets a copy the peer cannot
 * rewrite. Only PUT (stores its value) and ECHO (returns it) read the value
 * once as opaque bytes and may serve it from the slot
 * (rdmem_service_value_opaque, server/service.h).
 */
static void test_parsed_values_are_copied(void)
{
	uint16_t op;

	for (op = RDMEM_OP_PING; op < RDMEM_OP__COUNT; op++)
		CHECK_EQ(rdmem_service_value_opaque(op),
			 op == RDMEM_OP_KV_PUT || op == RDMEM_OP_ECHO);
}

/* Each race has a server of its own: one that died in a race leaves the
 * next race a fresh one to prove itself against. */
static void run_race(const char *name, void (*race)(void))
{
	char img[128];
	char *extra[] = { "--image-dir", img, "--upload-timeout", "100", NULL };

	snprintf(img, sizeof(img), "%s/img", dir);
	if (raw_peer_server_start(&server, "shm", extra) < 0) {
		printf("not ok - %s: start rdmem-server\n", name);
		return;
	}
	check_run(name, race);
	CHECK_EQ(proc_stop(&server, SIGTERM, T_TIMEOUT_MS), 0);
}

int main(void)
{
	char cmd[128];

	rdmem_log_init("test_slot_race", 0);
	if (!mkdtemp(dir) || snprintf(cmd, sizeof(cmd), "%s/img", dir) < 0 ||
	    mkdir(cmd, 0700) < 0) {
		printf("not ok - make %s/img: %s\n", dir, strerror(errno));
		return 1;
	}
	RUN(test_parsed_values_are_copied);
	run_race("test_mget_offset_flip", test_mget_offset_flip);
	run_race("test_image_name_flip", test_image_name_flip);
	run_race("test_put_key_flip", test_put_key_flip);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	return check_done();
}
