/* wire.h - the RDMemRPC wire protocol.
 *
 * One 64-byte descriptor is the header of every call on every path: it is a
 * request/response ring slot on the RDMA paths and the frame header on TCP.
 * Fields are fixed-width little-endian on the wire and host order in memory:
 * rdmem_desc_to_wire/from_wire convert where a descriptor enters or leaves
 * the wire (see rdmem/byteorder.h). Nothing here is ever a pointer.
 * Payload lives outside the descriptor: key bytes then value bytes.
 *
 * Header-only: libclient includes it and links nothing but libc.
 */
#ifndef RDMEM_WIRE_H
#define RDMEM_WIRE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "rdmem/byteorder.h"

/* C++ spells it static_assert: headers a C++ program includes use this. */
#ifdef __cplusplus
#define RDMEM_STATIC_ASSERT static_assert
#else
#define RDMEM_STATIC_ASSERT _Static_assert
#endif

/* 2: 64-bit objref.offset, RDMEM_OP_BIND, RDMEM_F_CALL_ID.
 * 3: with a secret, TCP AUTH replies carry the server's nonce and every later
 *    TCP frame a 16-byte MAC (tcp/frame_mac.h); without one, as 2.
 * 4: status RDMEM_S_UNSUPPORTED. TCP frames carry no version: an agent
 *    older than 4 takes that status for a protocol error and redials, so
 *    upgrade agents before servers (RDMA sessions refuse a layout mismatch). */
#define RDMEM_WIRE_VERSION	4
#define RDMEM_DESC_SIZE		64
#define RDMEM_FRAME_MAGIC	0x314d4452u /* "RDM1": desc.state of every TCP frame */
#define RDMEM_MAX_KEY		1024u	    /* bytes; keys are short by contract */
#define RDMEM_DEFAULT_MAX_VALUE (1u << 20)
#define RDMEM_MAX_VALUE_LIMIT	(64u << 20) /* ceiling for --max-value */
#define RDMEM_DEFAULT_PORT	7471	    /* RDMA; TCP fallback is port + 1 */

/* Request formats (the server's dispatch and librdmem's helpers agree on
 * them): key bytes then value bytes; KV_MGET's value is a blob ARRAY of keys
 * and its reply a blob ARRAY of values (rdmem/blob.h); PROFILE carries the id
 * as decimal text in the key and in args[0]; LARGE_GET's key is
 * "big:<n>[k|m]"; IMAGE_CHUNK's key is the image name, its value the chunk,
 * args the struct rdmem_image_args; STATS and AGENT_STATS take RDMEM_F_JSON;
 * AGENT_CTL's key is the command line. */
enum rdmem_op {
	RDMEM_OP_PING = 1,
	RDMEM_OP_ECHO,
	RDMEM_OP_KV_PUT,
	RDMEM_OP_KV_GET,
	RDMEM_OP_KV_DEL,
	RDMEM_OP_KV_MGET,
	RDMEM_OP_PROFILE,
	RDMEM_OP_LARGE_GET,
	RDMEM_OP_IMAGE_CHUNK,
	RDMEM_OP_RECLAIM,
	RDMEM_OP_STATS,
	RDMEM_OP_AUTH, /* session setup: challenge-response (see include/rdmem/auth.h) */
	/*
	 * Connection setup, first call of an agent on each RDMA session and TCP
	 * connection: binds the agent's identity for exactly-once calls.
	 * Request: args.raw[0] = agent id (random, non-zero, fixed for the
	 * agent's life), aux = the first call id that cannot have reached any
	 * server yet (a server with no window for the agent starts one there:
	 * older ids are answered STALE), args.raw[1] = the server run it bound
	 * to last (0: none; informational: a server starts a new window at
	 * aux whatever run is named).
	 * Reply: aux = the server's window (calls remembered per agent; 0:
	 * none, retries are at-least-once), args.raw[1] = this server run.
	 */
	RDMEM_OP_BIND,
	RDMEM_OP__COUNT
};

