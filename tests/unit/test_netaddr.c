/* test_netaddr.c - per-address limit groups: an IPv6 /64 is one peer, an
 * IPv4-mapped address is its IPv4 address, everything else stays whole. */
#include <string.h>

#include "check.h"
#include "rdmem/netaddr.h"

static const char *group(const char *host)
{
	static char out[RDMEM_ADDR_GROUP_MAX];

	rdmem_addr_group(host, out, sizeof(out));
	return out;
}

static void test_ipv4_whole(void)
{
	CHECK(!strcmp(group("192.0.2.7"), "192.0.2.7"));
	CHECK(!strcmp(group("192.0.2.8"), "192.0.2.8"));
}

static void test_ipv6_by_64(void)
{
	/* Two privacy addresses of one host: one group. */
	CHECK(!strcmp(group("2001:db8:1:2:a:b:c:d"), "2001:db8:1:2::/64"));
	CHECK(!strcmp(group("2001:db8:1:2:ffff::1"), "2001:db8:1:2::/64"));
	CHECK(!strcmp(group("[2001:db8:1:2::9]"), "2001:db8:1:2::/64"));
	/* The next /64: another peer. */
	CHECK(!strcmp(group("2001:db8:1:3::1"), "2001:db8:1:3::/64"));
	CHECK(!strcmp(group("::1"), "::/64"));
	CHECK(!strcmp(group("fe80::1"), "fe80::/64"));
}

static void test_v4_mapped_is_v4(void)
{
	CHECK(!strcmp(group("::ffff:192.0.2.7"), "192.0.2.7"));
	CHECK(!strcmp(group("[::ffff:192.0.2.7]"), "192.0.2.7"));
}

static void test_other_names_whole(void)
{
	CHECK(!strcmp(group("@rdmem-shm:1234"), "@rdmem-shm:1234"));
	CHECK(!strcmp(group("?"), "?"));
	CHECK(!strcmp(group(""), ""));
	CHECK(!strcmp(group("[]"), "[]"));
}

static void test_truncates(void)
{
	char small[8];

	rdmem_addr_group("2001:db8:1:2::1", small, sizeof(small));
	CHECK(!strcmp(small, "2001:db"));
}

int main(void)
{
	RUN(test_ipv4_whole);
	RUN(test_ipv6_by_64);
	RUN(test_v4_mapped_is_v4);
	RUN(test_other_names_whole);
	RUN(test_truncates);
	return check_done();
}
