/* test_dataplane.c - how a message becomes WRs (fabric/dataplane.c): a
 * descriptor and its payload go as ONE WRITE WITH IMMEDIATE to the peer's
 * slot (layout 4: the payload 64 bytes after the descriptor), inline when
 * the whole message fits the connection's inline size; pieces back to back
 * in one registration are one gather entry; only a payload with more
 * pieces than the connection gathers is two WRs, the payload first. And the
 * slot geometry both ends compute (include/rdmem/layout.h). A connection
 * whose limits the test sets stands in for a device. */
#include <string.h>

#include "check.h"
#include "fabric/dataplane.h"
#include "fabric/fabric_impl.h"
#include "rdmem/layout.h"
#include "rdmem/util.h"

static uint32_t fake_inline = 256, fake_sge = RDMEM_FAB_MAX_SGE;

static uint32_t fake_max_inline(struct rdmem_conn *c)
{
	(void)c;
	return fake_inline;
}

static uint32_t fake_max_send_sge(struct rdmem_conn *c)
{
	(void)c;
	return fake_sge;
}

static const struct rdmem_fab_ops fake_ops = { .name = "fake",
					       .max_inline = fake_max_inline,
					       .max_send_sge = fake_max_send_sge };
static struct rdmem_conn fake = { &fake_ops };

static _Alignas(64) uint8_t staging[4 * 4096];

#define T_SLOT_ADDR 0x7000001000ull
#define T_RKEY	    0x55u
#define T_LKEY	    0x11u

static struct rdmem_dp_msg msg(struct rdmem_desc *d, const struct rdmem_sge *p, int n)
{
	struct rdmem_dp_msg m = { .slot = 9,
				  .desc = d,
				  .desc_lkey = T_LKEY,
				  .slot_addr = T_SLOT_ADDR,
				  .rkey = T_RKEY,
				  .payload = p,
				  .npayload = n };

	return m;
}

/* A small GET's request: descriptor in staging, key elsewhere: one WR,
 * inline, descriptor first, to the slot's start, the immediate the slot. */
static void test_small_message_is_one_inline_wqe(void)
{
	struct rdmem_desc *d = (struct rdmem_desc *)staging;
	struct rdmem_sge key = { (uintptr_t)(staging + 1024), 16, T_LKEY };
	struct rdmem_dp_msg m = msg(d, &key, 1);
	struct rdmem_wr wr[RDMEM_DP_MAX_WRS];

	memset(d, 0, sizeof(*d));
	CHECK_EQ(rdmem_dp_build(&fake, &m, wr), 1);
	CHECK_EQ(wr[0].op, RDMEM_WR_WRITE_IMM);
	CHECK_EQ(wr[0].imm, 9);
	CHECK_EQ(wr[0].remote_addr, T_SLOT_ADDR);
	CHECK_EQ(wr[0].rkey, T_RKEY);
	CHECK_EQ(wr[0].nsge, 2);
	CHECK_EQ(wr[0].sge[0].addr, (uintptr_t)d);
	CHECK_EQ(wr[0].sge[0].len, RDMEM_DESC_SIZE);
	CHECK_EQ(wr[0].sge[1].addr, key.addr);
	CHECK(wr[0].flags & RDMEM_WR_INLINE);
	/* READY travels in wire bytes with the descriptor. */
	CHECK_EQ(rdmem_le32(d->state), RDMEM_RING_READY);
}

/* A reply staged as descriptor + payload back to back: one gather entry. */
static void test_contiguous_pieces_merge(void)
{
	struct rdmem_desc *d = (struct rdmem_desc *)staging;
	struct rdmem_sge val = { (uintptr_t)(staging + RDMEM_DESC_SIZE), 4000, T_LKEY };
	struct rdmem_dp_msg m = msg(d, &val, 1);
	struct rdmem_wr wr[RDMEM_DP_MAX_WRS];

	CHECK_EQ(rdmem_dp_build(&fake, &m, wr), 1);
	CHECK_EQ(wr[0].nsge, 1);
	CHECK_EQ(wr[0].sge[0].len, RDMEM_DESC_SIZE + 4000);
	CHECK(!(wr[0].flags & RDMEM_WR_INLINE)); /* 4064 bytes: over the inline size */
	/* Another registration right after it is not the same entry. */
	val.lkey = T_LKEY + 1;
	CHECK_EQ(rdmem_dp_build(&fake, &m, wr), 1);
	CHECK_EQ(wr[0].nsge, 2);
}

