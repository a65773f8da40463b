/* SPDX-License-Identifier: MIT */
/*
 * weft-console: options, then either one view printed as text (--once:
 * no terminal needed) or the interactive UI (tty.c), of a trace file
 * (replay.c) or of a live process (live.c).
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
#include <unistd.h>

#include "console.h"

static void usage(FILE *out)
{
	fputs("usage: weft-console [options] --replay FILE\n"
	      "       weft-console [options] [TARGET]   (PID, unix:PATH, "
	      "tcp://HOST:PORT;\n"
	      "                    none: the only live weft process)\n\n"
	      "options:\n"
	      "  --replay FILE     replay a trace file (WEFT_TRACE=FILE)\n"
	      "  --once            print one view as text and exit\n"
	      "  --view V          workers, tasks, warnings, detail, "
	      "timeline, task:ID,\n"
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
	      "  --stats FILE      at exit, write figures (redraws, CPU, "
	      "RSS) to FILE\n"
	      "  --ascii           ASCII sparklines and bars\n"
	      "  --no-color        no colours\n"
	      "  -h, --help        this help\n",
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

static size_t once_rows(const con_session_t *s)
{
	const con_model_t *m = s->model;

	switch (s->view) {
	case CON_VIEW_TASKS:
		return m->nlist + 8;
	case CON_VIEW_WARNINGS:
		return m->nwarnings + 8;
	case CON_VIEW_WORKERS:
	case CON_VIEW_TIMELINE:
		return m->nworkers + 10;
	case CON_VIEW_DETAIL:
		/* Room for every recent event of the task, as text wants. */
		return 60 + CON_WATCH_EVENTS;
	default:
		return 60;
	}
}

/* No target: the only live weft process, or the list of them (exit 2). */
static const char *find_target(char *buf, size_t len)
{
	int err = con_live_discover(buf, len, stderr);

	if (err == -E2BIG)
		con_die("several live weft processes (above): name one");
	if (err == -ENOENT)
		con_die("no live weft process found; name a TARGET or use "
			"--replay FILE (--help)");
	if (err)
		con_die("the socket directory: %s", strerror(-err));
	return buf;
}

/* --once live: attach, read for @after_ns (retrying a refused connection
 * every second meanwhile), print the view.  2 if nothing ever came. */
static int once_live(con_session_t *s, con_live_t *l, uint64_t after_ns,
		     int width)
{
	uint64_t until = con_live_now_ms() +
			 (after_ns ? after_ns / 1000000u : 1000u);
	con_grid_t g;
	int status = 0;

	uint64_t now, next_try = 0;

	/* task:ID: its events from the start, and its details asked for. */
	if (s->view == CON_VIEW_DETAIL && s->detail_task)
		con_model_watch(s->model, s->detail_task);
	while ((now = con_live_now_ms()) < until) {
		if (!l->connected) {
			if (now < next_try) {
				usleep(10000);
				continue;
			}
			next_try = now + 1000;
			if (con_live_connect(l))
				continue;
			if (s->model->watch_task)
				(void)con_live_request_task(
					l, s->model->watch_task);
		}
		(void)con_live_pump(l, s->model, until);
	}
	/* Connected but no update yet (the server's first can lag a fresh
	 * subscriber): wait a little for one rather than print nothing. */
	until = con_live_now_ms() + 5000;
	while (l->connected && !s->model->updates &&
	       con_live_now_ms() < until)
		(void)con_live_pump(l, s->model,
				    con_live_now_ms() + 50 < until ?
					    con_live_now_ms() + 50 :
					    until);
	if (!l->frames) {
		fprintf(stderr, "weft-console: %s: %s\n", l->target,
			l->error[0] ? l->error : "nothing received");
		return 2;
	}
	if (!l->connected && l->error[0])
		fprintf(stderr, "weft-console: %s: %s\n", l->target, l->error);
	con_model_resort(s->model);
	con_session_watch(s);
	con_grid_init(&g, width, (int)once_rows(s), s->ascii);
	con_screen_draw(s, &g);
	con_grid_print(&g, stdout);
	con_grid_fini(&g);
	if (s->view == CON_VIEW_DETAIL && s->detail_task &&
	    !con_model_task(s->model, s->detail_task))
		status = 1;
	return status;
}

static int run_live(con_session_t *s, const char *target, int col,
		    bool invert, const char *filter, bool once,
		    uint64_t after_ns, int width)
{
	char found[32];
	con_model_t m;
	con_live_t l;
	int status;

	if (!target)
		target = find_target(found, sizeof(found));
	if (con_live_init(&l, target))
		con_die("bad target '%s' (a pid, unix:PATH or "
			"tcp://HOST:PORT)",
			target);
	con_model_init(&m, target);
	m.mode = CON_MODE_LIVE;
	con_model_set_sort(&m, col, invert);
	if (filter)
		con_model_set_filter(&m, filter);
	s->model = &m;
	s->live = &l;
	if (once) {
		s->once = true;
		status = once_live(s, &l, after_ns, width);
	} else {
		/* A first attempt now: a wrong target shows at once. */
		(void)con_live_connect(&l);
		status = con_tty_run(s);
	}
	con_live_fini(&l);
	con_model_fini(&m);
	if (fflush(stdout))
		status = 1;
	return status;
}

