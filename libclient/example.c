/* example.c - libclient in 22 lines: a put, a get, and one async batch of
 * pings. Build: cc -Iinclude -I. libclient/example.c build/lib/librdmem.a
 * (installed: cc example.c $(pkg-config --cflags --libs rdmem); it builds as
 * C++ too). Run it with an rdmem-agent on this host; argv[1] names its
 * segment (/rdmem). */
#include "libclient/rdmem.h"

int main(int argc, char **argv)
{
	struct rdmem_rpc batch[8];
	rdmem_t *h = NULL;
	void *val;
	uint32_t len, i;
	int rc = rdmem_open(argc > 1 ? argv[1] : NULL, &h);

	if (rc == 0 && (rc = rdmem_put(h, "greeting", 8, "hello", 5, NULL)) == 0 &&
	    (rc = rdmem_get(h, "greeting", 8, &val, &len, NULL)) == 0) {
		printf("greeting = %.*s\n", (int)len, (char *)val);
		free(val);
		for (i = 0; i < 8 && rc == 0; i++) { /* submit all, then wait all */
			rdmem_rpc_init(&batch[i], RDMEM_OP_PING);
			rc = rdmem_submit(h, &batch[i]);
		}
		while (i--) { /* submitted calls must be waited, even after an error */
			if (rdmem_rpc_pending(&batch[i]) && rdmem_wait(h, &batch[i]) && !rc)
				rc = batch[i].rc;
			rdmem_rpc_free(&batch[i]); /* every reply owns memory, even empty */
		}
	}
	if (rc)
		fprintf(stderr, "example: %s\n", rdmem_strerror(rc));
	rdmem_close(h); /* NULL is fine */
	return rc ? 1 : 0;
}