/* No payload (a PING): the descriptor alone, one WR. */
static void test_no_payload(void)
{
	struct rdmem_desc *d = (struct rdmem_desc *)staging;
	struct rdmem_dp_msg m = msg(d, NULL, 0);
	struct rdmem_wr wr[RDMEM_DP_MAX_WRS];

	CHECK_EQ(rdmem_dp_build(&fake, &m, wr), 1);
	CHECK_EQ(wr[0].nsge, 1);
	CHECK_EQ(wr[0].op, RDMEM_WR_WRITE_IMM);
	CHECK(wr[0].flags & RDMEM_WR_INLINE);
}

/* More pieces than one gather list holds: the payload as a WRITE 64 bytes
 * into the slot, then the descriptor with the immediate, in that order. */
static void test_too_many_pieces_is_two_wqes(void)
{
	struct rdmem_desc *d = (struct rdmem_desc *)staging;
	struct rdmem_sge p[2] = { { (uintptr_t)(staging + 4096), 100, T_LKEY },
				  { (uintptr_t)(staging + 8192), 100, T_LKEY } };
	struct rdmem_dp_msg m = msg(d, p, 2);
	struct rdmem_wr wr[RDMEM_DP_MAX_WRS];

	fake_sge = 2; /* a device that gathers two entries */
	CHECK_EQ(rdmem_dp_build(&fake, &m, wr), 2);
	CHECK_EQ(wr[0].op, RDMEM_WR_WRITE);
	CHECK_EQ(wr[0].remote_addr, T_SLOT_ADDR + RDMEM_DESC_SIZE);
	CHECK_EQ(wr[0].nsge, 2);
	CHECK_EQ(wr[1].op, RDMEM_WR_WRITE_IMM);
	CHECK_EQ(wr[1].remote_addr, T_SLOT_ADDR);
	CHECK_EQ(wr[1].nsge, 1);
	CHECK_EQ(wr[1].sge[0].len, RDMEM_DESC_SIZE);
	/* Two entries, the second back to back with the first: fits again. */
	p[1].addr = p[0].addr + p[0].len;
	CHECK_EQ(rdmem_dp_build(&fake, &m, wr), 1);
	CHECK_EQ(wr[0].nsge, 2);
	CHECK_EQ(wr[0].sge[1].len, 200);
	fake_sge = RDMEM_FAB_MAX_SGE;
}

/* Inline exactly up to the connection's size: a descriptor and 192 bytes
 * go in the WQE, one more byte does not. */
static void test_inline_boundary(void)
{
	struct rdmem_desc *d = (struct rdmem_desc *)staging;
	struct rdmem_sge p = { (uintptr_t)(staging + 4096), 192, T_LKEY };
	struct rdmem_dp_msg m = msg(d, &p, 1);
	struct rdmem_wr wr[RDMEM_DP_MAX_WRS];

	CHECK_EQ(rdmem_dp_build(&fake, &m, wr), 1);
	CHECK(wr[0].flags & RDMEM_WR_INLINE);
	p.len = 193;
	CHECK_EQ(rdmem_dp_build(&fake, &m, wr), 1);
	CHECK(!(wr[0].flags & RDMEM_WR_INLINE));
}

/* A device without inline: every WR reads its buffers after the post. */
static void test_no_inline_device(void)
{
	struct rdmem_desc *d = (struct rdmem_desc *)staging;
	struct rdmem_dp_msg m = msg(d, NULL, 0);
	struct rdmem_wr wr[RDMEM_DP_MAX_WRS];

	fake_inline = 0;
	CHECK_EQ(rdmem_dp_build(&fake, &m, wr), 1);
	CHECK(!(wr[0].flags & RDMEM_WR_INLINE));
	fake_inline = 256;
}

/* The geometry: 64-byte aligned slots whatever the payload size, the payload
 * 64 bytes in, and data_off within 32 bits at the ceilings. */
static void test_slot_geometry(void)
{
	CHECK_EQ(rdmem_slot_stride(1024), 1088);
	CHECK_EQ(rdmem_slot_stride(1000), 1088);
	CHECK_EQ(rdmem_slot_stride(64), 128);
	CHECK_EQ(rdmem_slot_data_off(0, 4096), 64);
	CHECK_EQ(rdmem_slot_data_off(3, 4096), 3 * 4160 + 64);
	CHECK(rdmem_slot_data_off(RDMEM_MAX_RING_SLOTS - 1, RDMEM_MAX_SLOT_BYTES) <= UINT32_MAX);
}

int main(void)
{
	rdmem_log_init("test_dataplane", 0);
	RUN(test_small_message_is_one_inline_wqe);
	RUN(test_contiguous_pieces_merge);
	RUN(test_no_payload);
	RUN(test_too_many_pieces_is_two_wqes);
	RUN(test_inline_boundary);
	RUN(test_no_inline_device);
	RUN(test_slot_geometry);
	return check_done();
}
