/* dataplane.c - publication into a peer's ring slot (payload, then the
 * descriptor with the immediate), and taking a message out of our own. */
#include "fabric/dataplane.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

static void rdmem_dp_write(struct rdmem_wr *wr, uint8_t op, uint64_t raddr, uint32_t rkey,
			   uint32_t inline_max)
{
	uint32_t total = 0;
	int i;

	for (i = 0; i < wr->nsge; i++)
		total += wr->sge[i].len;
	wr->op = op;
	wr->remote_addr = raddr;
	wr->rkey = rkey;
	/* Inline copies the bytes into the WQE now: no DMA read of our buffer later. */
	wr->flags = total <= inline_max ? RDMEM_WR_INLINE : 0;
}

int rdmem_dp_build(struct rdmem_conn *c, const struct rdmem_dp_msg *m, struct rdmem_wr *wr)
{
	uint64_t slot_addr = m->ring.addr + (uint64_t)m->slot * RDMEM_DESC_SIZE;
	uint32_t inl = rdmem_fab_max_inline(c);
	uintptr_t d = (uintptr_t)m->desc;
	int n = 0, i;

	memset(wr, 0, RDMEM_DP_MAX_WRS * sizeof(*wr));
	m->desc->state = RDMEM_RING_READY;
	/* The staging copy goes out as wire bytes; a NIC reads it after we post. */
	rdmem_desc_to_wire(m->desc);
	if (m->npayload) {
		for (i = 0; i < m->npayload; i++)
			wr[n].sge[i] = m->payload[i];
		wr[n].nsge = (uint8_t)m->npayload;
		rdmem_dp_write(&wr[n++], RDMEM_WR_WRITE, m->payload_addr, m->payload_rkey, inl);
	}
	/* The whole descriptor, state word included, in the one WR that carries
	 * the immediate: the peer acts on the immediate's completion, which
	 * follows the placement of this WR and (RC, in order) the payload's. */
	wr[n].sge[0] = (struct rdmem_sge){ d, RDMEM_DESC_SIZE, m->desc_lkey };
	wr[n].nsge = 1;
	wr[n].imm = m->slot;
	rdmem_dp_write(&wr[n++], RDMEM_WR_WRITE_IMM, slot_addr, m->ring.rkey, inl);
	return n;
}

int rdmem_dp_publish(struct rdmem_conn *c, const struct rdmem_dp_msg *m)
{
	struct rdmem_wr wr[RDMEM_DP_MAX_WRS];
	int ret = rdmem_fab_post(c, wr, rdmem_dp_build(c, m, wr));

	if (ret < 0) /* nothing went out: the caller may retry with it */
		rdmem_desc_from_wire(m->desc);
	return ret;
}

int rdmem_dp_take(struct rdmem_desc *slot, struct rdmem_desc *out)
{
	_Atomic uint32_t *state = (_Atomic uint32_t *)&slot->state;

	/* A check, not the synchronisation: the immediate that led us here was
	 * taken after the descriptor was placed (on a NIC, RC placement before
	 * completion; in the shm backend, the acquire of the receive count that
	 * pairs with the sender's release after its copies). A READY word is
	 * what tells a duplicate or stray immediate from a message. */
	if (rdmem_le32(atomic_load_explicit(state, memory_order_acquire)) != RDMEM_RING_READY)
		return -EAGAIN;
	memcpy(out, slot, sizeof(*out));
	rdmem_desc_from_wire(out); /* the copy is what we validate, in host order */
	/* Only we write the slot until we answer, so relaxed is enough. */
	atomic_store_explicit(state, rdmem_le32(RDMEM_RING_FREE), memory_order_relaxed);
	return 0;
}
