/* SPDX-License-Identifier: MIT */
/*
 * weft-bench-gentrace OUT --bytes N: a synthetic trace file of about N
 * bytes, written fast, for timing the trace tools on files of many GB
 * (big-trace.sh, tests/trace_big.sh; issue 21).
 *
 * The file is what the recorder writes (probe/src/recorder.c), through
 * libweft-wire's own encoders: a FileHeader, then per collector pass
 * (20 ms of trace time) one EventBatch run per emitting thread, and an
 * Update every 100 ms with the tasks that changed (a task's name, file
 * and line in its first record only, as the delta stream thins them),
 * the workers, the stats, the new warnings and the resources.
 *
 * The service it pretends to trace is task-per-request: each worker has
 * an acceptor task that spawns a task per request (Poisson arrivals),
 * and each request awaits one to four things before it completes: the
 * cache's mutex (100 us), a database socket (2 ms), a timer (10 ms), an
 * upstream channel (100 ms) or, rarely, a blocking job (1 ms, on a pool
 * thread whose events are the "other threads'" run).  So most tasks live
 * a few milliseconds, a few thousand are live at a time, and a task
 * costs about 22 events.  Beside them, long-lived tickers wake on
 * the timer every 250 ms.  Workers park when idle and steal from each
 * other (checked every millisecond of trace time, in lock step); one
 * poll in 100,000 takes 1 to 8 ms and raises a long-poll warning.
 * Everything comes from a seeded generator: the same options write the
 * same events (the header's pid, host and start time are this run's).
 *
 * Memory: the live tasks, a pass's events and 8 MiB of output buffer;
 * never the file.  Exit status: 0; 1 when writing fails; 2 for bad usage.
 * The last line on stdout says what was written (key=value), for the
 * tests to check the tools against.
 *
 * This file reads the options and runs the passes; the service is
 * simulated in gentrace_world.c and written out by gentrace_file.c
 * (gentrace.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gentrace.h"

#define SLICE_NS 1000000ull /* steals and queue samples, in lock step */
#define PASS_SLICES 20u     /* a collector pass: 20 ms */
#define UPDATE_PASSES 5u    /* an Update every 100 ms */

struct gentrace g;

void die(int status, const char *fmt, ...)
{
	va_list ap;

	fputs("weft-bench-gentrace: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(status);
}

void *xrealloc(void *p, size_t n)
{
	if (!n)
		die(1, "internal error: zero-sized allocation");
	p = realloc(p, n);
	if (!p)
		die(1, "out of memory");
	return p;
}

/* ------------------------------------------------------------ main */

static const char usage[] =
	"usage: weft-bench-gentrace OUT --bytes N [options]\n"
	"Writes a synthetic trace file of about N bytes to OUT (a recording\n"
	"of a task-per-request service: short tasks spawned per request,\n"
	"polled, parked on a mutex, a socket, a timer, a channel or a\n"
	"blocking job, woken, completed; long-lived tickers; parks, steals,\n"
	"warnings, resources), with libweft-wire's encoders.  It stops at\n"
	"the first collector pass past N bytes.\n"
	"N: bytes, or with a suffix k, M, G (10^3, 10^6, 10^9) or Ki, Mi, Gi.\n"
	"\n"
	"options:\n"
	"  --bytes N     the size to reach (required)\n"
	"  --workers N   workers (default 4, at most 256)\n"
	"  --rate R      requests per second of trace time (default 400000)\n"
	"  --seed S      the generator's seed (default 1)\n"
	"  --checkpoint-mb N  a checkpoint (a mark, then a full update) every\n"
	"                N MiB of file at least, as the recorder writes them\n"
	"                (default 16; 0: none)\n"
	"  --quiet       no progress on stderr (shown when it is a terminal)\n"
	"  --sites       tasks name their spawn site (each site's record once)\n"
	"                instead of carrying its name and file; N counts the\n"
	"                bytes they would have taken, so the run is the same\n"
	"  --parked-at   a pending poll's new place as a PARKED_AT after it\n"
	"                (the form before await sites folded into the POLL)\n"
	"  -h, --help    this help\n"
	"\n"
	"The last line on stdout: bytes=, events=, tasks= (every task named in\n"
	"an update), spawned=, completed=, polls=, warnings=, updates=,\n"
	"batches=, steals=, live_max=, checkpoints=, trace_s= (trace time),\n"
	"secs= (wall).\n";

static uint64_t parse_size(const char *s)
{
	char *end;
	double v;
	uint64_t mul = 1;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || v < 0)
		die(2, "--bytes: '%s' is not a size (1000000, 250M, 2G, 1Gi)",
		    s);
	if (!strcmp(end, "k") || !strcmp(end, "K") || !strcmp(end, "kB"))
		mul = 1000;
	else if (!strcmp(end, "M") || !strcmp(end, "MB"))
		mul = 1000000;
	else if (!strcmp(end, "G") || !strcmp(end, "GB"))
		mul = 1000000000;
	else if (!strcmp(end, "Ki") || !strcmp(end, "KiB"))
		mul = 1ull << 10;
	else if (!strcmp(end, "Mi") || !strcmp(end, "MiB"))
		mul = 1ull << 20;
	else if (!strcmp(end, "Gi") || !strcmp(end, "GiB"))
		mul = 1ull << 30;
	else if (*end)
		die(2, "--bytes: '%s' is not a size (1000000, 250M, 2G, 1Gi)",
		    s);
	if (v * (double)mul > 1e15)
		die(2, "--bytes: '%s' is more than a petabyte", s);
	return (uint64_t)(v * (double)mul);
}

