/* conf_file.c - reading a file named on the command line (--secret-file,
 * --tls-cert, --tls-key, --tls-ca): checked and read through one open file
 * description, so nothing can swap the file between the check and the read.
 *
 * The file is opened O_PATH, checked, then reopened for reading: a FIFO
 * planted at the path would block the daemon's start in open until somebody
 * wrote to it, and a device's open has side effects. Each file, and every
 * directory and link met while resolving its path (the links a link leads
 * through included: conf_path_trusted), must belong to this user or root
 * and be writable by nobody else (directories: unless sticky): whoever can
 * change the file, or what the path names, chooses the secret or the CA. A
 * secret (or key) is also closed to group and others, and has one name. */
#include "rdmem/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rdmem_uid_trusted(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

int rdmem_dir_open_to_others(mode_t mode)
{
	return (mode & (S_IWGRP | S_IWOTH)) && !(mode & S_ISVTX);
}

/* One step of a path: a directory ours or root's that nobody else may write
 * (sticky is fine: nobody else may rename what is ours in it), or a link
 * ours or root's (another user's link, say in /tmp, would choose the file).
 * *st: what the step is. */
static int conf_step_trusted(const char *flag, const char *path, const char *step, struct stat *st)
{
	if (lstat(step, st) < 0) {
		int ret = -errno;

		if (!strcmp(step, path))
			rdmem_err("%s %s: %s", flag, path, strerror(-ret));
		else
			rdmem_err("%s %s: %s: %s", flag, path, step, strerror(-ret));
		return ret;
	}
	if (!rdmem_uid_trusted(st->st_uid)) {
		rdmem_err("%s %s: %s is owned by uid %u, not this user (uid %u) or root, who "
			  "could swap the file",
			  flag, path, step, (unsigned)st->st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (S_ISDIR(st->st_mode) && rdmem_dir_open_to_others(st->st_mode)) {
		rdmem_err("%s %s: directory %s is writable by others (mode %04o) and not sticky: "
			  "another user could swap the file; chmod go-w it",
			  flag, path, step, (unsigned)(st->st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* real's parent ("/" stays "/"). */
static void conf_up(char *real)
{
	char *slash = strrchr(real, '/');

	if (slash == real)
		real[1] = '\0';
	else
		*slash = '\0';
}

/* Takes the first component off *rest into comp (cap bytes); 0 when none
 * left, -ENAMETOOLONG for one over cap - 1 bytes (the kernel's answer). */
static int conf_next_component(const char **rest, char *comp, size_t cap)
{
	const char *p = *rest, *end;

	while (*p == '/')
		p++;
	if (!*p)
		return 0;
	end = strchrnul(p, '/');
	if ((size_t)(end - p) >= cap)
		return -ENAMETOOLONG;
	snprintf(comp, cap, "%.*s", (int)(end - p), p);
	*rest = end;
	return 1;
}

/* cur/comp into cur (cur "/" gives "/comp"); -ENAMETOOLONG past PATH_MAX. */
static int conf_join(char *cur, const char *comp)
{
	size_t n = strlen(cur);
	int w = snprintf(cur + n, PATH_MAX - n, "%s%s", n > 1 ? "/" : "", comp);

	return w < 0 || (size_t)w >= PATH_MAX - n ? -ENAMETOOLONG : 0;
}

/* The link at cur sends the walk on: its target, then what was left. */
static int conf_follow(const char *cur, const char *rest, char *pending)
{
	char target[PATH_MAX], tail[PATH_MAX];
	ssize_t n = readlink(cur, target, sizeof(target) - 1);
	int w;

	if (n < 0)
		return -errno;
	target[n] = '\0';
	snprintf(tail, sizeof(tail), "%s", rest);
	w = snprintf(pending, PATH_MAX, "%s%s", target, tail); /* tail: "" or "/..." */
	return w < 0 || w >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/*
 * Resolves path as the kernel will, a step at a time, checking "/", every
 * directory and every link met on the way, the links a link leads through
 * included, and the file's own entry (conf_step_trusted). With every step
 * trusted, nobody else can change what the path names after the check.
 * real: the file reached, a path without links.
 */
static int conf_path_trusted(const char *flag, const char *path, char *real)
{
	char pending[PATH_MAX], comp[NAME_MAX + 1];
	const char *rest;
	struct stat st;
	int links = 0, ret;

	if (path[0] == '/')
		ret = snprintf(pending, sizeof(pending), "%s", path);
	else if (getcwd(real, PATH_MAX))
		ret = snprintf(pending, sizeof(pending), "%s/%s", real, path);
	else
		ret = -1;
	if (ret < 0 || (size_t)ret >= sizeof(pending)) {
		ret = ret < 0 ? -errno : -ENAMETOOLONG; /* before the log call can change errno */
		rdmem_err("%s %s: %s", flag, path, strerror(-ret));
		return ret;
	}
	if ((ret = conf_step_trusted(flag, path, "/", &st)) < 0)
		return ret;
	strcpy(real, "/");
	for (rest = pending; (ret = conf_next_component(&rest, comp, sizeof(comp))) != 0;) {
		if (ret < 0) {
			rdmem_err("%s %s: %s", flag, path, strerror(-ret));
			return ret;
		}
		if (!strcmp(comp, "."))
			continue;
		if (!strcmp(comp, "..")) { /* checked on the way down */
			conf_up(real);
			continue;
		}
		if ((ret = conf_join(real, comp)) < 0 ||
		    (ret = conf_step_trusted(flag, path, real, &st)) < 0)
			return ret;
		if (!S_ISLNK(st.st_mode) && !S_ISDIR(st.st_mode) && *rest) {
			rdmem_err("%s %s: %s is not a directory", flag, path, real);
			return -ENOTDIR; /* "file/x", "file/": as the kernel says */
		}
		if (!S_ISLNK(st.st_mode))
			continue;
		if (++links > 40 || (ret = conf_follow(real, rest, pending)) < 0) {
			ret = links > 40 ? -ELOOP : ret;
			rdmem_err("%s %s: %s", flag, path, strerror(-ret));
			return ret;
		}
		rest = pending;
		if (pending[0] == '/')
			strcpy(real, "/");
		else
			conf_up(real); /* a relative target starts at the link's directory */
	}
	return 0;
}

static int conf_file_check(const char *flag, const char *path, int fd, int secret, size_t max,
			   struct stat *st)
{
	if (fstat(fd, st) < 0) {
		int ret = -errno;

		rdmem_err("%s %s: %s", flag, path, strerror(-ret));
		return ret;
	}
	if (!S_ISREG(st->st_mode)) {
		rdmem_err("%s %s: not a regular file", flag, path);
		return -EINVAL;
	}
	if (!rdmem_uid_trusted(st->st_uid)) {
		rdmem_err("%s %s: owned by uid %u, not by this user (uid %u) or root; whoever "
			  "owns it chose what it says",
			  flag, path, (unsigned)st->st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (secret && (st->st_mode & (S_IRWXG | S_IRWXO))) {
		rdmem_err("%s %s: readable by others (mode %03o); chmod 600 it", flag, path,
			  (unsigned)(st->st_mode & 0777));
		return -EPERM;
	}
	if (!secret && (st->st_mode & (S_IWGRP | S_IWOTH))) {
		rdmem_err("%s %s: writable by others (mode %03o); chmod go-w it", flag, path,
			  (unsigned)(st->st_mode & 0777));
		return -EPERM;
	}
	/* A second name: in a sticky directory (/tmp) another user may have
	 * linked a file of root's whose bytes they know. */
	if (secret && st->st_nlink != 1) {
		rdmem_err("%s %s: has %lu names (hard links); a secret must have one", flag, path,
			  (unsigned long)st->st_nlink);
		return -EPERM;
	}
	if ((uint64_t)st->st_size > max) {
		rdmem_err("%s %s: %llu bytes, over the limit of %zu", flag, path,
			  (unsigned long long)st->st_size, max);
		return -EFBIG;
	}
	return 0;
}

/* O_PATH: nothing of the file is opened yet (opening a device runs its
 * driver: /dev/watchdog arms), only looked at. */
static int conf_open(const char *flag, const char *path, const char *real, int *fd)
{
	*fd = open(real, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (*fd >= 0)
		return 0;
	rdmem_err("%s %s: %s", flag, path, strerror(errno));
	return -errno;
}

/* The file checked, opened for reading through its descriptor: the same
 * file, whatever its path names by now. O_NONBLOCK all the same. */
static int conf_reopen(const char *flag, const char *path, int *fd)
{
	char via[32];
	int rfd;

	snprintf(via, sizeof(via), "/proc/self/fd/%d", *fd);
	rfd = open(via, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (rfd < 0) {
		int ret = -errno;

		rdmem_err("%s %s: reopening it through %s: %s", flag, path, via, strerror(-ret));
		return ret;
	}
	close(*fd);
	*fd = rfd;
	return 0;
}

/* Reads until end of file or max + 1 bytes (a file that grew past the limit
 * after the fstat is still refused). */
static ssize_t conf_file_read_all(int fd, uint8_t *buf, size_t cap)
{
	size_t got = 0;

	while (got < cap) {
		ssize_t n = read(fd, buf + got, cap - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int rdmem_conf_file_read(const char *flag, const char *path, int secret, size_t max, uint8_t **data,
			 size_t *len)
{
	char real[PATH_MAX];
	struct stat st;
	uint8_t *buf;
	ssize_t n;
	int fd, ret;

	if ((ret = conf_path_trusted(flag, path, real)) < 0 ||
	    (ret = conf_open(flag, path, real, &fd)) < 0)
		return ret;
	if ((ret = conf_file_check(flag, path, fd, secret, max, &st)) < 0 ||
	    (ret = conf_reopen(flag, path, &fd)) < 0) {
		close(fd);
		return ret;
	}
	buf = malloc(max + 1);
	if (!buf) {
		rdmem_err("%s %s: out of memory for %zu bytes", flag, path, max + 1);
		close(fd);
		return -ENOMEM;
	}
	n = conf_file_read_all(fd, buf, max + 1);
	close(fd);
	if (n < 0 || (size_t)n > max) {
		rdmem_err("%s %s: %s", flag, path,
			  n < 0 ? strerror((int)-n) : "grew past its limit while read");
		rdmem_conf_file_free(buf, max + 1);
		return n < 0 ? (int)n : -EFBIG;
	}
	*data = buf;
	*len = (size_t)n;
	return 0;
}

void rdmem_conf_file_free(uint8_t *data, size_t len)
{
	if (!data)
		return;
	/* A secret's bytes must not linger in freed heap; volatile so the
	 * compiler cannot drop the stores as dead. */
	for (volatile uint8_t *p = data; len--; p++)
		*p = 0;
	free(data);
}
