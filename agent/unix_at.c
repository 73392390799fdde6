/* unix_at.c - binding a Unix socket in a directory held by descriptor.
 *
 * bind() and chmod() take a path, and a path is looked up again at every
 * call: a user who can rename any directory on it could swap the checked
 * directory, or the socket, for their own between the two, and a root agent
 * would chmod whatever file their link names. So the directory is opened
 * once (O_PATH) and checked on that descriptor by the caller; bind goes
 * through /proc/self/fd/<dirfd>/<name>, which resolves to that directory
 * wherever it has been moved, and the mode and group are set with fchmodat
 * and fchownat relative to it, never following a link. */
#include "agent/unix_at.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdmem/util.h"

int rdmem_unix_at_open(const char *flag, const char *path, struct rdmem_unix_at *at)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	char dir[sizeof(at->via.sun_path)];
	size_t dlen = slash ? (size_t)(slash - path) : 0;
	int n;

	at->dirfd = -1;
	if (strlen(path) >= sizeof(at->via.sun_path)) { /* clients connect by path */
		rdmem_err("%s %s: path over %zu bytes", flag, path, sizeof(at->via.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	if (!*name || strlen(name) >= sizeof(at->name) || dlen >= sizeof(dir)) {
		rdmem_err("%s %s: %s", flag, path,
			  *name ? "name or directory too long" : "names no socket (ends in '/')");
		return *name ? -ENAMETOOLONG : -EINVAL;
	}
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", dlen ? (int)dlen : 1, dlen ? path : "/");
	snprintf(at->name, sizeof(at->name), "%s", name);
	at->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (at->dirfd < 0) {
		n = -errno;
		rdmem_err("%s %s: directory %s: %s", flag, path, dir, strerror(-n));
		return n;
	}
	at->via = (struct sockaddr_un){ .sun_family = AF_UNIX };
	n = snprintf(at->via.sun_path, sizeof(at->via.sun_path), "/proc/self/fd/%d/%s", at->dirfd,
		     at->name);
	if (n < 0 || (size_t)n >= sizeof(at->via.sun_path)) {
		rdmem_err("%s %s: name too long: %zu bytes, at most %zu (bound through "
			  "/proc/self/fd/%d/)",
			  flag, path, strlen(at->name),
			  sizeof(at->via.sun_path) - 1 - (size_t)(n - (int)strlen(at->name)),
			  at->dirfd);
		rdmem_unix_at_close(at);
		return -ENAMETOOLONG;
	}
	return 0;
}

void rdmem_unix_at_close(struct rdmem_unix_at *at)
{
	if (at->dirfd >= 0)
		close(at->dirfd);
	at->dirfd = -1;
}

int rdmem_unix_at_bind(const struct rdmem_unix_at *at, int fd, mode_t mode, gid_t group,
		       struct stat *st)
{
	memset(st, 0, sizeof(*st)); /* matches no file until bound */
	if (bind(fd, (const struct sockaddr *)&at->via, sizeof(at->via)) < 0 ||
	    fstatat(at->dirfd, at->name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	/* The name is ours now: in a directory nobody else may write (or a
	 * sticky one, where nobody else may rename our file) it stays so. No
	 * link is followed even so. */
	if (fchmodat(at->dirfd, at->name, mode, AT_SYMLINK_NOFOLLOW) < 0 ||
	    (group != (gid_t)-1 &&
	     fchownat(at->dirfd, at->name, (uid_t)-1, group, AT_SYMLINK_NOFOLLOW) < 0))
		return -errno;
	return 0;
}

void rdmem_unix_at_unlink(const struct rdmem_unix_at *at, const struct stat *st)
{
	struct stat now;

	if (at->dirfd >= 0 && fstatat(at->dirfd, at->name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
	    now.st_dev == st->st_dev && now.st_ino == st->st_ino)
		unlinkat(at->dirfd, at->name, 0);
}
