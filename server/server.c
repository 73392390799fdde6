/* server.c - start, run and stop rdmem-server's parts in the right order:
 * the service first and last, listeners in between, signals through a
 * signalfd so the stop path runs on the main thread, never in a handler. */
#include "server/server.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "rdmem/util.h"

static int server_signals(struct rdmem_server *srv)
{
	sigset_t set;
	int ret;

	/* Writes to a vanished peer must fail with EPIPE, not kill the server. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	ret = pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (ret) {
		rdmem_err("cannot block SIGINT/SIGTERM: %s", strerror(ret));
		return -ret;
	}
	srv->sigfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (srv->sigfd < 0) {
		rdmem_err("signalfd: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

static int server_start_tcp(struct rdmem_server *srv)
{
	struct rdmem_tcp_server_config tc = srv->cfg.tcp; /* the limits */
	int ret;

	tc.addr = srv->cfg.bind_addr;
	tc.port = srv->cfg.tcp_port;
	tc.max_value = srv->cfg.svc.max_value;
	tc.auth = srv->auth;
	tc.tls = srv->tls;

	if (srv->cfg.no_tcp) {
		rdmem_info("tcp fallback disabled (--no-tcp)");
		return 0;
	}
	ret = rdmem_tcp_server_create(srv->svc, &tc, &srv->tcp);
	if (ret == 0)
		ret = rdmem_tcp_server_start(srv->tcp);
	return ret;
}

static int server_start_rdma(struct rdmem_server *srv)
{
	if (srv->cfg.no_rdma) {
		rdmem_info("rdma listener disabled (--fabric none)");
		return 0;
	}
	srv->cfg.rdma.addr = srv->cfg.bind_addr;
	srv->cfg.rdma.port = srv->cfg.port;
	srv->cfg.rdma.max_value = srv->cfg.svc.max_value;
	srv->cfg.rdma.auth = srv->auth;
	srv->cfg.rdma.tcp_up = srv->tcp != NULL; /* started before this (--no-tcp: not at all) */
	return rdmem_rdma_listener_start(&srv->cfg.rdma, srv->svc, &srv->rdma);
}

int rdmem_server_start(struct rdmem_server *srv, const struct rdmem_server_config *cfg)
{
	int ret;

	memset(srv, 0, sizeof(*srv));
	srv->cfg = *cfg;
	srv->sigfd = -1;
	ret = server_signals(srv);
	if (ret)
		return ret;
	if (cfg->secret_file && (ret = rdmem_auth_load(cfg->secret_file, &srv->auth)) < 0)
		return ret;
	if (cfg->tls.cert && (ret = rdmem_tls_ctx_create(&cfg->tls, 1, &srv->tls)) < 0)
		return ret;
	if (!srv->auth && (!strcmp(cfg->bind_addr, "0.0.0.0") || !strcmp(cfg->bind_addr, "::")))
		rdmem_warn("listening on every address with no --secret-file: any host that can "
			   "reach this one may use and change its data%s",
			   cfg->tls.ca ? " over RDMA (TCP needs a client certificate, --tls-ca)"
				       : "");
	ret = rdmem_service_create(&cfg->svc, &srv->svc);
	if (ret == 0 && (cfg->no_dedup || cfg->dedup.window))
		ret = rdmem_service_set_dedup(srv->svc, cfg->no_dedup ? NULL : &cfg->dedup);
	if (ret) {
		rdmem_err("cannot start the service: %s", strerror(-ret));
		return ret;
	}
	ret = server_start_tcp(srv);
	if (ret == 0)
		ret = server_start_rdma(srv);
	if (ret == 0 && cfg->metrics_port) {
		struct rdmem_metrics_http_config mc = { cfg->metrics_bind, cfg->metrics_port,
							rdmem_service_render_metrics, srv->svc };

		ret = rdmem_metrics_http_start(&mc, &srv->metrics);
	}
	return ret;
}

/* Milliseconds from now until next (rounded up; -1: no deadline). */
static int server_wait_ms(uint64_t next)
{
	uint64_t now = rdmem_now_ns();

	if (next == UINT64_MAX)
		return -1;
	if (next <= now)
		return 0;
	return (int)RDMEM_MIN((next - now + 999999) / 1000000, (uint64_t)INT_MAX);
}

/* The main thread: signals, and the service's timed work, which says when
 * it next has some; between those it sleeps (an idle server does not wake). */
int rdmem_server_run(struct rdmem_server *srv)
{
	struct pollfd p[2] = { { .fd = srv->sigfd, .events = POLLIN },
			       { .fd = rdmem_service_wake_fd(srv->svc), .events = POLLIN } };
	uint64_t next = rdmem_service_tick(srv->svc);

	for (;;) {
		struct signalfd_siginfo si;
		uint64_t v;
		int n = poll(p, 2, server_wait_ms(next));

		if (n < 0 && errno != EINTR) {
			rdmem_err("poll on the signal and wake fds: %s", strerror(errno));
			return -errno;
		}
		/* Read before the tick: a wake after this read is seen by the
		 * tick or leaves the fd readable for the next poll. */
		if (n > 0 && (p[1].revents & POLLIN) && read(p[1].fd, &v, sizeof(v)) < 0 &&
		    errno != EAGAIN)
			rdmem_err_limited("reading the service's wake fd: %s", strerror(errno));
		next = rdmem_service_tick(srv->svc);
		if (n > 0 && (p[0].revents & POLLIN) &&
		    read(srv->sigfd, &si, sizeof(si)) == sizeof(si)) {
			rdmem_info("%s received, stopping", strsignal((int)si.ssi_signo));
			return 0;
		}
	}
}

void rdmem_server_stop(struct rdmem_server *srv)
{
	rdmem_metrics_http_stop(srv->metrics); /* it reads the service */
	srv->metrics = NULL;
	rdmem_rdma_listener_stop(srv->rdma);
	srv->rdma = NULL;
	rdmem_tcp_server_destroy(srv->tcp);
	srv->tcp = NULL;
	rdmem_service_destroy(srv->svc);
	srv->svc = NULL;
	rdmem_auth_free(srv->auth);
	srv->auth = NULL;
	rdmem_tls_ctx_free(srv->tls);
	srv->tls = NULL;
	if (srv->sigfd >= 0)
		close(srv->sigfd);
	srv->sigfd = -1;
}
