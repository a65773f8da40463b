/* SPDX-License-Identifier: MIT */
/*
 * weft-console: options, then either one view printed as text (--once:
 * no terminal needed) or the interactive UI (tty.c), of a trace file
 * (replay.c) or of a live process (live.c).  This file: the command
 * line; run.c: the two sessions.
 *
 * Exit status: 0; 1 when --once finds nothing to show (a task:ID that is
 * not known); 2 for bad usage or input, for --once when the target never
 * answered, and with no target when several processes are live (listed).
 */
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"

static void usage(FILE *out)
{
	fputs("usage: weft-console [options] --replay FILE\n"
	      "       weft-console [options] [TARGET]   (PID, unix:PATH, "
	      "tcp://HOST:PORT;\n"
	      "                    none: the only live weft process)\n\n"
	      "options:\n"
	      "  --replay FILE     replay a trace file (WEFT_TRACE=FILE)\n"
	      "  --token-file F    tcp://: the token the process asks for "
	      "(its first line;\n"
	      "                    else WEFT_CONSOLE_TOKEN)\n"
	      "  --once            print one view as text and exit\n"
	      "  --view V          workers, tasks, warnings, detail, "
	      "timeline, resources, sites, task:ID,\n"
	      "                    spike (the polls of the timeline's "
	      "worst bucket)\n"
	      "  --after D         --once: the state D into the replay "
	      "(2s, 500ms);\n"
	      "                    default: the end of the file; live: "
	      "D after\n"
	      "                    attaching (default 1s)\n"
	      "  --width N         --once: columns (default 120)\n"
	      "  --sort COL        sort the tasks by COL (id, name, polls, "
	      "busy, ...)\n"
	      "  --invert          invert the sort\n"
	      "  --filter TEXT     show the tasks matching TEXT\n"
	      "  --speed X         replay speed (default 1)\n"
	      "  --paused          start the replay paused\n"
	      "  --fps N           redraws per second (default 10)\n"
	      "  --exit-after D    quit by itself after D (benchmarks)\n"
	      "  --seek-bench      --replay: time the first screen, the rest "
	      "of the index\n"
	      "                    and seeks to 10%, 50%, 90%, 5%, 50%, "
	      "10% (seconds,\n"
	      "                    peak RSS; one line each on stdout)\n"
	      "  --attach-bench    live: time the attach to the first "
	      "screen (the view's\n"
	      "                    first page) and to every task, the "
	      "--once text\n"
	      "                    (to /dev/null) and peak RSS a task; "
	      "--after: give up\n"
	      "  --stats FILE      at exit, write figures (redraws, CPU, "
	      "RSS) to FILE\n"
	      "  --ascii           ASCII sparklines and bars\n"
	      "  --no-color        no colours\n"
	      "  -h, --help        this help\n"
	      "\n"
	      "A replay keeps what it learns of a trace in FILE.weftidx "
	      "beside it (the next\n"
	      "open reads that instead of the trace), or in "
	      "$XDG_CACHE_HOME/weft/ when the\n"
	      "trace's folder is not writable (--once finishes it too); "
	      "WEFT_CONSOLE_INDEX=0:\n"
	      "none. Writing one there trims that cache: indexes of traces "
	      "gone or replaced,\n"
	      "those unused for WEFT_CONSOLE_INDEX_CACHE_DAYS (30), then the "
	      "least recently\n"
	      "used beyond WEFT_CONSOLE_INDEX_CACHE_MB (2048) are removed; "
	      "never one being\n"
	      "written.\n",
	      out);
}

static const char *need(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc)
		con_die("%s needs a value (--help)", argv[*i]);
	return argv[++*i];
}

static int sort_col(const char *name)
{
	for (int c = 0; c < CON_COL_MAX; c++)
		if (!strcasecmp(name, con_task_col_label(c)))
			return c;
	if (!strcasecmp(name, "worker"))
		return CON_COL_WORKER;
	if (!strcasecmp(name, "warnings"))
		return CON_COL_WARN;
	con_die("unknown sort column '%s'", name);
}

/*
 * The command line into @s and @o (their defaults set by the caller);
 * false after --help (printed).  Bad usage dies (con_die).
 */
