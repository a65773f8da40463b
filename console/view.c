/* SPDX-License-Identifier: MIT */
/*
 * The frame around the views: the two header lines (con_model_header's
 * figures), the tab line, the status line and the help overlay.  Reads
 * the session and the model; changes neither (con_session_clamp, which
 * moves the selection into range, and con_session_watch, which points
 * the model at the task the detail shows, are called by the loop before
 * drawing).
 */
#include <string.h>

#include "console.h"

static const con_view_t *const views[CON_VIEW_MAX] = {
	[CON_VIEW_WORKERS] = &con_view_workers,
	[CON_VIEW_TASKS] = &con_view_tasks,
	[CON_VIEW_WARNINGS] = &con_view_warnings,
	[CON_VIEW_DETAIL] = &con_view_detail,
	[CON_VIEW_TIMELINE] = &con_view_timeline,
	[CON_VIEW_SPIKE] = &con_view_spike,
	[CON_VIEW_RESOURCES] = &con_view_resources,
	[CON_VIEW_RESOURCE] = &con_view_resource,
	[CON_VIEW_SITES] = &con_view_sites,
};

const con_view_t *con_view_get(con_view_id_t id)
{
	return id < CON_VIEW_MAX ? views[id] : views[0];
}

const con_view_t *con_view_by_name(const char *name)
{
	for (int i = 0; i < CON_VIEW_MAX; i++)
		if (!strcmp(views[i]->name, name))
			return views[i];
	return NULL;
}

/* Rows the view gets: everything but the header (2), tabs (1), status. */
static int view_rows(const con_session_t *s, const con_grid_t *g)
{
	return g->h - 3 - (s->once ? 0 : 1);
}

void con_session_resort(con_session_t *s)
{
	s->model->groups_on = s->view == CON_VIEW_SITES;
	con_model_resort(s->model);
}

void con_session_clamp(con_session_t *s, int screen_rows)
{
	const con_view_t *v = con_view_get(s->view);
	size_t n = v->count ? v->count(s) : 0;
	size_t *sel = &s->sel[s->view], *top = &s->scroll[s->view];
	/* One row of the view is its column header. */
	size_t rows = screen_rows > 5 ? (size_t)(screen_rows - 5) : 1;

	if (*sel >= n)
		*sel = n ? n - 1 : 0;
	if (*sel < *top)
		*top = *sel;
	if (*sel >= *top + rows)
		*top = *sel - rows + 1;
}

void con_session_watch(con_session_t *s)
{
	con_model_t *m = s->model;
	uint64_t id = 0;

	if (s->view == CON_VIEW_DETAIL)
		id = s->detail_task ? s->detail_task : con_tasks_selected(s);
	if (id != m->watch_task) {
		con_model_watch(m, id);
		if (id && s->rp) {
			weft_event_t ev[CON_WATCH_EVENTS];
			size_t n = con_replay_task_events(s->rp, id, ev,
							  CON_WATCH_EVENTS);

			con_model_watch_fill(m, ev, n);
		}
	}
	if (id && s->live && s->live->connected && s->asked_task != id &&
	    con_live_request_task(s->live, id) == 0)
		s->asked_task = id;
}

static void draw_header(const con_session_t *s, con_grid_t *g)
{
	const con_model_t *m = s->model;
	con_header_t h;
	char up[16], p[16], st[16], ev[16];
	con_mode_t mode;
	int x;

	con_model_header(m, &h);
	mode = s->paused ? CON_MODE_PAUSED : h.mode;
	con_grid_fill_row(g, 0, CON_ROLE_HEADER);
	x = con_grid_printf(g, 0, 0, CON_ROLE_HEADER, " weft-console  %s",
			    h.target);
	if (m->pid)
		x = con_grid_printf(g, x, 0, CON_ROLE_HEADER, "  pid %u %s",
				    m->pid, m->process);
	x = con_grid_printf(g, x, 0, CON_ROLE_HEADER, "  up %s",
			    con_fmt_ns(up, sizeof(up), h.uptime_ns));
	if (s->replay && s->rp)
		x = con_grid_printf(g, x, 0, CON_ROLE_HEADER, "  x%g%s",
				    s->speed, s->at_end ? "  (end)" : "");
	if (s->live && !s->live->connected)
		x = con_grid_printf(g, x, 0, CON_ROLE_BAD, "  DISCONNECTED");
	/* The mode always shows, over the end of a long target. */
	(void)x;
	con_grid_printf(g, g->w > 9 ? g->w - 9 : 0, 0, CON_ROLE_MODE,
			" %-7s ", con_mode_name(mode));
	con_grid_printf(g, 0, 1, CON_ROLE_NORMAL,
			" workers %u  live tasks %llu  polls/s %s  steals/s %s"
			" (rate %.1f%%)  events/s %s  dropped %llu"
			"  probe cpu %.1f%%",
			h.workers, (unsigned long long)h.live_tasks,
			con_fmt_count(p, sizeof(p), h.polls_per_s),
			con_fmt_count(st, sizeof(st), h.steals_per_s),
			(h.steal_rate > 1 ? 1 : h.steal_rate) * 100.0,
			con_fmt_count(ev, sizeof(ev), h.events_per_s),
			(unsigned long long)h.dropped, h.collector_cpu * 100.0);
	/* Row 1's end (0 where there is no row 1: a one-row terminal). */
	x = con_grid_row_end(g, 1);
	con_grid_printf(g, x + 2, 1, h.warnings ? CON_ROLE_WARN : CON_ROLE_NORMAL,
			"warnings %llu", (unsigned long long)h.warnings);
}

