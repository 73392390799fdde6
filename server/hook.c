/* hook.c - runs --image-hook CMD after a commit, without blocking dispatch.
 *
 * CMD goes through /bin/sh so an operator can pass arguments, and the final
 * path is handed over as "$1" rather than pasted into the command line, so a
 * file name can never inject shell syntax. stdout and stderr share a pipe
 * that the reaper drains without blocking; output beyond what the log line
 * keeps is read and dropped, so a chatty hook never stalls on a full pipe
 * for longer than one tick. Each hook leads a process group of its own, so
 * the timeout kills what it started too.
 */
#include "server/hook.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdmem/util.h"

extern char **environ;

struct hook_job {
	pid_t pid; /* 0: free */
	uint64_t started_ns;
	int killed; /* past the timeout: SIGKILL sent */
	int out_fd;
	uint32_t out_len;
	char out[RDMEM_HOOK_OUTPUT_MAX];
	char path[256]; /* for the log line; truncated if longer */
};

struct rdmem_hook {
	pthread_mutex_t lock;
	char *script; /* CMD "$1" */
	uint64_t timeout_ns;
	struct hook_job jobs[RDMEM_HOOK_MAX_RUNNING];
	char *queue[RDMEM_HOOK_QUEUE]; /* paths waiting, a ring from head */
	unsigned head, nqueued;
	struct rdmem_hook_stats stats;
};

int rdmem_hook_create(const char *cmd, uint32_t timeout_ms, struct rdmem_hook **out)
{
	struct rdmem_hook *h;
	size_t n = strlen(cmd);

	if (n == 0 || !timeout_ms)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->timeout_ns = (uint64_t)timeout_ms * 1000000ull;
	h->script = malloc(n + 8);
	if (!h->script) {
		free(h);
		return -ENOMEM;
	}
	snprintf(h->script, n + 8, "%s \"$1\"", cmd);
	pthread_mutex_init(&h->lock, NULL);
	*out = h;
	return 0;
}

