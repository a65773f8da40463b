/* SPDX-License-Identifier: MIT */
/*
 * Key bindings: one table, each key an action.  Actions change the
 * session (view, selection, pause, replay position) or the model's sort
 * and filter, and return flags: CON_REDRAW, CON_RESORT (rebuild the task
 * list first), CON_SEEK (move the replay to seek_ns), CON_QUIT.  They
 * never draw.
 *
 * Letters pick views (w t x d m r; s groups the tasks by spawn site and
 * takes them back); j k and the up/down arrows move the
 * selection; h l and the left/right arrows move the timeline's cursor
 * (in a replay, the arrows seek in the other views).  No view letter is
 * one of hjkl.
 */
#include <curses.h>
#include <string.h>

#include "console.h"

#define SEEK_STEP_NS (1000ull * 1000 * 1000)
#define CTRL(c) ((c) & 0x1f)

typedef unsigned (*con_action_cb)(con_session_t *s, int key);

static unsigned act_replay(con_session_t *s, int key);

static unsigned act_quit(con_session_t *s, int key)
{
	(void)s;
	(void)key;
	return CON_QUIT;
}

static unsigned act_help(con_session_t *s, int key)
{
	(void)key;
	s->help = !s->help;
	return CON_REDRAW;
}

static unsigned act_pause(con_session_t *s, int key)
{
	(void)key;
	s->paused = !s->paused;
	return CON_REDRAW;
}

static unsigned act_view(con_session_t *s, int key)
{
	for (int i = 0; i < CON_VIEW_MAX; i++)
		if (con_view_get(i)->letter && con_view_get(i)->letter == key) {
			if ((int)s->view != i)
				s->prev_view = s->view;
			s->view = i;
			if (i == CON_VIEW_DETAIL && s->prev_view == CON_VIEW_TASKS)
				s->detail_task = con_tasks_selected(s);
		}
	s->help = false;
	return CON_REDRAW | CON_RESORT;
}

static unsigned act_move(con_session_t *s, int key)
{
	size_t *sel = &s->sel[s->view];

	switch (key) {
	case 'k':
	case KEY_UP:
		if (*sel)
			(*sel)--;
		break;
	case 'j':
	case KEY_DOWN:
		(*sel)++;
		break;
	case KEY_PPAGE:
		*sel = *sel > 20 ? *sel - 20 : 0;
		break;
	case KEY_NPAGE:
		*sel += 20;
		break;
	case 'g':
	case KEY_HOME:
		*sel = 0;
		break;
	case 'G':
	case KEY_END:
		*sel = (size_t)-1 / 2; /* clamped to the last row */
		break;
	}
	return CON_REDRAW;
}

/* h l, left right: the timeline's cursor; elsewhere a replay's seek. */
static unsigned act_horiz(con_session_t *s, int key)
{
	const con_model_t *m = s->model;
	bool left = key == 'h' || key == KEY_LEFT;
	uint64_t b;

	if (s->view != CON_VIEW_TIMELINE) {
		if (key == KEY_LEFT || key == KEY_RIGHT)
			return act_replay(s, key);
		return 0;
	}
	b = con_timeline_cursor(s);
	if (!b)
		return 0;
	if (left) {
		if (b > m->tl_first && b + CON_TL_BUCKETS > m->tl_last + 1)
			b--;
		s->tl_cursor = b;
	} else {
		/* Onto the newest: follow it again. */
		s->tl_cursor = b + 1 >= m->tl_last ? 0 : b + 1;
	}
	return CON_REDRAW;
}

/* s: the tasks by spawn site; s again (or Esc) back to the task list. */
static unsigned act_sites(con_session_t *s, int key)
{
	(void)key;
	s->help = false;
	if (s->view == CON_VIEW_SITES) {
		s->view = CON_VIEW_TASKS;
		return CON_REDRAW | CON_RESORT;
	}
	s->prev_view = s->view;
	s->view = CON_VIEW_SITES;
	return CON_REDRAW | CON_RESORT;
}

/* The Resources view and its resource sort and filter their own list. */
static bool on_resources(const con_session_t *s)
{
	return s->view == CON_VIEW_RESOURCES || s->view == CON_VIEW_RESOURCE;
}

