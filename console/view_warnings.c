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

/*
 * When @w's event was, on the timeline the screen counts in.  Live: the
 * process's uptime (the header's "up").  A replay: from the file's start,
 * as its position ("0s / 3.0s") and weft-trace's times count, whatever
 * the process's age when it was recorded (weft-trace record attaches to
 * a process running for hours); a warning about what came before the
 * file began (raised before the recording, or a poll begun before it
 * and told after) is before its start, and reads so: "-1.50s".
 */
static const char *warning_at(const con_session_t *s, const con_warning_t *w,
			      char *buf, size_t len)
{
	uint64_t base = con_time_base(s);

	if (s->rp && w->at_ns && w->at_ns < base && len > 1) {
		buf[0] = '-';
		con_fmt_ns(buf + 1, len - 1, base - w->at_ns);
		return buf;
	}
	return con_fmt_ns(buf, len, w->at_ns > base ? w->at_ns - base : 0);
}

static void warnings_draw(const con_session_t *s, con_grid_t *g, int top,
			  int rows)
{
	const con_model_t *m = s->model;
	unsigned history = 0, before = 0;
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
		warning_at(s, w, at, sizeof(at));
		before += at[0] == '-';
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
			     s->rp ? "(* raised before the recording began)" :
				     "(* raised before this console attached)");
	if (m->nwarnings && s->rp && y < top + rows)
		con_grid_put(g, 1, y++, CON_ROLE_DIM,
			     before ? "(AT: from the file's start; "
				      "-: before it began)" :
				      "(AT: from the file's start)");
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
