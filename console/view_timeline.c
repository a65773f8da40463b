/* SPDX-License-Identifier: MIT */
/*
 * Timeline: per worker a strip of the share of time in polls per
 * CON_TL_BUCKET_NS over the last buckets (newest on the right), from the
 * POLL events; buckets holding a poll longer than the long-poll
 * threshold (10 ms) are marked in the "bad" role.  Time in polls, not
 * busy time (not parked, the workers view's BUSY%): a worker spinning on
 * a task that wakes itself shows a faint strip though it never rests.
 *
 * A cursor (h l, or the arrows) picks a column: the bucket it stands on
 * is drawn selected and described under the strips (when, polls, the
 * longest); Enter lists that bucket's polls (view_spike.c).  The cursor
 * is a bucket number, so it stays on its spike while the strip scrolls;
 * 0 follows the newest bucket.
 */
#include "console.h"

#define LONG_POLL_NS (10ull * 1000 * 1000)

static size_t timeline_count(const con_session_t *s)
{
	return s->model->nworkers;
}

uint64_t con_timeline_cursor(const con_session_t *s)
{
	const con_model_t *m = s->model;
	uint64_t b = s->tl_cursor;

	if (!m->tl_last)
		return 0;
	if (!b || b > m->tl_last)
		return m->tl_last;
	if (b < m->tl_first)
		b = m->tl_first;
	if (b + CON_TL_BUCKETS <= m->tl_last)
		b = m->tl_last + 1 - CON_TL_BUCKETS;
	return b;
}

/* The line under the strips: the bucket under the cursor. */
static void cursor_draw(const con_session_t *s, con_grid_t *g, int y)
{
	const con_model_t *m = s->model;
	uint64_t b = con_timeline_cursor(s), polls;
	con_poll_t top[CON_TL_TOP];
	size_t n = con_model_spike(m, b, top, &polls);
	char at[16], dur[16];
	uint64_t t0 = b * CON_TL_BUCKET_NS;
	int x;

	x = con_grid_printf(
		g, 1, y, CON_ROLE_TITLE,
		"cursor: %s from the start%s  %llu polls",
		con_fmt_ns(at, sizeof(at),
			   t0 > con_time_base(s) ? t0 - con_time_base(s) : 0),
		s->tl_cursor ? "" : " (newest)", (unsigned long long)polls);
	if (n) {
		const con_task_t *t = con_model_task(m, top[0].task);

		x = con_grid_printf(g, x, y,
				    top[0].dur_ns >= LONG_POLL_NS ?
					    CON_ROLE_BAD :
					    CON_ROLE_NORMAL,
				    ", longest %s by task %llu %s on worker %u",
				    con_fmt_ns(dur, sizeof(dur), top[0].dur_ns),
				    (unsigned long long)top[0].task,
				    t && t->name[0] ? t->name : "",
				    top[0].worker);
	}
	con_grid_put(g, x + 2, y, CON_ROLE_DIM,
		     "(h l move, Enter lists its polls)");
}

static void timeline_draw(const con_session_t *s, con_grid_t *g, int top,
			  int rows)
{
	static const wchar_t uni[] = L" ░▒▓█";
	static const wchar_t asc[] = L" .:+#";
	const con_model_t *m = s->model;
	int width = g->w - 8, y = top;
	uint64_t cur = con_timeline_cursor(s);

	/* The strip's columns: none on a grid narrower than its margins. */
	if (width > CON_TL_BUCKETS)
		width = CON_TL_BUCKETS;
	if (width < 0)
		width = 0;
	con_grid_fill_row(g, y, CON_ROLE_COLUMN);
	con_grid_printf(g, 0, y++, CON_ROLE_COLUMN,
			" W     time in polls per %llums, newest right (%s: "
			"poll over 10ms)",
			CON_TL_BUCKET_NS / 1000000ull, g->ascii ? "!" : "red");
	if (!m->tl_last) {
		con_grid_put(g, 1, y, CON_ROLE_DIM, "(no poll events yet)");
		return;
	}
	for (uint32_t i = 0; i < m->nworkers && y < top + rows - 2; i++, y++) {
		const con_worker_t *w = &m->workers[i];

		con_grid_printf(g, 0, y, CON_ROLE_NORMAL, " %-4u ", i);
		for (int k = 0; k < width; k++) {
			uint64_t b = m->tl_last - (uint64_t)(width - 1 - k);
			double f;
			int level;
			bool spike;
			con_cell_t *c;

			c = con_grid_cell(g, 6 + k, y);
			if (!c)
				break;
			if (b > m->tl_last || b < m->tl_first) {
				if (b == cur && !s->once)
					c->role = CON_ROLE_SELECTED;
				continue;
			}
			f = w->series ? (double)w->series->tl_poll_ns
							[b % CON_TL_BUCKETS] /
						(double)CON_TL_BUCKET_NS :
					0;
			level = f <= 0 ? 0 : (int)(f * 3.999) + 1;
			if (level > 4)
				level = 4;
			spike = w->series &&
				w->series->tl_max_poll[b % CON_TL_BUCKETS] >=
					LONG_POLL_NS;
			c->ch = spike && g->ascii ? L'!' :
				g->ascii          ? asc[level] :
						    uni[level];
			c->role = b == cur && !s->once ? CON_ROLE_SELECTED :
				  spike                ? CON_ROLE_BAD :
							 CON_ROLE_SPARK;
		}
	}
	/* A caret under the cursor's column, then what it stands on. */
	if (y < top + rows && width > 0 && cur + (uint64_t)width > m->tl_last) {
		int k = width - 1 - (int)(m->tl_last - cur);

		con_grid_put(g, 6 + k, y, CON_ROLE_TITLE, "^");
	}
	y++;
	if (y < top + rows)
		cursor_draw(s, g, y);
}

static unsigned timeline_enter(con_session_t *s)
{
	uint64_t b = con_timeline_cursor(s);

	if (!b)
		return 0;
	s->spike_bucket = b;
	s->prev_view = s->view;
	s->view = CON_VIEW_SPIKE;
	s->sel[CON_VIEW_SPIKE] = 0;
	s->scroll[CON_VIEW_SPIKE] = 0;
	return CON_REDRAW;
}

const con_view_t con_view_timeline = {
	.name = "timeline",
	.letter = 'm',
	.title = "Timeline",
	.draw = timeline_draw,
	.count = timeline_count,
	.enter = timeline_enter,
};
