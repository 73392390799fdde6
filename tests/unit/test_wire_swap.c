/* test_wire_swap.c - the same golden bytes with RDMEM_TEST_SWAP: the byte
 * order converters swap, as they would on a big-endian host, and the code
 * under test (the TCP frame codec, the ring slot take) is compiled into this
 * program with them, so the little-endian bytes still come out and go in
 * right only if every field goes through its converter. */
#define RDMEM_TEST_SWAP 1

#include "fabric/dataplane.c"
#include "tcp/frame.c"
#include "tests/unit/wire_golden.h"
