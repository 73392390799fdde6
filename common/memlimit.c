/* memlimit.c - how much memory this process may use: the machine's, or
 * its memory cgroup's limit (v1 or v2) when that is lower. Inside a
 * container the machine's memory is no bound at all. */
#include "rdmem/memlimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The number in file path, or 0 (absent, "max", unreadable). */
static uint64_t mem_read_limit(const char *path)
{
	unsigned long long v = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v >= (1ull << 60) ? 0 : v; /* cgroup v1 writes "no limit" as ~2^63 */
}

/* The lowest limit in file on the way from base + cg up to base, or 0. */
static uint64_t mem_lowest_on_path(const char *base, char *cg, const char *file)
{
	char path[700], *slash;
	uint64_t low = 0, v;

	for (;;) {
		snprintf(path, sizeof(path), "%s%s/%s", base, cg, file);
		if ((v = mem_read_limit(path)) && (!low || v < low))
			low = v;
		if (!*cg)
			return low;
		slash = strrchr(cg, '/');
		if (!slash)
			return low;
		*slash = '\0'; /* "/a/b" -> "/a" -> "" (the root) */
	}
}

/* The v1 controller list ctl ("cpu,memory") names the memory controller. */
static int mem_has_memory(char *ctl)
{
	char *save = NULL, *tok;

	for (tok = strtok_r(ctl, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!strcmp(tok, "memory"))
			return 1;
	return 0;
}

/* The memory limit of this process's cgroup and its ancestors (v2
 * memory.max, v1 memory.limit_in_bytes); 0 when there is none. */
static uint64_t mem_cgroup_limit(void)
{
	char *line = NULL;
	size_t cap = 0;
	uint64_t low = 0, v = 0;
	FILE *f = fopen("/proc/self/cgroup", "r");

	while (f && getline(&line, &cap, f) > 0) {
		char *ctl = strchr(line, ':'), *cg = ctl ? strchr(ctl + 1, ':') : NULL;

		if (!cg)
			continue;
		*cg++ = '\0';
		cg[strcspn(cg, "\n")] = '\0';
		if (!strcmp(cg, "/"))
			cg[0] = '\0';
		if (strlen(cg) > 512) /* longer than a path we build: the others still count */
			continue;
		if (!strcmp(ctl + 1, ""))
			v = mem_lowest_on_path("/sys/fs/cgroup", cg, "memory.max");
		else if (mem_has_memory(ctl + 1))
			v = mem_lowest_on_path("/sys/fs/cgroup/memory", cg,
					       "memory.limit_in_bytes");
		else
			continue;
		if (v && (!low || v < low))
			low = v;
	}
	free(line);
	if (f)
		fclose(f);
	return low;
}

uint64_t rdmem_mem_limit(const char **whose)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
	uint64_t mem = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
	uint64_t cg = mem_cgroup_limit();

	*whose = "this machine's memory";
	if (cg && (!mem || cg < mem)) {
		mem = cg;
		*whose = "this process's cgroup memory limit";
	}
	if (!mem) {
		*whose = "unknown memory: 2 GiB assumed";
		mem = 2ull << 30;
	}
	return mem;
}
