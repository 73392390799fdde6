/* door.h - attaching to the front door: a Unix stream socket in a directory
 * the agent owns, a short versioned hello, and the segment handed over as a
 * sealed memfd (SCM_RIGHTS). See docs/architecture.md, "Attach: socket,
 * seals and credentials".
 *
 *   client                                   agent
 *   connect(dir/NAME.sock) ------------->    accept, SO_PEERCRED (pid, uid)
 *   SO_PEERCRED: uid == owner of dir
 *   hello {magic, version, shm version} ->   checked within RDMEM_DOOR_HELLO_NS
 *                                  <------   welcome {client entry, pid word,
 *                                             epoch, sizes} + two memfds:
 *                                             the common part (header, table,
 *                                             ring) and this client's own area,
 *                                             created for this attach
 *   F_GET_SEALS, fstat sizes, reserve the range, map both (shm/segment.h)
 *   ... the connection stays open: its close is the client's death (to the
 *   agent) and the agent's (to the client). The one thing a client sends on
 *   it after the hello is the byte RDMEM_DOOR_TAKE, when the ring was full
 *   and it marked a slot RDMEM_SLOT_NO_ENTRY: "take my marked slots". The
 *   connection is the client's own, so another client can neither send it
 *   in its name nor keep it from arriving, as it can with the shared ring.
 *   Any other byte closes the connection.
 *
 * Header-only so libclient can include it with libc alone.
 */
#ifndef RDMEM_SHM_DOOR_H
#define RDMEM_SHM_DOOR_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "shm/segment.h"

#define RDMEM_DOOR_MAGIC_HELLO	 0x48524f44u /* "DORH" */
#define RDMEM_DOOR_MAGIC_WELCOME 0x57524f44u /* "DORW" */
/* 2: two memfds (common part, the client's own area) and their sizes. */
/* 3: RDMEM_DOOR_TAKE and RDMEM_SLOT_NO_ENTRY. */
#define RDMEM_DOOR_VERSION 3
#define RDMEM_DOOR_TAKE	   't'
/* After reading a take request the agent leaves that connection unread this
 * long (hang-ups aside): a client's next request waits up to this, so that
 * one that makes every byte a read of its own costs the agent at most a
 * read per gap (agent/frontdoor_door.c). */
#define RDMEM_DOOR_TAKE_GAP_NS 2000000ull
#define RDMEM_DOOR_ROOT_DIR    "/run/rdmem"
/* The seals every segment carries: nobody can change its size, or the seals. */
#define RDMEM_DOOR_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
/* A connection that has not sent its whole hello by then is closed. */
#define RDMEM_DOOR_HELLO_NS 1000000000ull
#define RDMEM_DOOR_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

struct rdmem_door_hello {
	uint32_t magic;
	uint16_t version;     /* RDMEM_DOOR_VERSION */
	uint16_t shm_version; /* RDMEM_SHM_VERSION the client maps */
	uint32_t flags;	      /* 0 */
	uint32_t reserved;    /* 0 */
};

struct rdmem_door_welcome {
	uint32_t magic;
	uint16_t version;
	uint16_t shm_version;
	int32_t status;	 /* 0, or a positive errno: no fd then (EUSERS: table full) */
	uint32_t client; /* the client entry the agent assigned */
	int32_t pid;	 /* the entry's pid word: the client's pid as the agent sees it */
	uint32_t gen;
	uint64_t epoch;
	uint64_t size;	      /* the common memfd's size (slots_off): fstat must agree */
	uint64_t client_size; /* the client's own memfd's size: fstat must agree */
	/* The geometry (rdmem_shm_geom_compute): the header, which every client
	 * can write, must agree with it; the client lays itself out by this. */
	uint32_t clients, slots, max_value, reserved;
};

/*
 * The socket directory when none is given: $XDG_RUNTIME_DIR/rdmem for a
 * user that has one, else /run/rdmem (root's, or one root handed to the
 * agent's user). RDMEM_RUNTIME_DIR overrides both. Never a name in /tmp:
 * anyone can create /tmp/rdmem-<uid> first (sticky /tmp: its owner cannot
 * remove it), and the real agent and its clients would refuse it for good.
 * Returns 0 or -ENAMETOOLONG.
 */