static unsigned act_sort(con_session_t *s, int key)
{
	con_model_t *m = s->model;
	int c = (int)m->sort_col + (key == '>' ? 1 : -1);

	if (s->view == CON_VIEW_SITES) {
		c = (int)m->group_sort_col + (key == '>' ? 1 : -1);
		if (c < 0)
			c = CON_GCOL_MAX - 1;
		if (c >= CON_GCOL_MAX)
			c = 0;
		con_model_groups_set_sort(m, (con_group_col_t)c,
					  m->group_sort_invert);
		return CON_REDRAW | CON_RESORT;
	}

	if (on_resources(s)) {
		c = (int)m->res_sort_col + (key == '>' ? 1 : -1);
		if (c < 0)
			c = CON_RCOL_MAX - 1;
		if (c >= CON_RCOL_MAX)
			c = 0;
		con_model_res_set_sort(m, (con_res_col_t)c, m->res_sort_invert);
		return CON_REDRAW | CON_RESORT;
	}

	if (c < 0)
		c = CON_COL_MAX - 1;
	if (c >= CON_COL_MAX)
		c = 0;
	con_model_set_sort(m, (con_task_col_t)c, m->sort_invert);
	return CON_REDRAW | CON_RESORT;
}

static unsigned act_invert(con_session_t *s, int key)
{
	(void)key;
	if (s->view == CON_VIEW_SITES)
		con_model_groups_set_sort(s->model, s->model->group_sort_col,
					  !s->model->group_sort_invert);
	else if (on_resources(s))
		con_model_res_set_sort(s->model, s->model->res_sort_col,
				       !s->model->res_sort_invert);
	else
		con_model_set_sort(s->model, s->model->sort_col,
				   !s->model->sort_invert);
	return CON_REDRAW | CON_RESORT;
}

static unsigned act_filter(con_session_t *s, int key)
{
	(void)key;
	s->filter_edit = true;
	if (s->view == CON_VIEW_SITES) {
		snprintf(s->filter_buf, sizeof(s->filter_buf), "%s",
			 s->model->group_filter);
		return CON_REDRAW;
	}
	if (on_resources(s)) {
		snprintf(s->filter_buf, sizeof(s->filter_buf), "%s",
			 s->model->res_filter);
		s->view = CON_VIEW_RESOURCES;
		return CON_REDRAW;
	}
	snprintf(s->filter_buf, sizeof(s->filter_buf), "%s",
		 s->model->filter);
	if (s->view != CON_VIEW_TASKS) {
		s->prev_view = s->view;
		s->view = CON_VIEW_TASKS;
	}
	return CON_REDRAW;
}

static unsigned act_enter(con_session_t *s, int key)
{
	const con_view_t *v = con_view_get(s->view);

	(void)key;
	return v->enter ? v->enter(s) | CON_RESORT : 0;
}

static unsigned act_escape(con_session_t *s, int key)
{
	(void)key;
	if (s->help) {
		s->help = false;
		return CON_REDRAW;
	}
	if (s->view == CON_VIEW_DETAIL) {
		s->view = s->prev_view == CON_VIEW_DETAIL ? CON_VIEW_TASKS :
							     s->prev_view;
		s->detail_task = 0;
		return CON_REDRAW;
	}
	if (s->view == CON_VIEW_SPIKE) {
		s->view = CON_VIEW_TIMELINE;
		return CON_REDRAW;
	}
	if (s->view == CON_VIEW_RESOURCE) {
		s->view = CON_VIEW_RESOURCES;
		s->detail_res = 0;
		return CON_REDRAW;
	}
	if (s->view == CON_VIEW_SITES) {
		/* The filter first, then back to the task list. */
		if (s->model->group_filter[0])
			con_model_groups_set_filter(s->model, "");
		else
			s->view = CON_VIEW_TASKS;
		return CON_REDRAW | CON_RESORT;
	}
	if (s->view == CON_VIEW_RESOURCES) {
		if (!s->model->res_filter[0])
			return 0;
		con_model_res_set_filter(s->model, "");
		return CON_REDRAW | CON_RESORT;
	}
	if (s->model->filter[0]) {
		con_model_set_filter(s->model, "");
		return CON_REDRAW | CON_RESORT;
	}
	return 0;
}

static unsigned act_redraw(con_session_t *s, int key)
{
	(void)s;
	(void)key;
	return CON_REDRAW;
}

