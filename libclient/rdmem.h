/* rdmem.h - the RDMemRPC client library: librdmem's API and its inline fast path.
 *
 *   rdmem_t *h;                                // pkg-config --cflags --libs rdmem
 *   if (rdmem_open(NULL, &h) == 0) {           // NULL: the agent's "/rdmem"
 *           rdmem_put(h, "k", 1, "v", 1, NULL);
 *           rdmem_close(h);
 *   }
 *
 * Every function returns 0 or -errno: the reply status (rdmem_status_errno())
 * or a local error: -ECONNREFUSED no agent; -ESHUTDOWN the agent stopped or
 * restarted mid-call (the next call re-attaches); -EUSERS every client entry
 * taken; -EDQUOT this user holds its share of them (--clients-per-uid);
 * -EPROTO not an rdmem segment or a malformed reply; -ENOBUFS reply over
 * the caller's buffer (needed length given); rdmem_strerror() says each.
 * A handle serves many threads, rdmem_slots() calls in flight at once; not
 * across fork(). Request formats: enum rdmem_op (rdmem/wire.h). The fast
 * path (claim a slot, write, publish, poll, finish) is inline here for C;
 * librdmem holds the rest and exports the fast path out of line (C++). ABI:
 * rdmem_t is opaque, public fields never move (rules: rdmem_priv.h).
 */
#ifndef RDMEM_CLIENT_H
#define RDMEM_CLIENT_H

/* futex(), OFD locks, CPU affinity: include this first, or -D_GNU_SOURCE. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

/* The one version number: the soname, rdmem.pc and `rdmem --version` read it here. */
#define RDMEM_VERSION_MAJOR 0
#define RDMEM_VERSION_MINOR 3
#define RDMEM_VERSION_PATCH 0

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmem/blob.h"
#include "rdmem/content.h"
#include "rdmem/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RDMEM_DEFAULT_TIMEOUT_MS  5000u
#define RDMEM_IMAGE_CHUNK_DEFAULT (24u << 10)

typedef struct rdmem rdmem_t; /* a handle: opaque, from rdmem_open() */
struct rdmem_att;	      /* one attachment to one agent incarnation */

/* What one call did; filled when struct rdmem_opts.info points here. */
struct rdmem_info {
	uint8_t path;	     /* enum rdmem_path that carried the call (AUTO: local) */
	uint16_t status;     /* wire status of the reply */
	uint64_t latency_ns; /* submit to reply, as the caller saw it */
	int late;	     /* the reply came after the deadline (delivered anyway) */
};

struct rdmem_opts {
	uint8_t path;		 /* enum rdmem_path; RDMEM_PATH_AUTO lets the agent choose */
	uint32_t timeout_ms;	 /* 0: the handle's default */
	struct rdmem_info *info; /* optional out */
};

/* The library's bookkeeping of one call: read and written by it only. */
struct rdmem_rpc_priv {
	struct rdmem_att *att;	/* the attachment the call runs on (a reference) */
	struct rdmem_att *held; /* inplace: the attachment whose slot we still hold */
	uint64_t start_ns, deadline_ns, req_id;
	uint32_t slot, seq;
	int state, owns_rval;
	uint64_t bell_ns; /* when the call last rang the agent's doorbell itself */
};

struct rdmem_rpc {
	/* request: set by the caller before rdmem_submit() */
	uint16_t op; /* enum rdmem_op or enum rdmem_shm_op */
	uint16_t flags;
	uint32_t aux;
	const void *key;
	uint32_t key_len;
	const void *val;
	uint32_t val_len;
	uint64_t args[3];
	uint8_t path;	     /* enum rdmem_path */
	uint32_t timeout_ms; /* 0: the handle's default */
	void *rbuf;	     /* reply value goes here; NULL: a malloc'd copy in rval */
	uint32_t rcap;
	uint8_t inplace; /* no rbuf: rval points into the slot, held until rdmem_rpc_free() */
	/* result: valid once rdmem_poll() returned 1 or rdmem_wait() returned */
	int rc;		 /* 0 or -errno */
	uint16_t status; /* wire status */
	uint16_t rflags;
	uint32_t rlen; /* value bytes (the needed length when rc == -ENOBUFS) */
	/* rbuf, or malloc'd with a NUL after rlen bytes: rdmem_rpc_free(). With
	 * rc == -EHOSTUNREACH: the "host:port" of the server the call could not
	 * reach (an agent with several servers: the one that is down). */
	void *rval;
	uint32_t raux;
	uint64_t rargs[3];
	uint8_t rpath; /* path that carried it */
	int late;
	uint64_t latency_ns;
	union { /* private, with room to grow without changing the size */
		struct rdmem_rpc_priv p_;
		uint64_t reserved_[16];
	};
};