static void draw_tabs(const con_session_t *s, con_grid_t *g)
{
	int x = 1;

	for (int i = 0; i < CON_VIEW_MAX; i++) {
		const con_view_t *v = views[i];
		con_role_t r = (int)s->view == i ? CON_ROLE_SELECTED :
						  CON_ROLE_TITLE;

		if (!v->letter) {
			if ((int)s->view == i)
				x = con_grid_printf(g, x, 2, r, " %s ",
						    v->title) +
				    1;
			continue;
		}
		x = con_grid_printf(g, x, 2, r, " %c %s ", v->letter, v->title);
		x++;
	}
}

static void draw_status(const con_session_t *s, con_grid_t *g)
{
	int y = g->h - 1;

	con_grid_fill_row(g, y, CON_ROLE_HEADER);
	if (s->filter_edit) {
		con_grid_printf(g, 0, y, CON_ROLE_HEADER,
				" filter: %s_   (Enter apply, Esc cancel)",
				s->filter_buf);
		return;
	}
	if (s->replay && s->rp) {
		const con_replay_t *r = s->rp;
		char a[16], b[16], note[80] = "";
		uint64_t from_ns, end_ns, last;
		bool ahead = con_replay_ahead(r, &from_ns, &end_ns);

		/* What the file lost: the reader read around it. */
		if (r->skipped)
			snprintf(note, sizeof(note),
				 "  [%llu bytes of torn records skipped%s]",
				 (unsigned long long)r->skipped,
				 r->truncated || r->error ? ", file cut" : "");
		else if (r->truncated || r->error)
			snprintf(note, sizeof(note), "  [file cut]");
		/* Still indexing: the end known so far (the marks' when they
		 * tell one), and how far; ahead of it, from a mark in the
		 * file, which knows the tasks live there, not those before. */
		last = end_ns > r->last_ns ? end_ns : r->last_ns;
		if (!r->indexed)
			snprintf(note, sizeof(note), "  [%sindexing %.0f%%]",
				 ahead ? "from a checkpoint: tasks ended "
					 "before it not shown; " :
					 "",
				 r->size ? 100.0 * (double)r->indexed_bytes /
						   (double)r->size :
					   0.0);
		con_grid_printf(g, 0, y, CON_ROLE_HEADER,
				" %s / %s%s  p play/pause  +/- speed  [ ] seek"
				"  n next warning  ? help  q quit",
				con_fmt_ns(a, sizeof(a),
					   r->pos_ns > r->first_ns ?
						   r->pos_ns - r->first_ns :
						   0),
				con_fmt_ns(b, sizeof(b), last - r->first_ns),
				note);
		return;
	}
	if (s->live && !s->live->connected) {
		con_grid_printf(g, 0, y, CON_ROLE_BAD,
				" %s: %s; retrying every second (the last "
				"state stays)  q quit",
				s->live->target,
				s->live->error[0] ? s->live->error :
						    "not connected");
		return;
	}
	con_grid_put(g, 0, y, CON_ROLE_HEADER,
		     " ? help  q quit  space pause  / filter  < > sort"
		     "  i invert  Enter detail  Esc back");
}

uint64_t con_time_base(const con_session_t *s)
{
	return s->rp ? s->rp->first_ns : s->model->start_ns;
}

void con_screen_draw(const con_session_t *s, con_grid_t *g)
{
	const con_view_t *v = con_view_get(s->view);
	int rows = view_rows(s, g);

	con_grid_clear(g);
	draw_header(s, g);
	draw_tabs(s, g);
	/* The view and the help draw in the view's rows only: what they
	 * would put past them (a long detail, a help taller than the
	 * screen) is dropped, not drawn over the status line. */
	if (rows > 0) {
		con_grid_clip(g, 3, rows);
		v->draw(s, g, 3, rows);
		con_grid_unclip(g);
	}
	if (!s->once) {
		draw_status(s, g);
		if (s->help && rows > 0) {
			con_grid_clip(g, 3, rows);
			con_keys_help(g, 3, rows);
			con_grid_unclip(g);
		}
	}
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

/*
 * The Tasks view of many tasks a page at a time: one grid as tall as the
 * list was 960 bytes a task (120 cells of 8 bytes a row), four times
 * what the model holds for the task.  The first page prints the header
 * and the column labels, the others their task rows only: the text is
 * the same as one tall grid's.
 */
void con_once_print(con_session_t *s, int width, FILE *out)
{
	const con_model_t *m = s->model;
	con_grid_t g;

	if (s->view != CON_VIEW_TASKS || m->nlist <= CON_ONCE_PAGE) {
		con_grid_init(&g, width, (int)once_rows(s), s->ascii);
		con_screen_draw(s, &g);
		con_grid_print(&g, out);
		con_grid_fini(&g);
		return;
	}
	/* Header (2), tabs, column labels, then the page. */
	con_grid_init(&g, width, 4 + CON_ONCE_PAGE, s->ascii);
	for (size_t at = 0; at < m->nlist; at += CON_ONCE_PAGE) {
		s->scroll[CON_VIEW_TASKS] = at;
		con_screen_draw(s, &g);
		con_grid_print_from(&g, at ? 4 : 0, out);
	}
	s->scroll[CON_VIEW_TASKS] = 0;
	con_grid_fini(&g);
}
