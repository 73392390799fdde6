/* frame.h - TCP framing of RDMemRPC calls.
 *
 * A frame is one 64-byte struct rdmem_desc whose state is RDMEM_FRAME_MAGIC,
 * followed by key_len key bytes and val_len value bytes (replies carry no
 * key). Stream buffers have no alignment, so the parser copies the descriptor
 * out (converting it from wire byte order) before reading it, and it judges the header before anyone allocates
 * for the payload.
 */
#ifndef RDMEM_FABRIC_TCP_FRAME_H
#define RDMEM_FABRIC_TCP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "rdmem/wire.h"

/*
 * Payload bytes a receiver is willing to read and throw away to answer a
 * well-formed but refused request with a status instead of closing. Anything
 * longer (a 4 GiB length prefix) is treated as garbage: the connection closes.
 */
#define RDMEM_FRAME_DRAIN_LIMIT (2ull * RDMEM_MAX_VALUE_LIMIT)

enum rdmem_frame_kind {
	RDMEM_FRAME_NEED,   /* incomplete: `need` more bytes are required */
	RDMEM_FRAME_OK,	    /* a whole valid frame is in the buffer */
	RDMEM_FRAME_REJECT, /* sane header, refused request: skip `len` bytes, reply `status` */
	RDMEM_FRAME_BAD,    /* not a frame or an absurd length: close the connection */
};

struct rdmem_frame {
	struct rdmem_desc desc; /* copied out of the stream (valid from REJECT on) */
	uint64_t len;		/* whole frame: header + payload (+ tag) */
	uint64_t need;		/* NEED: bytes still missing */
	uint16_t status;	/* REJECT: RDMEM_S_BAD_REQUEST or RDMEM_S_TOO_BIG */
	const char *why;	/* REJECT / BAD: for the log line */
};

/*
 * Looks at the start of a receive buffer. For OK, the key starts at
 * buf + RDMEM_DESC_SIZE and the value right after it. For REJECT the header
 * is judged as soon as it is complete, before the payload has arrived, so the
 * caller can drain it without buffering.
 */
enum rdmem_frame_kind rdmem_frame_parse(const void *buf, size_t len, uint32_t max_value,
					struct rdmem_frame *f);

/*
 * The same, on a connection whose frames end in a tag of `tag` bytes
 * (tcp/frame_mac.h): len and need count it.
 */
enum rdmem_frame_kind rdmem_frame_parse_tagged(const void *buf, size_t len, uint32_t max_value,
					       size_t tag, struct rdmem_frame *f);

/* Writes d (host order) at dst as a frame header: wire bytes, no alignment needed. */
void rdmem_frame_put(void *dst, const struct rdmem_desc *d);

/* Fills a reply header for req: magic, op and req_id echoed, the given fields. */
void rdmem_frame_reply_init(struct rdmem_desc *rep, const struct rdmem_desc *req);

#endif
