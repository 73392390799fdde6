/* profile.c - generates the seeded PROFILE records from their id alone, so
 * they cost no memory and every server (and test) agrees on them. */
#include "server/profile.h"

#include <errno.h>
#include <stdio.h>

static const char *const first_names[] = { "Ada",     "Grace", "Linus",	 "Barbara",
					   "Dennis",  "Ken",   "Radia",	 "Leslie",
					   "Frances", "John",  "Edsger", "Margaret",
					   "Donald",  "Hedy",  "Alan",	 "Sophie" };
static const char *const last_names[] = { "Lovelace", "Hopper",	  "Torvalds", "Liskov",
					  "Ritchie",  "Thompson", "Perlman",  "Lamport",
					  "Allen",    "Backus",	  "Dijkstra", "Hamilton",
					  "Knuth",    "Lamarr",	  "Turing",   "Wilson" };
static const char *const tag_pool[] = { "rdma",	     "storage",	  "kernel",	 "networking",
					"compilers", "databases", "ml",		 "security",
					"embedded",  "graphics",  "distributed", "hpc",
					"rust",	     "c",	  "go",		 "python" };
static const char *const counter_names[RDMEM_PROFILE_COUNTERS] = {
	"followers", "following",   "posts",	      "likes_received",
	"karma",     "joined_unix", "last_seen_unix",
};

_Static_assert(sizeof(first_names) / sizeof(first_names[0]) == 16, "name tables of 16");
_Static_assert(sizeof(tag_pool) / sizeof(tag_pool[0]) == 16, "tag pool of 16");

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int rdmem_profile_parse_id(const uint8_t *key, size_t len, uint64_t *id)
{
	uint64_t v = 0;
	size_t i;

	if (len == 0 || len > 19 || (key[0] == '0' && len > 1))
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (key[i] < '0' || key[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(key[i] - '0'); /* 19 digits cannot overflow */
	}
	*id = v;
	return 0;
}

int rdmem_profile_lookup(uint64_t id, struct rdmem_profile_buf *buf, struct rdmem_profile_in *p)
{
	uint64_t seed = id, r, joined;
	uint32_t ntags, used = 0, i;

	if (id < RDMEM_PROFILE_FIRST_ID || id > RDMEM_PROFILE_LAST_ID)
		return -ENOENT;
	r = splitmix64(&seed);
	snprintf(buf->name, sizeof(buf->name), "%s %s", first_names[r & 15],
		 last_names[(r >> 4) & 15]);
	ntags = 2 + (uint32_t)((r >> 8) % (RDMEM_PROFILE_MAX_TAGS - 1));
	for (i = 0; i < ntags;) {
		uint32_t t = (uint32_t)(splitmix64(&seed) & 15);

		if (used & (1u << t))
			continue; /* distinct tags; 16 in the pool, at most 5 drawn */
		used |= 1u << t;
		buf->tags[i++] = tag_pool[t];
	}
	joined = 1262304000ull + splitmix64(&seed) % 400000000ull; /* 2010 .. 2022 */
	buf->values[0] = splitmix64(&seed) % 100000;
	buf->values[1] = splitmix64(&seed) % 2000;
	buf->values[2] = splitmix64(&seed) % 5000;
	buf->values[3] = buf->values[2] * (splitmix64(&seed) % 50);
	buf->values[4] = buf->values[3] / 3 + buf->values[0] / 10;
	buf->values[5] = joined;
	buf->values[6] = joined + splitmix64(&seed) % 100000000ull;
	p->id = id;
	p->name = buf->name;
	p->tags = buf->tags;
	p->tag_count = ntags;
	p->counter_names = counter_names;
	p->counter_values = buf->values;
	p->counter_count = RDMEM_PROFILE_COUNTERS;
	return 0;
}
