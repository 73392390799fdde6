/* unix_at.h - Unix sockets bound in a directory held by descriptor
 * (agent/unix_at.c): --resp-socket and the front door's --socket. */
#ifndef RDMEM_AGENT_UNIX_AT_H
#define RDMEM_AGENT_UNIX_AT_H

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

/* A socket's own name in its directory, NUL included. Bound through
 * /proc/self/fd/<dirfd>/<name>, which must fit a sun_path too: about 88
 * bytes of name. */
#define RDMEM_UNIX_NAME_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

/* A socket path split into its directory, held open (O_PATH), and its name.
 * Every later step (the caller's checks with fstat on dirfd, bind, chmod,
 * unlink) goes through dirfd, so renaming a directory on the path after the
 * check changes nothing: the path is looked up once. */
struct rdmem_unix_at {
	int dirfd;
	char name[RDMEM_UNIX_NAME_MAX];
	struct sockaddr_un via; /* /proc/self/fd/<dirfd>/<name>: bind and connect here */
};

/* Opens path's directory and fills at; flag names the option in errors.
 * -ENAMETOOLONG, -EINVAL (no name: path ends in '/'), or open's -errno. */
int rdmem_unix_at_open(const char *flag, const char *path, struct rdmem_unix_at *at);
void rdmem_unix_at_close(struct rdmem_unix_at *at);
/* Binds fd at->name, then gives the socket file mode and (group != -1) the
 * group, never through a link; *st: the file bound (zeroes when bind failed),
 * to tell later whether the name still holds it. -errno. */
int rdmem_unix_at_bind(const struct rdmem_unix_at *at, int fd, mode_t mode, gid_t group,
		       struct stat *st);
/* Removes the name if it still holds the file st describes (another agent
 * may have bound its own there since). */
void rdmem_unix_at_unlink(const struct rdmem_unix_at *at, const struct stat *st);

#endif
