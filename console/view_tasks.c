/* SPDX-License-Identifier: MIT */
/*
 * Tasks view: the model's sorted, filtered list (con_model_resort), one
 * row per task; the sort column's label carries an arrow.  Enter opens
 * the selected task's detail.  The last three columns, where a task is
 * parked, what it waits on (the resource's kind and name, or where it
 * was initialised) and where it was spawned, share what the others
 * leave of the width (file names keep their end, with the line).
 */
#include <stdlib.h>
#include <string.h>

#include "console.h"

static const struct {
	int width; /* negative: left-aligned */
} cols[CON_COL_MAX] = {
	/* Durations are at most 7 characters (con_fmt_ns): the row fits
	 * 120 columns with PARKED AT, WAITING ON and LOCATION at their
	 * labels' widths. */
	[CON_COL_ID] = { 7 },	   [CON_COL_NAME] = { -13 },
	[CON_COL_STATE] = { -9 },  [CON_COL_WORKER] = { 3 },
	[CON_COL_POLLS] = { 7 },   [CON_COL_BUSY] = { 7 },
	[CON_COL_SCHED] = { 7 },   [CON_COL_IDLE] = { 7 },
	[CON_COL_WAKES] = { 7 },   [CON_COL_MAXPOLL] = { 7 },
	[CON_COL_WARN] = { 4 },	   [CON_COL_PARKED] = { -24 },
	[CON_COL_WAITING] = { -24 }, [CON_COL_LOCATION] = { -30 },
};

/*
 * Column @c's width on a grid @gw wide: the fixed ones as listed; PARKED
 * AT, WAITING ON and LOCATION split the rest (at least their labels'
 * widths: a narrow terminal cuts the row, as before), LOCATION a
 * quarter, the others the larger shares, WAITING ON the largest: they
 * are what a hung task is looked up for.
 */
static int col_width(con_task_col_t c, int gw)
{
	int rest = gw - 1, loc, waiting, parked;

	if (c != CON_COL_PARKED && c != CON_COL_WAITING &&
	    c != CON_COL_LOCATION)
		return cols[c].width < 0 ? -cols[c].width : cols[c].width;
	for (int k = 0; k < CON_COL_PARKED; k++)
		rest -= 1 + (cols[k].width < 0 ? -cols[k].width :
						 cols[k].width);
	rest -= 3; /* the three columns' own spaces */
	loc = rest / 4 > 8 ? rest / 4 : 8;
	waiting = (rest - loc + 1) / 2;
	parked = rest - loc - waiting;
	if (c == CON_COL_PARKED)
		return parked > 9 ? parked : 9;
	if (c == CON_COL_WAITING)
		return waiting > 10 ? waiting : 10;
	return loc > 8 ? loc : 8;
}

static size_t tasks_count(const con_session_t *s)
{
	return s->model->nlist;
}

uint64_t con_tasks_selected(const con_session_t *s)
{
	const con_model_t *m = s->model;
	size_t i = s->sel[CON_VIEW_TASKS];

	return i < m->nlist ? m->list[i]->id : 0;
}

static void cell_text(const con_model_t *m, const con_task_t *t,
		      con_task_col_t c, char *buf, size_t len)
{
	const con_worker_t *w;
	char since[16];

	switch (c) {
	case CON_COL_ID:
		snprintf(buf, len, "%llu", (unsigned long long)t->id);
		break;
	case CON_COL_NAME:
		snprintf(buf, len, "%s", t->name[0] ? t->name : "-");
		break;
	case CON_COL_STATE:
		snprintf(buf, len, "%s", con_task_status_name(m, t));
		break;
	case CON_COL_WORKER:
		con_fmt_worker(buf, len, con_task_shown_worker(m, t));
		break;
	case CON_COL_POLLS:
		snprintf(buf, len, "%llu", (unsigned long long)t->polls);
		break;
	case CON_COL_BUSY:
		con_fmt_ns(buf, len, t->busy_ns);
		break;
	case CON_COL_SCHED:
		con_fmt_ns(buf, len, t->scheduled_ns);
		break;
	case CON_COL_IDLE:
		if (con_task_idle_unknown(m, t))
			snprintf(buf, len, "?");
		else
			con_fmt_ns(buf, len, con_task_idle_ns(m, t));
		break;
	case CON_COL_WAKES:
		snprintf(buf, len, "%llu", (unsigned long long)t->wakes);
		break;
	case CON_COL_MAXPOLL:
		con_fmt_ns(buf, len, t->max_poll_ns);
		break;
	case CON_COL_WARN:
		snprintf(buf, len, "%d", __builtin_popcount(t->warnings));
		break;
	case CON_COL_PARKED:
		/* In a poll now: not parked, whatever its last await was. */
		if ((w = con_task_polled_by(m, t)))
			snprintf(
				buf, len, "in a poll %s",
				con_fmt_ns(
					since, sizeof(since),
					w->poll_started_ns &&
							m->now_ns >
								w->poll_started_ns ?
						m->now_ns - w->poll_started_ns :
						0));
		else if (t->parked_line && t->state != WEFT_TASK_DONE)
			snprintf(buf, len, "%s:%u",
				 t->parked_file[0] ? t->parked_file : "?",
				 t->parked_line);
		else
			snprintf(buf, len, "-");
		break;
	case CON_COL_WAITING:
		con_task_waiting_text(m, t, buf, len);
		break;
	case CON_COL_LOCATION:
		if (t->file[0])
			snprintf(buf, len, "%s:%u", t->file, t->line);
		else
			snprintf(buf, len, "-");
		break;
	default:
		buf[0] = '\0';
	}
}

