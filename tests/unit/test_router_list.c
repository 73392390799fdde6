/* test_router_list.c - the agent's server list (agent/router.c): -s and
 * --servers-file entries at both sides of every limit (1..64 servers, ports
 * 1..65534, hosts 1..255 bytes of a safe alphabet), IPv6 forms, the names
 * keys hash against, and files an operator may point at by mistake. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/router.h"
#include "check.h"

static struct rdmem_router_entry list[RDMEM_ROUTER_MAX_SERVERS];
static uint32_t n;
static char why[512];

static int parse(const char *text)
{
	return rdmem_router_parse_list(text, 0, 7471, 0, list, &n, why, sizeof(why));
}

static void test_forms_and_names(void)
{
	REQUIRE(parse("10.0.0.5,h2:7481,[fd00::7]:9000,fd00::8,[fd00::9]") == 0);
	CHECK_EQ(n, 5);
	CHECK(!strcmp(list[0].name, "10.0.0.5:7471")); /* the default port is named */
	CHECK_EQ(list[0].port, 7471);
	CHECK_EQ(list[0].tcp_port, 7472);
	CHECK(!strcmp(list[1].host, "h2"));
	CHECK_EQ(list[1].port, 7481);
	CHECK_EQ(list[1].tcp_port, 7482);
	CHECK(!strcmp(list[2].host, "fd00::7"));
	CHECK(!strcmp(list[2].name, "[fd00::7]:9000"));
	CHECK_EQ(list[2].port, 9000);
	CHECK(!strcmp(list[3].host, "fd00::8")); /* bare IPv6: no port */
	CHECK(!strcmp(list[3].name, "[fd00::8]:7471"));
	CHECK(!strcmp(list[4].name, "[fd00::9]:7471"));
}

/* --tcp-port applies to entries without a port only. */
static void test_tcp_port_default(void)
{
	REQUIRE(rdmem_router_parse_list("a,b:9000", 0, 7000, 8000, list, &n, why, sizeof(why)) ==
		0);
	CHECK_EQ(list[0].tcp_port, 8000);
	CHECK_EQ(list[1].tcp_port, 9001);
}

static void test_port_limits(void)
{
	CHECK_EQ(parse("h:1"), 0);
	CHECK_EQ(parse("h:65534"), 0);
	CHECK_EQ(list[0].tcp_port, 65535);
	CHECK_EQ(parse("h:65535"), -EINVAL);
	CHECK(strstr(why, "1..65534") != NULL);
	CHECK_EQ(parse("h:0"), -EINVAL);
	CHECK_EQ(parse("h:"), -EINVAL);
	CHECK_EQ(parse("h:12x"), -EINVAL);
	CHECK_EQ(parse("h:99999999999999999999"), -EINVAL);
	CHECK_EQ(parse("[fd00::1]x"), -EINVAL);
	CHECK_EQ(parse("[fd00::1"), -EINVAL);
}

static void test_host_limits(void)
{
	char host[300];

	memset(host, 'a', 255);
	host[255] = '\0';
	CHECK_EQ(parse(host), 0);
	memset(host, 'a', 256);
	host[256] = '\0';
	CHECK_EQ(parse(host), -EINVAL);
	CHECK(strstr(why, "1..255") != NULL);
	CHECK_EQ(parse(":7000"), -EINVAL);
	CHECK_EQ(parse("[]:7000"), -EINVAL);
	/* names are shown unquoted in JSON and /metrics labels */
	CHECK_EQ(parse("a\"b:7000"), -EINVAL);
	CHECK_EQ(parse("a}b"), -EINVAL);
	CHECK_EQ(parse("a b"), -EINVAL);
}

static void test_count_limits(void)
{
	char text[64 * 16];
	size_t used = 0;
	int i;

	for (i = 0; i < RDMEM_ROUTER_MAX_SERVERS; i++)
		used +=
		    (size_t)snprintf(text + used, sizeof(text) - used, "%sh%d", i ? "," : "", i);
	CHECK_EQ(parse(text), 0);
	CHECK_EQ(n, RDMEM_ROUTER_MAX_SERVERS);
	snprintf(text + used, sizeof(text) - used, ",h64");
	CHECK_EQ(parse(text), -EINVAL);
	CHECK(strstr(why, "64") != NULL);
	CHECK_EQ(parse(""), -EINVAL);
	CHECK_EQ(parse("a,,b"), -EINVAL);
	CHECK_EQ(parse("a,"), -EINVAL);
	/* the same server twice, also when spelled with and without the default */
	CHECK_EQ(parse("a,a"), -EINVAL);
	CHECK_EQ(parse("a,a:7471"), -EINVAL);
	CHECK(strstr(why, "twice") != NULL);
	CHECK_EQ(parse("a:7471,a:7472"), 0);
}

static int write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int ok = fd >= 0 && write(fd, data, len) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

static int read_servers(const char *path)
{
	return rdmem_router_read_servers(path, 7471, 0, list, &n, why, sizeof(why));
}

static void test_servers_file(void)
{
	char dir[] = "/tmp/rdmem-router-XXXXXX", path[64], fifo[64], *big;
	static const char text[] = "# cache tier\n\n  10.0.0.5  \n10.0.0.6:7481 # rack 2\r\n";

	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/servers", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	REQUIRE(write_file(path, text, sizeof(text) - 1) == 0);
	CHECK_EQ(read_servers(path), 0);
	CHECK_EQ(n, 2);
	CHECK(!strcmp(list[1].name, "10.0.0.6:7481"));
	/* only comments: no server */
	REQUIRE(write_file(path, "# none\n", 7) == 0);
	CHECK_EQ(read_servers(path), -EINVAL);
	/* a NUL byte, a missing file, a directory, a FIFO (must not block) */
	REQUIRE(write_file(path, "a\0b\n", 4) == 0);
	CHECK_EQ(read_servers(path), -EINVAL);
	CHECK_EQ(read_servers("/nonexistent/servers"), -ENOENT);
	CHECK_EQ(read_servers(dir), -EINVAL);
	REQUIRE(mkfifo(fifo, 0600) == 0);
	CHECK_EQ(read_servers(fifo), -EINVAL);
	CHECK(strstr(why, "regular") != NULL);
	CHECK_EQ(read_servers("/dev/zero"), -EINVAL);
	/* 64 KiB of comments is fine; a byte more is refused */
	big = malloc((64u << 10) + 2);
	REQUIRE(big != NULL);
	memset(big, '#', 64u << 10);
	memcpy(big, "a\n", 2);
	REQUIRE(write_file(path, big, 64u << 10) == 0);
	CHECK_EQ(read_servers(path), 0);
	REQUIRE(write_file(path, big, (64u << 10) + 1) == 0);
	CHECK_EQ(read_servers(path), -EFBIG);
	free(big);
	unlink(fifo);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	RUN(test_forms_and_names);
	RUN(test_tcp_port_default);
	RUN(test_port_limits);
	RUN(test_host_limits);
	RUN(test_count_limits);
	RUN(test_servers_file);
	return check_done();
}