static unsigned long parse_num(const char *opt, const char *s, unsigned long lo,
			       unsigned long hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (end == s || *end || errno || v < lo || v > hi || s[0] == '-')
		die(2, "%s: '%s' is not a number from %lu to %lu", opt, s, lo,
		    hi);
	return v;
}

static const char *need(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc)
		die(2, "%s needs a value (--help)", argv[*i]);
	return argv[++*i];
}

int main(int argc, char **argv)
{
	unsigned long seed = 1;
	uint64_t pass = 0;

	g.nworkers = 4;
	g.rate = 400000;
	g.ckpt_every = 16ull << 20;
	g.progress = isatty(STDERR_FILENO);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(a, "--bytes")) {
			g.want_bytes = parse_size(need(argc, argv, &i));
		} else if (!strcmp(a, "--workers")) {
			g.nworkers = (unsigned)parse_num(
				a, need(argc, argv, &i), 1, MAX_WORKERS);
		} else if (!strcmp(a, "--rate")) {
			g.rate = (double)parse_num(a, need(argc, argv, &i), 1,
						   100000000);
		} else if (!strcmp(a, "--seed")) {
			seed = parse_num(a, need(argc, argv, &i), 0,
					 0xffffffffUL);
		} else if (!strcmp(a, "--checkpoint-mb")) {
			g.ckpt_every = (uint64_t)parse_num(a,
							   need(argc, argv, &i),
							   0, 1u << 20)
				       << 20;
		} else if (!strcmp(a, "--quiet")) {
			g.progress = false;
		} else if (!strcmp(a, "--sites")) {
			g.sites_mode = true;
		} else if (!strcmp(a, "--parked-at")) {
			g.parked_at_mode = true;
		} else if (a[0] == '-' && a[1]) {
			die(2, "unknown option '%s' (--help)", a);
		} else if (g.path) {
			die(2, "unexpected argument '%s' (one OUT)", a);
		} else {
			g.path = a;
		}
	}
	if (!g.path)
		die(2, "no OUT file (--help)");
	if (!g.want_bytes)
		die(2, "no --bytes N, or N is 0 (--help)");
	world_seed(seed);
	g.fd = open(g.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (g.fd < 0)
		die(1, "%s: %s", g.path, strerror(errno));
	g.t0 = weft_wire_now_ns();
	g.start_ns = 1000000000000ull; /* 1000 s after boot */
	file_begin();
	world_setup();

	while (g.bytes + g.out.len - g.ckpt_bytes + g.saved < g.want_bytes) {
		for (unsigned s = 0; s < PASS_SLICES; s++) {
			uint64_t end = g.now + SLICE_NS;

			for (unsigned i = 0; i < g.nworkers; i++)
				run_slice(&g.w[i], end);
			steal_round();
			g.now = end;
		}
		pass_out();
		if (++pass % UPDATE_PASSES == 0)
			update_out();
		write_out(false);
		progress(false);
	}
	/* The last state, as the recorder's stop writes it. */
	update_out();
	write_out(true);
	if (close(g.fd))
		die(1, "%s: %s", g.path, strerror(errno));
	progress(true);
	printf("bytes=%llu events=%llu tasks=%llu spawned=%llu completed=%llu "
	       "polls=%llu warnings=%llu updates=%llu batches=%llu "
	       "steals=%llu live_max=%llu checkpoints=%llu trace_s=%.3f "
	       "secs=%.3f\n",
	       (unsigned long long)g.bytes, (unsigned long long)g.events,
	       (unsigned long long)(g.next_id - 1),
	       (unsigned long long)g.spawned, (unsigned long long)g.completed,
	       (unsigned long long)g.polls, (unsigned long long)g.warnings,
	       (unsigned long long)g.updates, (unsigned long long)g.batches,
	       (unsigned long long)g.steals, (unsigned long long)g.live_max,
	       (unsigned long long)g.ckpts, (double)(g.now - g.start_ns) / 1e9,
	       (double)(weft_wire_now_ns() - g.t0) / 1e9);
	return 0;
}
