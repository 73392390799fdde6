/* dataplane.c - publication into a peer's slot (descriptor and payload in
 * one WRITE WITH IMMEDIATE), and taking a message out of our own. */
#include "fabric/dataplane.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

static void rdmem_dp_write(struct rdmem_wr *wr, uint8_t op, uint64_t raddr, uint32_t rkey,
			   uint32_t inline_max)
{
	uint64_t total = 0;
	int i;

	for (i = 0; i < wr->nsge; i++)
		total += wr->sge[i].len;
	wr->op = op;
	wr->remote_addr = raddr;
	wr->rkey = rkey;
	/* Inline copies the bytes into the WQE now: no DMA read of our buffer later. */
	wr->flags = total <= inline_max ? RDMEM_WR_INLINE : 0;
}

/* A piece directly after the last one, in the same registration: the two
 * are one gather entry (a server's reply staging holds its descriptor and
 * payload back to back). */
static int rdmem_dp_extends(const struct rdmem_wr *wr, const struct rdmem_sge *g)
{
	const struct rdmem_sge *last = &wr->sge[wr->nsge - 1];

	return last->lkey == g->lkey && last->addr + last->len == g->addr &&
	       (uint64_t)last->len + g->len <= UINT32_MAX;
}

static void rdmem_dp_gather(struct rdmem_wr *wr, const struct rdmem_sge *g)
{
	if (wr->nsge && rdmem_dp_extends(wr, g))
		wr->sge[wr->nsge - 1].len += g->len;
	else
		wr->sge[wr->nsge++] = *g;
}

/* Pieces the payload takes as gather entries after the descriptor's. */
static int rdmem_dp_pieces(const struct rdmem_dp_msg *m, uint32_t desc_lkey)
{
	struct rdmem_wr probe = { .nsge = 1 };
	int i;

	probe.sge[0] = (struct rdmem_sge){ (uintptr_t)m->desc, RDMEM_DESC_SIZE, desc_lkey };
	for (i = 0; i < m->npayload; i++) {
		if (probe.nsge == RDMEM_FAB_MAX_SGE && !rdmem_dp_extends(&probe, &m->payload[i]))
			return RDMEM_FAB_MAX_SGE; /* more than fit: the count no longer matters */
		rdmem_dp_gather(&probe, &m->payload[i]);
	}
	return probe.nsge - 1;
}

/* Clears a WR's header; its gather list is read only up to nsge, so the
 * entries past it are left as they are (zeroing the whole WR, 16 entries,
 * cost ~23 instructions a message). */
static void rdmem_dp_reset(struct rdmem_wr *wr)
{
	wr->wr_id = 0;
	wr->op = 0;
	wr->flags = 0;
	wr->nsge = 0;
	wr->imm = 0;
	wr->remote_addr = 0;
	wr->rkey = 0;
}

int rdmem_dp_build(struct rdmem_conn *c, const struct rdmem_dp_msg *m, struct rdmem_wr *wr)
{
	uint32_t inl = rdmem_fab_max_inline(c), max_sge = rdmem_fab_max_send_sge(c);
	struct rdmem_sge desc = { (uintptr_t)m->desc, RDMEM_DESC_SIZE, m->desc_lkey };
	int n = 0, i;

	rdmem_dp_reset(wr);
	m->desc->state = RDMEM_RING_READY;
	/* The staging copy goes out as wire bytes; a NIC reads it after we post. */
	rdmem_desc_to_wire(m->desc);
	/* Pieces are counted (a probe gather) only when they might not fit:
	 * the common message, a descriptor and up to two pieces, never does
	 * where the connection gathers 3 or more. */
	if (1 + m->npayload > (int)max_sge && 1 + rdmem_dp_pieces(m, m->desc_lkey) > (int)max_sge) {
		/* Too many pieces for one gather list: the payload first, on
		 * its own, and the descriptor after it (RC keeps the order). */
		rdmem_dp_reset(&wr[1]);
		for (i = 0; i < m->npayload; i++)
			rdmem_dp_gather(&wr[n], &m->payload[i]);
		rdmem_dp_write(&wr[n++], RDMEM_WR_WRITE, m->slot_addr + RDMEM_DESC_SIZE, m->rkey,
			       inl);
		rdmem_dp_gather(&wr[n], &desc);
	} else {
		/* The whole message in the one WR that carries the immediate:
		 * the peer acts on its completion, which follows its placement. */
		rdmem_dp_gather(&wr[n], &desc);
		for (i = 0; i < m->npayload; i++)
			rdmem_dp_gather(&wr[n], &m->payload[i]);
	}
	wr[n].imm = m->slot;
	rdmem_dp_write(&wr[n++], RDMEM_WR_WRITE_IMM, m->slot_addr, m->rkey, inl);
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
