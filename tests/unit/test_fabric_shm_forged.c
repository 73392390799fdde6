/* test_fabric_shm_forged.c - the shm fabric against a hostile local peer
 * that speaks its handshake by hand: connect requests and accepts forged
 * field by field (wrong sizes, foreign or unsealed memfds, hugetlbfs, more
 * regions or bytes than a side maps), a raw server that answers nothing or
 * garbage, and the caps rdmem-server sets. Each must be refused before
 * anything is mapped, leaking no fd and no mapping.
 */
#include "tests/fabric_pair.h"

static int t_raw_dial(uint16_t port)
{
	struct sockaddr_un sun;
	char name[40];
	socklen_t len = shmfab_sockaddr(port, &sun, name, sizeof(name));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (s >= 0 && connect(s, (struct sockaddr *)&sun, len) < 0) {
		close(s);
		return -1;
	}
	return s;
}

static int t_raw_send(int s, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr a;
	} u = { 0 };
	struct iovec iov = { (void *)buf, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds) {
		struct cmsghdr *cm;

		m.msg_control = u.b;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	return sendmsg(s, &m, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

static int t_memfd(size_t size, int seal)
{
	int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd >= 0 && (ftruncate(fd, (off_t)size) < 0 ||
			(seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0))) {
		close(fd);
		return -1;
	}
	return fd;
}

enum {
	H_GARBAGE,
	H_MANY_REGIONS,
	H_PAST_FD_END,
	H_UNSEALED,
	H_DOORBELL_PIPE,
	H_DOORBELL_DGRAM, /* a datagram socket, but not from a socket pair */
	H_PAGE_SMALL,
	H_PRIV_LONG,
	H_FDS_MISSING,
	H_DUP_RKEY,
	H_BAD_ACCESS,
	H_RO_FD_WRITABLE,
	H_HUGETLB,  /* a hugetlbfs memfd: its sender could make our writes SIGBUS */
	H_OVER_CAP, /* regions past what the listener maps for a peer (sparse, 1 TiB each) */
	H_EMPTY,
	H_CLOSE,
	H_NCASES,
	H_BIG_REGION = H_NCASES + 1, /* one sparse 8 GiB region: past rdmem-server's cap */
	H_TWO_REGIONS,		     /* honest, but two: rdmem-server maps one */
};

/* Adds a second region of size bytes (its own memfd as fds[3]) to m. */
static void t_second_region(struct shmfab_msg *m, int *fds, int *nfds, size_t *len, uint64_t addr,
			    uint32_t rkey, uint64_t size)
{
	m->hdr.nregions = 2;
	m->region[1] = m->region[0];
	m->region[1].addr = addr;
	m->region[1].rkey = rkey;
	fds[3] = t_memfd(size, 1);
	*nfds = 4;
	*len += sizeof(m->region[0]);
}

/* Sends forged connect request h to port; fds built here and closed. */
static int t_forge(uint16_t port, int h)
{
	struct shmfab_msg m;
	int fds[4], nfds = 3, pipefd[2] = { -1, -1 }, bell[2] = { -1, -1 }, rc = 0;
	int s = t_raw_dial(port);
	size_t len;

	if (s < 0)
		return -1;
	memset(&m, 0, sizeof(m));
	m.hdr = (struct shmfab_hello){ .magic = SHMFAB_MAGIC,
				       .version = SHMFAB_VERSION,
				       .type = SHMFAB_MSG_CONNECT,
				       .nregions = 1,
				       .rq_cap = 4 };
	m.region[0] = (struct shmfab_wire_region){
		.addr = 0x10000, .len = 4096, .rkey = 0x1234, .access = RDMEM_ACCESS_REMOTE_WRITE
	};
	fds[0] = t_memfd(h == H_PAGE_SMALL ? 64 : shmfab_page_bytes(4), 1);
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, bell) < 0)
		return -1;
	fds[1] = bell[1];
	fds[2] = t_memfd(4096, h != H_UNSEALED);
	len = sizeof(m.hdr) + sizeof(m.region[0]);
	switch (h) {
	case H_MANY_REGIONS:
		m.hdr.nregions = 1000;
		break;
	case H_PAST_FD_END:
		m.region[0].offset = 4096;
		break;
	case H_DOORBELL_PIPE:
		if (pipe(pipefd) == 0)
			fds[1] = pipefd[0];
		break;
	case H_DOORBELL_DGRAM:
		fds[1] = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		break;
	case H_PAGE_SMALL:
		m.hdr.rq_cap = 16384;
		break;
	case H_PRIV_LONG:
		m.hdr.priv_len = SHMFAB_PRIV_CONNECT + 1;
		break;
	case H_FDS_MISSING:
		nfds = 0;
		break;
	case H_DUP_RKEY: /* 0x5634: the key index of 0x1234 */
		t_second_region(&m, fds, &nfds, &len, m.region[0].addr, 0x5634, 4096);
		break;
	case H_BAD_ACCESS:
		m.region[0].access = 4;
		break;
	case H_TWO_REGIONS:
		t_second_region(&m, fds, &nfds, &len, 0x20000, 0x5635, 4096);
		break;
	case H_BIG_REGION:
		m.region[0].len = 8ull << 30;
		close(fds[2]);
		fds[2] = t_memfd(8ull << 30, 1);
		break;
	case H_OVER_CAP: /* two of the largest a region may be: 2 TiB, past the 1 TiB default */
		m.region[0].len = SHMFAB_MAX_REGION;
		close(fds[2]);
		fds[2] = t_memfd(SHMFAB_MAX_REGION, 1);
		/* another key index: not H_DUP_RKEY */
		t_second_region(&m, fds, &nfds, &len, 0x10000 + SHMFAB_MAX_REGION, 0x5635,
				SHMFAB_MAX_REGION);
		break;
	case H_HUGETLB: {
		int huge = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);

		if (huge >= 0 && ftruncate(huge, 2 << 20) == 0 &&
		    fcntl(huge, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0) {
			close(fds[2]);
			fds[2] = huge;
		} else {
			if (huge >= 0)
				close(huge);
			printf("# no hugetlbfs memfd here: case H_HUGETLB sends an unsealed one\n");
			close(fds[2]);
			fds[2] = t_memfd(4096, 0);
		}
		break;
	}
	case H_RO_FD_WRITABLE: {
		char path[64];
		int ro;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[2]);
		ro = open(path, O_RDONLY | O_CLOEXEC);
		close(fds[2]);
		fds[2] = ro;
		break;
	}
	}
	if (h == H_GARBAGE)
		rc = t_raw_send(s, "garbage!!!", 10, NULL, 0);
	else if (h == H_EMPTY)
		rc = t_raw_send(s, "", 0, NULL, 0);
	else if (h != H_CLOSE)
		rc = t_raw_send(s, &m, len, fds, nfds);
	for (int i = 0; i < (h == H_DUP_RKEY || h == H_OVER_CAP || h == H_TWO_REGIONS ? 4 : 3); i++)
		if (fds[i] != bell[1])
			close(fds[i]);
	close(bell[0]);
	close(bell[1]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (h == H_CLOSE) {
		close(s);
		s = -1;
	}
	return rc ? -1 : s;
}