/* desc.flags */
enum rdmem_flag {
	RDMEM_F_IMG_INIT = 1u << 0,   /* IMAGE_CHUNK: first chunk, args.image.total valid */
	RDMEM_F_IMG_COMMIT = 1u << 1, /* IMAGE_CHUNK: last chunk, args.image.hash valid */
	RDMEM_F_OBJREF = 1u << 2, /* reply: payload is in the server object pool, see args.obj */
	RDMEM_F_JSON = 1u << 3,	  /* STATS: ask for JSON instead of text */
	RDMEM_F_WANT_OBJREF = 1u << 4, /* request: reply through the object pool (forced LAZY) */
	RDMEM_F_YIELD = 1u << 5,       /* layout 4's hold on a reply; reserved: since layout 5
					* the turn word tells the agent (layout.h) */
	RDMEM_F_CALL_ID = 1u << 6,     /* request of PUT, DEL, IMAGE_CHUNK or RECLAIM: aux is the
				    * agent's call id; a retry with the same id runs once */
};

/* The path a call took; carried in desc.path so the server counts per path. */
enum rdmem_path {
	RDMEM_PATH_AUTO = 0,
	RDMEM_PATH_EAGER,
	RDMEM_PATH_LAZY,
	RDMEM_PATH_BULK,
	RDMEM_PATH_TCP,
	RDMEM_PATH__COUNT
};

/* Status codes on the wire; the C API returns rdmem_status_errno() of them. */
enum rdmem_status {
	RDMEM_S_OK = 0,
	RDMEM_S_NOT_FOUND,   /* -ENOENT */
	RDMEM_S_TOO_BIG,     /* -E2BIG: over a configured cap; never truncated */
	RDMEM_S_BAD_REQUEST, /* -EINVAL */
	RDMEM_S_BUSY,	     /* -EBUSY */
	RDMEM_S_TIMEOUT,     /* -ETIMEDOUT */
	RDMEM_S_STALE,	     /* -ESTALE: old generation or sequence */
	RDMEM_S_UNREACHABLE, /* -EHOSTUNREACH: no path to the server */
	RDMEM_S_IO,	     /* -EIO */
	RDMEM_S_NO_SPACE,    /* -ENOSPC */
	RDMEM_S_MISMATCH,    /* -EBADMSG: image hash differs */
	RDMEM_S_SHUTDOWN,    /* -ESHUTDOWN: peer is stopping */
	RDMEM_S_DENIED,	     /* -EACCES: authentication required or failed */
	RDMEM_S_UNSUPPORTED, /* -EOPNOTSUPP: the server lacks it (images: --image-dir) */
	/* -ENOMEM: the agent's pinned-memory budget (--max-client-mem,
	 * --max-total-mem) left no room for a forced zero-copy path. Only an
	 * agent says it, to its own clients: never on the wire. */
	RDMEM_S_NO_MEMORY,
	RDMEM_S__COUNT
};
/* Statuses a server may send are below this; a peer that sends another
 * breaks the protocol. */
enum { RDMEM_S__WIRE = RDMEM_S_NO_MEMORY };

/* Object reference of a LAZY reply; also one RECLAIM entry. */
struct rdmem_objref {
	uint32_t object_id;  /* index in the server's object table */
	uint32_t length;     /* payload bytes */
	uint64_t offset;     /* byte offset in the object pool area: pools pass 4 GiB */
	uint64_t generation; /* bumped on every reuse of object_id */
};

struct rdmem_image_args {
	uint64_t upload_id; /* chosen by the client, unique per upload */
	uint32_t offset;    /* of this chunk in the image */
	uint32_t total;	    /* image length, valid with RDMEM_F_IMG_INIT */
	uint64_t hash;	    /* rolling hash of the whole image, with COMMIT */
};

