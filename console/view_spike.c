/* SPDX-License-Identifier: MIT */
/*
 * Spike: the polls of one timeline bucket (the one the timeline's cursor
 * stood on when Enter was pressed), longest first: duration, task id,
 * name, worker, when it ended, where the task was spawned.  The model
 * keeps the CON_TL_TOP longest polls per bucket; the header says how
 * many polls the bucket had in all.  Enter opens the selected poll's
 * task; Esc goes back to the timeline.  Reached only through the
 * timeline (no tab letter); --view spike shows the bucket with the
 * longest poll.
 */
#include "console.h"

uint64_t con_spike_bucket(const con_session_t *s)
{
	return s->spike_bucket ? s->spike_bucket :
				 con_model_worst_bucket(s->model);
}

static size_t spike_count(const con_session_t *s)
{
	con_poll_t top[CON_TL_TOP];

	return con_model_spike(s->model, con_spike_bucket(s), top, NULL);
}

static void spike_draw(const con_session_t *s, con_grid_t *g, int top, int rows)
{
	const con_model_t *m = s->model;
	uint64_t b = con_spike_bucket(s), polls;
	con_poll_t p[CON_TL_TOP];
	size_t n = con_model_spike(m, b, p, &polls);
	uint64_t t0 = b * CON_TL_BUCKET_NS;
	char at[16], len[16];
	int y = top;

	con_grid_printf(
		g, 1, y++, CON_ROLE_TITLE,
		"polls in the %llums at %s from the start: %llu, "
		"the %zu longest first (Enter: the task, Esc: back)",
		CON_TL_BUCKET_NS / 1000000ull,
		con_fmt_ns(at, sizeof(at),
			   t0 > con_time_base(s) ? t0 - con_time_base(s) : 0),
		(unsigned long long)polls, n);
	con_grid_fill_row(g, y, CON_ROLE_COLUMN);
	con_grid_printf(g, 0, y++, CON_ROLE_COLUMN,
			" %8s %7s %-16s %3s %11s  %s", "POLL", "TASK", "NAME",
			"W", "ENDED", "LOCATION");
	if (!n) {
		con_grid_put(g, 1, y, CON_ROLE_DIM,
			     b ? "(no polls kept for this bucket: it left "
				 "the strip, or none ran)" :
				 "(no poll events yet)");
		return;
	}
	for (size_t i = s->scroll[CON_VIEW_SPIKE]; i < n && y < top + rows;
	     i++, y++) {
		const con_task_t *t = con_model_task(m, p[i].task);
		bool sel = !s->once && i == s->sel[CON_VIEW_SPIKE];
		con_role_t r = sel ? CON_ROLE_SELECTED :
			       p[i].dur_ns >= 10ull * 1000 * 1000 ?
				     CON_ROLE_BAD :
				     CON_ROLE_NORMAL;
		char loc[128];

		if (sel)
			con_grid_fill_row(g, y, r);
		if (t && t->file[0])
			snprintf(loc, sizeof(loc), "%s:%u", t->file, t->line);
		else
			snprintf(loc, sizeof(loc), "%s", t ? "-" : "(gone)");
		con_grid_printf(
			g, 0, y, r, " %8s %7llu %-16.16s %3u %11.6f  %s",
			con_fmt_ns(len, sizeof(len), p[i].dur_ns),
			(unsigned long long)p[i].task,
			t && t->name[0] ? t->name : "-", p[i].worker,
			(double)(p[i].end_ns > con_time_base(s) ?
					 p[i].end_ns - con_time_base(s) :
					 0) /
				1e9,
			loc);
	}
}

static unsigned spike_enter(con_session_t *s)
{
	con_poll_t p[CON_TL_TOP];
	size_t n = con_model_spike(s->model, con_spike_bucket(s), p, NULL);
	size_t i = s->sel[CON_VIEW_SPIKE];

	if (i >= n || !p[i].task)
		return 0;
	s->detail_task = p[i].task;
	s->prev_view = s->view;
	s->view = CON_VIEW_DETAIL;
	return CON_REDRAW;
}

const con_view_t con_view_spike = {
	.name = "spike",
	.letter = 0,
	.title = "Spike",
	.draw = spike_draw,
	.count = spike_count,
	.enter = spike_enter,
};
