/* dataplane.h - the slot protocol both ends of an RDMA session speak.
 *
 * A peer's slot is its 64-byte descriptor followed by its payload
 * (include/rdmem/layout.h), so a message is ONE WRITE WITH IMMEDIATE whose
 * gather list is the descriptor, state word READY included, then the
 * payload's pieces, and whose immediate is the slot index; inline where the
 * device takes the whole message. Only a payload with more pieces than the
 * send queue gathers goes as two WRs in one post: the payload as a WRITE,
 * then the descriptor with the immediate. The peer acts on the immediate's
 * completion, never on a polled state word: RC places a WR's bytes before
 * its completion and executes one QP's WRs in order, so the completion
 * proves descriptor and payload are in place. (Until layout 4 every message
 * with a payload was two WRs, and three before that.) Taking a message:
 * acquire-load READY as a check, copy the descriptor out (the copy is what
 * gets validated), mark it FREE.
 */
#ifndef RDMEM_FABRIC_DATAPLANE_H
#define RDMEM_FABRIC_DATAPLANE_H

#include <stdint.h>

#include "rdmem/fabric.h"
#include "rdmem/layout.h"

struct rdmem_dp_msg {
	uint32_t slot;		 /* the immediate */
	struct rdmem_desc *desc; /* local staging copy inside a registration */
	uint32_t desc_lkey;
	uint64_t slot_addr; /* the peer's slot: descriptor here, payload 64 bytes on */
	uint32_t rkey;
	/* At most RDMEM_FAB_MAX_SGE - 1 pieces (callers send key and value: 2);
	 * more than the connection gathers beside the descriptor take two WRs,
	 * and the payload's own WR must then fit max_send_sge (every RC device
	 * we know gathers 4 or more). */
	const struct rdmem_sge *payload;
	int npayload;
};

#define RDMEM_DP_MAX_WRS 2 /* WRs of one message */
/* Inline size both ends ask their QPs for: a descriptor and 192 payload
 * bytes, so a small GET or PUT goes out whole in its WQE (the device may
 * grant less; the shm fabric takes 256). */
#define RDMEM_DP_INLINE 256

/* Fills wr[] with the message's WRs (READY set, descriptor in wire bytes)
 * and returns how many: 1, or 2 when 1 + npayload pieces exceed what the
 * connection gathers. Posting them is the caller's, possibly with
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
