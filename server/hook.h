/* hook.h - the optional post-commit hook (--image-hook CMD).
 *
 * After an image is committed the server runs CMD with the final path as its
 * argument, in the background: the RPC loop never waits for it. Finished
 * hooks are reaped from the service tick; their exit status and (truncated)
 * output go to the log and the counters.
 */
#ifndef RDMEM_SERVER_HOOK_H
#define RDMEM_SERVER_HOOK_H

#include <stdint.h>

#define RDMEM_HOOK_MAX_RUNNING 8u    /* more commits meanwhile are counted as failures */
#define RDMEM_HOOK_OUTPUT_MAX  2048u /* bytes of output kept for the log line */

struct rdmem_hook;

struct rdmem_hook_stats {
	uint64_t runs;	   /* started */
	uint64_t failures; /* could not start, or exited non-zero / by a signal */
	uint64_t running;
};

int rdmem_hook_create(const char *cmd, struct rdmem_hook **out);
/* Terminates hooks still running (SIGTERM) and reaps them. */
void rdmem_hook_destroy(struct rdmem_hook *h);
/* Starts CMD <path>; 0 or -errno (the failure is counted and logged). */
int rdmem_hook_run(struct rdmem_hook *h, const char *path);
/* Collects output and reaps finished hooks; never blocks. Returns how many
 * still run (the caller reaps again soon while any does). */
unsigned rdmem_hook_reap(struct rdmem_hook *h);
void rdmem_hook_stats(struct rdmem_hook *h, struct rdmem_hook_stats *out);

#endif
