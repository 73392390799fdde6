/* session_hog.c - a peer that takes RDMA sessions and never sends on them:
 * what a session flood on the server's RDMA listener looks like.
 *
 *   session_hog FABRIC HOST PORT N [SOURCE]
 *
 * Dials N sessions (each a full rdma_cm handshake, like an agent's), prints
 * "holding K of N sessions", then holds them until killed. Used by the
 * Soft-RoCE suite (scripts/rxe-suite.sh, check session_flood); the shm-fabric
 * flood is in tests/integration/test_net_hostile.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/link.h"
#include "rdmem/fabric.h"
#include "rdmem/util.h"

int main(int argc, char **argv)
{
	struct rdmem_link_config lc = { .ring_slots = 16,
					.resp_bytes = RDMEM_DEFAULT_RESP_BYTES,
					.timeout_ms = 5000 };
	struct rdmem_link *l;
	unsigned long n, i, held = 0;

	if (argc < 5 || argc > 6 || (n = strtoul(argv[4], NULL, 10)) == 0 || n > 1024) {
		fprintf(stderr, "usage: session_hog shm|verbs HOST PORT N(1..1024) [SOURCE]\n");
		return 2;
	}
	if (rdmem_fab_kind_parse(argv[1], &lc.fabric) < 0) {
		fprintf(stderr, "session_hog: unknown fabric '%s'\n", argv[1]);
		return 2;
	}
	lc.host = argv[2];
	lc.port = (uint16_t)atoi(argv[3]);
	lc.src_addr = argc == 6 ? argv[5] : NULL;
	rdmem_log_init("session_hog", 0);
	for (i = 0; i < n; i++)
		held += rdmem_link_open(&lc, &l) == 0; /* kept until we are killed */
	printf("holding %lu of %lu sessions\n", held, n);
	fflush(stdout);
	for (;;)
		pause();
}
