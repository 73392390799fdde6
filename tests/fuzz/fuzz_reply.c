/* fuzz_reply.c - the agent's checks of a hostile server's reply on the RDMA
 * paths (rdmem_rdma_reply_fits, agent/rdma.c) before the reply's bytes move
 * into the client's slot of the shared segment: an EAGER value copied out of
 * our response slot, or a LAZY object READ from the server's pool.
 *
 * The client's slot payload and our response slot are exact-size heap
 * buffers, and an accepted reply is moved exactly as the agent moves it, so
 * ASan sees any byte outside. Checked for every accepted reply: it lands
 * inside the slot payload where the front door will accept it
 * (rdmem_frontdoor_complete's bounds), a LAZY object lies inside the pool
 * the server announced, and the request's value is left intact unless
 * rdmem_call_reply_overlaps() says the call cannot be retried.
 *
 * Input: max_value index, request op and value length, response slot size,
 * object pool size, then the 64-byte reply descriptor.
 */
#include "agent/rdma.h"
#include "shm/segment.h"
#include "tests/fuzz/fuzz.h"

static const uint32_t max_values[] = { 0, 1000, 4096, 65536, RDMEM_DEFAULT_MAX_VALUE };
static uint8_t request[RDMEM_DEFAULT_MAX_VALUE]; /* the request's value bytes */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet();
	memset(request, 0x5a, sizeof(request));
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = fz_init(data, size);
	uint32_t max_value = max_values[fz_u8(&in) % RDMEM_ARRAY_SIZE(max_values)];
	struct rdmem_agent_call call;
	struct rdmem_shm_geom g;
	struct rdmem_desc d;
	struct rdmem_xchg_welcome w = { 0 };
	uint32_t resp_bytes, off, len, val_off;
	uint8_t *payload, *resp;

	/* The slot the front door gives this call, as it sizes slots. */
	FUZZ_CHECK(rdmem_shm_geom_compute(1, 1, max_value, &g) == 0);
	memset(&call, 0, sizeof(call));
	call.req.op = fz_u16(&in) % (RDMEM_OP__COUNT + 1);
	call.req.val_len = fz_u32(&in) % (max_value + 1); /* the front door checked it */
	call.payload_cap = g.payload_cap;
	resp_bytes = RDMEM_DESC_SIZE + fz_u16(&in); /* the agent's --resp-bytes */
	w.resp_stride = (uint32_t)rdmem_slot_stride(resp_bytes);
	w.eager_bytes =
	    resp_bytes - fz_u16(&in) % (resp_bytes + 1); /* the server's --stage-bytes */
	w.objpool_bytes = fz_u64(&in);			 /* pools pass 4 GiB */
	w.obj_max = fz_u32(&in);
	fz_copy(&in, &d, sizeof(d));

	payload = malloc(call.payload_cap);
	resp = malloc(resp_bytes);
	FUZZ_CHECK(payload && resp);
	call.payload = payload;
	call.key = payload;
	call.val = payload + RDMEM_SHM_VALUE_OFF;
	val_off = RDMEM_SHM_VALUE_OFF;
	memcpy(call.val, request, call.req.val_len);

	if (rdmem_rdma_reply_fits(&d, &call, &w)) {
		off = rdmem_call_reply_off(&call);
		len = d.val_len;
		/* Where rdmem_frontdoor_complete() will look for it. */
		FUZZ_CHECK(off <= call.payload_cap && len <= call.payload_cap - off);
		if (d.flags & RDMEM_F_OBJREF) {
			FUZZ_CHECK(d.args.obj.length == len);
			FUZZ_CHECK(len <= w.obj_max && d.args.obj.offset <= w.objpool_bytes &&
				   len <= w.objpool_bytes - d.args.obj.offset);
			memset(payload + off, 0xa5, len); /* where the READ lands */
		} else {
			FUZZ_CHECK(len <= w.eager_bytes);
			memset(resp, 0xa5, len);
			memcpy(payload + off, resp, len); /* the EAGER copy */
		}
		if (!rdmem_call_reply_overlaps(&call)) {
			/* The request survives for a retry on another path. */
			FUZZ_CHECK(memcmp(payload + val_off, request, call.req.val_len) == 0);
		}
	}
	free(payload);
	free(resp);
	return 0;
}
