/* frame_mac.h - per-frame MACs on a TCP connection that proved the shared
 * secret (include/rdmem/auth.h).
 *
 * Once AUTH has succeeded, every frame in both directions is followed by a
 * RDMEM_FRAME_TAG-byte tag: keyed BLAKE2b-128 over the 64-bit little-endian
 * sequence number of the frame in its direction (0 for the first frame after
 * AUTH), the 64 header bytes as sent, and the payload. Each direction has its
 * own key, derived from the secret and both sides' AUTH nonces, so a frame
 * cannot be moved to another connection, replayed, reordered, dropped
 * (the next one fails) or reflected back to its sender. The sequence numbers
 * are implicit: both ends count. A frame whose tag fails closes the
 * connection. Integrity only: payloads still travel in the clear.
 */
#ifndef RDMEM_TCP_FRAME_MAC_H
#define RDMEM_TCP_FRAME_MAC_H

#include <stddef.h>
#include <stdint.h>

#define RDMEM_FRAME_TAG	    16 /* bytes after each frame's payload */
#define RDMEM_FRAME_MAC_KEY 32

/* One connection's keys and the receive side's running check; opaque. */
struct rdmem_frame_mac;

/* NULL on out of memory. tx signs what we send, rx checks what we receive. */
struct rdmem_frame_mac *rdmem_frame_mac_new(const uint8_t tx_key[RDMEM_FRAME_MAC_KEY],
					    const uint8_t rx_key[RDMEM_FRAME_MAC_KEY]);
void rdmem_frame_mac_free(struct rdmem_frame_mac *m);
/*
 * A TCP connection's keys after AUTH (rdmem_auth_tcp_keys): the agent's side
 * (server == 0) or the server's; nonces as on the wire. NULL on out of memory.
 */
struct rdmem_auth;
struct rdmem_frame_mac *rdmem_frame_mac_tcp(const struct rdmem_auth *a, uint64_t agent_nonce,
					    uint64_t server_nonce, int server);

/* The tag of an outgoing frame: hdr is its 64 wire bytes, payload in up to two pieces. */
void rdmem_frame_mac_sign(const struct rdmem_frame_mac *m, uint64_t seq, const void *hdr,
			  const void *p1, size_t l1, const void *p2, size_t l2,
			  uint8_t tag[RDMEM_FRAME_TAG]);

/*
 * Checking an incoming frame as its bytes arrive: begin() at its header,
 * then absorb() the stream (payload bytes, then the tag) in pieces of any
 * size; absorb returns how many bytes belonged to this frame. Once done(),
 * verify() gives 0, or -EBADMSG for a wrong tag (constant time).
 */
void rdmem_frame_mac_begin(struct rdmem_frame_mac *m, uint64_t seq, const void *hdr,
			   uint64_t payload_len);
size_t rdmem_frame_mac_absorb(struct rdmem_frame_mac *m, const void *p, size_t n);
int rdmem_frame_mac_done(const struct rdmem_frame_mac *m);
int rdmem_frame_mac_verify(struct rdmem_frame_mac *m);

#endif
