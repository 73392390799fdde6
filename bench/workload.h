/* workload.h - what every comparison client does, so the systems get the
 * same work: the ops, the keys (16 bytes), the values (deterministic, so
 * every reply is checked byte for byte), and the command line.
 *
 *   get        GET of a preloaded key; value of --size bytes (default 32)
 *   put        PUT of --size bytes (default 32)
 *   large-get  a generated object of --size bytes (default 64 KiB), the same
 *              bytes as RDMemRPC's LARGE_GET "big:<size>" (rdmem/content.h)
 *   bigput     PUT of --size bytes (default 16 KiB)
 *
 * C11 and C++17.
 */
#ifndef RDMEM_BENCH_WORKLOAD_H
#define RDMEM_BENCH_WORKLOAD_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmem/content.h"

enum bench_op { BENCH_GET, BENCH_PUT, BENCH_LARGE_GET, BENCH_BIGPUT };

#define BENCH_KEY_LEN 16

struct bench_opts {
	const char *system; /* name in the record */
	const char *host;
	int port;
	enum bench_op op;
	const char *op_name;
	uint64_t size;	 /* value or object bytes */
	unsigned window; /* calls outstanding */
	uint64_t n;	 /* measured calls */
	uint64_t warmup; /* calls before measuring */
	unsigned keys;	 /* distinct keys cycled through */
	uint64_t seed;	 /* varies PUT values between runs */
};

static inline int bench_op_parse(const char *s, enum bench_op *op, uint64_t *def_size)
{
	static const struct {
		const char *name;
		enum bench_op op;
		uint64_t size;
	} t[] = { { "get", BENCH_GET, 32 },
		  { "put", BENCH_PUT, 32 },
		  { "large-get", BENCH_LARGE_GET, 65536 },
		  { "bigput", BENCH_BIGPUT, 16384 } };
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (strcmp(s, t[i].name) == 0) {
			*op = t[i].op;
			*def_size = t[i].size;
			return 0;
		}
	}
	return -1;
}

static inline int bench_is_put(enum bench_op op)
{
	return op == BENCH_PUT || op == BENCH_BIGPUT;
}

/* Key i as exactly BENCH_KEY_LEN characters (out has room for the NUL). */
static inline void bench_key(char out[BENCH_KEY_LEN + 1], unsigned i)
{
	snprintf(out, BENCH_KEY_LEN + 1, "bench:%010u", i);
}

/* The value of key i under seed: len bytes that differ per key and per seed. */
static inline void bench_value(uint8_t *out, size_t len, unsigned i, uint64_t seed)
{
	rdmem_big_fill(seed * 0x10001ull + i, 0, out, len);
}

/* Parses a size with an optional k/m suffix; 0 on a bad one. */
static inline uint64_t bench_parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s)
		return 0;
	if (*end == 'k' || *end == 'K')
		v *= 1024, end++;
	else if (*end == 'm' || *end == 'M')
		v *= 1024 * 1024, end++;
	return *end ? 0 : (uint64_t)v;
}

static inline void bench_usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s --port P --op get|put|large-get|bigput [options]\n"
		"  --host H       server address (default 127.0.0.1)\n"
		"  --size B       value/object bytes (k/m suffix; default per op)\n"
		"  --window W     calls outstanding (default 1)\n"
		"  -n N           measured calls (default 10000)\n"
		"  --warmup N     calls before measuring (default n/10, at least 100)\n"
		"  --keys K       distinct keys (default 1024)\n"
		"  --seed S       PUT value seed (default: pid)\n"
		"  --system NAME  name in the JSON record\n",
		prog);
}

/* Parses the command line shared by every client; returns 0 or -1 (usage shown). */
static inline int bench_parse_args(int argc, char **argv, struct bench_opts *o, const char *system)
{
	static const struct option lo[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },
		{ "op", required_argument, NULL, 'o' },
		{ "size", required_argument, NULL, 's' },
		{ "window", required_argument, NULL, 'w' },
		{ "warmup", required_argument, NULL, 'W' },
		{ "keys", required_argument, NULL, 'k' },
		{ "seed", required_argument, NULL, 'S' },
		{ "system", required_argument, NULL, 'y' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t def_size = 0, size = 0;
	long long warmup = -1;
	int c;

	memset(o, 0, sizeof(*o));
	o->system = system;
	o->host = "127.0.0.1";
	o->op_name = "get";
	o->window = 1;
	o->n = 10000;
	o->keys = 1024;
	o->seed = (uint64_t)getpid();
	while ((c = getopt_long(argc, argv, "n:h", lo, NULL)) != -1) {
		switch (c) {
		case 'H':
			o->host = optarg;
			break;
		case 'p':
			o->port = atoi(optarg);
			break;
		case 'o':
			o->op_name = optarg;
			break;
		case 's':
			size = bench_parse_size(optarg);
			break;
		case 'w':
			o->window = (unsigned)atoi(optarg);
			break;
		case 'n':
			o->n = strtoull(optarg, NULL, 10);
			break;
		case 'W':
			warmup = atoll(optarg);
			break;
		case 'k':
			o->keys = (unsigned)atoi(optarg);
			break;
		case 'S':
			o->seed = strtoull(optarg, NULL, 10);
			break;
		case 'y':
			o->system = optarg;
			break;
		default:
			bench_usage(argv[0]);
			return -1;
		}
	}
	if (optind != argc || o->port <= 0 || o->port > 65535 || o->window < 1 ||
	    o->window > 1024 || o->keys < 1 || o->n < 1 ||
	    bench_op_parse(o->op_name, &o->op, &def_size) < 0) {
		bench_usage(argv[0]);
		return -1;
	}
	o->size = size ? size : def_size;
	o->warmup = warmup >= 0 ? (uint64_t)warmup : (o->n / 10 > 100 ? o->n / 10 : 100);
	return 0;
}

#endif