/* Replay only: play/pause, speed, seek, next warning. */
static unsigned act_replay(con_session_t *s, int key)
{
	con_replay_t *r = s->rp;

	if (!s->replay || !r)
		return 0;
	switch (key) {
	case 'p':
		s->paused = !s->paused;
		if (!s->paused && s->at_end) {
			s->seek_ns = r->first_ns; /* play again */
			return CON_SEEK | CON_REDRAW | CON_RESORT;
		}
		return CON_REDRAW;
	case '+':
	case '=':
		if (s->speed < 64)
			s->speed *= 2;
		return CON_REDRAW;
	case '-':
		if (s->speed > 1.0 / 64)
			s->speed /= 2;
		return CON_REDRAW;
	case '[':
	case KEY_LEFT:
		s->seek_ns = r->pos_ns > r->first_ns + SEEK_STEP_NS ?
				     r->pos_ns - SEEK_STEP_NS :
				     r->first_ns;
		return CON_SEEK | CON_REDRAW | CON_RESORT;
	case ']':
	case KEY_RIGHT:
		s->seek_ns = r->pos_ns + SEEK_STEP_NS;
		return CON_SEEK | CON_REDRAW | CON_RESORT;
	case '{':
	case '}': {
		/* A tenth of the trace's time, as far as the index or the
		 * trace's checkpoint marks know it (ahead of the index pass:
		 * replay_ahead.c). */
		uint64_t from, end, step;

		con_replay_ahead(r, &from, &end);
		if (end < r->last_ns)
			end = r->last_ns;
		step = end > r->first_ns ? (end - r->first_ns) / 10 : 0;
		if (key == '{')
			s->seek_ns = r->pos_ns > r->first_ns + step ?
					     r->pos_ns - step :
					     r->first_ns;
		else
			s->seek_ns = r->pos_ns + step < end ? r->pos_ns + step :
							      end;
		return CON_SEEK | CON_REDRAW | CON_RESORT;
	}
	case 'n': {
		uint64_t at = con_replay_find_warning(r);

		if (!at)
			return 0;
		s->seek_ns = at;
		s->paused = true;
		s->view = CON_VIEW_WARNINGS;
		s->sel[CON_VIEW_WARNINGS] = 0;
		return CON_SEEK | CON_REDRAW | CON_RESORT;
	}
	}
	return 0;
}

static const struct binding {
	int key;
	con_action_cb action;
	const char *keys; /* for the help; NULL: listed with another */
	const char *what;
} bindings[] = {
	{ 'q', act_quit, "q", "quit" },
	{ '?', act_help, "?", "this help" },
	{ ' ', act_pause, "space", "pause / resume the display" },
	{ 'w', act_view, "w t x d m r",
	  "workers, tasks, warnings, task detail, timeline, resources" },
	{ 't', act_view, NULL, NULL },
	{ 'x', act_view, NULL, NULL },
	{ 'd', act_view, NULL, NULL },
	{ 'm', act_view, NULL, NULL },
	{ 'r', act_view, NULL, NULL },
	{ 's', act_sites, "s",
	  "tasks by spawn site (live counts, oldest, parked at); s: back" },
	{ 'k', act_move, "j k, up down", "move the selection" },
	{ 'j', act_move, NULL, NULL },
	{ KEY_UP, act_move, NULL, NULL },
	{ KEY_DOWN, act_move, NULL, NULL },
	{ KEY_PPAGE, act_move, "PgUp PgDn", "move a page" },
	{ KEY_NPAGE, act_move, NULL, NULL },
	{ 'g', act_move, "g G", "first, last row" },
	{ 'G', act_move, NULL, NULL },
	{ KEY_HOME, act_move, NULL, NULL },
	{ KEY_END, act_move, NULL, NULL },
	{ '<', act_sort, "< >",
	  "sort the tasks (resources, sites) by the previous/next column" },
	{ '>', act_sort, NULL, NULL },
	{ 'h', act_horiz, "h l, left right",
	  "timeline: move the cursor over time" },
	{ 'l', act_horiz, NULL, NULL },
	{ KEY_LEFT, act_horiz, NULL, NULL },
	{ KEY_RIGHT, act_horiz, NULL, NULL },
	{ 'i', act_invert, "i", "invert the sort" },
	{ '/', act_filter, "/",
	  "filter the tasks (name, file:line, state, resource, id), sites" },
	{ '\n', act_enter, "Enter",
	  "open the task or resource; site: its tasks; timeline: the spike" },
	{ '\r', act_enter, NULL, NULL },
	{ KEY_ENTER, act_enter, NULL, NULL },
	{ 27, act_escape, "Esc", "back, close help, clear the filter" },
	{ CTRL('l'), act_redraw, "^L", "redraw" },
	{ 'p', act_replay, "p", "replay: play / pause" },
	{ '+', act_replay, "+ -", "replay: faster, slower" },
	{ '=', act_replay, NULL, NULL },
	{ '-', act_replay, NULL, NULL },
	{ '[', act_replay, "[ ] left right",
	  "replay: seek 1 s back, forward (arrows: not in the timeline)" },
	{ ']', act_replay, NULL, NULL },
	{ '{', act_replay, "{ }",
	  "replay: seek a tenth of the trace back, on" },
	{ '}', act_replay, NULL, NULL },
	{ 'n', act_replay, "n", "replay: jump to the next warning" },
};