struct rdmem_counters {
	uint64_t calls;
	uint64_t timeouts;    /* calls abandoned at their deadline */
	uint64_t late;	      /* replies found after the deadline, delivered */
	uint64_t shutdowns;   /* calls cut by an agent stop or restart */
	uint64_t reattach;    /* attachments made after the first */
	uint64_t bad_replies; /* sequence or bounds check failed (-EPROTO) */
};

/* MGET result: a validated blob ARRAY, one entry per key asked, in order. */
struct rdmem_mget {
	void *blob;
	uint32_t len;
	struct rdmem_blob_array arr;
};

/* PROFILE result: a validated profile blob; read it with rdmem/blob.h accessors. */
struct rdmem_profile {
	void *blob;
	uint32_t len;
	struct rdmem_profile_view view;
};

struct rdmem_image_opts {
	uint32_t chunk_size; /* 0: RDMEM_IMAGE_CHUNK_DEFAULT; at most rdmem_max_value() */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *arg;
	uint64_t upload_id; /* out: the random id the upload used */
};

const char *rdmem_version(void); /* "MAJOR.MINOR.PATCH" of the library loaded */

/* Attaches to the agent's segment (NULL: "/rdmem"); -ECONNREFUSED: no agent there. */
int rdmem_open(const char *name, rdmem_t **out);
/* Detaches. Every submitted call must have finished (polled or waited). */
void rdmem_close(rdmem_t *h);
void rdmem_set_timeout(rdmem_t *h, uint32_t ms);
uint32_t rdmem_slots(rdmem_t *h);     /* calls one handle can have in flight at once */
uint32_t rdmem_max_value(rdmem_t *h); /* largest value (or image chunk) a call may carry */
void rdmem_get_counters(rdmem_t *h, struct rdmem_counters *out);
const char *rdmem_strerror(int rc);

void rdmem_rpc_init(struct rdmem_rpc *c, uint16_t op);
/* 1 while a submitted call has not been polled or waited to completion. */
int rdmem_rpc_pending(const struct rdmem_rpc *c);
void rdmem_rpc_free(struct rdmem_rpc *c);
/* 0: in flight (poll or wait it); -errno (also in c->rc): it never left. */
int rdmem_submit(rdmem_t *h, struct rdmem_rpc *c);
/* 1 when the call finished (c->rc and the reply fields are set), 0 while in flight. */
int rdmem_poll(rdmem_t *h, struct rdmem_rpc *c);
/* Blocks until the call finishes; returns c->rc. */
int rdmem_wait(rdmem_t *h, struct rdmem_rpc *c);

int rdmem_ping(rdmem_t *h, const struct rdmem_opts *o);
/* Round trip through the ring to the front-door actor only (no server). */
int rdmem_local_ping(rdmem_t *h, const struct rdmem_opts *o);
/* *out: malloc'd copy of what the server echoed (NUL-terminated); free() it. */
int rdmem_echo(rdmem_t *h, const void *in, uint32_t len, void **out, uint32_t *out_len,
	       const struct rdmem_opts *o);
int rdmem_put(rdmem_t *h, const void *key, uint32_t key_len, const void *val, uint32_t val_len,
	      const struct rdmem_opts *o);
/* *val: malloc'd copy of the whole value (NUL after *len bytes); free() it.
 * On any error *val is NULL and *len 0 (every op that returns a malloc'd value). */
