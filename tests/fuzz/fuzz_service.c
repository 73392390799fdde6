/* fuzz_service.c - the server's one dispatch (server/service.c) behind every
 * path, on calls whose header passed the path's checks but whose key and
 * value are hostile: MGET key arrays, PROFILE ids, LARGE_GET sizes, image
 * chunks, RECLAIM object references, STATS flags.
 *
 * Each input gets a fresh service (KV store, image store in a temp dir) and
 * a real object pool whose area is an exact-size heap buffer, as an RDMA
 * session has; replies go to an exact-size heap buffer, to a pool object
 * (the LAZY path), or are refused by the path (BUSY). Checked per call:
 *  - the status is a wire status; a failed reply carries no bytes; an OK one
 *    carries exactly the bytes it reserved, at most max_value;
 *  - ECHO returns the value; MGET returns an array that opens with one entry
 *    per key; PROFILE a profile of the asked id; LARGE_GET "big:<n>" the
 *    pattern of n bytes; RECLAIM accounts for every reference;
 *  - the KV ops agree with a shadow of every PUT and DEL of the input.
 *
 * Input: byte 0 picks max_value; then calls: 64 descriptor bytes, a mode
 * byte (bit 0 near-valid fields, bits 1-2 reply sink, bit 3 a RECLAIM built
 * from references the pool handed out, bit 4 no reclaim callback), key
 * bytes, then value bytes (for bit 3: a count, then two bytes per reference).
 */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdmem/blob.h"
#include "rdmem/content.h"
#include "server/objpool.h"
#include "server/profile.h"
#include "server/service.h"
#include "tests/fuzz/fuzz.h"

#define MAX_CALLS 32
#define MAX_KEYS  32
#define MAX_REFS  16

struct kv_entry {
	uint8_t *key, *val;
	uint32_t klen, vlen;
};

struct sink {
	struct rdmem_reply_sink base;
	int mode; /* 0: heap, 1: object pool, 2: refuse */
	int calls;
	uint32_t len;
	uint8_t *heap;
	struct rdmem_objref ref;
	int used_ref;
};

static char imgdir[64];
static const uint32_t max_values[] = { 64, 4096, 65536 };
static struct kv_entry kv[MAX_KEYS];
static unsigned nkv;
static int kv_blind; /* the shadow overflowed: KV results are no longer judged */
static struct rdmem_objpool pool;
static uint8_t *area;
static struct rdmem_objref refs[MAX_REFS];
static unsigned nrefs;

static struct kv_entry *kv_find(const uint8_t *key, uint32_t klen)
{
	unsigned i;

	for (i = 0; i < nkv; i++)
		if (kv[i].klen == klen && !memcmp(kv[i].key, key, klen))
			return &kv[i];
	return NULL;
}

static uint8_t *dup_bytes(const uint8_t *p, uint32_t n)
{
	uint8_t *c = malloc(n ? n : 1);

	FUZZ_CHECK(c);
	if (n)
		memcpy(c, p, n);
	return c;
}

static void kv_set(const uint8_t *key, uint32_t klen, const uint8_t *val, uint32_t vlen)
{
	struct kv_entry *e = kv_find(key, klen);

	if (!e) {
		if (nkv == MAX_KEYS) {
			kv_blind = 1;
			return;
		}
		e = &kv[nkv++];
		e->key = dup_bytes(key, klen);
		e->klen = klen;
	} else {
		free(e->val);
	}
	e->val = dup_bytes(val, vlen);
	e->vlen = vlen;
}

static void kv_del(struct kv_entry *e)
{
	free(e->key);
	free(e->val);
	*e = kv[--nkv];
}

static int reserve(struct rdmem_reply_sink *base, uint32_t len, void **buf)
{
	struct sink *k = (struct sink *)base;
	int st;

	k->calls++;
	FUZZ_CHECK(k->calls == 1); /* at most once per dispatch */
	k->len = len;
	if (k->mode == 2)
		return RDMEM_S_BUSY;
	if (k->mode == 1 && len) {
		st = rdmem_objpool_alloc(&pool, len, rdmem_now_ns(), &k->ref, buf);
		if (st == RDMEM_S_OK) {
			FUZZ_CHECK(k->ref.offset + (uint64_t)k->ref.length <= pool.area_bytes);
			k->used_ref = 1;
		}
		return st;
	}
	k->heap = malloc(len ? len : 1); /* exact size: ASan sees a write past it */
	FUZZ_CHECK(k->heap);
	*buf = k->heap;
	return RDMEM_S_OK;
}

static const uint8_t *reply_bytes(const struct sink *k)
{
	return k->used_ref ? area + k->ref.offset : k->heap;
}

