/* content.h - bytes both ends must agree on without talking: the rolling
 * image hash and the deterministic LARGE_GET objects.
 *
 * Header-only: the server generates and checks with them, libclient and the
 * tests verify with them.
 */
#ifndef RDMEM_CONTENT_H
#define RDMEM_CONTENT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* FNV-1a 64: byte-wise, so any chunking of an image gives the same value. */
#define RDMEM_HASH_INIT 0xcbf29ce484222325ull

static inline uint64_t rdmem_hash_update(uint64_t h, const void *data, size_t len)
{
	const uint8_t *p = (const uint8_t *)data;

	while (len--) {
		h ^= *p++;
		h *= 0x100000001b3ull;
	}
	return h;
}

/*
 * LARGE_GET "big:<n>[k|m]": object of n bytes whose 8-byte word k is derived
 * from k and n, so a client verifies any byte without a copy of the object and
 * two sizes never look alike.
 */
#define RDMEM_BIG_PREFIX "big:"

static inline uint64_t rdmem_big_word(uint64_t size, uint64_t k)
{
	uint64_t x = (k + 1) * 0x9e3779b97f4a7c15ull ^ (size << 17);

	return x ^ (x >> 29);
}

/* Parses "big:<n>[k|m]"; returns 0 and the size, or -EINVAL. */
static inline int rdmem_big_parse(const char *key, size_t len, uint64_t *size)
{
	size_t plen = sizeof(RDMEM_BIG_PREFIX) - 1, i;
	uint64_t n = 0, mult = 1;

	if (len <= plen || memcmp(key, RDMEM_BIG_PREFIX, plen) != 0)
		return -EINVAL;
	if (key[len - 1] == 'k' || key[len - 1] == 'K')
		mult = 1024, len--;
	else if (key[len - 1] == 'm' || key[len - 1] == 'M')
		mult = 1024 * 1024, len--;
	if (len == plen || len - plen > 12)
		return -EINVAL;
	for (i = plen; i < len; i++) {
		if (key[i] < '0' || key[i] > '9')
			return -EINVAL;
		n = n * 10 + (uint64_t)(key[i] - '0');
	}
	*size = n * mult;
	return 0;
}

/* Words k .. k + n - 1, stepping (k + 1) * C by additions: vectorizes. */
static inline void rdmem_big_fill_words(uint64_t size, uint64_t k, uint8_t *out, size_t n)
{
	const uint64_t c = 0x9e3779b97f4a7c15ull, salt = size << 17;
	uint64_t y = (k + 1) * c;
	size_t i;

	for (i = 0; i < n; i++, y += c) {
		uint64_t x = y ^ salt, w = x ^ (x >> 29);

		memcpy(out + 8 * i, &w, 8);
	}
}

/* Writes bytes [off, off + len) of the object of the given size. */
static inline void rdmem_big_fill(uint64_t size, uint64_t off, void *dst, size_t len)
{
	uint8_t *out = (uint8_t *)dst;

	/* Whole words in the middle: one computed store each (about memcpy speed). */
	while (len) {
		uint64_t w = rdmem_big_word(size, off / 8);
		size_t skip = off % 8, n = 8 - skip < len ? 8 - skip : len;

		memcpy(out, (const uint8_t *)&w + skip, n);
		out += n, off += n, len -= n;
		rdmem_big_fill_words(size, off / 8, out, len / 8);
		out += len / 8 * 8, off += len / 8 * 8, len %= 8;
	}
}

/* Returns the first offset that differs from the pattern, or len if none. */
static inline size_t rdmem_big_verify(uint64_t size, uint64_t off, const void *src, size_t len)
{
	const uint8_t *in = (const uint8_t *)src;
	uint8_t want[4096];
	size_t done = 0;

	/* Generate a block, compare it with memcmp; look closer only on a miss. */
	while (done < len) {
		size_t n = len - done < sizeof(want) ? len - done : sizeof(want), i;

		rdmem_big_fill(size, off + done, want, n);
		if (memcmp(want, in + done, n) != 0) {
			for (i = 0; want[i] == in[done + i]; i++)
				;
			return done + i;
		}
		done += n;
	}
	return len;
}

#endif
