/* netaddr.c - per-address limit groups (include/rdmem/netaddr.h). */
#include "rdmem/netaddr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

void rdmem_addr_group(const char *host, char *out, size_t cap)
{
	static const unsigned char v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	char bare[INET6_ADDRSTRLEN + 2], text[INET6_ADDRSTRLEN];
	const char *given = host;
	size_t n = strlen(host);
	struct in6_addr a6;

	/* "[2001:db8::1]" as fabrics print it: the address inside. */
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof(bare)) {
		memcpy(bare, host + 1, n - 2);
		bare[n - 2] = '\0';
		host = bare;
	}
	if (inet_pton(AF_INET6, host, &a6) != 1) {
		snprintf(out, cap, "%s", given);
		return;
	}
	if (!memcmp(a6.s6_addr, v4mapped, sizeof(v4mapped))) {
		inet_ntop(AF_INET, a6.s6_addr + 12, text, sizeof(text));
		snprintf(out, cap, "%s", text);
		return;
	}
	memset(a6.s6_addr + 8, 0, 8);
	inet_ntop(AF_INET6, &a6, text, sizeof(text));
	snprintf(out, cap, "%s/64", text);
}
