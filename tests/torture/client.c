/* torture_client - one client process of the torture harness (tests/torture/).
 *
 * Runs a random op mix through libclient (rdmem.h, libc only) with up to
 * --window calls in flight, and writes every call's invocation and completion
 * to a history file, one write() per line so a kill -9 keeps every line
 * written before it:
 *
 *   I <id> <t_ns> <op> <path> <key> <vlen> <vdigest>
 *   C <id> <t_ns> <rc> <rlen> <rdigest> <check> <rpath> [<key>=<len>:<digest>|<key>=- ...]
 *
 * Written values are self-describing: a 32-byte header (magic, writer,
 * sequence, length, key hash) then bytes derived from all of them, truncated
 * to the length, so a reader detects any wrong byte of a value of 32 bytes or
 * more by itself; shorter ones are matched by digest by the checker.
 * <check> is "ok", "bad" (this process saw wrong bytes) or "-" (not checkable).
 *
 * Other modes: --digest FILE prints the digest of a file (the checker's view
 * of committed images); --final reads every key once with retries.
 */
#include "libclient/rdmem.h"

#include <limits.h>
#include <stdarg.h>

#define TC_HDR	    32u
#define TC_MAX_KEYS 64u
#define TC_MAX_WIN  64u
#define TC_MAGIC    0x31565454u /* "TTV1" */

enum { OP_PING, OP_ECHO, OP_PUT, OP_GET, OP_DEL, OP_MGET, OP_PROFILE, OP_LARGE, OP_IMAGE, OP_N };
static const char *const tc_op_names[OP_N] = { "ping", "echo",	  "put",   "get",  "del",
					       "mget", "profile", "large", "image" };

struct tc_cfg {
	const char *shm, *hist;
	uint32_t writer, window, keys, timeout_ms, duration_ms, max_calls;
	uint64_t seed;
	unsigned weights[OP_N];
	uint32_t sizes[64], n_sizes, max_size, image_max;
	uint8_t paths[8], n_paths;
	int final;
};

struct tc_call {
	struct rdmem_rpc rpc;
	int used, op;
	uint64_t id;
	uint32_t keys[4], n_keys;
	char key[64];
	void *req;    /* request bytes we own (value, mget blob) */
	uint64_t big; /* LARGE_GET size */
};

static int tc_hist_fd = -1;
static uint64_t tc_rng;

static uint64_t tc_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t tc_below(uint32_t n)
{
	return n ? (uint32_t)(tc_next(&tc_rng) % n) : 0;
}

/* Digest of any bytes: word-wise, length-salted; "0" for an empty value is fine. */
static uint64_t tc_digest(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint64_t h = 0x243f6a8885a308d3ull ^ (len * 0x9e3779b97f4a7c15ull), w;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	for (w = 0; i < len; i++)
		w = (w << 8) | b[i];
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 29);
}

static uint32_t tc_keyhash(const char *key)
{
	return (uint32_t)tc_digest(key, strlen(key));
}

/* The value writer/seq writes to a key, truncated to len. */
static void tc_fill(uint8_t *out, uint32_t len, uint32_t writer, uint32_t seq, uint32_t keyhash)
{
	uint32_t hdr[8] = { TC_MAGIC, writer, seq, len, keyhash, 0, 0, 0 };
	uint64_t s = ((uint64_t)writer << 32 | seq) ^ ((uint64_t)keyhash << 17) ^ len, w;
	uint32_t i;

	hdr[5] = (uint32_t)tc_digest(hdr, 20);
	memcpy(out, hdr, len < TC_HDR ? len : TC_HDR);
	for (i = TC_HDR; i + 8 <= len; i += 8) {
		w = tc_next(&s);
		memcpy(out + i, &w, 8);
	}
	if (i < len) {
		w = tc_next(&s);
		memcpy(out + i, &w, len - i);
	}
}

