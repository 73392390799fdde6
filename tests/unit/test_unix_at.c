/* test_unix_at.c - a Unix socket bound in a directory held by descriptor
 * (agent/unix_at.c), as --resp-socket and the front door bind theirs.
 *
 * The attack it stops: the agent checks the socket's directory, and a user
 * who may rename a directory above it swaps the checked one for their own,
 * with a link at the socket's name, before the bind and chmod. Bound by
 * path, the root agent then chmod-ed the link's target 0660 (a review did
 * it to a 0600 file of root's). Here the test plays that user between
 * rdmem_unix_at_open and rdmem_unix_at_bind: the socket must land in the
 * directory that was checked, wherever it moved, and the target keep its
 * mode. Also: a link planted at the name is not bound through nor removed,
 * the name is removed only while it holds our socket, and the path forms
 * ("name", "dir/", too long) are handled. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/unix_at.h"
#include "rdmem/util.h"
#include "tests/check.h"

static char base[] = "/tmp/rdmem-unix-at-XXXXXX";
static char victim[128];

static mode_t mode_of(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 ? st.st_mode : 0;
}

static int new_socket(void)
{
	return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

static void path_of(char *out, size_t cap, const char *rel)
{
	snprintf(out, cap, "%s/%s", base, rel);
}

static void test_directory_swapped_after_the_check(void)
{
	char dir[160], moved[160], sock[200], old_sock[200];
	struct rdmem_unix_at at;
	struct stat st;
	int fd = new_socket();

	path_of(dir, sizeof(dir), "d");
	path_of(moved, sizeof(moved), "d.old");
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	snprintf(old_sock, sizeof(old_sock), "%s/s.sock", moved);
	REQUIRE(fd >= 0 && mkdir(dir, 0755) == 0);
	REQUIRE(rdmem_unix_at_open("--test", sock, &at) == 0);
	/* The other user's move: the checked directory away, theirs in its
	 * place with a link at the socket's name. */
	REQUIRE(rename(dir, moved) == 0 && mkdir(dir, 0755) == 0 && symlink(victim, sock) == 0);
	CHECK_EQ(rdmem_unix_at_bind(&at, fd, 0660, (gid_t)-1, &st), 0);
	CHECK_EQ(mode_of(victim) & 07777, 0600);
	CHECK(S_ISSOCK(mode_of(old_sock)) && (mode_of(old_sock) & 07777) == 0660);
	CHECK(S_ISLNK(mode_of(sock)));
	rdmem_unix_at_unlink(&at, &st);
	CHECK_EQ(mode_of(old_sock), 0);
	CHECK(S_ISLNK(mode_of(sock))); /* theirs stays */
	rdmem_unix_at_close(&at);
	close(fd);
}

static void test_link_at_the_name_not_bound_through(void)
{
	char sock[200];
	struct rdmem_unix_at at;
	struct stat st;
	int fd = new_socket();

	path_of(sock, sizeof(sock), "planted.sock");
	REQUIRE(fd >= 0 && symlink(victim, sock) == 0);
	REQUIRE(rdmem_unix_at_open("--test", sock, &at) == 0);
	CHECK_EQ(rdmem_unix_at_bind(&at, fd, 0660, (gid_t)-1, &st), -EADDRINUSE);
	CHECK_EQ(mode_of(victim) & 07777, 0600);
	rdmem_unix_at_unlink(&at, &st); /* nothing of ours there: nothing removed */
	CHECK(S_ISLNK(mode_of(sock)));
	rdmem_unix_at_close(&at);
	close(fd);
}

/* Another agent took the name since (removed ours, bound its own): ours
 * going away leaves theirs. */
static void test_unlink_only_our_socket(void)
{
	char sock[200];
	struct rdmem_unix_at at, other;
	struct stat st, st2;
	int fd = new_socket(), fd2 = new_socket();

	path_of(sock, sizeof(sock), "shared.sock");
	REQUIRE(fd >= 0 && fd2 >= 0);
	REQUIRE(rdmem_unix_at_open("--test", sock, &at) == 0);
	REQUIRE(rdmem_unix_at_open("--test", sock, &other) == 0);
	REQUIRE(rdmem_unix_at_bind(&at, fd, 0600, (gid_t)-1, &st) == 0);
	REQUIRE(unlink(sock) == 0);
	REQUIRE(rdmem_unix_at_bind(&other, fd2, 0600, (gid_t)-1, &st2) == 0);
	rdmem_unix_at_unlink(&at, &st);
	CHECK(S_ISSOCK(mode_of(sock)));
	rdmem_unix_at_unlink(&other, &st2);
	CHECK_EQ(mode_of(sock), 0);
	rdmem_unix_at_close(&at);
	rdmem_unix_at_close(&other);
	close(fd);
	close(fd2);
}

static void test_path_forms(void)
{
	char long_name[RDMEM_UNIX_NAME_MAX + 8];
	struct rdmem_unix_at at;
	struct stat st;
	int fd = new_socket();

	REQUIRE(fd >= 0 && chdir(base) == 0);
	/* A bare name: the working directory. */
	CHECK_EQ(rdmem_unix_at_open("--test", "bare.sock", &at), 0);
	CHECK_EQ(rdmem_unix_at_bind(&at, fd, 0660, (gid_t)-1, &st), 0);
	CHECK(S_ISSOCK(mode_of("bare.sock")));
	rdmem_unix_at_unlink(&at, &st);
	rdmem_unix_at_close(&at);
	CHECK_EQ(rdmem_unix_at_open("--test", "dir/", &at), -EINVAL);
	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	CHECK_EQ(rdmem_unix_at_open("--test", long_name, &at), -ENAMETOOLONG);
	/* Short enough for a sun_path alone, too long behind /proc/self/fd/N/. */
	long_name[95] = '\0';
	CHECK_EQ(rdmem_unix_at_open("--test", long_name, &at), -ENAMETOOLONG);
	CHECK_EQ(at.dirfd, -1);
	CHECK_EQ(rdmem_unix_at_open("--test", "/nonexistent-dir-rdmem/x.sock", &at), -ENOENT);
	/* A path no client could connect to (over a sun_path), though its name
	 * alone would fit. */
	{
		char deep[200];

		memset(deep, 'd', sizeof(deep));
		deep[0] = '/';
		deep[150] = '/';
		memcpy(deep + 151, "x.sock", 7);
		CHECK_EQ(rdmem_unix_at_open("--test", deep, &at), -ENAMETOOLONG);
	}
	close(fd);
}

int main(void)
{
	int fd;

	rdmem_log_init("test_unix_at", 0);
	if (!mkdtemp(base))
		return 1;
	path_of(victim, sizeof(victim), "victim");
	fd = open(victim, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return 1;
	close(fd);
	RUN(test_directory_swapped_after_the_check);
	RUN(test_link_at_the_name_not_bound_through);
	RUN(test_unlink_only_our_socket);
	RUN(test_path_forms);
	{
		char cmd[200];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
		if (system(cmd) != 0)
			fprintf(stderr, "  could not remove %s\n", base);
	}
	return check_done();
}