int main(int argc, char **argv)
{
	const char *replay = NULL, *view = "workers", *target = NULL;
	const char *filter = NULL;
	uint64_t after = 0;
	bool once = false, have_after = false, invert = false;
	int width = 120, col = CON_COL_ID, status = 0;
	con_session_t s = { .speed = 1.0, .color = true };
	con_model_t m;
	con_replay_t rp;
	char title[4096];
	const char *cs;

	setlocale(LC_ALL, "");
	cs = nl_langinfo(CODESET);
	if (!cs || strcmp(cs, "UTF-8")) {
		if (setlocale(LC_CTYPE, "C.UTF-8"))
			cs = nl_langinfo(CODESET);
		if (!cs || strcmp(cs, "UTF-8"))
			s.ascii = true;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--replay")) {
			replay = need(argc, argv, &i);
		} else if (!strcmp(a, "--once")) {
			once = true;
		} else if (!strcmp(a, "--view")) {
			view = need(argc, argv, &i);
		} else if (!strcmp(a, "--after")) {
			if (con_parse_duration(need(argc, argv, &i), &after))
				con_die("--after: not a duration: %s",
					argv[i]);
			have_after = true;
		} else if (!strcmp(a, "--width")) {
			width = atoi(need(argc, argv, &i));
			if (width < 20 || width > 1000)
				con_die("--width: 20 to 1000");
		} else if (!strcmp(a, "--sort")) {
			col = sort_col(need(argc, argv, &i));
		} else if (!strcmp(a, "--invert")) {
			invert = true;
		} else if (!strcmp(a, "--filter")) {
			filter = need(argc, argv, &i);
		} else if (!strcmp(a, "--speed")) {
			s.speed = atof(need(argc, argv, &i));
			if (!(s.speed > 0 && s.speed <= 1000))
				con_die("--speed: a number above 0");
		} else if (!strcmp(a, "--fps")) {
			int fps = atoi(need(argc, argv, &i));

			if (fps < 1 || fps > 100)
				con_die("--fps: 1 to 100");
			s.fps = (unsigned)fps;
		} else if (!strcmp(a, "--exit-after")) {
			if (con_parse_duration(need(argc, argv, &i),
					       &s.exit_after_ns) ||
			    !s.exit_after_ns)
				con_die("--exit-after: not a duration: %s",
					argv[i]);
		} else if (!strcmp(a, "--stats")) {
			s.stats_path = need(argc, argv, &i);
		} else if (!strcmp(a, "--paused")) {
			s.paused = true;
		} else if (!strcmp(a, "--ascii")) {
			s.ascii = true;
		} else if (!strcmp(a, "--no-color")) {
			s.color = false;
		} else if (a[0] == '-') {
			con_die("unknown option %s (--help)", a);
		} else if (!target) {
			target = a;
		} else {
			con_die("one target at most (--help)");
		}
	}
	if (getenv("NO_COLOR"))
		s.color = false;
	if (replay && target)
		con_die("--replay FILE or a TARGET, not both (--help)");
	if (!strncmp(view, "task:", 5)) {
		char *end;

		s.detail_task = strtoull(view + 5, &end, 10);
		if (*end || !s.detail_task)
			con_die("--view task:ID needs a task id");
		s.view = CON_VIEW_DETAIL;
	} else {
		const con_view_t *v = con_view_by_name(view);

		if (!v)
			con_die("unknown view '%s' (workers, tasks, warnings, "
				"detail, timeline, spike, task:ID)",
				view);
		for (int i = 0; i < CON_VIEW_MAX; i++)
			if (con_view_get(i) == v)
				s.view = i;
	}
	s.prev_view = CON_VIEW_TASKS;

	if (!replay)
		return run_live(&s, target, col, invert, filter, once,
				have_after ? after : 0, width);
	if (con_replay_open(&rp, replay))
		return 2;
	snprintf(title, sizeof(title), "replay %s", replay);
	con_model_init(&m, title);
	m.mode = CON_MODE_REPLAY;
	con_model_set_sort(&m, col, invert);
	if (filter)
		con_model_set_filter(&m, filter);
	s.model = &m;
	s.rp = &rp;
	s.replay = true;

	if (once) {
		con_grid_t g;
		uint64_t pos = have_after ? rp.first_ns + after : rp.last_ns;

		s.once = true;
		con_replay_seek(&rp, &m, pos);
		con_model_resort(&m);
		con_session_watch(&s);
		if (rp.error)
			fprintf(stderr, "weft-console: %s: %s\n", replay,
				rp.error);
		con_grid_init(&g, width, (int)once_rows(&s), s.ascii);
		con_screen_draw(&s, &g);
		con_grid_print(&g, stdout);
		con_grid_fini(&g);
		if (s.view == CON_VIEW_DETAIL && s.detail_task &&
		    !con_model_task(&m, s.detail_task))
			status = 1;
	} else {
		con_replay_seek(&rp, &m, rp.first_ns);
		status = con_tty_run(&s);
	}
	con_model_fini(&m);
	con_replay_close(&rp);
	if (fflush(stdout))
		status = 1;
	return status;
}
