/* dataplane.h - the ring/slot protocol both ends of an RDMA session speak.
 *
 * Publishing a message into the peer's ring slot is at most two WRs in one
 * post: the payload (gathered from up to RDMEM_FAB_MAX_SGE local buffers) as
 * a WRITE, if there is one, then the 64-byte descriptor, state word READY
 * included, as a WRITE WITH IMMEDIATE whose immediate is the slot index
 * (inline where the device allows 64 bytes). The peer acts on the
 * immediate's completion, never on a polled state word: RC places a WR's
 * bytes before its completion and executes one QP's WRs in order, so the
 * completion proves descriptor and payload are in place. (Three WRs before,
 * the state word last on its own; a memory-polling reader needed that, and
 * neither end is one.) Taking a message: acquire-load READY as a check,
 * copy the descriptor out (the copy is what gets validated), mark it FREE.
 */
#ifndef RDMEM_FABRIC_DATAPLANE_H
#define RDMEM_FABRIC_DATAPLANE_H

#include <stdint.h>

#include "rdmem/fabric.h"
#include "rdmem/layout.h"

struct rdmem_dp_msg {
	uint32_t slot;
	struct rdmem_desc *desc; /* local staging copy inside a registration */
	uint32_t desc_lkey;
	struct rdmem_remote ring; /* the peer's ring: slot i at ring.addr + i * 64 */
	const struct rdmem_sge *payload;
	int npayload;
	uint64_t payload_addr; /* where the payload goes in the peer's region */
	uint32_t payload_rkey;
};

#define RDMEM_DP_MAX_WRS 2 /* WRs of one message */

/* Fills wr[] with the message's WRs (READY set, descriptor in wire bytes)
 * and returns how many: 1 or 2. Posting them is the caller's, possibly with
 * other messages' in the same post (one doorbell for a batch); until then
 * the descriptor and payload buffers must stay as they are. */
int rdmem_dp_build(struct rdmem_conn *c, const struct rdmem_dp_msg *m, struct rdmem_wr *wr);

/* Builds and posts the message; -EAGAIN when the send queue has no room
 * (nothing posted, the descriptor back in host order). */
int rdmem_dp_publish(struct rdmem_conn *c, const struct rdmem_dp_msg *m);

/* Takes the message in a slot of our ring: 0 and a private copy, or -EAGAIN
 * when the slot is not READY (a stray or duplicate immediate). */
int rdmem_dp_take(struct rdmem_desc *slot, struct rdmem_desc *out);

#endif
