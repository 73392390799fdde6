/* service_impl.h - the service's state, shared by the dispatch (service.c)
 * and the STATS report (stats.c); nothing outside server/ includes it. */
#ifndef RDMEM_SERVER_SERVICE_IMPL_H
#define RDMEM_SERVER_SERVICE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/counters.h"
#include "common/metrics.h"
#include "server/dedup.h"
#include "server/hook.h"
#include "server/image.h"
#include "server/kv.h"
#include "server/service.h"
#include "server/tally.h"

/*
 * Every counter is a statistic: incremented and read with relaxed order, as
 * no other memory is published through them and a STATS reply may be a few
 * increments behind.
 */
struct rdmem_service {
	struct rdmem_service_config cfg;
	struct rdmem_kv *kv;
	struct rdmem_image_store *images; /* NULL without --image-dir */
	struct rdmem_hook *hook;	  /* NULL without --image-hook */
	struct rdmem_dedup *dedup;	  /* NULL with --no-dedup */
	int wake_fd; /* eventfd: timed work started (rdmem_service_tick's caller sleeps on it) */
	atomic_uint_fast64_t untracked; /* calls with an id on a connection with no identity */
	uint64_t start_ns;
	/* Calls by op and path, bytes, dispatch time: per thread (tally.h). */
	struct rdmem_tallies tally;
	atomic_uint_fast64_t bad_input;	    /* frames/descriptors refused before dispatch */
	atomic_uint_fast64_t auth_failures; /* peers that did not prove the secret */
	atomic_uint_fast64_t mac_failures;  /* TCP frames whose tag failed after AUTH */
	atomic_uint_fast64_t net[RDMEM_NET__COUNT];
	atomic_uint_fast64_t tcp_out_held; /* the TCP loop's sum of reply buffers */
	atomic_uint_fast64_t tcp_in_held;  /* and of receive buffers */
	atomic_uint_fast64_t reclaim_freed;
	atomic_uint_fast64_t reclaim_refused;
	atomic_int_fast64_t sessions;
	struct { /* struct rdmem_rdma_usage summed over open sessions */
		atomic_int_fast64_t qps, cqs, mrs, registered_bytes, recv_wqes;
	} rdma;
	/* LARGE_GET objects ("big:<n>"), generated once per size and copied after. */
	pthread_mutex_t big_lock;
	struct {
		uint64_t size;
		uint8_t *bytes;
	} big[8];
	/* The RDMA side's STATS section. The lock is held while the hook runs,
	 * so once rdmem_service_set_stats_hook() has cleared it, no thread is
	 * still inside it (its context may be freed). */
	pthread_mutex_t stats_lock;
	int (*stats_hook)(void *ctx, int json, char *buf, size_t cap);
	void *stats_ctx;
	/* The sessions' object pools summed (for STATS and /metrics). */
	atomic_int_fast64_t pool_used, pool_bytes, pool_live;
};

/* Every value the counter table shows, read once (relaxed; each value is
 * exact, the set is not one instant). */
struct rdmem_server_snapshot {
	uint64_t uptime_s, sessions, kv_keys, kv_bytes, kv_max_bytes, kv_charged, kv_refused;
	uint64_t rdma_qps, rdma_cqs, rdma_mrs, rdma_registered_bytes, rdma_recv_wqes;
	uint64_t bad_input, bad_request, auth_failures, mac_failures, bytes_in, bytes_out;
	uint64_t net[RDMEM_NET__COUNT], tcp_out_held, tcp_in_held;
	uint64_t op_calls[RDMEM_OP__COUNT], op_errors[RDMEM_OP__COUNT];
	uint64_t path_calls[RDMEM_PATH__COUNT];
	uint64_t pool_used, pool_bytes, pool_live, reclaim_freed, reclaim_refused;
	struct rdmem_image_stats img;
	struct rdmem_hook_stats hook;
	struct rdmem_dedup_stats dd;
	uint64_t dd_window, dd_untracked;
	uint64_t max_value, max_image; /* --max-value, --max-image: for "too big" messages */
};

/* The server's counter table: every name STATS and /metrics show. */
extern const struct rdmem_ctr_table rdmem_server_ctr_table;

void rdmem_server_snapshot_take(struct rdmem_service *svc, struct rdmem_server_snapshot *s);

/* Writes the STATS report (text or JSON); returns its length, or 0 if cap is too small. */
size_t rdmem_stats_format(struct rdmem_service *svc, int json, char *buf, size_t cap);

#endif
