/* dataplane.h - the ring/slot protocol both ends of an RDMA session speak.
 *
 * Publishing a message into the peer's ring slot is state-last: the payload
 * (gathered from up to RDMEM_FAB_MAX_SGE local buffers), then descriptor
 * bytes 4..63, then the 4-byte state word as a WRITE WITH IMMEDIATE whose
 * immediate is the slot index. The three WRs go out in one post, in order,
 * so a peer that sees READY, or reaps the immediate, sees everything before.
 * Taking a message is the mirror: acquire-load READY, copy the descriptor
 * out (the copy is what gets validated), mark the slot FREE.
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

/* Posts the message; -EAGAIN when the send queue has no room (nothing posted). */
int rdmem_dp_publish(struct rdmem_conn *c, const struct rdmem_dp_msg *m);

/* Takes the message in a slot of our ring: 0 and a private copy, or -EAGAIN
 * when the slot is not READY (a stray or duplicate immediate). */
int rdmem_dp_take(struct rdmem_desc *slot, struct rdmem_desc *out);

#endif