struct rdmem_desc {
	uint32_t state;	 /* ring: slot state (READY when sent); TCP: RDMEM_FRAME_MAGIC */
	uint32_t seq;	 /* per-slot sequence, echoed in the reply */
	uint16_t op;	 /* enum rdmem_op */
	uint16_t flags;	 /* enum rdmem_flag */
	uint16_t status; /* reply: enum rdmem_status */
	uint8_t path;	 /* enum rdmem_path the call is travelling on */
	uint8_t reserved0;
	uint16_t key_len;  /* key bytes at the start of the payload */
	uint16_t hint;	   /* request: turn wakes taken (layout.h, RDMEM_TURN_IMM); reply: 0 */
	uint32_t val_len;  /* value bytes after the key */
	uint32_t data_off; /* RDMA: payload offset in the receiver's request slots */
	uint32_t aux;	   /* op-specific small argument */
	uint64_t req_id;   /* caller's tag, echoed in the reply */
	union {
		uint64_t raw[3];
		struct rdmem_objref obj;
		struct rdmem_image_args image;
	} args;
};
RDMEM_STATIC_ASSERT(sizeof(struct rdmem_desc) == RDMEM_DESC_SIZE, "descriptor is one cache line");
RDMEM_STATIC_ASSERT(offsetof(struct rdmem_desc, args) == 40, "args at byte 40");
RDMEM_STATIC_ASSERT(sizeof(struct rdmem_objref) == 24, "objref fills args");
RDMEM_STATIC_ASSERT(sizeof(struct rdmem_image_args) == 24, "image args fill args");

/* Swaps the args union by the member in use, which op and flags (host order) name. */
static inline void rdmem_desc_args_le(struct rdmem_desc *d, unsigned op, unsigned flags)
{
	if (op == RDMEM_OP_IMAGE_CHUNK) {
		RDMEM_LE64_SWAP(d->args.image.upload_id);
		RDMEM_LE32_SWAP(d->args.image.offset);
		RDMEM_LE32_SWAP(d->args.image.total);
		RDMEM_LE64_SWAP(d->args.image.hash);
	} else if (flags & RDMEM_F_OBJREF) {
		RDMEM_LE32_SWAP(d->args.obj.object_id);
		RDMEM_LE32_SWAP(d->args.obj.length);
		RDMEM_LE64_SWAP(d->args.obj.offset);
		RDMEM_LE64_SWAP(d->args.obj.generation);
	} else {
		RDMEM_LE64_SWAP(d->args.raw[0]);
		RDMEM_LE64_SWAP(d->args.raw[1]);
		RDMEM_LE64_SWAP(d->args.raw[2]);
	}
}

static inline void rdmem_desc_head_le(struct rdmem_desc *d)
{
	RDMEM_LE32_SWAP(d->state);
	RDMEM_LE32_SWAP(d->seq);
	RDMEM_LE16_SWAP(d->op);
	RDMEM_LE16_SWAP(d->flags);
	RDMEM_LE16_SWAP(d->status);
	RDMEM_LE16_SWAP(d->key_len);
	RDMEM_LE16_SWAP(d->hint);
	RDMEM_LE32_SWAP(d->val_len);
	RDMEM_LE32_SWAP(d->data_off);
	RDMEM_LE32_SWAP(d->aux);
	RDMEM_LE64_SWAP(d->req_id);
}

/* Host order -> wire bytes, in place: the args member is chosen before op and flags swap. */
static inline void rdmem_desc_to_wire(struct rdmem_desc *d)
{
	rdmem_desc_args_le(d, d->op, d->flags);
	rdmem_desc_head_le(d);
}

/* Wire bytes -> host order, in place: op and flags first, then the args they name. */
static inline void rdmem_desc_from_wire(struct rdmem_desc *d)
{
	rdmem_desc_head_le(d);
	rdmem_desc_args_le(d, d->op, d->flags);
}

/* One RECLAIM entry; its own inverse. */
static inline void rdmem_objref_le(struct rdmem_objref *r)
{
	RDMEM_LE32_SWAP(r->object_id);
	RDMEM_LE32_SWAP(r->length);
	RDMEM_LE64_SWAP(r->offset);
	RDMEM_LE64_SWAP(r->generation);
}

/* A switch, not a designated-initializer table: the header is C++ too. */
static inline int rdmem_status_errno(unsigned status)
{
	switch (status) {
	case RDMEM_S_OK:
		return 0;
	case RDMEM_S_NOT_FOUND:
		return -ENOENT;
	case RDMEM_S_TOO_BIG:
		return -E2BIG;
	case RDMEM_S_BAD_REQUEST:
		return -EINVAL;
	case RDMEM_S_BUSY:
		return -EBUSY;
	case RDMEM_S_TIMEOUT:
		return -ETIMEDOUT;
	case RDMEM_S_STALE:
		return -ESTALE;
	case RDMEM_S_UNREACHABLE:
		return -EHOSTUNREACH;
	case RDMEM_S_IO:
		return -EIO;
	case RDMEM_S_NO_SPACE:
		return -ENOSPC;
	case RDMEM_S_MISMATCH:
		return -EBADMSG;
	case RDMEM_S_SHUTDOWN:
		return -ESHUTDOWN;
	case RDMEM_S_DENIED:
		return -EACCES;
	case RDMEM_S_UNSUPPORTED:
		return -EOPNOTSUPP;
	case RDMEM_S_NO_MEMORY:
		return -ENOMEM;
	default:
		return -EPROTO;
	}
}

