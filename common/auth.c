/* auth.c - shared-secret proofs with libsodium (see include/rdmem/auth.h).
 * libsodium, not hand-written crypto: HMAC-SHA-256, key derivation with
 * BLAKE2b, constant-time comparison, and its CSPRNG for nonces. */
#include "rdmem/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rdmem/util.h"

#define RDMEM_AUTH_MAX_SECRET 4096
#define RDMEM_AUTH_SEEN	      4096 /* nonces remembered: far more than a window's logins */

struct rdmem_auth {
	uint8_t key[crypto_auth_hmacsha256_KEYBYTES];
	pthread_mutex_t lock; /* the listener and the TCP loop both verify */
	uint64_t seen[RDMEM_AUTH_SEEN];
	uint32_t next;
};

int rdmem_auth_load(const char *path, struct rdmem_auth **out)
{
	struct rdmem_auth *a;
	uint8_t *secret;
	size_t len = 0;
	int ret;

	if (sodium_init() < 0) {
		rdmem_err("libsodium failed to initialise");
		return -EIO;
	}
	ret = rdmem_conf_file_read("--secret-file", path, 1, RDMEM_AUTH_MAX_SECRET, &secret, &len);
	if (ret < 0)
		return ret;
	if (len < RDMEM_AUTH_MIN_SECRET) {
		rdmem_err("--secret-file %s: %zu bytes; needs %d to %d bytes of secret", path, len,
			  RDMEM_AUTH_MIN_SECRET, RDMEM_AUTH_MAX_SECRET);
		rdmem_conf_file_free(secret, len);
		return -EINVAL;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		rdmem_conf_file_free(secret, len);
		return -ENOMEM;
	}
	/* The file may hold text with a newline: hash it to a uniform key. */
	crypto_generichash(a->key, sizeof(a->key), secret, len, (const uint8_t *)"rdmem-key-v1",
			   12);
	rdmem_conf_file_free(secret, len);
	pthread_mutex_init(&a->lock, NULL);
	*out = a;
	return 0;
}

void rdmem_auth_free(struct rdmem_auth *a)
{
	if (!a)
		return;
	pthread_mutex_destroy(&a->lock);
	sodium_memzero(a->key, sizeof(a->key));
	free(a);
}

uint64_t rdmem_auth_nonce(void)
{
	return (uint64_t)time(NULL) << 32 | randombytes_random();
}

uint64_t rdmem_auth_random64(void)
{
	uint64_t r;

	randombytes_buf(&r, sizeof(r));
	return r;
}

void rdmem_auth_mac(const struct rdmem_auth *a, const char *label, const void *m1, size_t l1,
		    const void *m2, size_t l2, uint8_t *out, size_t outlen)
{
	uint8_t mac[crypto_auth_hmacsha256_BYTES];
	crypto_auth_hmacsha256_state st;

	crypto_auth_hmacsha256_init(&st, a->key, sizeof(a->key));
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)label, strlen(label) + 1);
	crypto_auth_hmacsha256_update(&st, m1, l1);
	if (l2)
		crypto_auth_hmacsha256_update(&st, m2, l2);
	crypto_auth_hmacsha256_final(&st, mac);
	memcpy(out, mac, outlen < sizeof(mac) ? outlen : sizeof(mac));
}

int rdmem_auth_verify(const struct rdmem_auth *a, const char *label, const void *m1, size_t l1,
		      const void *m2, size_t l2, const uint8_t *mac, size_t maclen)
{
	uint8_t want[crypto_auth_hmacsha256_BYTES];

	if (maclen > sizeof(want))
		return -EACCES;
	rdmem_auth_mac(a, label, m1, l1, m2, l2, want, maclen);
	return sodium_memcmp(want, mac, maclen) == 0 ? 0 : -EACCES;
}

int rdmem_auth_fresh(struct rdmem_auth *a, uint64_t nonce)
{
	int64_t skew = (int64_t)(nonce >> 32) - (int64_t)time(NULL);
	uint32_t i;
	int ret = 0;

	if (skew > RDMEM_AUTH_WINDOW_S || skew < -RDMEM_AUTH_WINDOW_S)
		return -EACCES;
	pthread_mutex_lock(&a->lock);
	for (i = 0; i < RDMEM_AUTH_SEEN && !ret; i++)
		if (a->seen[i] == nonce)
			ret = -EACCES;
	if (!ret)
		a->seen[a->next++ % RDMEM_AUTH_SEEN] = nonce;
	pthread_mutex_unlock(&a->lock);
	return ret;
}

void rdmem_auth_tcp_keys(const struct rdmem_auth *a, uint64_t agent_nonce, uint64_t server_nonce,
			 uint8_t to_server[RDMEM_AUTH_TCP_KEY],
			 uint8_t to_agent[RDMEM_AUTH_TCP_KEY])
{
	_Static_assert(RDMEM_AUTH_TCP_KEY == crypto_auth_hmacsha256_BYTES, "a whole HMAC");
	/* HMAC as the key derivation function, with a label per direction. */
	rdmem_auth_mac(a, "tcp-frames-to-server", &agent_nonce, sizeof(agent_nonce), &server_nonce,
		       sizeof(server_nonce), to_server, RDMEM_AUTH_TCP_KEY);
	rdmem_auth_mac(a, "tcp-frames-to-agent", &agent_nonce, sizeof(agent_nonce), &server_nonce,
		       sizeof(server_nonce), to_agent, RDMEM_AUTH_TCP_KEY);
}

void rdmem_auth_tcp_proof(const struct rdmem_auth *a, int server, uint64_t agent_nonce,
			  uint64_t server_nonce, const uint8_t *binding,
			  uint8_t mac[RDMEM_AUTH_MAC])
{
	uint64_t n[2] = { agent_nonce, server_nonce };
	size_t nl = server ? sizeof(n) : sizeof(n[0]);

	if (!binding) /* plain TCP: wire version 3's bytes, unchanged */
		rdmem_auth_mac(a, server ? "server-tcp" : "agent-tcp", n, nl, NULL, 0, mac,
			       RDMEM_AUTH_MAC);
	else /* own labels: a plain proof never checks as a bound one */
		rdmem_auth_mac(a, server ? "server-tcp-tls" : "agent-tcp-tls", n, nl, binding,
			       RDMEM_AUTH_BINDING, mac, RDMEM_AUTH_MAC);
}

int rdmem_auth_tcp_check(const struct rdmem_auth *a, int server, uint64_t agent_nonce,
			 uint64_t server_nonce, const uint8_t *binding,
			 const uint8_t mac[RDMEM_AUTH_MAC])
{
	uint8_t want[RDMEM_AUTH_MAC];

	rdmem_auth_tcp_proof(a, server, agent_nonce, server_nonce, binding, want);
	return sodium_memcmp(want, mac, RDMEM_AUTH_MAC) == 0 ? 0 : -EACCES;
}