static unsigned filter_key(con_session_t *s, int key)
{
	size_t n = strlen(s->filter_buf);

	if (key == 27) {
		s->filter_edit = false;
		return CON_REDRAW;
	}
	if (key == '\n' || key == '\r' || key == KEY_ENTER) {
		s->filter_edit = false;
		if (s->view == CON_VIEW_SITES) {
			con_model_groups_set_filter(s->model, s->filter_buf);
			s->sel[CON_VIEW_SITES] = 0;
		} else if (s->view == CON_VIEW_RESOURCES) {
			con_model_res_set_filter(s->model, s->filter_buf);
			s->sel[CON_VIEW_RESOURCES] = 0;
		} else {
			con_model_set_filter(s->model, s->filter_buf);
			s->sel[CON_VIEW_TASKS] = 0;
		}
		return CON_REDRAW | CON_RESORT;
	}
	if (key == KEY_BACKSPACE || key == 127 || key == 8) {
		if (n)
			s->filter_buf[n - 1] = '\0';
	} else if (key >= 0x20 && key < 0x7f &&
		   n + 1 < sizeof(s->filter_buf)) {
		s->filter_buf[n] = (char)key;
		s->filter_buf[n + 1] = '\0';
	}
	/* Filter as one types. */
	if (s->view == CON_VIEW_SITES)
		con_model_groups_set_filter(s->model, s->filter_buf);
	else if (s->view == CON_VIEW_RESOURCES)
		con_model_res_set_filter(s->model, s->filter_buf);
	else
		con_model_set_filter(s->model, s->filter_buf);
	return CON_REDRAW | CON_RESORT;
}

unsigned con_keys_handle(con_session_t *s, int key)
{
	if (s->filter_edit)
		return filter_key(s, key);
	if (s->help && key != '?' && key != 'q' && key != 27) {
		s->help = false;
		return CON_REDRAW;
	}
	for (size_t i = 0; i < sizeof(bindings) / sizeof(bindings[0]); i++)
		if (bindings[i].key == key)
			return bindings[i].action(s, key);
	return 0;
}

void con_keys_help(con_grid_t *g, int top, int rows)
{
	int w = g->w < 84 ? g->w : 84, x = (g->w - w) / 2, y = top + 1;

	/* The box, as far as the grid (and its clip) lets it go. */
	for (int r = top; r < top + rows && r < g->h; r++)
		for (int c = x; c < x + w; c++) {
			con_cell_t *cl = con_grid_cell(g, c, r);

			if (cl)
				*cl = (con_cell_t){ L' ', CON_ROLE_HEADER };
		}
	con_grid_put(g, x + 2, y++, CON_ROLE_HEADER,
		     "weft-console keys (any key closes)");
	y++;
	for (size_t i = 0; i < sizeof(bindings) / sizeof(bindings[0]) &&
			   y < top + rows;
	     i++) {
		if (!bindings[i].keys)
			continue;
		con_grid_printf(g, x + 2, y++, CON_ROLE_HEADER, "%-16s %s",
				bindings[i].keys, bindings[i].what);
	}
}
