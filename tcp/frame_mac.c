/* frame_mac.c - per-frame tags (see tcp/frame_mac.h), with libsodium's
 * BLAKE2b in keyed mode: one hash pass per frame, no hand-written crypto.
 * The keyed start states are made once per connection and copied per frame. */
#include "tcp/frame_mac.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "rdmem/auth.h"
#include "rdmem/byteorder.h"
#include "rdmem/wire.h"

struct rdmem_frame_mac {
	/* libsodium aligns these to 64 bytes: the struct is aligned_alloc'ed. */
	crypto_generichash_state tx0, rx0; /* keyed, nothing absorbed yet */
	crypto_generichash_state rx;	   /* the incoming frame being checked */
	uint64_t body_left;		   /* its payload bytes still to absorb */
	uint8_t tag[RDMEM_FRAME_TAG];	   /* its tag as received so far */
	unsigned tag_got;
};

struct rdmem_frame_mac *rdmem_frame_mac_new(const uint8_t tx_key[RDMEM_FRAME_MAC_KEY],
					    const uint8_t rx_key[RDMEM_FRAME_MAC_KEY])
{
	size_t size = (sizeof(struct rdmem_frame_mac) + 63) & ~(size_t)63;
	struct rdmem_frame_mac *m = aligned_alloc(64, size);

	if (!m)
		return NULL;
	memset(m, 0, size);
	crypto_generichash_init(&m->tx0, tx_key, RDMEM_FRAME_MAC_KEY, RDMEM_FRAME_TAG);
	crypto_generichash_init(&m->rx0, rx_key, RDMEM_FRAME_MAC_KEY, RDMEM_FRAME_TAG);
	return m;
}

void rdmem_frame_mac_free(struct rdmem_frame_mac *m)
{
	if (!m)
		return;
	sodium_memzero(m, sizeof(*m)); /* the start states hold the keys */
	free(m);
}

struct rdmem_frame_mac *rdmem_frame_mac_tcp(const struct rdmem_auth *a, uint64_t agent_nonce,
					    uint64_t server_nonce, int server)
{
	uint8_t to_server[RDMEM_AUTH_TCP_KEY], to_agent[RDMEM_AUTH_TCP_KEY];
	struct rdmem_frame_mac *m;

	_Static_assert(RDMEM_AUTH_TCP_KEY == RDMEM_FRAME_MAC_KEY, "derived keys are frame keys");
	rdmem_auth_tcp_keys(a, agent_nonce, server_nonce, to_server, to_agent);
	m = server ? rdmem_frame_mac_new(to_agent, to_server)
		   : rdmem_frame_mac_new(to_server, to_agent);
	sodium_memzero(to_server, sizeof(to_server));
	sodium_memzero(to_agent, sizeof(to_agent));
	return m;
}

/* Sequence number (wire order) and header: what every tag starts with. */
static void frame_mac_start(crypto_generichash_state *st, const crypto_generichash_state *st0,
			    uint64_t seq, const void *hdr)
{
	uint64_t s = rdmem_le64(seq);

	*st = *st0;
	crypto_generichash_update(st, (const uint8_t *)&s, sizeof(s));
	crypto_generichash_update(st, hdr, RDMEM_DESC_SIZE);
}

void rdmem_frame_mac_sign(const struct rdmem_frame_mac *m, uint64_t seq, const void *hdr,
			  const void *p1, size_t l1, const void *p2, size_t l2,
			  uint8_t tag[RDMEM_FRAME_TAG])
{
	crypto_generichash_state st;

	frame_mac_start(&st, &m->tx0, seq, hdr);
	if (l1)
		crypto_generichash_update(&st, p1, l1);
	if (l2)
		crypto_generichash_update(&st, p2, l2);
	crypto_generichash_final(&st, tag, RDMEM_FRAME_TAG);
}

void rdmem_frame_mac_begin(struct rdmem_frame_mac *m, uint64_t seq, const void *hdr,
			   uint64_t payload_len)
{
	frame_mac_start(&m->rx, &m->rx0, seq, hdr);
	m->body_left = payload_len;
	m->tag_got = 0;
}

size_t rdmem_frame_mac_absorb(struct rdmem_frame_mac *m, const void *p, size_t n)
{
	size_t body = n < m->body_left ? n : (size_t)m->body_left, tag;

	if (body)
		crypto_generichash_update(&m->rx, p, body);
	m->body_left -= body;
	tag = n - body < RDMEM_FRAME_TAG - m->tag_got ? n - body : RDMEM_FRAME_TAG - m->tag_got;
	if (tag)
		memcpy(m->tag + m->tag_got, (const uint8_t *)p + body, tag);
	m->tag_got += (unsigned)tag;
	return body + tag;
}

int rdmem_frame_mac_done(const struct rdmem_frame_mac *m)
{
	return m->body_left == 0 && m->tag_got == RDMEM_FRAME_TAG;
}

int rdmem_frame_mac_verify(struct rdmem_frame_mac *m)
{
	uint8_t want[RDMEM_FRAME_TAG];

	if (!rdmem_frame_mac_done(m))
		return -EBADMSG;
	crypto_generichash_final(&m->rx, want, sizeof(want));
	return sodium_memcmp(want, m->tag, sizeof(want)) == 0 ? 0 : -EBADMSG;
}
