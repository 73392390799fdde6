/* fuzz.h - what the libFuzzer targets share: reading structured values out
 * of the fuzz input, and invariant checks that abort (libFuzzer then keeps
 * the input as a crash).
 *
 * Reads past the end of the input yield zeros, so every input is a valid
 * program for a harness and the fuzzer never wastes inputs on a "too short"
 * early return.
 */
#ifndef RDMEM_TESTS_FUZZ_H
#define RDMEM_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmem/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* An invariant of the code under test broke: report it and crash. */
#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__,       \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

struct fz {
	const uint8_t *p;
	size_t n;
};

static inline struct fz fz_init(const uint8_t *data, size_t size)
{
	struct fz f = { data, size };

	return f;
}

static inline int fz_empty(const struct fz *f)
{
	return f->n == 0;
}

/* Little-endian, like the wire: seeds built from real structs read back as such. */
static inline uint64_t fz_uint(struct fz *f, unsigned bytes)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < bytes; i++) {
		uint64_t b = 0;

		if (f->n) {
			b = *f->p++;
			f->n--;
		}
		v |= b << (8 * i);
	}
	return v;
}

static inline uint8_t fz_u8(struct fz *f)
{
	return (uint8_t)fz_uint(f, 1);
}

static inline uint16_t fz_u16(struct fz *f)
{
	return (uint16_t)fz_uint(f, 2);
}

static inline uint32_t fz_u32(struct fz *f)
{
	return (uint32_t)fz_uint(f, 4);
}

static inline uint64_t fz_u64(struct fz *f)
{
	return fz_uint(f, 8);
}

/* Copies up to n bytes into out, zero-filling what the input lacks. */
static inline void fz_copy(struct fz *f, void *out, size_t n)
{
	size_t take = n < f->n ? n : f->n;

	memcpy(out, f->p, take);
	memset((uint8_t *)out + take, 0, n - take);
	f->p += take;
	f->n -= take;
}

/* Points at up to n bytes of the input (fewer at its end); *got says how many. */
static inline const uint8_t *fz_bytes(struct fz *f, size_t n, size_t *got)
{
	const uint8_t *p = f->p;

	*got = n < f->n ? n : f->n;
	f->p += *got;
	f->n -= *got;
	return p;
}

/* Reads every byte of a range, so ASan flags a range that leaves its buffer. */
static inline uint64_t fz_touch(const void *p, size_t n)
{
	const volatile uint8_t *b = p;
	uint64_t h = 0;
	size_t i;

	for (i = 0; i < n; i++)
		h = h * 31 + b[i];
	return h;
}

/* The runtime's log lines would drown the fuzzer's output: off unless asked for. */
static inline void fz_quiet(void)
{
	if (!getenv("RDMEM_FUZZ_VERBOSE"))
		rdmem_log_level = -1;
}

#endif
