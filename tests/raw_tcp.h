/* raw_tcp.h - a test speaking to rdmem-server's TCP port with bare
 * sockets, so it can send any bytes in any grouping (pipelined frames, a
 * frame cut anywhere). Header-only. */
#ifndef RDMEM_TEST_RAW_TCP_H
#define RDMEM_TEST_RAW_TCP_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include "rdmem/wire.h"

/* A connection to addr:port whose receives time out after timeout_s; -1
 * when it cannot be made. */
static inline int raw_tcp_connect(const char *addr, unsigned port, int timeout_s)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { timeout_s, 0 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* A request header as a TCP frame starts (rdmem_frame_put swaps it to the wire). */
static inline struct rdmem_desc raw_tcp_desc(uint16_t op, uint16_t klen, uint32_t vlen, uint64_t id)
{
	struct rdmem_desc d;

	memset(&d, 0, sizeof(d));
	d.state = RDMEM_FRAME_MAGIC;
	d.op = op;
	d.path = RDMEM_PATH_TCP;
	d.key_len = klen;
	d.val_len = vlen;
	d.req_id = id;
	return d;
}

/* len bytes from fd: 0, or -1 at the stream's end, an error or the timeout. */
static inline int raw_tcp_read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(fd, (uint8_t *)buf + got, len - got, 0);

		/* With SO_RCVTIMEO set, recv is not restarted after an interruption,
		 * and one comes with no signal when this thread's io_uring is torn
		 * down (the kernel's exit work reaches it about 15 ms after an
		 * rdmem_tcp_client_close): the stream is intact. */
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

#endif