static void test_hostile_handshake(void)
{
	struct rdmem_listener *l;
	struct t_pair p;
	uint16_t port;
	int fds0, maps0;

	/* Warm up: the first pair maps libraries and thread stacks. */
	T_OK(t_pair_open(&p, NULL, 0, 0));
	t_pair_close(&p);
	fds0 = proc_fd_count(getpid());
	maps0 = t_count_maps();
	l = t_listen(&port);
	REQUIRE(l);
	for (int h = 0; h < H_NCASES; h++) {
		struct rdmem_conn *c = NULL;
		char priv[64];
		size_t plen = sizeof(priv);
		int s = t_forge(port, h), rc;

		CHECK(s >= 0 || h == H_CLOSE);
		rc = t_get_request(l, NULL, &c, priv, &plen);
		if (rc == 0 || rc == -ETIMEDOUT)
			fprintf(stderr, "  forged request %d: get_request returned %d\n", h, rc);
		CHECK(rc < 0 && rc != -ETIMEDOUT);
		if (h == H_HUGETLB || h == H_OVER_CAP) /* refused for what it is */
			CHECK_EQ(rc, -EPROTO);
		CHECK(c == NULL);
		if (s >= 0)
			close(s);
	}
	/* Silent connections fill the pending list: once they are a second old
	 * the listener still serves an honest client (the oldest silent one
	 * makes room; before, the honest one was dropped until their 30 s ran
	 * out). A connection younger than that is not given up: a flood of
	 * fresh ones cannot push out a client about to speak. */
	{
		struct rdmem_conn *none = NULL;
		int silent[SHMFAB_MAX_PENDING], n = 0;
		char priv[64];
		size_t plen = sizeof(priv);

		for (int i = 0; i < SHMFAB_MAX_PENDING; i++)
			if ((silent[n] = t_raw_dial(port)) >= 0)
				n++;
		CHECK_EQ(n, SHMFAB_MAX_PENDING);
		/* All taken onto the list; none spoke. */
		CHECK_EQ(rdmem_fab_get_request(l, NULL, &none, priv, &plen), -EAGAIN);
		usleep(1100 * 1000);
		p = (struct t_pair){ .l = l, .port = port };
		CHECK_EQ(t_connect(&p, NULL, 0, 0, NULL, NULL, NULL), 0);
		CHECK_EQ(p.srv.rc, 0);
		t_pair_close(&p); /* closes the listener too */
		for (int i = 0; i < n; i++)
			close(silent[i]);
	}
	CHECK_EQ(proc_fd_count(getpid()), fds0);
	CHECK_EQ(t_count_maps(), maps0);
}

