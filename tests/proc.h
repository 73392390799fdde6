/* proc.h - integration-test helpers: start the real rdmem-server and
 * rdmem-agent as child processes, wait until they say they are ready, stop
 * or kill them, and find free ports. Header-only, for test programs. */
#ifndef RDMEM_TEST_PROC_H
#define RDMEM_TEST_PROC_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tmpdir.h"

struct proc {
	pid_t pid;
	char log[256];
};

static inline const char *proc_bin(void)
{
	const char *b = getenv("RDMEM_BIN");

	return b ? b : "build";
}

/* Field of /proc/PID/status in kB ("VmRSS", "RssShmem", ...), or -1. */
static inline long proc_status_kb(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t n = strlen(field);
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (kb < 0 && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':' &&
		    sscanf(line + n + 1, "%ld", &kb) != 1)
			kb = -1;
	fclose(f);
	return kb;
}

/* CPU ticks (utime + stime) of pid so far, or -1. */
static inline long long proc_cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	/* After "pid (comm)": state is field 3, utime 14, stime 15. */
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

/* Open file descriptors of pid, or -1. */
static inline int proc_fd_count(pid_t pid)
{
	char path[64];
	struct dirent *d;
	DIR *dd;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if (!(dd = opendir(path)))
		return -1;
	while ((d = readdir(dd)))
		n += d->d_name[0] != '.';
	closedir(dd);
	return n;
}

static inline void proc_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* 1 when no thread of pid is running: each /proc/pid/task/<tid>/stat says
 * T (stopped) or t (traced); 0 otherwise, -1 when pid is gone. */
static inline int proc_all_stopped(pid_t pid)
{
	char path[320], buf[512], *p;
	struct dirent *d;
	int stopped = 1;
	DIR *dd;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(dd = opendir(path)))
		return -1;
	while (stopped && (d = readdir(dd))) {
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, d->d_name);
		if (!(f = fopen(path, "r")))
			continue; /* the thread exited meanwhile */
		p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		fclose(f);
		stopped = p && (p[2] == 'T' || p[2] == 't');
	}
	closedir(dd);
	return stopped;
}

/*
 * SIGSTOP, then waits (up to timeout_ms) until every thread has stopped:
 * kill() returns before they do, and a thread still running (an agent
 * accepting connections) would change what the caller sets up next.
 * Returns 0, or -1 (not stopped in time, or gone).
 */
static inline int proc_stop_wait(pid_t pid, int timeout_ms)
{
	int waited;

	if (kill(pid, SIGSTOP) < 0)
		return -1;
	for (waited = 0; waited <= timeout_ms; waited += 2) {
		int st = proc_all_stopped(pid);

		if (st)
			return st > 0 ? 0 : -1;
		proc_sleep_ms(2);
	}
	return -1;
}

/* The log's first cap - 1 bytes into buf, NUL-terminated: 0, or -1 when
 * there is none yet. */
static inline int proc_log_read(const struct proc *p, char *buf, size_t cap)
{
	int fd = open(p->log, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* True when the log holds needle. */
static inline int proc_log_has(const struct proc *p, const char *needle)
{
	char buf[65536];

	return proc_log_read(p, buf, sizeof(buf)) == 0 && strstr(buf, needle) != NULL;
}

/* How many times the log (its first 64 KiB) holds needle. */
static inline int proc_log_count(const struct proc *p, const char *needle)
{
	char buf[65536];
	const char *at = buf;
	int n = 0;

	if (proc_log_read(p, buf, sizeof(buf)) < 0)
		return 0;
	while ((at = strstr(at, needle))) {
		n++;
		at++;
	}
	return n;
}

static inline void proc_dump_log(const struct proc *p)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "tail -n 30 %s | sed 's/^/  | /' >&2", p->log);
	if (system(cmd) != 0)
		fprintf(stderr, "  (no log %s)\n", p->log);
}

/*
 * Starts argv[0] (a path) with stderr and stdout into a log file, and waits
 * up to timeout_ms for ready to appear in it. Returns 0, or -1 (log shown).
 */
static inline int proc_start(struct proc *p, const char *name, char *const argv[],
			     const char *ready, int timeout_ms)
{
	int waited = 0, status;

	snprintf(p->log, sizeof(p->log), "%s/rdmem-test-%d-%s.log", test_tmpdir(), (int)getpid(),
		 name);
	unlink(p->log);
	p->pid = fork();
	if (p->pid == 0) {
		int fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);

		/* A test that dies must not leave servers behind. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	if (p->pid < 0)
		return -1;
	while (!ready || !proc_log_has(p, ready)) {
		if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
			fprintf(stderr, "  %s exited before it was ready\n", name);
			proc_dump_log(p);
			p->pid = 0;
			return -1;
		}
		if (!ready || waited >= timeout_ms)
			break;
		proc_sleep_ms(10);
		waited += 10;
	}
	if (ready && !proc_log_has(p, ready)) {
		fprintf(stderr, "  %s not ready after %d ms\n", name, timeout_ms);
		proc_dump_log(p);
		/* Stopped here: a daemon that gets ready later would hold its
		 * socket or port and fail the next case in its name. */
		kill(p->pid, SIGKILL);
		waitpid(p->pid, &status, 0);
		p->pid = 0;
		return -1;
	}
	return 0;
}

/* Sends sig and waits up to timeout_ms; returns the exit status, or -1. */
static inline int proc_stop(struct proc *p, int sig, int timeout_ms)
{
	int status, waited = 0;

	if (p->pid <= 0)
		return -1;
	kill(p->pid, sig);
	while (waitpid(p->pid, &status, WNOHANG) != p->pid) {
		if (waited >= timeout_ms) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &status, 0);
			p->pid = 0;
			return -1;
		}
		proc_sleep_ms(10);
		waited += 10;
	}
	p->pid = 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * A port p with p and p + 1 free (RDMA port and TCP port), drawn from below
 * the kernel's ephemeral range (32768-60999 by default): a port the check
 * found free could otherwise be taken by any outgoing connection before the
 * server binds it (CI saw a netns server fail with EADDRINUSE that way).
 * Checked on the wildcard address, so no address of this host holds it.
 */
static inline unsigned proc_free_port_pair(void)
{
	static unsigned seed;
	unsigned tries;

	if (!seed)
		seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
	for (tries = 0; tries < 256; tries++) {
		struct sockaddr_in a = { AF_INET, 0, { htonl(INADDR_ANY) }, { 0 } };
		unsigned port;
		int s, s2;

		seed = seed * 1103515245u + 12345u;
		port = 10000 + (seed >> 8) % 22000; /* 10000 .. 31999, and port + 1 */
		a.sin_port = htons((uint16_t)port);
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
			if (s >= 0)
				close(s);
			continue;
		}
		a.sin_port = htons((uint16_t)(port + 1));
		s2 = socket(AF_INET, SOCK_STREAM, 0);
		if (s2 >= 0 && bind(s2, (struct sockaddr *)&a, sizeof(a)) == 0) {
			close(s2);
			close(s);
			return port;
		}
		if (s2 >= 0)
			close(s2);
		close(s);
	}
	return 0;
}

#endif