/* The inverse, for agents that turn a local failure into a reply status.
 * Servers use it too, so it never gives RDMEM_S_NO_MEMORY (agent-only):
 * -ENOMEM is an I/O error on the wire. */
static inline uint16_t rdmem_errno_status(int err)
{
	switch (err) {
	case 0:
		return RDMEM_S_OK;
	case -ENOENT:
		return RDMEM_S_NOT_FOUND;
	case -E2BIG:
		return RDMEM_S_TOO_BIG;
	case -EBUSY:
		return RDMEM_S_BUSY;
	case -ETIMEDOUT:
		return RDMEM_S_TIMEOUT;
	case -ESTALE:
		return RDMEM_S_STALE;
	case -EHOSTUNREACH:
		return RDMEM_S_UNREACHABLE;
	case -ENOSPC:
		return RDMEM_S_NO_SPACE;
	case -EBADMSG:
		return RDMEM_S_MISMATCH;
	case -ESHUTDOWN:
		return RDMEM_S_SHUTDOWN;
	case -EACCES:
		return RDMEM_S_DENIED;
	case -EOPNOTSUPP:
		return RDMEM_S_UNSUPPORTED;
	case -EINVAL:
		return RDMEM_S_BAD_REQUEST;
	default:
		return RDMEM_S_IO;
	}
}

/* C only: C++ has no designated array initializers. */
#ifndef __cplusplus
static inline const char *rdmem_op_name(unsigned op)
{
	static const char *const names[RDMEM_OP__COUNT] = {
		[RDMEM_OP_PING] = "ping",
		[RDMEM_OP_ECHO] = "echo",
		[RDMEM_OP_KV_PUT] = "put",
		[RDMEM_OP_KV_GET] = "get",
		[RDMEM_OP_KV_DEL] = "del",
		[RDMEM_OP_KV_MGET] = "mget",
		[RDMEM_OP_PROFILE] = "profile",
		[RDMEM_OP_LARGE_GET] = "large_get",
		[RDMEM_OP_IMAGE_CHUNK] = "image_chunk",
		[RDMEM_OP_RECLAIM] = "reclaim",
		[RDMEM_OP_STATS] = "stats",
		[RDMEM_OP_AUTH] = "auth",
		[RDMEM_OP_BIND] = "bind",
	};
	return op > 0 && op < RDMEM_OP__COUNT ? names[op] : "unknown";
}
#endif

static inline const char *rdmem_path_name(unsigned path)
{
	static const char *const names[RDMEM_PATH__COUNT] = { "auto", "eager", "lazy", "bulk",
							      "tcp" };
	return path < RDMEM_PATH__COUNT ? names[path] : "unknown";
}

/*
 * Checks every header field a peer controls before anything is read past it.
 * max_value is the receiver's configured cap. Returns 0 or a status code.
 */
static inline uint16_t rdmem_desc_check(const struct rdmem_desc *d, uint32_t max_value)
{
	if (d->op == 0 || d->op >= RDMEM_OP__COUNT)
		return RDMEM_S_BAD_REQUEST;
	if (d->path >= RDMEM_PATH__COUNT)
		return RDMEM_S_BAD_REQUEST;
	if (d->key_len > RDMEM_MAX_KEY)
		return RDMEM_S_BAD_REQUEST;
	if (d->val_len > max_value)
		return RDMEM_S_TOO_BIG;
	return RDMEM_S_OK;
}

static inline uint64_t rdmem_desc_payload_len(const struct rdmem_desc *d)
{
	return (uint64_t)d->key_len + d->val_len;
}

#endif
