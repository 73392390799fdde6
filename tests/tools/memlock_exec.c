/* memlock_exec.c - runs a program under a low locked-memory limit, as an
 * unprivileged service would get it: sets RLIMIT_MEMLOCK to KIB KiB and,
 * when run as root, drops CAP_IPC_LOCK from the bounding set first, so the
 * program it executes is held to the limit too (root with CAP_IPC_LOCK may
 * pin any amount, which would hide the failure the test wants to see).
 *
 *   memlock_exec KIB PROGRAM [ARGS...]
 */
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct rlimit rl;
	char *end;
	unsigned long long kib;

	if (argc < 3) {
		fprintf(stderr, "usage: memlock_exec KIB PROGRAM [ARGS...]\n");
		return 2;
	}
	errno = 0;
	kib = strtoull(argv[1], &end, 10);
	if (errno || *end || end == argv[1]) {
		fprintf(stderr, "memlock_exec: '%s' is not a number of KiB\n", argv[1]);
		return 2;
	}
	/* Without CAP_SETPCAP (not root) there is no CAP_IPC_LOCK to drop either. */
	if (geteuid() == 0 && prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0) < 0) {
		fprintf(stderr, "memlock_exec: dropping CAP_IPC_LOCK: %s\n", strerror(errno));
		return 1;
	}
	rl.rlim_cur = rl.rlim_max = (rlim_t)kib * 1024;
	if (setrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
		fprintf(stderr, "memlock_exec: setrlimit(RLIMIT_MEMLOCK, %llu KiB): %s\n", kib,
			strerror(errno));
		return 1;
	}
	execvp(argv[2], argv + 2);
	fprintf(stderr, "memlock_exec: %s: %s\n", argv[2], strerror(errno));
	return 127;
}