/*
 * WAITING ON's text, "KIND NAME", cut: the kind stays whole (what a task
 * waits on at a glance), the name keeps its end, as file names do.
 */
static const char *fit_waiting(const char *s, int width, char *buf,
			       size_t len)
{
	const char *sp = strchr(s, ' ');
	size_t n = strlen(s), kind;

	if (width <= 0 || n <= (size_t)width || !sp)
		return con_fit_end(s, width, buf, len);
	kind = (size_t)(sp - s) + 1;
	if (kind + 2 > (size_t)width)
		return con_fit_end(s, width, buf, len);
	snprintf(buf, len, "%.*s~%s", (int)kind, s,
		 s + n - ((size_t)width - kind - 1));
	return buf;
}

static void tasks_draw(const con_session_t *s, con_grid_t *g, int top,
		       int rows)
{
	const con_model_t *m = s->model;
	const char *label[CON_COL_MAX];
	int wid[CON_COL_MAX];
	int x, y = top;

	for (int c = 0; c < CON_COL_MAX; c++) {
		wid[c] = cols[c].width > 0 ? col_width(c, g->w) :
					     -col_width(c, g->w);
		label[c] = con_task_col_label(c);
	}
	x = con_table_head(g, y, wid, label, CON_COL_MAX, (int)m->sort_col,
			   m->sort_invert);
	if (m->filter[0])
		con_grid_printf(g, x + 2, y, CON_ROLE_WARN, "filter: %s",
				m->filter);
	y++;
	for (size_t i = s->scroll[CON_VIEW_TASKS]; i < m->nlist && y < top + rows;
	     i++, y++) {
		const con_task_t *t = m->list[i];
		bool sel = !s->once && i == s->sel[CON_VIEW_TASKS];
		con_role_t r = sel                     ? CON_ROLE_SELECTED :
			       t->warnings             ? CON_ROLE_WARN :
			       t->state == WEFT_TASK_DONE ? CON_ROLE_DIM :
							    CON_ROLE_NORMAL;

		if (sel)
			con_grid_fill_row(g, y, r);
		x = 0;
		for (int c = 0; c < CON_COL_MAX; c++) {
			char buf[256], cut[256];

			cell_text(m, t, c, buf, sizeof(buf));
			/* WAITING ON keeps its kind whole; the rest keep
			 * their ends (con_table_cell()). */
			x = con_table_cell(g, x, y, r, wid[c],
					   c == CON_COL_WAITING ?
						   fit_waiting(buf, abs(wid[c]),
							       cut,
							       sizeof(cut)) :
						   buf);
		}
	}
	if (!m->nlist)
		con_grid_put(g, 1, y, CON_ROLE_DIM,
			     m->filter[0] ? "(no task matches the filter)" :
					    "(no tasks yet)");
}

static unsigned tasks_enter(con_session_t *s)
{
	uint64_t id = con_tasks_selected(s);

	if (!id)
		return 0;
	s->detail_task = id;
	s->prev_view = s->view;
	s->view = CON_VIEW_DETAIL;
	return CON_REDRAW;
}

const con_view_t con_view_tasks = {
	.name = "tasks",
	.letter = 't',
	.title = "Tasks",
	.draw = tasks_draw,
	.count = tasks_count,
	.enter = tasks_enter,
};
