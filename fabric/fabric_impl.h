/* fabric_impl.h - what a fabric backend implements. Backends embed struct
 * rdmem_conn / rdmem_listener as their first member; fabric.c forwards each
 * public call through ops. */
#ifndef RDMEM_FABRIC_IMPL_H
#define RDMEM_FABRIC_IMPL_H

#include "rdmem/fabric.h"

struct rdmem_fab_ops {
	const char *name;
	int (*listen)(const char *addr, uint16_t port, struct rdmem_listener **out);
	int (*listener_fd)(struct rdmem_listener *l);
	int (*get_request)(struct rdmem_listener *l, const struct rdmem_fab_attr *attr,
			   struct rdmem_conn **out, void *priv, size_t *priv_len);
	int (*accept)(struct rdmem_conn *c, const void *priv, size_t len);
	void (*reject)(struct rdmem_conn *c, const void *priv, size_t len);
	void (*listener_close)(struct rdmem_listener *l);
	int (*resolve)(const char *host, uint16_t port, const struct rdmem_fab_attr *attr,
		       int timeout_ms, struct rdmem_conn **out);
	int (*connect)(struct rdmem_conn *c, const void *priv, size_t len, void *peer_priv,
		       size_t *peer_len, int timeout_ms);
	void *(*alloc)(struct rdmem_conn *c, size_t len);
	void (*free)(struct rdmem_conn *c, void *p, size_t len);
	void *(*alloc_shared)(size_t len);
	void (*free_shared)(void *p, size_t len);
	int (*reg)(struct rdmem_conn *c, void *addr, uint64_t len, unsigned access,
		   struct rdmem_mr *out);
	void (*dereg)(struct rdmem_conn *c, struct rdmem_mr *mr);
	int (*post)(struct rdmem_conn *c, const struct rdmem_wr *wrs, int n);
	int (*post_recv)(struct rdmem_conn *c, int n);
	int (*poll)(struct rdmem_conn *c, struct rdmem_wc *wc, int max);
	int (*arm)(struct rdmem_conn *c);
	int (*comp_fd)(struct rdmem_conn *c);
	void (*ack)(struct rdmem_conn *c);
	int (*event_fd)(struct rdmem_conn *c);
	int (*check)(struct rdmem_conn *c);
	uint32_t (*max_inline)(struct rdmem_conn *c);
	uint32_t (*max_send_sge)(struct rdmem_conn *c);
	uint32_t (*max_reads)(struct rdmem_conn *c);
	void (*queue_caps)(struct rdmem_conn *c, uint32_t *max_send, uint32_t *max_recv);
	const char *(*peer)(struct rdmem_conn *c);
	void (*shutdown)(struct rdmem_conn *c);
	void (*close)(struct rdmem_conn *c);
};

struct rdmem_conn {
	const struct rdmem_fab_ops *ops;
};

struct rdmem_listener {
	const struct rdmem_fab_ops *ops;
};

extern const struct rdmem_fab_ops rdmem_fab_verbs_ops;
extern const struct rdmem_fab_ops rdmem_fab_shm_ops;

#endif
