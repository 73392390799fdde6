/* byteorder.h - the wire is little-endian; these convert at its boundary.
 *
 * Every wire struct (descriptor, TCP frame header, handshake private data,
 * control page, RECLAIM entries, the TCP AUTH token) keeps fixed-width fields
 * that are little-endian on the wire. Code converts where bytes enter or
 * leave the wire and works in host order in between; docs/architecture.md,
 * "Byte order on the wire", lists the boundary points.
 *
 * rdmem_le16/32/64 convert host <-> little-endian; the conversion is its own
 * inverse, so one function serves loads and stores. On a little-endian host
 * they compile to nothing. RDMEM_TEST_SWAP makes them byte-swap, which is a
 * big-endian host's view: tests build with it to check the boundary without
 * a big-endian machine.
 */
#ifndef RDMEM_BYTEORDER_H
#define RDMEM_BYTEORDER_H

#include <endian.h>
#include <stdint.h>

#ifdef RDMEM_TEST_SWAP
#define RDMEM__LE(bits, v) __builtin_bswap##bits(v)
#else
#define RDMEM__LE(bits, v) htole##bits(v)
#endif
static inline uint16_t rdmem_le16(uint16_t v)
{
	return RDMEM__LE(16, v);
}
static inline uint32_t rdmem_le32(uint32_t v)
{
	return RDMEM__LE(32, v);
}
static inline uint64_t rdmem_le64(uint64_t v)
{
	return RDMEM__LE(64, v);
}

/* In place, on a field of a wire struct. */
#define RDMEM_LE16_SWAP(x) ((x) = rdmem_le16(x))
#define RDMEM_LE32_SWAP(x) ((x) = rdmem_le32(x))
#define RDMEM_LE64_SWAP(x) ((x) = rdmem_le64(x))

#endif
