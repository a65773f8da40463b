/* SPDX-License-Identifier: MIT */
/* weft-trace info FILE: what a trace holds, and how compactly. */
#include <string.h>

#include "trace_tool.h"

static const char usage[] =
	"usage: weft-trace info FILE\n"
	"Prints the header (process, workers, clock, start), the duration,\n"
	"frame and event counts and the bytes per event; torn or damaged\n"
	"records skipped (their bytes, where the first was), and whether\n"
	"the file was cut short.\n";

int tt_verb_info(int argc, char **argv)
{
	const char *path = NULL;
	tt_trace_t t;
	double dur = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		if (argv[i][0] == '-' || path)
			tt_die("info: unexpected argument '%s'", argv[i]);
		path = argv[i];
	}
	if (!path)
		tt_die("info: no FILE (weft-trace info --help)");
	tt_open(&t, path, true);
	tt_drain(&t);
	if (t.nev > 1)
		dur = (double)(t.last_ts - t.min_ts) / 1e9;
	printf("file:        %s%s\n", path,
	       t.truncated ? " (cut short: read to its last whole record)" :
			     "");
	if (t.skips)
		printf("skipped:     %llu bytes of torn or damaged records in %llu "
		       "place%s, the first at byte %llu (the whole records "
		       "on both sides read)\n",
		       (unsigned long long)t.skipped,
		       (unsigned long long)t.skips, t.skips == 1 ? "" : "s",
		       (unsigned long long)t.first_skip);
	printf("format:      WEFTTRC1 version %u, segment %u\n",
	       t.format_version, t.segment);
	printf("process:     %s (pid %u) on %s\n", t.process ? t.process : "?",
	       t.pid, t.host ? t.host : "?");
	printf("command:     %s\n", t.cmdline ? t.cmdline : "");
	printf("workers:     %u\n", t.workers);
	printf("clock:       %s\n", t.clock ? t.clock : "?");
	printf("start:       %.6f s (monotonic), %llu ns (realtime)\n",
	       (double)t.start_ns / 1e9,
	       (unsigned long long)t.start_realtime_ns);
	printf("duration:    %.6f s\n", dur);
	printf("frames:      %llu (%llu event batches, %llu updates, %llu "
	       "other)\n",
	       (unsigned long long)t.frames, (unsigned long long)t.batches,
	       (unsigned long long)t.updates, (unsigned long long)t.others);
	printf("events:      %llu (%llu dropped by the probe)\n",
	       (unsigned long long)t.nev, (unsigned long long)t.events_dropped);
	tt_print_drops(stdout, &t);
	if (t.tasks_end_unseen)
		printf("             %llu tasks' ends among them (found "
		       "finished later)\n",
		       (unsigned long long)t.tasks_end_unseen);
	printf("tasks named: %zu\n", t.ntasks);
	/* Warnings, not rows (a fold's row stands for the N it says). */
	if (t.said != t.nwarnings)
		printf("warnings:    %llu (%zu rows)\n",
		       (unsigned long long)t.said, t.nwarnings);
	else
		printf("warnings:    %zu\n", t.nwarnings);
	if (t.late)
		printf("late:        %llu events stamped long before events "
		       "written ahead of them (out of time order)\n",
		       (unsigned long long)t.late);
	printf("bytes:       %llu (%llu in event batches)\n",
	       (unsigned long long)t.bytes, (unsigned long long)t.event_bytes);
	if (t.nev)
		printf("bytes/event: %.2f (event batches only), %.2f (whole "
		       "file)\n",
		       (double)t.event_bytes / (double)t.nev,
		       (double)t.bytes / (double)t.nev);
	tt_free(&t);
	return 0;
}