static bool parse_args(int argc, char **argv, con_session_t *s, con_opts_t *o)
{
	const char *view = "workers";

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return false;
		} else if (!strcmp(a, "--replay")) {
			o->replay = need(argc, argv, &i);
		} else if (!strcmp(a, "--token-file")) {
			char tok[WEFT_WIRE_TOKEN_MAX + 1];
			const char *f = need(argc, argv, &i);
			int err = weft_wire_token_read(f, tok, sizeof(tok));

			if (err)
				con_die("--token-file %s: %s", f,
					err == -EINVAL ?
						"no token in its first "
						"line" :
						strerror(-err));
			/* weft_wire_connect() sends it from there. */
			setenv("WEFT_CONSOLE_TOKEN", tok, 1);
		} else if (!strcmp(a, "--once")) {
			o->once = true;
		} else if (!strcmp(a, "--seek-bench")) {
			o->seek_bench = true;
		} else if (!strcmp(a, "--attach-bench")) {
			o->attach_bench = true;
		} else if (!strcmp(a, "--view")) {
			view = need(argc, argv, &i);
		} else if (!strcmp(a, "--after")) {
			if (con_parse_duration(need(argc, argv, &i),
					       &o->after_ns))
				con_die("--after: not a duration: %s", argv[i]);
			o->have_after = true;
		} else if (!strcmp(a, "--width")) {
			o->width = atoi(need(argc, argv, &i));
			if (o->width < 20 || o->width > 1000)
				con_die("--width: 20 to 1000");
		} else if (!strcmp(a, "--sort")) {
			o->col = sort_col(need(argc, argv, &i));
		} else if (!strcmp(a, "--invert")) {
			o->invert = true;
		} else if (!strcmp(a, "--filter")) {
			o->filter = need(argc, argv, &i);
		} else if (!strcmp(a, "--speed")) {
			s->speed = atof(need(argc, argv, &i));
			if (!(s->speed > 0 && s->speed <= 1000))
				con_die("--speed: a number above 0");
		} else if (!strcmp(a, "--fps")) {
			int fps = atoi(need(argc, argv, &i));

			if (fps < 1 || fps > 100)
				con_die("--fps: 1 to 100");
			s->fps = (unsigned)fps;
		} else if (!strcmp(a, "--exit-after")) {
			if (con_parse_duration(need(argc, argv, &i),
					       &s->exit_after_ns) ||
			    !s->exit_after_ns)
				con_die("--exit-after: not a duration: %s",
					argv[i]);
		} else if (!strcmp(a, "--stats")) {
			s->stats_path = need(argc, argv, &i);
		} else if (!strcmp(a, "--paused")) {
			s->paused = true;
		} else if (!strcmp(a, "--ascii")) {
			s->ascii = true;
		} else if (!strcmp(a, "--no-color")) {
			s->color = false;
		} else if (a[0] == '-') {
			con_die("unknown option %s (--help)", a);
		} else if (!o->target) {
			o->target = a;
		} else {
			con_die("one target at most (--help)");
		}
	}
	if (getenv("NO_COLOR"))
		s->color = false;
	if (o->replay && o->target)
		con_die("--replay FILE or a TARGET, not both (--help)");
	if (o->seek_bench && !o->replay)
		con_die("--seek-bench needs --replay FILE");
	if (o->attach_bench && o->replay)
		con_die("--attach-bench attaches to a live process");
	if (!strncmp(view, "task:", 5)) {
		char *end;

		s->detail_task = strtoull(view + 5, &end, 10);
		if (*end || !s->detail_task)
			con_die("--view task:ID needs a task id");
		s->view = CON_VIEW_DETAIL;
	} else {
		const con_view_t *v = con_view_by_name(view);

		if (!v)
			con_die("unknown view '%s' (workers, tasks, warnings, "
				"detail, timeline, spike, resources, sites, task:ID)",
				view);
		for (int i = 0; i < CON_VIEW_MAX; i++)
			if (con_view_get(i) == v)
				s->view = i;
	}
	s->prev_view = CON_VIEW_TASKS;
	return true;
}

int main(int argc, char **argv)
{
	con_session_t s = { .speed = 1.0, .color = true };
	con_opts_t o = { .width = 120, .col = CON_COL_ID };
	const char *cs;

	setlocale(LC_ALL, "");
	cs = nl_langinfo(CODESET);
	if (!cs || strcmp(cs, "UTF-8")) {
		if (setlocale(LC_CTYPE, "C.UTF-8"))
			cs = nl_langinfo(CODESET);
		if (!cs || strcmp(cs, "UTF-8"))
			s.ascii = true;
	}
	if (!parse_args(argc, argv, &s, &o))
		return 0;
	if (!o.replay)
		return con_run_live(&s, &o);
	return con_run_replay(&s, &o);
}