/*
 * A side maps at most attr.max_peer_bytes of the peer's regions in all: the
 * same honest request (one 4 KiB region) is refused at 4095 and taken at
 * 4096; and in number (each region is a mapping of its own). rdmem-server
 * sets them to the largest response region an agent may register
 * (rdmem_max_resp_region) and one region: a peer declaring 8 GiB, or two
 * regions, is refused before anything is mapped, said and counted. Before,
 * a peer's 64 regions of up to 1 TiB each were all mapped: a review filled
 * the server's address space (128 TiB) from 3 sessions, and every later
 * session failed.
 */
/* Forged request h to a listener taking attr: get_request's return (a conn
 * it makes is rejected; none is made on an error). */
static int t_request_under(struct rdmem_listener *l, uint16_t port, int h,
			   const struct rdmem_fab_attr *attr)
{
	struct rdmem_conn *c = NULL;
	char priv[64];
	size_t plen = sizeof(priv);
	int s = t_forge(port, h), rc = t_get_request(l, attr, &c, priv, &plen);

	CHECK(rc == 0 || c == NULL);
	if (c)
		rdmem_fab_reject(c, NULL, 0);
	if (s >= 0)
		close(s);
	return rc;
}

static void test_peer_bytes_cap(void)
{
	struct rdmem_listener *l;
	struct proc server;
	char bin[512], sp[16], tp[16], stats[1 << 16];
	char *argv[] = {
		bin, "-b", "127.0.0.1", "-p", sp, "--tcp-port", tp, "--fabric", "shm", NULL
	};
	uint16_t port;
	int s, seen = 0;

	REQUIRE((l = t_listen(&port)) != NULL);
	CHECK_EQ(
	    t_request_under(l, port, H_NCASES, &(struct rdmem_fab_attr){ .max_peer_bytes = 4095 }),
	    -EPROTO);
	CHECK_EQ(
	    t_request_under(l, port, H_NCASES, &(struct rdmem_fab_attr){ .max_peer_bytes = 4096 }),
	    0);
	/* And in number: two honest regions, one allowed, then two. */
	CHECK_EQ(t_request_under(l, port, H_TWO_REGIONS,
				 &(struct rdmem_fab_attr){ .max_peer_regions = 1 }),
		 -EPROTO);
	CHECK_EQ(t_request_under(l, port, H_TWO_REGIONS,
				 &(struct rdmem_fab_attr){ .max_peer_regions = 2 }),
		 0);
	rdmem_fab_listener_close(l);

	port = (uint16_t)proc_free_port_pair();
	snprintf(bin, sizeof(bin), "%s/rdmem-server", proc_bin());
	snprintf(sp, sizeof(sp), "%u", port);
	snprintf(tp, sizeof(tp), "%u", port + 1);
	REQUIRE(proc_start(&server, "server", argv, "listening shm", 10000) == 0);
	s = t_forge(port, H_BIG_REGION);
	CHECK(s >= 0);
	for (int i = 0; i < 100 && !(seen = proc_log_has(&server, "more than the")); i++)
		proc_sleep_ms(20);
	CHECK(seen);
	if (s >= 0)
		close(s);
	s = t_forge(port, H_TWO_REGIONS); /* an agent registers one area for it */
	for (int i = 0; i < 100 && !(seen = proc_log_has(&server, "declares 2 regions")); i++)
		proc_sleep_ms(20);
	CHECK(seen);
	CHECK(e2e_server_json_at(port + 1, stats, sizeof(stats)) == 0 &&
	      e2e_json_num(stats, "net.rdma_bad_requests") == 2);
	if (s >= 0)
		close(s);
	CHECK_EQ(proc_stop(&server, SIGTERM, 5000), 0);
}

