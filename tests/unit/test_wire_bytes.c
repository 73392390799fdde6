/* test_wire_bytes.c - the wire's golden bytes in the normal build: see
 * wire_golden.h. On a little-endian host the converters are no-ops, so this
 * pins the layout: a moved, resized or reordered field fails it. */
#include "tests/unit/wire_golden.h"