static int hook_spawn(struct rdmem_hook *h, struct hook_job *j, const char *path)
{
	char *argv[] = { "/bin/sh", "-c", h->script, "rdmem-hook", (char *)path, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none;
	int pfd[2], ret;

	if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	/* The server blocks SIGINT/SIGTERM for its signalfd; the hook must
	 * not. Its own process group: the timeout's kill reaches its children. */
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
	ret = posix_spawn(&j->pid, "/bin/sh", &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (ret) {
		close(pfd[0]);
		j->pid = 0;
		return -ret;
	}
	j->out_fd = pfd[0];
	j->out_len = 0;
	j->killed = 0;
	j->started_ns = rdmem_now_ns();
	snprintf(j->path, sizeof(j->path), "%s", path);
	return 0;
}

static struct hook_job *hook_free_job(struct rdmem_hook *h)
{
	unsigned i;

	for (i = 0; i < RDMEM_HOOK_MAX_RUNNING; i++)
		if (!h->jobs[i].pid)
			return &h->jobs[i];
	return NULL;
}

/* Starts CMD path in job j, under h->lock; 0 or -errno, counted. */
static int hook_start(struct rdmem_hook *h, struct hook_job *j, const char *path)
{
	int ret = hook_spawn(h, j, path);

	if (ret == 0) {
		h->stats.runs++;
		h->stats.running++;
	} else {
		h->stats.failures++;
		/* A commit's hook: as many lines as commits, so rate-limited. */
		rdmem_warn_limited("hook: not started for %s: %s", path, strerror(-ret));
	}
	return ret;
}

int rdmem_hook_run(struct rdmem_hook *h, const char *path)
{
	struct hook_job *j;
	char *copy = NULL;
	int ret = 0;

	pthread_mutex_lock(&h->lock);
	if ((j = hook_free_job(h)))
		ret = hook_start(h, j, path);
	else if (h->nqueued < RDMEM_HOOK_QUEUE && (copy = strdup(path)))
		h->queue[(h->head + h->nqueued++) % RDMEM_HOOK_QUEUE] = copy;
	else
		ret = -EBUSY;
	h->stats.waiting = h->nqueued;
	if (ret == -EBUSY) {
		h->stats.failures++;
		rdmem_warn_limited("hook: not run for %s: %u hooks running and %u waiting", path,
				   RDMEM_HOOK_MAX_RUNNING, RDMEM_HOOK_QUEUE);
	}
	pthread_mutex_unlock(&h->lock);
	return ret;
}

/* Starts waiting hooks while places are free; under h->lock. */
static void hook_start_waiting(struct rdmem_hook *h)
{
	struct hook_job *j;

	while (h->nqueued && (j = hook_free_job(h))) {
		char *path = h->queue[h->head];

		h->head = (h->head + 1) % RDMEM_HOOK_QUEUE;
		h->nqueued--;
		hook_start(h, j, path);
		free(path);
	}
	h->stats.waiting = h->nqueued;
}

/* Past the timeout: kills the hook's process group; the next reap collects it. */
static void hook_check_timeout(struct rdmem_hook *h, struct hook_job *j, uint64_t now)
{
	/* Not now - started_ns: were now ever older than the start, the
	 * unsigned age would wrap past every timeout. */
	if (j->killed || now <= j->started_ns + h->timeout_ns)
		return;
	j->killed = 1;
	h->stats.timed_out++;
	rdmem_warn_limited("hook: %s: still running after %llu ms (--image-hook-timeout): killed",
			   j->path, (unsigned long long)(h->timeout_ns / 1000000));
	if (kill(-j->pid, SIGKILL) < 0 && errno != ESRCH)
		rdmem_err_limited("hook: kill %d: %s", (int)j->pid, strerror(errno));
}

/* Reads what the pipe holds; keeps the first RDMEM_HOOK_OUTPUT_MAX - 1 bytes. */
static void hook_drain(struct hook_job *j)
{
	char scratch[4096];
	ssize_t n;

	for (;;) {
		uint32_t room = sizeof(j->out) - 1 - j->out_len;

		if (room)
			n = read(j->out_fd, j->out + j->out_len, room);
		else
			n = read(j->out_fd, scratch, sizeof(scratch));
		if (n <= 0)
			break;
		if (room)
			j->out_len += (uint32_t)n;
	}
}

/* Log-friendly output: newlines become " | ", other control bytes '?'. */
static void hook_log_output(struct hook_job *j, char *line, size_t cap)
{
	size_t o = 0;
	uint32_t i;

	for (i = 0; i < j->out_len && o + 4 < cap; i++) {
		unsigned char c = (unsigned char)j->out[i];

		if (c == '\n') {
			if (i + 1 < j->out_len)
				memcpy(line + o, " | ", 3), o += 3;
		} else {
			line[o++] = c < 0x20 || c > 0x7e ? '?' : (char)c;
		}
	}
	line[o] = '\0';
}

static void hook_finish(struct rdmem_hook *h, struct hook_job *j, int status)
{
	char out[768];
	int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;

	hook_drain(j);
	hook_log_output(j, out, sizeof(out));
	/* One line per commit: rate-limited (the counters have every one). */
	if (WIFEXITED(status))
		rdmem_log_limited(ok ? RDMEM_LOG_INFO : RDMEM_LOG_WARN, "hook: %s: exit %d: %s",
				  j->path, WEXITSTATUS(status), out[0] ? out : "(no output)");
	else
		rdmem_warn_limited("hook: %s: killed by signal %d: %s", j->path, WTERMSIG(status),
				   out[0] ? out : "(no output)");
	if (!ok)
		h->stats.failures++;
	h->stats.running--;
	close(j->out_fd);
	j->pid = 0;
}

unsigned rdmem_hook_reap(struct rdmem_hook *h)
{
	uint64_t now;
	unsigned i, busy;

	pthread_mutex_lock(&h->lock);
	/* Read under the lock: a hook a worker started while this reap waited
	 * for the lock must not look younger than "now" (it was killed at
	 * birth, tests/unit/test_hook.c). */
	now = rdmem_now_ns();
	for (i = 0; i < RDMEM_HOOK_MAX_RUNNING; i++) {
		struct hook_job *j = &h->jobs[i];
		int status;
		pid_t r;

		if (!j->pid)
			continue;
		hook_drain(j);
		r = waitpid(j->pid, &status, WNOHANG);
		if (r == j->pid) {
			hook_finish(h, j, status);
		} else if (r < 0) {
			rdmem_err_limited("hook: waitpid %d: %s", (int)j->pid, strerror(errno));
			h->stats.failures++;
			h->stats.running--;
			close(j->out_fd);
			j->pid = 0;
		} else {
			hook_check_timeout(h, j, now);
		}
	}
	hook_start_waiting(h);
	busy = (unsigned)(h->stats.running + h->nqueued);
	pthread_mutex_unlock(&h->lock);
	return busy;
}

void rdmem_hook_stats(struct rdmem_hook *h, struct rdmem_hook_stats *out)
{
	pthread_mutex_lock(&h->lock);
	*out = h->stats;
	pthread_mutex_unlock(&h->lock);
}

/* SIGTERM to the hook's process group, SIGKILL if it is still there after
 * a second (a hook that ignores TERM must not hold the server's stop). */
static pid_t hook_stop(pid_t pid, int *status)
{
	pid_t r;
	int i;

	kill(-pid, SIGTERM);
	for (i = 0; i < 100; i++) {
		r = waitpid(pid, status, WNOHANG);
		if (r != 0 && !(r < 0 && errno == EINTR))
			return r;
		usleep(10 * 1000);
	}
	kill(-pid, SIGKILL);
	do
		r = waitpid(pid, status, 0);
	while (r < 0 && errno == EINTR);
	return r;
}

void rdmem_hook_destroy(struct rdmem_hook *h)
{
	unsigned i;

	if (!h)
		return;
	for (i = 0; i < RDMEM_HOOK_MAX_RUNNING; i++) {
		struct hook_job *j = &h->jobs[i];
		int status = 0;
		pid_t r;

		if (!j->pid)
			continue;
		rdmem_warn("hook: stopping hook for %s (pid %d)", j->path, (int)j->pid);
		r = hook_stop(j->pid, &status);
		if (r == j->pid) {
			hook_finish(h, j, status);
		} else {
			close(j->out_fd);
			j->pid = 0;
		}
	}
	while (h->nqueued) {
		rdmem_warn("hook: not run for %s: the server stops", h->queue[h->head]);
		free(h->queue[h->head]);
		h->head = (h->head + 1) % RDMEM_HOOK_QUEUE;
		h->nqueued--;
	}
	pthread_mutex_destroy(&h->lock);
	free(h->script);
	free(h);
}
