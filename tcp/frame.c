/* frame.c - the incremental TCP frame parser shared by the server loop
 * and the tests: validation first, allocation (by the caller) only after. */
#include "tcp/frame.h"

#include <string.h>

static enum rdmem_frame_kind frame_bad(struct rdmem_frame *f, const char *why)
{
	f->why = why;
	return RDMEM_FRAME_BAD;
}

enum rdmem_frame_kind rdmem_frame_parse(const void *buf, size_t len, uint32_t max_value,
					struct rdmem_frame *f)
{
	return rdmem_frame_parse_tagged(buf, len, max_value, 0, f);
}

enum rdmem_frame_kind rdmem_frame_parse_tagged(const void *buf, size_t len, uint32_t max_value,
					       size_t tag, struct rdmem_frame *f)
{
	uint32_t magic;
	uint64_t payload;

	memset(f, 0, sizeof(*f));
	/* Garbage is recognised from its first four bytes, not after 64. */
	if (len >= sizeof(magic)) {
		memcpy(&magic, buf, sizeof(magic));
		if (rdmem_le32(magic) != RDMEM_FRAME_MAGIC)
			return frame_bad(f, "bad frame magic");
	}
	if (len < RDMEM_DESC_SIZE) {
		f->need = RDMEM_DESC_SIZE - len;
		return RDMEM_FRAME_NEED;
	}
	memcpy(&f->desc, buf, RDMEM_DESC_SIZE);
	rdmem_desc_from_wire(&f->desc);
	payload = rdmem_desc_payload_len(&f->desc);
	if (payload > RDMEM_FRAME_DRAIN_LIMIT)
		return frame_bad(f, "frame length beyond any cap");
	f->len = RDMEM_DESC_SIZE + payload + tag;
	f->status = rdmem_desc_check(&f->desc, max_value);
	if (f->status != RDMEM_S_OK) {
		f->why = f->status == RDMEM_S_TOO_BIG			    ? "value over the cap"
			 : f->desc.op == 0 || f->desc.op >= RDMEM_OP__COUNT ? "unknown op"
			 : f->desc.key_len > RDMEM_MAX_KEY		    ? "key too long"
									    : "bad path";
		return RDMEM_FRAME_REJECT;
	}
	if (len < f->len) {
		f->need = f->len - len;
		return RDMEM_FRAME_NEED;
	}
	return RDMEM_FRAME_OK;
}

void rdmem_frame_reply_init(struct rdmem_desc *rep, const struct rdmem_desc *req)
{
	memset(rep, 0, sizeof(*rep));
	rep->state = RDMEM_FRAME_MAGIC;
	rep->op = req->op;
	rep->seq = req->seq;
	rep->path = req->path;
	rep->req_id = req->req_id;
}

void rdmem_frame_put(void *dst, const struct rdmem_desc *d)
{
	struct rdmem_desc w = *d;

	rdmem_desc_to_wire(&w);
	memcpy(dst, &w, RDMEM_DESC_SIZE); /* stream buffers are unaligned */
}
