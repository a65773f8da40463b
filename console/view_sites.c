/* SPDX-License-Identifier: MIT */
/*
 * Tasks by spawn site (key s from anywhere, s again back to the task
 * list): the model's groups (con_model_groups_resort: sorted, filtered),
 * one row per spawn site with live tasks: where, the oldest's name, its
 * live tasks idle, scheduled and running and in all, how long ago the
 * oldest was spawned, the line most of them are parked at (with how
 * many), and their warnings' kinds.  By default the sites with the most
 * live tasks come first: what one looks at when task-leak fires.  Enter
 * goes back to the task list filtered to that site.
 */
#include <string.h>

#include "console.h"

static const struct {
	int width; /* negative: left-aligned; 0: a share of the rest */
} cols[CON_GCOL_MAX] = {
	[CON_GCOL_SITE] = { 0 },     [CON_GCOL_NAME] = { -16 },
	[CON_GCOL_IDLE] = { 6 },     [CON_GCOL_SCHED] = { 6 },
	[CON_GCOL_RUNNING] = { 5 },  [CON_GCOL_LIVE] = { 6 },
	[CON_GCOL_OLDEST] = { 7 },   [CON_GCOL_PARKED] = { 0 },
	[CON_GCOL_WARN] = { -20 },
};

/* SPAWNED AT and MOST PARKED AT split what the others leave (at least
 * 14 columns each). */
static int col_width(con_group_col_t c, int gw)
{
	int rest = gw - 1;

	if (cols[c].width)
		return cols[c].width < 0 ? -cols[c].width : cols[c].width;
	for (int k = 0; k < CON_GCOL_MAX; k++)
		rest -= 1 +
			(cols[k].width < 0 ? -cols[k].width : cols[k].width);
	rest /= 2;
	return rest > 14 ? rest : 14;
}

static size_t sites_count(const con_session_t *s)
{
	return s->model->ngroup_list;
}

const con_group_t *con_sites_selected(const con_session_t *s)
{
	const con_model_t *m = s->model;
	size_t i = s->sel[CON_VIEW_SITES];

	return i < m->ngroup_list ? m->group_list[i] : NULL;
}

static void cell_text(const con_model_t *m, const con_group_t *g,
		      con_group_col_t c, char *buf, size_t len)
{
	switch (c) {
	case CON_GCOL_SITE:
		con_group_site(g, buf, len);
		break;
	case CON_GCOL_NAME:
		snprintf(buf, len, "%s", g->name[0] ? g->name : "-");
		break;
	case CON_GCOL_IDLE:
		snprintf(buf, len, "%u", g->idle);
		break;
	case CON_GCOL_SCHED:
		snprintf(buf, len, "%u", g->scheduled);
		break;
	case CON_GCOL_RUNNING:
		snprintf(buf, len, "%u", g->running);
		break;
	case CON_GCOL_LIVE:
		snprintf(buf, len, "%u", g->live);
		break;
	case CON_GCOL_OLDEST:
		/* A task live before the probe listened: older than that
		 * (">3.9s"), its spawn time unknown. */
		if (g->oldest_spawned_ns && m->now_ns > g->oldest_spawned_ns) {
			char age[16];

			con_fmt_ns(age, sizeof(age),
				   m->now_ns - g->oldest_spawned_ns);
			snprintf(buf, len, "%s%s", g->oldest_unseen ? ">" : "",
				 age);
		} else {
			snprintf(buf, len, "-");
		}
		break;
	case CON_GCOL_PARKED:
		if (g->parked_line)
			snprintf(buf, len, "%s:%u (%u)",
				 g->parked_file[0] ? g->parked_file : "?",
				 g->parked_line, g->parked_count);
		else
			snprintf(buf, len, "-");
		break;
	case CON_GCOL_WARN:
		con_fmt_warning_bits(g->warnings, buf, len);
		break;
	default:
		buf[0] = '\0';
	}
}

static void sites_draw(const con_session_t *s, con_grid_t *g, int top,
		       int rows)
{
	const con_model_t *m = s->model;
	const char *label[CON_GCOL_MAX];
	int wid[CON_GCOL_MAX];
	int x, y = top;

	for (int c = 0; c < CON_GCOL_MAX; c++) {
		wid[c] = cols[c].width > 0 ? col_width(c, g->w) :
					     -col_width(c, g->w);
		label[c] = con_group_col_label(c);
	}
	x = con_table_head(g, y, wid, label, CON_GCOL_MAX,
			   (int)m->group_sort_col, m->group_sort_invert);
	if (m->group_filter[0])
		con_grid_printf(g, x + 2, y, CON_ROLE_WARN, "filter: %s",
				m->group_filter);
	y++;
	for (size_t i = s->scroll[CON_VIEW_SITES];
	     i < m->ngroup_list && y < top + rows; i++, y++) {
		const con_group_t *gr = m->group_list[i];
		bool sel = !s->once && i == s->sel[CON_VIEW_SITES];
		con_role_t role = sel	       ? CON_ROLE_SELECTED :
				  gr->warnings ? CON_ROLE_WARN :
						 CON_ROLE_NORMAL;

		if (sel)
			con_grid_fill_row(g, y, role);
		x = 0;
		for (int c = 0; c < CON_GCOL_MAX; c++) {
			char buf[CON_RES_STR_MAX + 32];

			cell_text(m, gr, c, buf, sizeof(buf));
			x = con_table_cell(g, x, y, role, wid[c], buf);
		}
	}
	if (!m->ngroup_list)
		con_grid_put(g, 1, y, CON_ROLE_DIM,
			     m->group_filter[0] ?
				     "(no spawn site matches the filter)" :
				     "(no live tasks)");
}

/* Back to the task list, filtered to the selected site. */
static unsigned sites_enter(con_session_t *s)
{
	const con_group_t *gr;
	char site[CON_RES_STR_MAX + 16];
	size_t n, keep = sizeof(s->model->filter) - 1;

	/* Frames may have come since the last draw: the groups point at
	 * the tasks' strings, so they are brought up to date first. */
	con_model_groups_resort(s->model);
	gr = con_sites_selected(s);
	if (!gr)
		return 0;
	con_group_site(gr, site, sizeof(site));
	if (!gr->file[0])
		return 0; /* no site to filter by */
	/* The filter is short: a long path keeps its end, which still
	 * matches (a substring of the task's file:line). */
	n = strlen(site);
	con_model_set_filter(s->model, n > keep ? site + n - keep : site);
	s->prev_view = CON_VIEW_SITES;
	s->view = CON_VIEW_TASKS;
	s->sel[CON_VIEW_TASKS] = 0;
	s->scroll[CON_VIEW_TASKS] = 0;
	return CON_REDRAW | CON_RESORT;
}

const con_view_t con_view_sites = {
	.name = "sites",
	.letter = 0, /* no tab: s from the task list (keys.c) */
	.title = "Tasks by spawn site",
	.draw = sites_draw,
	.count = sites_count,
	.enter = sites_enter,
};
