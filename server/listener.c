/* listener.c - the RDMA listener thread of rdmem-server.
 *
 * It takes connect requests, checks the agent's private data, refuses
 * clearly when the server is full, and opens a session (own fabric
 * resources and worker) for each agent. Sessions whose worker ended are
 * closed here, so one agent's failure frees only its own resources.
 */
#include "server/listener.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rdmem/util.h"

#define RDMEM_LISTENER_POLL_MS 100

struct rdmem_listener_thread {
	const struct rdmem_rdma_config *cfg;
	struct rdmem_service *svc;
	struct rdmem_listener *l;
	struct rdmem_session **sessions;
	uint32_t next_id;
	int stop_efd;
	pthread_t thread;
};

static struct rdmem_fab_attr rdmem_listener_attr(const struct rdmem_rdma_config *cfg)
{
	/* Up to three WRs per reply (payload, descriptor, state) in flight per slot. */
	struct rdmem_fab_attr a = { .max_send_wr = RDMEM_SESSION_WRS_PER_SLOT * cfg->ring_slots +
						   RDMEM_SESSION_WR_SPARE,
				    .max_recv_wr = cfg->ring_slots,
				    .max_inline = 64,
				    .signal_every = 64 };

	return a;
}

static void rdmem_listener_refuse(struct rdmem_conn *c, uint16_t status, const char *why)
{
	struct rdmem_xchg_reject r = { RDMEM_XCHG_MAGIC, status, 0, { 0 } };

	snprintf(r.reason, sizeof(r.reason), "%s", why);
	rdmem_fab_reject(c, &r, sizeof(r));
}

static int rdmem_listener_free_index(struct rdmem_listener_thread *lt)
{
	uint32_t i;

	for (i = 0; i < lt->cfg->max_sessions; i++)
		if (!lt->sessions[i])
			return (int)i;
	return -1;
}

static void rdmem_listener_take(struct rdmem_listener_thread *lt)
{
	struct rdmem_fab_attr attr = rdmem_listener_attr(lt->cfg);
	struct rdmem_xchg_hello hello;
	struct rdmem_conn *c;
	size_t len = sizeof(hello);
	int ret, idx;
	uint16_t st;

	memset(&hello, 0, sizeof(hello));
	ret = rdmem_fab_get_request(lt->l, &attr, &c, &hello, &len);
	if (ret < 0) {
		if (ret != -EAGAIN)
			rdmem_warn("connect request failed: %s", strerror(-ret));
		return;
	}
	if ((st = rdmem_session_check_hello(&hello, len)) != RDMEM_S_OK) {
		rdmem_service_count_bad_input(lt->svc);
		rdmem_warn("connect request from %s: bad private data (%zu bytes): refused",
			   rdmem_fab_peer(c), len);
		rdmem_listener_refuse(c, st, "bad session parameters");
		return;
	}
	if ((idx = rdmem_listener_free_index(lt)) < 0) {
		rdmem_warn("connect request from %s: %u sessions already: refused",
			   rdmem_fab_peer(c), lt->cfg->max_sessions);
		rdmem_listener_refuse(c, RDMEM_S_BUSY, "too many sessions");
		return;
	}
	rdmem_session_open(lt->cfg, lt->svc, c, &hello, ++lt->next_id, &lt->sessions[idx]);
}

static void rdmem_listener_reap(struct rdmem_listener_thread *lt, int all)
{
	uint32_t i;

	for (i = 0; i < lt->cfg->max_sessions; i++) {
		struct rdmem_session *s = lt->sessions[i];

		if (s && (all || rdmem_session_finished(s))) {
			rdmem_session_close(s);
			lt->sessions[i] = NULL;
		}
	}
}

static void *rdmem_listener_main(void *arg)
{
	struct rdmem_listener_thread *lt = arg;
	struct pollfd pfd[2] = { { rdmem_fab_listener_fd(lt->l), POLLIN, 0 },
				 { lt->stop_efd, POLLIN, 0 } };

	for (;;) {
		int n = poll(pfd, 2, RDMEM_LISTENER_POLL_MS);

		if (n < 0 && errno != EINTR) {
			rdmem_err("listener poll: %s", strerror(errno));
			break;
		}
		if (pfd[1].revents)
			break;
		if (pfd[0].revents)
			rdmem_listener_take(lt);
		rdmem_listener_reap(lt, 0);
	}
	rdmem_listener_reap(lt, 1);
	return NULL;
}

static void rdmem_listener_free(struct rdmem_listener_thread *lt)
{
	rdmem_fab_listener_close(lt->l);
	if (lt->stop_efd >= 0)
		close(lt->stop_efd);
	free(lt->sessions);
	free(lt);
}

int rdmem_rdma_listener_start(const struct rdmem_rdma_config *cfg, struct rdmem_service *svc,
			      struct rdmem_listener_thread **out)
{
	struct rdmem_listener_thread *lt = calloc(1, sizeof(*lt));
	int ret;

	if (!lt)
		return -ENOMEM;
	lt->cfg = cfg;
	lt->svc = svc;
	lt->stop_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	lt->sessions = calloc(cfg->max_sessions, sizeof(*lt->sessions));
	if (lt->stop_efd < 0 || !lt->sessions) {
		rdmem_listener_free(lt);
		return -ENOMEM;
	}
	ret = rdmem_fab_listen(cfg->fabric, cfg->addr, cfg->port, &lt->l);
	if (ret == 0)
		ret = -pthread_create(&lt->thread, NULL, rdmem_listener_main, lt);
	if (ret < 0) {
		rdmem_err("rdma listener on %s:%u (%s): %s", cfg->addr, cfg->port,
			  rdmem_fab_kind_name(cfg->fabric), strerror(-ret));
		rdmem_listener_free(lt);
		return ret;
	}
	rdmem_info("listening %s %s:%u", rdmem_fab_kind_name(cfg->fabric), cfg->addr, cfg->port);
	*out = lt;
	return 0;
}

void rdmem_rdma_listener_stop(struct rdmem_listener_thread *lt)
{
	uint64_t one = 1;

	if (!lt)
		return;
	if (write(lt->stop_efd, &one, sizeof(one)) < 0)
		rdmem_warn("listener stop signal: %s", strerror(errno));
	pthread_join(lt->thread, NULL);
	rdmem_listener_free(lt);
}
