/* auth.h - the optional shared secret (--secret-file): proofs of knowing it,
 * exchanged when a session or a TCP connection starts, in both directions.
 *
 * A proof is a truncated HMAC-SHA-256 (libsodium) under a key derived from
 * the secret, over a label naming who proves and everything the prover sends
 * (so a proof cannot be moved onto other parameters), including a nonce whose
 * high 32 bits are the prover's clock: the verifier refuses nonces outside
 * RDMEM_AUTH_WINDOW_S of its own clock and any nonce it has already seen, so
 * a recorded proof cannot be replayed.
 *
 *   RDMA  agent: hello.proof   = mac("agent", hello without proof)
 *         server: welcome.proof = mac("server", agent nonce, welcome without proof)
 *   TCP   first frame AUTH, value struct rdmem_auth_tcp {nonce, mac("agent-tcp", nonce)};
 *         reply value struct rdmem_auth_tcp_reply {server nonce,
 *         mac("server-tcp", agent nonce, server nonce)}; every other op before it
 *         is refused. Every later frame carries a tag under per-connection keys
 *         (rdmem_auth_tcp_keys, tcp/frame_mac.h).
 *   TLS   the same AUTH frame and reply inside the TLS session, but both MACs
 *         are bound to it: mac("agent-tcp-tls", nonce, B) and
 *         mac("server-tcp-tls", agent nonce, server nonce, B), B the session's
 *         exporter value (RDMEM_AUTH_BINDING bytes, tcp/tls.h). Frames carry
 *         no tag there, so the proof is all that shows the secret: bound, a
 *         proof seen elsewhere (a plain AUTH, another session) fails here.
 */
#ifndef RDMEM_AUTH_H
#define RDMEM_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define RDMEM_AUTH_HELLO_MAC                                                                       \
	8 /* a 64-bit MAC: the 54 bytes of RC connect private data
				 * hold no more; forging one takes 2^63 connects */
#define RDMEM_AUTH_MAC	      16
#define RDMEM_AUTH_WINDOW_S   60
#define RDMEM_AUTH_MIN_SECRET 16 /* bytes in the secret file */

struct rdmem_auth_tcp {
	uint64_t nonce;
	uint8_t mac[RDMEM_AUTH_MAC];
};

/* Wire version 3: the server's nonce came in, so each connection gets its own keys. */
struct rdmem_auth_tcp_reply {
	uint64_t nonce; /* random, wire order */
	uint8_t mac[RDMEM_AUTH_MAC];
};

#define RDMEM_AUTH_TCP_KEY 32
#define RDMEM_AUTH_BINDING 32 /* bytes of TLS exporter value a proof is bound to */

struct rdmem_auth;

/* Reads the secret file; refuses short secrets and files others can read. */
int rdmem_auth_load(const char *path, struct rdmem_auth **out);
void rdmem_auth_free(struct rdmem_auth *a);
/* A fresh nonce: our clock in the high half, random bits in the low half. */
uint64_t rdmem_auth_nonce(void);
void rdmem_auth_mac(const struct rdmem_auth *a, const char *label, const void *m1, size_t l1,
		    const void *m2, size_t l2, uint8_t *out, size_t outlen);
/* 0 when mac is right; -EACCES otherwise (constant time). */
int rdmem_auth_verify(const struct rdmem_auth *a, const char *label, const void *m1, size_t l1,
		      const void *m2, size_t l2, const uint8_t *mac, size_t maclen);
/*
 * The frame keys of one TCP connection, from the secret and both AUTH nonces
 * (wire bytes): agent-to-server and server-to-agent, so neither direction's
 * frames verify in the other.
 */
void rdmem_auth_tcp_keys(const struct rdmem_auth *a, uint64_t agent_nonce, uint64_t server_nonce,
			 uint8_t to_server[RDMEM_AUTH_TCP_KEY],
			 uint8_t to_agent[RDMEM_AUTH_TCP_KEY]);
/*
 * The TCP AUTH proofs: the agent's (server 0: over agent_nonce) or the
 * server's reply (server 1: over both nonces), all as wire bytes. binding:
 * NULL on plain TCP (the bytes are as they always were), else the TLS
 * session's exporter value, RDMEM_AUTH_BINDING bytes.
 */
void rdmem_auth_tcp_proof(const struct rdmem_auth *a, int server, uint64_t agent_nonce,
			  uint64_t server_nonce, const uint8_t *binding,
			  uint8_t mac[RDMEM_AUTH_MAC]);
/* 0 when mac is that proof; -EACCES otherwise (constant time). */
int rdmem_auth_tcp_check(const struct rdmem_auth *a, int server, uint64_t agent_nonce,
			 uint64_t server_nonce, const uint8_t *binding,
			 const uint8_t mac[RDMEM_AUTH_MAC]);
/* 64 random bits: the server's AUTH nonce (it needs no clock, only to be new). */
uint64_t rdmem_auth_random64(void);
/* 0 for a nonce inside the time window and never seen before; -EACCES else. */
int rdmem_auth_fresh(struct rdmem_auth *a, uint64_t nonce);

#endif
