/* ops.c - librdmem's one function per op (built on submit and wait), the
 * MGET and PROFILE blob codecs' use, image uploads, and rdmem_strerror(). */
#include <sys/random.h>
#include <unistd.h>

#include "libclient/rdmem_priv.h"

#define RDMEM__STR(x)  #x
#define RDMEM__XSTR(x) RDMEM__STR(x)

const char *rdmem_version(void)
{
	return RDMEM__XSTR(RDMEM_VERSION_MAJOR) "." RDMEM__XSTR(
	    RDMEM_VERSION_MINOR) "." RDMEM__XSTR(RDMEM_VERSION_PATCH);
}

const char *rdmem_strerror(int rc)
{
	switch (rc) {
	case 0:
		return "ok";
	case -ENOENT:
		return "not found";
	case -ECONNREFUSED:
		return "no rdmem agent is running on this segment";
	case -ESHUTDOWN:
		return "the agent stopped or restarted during the call";
	case -EUSERS:
		return "every client entry of the agent's segment is taken";
	case -EDQUOT:
		return "this user holds all the client entries the agent allows one user "
		       "(--clients-per-uid)";
	case -EPROTO:
		return "protocol error (not an rdmem segment, other version, or bad reply)";
	case -ENOBUFS:
		return "reply larger than the buffer";
	case -E2BIG:
		return "too big (over the configured maximum value size)";
	case -EINVAL:
		return "bad request";
	case -ETIMEDOUT:
		return "timed out";
	case -EHOSTUNREACH:
		return "no path to the server";
	case -EBADMSG:
		return "content check failed";
	case -EACCES:
		return "permission denied";
	case -EOPNOTSUPP:
		return "not supported by the server (e.g. image uploads need rdmem-server "
		       "--image-dir DIR)";
	case -ENOMEM:
		return "out of memory (this process's, or the agent's on a forced BULK or LAZY "
		       "path: its --max-client-mem/--max-total-mem budget of pinned memory, where "
		       "AUTO would have copied over TCP)";
	case -ESTALE:
		return "stale: a forced LAZY reply read after the server's --object-ttl, or a "
		       "retry the server cannot vouch for (older than its exactly-once window, or "
		       "in flight when it restarted): it may or may not have run, once";
	default:
		return strerror(-rc);
	}
}

/* Runs c to completion and reports it in o->info. */
static int op_run(rdmem_t *h, struct rdmem_rpc *c, const struct rdmem_opts *o)
{
	int rc;

	if (o) {
		c->path = o->path;
		c->timeout_ms = o->timeout_ms;
	}
	rc = rdmem_submit(h, c);
	if (rc == 0)
		rc = rdmem_wait(h, c);
	if (o && o->info) {
		o->info->path = c->rpath;
		o->info->status = c->status;
		o->info->latency_ns = c->latency_ns;
		o->info->late = c->late;
	}
	return rc;
}

/* Runs a call that returns no value. */
static int op_run_free(rdmem_t *h, struct rdmem_rpc *c, const struct rdmem_opts *o)
{
	int rc = op_run(h, c, o);

	rdmem_rpc_free(c);
	return rc;
}

/* Runs a call whose reply value, if any, is returned malloc'd in *out. */
static int op_run_value(rdmem_t *h, struct rdmem_rpc *c, void **out, uint32_t *len,
			const struct rdmem_opts *o)
{
	int rc = op_run(h, c, o);

	if (rc) {
		rdmem_rpc_free(c);
		/* Defined on every error, so free(*out) is always safe (a caller
		 * reusing its pointer after a failed call freed it twice). */
		*out = NULL;
		if (len)
			*len = 0;
		return rc;
	}
	*out = c->rval;
	if (len)
		*len = c->rlen;
	return 0;
}

/* One call carrying key and value; with out, its reply value malloc'd in
 * *out (as op_run_value), else the reply is dropped. */
static int op_call(rdmem_t *h, uint16_t op, const void *key, uint32_t key_len, const void *val,
		   uint32_t val_len, void **out, uint32_t *out_len, const struct rdmem_opts *o)
{
	struct rdmem_rpc c;

	rdmem_rpc_init(&c, op);
	c.key = key;
	c.key_len = key_len;
	c.val = val;
	c.val_len = val_len;
	return out ? op_run_value(h, &c, out, out_len, o) : op_run_free(h, &c, o);
}

int rdmem_ping(rdmem_t *h, const struct rdmem_opts *o)
{
	return op_call(h, RDMEM_OP_PING, NULL, 0, NULL, 0, NULL, NULL, o);
}

int rdmem_local_ping(rdmem_t *h, const struct rdmem_opts *o)
{
	return op_call(h, RDMEM_SHM_OP_LOCAL_PING, NULL, 0, NULL, 0, NULL, NULL, o);
}

int rdmem_echo(rdmem_t *h, const void *in, uint32_t len, void **out, uint32_t *out_len,
	       const struct rdmem_opts *o)
{
	return op_call(h, RDMEM_OP_ECHO, NULL, 0, in, len, out, out_len, o);
}