/* "ok": the bytes are exactly what their header says was written to key. */
static const char *tc_check_value(const char *key, const uint8_t *v, uint32_t len)
{
	uint32_t hdr[8];
	uint8_t *want;
	int same;

	if (len < TC_HDR)
		return "-";
	memcpy(hdr, v, sizeof(hdr));
	if (hdr[0] != TC_MAGIC || hdr[3] != len || hdr[4] != tc_keyhash(key))
		return "bad";
	want = malloc(len);
	if (!want)
		return "-";
	tc_fill(want, len, hdr[1], hdr[2], hdr[4]);
	same = memcmp(want, v, len) == 0;
	free(want);
	return same ? "ok" : "bad";
}

static void tc_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void tc_line(const char *fmt, ...)
{
	char buf[8192];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(buf))
		n = sizeof(buf) - 1;
	/* One write per line: a kill -9 leaves whole lines only. */
	if (n > 0 && write(tc_hist_fd, buf, (size_t)n) != n) {
		perror("torture_client: history write");
		exit(3);
	}
}

static void tc_keyname(char *out, size_t cap, uint32_t k)
{
	snprintf(out, cap, "k%u", k);
}

static uint32_t tc_size(const struct tc_cfg *c)
{
	uint32_t r = tc_below(8), s;

	if (r < 4 && c->n_sizes)
		s = c->sizes[tc_below(c->n_sizes)];
	else if (r < 7)
		s = tc_below(257); /* small values are most of any real mix */
	else
		s = tc_below(c->max_size + 1);
	return s > c->max_size ? c->max_size : s;
}

static void tc_invoke(struct tc_call *k, uint8_t path, const char *key, uint32_t vlen, uint64_t vd)
{
	tc_line("I %" PRIu64 " %" PRIu64 " %s %u %s %u %016" PRIx64 "\n", k->id, rdmem_now_ns(),
		tc_op_names[k->op], path, key, vlen, vd);
}

/* Prepares call slot k with a random op; returns 0, or 1 for a sync op done here. */
static int tc_prepare(rdmem_t *h, const struct tc_cfg *c, struct tc_call *k, uint64_t id);

static void tc_complete(struct tc_call *k);

static uint8_t tc_path(const struct tc_cfg *c)
{
	return c->n_paths ? c->paths[tc_below(c->n_paths)] : RDMEM_PATH_AUTO;
}

static int tc_pick_op(const struct tc_cfg *c)
{
	unsigned total = 0, r, i;

	for (i = 0; i < OP_N; i++)
		total += c->weights[i];
	r = tc_below(total ? total : 1);
	for (i = 0; i < OP_N; i++) {
		if (r < c->weights[i])
			return (int)i;
		r -= c->weights[i];
	}
	return OP_GET;
}

static void tc_image(rdmem_t *h, const struct tc_cfg *c, struct tc_call *k, uint8_t path)
{
	uint32_t mv = rdmem_max_value(h), chunk, len;
	struct rdmem_image_opts io = { 0 };
	struct rdmem_opts o = { path, c->timeout_ms, NULL };
	uint8_t *data;
	int rc;

	/* At most 64 chunks (plus the odd one past max-value): an upload is one
	 * call after another, and a case lasts a second or two. */
	if (!mv)
		mv = 1; /* detached: the upload fails at once, whatever its size */
	chunk = tc_below(4) ? 1 + tc_below(mv) : mv + tc_below(2);
	len = tc_below(c->image_max + 1);
	if (len / 64 >= chunk)
		len = chunk * 64 - tc_below(2);
	data = malloc(len ? len : 1);
	if (!data)
		exit(3);
	snprintf(k->key, sizeof(k->key), "img-%u-%" PRIu64, c->writer, k->id);
	tc_fill(data, len, c->writer, (uint32_t)k->id, tc_keyhash(k->key));
	io.chunk_size = chunk;
	tc_invoke(k, path, k->key, len, tc_digest(data, len));
	rc = rdmem_image_put(h, k->key, data, len, &io, &o);
	tc_line("C %" PRIu64 " %" PRIu64 " %d 0 0 - 0 chunk=%u\n", k->id, rdmem_now_ns(), rc,
		chunk);
	free(data);
}

