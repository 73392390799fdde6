/* fuzz_desc.c - descriptor validation on the RDMA paths, where the peer
 * writes descriptors and payload straight into our memory:
 *
 *  - the server taking a request out of its slot (rdmem_dp_take) and
 *    checking it (rdmem_session_check_req, which includes rdmem_desc_check)
 *    against the session's geometry, then reading the payload from an
 *    exact-size region of slots (ASan sees any byte outside it);
 *  - the server's check of the agent's hello (rdmem_session_check_hello) and
 *    the agent's check of the server's welcome (rdmem_link_check_welcome):
 *    once accepted, every address the other side will compute from them must
 *    stay inside the regions they announced.
 *
 * Input, zero-padded: request geometry (slots, slot_bytes, max_value, slot)
 * and 64 descriptor bytes; the server's ring size, hello length and hello;
 * the agent's ring size, welcome length and welcome.
 */
#include <stddef.h>

#include "agent/link.h"
#include "fabric/dataplane.h"
#include "tcp/frame.h"
#include "server/session.h"
#include "tests/fuzz/fuzz.h"

static const uint32_t max_values[] = { 0, 1, 4096, RDMEM_DEFAULT_MAX_VALUE, RDMEM_MAX_VALUE_LIMIT };

/* What rdmem_desc_check promises, restated from the wire's definitions. */
static int desc_sane(const struct rdmem_desc *d, uint32_t max_value)
{
	return d->op > 0 && d->op < RDMEM_OP__COUNT && d->path < RDMEM_PATH__COUNT &&
	       d->key_len <= RDMEM_MAX_KEY && d->val_len <= max_value;
}

static void fuzz_request(struct fz *in)
{
	/* Small regions keep the exact-size payload allocation cheap. */
	uint32_t slots = 1 + fz_u8(in) % 64, slot_bytes = 1 + fz_u16(in) % 4096;
	uint32_t max_value = max_values[fz_u8(in) % RDMEM_ARRAY_SIZE(max_values)];
	uint32_t slot = fz_u8(in) % slots; /* the server serves only in-range immediates */
	uint64_t area = (uint64_t)slots * rdmem_slot_stride(slot_bytes);
	uint8_t *region = calloc(1, area);
	struct rdmem_desc *d, req, before;
	struct rdmem_frame f;
	uint16_t st;

	FUZZ_CHECK(region);
	d = (struct rdmem_desc *)(region + slot * rdmem_slot_stride(slot_bytes));
	fz_copy(in, d, sizeof(*d));
	before = *d;

	/* Take: only a READY slot yields a copy, and the slot is FREE after. */
	if (rdmem_dp_take(d, &req) < 0) {
		FUZZ_CHECK(before.state != RDMEM_RING_READY);
		FUZZ_CHECK(memcmp(d, &before, sizeof(before)) == 0);
		goto out;
	}
	FUZZ_CHECK(before.state == RDMEM_RING_READY);
	FUZZ_CHECK(memcmp(&req, &before, sizeof(req)) == 0);
	FUZZ_CHECK(d->state == RDMEM_RING_FREE);

	st = rdmem_session_check_req(&req, slot, slots, slot_bytes, max_value);
	FUZZ_CHECK(st == RDMEM_S_OK || st == RDMEM_S_BAD_REQUEST || st == RDMEM_S_TOO_BIG);
	if (rdmem_desc_check(&req, max_value) != RDMEM_S_OK)
		FUZZ_CHECK(st == rdmem_desc_check(&req, max_value));
	if (st == RDMEM_S_OK) {
		FUZZ_CHECK(desc_sane(&req, max_value));
		FUZZ_CHECK(req.data_off == rdmem_slot_data_off(slot, slot_bytes));
		FUZZ_CHECK(req.data_off + rdmem_desc_payload_len(&req) <= area);
		/* The session's call.key and call.val. */
		fz_touch(region + req.data_off, req.key_len);
		fz_touch(region + req.data_off + req.key_len, req.val_len);
	}

	/* The same header as a TCP frame gets the same verdict. */
	req.state = RDMEM_FRAME_MAGIC;
	switch (rdmem_frame_parse(&req, sizeof(req), max_value, &f)) {
	case RDMEM_FRAME_REJECT:
		FUZZ_CHECK(!desc_sane(&req, max_value));
		break;
	case RDMEM_FRAME_BAD:
		FUZZ_CHECK(rdmem_desc_payload_len(&req) > RDMEM_FRAME_DRAIN_LIMIT);
		break;
	default:
		FUZZ_CHECK(desc_sane(&req, max_value));
	}
out:
	free(region);
}

