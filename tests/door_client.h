/* door_client.h - integration-test helpers for front-door tests, as a client
 * sees the agent: its frontdoor.* counters (rdmem agent-stats) and an echo
 * whose bytes are checked. Header-only, for test programs.
 */
#ifndef RDMEM_TEST_DOOR_CLIENT_H
#define RDMEM_TEST_DOOR_CLIENT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libclient/rdmem.h"
#include "rdmem/util.h"
#include "shm/door.h"

/* A frontdoor.* counter of the agent, as any client reads it; -1 when absent. */
static inline long long door_stat(rdmem_t *h, const char *name)
{
	char key[64], *text = NULL, *p;
	uint32_t len;
	long long v = -1;

	if (rdmem_agent_stats(h, 0, &text, &len, NULL) != 0)
		return -1;
	snprintf(key, sizeof(key), "frontdoor.%s ", name);
	p = strstr(text, key);
	if (p)
		v = strtoll(p + strlen(key), NULL, 10);
	free(text);
	return v;
}

/* Waits up to ms for the counter to read want; true when it does. */
static inline int door_wait_stat(rdmem_t *h, const char *name, long long want, int ms)
{
	uint64_t end = rdmem_now_ns() + (uint64_t)ms * 1000000ull;

	while (door_stat(h, name) != want && rdmem_now_ns() < end)
		usleep(2000);
	return door_stat(h, name) == want;
}

/* An echo of text came back with exactly its bytes. */
static inline int door_echo_ok(rdmem_t *h, const char *text)
{
	void *got = NULL;
	uint32_t len = 0;
	int ok = rdmem_echo(h, text, (uint32_t)strlen(text), &got, &len, NULL) == 0 &&
		 len == strlen(text) && got && !memcmp(got, text, len);

	free(got);
	return ok;
}

/*
 * Attaches to the door at path by hand, as librdmem does, up to the
 * welcome: *w and its two memfds (common part, the client's own area) in
 * fds. Returns the connection (closing it detaches), or -errno / -EPROTO.
 */
static inline int door_raw_attach(const char *path, struct rdmem_door_welcome *w, int fds[2])
{
	struct rdmem_door_hello hello = { RDMEM_DOOR_MAGIC_HELLO, RDMEM_DOOR_VERSION,
					  RDMEM_SHM_VERSION, 0, 0 };
	const struct timeval tv = { 2, 0 };
	int s = rdmem_door_connect(path, &tv);
	ssize_t n;

	fds[0] = fds[1] = -1;
	if (s < 0)
		return s;
	n = send(s, &hello, sizeof(hello), MSG_NOSIGNAL);
	if (n == (ssize_t)sizeof(hello))
		n = rdmem_door_recv(s, w, sizeof(*w), fds, 2);
	if (n == (ssize_t)sizeof(*w) && w->magic == RDMEM_DOOR_MAGIC_WELCOME && !w->status &&
	    fds[0] >= 0 && fds[1] >= 0)
		return s;
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	close(s);
	return n < 0 ? (int)n : n == 0 ? -ECONNRESET : -EPROTO;
}

/* Detaches what door_raw_attach() gave: both memfds and the connection. */
static inline void door_raw_detach(int s, int fds[2])
{
	close(fds[0]);
	close(fds[1]);
	close(s);
}

#endif