static int tc_prepare(rdmem_t *h, const struct tc_cfg *c, struct tc_call *k, uint64_t id)
{
	uint8_t path = tc_path(c);
	struct rdmem_rpc *r = &k->rpc;
	uint32_t len, i;
	uint64_t vd = 0;
	char keys[256];

	memset(k, 0, sizeof(*k));
	k->id = id;
	k->op = tc_pick_op(c);
	strcpy(k->key, "-");
	switch (k->op) {
	case OP_PING:
		rdmem_rpc_init(r, RDMEM_OP_PING);
		break;
	case OP_ECHO:
		len = tc_size(c);
		k->req = malloc(len ? len : 1);
		if (!k->req)
			exit(3);
		tc_fill(k->req, len, c->writer, (uint32_t)id, 0);
		rdmem_rpc_init(r, RDMEM_OP_ECHO);
		r->val = k->req;
		r->val_len = len;
		vd = tc_digest(k->req, len);
		break;
	case OP_PUT:
		k->keys[0] = tc_below(c->keys);
		tc_keyname(k->key, sizeof(k->key), k->keys[0]);
		len = tc_size(c);
		k->req = malloc(len ? len : 1);
		if (!k->req)
			exit(3);
		tc_fill(k->req, len, c->writer, (uint32_t)id, tc_keyhash(k->key));
		rdmem_rpc_init(r, RDMEM_OP_KV_PUT);
		r->val = k->req;
		r->val_len = len;
		vd = tc_digest(k->req, len);
		break;
	case OP_GET:
	case OP_DEL:
		k->keys[0] = tc_below(c->keys);
		tc_keyname(k->key, sizeof(k->key), k->keys[0]);
		rdmem_rpc_init(r, k->op == OP_GET ? RDMEM_OP_KV_GET : RDMEM_OP_KV_DEL);
		break;
	case OP_MGET: {
		const char *names[4];
		uint32_t lens[4], blen;
		char buf[4][16];

		k->n_keys = 1 + tc_below(4);
		keys[0] = 0;
		for (i = 0; i < k->n_keys; i++) {
			k->keys[i] = tc_below(c->keys);
			tc_keyname(buf[i], sizeof(buf[i]), k->keys[i]);
			names[i] = buf[i];
			lens[i] = (uint32_t)strlen(buf[i]);
			strcat(keys, i ? "," : "");
			strcat(keys, buf[i]);
		}
		if (rdmem_mget_request(names, lens, k->n_keys, (void **)&k->req, &blen))
			exit(3);
		rdmem_rpc_init(r, RDMEM_OP_KV_MGET);
		r->val = k->req;
		r->val_len = blen;
		r->aux = k->n_keys;
		snprintf(k->key, sizeof(k->key), "%s", keys);
		tc_invoke(k, path, k->key, 0, 0);
		goto submit;
	}
	case OP_PROFILE: {
		uint64_t pid = tc_next(&tc_rng) % 100000;

		snprintf(k->key, sizeof(k->key), "%" PRIu64, pid);
		rdmem_rpc_init(r, RDMEM_OP_PROFILE);
		r->args[0] = pid;
		r->key = k->key;
		r->key_len = (uint32_t)strlen(k->key);
		tc_invoke(k, path, k->key, 0, 0);
		goto submit;
	}
	case OP_LARGE:
		k->big = tc_size(c);
		snprintf(k->key, sizeof(k->key), "big:%" PRIu64, k->big);
		rdmem_rpc_init(r, RDMEM_OP_LARGE_GET);
		break;
	case OP_IMAGE:
		tc_image(h, c, k, path);
		return 1;
	}
	if (k->op == OP_PUT || k->op == OP_GET || k->op == OP_DEL || k->op == OP_LARGE) {
		r->key = k->key;
		r->key_len = (uint32_t)strlen(k->key);
	}
	tc_invoke(k, path, k->key, r->val_len, vd);
submit:
	r->path = path;
	r->timeout_ms = c->timeout_ms;
	k->used = 1;
	if (rdmem_submit(h, r) != 0) {
		tc_complete(k);
		return 1;
	}
	return 0;
}

