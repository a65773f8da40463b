/* SPDX-License-Identifier: MIT */
/*
 * Warnings view: newest first, one row each (when, kind, task, worker,
 * how long, what).  Enter jumps to the warning's task.
 */
#include "console.h"

const con_warning_t *con_warnings_row(const con_model_t *m, size_t i)
{
	return i < m->nwarnings ? &m->warnings[m->nwarnings - 1 - i] : NULL;
}

static size_t warnings_count(const con_session_t *s)
{
	return s->model->nwarnings;
}

static con_role_t kind_role(uint32_t kind)
{
	switch (kind) {
	case WEFT_WARN_LOCK_HELD_ACROSS_AWAIT:
	case WEFT_WARN_LONG_POLL:
	case WEFT_WARN_LOST_WAKER:
	case WEFT_WARN_EVENTS_DROPPED:
	case WEFT_WARN_DEADLOCK:
		return CON_ROLE_BAD;
	default:
		return CON_ROLE_WARN;
	}
}

static void warnings_draw(const con_session_t *s, con_grid_t *g, int top,
			  int rows)
{
	const con_model_t *m = s->model;
	unsigned history = 0;
	int y = top;

	con_grid_fill_row(g, y, CON_ROLE_COLUMN);
	con_grid_printf(g, 0, y++, CON_ROLE_COLUMN,
			" %9s  %-24s %-22s %3s %8s  %s", "AT", "KIND", "TASK",
			"W", "VALUE", "DETAIL");
	for (size_t i = s->scroll[CON_VIEW_WARNINGS];
	     i < m->nwarnings && y < top + rows; i++, y++) {
		const con_warning_t *w = con_warnings_row(m, i);
		bool sel = !s->once && i == s->sel[CON_VIEW_WARNINGS];
		con_role_t r = sel ? CON_ROLE_SELECTED : CON_ROLE_NORMAL;
		char at[16], val[16], task[64], wk[8];
		int x;

		if (sel)
			con_grid_fill_row(g, y, r);
		con_fmt_ns(at, sizeof(at),
			   w->at_ns > m->start_ns ? w->at_ns - m->start_ns : 0);
		snprintf(task, sizeof(task), "%llu %s",
			 (unsigned long long)w->task, w->task_name);
		/* '*': raised before this console attached (legend below). */
		x = con_grid_printf(g, 0, y, r, "%c%9s  ",
				    w->history ? '*' : ' ', at);
		history += w->history;
		x = con_grid_printf(g, x, y, sel ? r : kind_role(w->kind),
				    "%-24s", weft_warning_kind_name(w->kind));
		con_grid_printf(g, x, y, r, " %-22.22s %3s %8s  %s", task,
				con_fmt_worker(wk, sizeof(wk), w->worker),
				w->value_ns ? con_fmt_ns(val, sizeof(val),
							 w->value_ns) :
					      "-",
				w->detail);
	}
	if (!m->nwarnings)
		con_grid_put(g, 1, y, CON_ROLE_GOOD, "(no warnings)");
	else if (history && y < top + rows)
		con_grid_put(g, 1, y++, CON_ROLE_DIM,
			     "(* raised before this console attached)");
	if (m->nwarnings && m->warnings_discarded && y < top + rows)
		con_grid_printf(g, 1, y, CON_ROLE_DIM,
				"(%llu older warnings discarded)",
				(unsigned long long)m->warnings_discarded);
}

static unsigned warnings_enter(con_session_t *s)
{
	const con_warning_t *w =
		con_warnings_row(s->model, s->sel[CON_VIEW_WARNINGS]);

	if (!w || !w->task)
		return 0;
	s->detail_task = w->task;
	s->prev_view = s->view;
	s->view = CON_VIEW_DETAIL;
	return CON_REDRAW;
}

const con_view_t con_view_warnings = {
	.name = "warnings",
	.letter = 'x',
	.title = "Warnings",
	.draw = warnings_draw,
	.count = warnings_count,
	.enter = warnings_enter,
};
