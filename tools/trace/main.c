/* SPDX-License-Identifier: MIT */
/*
 * weft-trace: read weft trace files (.weft), and record them from live
 * processes (list, record, snapshot).  One verb per file (verb_*.c);
 * this one dispatches.
 */
#include <stdio.h>
#include <string.h>

#include "trace_tool.h"

static const struct verb {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *what;
} verbs[] = {
	{ "info", tt_verb_info, "header, duration, frame and event counts" },
	{ "dump", tt_verb_dump, "every event, one a line" },
	{ "stats", tt_verb_stats, "per worker figures, long polls, warnings" },
	{ "export", tt_verb_export, "Chrome trace-event JSON (--chrome)" },
	{ "list", tt_verb_list, "live weft processes of this user" },
	{ "record", tt_verb_record, "record a live process to a file" },
	{ "snapshot", tt_verb_snapshot, "write a live flight recorder out" },
	{ "tasks", tt_verb_tasks, "every live task, where it is parked" },
	{ "slice", tt_verb_slice, "a window of a trace as a trace (--from --to)" },
};

static void usage(FILE *out)
{
	fputs("usage: weft-trace VERB [options] [FILE|TARGET]\n\nverbs:\n", out);
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(out, "  %-8s %s\n", verbs[i].name, verbs[i].what);
	fputs("\n`weft-trace VERB --help` for a verb's options.\n", out);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		tt_die("no verb (weft-trace --help lists them)");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(argv[1], verbs[i].name))
			return verbs[i].run(argc - 1, argv + 1);
	tt_die("unknown verb '%s' (weft-trace --help lists them)", argv[1]);
}