static void tc_complete_mget(struct tc_call *k, char *extra, size_t cap)
{
	struct rdmem_blob_array arr;
	size_t off = 0;
	uint32_t i;

	if (k->rpc.rc || rdmem_blob_array_open(k->rpc.rval, k->rpc.rlen, &arr) ||
	    arr.count != k->n_keys) {
		if (k->rpc.rc == 0)
			k->rpc.rc = -EPROTO;
		return;
	}
	for (i = 0; i < k->n_keys && off + 64 < cap; i++) {
		const void *d;
		uint32_t len, fl;
		char name[16];

		rdmem_blob_array_get(&arr, i, &d, &len, &fl);
		tc_keyname(name, sizeof(name), k->keys[i]);
		if (fl & RDMEM_BLOB_PRESENT)
			off += (size_t)snprintf(extra + off, cap - off, " %s=%u:%016" PRIx64 ":%s",
						name, len, tc_digest(d, len),
						tc_check_value(name, d, len));
		else
			off += (size_t)snprintf(extra + off, cap - off, " %s=-", name);
	}
}

static void tc_complete(struct tc_call *k)
{
	struct rdmem_rpc *r = &k->rpc;
	const char *check = "-";
	uint64_t rd = 0;
	char extra[1024] = "";

	if (r->rc == 0 && r->rval)
		rd = tc_digest(r->rval, r->rlen);
	if (r->rc == 0) {
		switch (k->op) {
		case OP_GET:
			check = tc_check_value(k->key, r->rval, r->rlen);
			break;
		case OP_ECHO:
			check = r->rlen == r->val_len && !memcmp(r->rval, k->req, r->rlen) ? "ok"
											   : "bad";
			break;
		case OP_LARGE:
			check = rdmem_large_verify(k->key, r->rval, r->rlen) ? "bad" : "ok";
			break;
		case OP_PROFILE: {
			struct rdmem_profile_view v;

			check = !rdmem_blob_profile_open(r->rval, r->rlen, &v) && v.id == r->args[0]
				    ? "ok"
				    : "bad";
			break;
		}
		case OP_MGET:
			tc_complete_mget(k, extra, sizeof(extra));
			break;
		}
	}
	tc_line("C %" PRIu64 " %" PRIu64 " %d %u %016" PRIx64 " %s %u%s\n", k->id, rdmem_now_ns(),
		r->rc, r->rc == 0 ? r->rlen : 0, rd, check, r->rpath, extra);
	rdmem_rpc_free(r);
	free(k->req);
	k->req = NULL;
	k->used = 0;
}

static int tc_sizes(struct tc_cfg *c, char *s)
{
	char *tok, *save = NULL;

	for (tok = strtok_r(s, ",", &save); tok && c->n_sizes < 64;
	     tok = strtok_r(NULL, ",", &save))
		c->sizes[c->n_sizes++] = (uint32_t)strtoul(tok, NULL, 10);
	return 0;
}

static int tc_args(int argc, char **argv, struct tc_cfg *c)
{
	int i;

	c->window = 1;
	c->keys = 4;
	c->timeout_ms = 1000;
	c->duration_ms = 1000;
	c->max_size = 4096;
	for (i = 0; i < OP_N; i++)
		c->weights[i] = 1;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--final")) {
			c->final = 1;
			continue;
		}
		if (!v)
			return -1;
		i++;
		if (!strcmp(a, "--shm"))
			c->shm = v;
		else if (!strcmp(a, "--hist"))
			c->hist = v;
		else if (!strcmp(a, "--writer"))
			c->writer = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--seed"))
			c->seed = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--window"))
			c->window = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--keys"))
			c->keys = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--timeout"))
			c->timeout_ms = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--max-calls"))
			c->max_calls = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--duration"))
			c->duration_ms = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--max-size"))
			c->max_size = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--image-max"))
			c->image_max = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--sizes"))
			tc_sizes(c, (char *)v);
		else if (!strcmp(a, "--paths")) {
			for (; *v && c->n_paths < 8; v++)
				if (*v >= '0' && *v <= '4')
					c->paths[c->n_paths++] = (uint8_t)(*v - '0');
		} else if (!strcmp(a, "--weights")) {
			char *end;
			int j;

			for (j = 0; j < OP_N; j++) {
				c->weights[j] = (unsigned)strtoul(v, &end, 10);
				v = *end ? end + 1 : end;
			}
		} else
			return -1;
	}
	if (!c->shm || !c->hist || !c->window || c->window > TC_MAX_WIN || !c->keys ||
	    c->keys > TC_MAX_KEYS)
		return -1;
	return 0;
}