/* KV results against the shadow, for a key the shadow can judge. */
static void check_kv(const struct rdmem_desc *d, const uint8_t *key, const uint8_t *val,
		     const struct rdmem_desc *rep, const struct sink *k)
{
	struct kv_entry *e = kv_find(key, d->key_len);
	uint64_t size;

	if (kv_blind)
		return;
	switch (d->op) {
	case RDMEM_OP_KV_PUT:
		if (rep->status == RDMEM_S_OK)
			kv_set(key, d->key_len, val, d->val_len);
		break;
	case RDMEM_OP_KV_DEL:
		if (rep->status == RDMEM_S_OK) {
			FUZZ_CHECK(e);
			kv_del(e);
		} else if (rep->status == RDMEM_S_NOT_FOUND) {
			FUZZ_CHECK(!e);
		}
		break;
	case RDMEM_OP_LARGE_GET:
		if (rdmem_big_parse((const char *)key, d->key_len, &size) == 0)
			break; /* generated, not stored */
			       /* fall through */
	case RDMEM_OP_KV_GET:
		if (rep->status == RDMEM_S_OK) {
			FUZZ_CHECK(e);
			FUZZ_CHECK(rep->val_len == e->vlen &&
				   (!e->vlen || !memcmp(reply_bytes(k), e->val, e->vlen)));
		} else if (rep->status == RDMEM_S_NOT_FOUND) {
			FUZZ_CHECK(!e);
		}
		break;
	}
}

static void check_mget(const uint8_t *val, uint32_t vlen, const struct rdmem_desc *rep,
		       const struct sink *k)
{
	struct rdmem_blob_array keys, out;
	uint32_t i;

	FUZZ_CHECK(rdmem_blob_array_open(val, vlen, &keys) == 0);
	FUZZ_CHECK(rdmem_blob_array_open(reply_bytes(k), rep->val_len, &out) == 0);
	FUZZ_CHECK(out.count == keys.count);
	for (i = 0; i < keys.count; i++) {
		const void *kp, *vp;
		uint32_t kl, vl, kf, vf;
		struct kv_entry *e;

		rdmem_blob_array_get(&keys, i, &kp, &kl, &kf);
		rdmem_blob_array_get(&out, i, &vp, &vl, &vf);
		e = kv_find(kp, kl);
		if (!kv_blind)
			FUZZ_CHECK(!!e == !!(vf & RDMEM_BLOB_PRESENT));
		if (e)
			FUZZ_CHECK(vl == e->vlen && (!vl || !memcmp(vp, e->val, vl)));
	}
}

static void check_reply(uint32_t max_value, const struct rdmem_desc *d, const uint8_t *key,
			const uint8_t *val, const struct rdmem_desc *rep, const struct sink *k)
{
	FUZZ_CHECK(rep->status < RDMEM_S__COUNT);
	if (rep->status != RDMEM_S_OK) {
		FUZZ_CHECK(rep->val_len == 0);
		return;
	}
	FUZZ_CHECK(rep->val_len <= max_value);
	FUZZ_CHECK(rep->val_len == (k->calls ? k->len : 0));
	if (rep->val_len)
		fz_touch(reply_bytes(k), rep->val_len);
	switch (d->op) {
	case RDMEM_OP_ECHO:
		FUZZ_CHECK(rep->val_len == d->val_len &&
			   (!d->val_len || !memcmp(reply_bytes(k), val, d->val_len)));
		break;
	case RDMEM_OP_KV_MGET:
		check_mget(val, d->val_len, rep, k);
		break;
	case RDMEM_OP_PROFILE: {
		struct rdmem_profile_view v;
		uint64_t id;

		FUZZ_CHECK(rdmem_profile_parse_id(key, d->key_len, &id) == 0);
		FUZZ_CHECK(rdmem_blob_profile_open(reply_bytes(k), rep->val_len, &v) == 0);
		FUZZ_CHECK(v.id == id);
		break;
	}
	case RDMEM_OP_LARGE_GET: {
		uint64_t size;

		if (rdmem_big_parse((const char *)key, d->key_len, &size) == 0)
			FUZZ_CHECK(rep->val_len == size &&
				   rdmem_big_verify(size, 0, reply_bytes(k), size) == size);
		break;
	}
	case RDMEM_OP_RECLAIM:
		FUZZ_CHECK(rep->aux + rep->args.raw[0] == d->val_len / sizeof(struct rdmem_objref));
		break;
	case RDMEM_OP_STATS:
		FUZZ_CHECK(rep->val_len > 0);
		if (d->flags & RDMEM_F_JSON)
			FUZZ_CHECK(reply_bytes(k)[0] == '{');
		break;
	}
}

static int reclaim_cb(void *ctx, const struct rdmem_objref *ref)
{
	(void)ctx;
	return rdmem_objpool_reclaim(&pool, ref);
}

