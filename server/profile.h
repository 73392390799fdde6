/* profile.h - the PROFILE service: deterministic user profiles, the kind of
 * composite record a real backend returns, for ids RDMEM_PROFILE_FIRST_ID
 * .. RDMEM_PROFILE_LAST_ID. Same id, same bytes, on every server.
 */
#ifndef RDMEM_SERVER_PROFILE_H
#define RDMEM_SERVER_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "rdmem/blob.h"

#define RDMEM_PROFILE_FIRST_ID 1001u
#define RDMEM_PROFILE_LAST_ID  11000u
#define RDMEM_PROFILE_MAX_TAGS 5u
#define RDMEM_PROFILE_COUNTERS 7u

/* Backing store for the strings and values a rdmem_profile_in points to. */
struct rdmem_profile_buf {
	char name[64];
	const char *tags[RDMEM_PROFILE_MAX_TAGS];
	uint64_t values[RDMEM_PROFILE_COUNTERS];
};

/* Parses a canonical decimal id: 0 or -EINVAL. */
int rdmem_profile_parse_id(const uint8_t *key, size_t len, uint64_t *id);

/* Fills p for a seeded id: 0, or -ENOENT for any other id. */
int rdmem_profile_lookup(uint64_t id, struct rdmem_profile_buf *buf, struct rdmem_profile_in *p);

#endif