int rdmem_put(rdmem_t *h, const void *key, uint32_t key_len, const void *val, uint32_t val_len,
	      const struct rdmem_opts *o)
{
	return op_call(h, RDMEM_OP_KV_PUT, key, key_len, val, val_len, NULL, NULL, o);
}

int rdmem_get(rdmem_t *h, const void *key, uint32_t key_len, void **val, uint32_t *len,
	      const struct rdmem_opts *o)
{
	return op_call(h, RDMEM_OP_KV_GET, key, key_len, NULL, 0, val, len, o);
}

int rdmem_get_into(rdmem_t *h, const void *key, uint32_t key_len, void *buf, uint32_t cap,
		   uint32_t *len, const struct rdmem_opts *o)
{
	static uint8_t none; /* buf NULL: room for nothing, never a malloc'd reply */
	struct rdmem_rpc c;
	int rc;

	rdmem_rpc_init(&c, RDMEM_OP_KV_GET);
	c.key = key;
	c.key_len = key_len;
	c.rbuf = buf ? buf : &none;
	c.rcap = buf ? cap : 0;
	rc = op_run(h, &c, o);
	if (rc == 0 || rc == -ENOBUFS)
		*len = c.rlen;
	rdmem_rpc_free(&c);
	return rc;
}

int rdmem_del(rdmem_t *h, const void *key, uint32_t key_len, const struct rdmem_opts *o)
{
	return op_call(h, RDMEM_OP_KV_DEL, key, key_len, NULL, 0, NULL, NULL, o);
}

static void op_blob_free(void **blob)
{
	free(*blob);
	*blob = NULL;
}

/* The end of a call whose reply is a blob: -EPROTO (and the blob freed)
 * when the reply failed its check. */
static int op_blob_checked(int bad, void **blob)
{
	if (bad)
		op_blob_free(blob);
	return bad ? -EPROTO : 0;
}

int rdmem_mget_value(const struct rdmem_mget *m, uint32_t i, const void **data, uint32_t *len)
{
	uint32_t flags;

	rdmem_blob_array_get(&m->arr, i, data, len, &flags);
	return (flags & RDMEM_BLOB_PRESENT) != 0;
}

void rdmem_mget_free(struct rdmem_mget *m)
{
	op_blob_free(&m->blob);
}

/* Builds the request blob: an ARRAY of the n keys. */
int rdmem_mget_request(const char *const *keys, const uint32_t *key_lens, uint32_t n, void **blob,
		       uint32_t *len)
{
	struct rdmem_blob_writer w = { NULL, 0, 0 };
	uint64_t bytes = 0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		if (key_lens[i] > RDMEM_MAX_KEY)
			return -EINVAL;
		bytes += key_lens[i];
	}
	bytes = rdmem_blob_array_size(n, bytes);
	if (bytes > UINT32_MAX)
		return -E2BIG;
	*blob = malloc((size_t)bytes);
	if (!*blob)
		return -ENOMEM;
	/* Sized exactly above, so neither call can run out of room. */
	if (rdmem_blob_array_begin(&w, *blob, bytes, n))
		goto fail;
	for (i = 0; i < n; i++)
		if (rdmem_blob_array_set(&w, i, keys[i], key_lens[i], RDMEM_BLOB_PRESENT))
			goto fail;
	*len = rdmem_blob_finish(&w);
	return 0;
fail:
	free(*blob);
	return -E2BIG;
}

int rdmem_mget(rdmem_t *h, const char *const *keys, const uint32_t *key_lens, uint32_t n,
	       struct rdmem_mget *out, const struct rdmem_opts *o)
{
	struct rdmem_rpc c;
	void *req;
	uint32_t req_len;
	int rc;

	memset(out, 0, sizeof(*out));
	if (n == 0)
		return -EINVAL;
	rc = rdmem_mget_request(keys, key_lens, n, &req, &req_len);
	if (rc)
		return rc;
	rdmem_rpc_init(&c, RDMEM_OP_KV_MGET);
	c.val = req;
	c.val_len = req_len;
	c.aux = n;
	rc = op_run_value(h, &c, &out->blob, &out->len, o);
	free(req);
	if (rc)
		return rc;
	return op_blob_checked(rdmem_blob_array_open(out->blob, out->len, &out->arr) ||
				   out->arr.count != n,
			       &out->blob);
}

void rdmem_profile_free(struct rdmem_profile *p)
{
	op_blob_free(&p->blob);
}

int rdmem_profile(rdmem_t *h, uint64_t id, struct rdmem_profile *out, const struct rdmem_opts *o)
{
	struct rdmem_rpc c;
	char key[24];
	int rc, n = snprintf(key, sizeof(key), "%" PRIu64, id);

	memset(out, 0, sizeof(*out));
	rdmem_rpc_init(&c, RDMEM_OP_PROFILE);
	c.key = key;
	c.key_len = (uint32_t)n;
	c.args[0] = id;
	rc = op_run_value(h, &c, &out->blob, &out->len, o);
	if (rc)
		return rc;
	return op_blob_checked(rdmem_blob_profile_open(out->blob, out->len, &out->view) ||
				   out->view.id != id,
			       &out->blob);
}

