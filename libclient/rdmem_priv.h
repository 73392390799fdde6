/* rdmem_priv.h - librdmem's own state behind the public handle and the
 * fast path's view of an attachment. Not installed: only the library's
 * sources (and white-box tests) include it.
 *
 * ABI rules (soname librdmem.so.RDMEM_VERSION_MAJOR; the major changes when
 * one breaks): rdmem_t is opaque. The public fields of struct rdmem_rpc,
 * rdmem_opts, rdmem_info, rdmem_counters, rdmem_mget, rdmem_profile and
 * rdmem_image_opts never move or change size; struct rdmem_rpc grows only
 * inside its reserved room (rdmem_rpc_init() zeroes it, so a new field's 0
 * is the old behaviour). struct rdmem_att is the fast path's view of an
 * attachment: the inline code reads it, so its fields only ever get appended
 * (the library keeps its own state after it, struct rdmem_att_lib).
 * libclient/abi/librdmem.abi is the baseline `make abi-check` compares
 * against; a new function goes into a new node of librdmem.map.
 */
#ifndef RDMEM_PRIV_H
#define RDMEM_PRIV_H

#include "libclient/rdmem.h"

/* A blocked waiter looks at the agent this often (its liveness, the epoch). */
#define RDMEM_LIVENESS_NS 20000000ull
#define RDMEM_HINT_NS	  1000000ull /* a header hint looks at the connection this often */
/* How long attach waits for the agent's welcome on its socket. */
#define RDMEM_ATTACH_NS 2000000000ull

/* One attachment: the public view first, then what only the library reads. */
struct rdmem_att_lib {
	struct rdmem_att pub;
	int sock; /* the connection to the agent: open for the attachment's life */
	size_t len;
	uint64_t epoch;
	_Atomic uint64_t next_liveness_ns; /* when to test the agent process again */
};

struct rdmem {
	char path[RDMEM_SHM_NAME_MAX + 1]; /* the agent's socket (shm/door.h) */
	atomic_flag lock;		   /* guards att: swap on re-attach, take a reference */
	struct rdmem_att *att;
	int attached_once;
	int single_cpu; /* we may run on one CPU only: spinning cannot help */
	uint32_t timeout_ms;
	_Atomic uint64_t next_req_id;
	_Atomic uint64_t n_calls, n_timeouts, n_late, n_shutdowns, n_reattach, n_bad;
};

static inline struct rdmem_att_lib *rdmem__lib(struct rdmem_att *a)
{
	return (struct rdmem_att_lib *)a;
}

/* attach.c */
/* Library-internal: hidden from the .so's exports (the version script exports rdmem_*). */
#define RDMEM_HIDDEN __attribute__((visibility("hidden")))
RDMEM_HIDDEN struct rdmem_att *rdmem__att_get(rdmem_t *h, int *err);
RDMEM_HIDDEN int rdmem__att_alive(struct rdmem_att *a, uint64_t now);
/* Asks the agent on our connection to take the slots we marked
 * RDMEM_SLOT_NO_ENTRY (shm/door.h, RDMEM_DOOR_TAKE). */
RDMEM_HIDDEN void rdmem__att_ask_take(struct rdmem_att *a);

#endif