static void one_call(struct rdmem_service *svc, uint32_t max_value, struct fz *in)
{
	struct sink k = { { reserve }, 0, 0, 0, NULL, { 0 }, 0 };
	struct rdmem_desc d, rep;
	struct rdmem_call call;
	uint8_t mode, *key, *val;

	fz_copy(in, &d, sizeof(d));
	mode = fz_u8(in);
	if (mode & 1) {
		/* Near-valid, as a path hands them over after rdmem_desc_check(). */
		d.op = (uint16_t)(1 + d.op % (RDMEM_OP__COUNT - 1));
		d.path %= RDMEM_PATH__COUNT;
		d.key_len %= 64;
		d.val_len %= 512;
		d.flags &= RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT | RDMEM_F_JSON;
	}
	if (mode & 8 && nrefs) {
		/* RECLAIM of references the pool handed out, some replayed or aged. */
		d.op = RDMEM_OP_RECLAIM;
		d.key_len = 0;
		d.val_len = (1 + fz_u8(in) % nrefs) * (uint32_t)sizeof(struct rdmem_objref);
	} else if (rdmem_desc_check(&d, max_value) != RDMEM_S_OK) {
		/* Refused on its header before any byte is read, as the paths do. */
		d.key_len = 0;
		d.val_len = 0;
	}
	key = malloc(d.key_len ? d.key_len : 1);
	val = malloc(d.val_len ? d.val_len : 1);
	FUZZ_CHECK(key && val);
	fz_copy(in, key, d.key_len);
	if (mode & 8 && nrefs) {
		unsigned i;

		for (i = 0; i < d.val_len / sizeof(struct rdmem_objref); i++) {
			struct rdmem_objref r = refs[(i + fz_u8(in)) % nrefs];

			r.generation += fz_u8(in) % 3 == 2;
			memcpy(val + (size_t)i * sizeof(r), &r, sizeof(r));
		}
	} else {
		fz_copy(in, val, d.val_len);
	}

	k.mode = (mode >> 1) % 3;
	call.req = &d;
	call.key = key;
	call.val = val;
	call.reclaim = mode & 16 ? NULL : reclaim_cb; /* NULL: the TCP path */
	call.reclaim_ctx = NULL;
	memset(&rep, 0xee, sizeof(rep));
	rdmem_service_dispatch(svc, &call, &k.base, &rep);
	if (getenv("RDMEM_FUZZ_VERBOSE"))
		fprintf(stderr, "fuzz_service: %s (key %u B, value %u B): status %u, %u bytes%s\n",
			rdmem_op_name(d.op), d.key_len, d.val_len, rep.status, rep.val_len,
			k.used_ref ? " in the pool" : "");
	check_reply(max_value, &d, key, val, &rep, &k);
	if (rdmem_desc_check(&d, max_value) == RDMEM_S_OK)
		check_kv(&d, key, val, &rep, &k);
	if (k.used_ref && rep.status == RDMEM_S_OK && nrefs < MAX_REFS)
		refs[nrefs++] = k.ref;
	else if (k.used_ref)
		rdmem_objpool_reclaim(&pool, &k.ref); /* the path frees what it will not send */
	FUZZ_CHECK(pool.st.live <= pool.nobjs && pool.st.used_bytes <= pool.area_bytes);
	free(k.heap);
	free(key);
	free(val);
}

static void clean_imgdir(void)
{
	DIR *d = opendir(imgdir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

static void cleanup(void)
{
	clean_imgdir();
	rmdir(imgdir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	(void)argc;
	(void)argv;
	fz_quiet();
	snprintf(imgdir, sizeof(imgdir), "%s/rdmem-fuzz-%d-svc.XXXXXX", base, (int)getpid());
	FUZZ_CHECK(mkdtemp(imgdir));
	atexit(cleanup);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = fz_init(data, size);
	uint32_t max_value = max_values[fz_u8(&in) % RDMEM_ARRAY_SIZE(max_values)];
	struct rdmem_service_config cfg = {
		max_value, 4, imgdir, NULL, 1u << 20, 60000, 1u << 30, 0
	};
	struct rdmem_objpool_config pc = { 4, max_value, 60000 };
	struct rdmem_service *svc;
	unsigned n = 0;

	FUZZ_CHECK(rdmem_service_create(&cfg, &svc) == 0);
	area = malloc(rdmem_objpool_area_bytes(&pc));
	FUZZ_CHECK(area && rdmem_objpool_init(&pool, &pc, area) == 0);
	FUZZ_CHECK(pool.area_bytes == rdmem_objpool_area_bytes(&pc));
	nrefs = 0;
	kv_blind = 0;
	while (!fz_empty(&in) && n++ < MAX_CALLS)
		one_call(svc, max_value, &in);
	rdmem_service_tick(svc);
	rdmem_objpool_fini(&pool);
	free(area);
	rdmem_service_destroy(svc);
	while (nkv)
		kv_del(&kv[0]);
	clean_imgdir();
	return 0;
}
