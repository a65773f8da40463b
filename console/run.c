/* SPDX-License-Identifier: MIT */
/*
 * weft-console's two sessions, as main.c parsed them: a live process
 * (live.c) or a trace file (replay.c), each either printed once as text
 * (--once) or shown in the interactive UI (tty.c).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "console.h"

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
	con_session_resort(s);
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

int con_run_live(con_session_t *s, const con_opts_t *o)
{
	const char *target = o->target;
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
	con_model_set_sort(&m, o->col, o->invert);
	if (o->filter)
		con_model_set_filter(&m, o->filter);
	s->model = &m;
	s->live = &l;
	if (o->once) {
		s->once = true;
		status = once_live(s, &l, o->have_after ? o->after_ns : 0,
				   o->width);
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

int con_run_replay(con_session_t *s, const con_opts_t *o)
{
	con_model_t m;
	con_replay_t rp;
	char title[4096];
	int status = 0;

	/* The first record indexed, or a tenth of a second's worth: the
	 * first screen does not wait for the whole file's index (the rest
	 * is indexed between frames, or as far as --once needs). */
	if (con_replay_open_lazy(&rp, o->replay, CON_INDEX_OPEN_NS))
		return 2;
	snprintf(title, sizeof(title), "replay %s", o->replay);
	con_model_init(&m, title);
	m.mode = CON_MODE_REPLAY;
	con_model_set_sort(&m, o->col, o->invert);
	if (o->filter)
		con_model_set_filter(&m, o->filter);
	s->model = &m;
	s->rp = &rp;
	s->replay = true;

	if (o->once) {
		con_grid_t g;
		uint64_t pos;

		if (!o->have_after)
			con_replay_index(&rp, UINT64_MAX);
		pos = o->have_after ? rp.first_ns + o->after_ns : rp.last_ns;
		s->once = true;
		con_replay_seek(&rp, &m, pos);
		con_session_resort(s);
		con_session_watch(s);
		if (rp.error)
			fprintf(stderr, "weft-console: %s: %s\n", o->replay,
				rp.error);
		if (rp.skipped)
			fprintf(stderr,
				"weft-console: %s: %llu bytes of torn records "
				"skipped\n",
				o->replay, (unsigned long long)rp.skipped);
		con_grid_init(&g, o->width, (int)once_rows(s), s->ascii);
		con_screen_draw(s, &g);
		con_grid_print(&g, stdout);
		con_grid_fini(&g);
		if (s->view == CON_VIEW_DETAIL && s->detail_task &&
		    !con_model_task(&m, s->detail_task))
			status = 1;
	} else {
		con_replay_seek(&rp, &m, rp.first_ns);
		con_replay_progress_off(&rp);
		status = con_tty_run(s);
	}
	con_model_fini(&m);
	con_replay_close(&rp);
	if (fflush(stdout))
		status = 1;
	return status;
}
