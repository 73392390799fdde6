/* listener.h - the server's RDMA listener: accepts one session per agent on
 * the configured fabric and reaps sessions whose agent left. */
#ifndef RDMEM_SERVER_LISTENER_H
#define RDMEM_SERVER_LISTENER_H

#include "server/service.h"
#include "server/session.h"

struct rdmem_listener_thread;

int rdmem_rdma_listener_start(const struct rdmem_rdma_config *cfg, struct rdmem_service *svc,
			      struct rdmem_listener_thread **out);
/* Stops accepting, stops every session, frees everything. */
void rdmem_rdma_listener_stop(struct rdmem_listener_thread *lt);

#endif
