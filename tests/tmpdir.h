/* tmpdir.h - where a test keeps its files: $TMPDIR when it is an absolute
 * path short enough for a socket path under it, of characters a shell
 * command may carry unquoted (tests pass it to system()), and a directory
 * no other user may create names in; else a directory
 * of the test's own, made once under /tmp with mkdtemp and exported as
 * TMPDIR to the daemons and scripts the test starts.
 *
 * scripts/run-tests.sh points TMPDIR at a directory of its own; a test run
 * by hand makes one here. Either way the directory is mode 0711 (other
 * users may reach a path in it but create nothing), so a name a test makes
 * from its pid cannot be created first by another user, as it could in
 * /tmp. A directory made here is removed at exit when the test left it
 * empty; otherwise it stays, with the daemons' logs, and its name is on
 * stderr.
 */
#ifndef RDMEM_TEST_TMPDIR_H
#define RDMEM_TEST_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char test_tmpdir_made[32];
static pid_t test_tmpdir_owner;

/* A directory only we (or root) may create names in: not /tmp itself, nor
 * any other shared directory TMPDIR may name (containers often set
 * TMPDIR=/tmp). */
static inline int test_tmpdir_usable(const char *d)
{
	struct stat st;

	return d && d[0] == '/' && strlen(d) < 40 &&
	       strspn(d, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-") ==
		   strlen(d) &&
	       lstat(d, &st) == 0 && S_ISDIR(st.st_mode) &&
	       (st.st_uid == geteuid() || st.st_uid == 0) && !(st.st_mode & 022);
}

static inline void test_tmpdir_cleanup(void)
{
	/* Only the process that made it (not a forked child that exits), and
	 * only while empty. */
	if (test_tmpdir_owner == getpid() && rmdir(test_tmpdir_made) < 0)
		fprintf(stderr, "# test files kept in %s\n", test_tmpdir_made);
}

static inline const char *test_tmpdir(void)
{
	const char *d = getenv("TMPDIR");

	if (test_tmpdir_usable(d))
		return d;
	snprintf(test_tmpdir_made, sizeof(test_tmpdir_made), "/tmp/rdmem-test-XXXXXX");
	if (!mkdtemp(test_tmpdir_made) || chmod(test_tmpdir_made, 0711) < 0 ||
	    setenv("TMPDIR", test_tmpdir_made, 1) < 0) {
		fprintf(stderr, "# cannot make a test directory under /tmp: %m\n");
		exit(2);
	}
	test_tmpdir_owner = getpid();
	atexit(test_tmpdir_cleanup);
	return test_tmpdir_made;
}

#endif