enum { S_GARBAGE, S_REJECT_LONG, S_ACCEPT_NO_FDS, S_CLOSE, S_SILENT, S_NCASES };

struct t_rawsrv {
	int lsock, mode;
};

static void *t_rawsrv_main(void *arg)
{
	struct t_rawsrv *r = arg;
	union {
		char b[CMSG_SPACE(sizeof(int) * SHMFAB_MAX_FDS)];
		struct cmsghdr a;
	} u;
	struct shmfab_msg m;
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)
	};
	int s = accept4(r->lsock, NULL, NULL, SOCK_CLOEXEC);

	if (s < 0)
		return NULL;
	if (recvmsg(s, &mh, MSG_CMSG_CLOEXEC) > 0) {
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
			for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
				close(((int *)(void *)CMSG_DATA(cm))[i]);
	}
	memset(&m, 0, sizeof(m));
	m.hdr = (struct shmfab_hello){ .magic = SHMFAB_MAGIC,
				       .version = SHMFAB_VERSION,
				       .type = SHMFAB_MSG_REJECT,
				       .priv_len = 200 };
	if (r->mode == S_GARBAGE)
		t_raw_send(s, "nonsense", 8, NULL, 0);
	else if (r->mode == S_REJECT_LONG)
		t_raw_send(s, &m, sizeof(m.hdr), NULL, 0);
	else if (r->mode == S_ACCEPT_NO_FDS) {
		m.hdr.type = SHMFAB_MSG_ACCEPT;
		m.hdr.priv_len = 0;
		m.hdr.rq_cap = 4;
		t_raw_send(s, &m, sizeof(m.hdr), NULL, 0);
	}
	if (r->mode == S_SILENT)
		usleep(400 * 1000);
	close(s);
	return NULL;
}

/* A bare listener on the shm socket name of a free port. */
static int t_raw_listen(uint16_t *port)
{
	for (int i = 0; i < 64; i++) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), k;

		*port = t_port_next++;
		k = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1, "rdmem-shm:%u", *port);
		if (s >= 0 &&
		    bind(s, (struct sockaddr *)&sun,
			 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k)) == 0)
			return s;
		if (s >= 0)
			close(s);
	}
	return -1;
}

static void test_hostile_server(void)
{
	static const int want[S_NCASES] = { -EPROTO, -EPROTO, -EPROTO, -ECONNRESET, -ETIMEDOUT };
	int fds0 = proc_fd_count(getpid());

	for (int mode = 0; mode < S_NCASES; mode++) {
		struct t_rawsrv r = { .mode = mode };
		struct rdmem_conn *c = NULL;
		char peer[256];
		size_t plen = sizeof(peer);
		uint16_t port = 0;
		pthread_t th;

		r.lsock = t_raw_listen(&port);
		REQUIRE(r.lsock >= 0);
		T_OK(listen(r.lsock, 4));
		T_OK(pthread_create(&th, NULL, t_rawsrv_main, &r));
		CHECK_EQ(rdmem_fab_resolve(RDMEM_FAB_SHM, "::1", port, NULL, T_TIMEOUT, &c), 0);
		if (c)
			CHECK_EQ(rdmem_fab_connect(c, "hi", 2, peer, &plen, 200), want[mode]);
		pthread_join(th, NULL);
		rdmem_fab_close(c);
		close(r.lsock);
	}
	CHECK_EQ(proc_fd_count(getpid()), fds0);
}

int main(void)
{
	RUN(test_hostile_handshake);
	RUN(test_peer_bytes_cap);
	RUN(test_hostile_server);
	return check_done();
}
