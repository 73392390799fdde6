/* worker.h - the threads that serve RDMA sessions: a few workers, each
 * driving many sessions, so hundreds of agents cost hundreds of sessions,
 * not hundreds of threads on two cores.
 *
 * Each round polls the sessions the slice schedule picks (group.h: above
 * --group-threshold sessions, one group per --slice-us) and, every so many
 * requests, the quiet lane's members (lane.h).
 */
#ifndef RDMEM_SERVER_WORKER_H
#define RDMEM_SERVER_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include "server/session.h"

struct rdmem_workers;

int rdmem_workers_start(const struct rdmem_rdma_config *cfg, struct rdmem_workers **out);
/* Stops every worker; each closes its sessions. */
void rdmem_workers_stop(struct rdmem_workers *ws);
/* Hands a new session to the least busy worker, which owns it from now on. */
void rdmem_workers_add(struct rdmem_workers *ws, struct rdmem_session *s);
/* Wakes every worker now: the listener made silent sessions reclaimable. */
void rdmem_workers_nudge(struct rdmem_workers *ws);
/* Sessions alive now, across workers. */
uint32_t rdmem_workers_sessions(struct rdmem_workers *ws);
/* Text or JSON for STATS: workers, groups, the active slice, each session's lease. */
int rdmem_workers_format(struct rdmem_workers *ws, int json, char *buf, size_t cap);

#endif
