/* hook.h - the optional post-commit hook (--image-hook CMD).
 *
 * After an image is committed the server runs CMD with the final path as its
 * argument, in the background: the RPC loop never waits for it. Finished
 * hooks are reaped from the service tick; their exit status and (truncated)
 * output go to the log and the counters. At most RDMEM_HOOK_MAX_RUNNING run
 * at once, RDMEM_HOOK_QUEUE more wait their turn; one running past its
 * timeout is killed with its process group (a hook that hangs, say on a
 * crafted image, would otherwise hold its place for good).
 */
#ifndef RDMEM_SERVER_HOOK_H
#define RDMEM_SERVER_HOOK_H

#include <stdint.h>

#define RDMEM_HOOK_MAX_RUNNING	   8u	   /* hooks at once */
#define RDMEM_HOOK_QUEUE	   64u	   /* commits waiting for one; more are failures */
#define RDMEM_HOOK_OUTPUT_MAX	   2048u   /* bytes of output kept for the log line */
#define RDMEM_HOOK_DEFAULT_TIMEOUT 300000u /* ms (--image-hook-timeout) */

struct rdmem_hook;

struct rdmem_hook_stats {
	uint64_t runs;	    /* started */
	uint64_t failures;  /* could not start or wait, or exited non-zero / by a signal */
	uint64_t timed_out; /* of the failures, killed past the timeout */
	uint64_t running;
	uint64_t waiting; /* commits whose hook waits for a place */
};

/* timeout_ms: a hook running longer is killed (SIGKILL to its process group). */
int rdmem_hook_create(const char *cmd, uint32_t timeout_ms, struct rdmem_hook **out);
/* Terminates hooks still running (SIGTERM) and reaps them. */
void rdmem_hook_destroy(struct rdmem_hook *h);
/* Starts CMD <path>, or queues it while RDMEM_HOOK_MAX_RUNNING run; 0 or
 * -errno (the failure is counted and logged). */
int rdmem_hook_run(struct rdmem_hook *h, const char *path);
/* Collects output, reaps finished hooks, kills those past the timeout and
 * starts waiting ones; never blocks. Returns how many run or wait (the
 * caller reaps again soon while any does). */
unsigned rdmem_hook_reap(struct rdmem_hook *h);
void rdmem_hook_stats(struct rdmem_hook *h, struct rdmem_hook_stats *out);

#endif