/* The server accepts a hello, then answers slot i at resp.addr + i * slot_stride(resp_bytes)
 * and writes the turn word after the hello's slots. */
static void fuzz_hello(struct fz *in, uint32_t server_slots)
{
	struct rdmem_xchg_hello h;
	size_t len = fz_u8(in) % (sizeof(h) + 8);
	uint64_t i, slots;
	char why[40];

	fz_copy(in, &h, sizeof(h));
	if (rdmem_session_check_hello(&h, len, NULL, why, sizeof(why)) != RDMEM_S_OK)
		return;
	/* A region of 4 GiB or more says RDMEM_REMOTE_LEN_MAX; the rkey bounds it. */
	if (h.resp.len == RDMEM_REMOTE_LEN_MAX)
		return;
	FUZZ_CHECK(len >= sizeof(h) && h.magic == RDMEM_XCHG_MAGIC);
	FUZZ_CHECK(h.ring_slots > 0 && h.ring_slots <= RDMEM_MAX_RING_SLOTS);
	FUZZ_CHECK(h.resp_bytes >= RDMEM_DESC_SIZE);
	slots = RDMEM_MIN(h.ring_slots, server_slots);
	for (i = 0; i < slots; i++) /* reply slot i, descriptor and payload, from resp.addr */
		FUZZ_CHECK((i + 1) * rdmem_slot_stride(h.resp_bytes) <= h.resp.len);
	/* The turn word, after the hello's slots (not the served ones). */
	FUZZ_CHECK(rdmem_turn_off(h.ring_slots, h.resp_bytes) + RDMEM_TURN_BYTES <= h.resp.len);
}

/* The agent accepts a welcome, then writes request slot i at req.addr + i * slot_stride(slot_bytes). */
static void fuzz_welcome(struct fz *in)
{
	struct rdmem_xchg_welcome w;
	uint32_t asked = fz_u16(in) % (RDMEM_MAX_RING_SLOTS + 1);
	size_t len = fz_u8(in) % (sizeof(w) + 8);
	uint32_t resp_bytes;

	fz_copy(in, &w, sizeof(w));
	resp_bytes = RDMEM_DESC_SIZE + fz_u16(in); /* our --resp-bytes */
	if (rdmem_link_check_welcome(&w, len, asked, resp_bytes) != 0)
		return;
	FUZZ_CHECK(w.resp_stride == rdmem_slot_stride(resp_bytes) && w.eager_bytes <= resp_bytes);
	FUZZ_CHECK(w.obj_max <= w.objpool_bytes);
	FUZZ_CHECK(w.objpool.addr + w.objpool_bytes >= w.objpool.addr);
	FUZZ_CHECK(len >= sizeof(w) && w.magic == RDMEM_XCHG_MAGIC);
	FUZZ_CHECK(w.ring_slots > 0 && w.ring_slots <= asked);
	FUZZ_CHECK(w.object_ttl_ms >= RDMEM_MIN_OBJECT_TTL_MS);
	FUZZ_CHECK(w.max_value <= RDMEM_MAX_VALUE_LIMIT && w.slot_bytes >= RDMEM_DESC_SIZE);
	/* desc.data_off is 32-bit on the wire: it must not wrap. */
	FUZZ_CHECK(rdmem_slot_data_off(w.ring_slots - 1, w.slot_bytes) <= UINT32_MAX);
	FUZZ_CHECK((uint64_t)w.ring_slots * rdmem_slot_stride(w.slot_bytes) <= w.req.len ||
		   w.req.len == RDMEM_REMOTE_LEN_MAX);
	FUZZ_CHECK(sizeof(struct rdmem_ctrl) <= w.ctrl.len);
	/* Remote ranges the agent addresses must not wrap its 64-bit arithmetic. */
	FUZZ_CHECK(w.req.addr + w.req.len >= w.req.addr);
	FUZZ_CHECK(w.objpool.addr + w.objpool.len >= w.objpool.addr);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = fz_init(data, size);
	uint32_t server_slots;

	fuzz_request(&in);
	server_slots = 1 + fz_u16(&in) % RDMEM_MAX_RING_SLOTS;
	fuzz_hello(&in, server_slots);
	fuzz_welcome(&in);
	return 0;
}