int rdmem_large_get(rdmem_t *h, const char *spec, void **val, uint32_t *len,
		    const struct rdmem_opts *o)
{
	uint64_t size;

	if (!spec || rdmem_big_parse(spec, strlen(spec), &size))
		return -EINVAL;
	return op_call(h, RDMEM_OP_LARGE_GET, spec, (uint32_t)strlen(spec), NULL, 0, val, len, o);
}

int rdmem_large_verify(const char *spec, const void *val, uint32_t len)
{
	uint64_t size;

	if (!spec || rdmem_big_parse(spec, strlen(spec), &size))
		return -EINVAL;
	if (size != len || rdmem_big_verify(size, 0, val, len) != len)
		return -EBADMSG;
	return 0;
}

uint64_t rdmem__random_id(void)
{
	static _Atomic uint64_t fallback;
	uint64_t id = 0;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id) || !id)
		id = (rdmem_now_ns() ^ ((uint64_t)getpid() << 40)) +
		     atomic_fetch_add(&fallback, 0x9e3779b97f4a7c15ull);
	return id;
}

/* Sends chunk [off, off + n) of an upload; the last one carries the hash. */
static int op_image_chunk(rdmem_t *h, const char *key, const void *data, uint64_t len, uint64_t id,
			  uint64_t off, uint32_t n, uint64_t hash, const struct rdmem_opts *o)
{
	struct rdmem_image_args args = { id, (uint32_t)off, (uint32_t)len, 0 };
	struct rdmem_rpc c;

	rdmem_rpc_init(&c, RDMEM_OP_IMAGE_CHUNK);
	c.flags = (uint16_t)((off == 0 ? RDMEM_F_IMG_INIT : 0) |
			     (off + n == len ? RDMEM_F_IMG_COMMIT : 0));
	if (off + n == len)
		args.hash = hash;
	memcpy(c.args, &args, sizeof(c.args));
	c.key = key;
	c.key_len = (uint32_t)strlen(key);
	c.val = (const uint8_t *)data + off;
	c.val_len = n;
	return op_run_free(h, &c, o);
}

int rdmem_image_put(rdmem_t *h, const char *key, const void *data, uint64_t len,
		    struct rdmem_image_opts *io, const struct rdmem_opts *o)
{
	uint32_t chunk = io && io->chunk_size ? io->chunk_size : RDMEM_IMAGE_CHUNK_DEFAULT;
	uint32_t max = rdmem_max_value(h);
	uint64_t id = rdmem__random_id(), hash = RDMEM_HASH_INIT, off = 0;
	int rc;

	if (!key || !*key || strlen(key) > RDMEM_MAX_KEY || (len && !data))
		return -EINVAL;
	if (len > UINT32_MAX)
		return -E2BIG;
	if (!max)
		return -ECONNREFUSED;
	if (chunk > max)
		return -E2BIG;
	if (io)
		io->upload_id = id;
	do {
		uint32_t n = (uint32_t)RDMEM_MIN((uint64_t)chunk, len - off);

		hash = rdmem_hash_update(hash, (const uint8_t *)data + off, n);
		rc = op_image_chunk(h, key, data, len, id, off, n, hash, o);
		if (rc)
			return rc;
		off += n;
		if (io && io->progress)
			io->progress(io->arg, off, len);
	} while (off < len);
	return 0;
}

/* Text (or JSON) reply ops: *text malloc'd and NUL-terminated. */
static int op_text(rdmem_t *h, uint16_t op, int json, const char *arg, char **text, uint32_t *len,
		   const struct rdmem_opts *o)
{
	struct rdmem_rpc c;

	rdmem_rpc_init(&c, op);
	c.flags = json ? RDMEM_F_JSON : 0;
	if (arg) {
		c.key = arg;
		c.key_len = (uint32_t)strlen(arg);
	}
	return op_run_value(h, &c, (void **)text, len, o);
}

int rdmem_stats(rdmem_t *h, int json, char **text, uint32_t *len, const struct rdmem_opts *o)
{
	return op_text(h, RDMEM_OP_STATS, json, NULL, text, len, o);
}

int rdmem_agent_stats(rdmem_t *h, int json, char **text, uint32_t *len, const struct rdmem_opts *o)
{
	return op_text(h, RDMEM_SHM_OP_AGENT_STATS, json, NULL, text, len, o);
}

int rdmem_agent_ctl(rdmem_t *h, const char *cmd, char **reply, uint32_t *len,
		    const struct rdmem_opts *o)
{
	if (!cmd || !*cmd || strlen(cmd) > RDMEM_MAX_KEY)
		return -EINVAL;
	return op_text(h, RDMEM_SHM_OP_AGENT_CTL, 0, cmd, reply, len, o);
}
