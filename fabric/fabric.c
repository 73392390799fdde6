/* fabric.c - the public fabric calls, forwarded to the connection's backend. */
#include "fabric/fabric_impl.h"

#include <errno.h>
#include <string.h>

static const struct rdmem_fab_ops *rdmem_fab_ops_of(enum rdmem_fab_kind kind)
{
	switch (kind) {
	case RDMEM_FAB_VERBS:
		return &rdmem_fab_verbs_ops;
	case RDMEM_FAB_SHM:
		return &rdmem_fab_shm_ops;
	}
	return NULL;
}

const char *rdmem_fab_kind_name(enum rdmem_fab_kind kind)
{
	const struct rdmem_fab_ops *ops = rdmem_fab_ops_of(kind);

	return ops ? ops->name : "none";
}

int rdmem_fab_kind_parse(const char *name, enum rdmem_fab_kind *kind)
{
	if (strcmp(name, "verbs") == 0)
		*kind = RDMEM_FAB_VERBS;
	else if (strcmp(name, "shm") == 0)
		*kind = RDMEM_FAB_SHM;
	else
		return -EINVAL;
	return 0;
}

const char *rdmem_wc_status_name(unsigned status)
{
	static const char *const names[] = {
		[RDMEM_WC_SUCCESS] = "success",
		[RDMEM_WC_REM_ACCESS_ERR] = "remote access error",
		[RDMEM_WC_LOC_PROT_ERR] = "local protection error",
		[RDMEM_WC_FLUSH_ERR] = "flushed (connection broken)",
		[RDMEM_WC_RNR_ERR] = "receiver not ready",
		[RDMEM_WC_GENERAL_ERR] = "general error",
	};
	return status < sizeof(names) / sizeof(names[0]) ? names[status] : "unknown";
}

int rdmem_fab_listen(enum rdmem_fab_kind kind, const char *addr, uint16_t port,
		     struct rdmem_listener **out)
{
	const struct rdmem_fab_ops *ops = rdmem_fab_ops_of(kind);

	return ops ? ops->listen(addr, port, out) : -EINVAL;
}

int rdmem_fab_listener_fd(struct rdmem_listener *l)
{
	return l->ops->listener_fd(l);
}

int rdmem_fab_get_request(struct rdmem_listener *l, const struct rdmem_fab_attr *attr,
			  struct rdmem_conn **out, void *priv, size_t *priv_len)
{
	return l->ops->get_request(l, attr, out, priv, priv_len);
}

int rdmem_fab_accept(struct rdmem_conn *c, const void *priv, size_t len)
{
	return c->ops->accept(c, priv, len);
}

void rdmem_fab_reject(struct rdmem_conn *c, const void *priv, size_t len)
{
	c->ops->reject(c, priv, len);
}

void rdmem_fab_listener_close(struct rdmem_listener *l)
{
	if (l)
		l->ops->listener_close(l);
}

int rdmem_fab_resolve(enum rdmem_fab_kind kind, const char *host, uint16_t port,
		      const struct rdmem_fab_attr *attr, int timeout_ms, struct rdmem_conn **out)
{
	const struct rdmem_fab_ops *ops = rdmem_fab_ops_of(kind);

	return ops ? ops->resolve(host, port, attr, timeout_ms, out) : -EINVAL;
}

int rdmem_fab_connect(struct rdmem_conn *c, const void *priv, size_t len, void *peer_priv,
		      size_t *peer_len, int timeout_ms)
{
	return c->ops->connect(c, priv, len, peer_priv, peer_len, timeout_ms);
}

void *rdmem_fab_alloc(struct rdmem_conn *c, size_t len)
{
	return c->ops->alloc(c, len);
}

void rdmem_fab_free(struct rdmem_conn *c, void *p, size_t len)
{
	if (p)
		c->ops->free(c, p, len);
}

void *rdmem_fab_alloc_shared(enum rdmem_fab_kind kind, size_t len)
{
	const struct rdmem_fab_ops *ops = rdmem_fab_ops_of(kind);

	return ops ? ops->alloc_shared(len) : NULL;
}

void rdmem_fab_free_shared(enum rdmem_fab_kind kind, void *p, size_t len)
{
	const struct rdmem_fab_ops *ops = rdmem_fab_ops_of(kind);

	if (ops && p)
		ops->free_shared(p, len);
}

int rdmem_fab_reg(struct rdmem_conn *c, void *addr, uint64_t len, unsigned access,
		  struct rdmem_mr *out)
{
	return c->ops->reg(c, addr, len, access, out);
}

void rdmem_fab_dereg(struct rdmem_conn *c, struct rdmem_mr *mr)
{
	if (mr->impl)
		c->ops->dereg(c, mr);
}

int rdmem_fab_post(struct rdmem_conn *c, const struct rdmem_wr *wrs, int n)
{
	return c->ops->post(c, wrs, n);
}

int rdmem_fab_post_recv(struct rdmem_conn *c, int n)
{
	return c->ops->post_recv(c, n);
}

int rdmem_fab_poll(struct rdmem_conn *c, struct rdmem_wc *wc, int max)
{
	return c->ops->poll(c, wc, max);
}

int rdmem_fab_arm(struct rdmem_conn *c)
{
	return c->ops->arm(c);
}

int rdmem_fab_comp_fd(struct rdmem_conn *c)
{
	return c->ops->comp_fd(c);
}

void rdmem_fab_ack(struct rdmem_conn *c)
{
	c->ops->ack(c);
}

int rdmem_fab_event_fd(struct rdmem_conn *c)
{
	return c->ops->event_fd(c);
}

int rdmem_fab_check(struct rdmem_conn *c)
{
	return c->ops->check(c);
}

void rdmem_fab_queue_caps(struct rdmem_conn *c, uint32_t *max_send, uint32_t *max_recv)
{
	c->ops->queue_caps(c, max_send, max_recv);
}

uint32_t rdmem_fab_max_reads(struct rdmem_conn *c)
{
	return c->ops->max_reads(c);
}

uint32_t rdmem_fab_max_inline(struct rdmem_conn *c)
{
	return c->ops->max_inline(c);
}

uint32_t rdmem_fab_max_send_sge(struct rdmem_conn *c)
{
	return c->ops->max_send_sge(c);
}

const char *rdmem_fab_peer(struct rdmem_conn *c)
{
	return c->ops->peer(c);
}

void rdmem_fab_shutdown(struct rdmem_conn *c)
{
	if (c)
		c->ops->shutdown(c);
}

void rdmem_fab_close(struct rdmem_conn *c)
{
	if (c)
		c->ops->close(c);
}