int rdmem_get(rdmem_t *h, const void *key, uint32_t key_len, void **val, uint32_t *len,
	      const struct rdmem_opts *o);
/* Into the caller's buffer; -ENOBUFS with *len = the value's length when it does not fit. */
int rdmem_get_into(rdmem_t *h, const void *key, uint32_t key_len, void *buf, uint32_t cap,
		   uint32_t *len, const struct rdmem_opts *o);
int rdmem_del(rdmem_t *h, const void *key, uint32_t key_len, const struct rdmem_opts *o);
int rdmem_mget(rdmem_t *h, const char *const *keys, const uint32_t *key_lens, uint32_t n,
	       struct rdmem_mget *out, const struct rdmem_opts *o);
/* Entry i: returns 1 and its bytes when the key exists, 0 when it is missing. */
int rdmem_mget_value(const struct rdmem_mget *m, uint32_t i, const void **data, uint32_t *len);
void rdmem_mget_free(struct rdmem_mget *m);
/* MGET's request body for rdmem_submit (aux = n), malloc'd; -EINVAL: key over RDMEM_MAX_KEY. */
int rdmem_mget_request(const char *const *keys, const uint32_t *key_lens, uint32_t n, void **blob,
		       uint32_t *len);
int rdmem_profile(rdmem_t *h, uint64_t id, struct rdmem_profile *out, const struct rdmem_opts *o);
void rdmem_profile_free(struct rdmem_profile *p);
/* spec "big:<n>[k|m]": the server's deterministic object; *val malloc'd. */
int rdmem_large_get(rdmem_t *h, const char *spec, void **val, uint32_t *len,
		    const struct rdmem_opts *o);
/* 0 when val is exactly the object spec names, else -EBADMSG (or -EINVAL). */
int rdmem_large_verify(const char *spec, const void *val, uint32_t len);
/* Uploads len bytes as image key in chunks (INIT first, COMMIT with the
 * image's rolling hash last); the server keeps nothing of a failed upload. */
int rdmem_image_put(rdmem_t *h, const char *key, const void *data, uint64_t len,
		    struct rdmem_image_opts *io, const struct rdmem_opts *o);
/* Text (or JSON) replies, *text malloc'd and NUL-terminated: the server's
 * counters, the agent's telemetry, a runtime command for the agent. */
int rdmem_stats(rdmem_t *h, int json, char **text, uint32_t *len, const struct rdmem_opts *o);
int rdmem_agent_stats(rdmem_t *h, int json, char **text, uint32_t *len, const struct rdmem_opts *o);
int rdmem_agent_ctl(rdmem_t *h, const char *cmd, char **reply, uint32_t *len,
		    const struct rdmem_opts *o);
uint64_t rdmem__random_id(void); /* a random nonzero id (image uploads) */

/* Out-of-line halves of the fast path below: not for direct use. */
enum { RDMEM__IDLE = 0, RDMEM__INFLIGHT, RDMEM__DONE };
enum { RDMEM__N_TIMEOUT, RDMEM__N_SHUTDOWN, RDMEM__N_LATE, RDMEM__N_BAD };
void rdmem__count(rdmem_t *h, int which);
void rdmem__att_unmap(struct rdmem_att *a);
int rdmem__submit_begin(rdmem_t *h, struct rdmem_rpc *c);
int rdmem__submit_slow(rdmem_t *h, struct rdmem_rpc *c, int rc);
int rdmem__push_slow(rdmem_t *h, struct rdmem_rpc *c);
int rdmem__poll_slow(rdmem_t *h, struct rdmem_rpc *c);
int rdmem__wait_slow(rdmem_t *h, struct rdmem_rpc *c);
void rdmem__finish_slow(rdmem_t *h, struct rdmem_rpc *c, const struct rdmem_desc *d);

#ifdef __cplusplus
}
#endif

#if !defined(__cplusplus) && !defined(RDMEM_NO_INLINE)
#include "rdmem_fast.h"
#endif

#endif