static int tc_digest_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		perror(path);
		return 3;
	}
	buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		perror(path);
		return 3;
	}
	printf("%ld %016" PRIx64 "\n", n, tc_digest(buf, (size_t)n));
	free(buf);
	fclose(f);
	return 0;
}

static rdmem_t *tc_open(const struct tc_cfg *c, uint64_t until)
{
	rdmem_t *h = NULL;

	/* The agent may be restarting or every entry taken: keep trying. */
	while (rdmem_open(c->shm, &h) != 0) {
		if (rdmem_now_ns() > until)
			return NULL;
		usleep(5000);
	}
	rdmem_set_timeout(h, c->timeout_ms);
	return h;
}

/* Reads every key once, one call at a time, retrying until a definite answer. */
static int tc_final(rdmem_t *h, const struct tc_cfg *c, uint64_t until)
{
	struct tc_call k;
	uint64_t id = 0;
	uint32_t i;

	for (i = 0; i < c->keys && rdmem_now_ns() < until; i++) {
		do {
			memset(&k, 0, sizeof(k));
			k.id = id++;
			k.op = OP_GET;
			tc_keyname(k.key, sizeof(k.key), i);
			rdmem_rpc_init(&k.rpc, RDMEM_OP_KV_GET);
			k.rpc.key = k.key;
			k.rpc.key_len = (uint32_t)strlen(k.key);
			k.rpc.timeout_ms = c->timeout_ms;
			tc_invoke(&k, 0, k.key, 0, 0);
			if (rdmem_submit(h, &k.rpc) == 0)
				rdmem_wait(h, &k.rpc);
			tc_complete(&k);
			if (k.rpc.rc && k.rpc.rc != -ENOENT)
				usleep(20000);
		} while (k.rpc.rc && k.rpc.rc != -ENOENT && rdmem_now_ns() < until);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct tc_call calls[TC_MAX_WIN];
	struct tc_cfg c = { 0 };
	uint64_t start, end, id = 0;
	uint32_t i, live = 0;
	rdmem_t *h;

	if (argc == 3 && !strcmp(argv[1], "--digest"))
		return tc_digest_file(argv[2]);
	if (tc_args(argc, argv, &c)) {
		fprintf(stderr, "usage: torture_client --shm NAME --hist FILE --writer N [...]\n");
		return 2;
	}
	tc_rng = c.seed ^ ((uint64_t)c.writer << 40);
	tc_hist_fd = open(c.hist, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (tc_hist_fd < 0) {
		perror(c.hist);
		return 3;
	}
	tc_line("W %u %d\n", c.writer, (int)getpid());
	start = rdmem_now_ns();
	end = start + (uint64_t)c.duration_ms * 1000000ull;
	h = tc_open(&c, end + 2000000000ull);
	if (!h) {
		tc_line("X open-failed\n");
		return 0;
	}
	if (c.final) {
		tc_final(h, &c, end);
		rdmem_close(h);
		return 0;
	}
	/* The call cap keeps each key's history small enough to check. */
	while ((rdmem_now_ns() < end && (!c.max_calls || id < c.max_calls)) || live) {
		int progress = 0;

		for (i = 0; i < c.window; i++) {
			struct tc_call *k = &calls[i];

			if (k->used) {
				if (rdmem_poll(h, &k->rpc)) {
					tc_complete(k);
					live--;
					progress = 1;
				}
			} else if (rdmem_now_ns() < end && (!c.max_calls || id < c.max_calls)) {
				if (tc_prepare(h, &c, k, id++) == 0)
					live++;
				progress = 1;
			}
		}
		if (!progress)
			usleep(50);
	}
	tc_line("E\n");
	rdmem_close(h);
	return 0;
}
