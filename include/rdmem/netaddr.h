/* netaddr.h - which peers count as one for per-address limits.
 *
 * An IPv4 address is one peer. An IPv6 host usually holds a whole /64 (SLAAC,
 * privacy addresses, a container per address): counting single IPv6
 * addresses would let one host take every slot, so its /64 is the unit. An
 * IPv4-mapped IPv6 address (::ffff:a.b.c.d, a dual-stack socket's view of an
 * IPv4 peer) is that IPv4 address. Anything else (the shm fabric names its
 * peer processes) is kept whole.
 */
#ifndef RDMEM_NETADDR_H
#define RDMEM_NETADDR_H

#include <stddef.h>

#define RDMEM_ADDR_GROUP_MAX 64 /* room for any group key, NUL included */

/* The group key of host (a numeric address, brackets allowed, no port) in
 * out[cap]; truncated to fit. */
void rdmem_addr_group(const char *host, char *out, size_t cap);

#endif
