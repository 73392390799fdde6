/* conf_file.c - reading a file named on the command line (--secret-file,
 * --tls-cert, --tls-key, --tls-ca): checked and read through one open file
 * description, so nothing can swap the file between the check and the read.
 *
 * O_NONBLOCK on open: a FIFO planted at the path would otherwise block the
 * daemon's start until somebody opens it for writing. A secret must belong to
 * this user or root (whoever owns it chose the secret and can change it) and
 * be closed to group and others. */
#include "rdmem/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int conf_file_check(const char *flag, const char *path, int fd, int secret,
			   size_t max, struct stat *st)
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
	if (secret && st->st_uid != geteuid() && st->st_uid != 0) {
		rdmem_err("%s %s: owned by uid %u, not by this user (uid %u) or root; whoever "
			  "owns it chose the secret",
			  flag, path, (unsigned)st->st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (secret && (st->st_mode & (S_IRWXG | S_IRWXO))) {
		rdmem_err("%s %s: readable by others (mode %03o); chmod 600 it", flag, path,
			  (unsigned)(st->st_mode & 0777));
		return -EPERM;
	}
	if ((uint64_t)st->st_size > max) {
		rdmem_err("%s %s: %llu bytes, over the limit of %zu", flag, path,
			  (unsigned long long)st->st_size, max);
		return -EFBIG;
	}
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

int rdmem_conf_file_read(const char *flag, const char *path, int secret, size_t max,
			 uint8_t **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), ret;
	struct stat st;
	uint8_t *buf;
	ssize_t n;

	if (fd < 0) {
		ret = -errno;
		rdmem_err("%s %s: %s", flag, path, strerror(-ret));
		return ret;
	}
	if ((ret = conf_file_check(flag, path, fd, secret, max, &st)) < 0) {
		close(fd);
		return ret;
	}
	buf = malloc(max + 1);
	if (!buf) {
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
