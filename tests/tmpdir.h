/* tmpdir.h - where a test keeps its files: $TMPDIR when it is an absolute
 * path short enough for a socket path under it and of characters a shell
 * command may carry unquoted (tests pass it to system()), else /tmp.
 * scripts/run-tests.sh
 * points TMPDIR at a directory of its own (mode 0711: other users may reach
 * a path in it but create nothing), so a name a test makes from its pid
 * cannot be created first by another user, as it could in /tmp. */
#ifndef RDMEM_TEST_TMPDIR_H
#define RDMEM_TEST_TMPDIR_H

#include <stdlib.h>
#include <string.h>

static inline const char *test_tmpdir(void)
{
	const char *d = getenv("TMPDIR");

	return d && d[0] == '/' && strlen(d) < 40 &&
		       strspn(
			   d,
			   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-") ==
			   strlen(d)
		   ? d
		   : "/tmp";
}

#endif