static inline int rdmem_door_default_dir(uid_t uid, char *out, size_t cap)
{
	const char *env = getenv("RDMEM_RUNTIME_DIR"), *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (env && env[0] == '/')
		n = snprintf(out, cap, "%s", env);
	else if (uid == 0)
		n = snprintf(out, cap, "%s", RDMEM_DOOR_ROOT_DIR);
	else if (xdg && xdg[0] == '/')
		n = snprintf(out, cap, "%s/rdmem", xdg);
	else
		n = snprintf(out, cap, "%s", RDMEM_DOOR_ROOT_DIR);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* True for a name that is already a socket path: '/' and at least one more '/'. */
static inline int rdmem_door_is_path(const char *name)
{
	return name && name[0] == '/' && strchr(name + 1, '/');
}

/*
 * The socket of a front door: name itself when it is a path, else
 * <dir>/<name without '/'>.sock in dir (NULL: the default for uid).
 * Returns 0, -EINVAL (bad name) or -ENAMETOOLONG (over sun_path).
 */
static inline int rdmem_door_path(const char *name, const char *dir, uid_t uid, char *out,
				  size_t cap)
{
	char norm[RDMEM_SHM_NAME_MAX + 1], def[RDMEM_DOOR_PATH_MAX];
	int n;

	if (cap > RDMEM_DOOR_PATH_MAX)
		cap = RDMEM_DOOR_PATH_MAX;
	if (rdmem_door_is_path(name)) {
		n = snprintf(out, cap, "%s", name);
		return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
	}
	if (rdmem_shm_name_norm(name ? name : RDMEM_SHM_DEFAULT_NAME, norm, sizeof(norm)))
		return -EINVAL;
	if (!dir) {
		if (rdmem_door_default_dir(uid, def, sizeof(def)))
			return -ENAMETOOLONG;
		dir = def;
	}
	n = snprintf(out, cap, "%s%s.sock", dir, norm);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* The directory part of a socket path ("/" for "/x"). Returns 0 or -EINVAL. */
static inline int rdmem_door_dir_of(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t len;

	if (!slash)
		return -EINVAL;
	len = slash == path ? 1 : (size_t)(slash - path);
	if (len + 1 > cap)
		return -ENAMETOOLONG;
	memcpy(out, path, len);
	out[len] = '\0';
	return 0;
}

/* A directory (not a link) nobody but its owner may write. */
static inline int rdmem_door_dir_private(const char *dir, struct stat *st)
{
	if (lstat(dir, st) < 0)
		return -errno;
	return S_ISDIR(st->st_mode) && !(st->st_mode & (S_IWGRP | S_IWOTH)) ? 0 : -EPERM;
}

/*
 * The client's rule for a socket directory: a directory (not a link)
 * writable by nobody but its owner, and owned by root, by the caller, or by
 * anyone when its parent is root's and equally private (so only root can
 * have given it out: systemd's RuntimeDirectory= for a service user). Its
 * owner is the only uid the client accepts as the agent. Returns 0 and the
 * owner, -EPERM (see the rule) or -errno of lstat.
 */
static inline int rdmem_door_dir_trusted(const char *dir, uid_t me, uid_t *owner)
{
	char parent[RDMEM_DOOR_PATH_MAX];
	struct stat st, pst;
	int rc = rdmem_door_dir_private(dir, &st);

	if (rc)
		return rc;
	if (st.st_uid != 0 && st.st_uid != me &&
	    (rdmem_door_dir_of(dir, parent, sizeof(parent)) ||
	     rdmem_door_dir_private(parent, &pst) || pst.st_uid != 0))
		return -EPERM;
	*owner = st.st_uid;
	return 0;
}

/*
 * The uid the kernel shows for any uid the caller's user namespace does not
 * map (/proc/sys/kernel/overflowuid, 65534 unless changed). Inside
 * `unshare -U` with no mapping written, every other user's files and
 * sockets, and the caller itself, read as this uid, so "owner == me" and
 * "peer == owner" would hold for anyone's socket: no identity check may
 * accept it.
 */
static inline uid_t rdmem_door_overflow_uid(void)
{
	FILE *f = fopen("/proc/sys/kernel/overflowuid", "re");
	unsigned v = 65534;

	if (f) {
		if (fscanf(f, "%u", &v) != 1)
			v = 65534;
		fclose(f);
	}
	return (uid_t)v;
}

/*
 * A stream socket connected to path, with tv as its send and receive
 * timeouts, or -errno (-ETIMEDOUT: no room in time). The timeouts go on
 * before connect: a stopped agent's full backlog blocks connect, and an
 * AF_UNIX connect waits at most SO_SNDTIMEO.
 */
static inline int rdmem_door_connect(const char *path, const struct timeval *tv)
{
	struct sockaddr_un sa = { AF_UNIX, { 0 } };
	size_t len = strlen(path);
	int s, rc;

	if (len >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, len + 1);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, tv, sizeof(*tv)) < 0 ||
	    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, tv, sizeof(*tv)) < 0 ||
	    connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
		close(s);
		return rc;
	}
	return s;
}

/*
 * Receives up to len bytes and at most nfd fds (SCM_RIGHTS, close-on-exec)
 * into fds, in the order sent; missing ones are -1. Extra fds are closed;
 * truncated control data fails. Returns the bytes read, or -errno / -EPROTO.
 */
static inline ssize_t rdmem_door_recv(int sock, void *buf, size_t len, int *fds, size_t nfd)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { buf, len };
	struct msghdr msg;
	struct cmsghdr *c;
	size_t got_n = 0, i;
	ssize_t n;

	for (i = 0; i < nfd; i++)
		fds[i] = -1;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		size_t k, cnt;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < cnt; k++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
			if (got_n < nfd)
				fds[got_n++] = got;
			else
				close(got);
		}
	}
	if (msg.msg_flags & MSG_CTRUNC) {
		for (i = 0; i < nfd; i++)
			if (fds[i] >= 0) {
				close(fds[i]);
				fds[i] = -1;
			}
		return -EPROTO;
	}
	return n;
}

#endif
