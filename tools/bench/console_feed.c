/* SPDX-License-Identifier: MIT */
/*
 * weft-bench-console-feed: what the console's live path costs, without a
 * live process (issue 21).  A trace file is a header plus the records a
 * console receives on its socket, so its bytes are fed to
 * con_live_feed() as reads would bring them (in chunks of CHUNK bytes,
 * default 64 KiB), into a fresh model each round; the CPU time of each
 * round is printed, then the best.  The machine's other work does not
 * enter the figure as it does the live one (fast-task-watchers.sh), so
 * two builds compare within a few percent on a busy machine.
 *
 *   weft-bench-console-feed FILE [ROUNDS [CHUNK]]
 *
 * Not a test: it asserts nothing about time.  A record the console would
 * refuse ends it with status 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console.h"

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The whole of @path in memory (*@len bytes); NULL when it cannot. */
static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) <= 0 ||
	    fseek(f, 0, SEEK_SET))
		goto out_close;
	data = malloc((size_t)n);
	if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
		free(data);
		data = NULL;
	}
	*len = (size_t)n;
out_close:
	fclose(f);
	return data;
}

int main(int argc, char **argv)
{
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	size_t chunk = argc > 3 ? (size_t)strtoul(argv[3], NULL, 10) : 65536;
	double best = 0;
	uint8_t *data;
	size_t len = 0;

	if (argc < 2 || rounds < 1 || !chunk) {
		fprintf(stderr, "usage: %s FILE [ROUNDS [CHUNK]]\n", argv[0]);
		return 2;
	}
	data = slurp(argv[1], &len);
	if (!data) {
		fprintf(stderr, "%s: cannot read\n", argv[1]);
		return 2;
	}
	for (int r = 0; r < rounds; r++) {
		con_model_t m;
		con_live_t l;
		double t;
		int rc = 0;

		con_model_init(&m, argv[1]);
		if (con_live_init(&l, "1"))
			return 2;
		con_live_begin(&l, -1);
		t = cpu_s();
		for (size_t off = 0; off < len && !rc; off += chunk)
			rc = con_live_feed(&l, &m, data + off,
					   len - off < chunk ? len - off :
							       chunk);
		t = cpu_s() - t;
		if (rc) {
			fprintf(stderr, "%s: %s\n", argv[1], l.error);
			return 1;
		}
		if (!r || t < best)
			best = t;
		printf("round %d: %.3f s CPU (%zu tasks kept, %llu events, "
		       "%llu updates, %llu left to protobuf-c)\n",
		       r + 1, t, m.ntasks, (unsigned long long)m.events,
		       (unsigned long long)m.updates,
		       (unsigned long long)l.raw_refused);
		con_live_close(&l, NULL);
		con_live_fini(&l);
		con_model_fini(&m);
	}
	printf("best %.3f s\n", best);
	free(data);
	return 0;
}
