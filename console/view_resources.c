/* SPDX-License-Identifier: MIT */
/*
 * Resources view: the model's resources (con_model_res_resort: sorted,
 * filtered), one row per resource: kind, name (or where it was
 * initialised), holders and waiters now, acquires per second (of locks,
 * semaphores and the blocking pool: "-" for the others), wait p50,
 * p99 and max, hold p99; the sort column's label carries an arrow.  A
 * resource with waiters stands out when they contend (weft_resource_kind_contends():
 * a sleeper on the timer wheel, a listener in accept do not); a dropped
 * one is dim.  Enter opens
 * the resource: its figures, then its holders and its waiters (the
 * first WEFT_RES_LIST of each, as the probe lists them), one row per
 * task; Enter there opens that task's detail.
 */
#include <string.h>

#include "console.h"

static const struct {
	int width; /* negative: left-aligned; 0: the rest (NAME) */
} cols[CON_RCOL_MAX] = {
	[CON_RCOL_ID] = { 7 },       [CON_RCOL_KIND] = { -13 },
	[CON_RCOL_NAME] = { 0 },     [CON_RCOL_HOLDERS] = { 5 },
	[CON_RCOL_WAITERS] = { 6 },  [CON_RCOL_RATE] = { 7 },
	[CON_RCOL_WAIT_P50] = { 8 }, [CON_RCOL_WAIT_P99] = { 8 },
	[CON_RCOL_WAIT_MAX] = { 8 }, [CON_RCOL_HOLD_P99] = { 8 },
};

/* NAME takes what the others leave (at least 12 columns). */
static int col_width(con_res_col_t c, int gw)
{
	int rest = gw - 1;

	if (cols[c].width)
		return cols[c].width < 0 ? -cols[c].width : cols[c].width;
	for (int k = 0; k < CON_RCOL_MAX; k++)
		rest -= 1 +
			(cols[k].width < 0 ? -cols[k].width : cols[k].width);
	rest--; /* NAME's own space */
	return rest > 12 ? rest : 12;
}

static size_t resources_count(const con_session_t *s)
{
	return s->model->nres_list;
}

uint64_t con_resources_selected(const con_session_t *s)
{
	const con_model_t *m = s->model;
	size_t i = s->sel[CON_VIEW_RESOURCES];

	return i < m->nres_list ? m->res_list[i]->id : 0;
}

/*
 * Whether the probe counts @kind's acquires (RES_ACQUIRE: a lock taken,
 * permits, a pool thread taken by a job).  A channel's sends, a notify's
 * wakes, a sleep or an fd's readiness are not acquires: their ACQ/S is
 * "-", not a 0 that reads as idle (an audit).
 */
static bool counts_acquires(uint8_t kind)
{
	return kind == WEFT_RES_MUTEX || kind == WEFT_RES_SYNC_MUTEX ||
	       kind == WEFT_RES_SEMAPHORE || kind == WEFT_RES_BLOCKING_POOL;
}

static void cell_text(const con_resource_t *r, con_res_col_t c, char *buf,
		      size_t len)
{
	switch (c) {
	case CON_RCOL_ID:
		snprintf(buf, len, "%llu", (unsigned long long)r->id);
		break;
	case CON_RCOL_KIND:
		snprintf(buf, len, "%s", weft_resource_kind_name(r->kind));
		break;
	case CON_RCOL_NAME:
		con_res_label(r, buf, len);
		break;
	case CON_RCOL_HOLDERS:
		snprintf(buf, len, "%u", r->nholders);
		break;
	case CON_RCOL_WAITERS:
		snprintf(buf, len, "%u", r->nwaiters);
		break;
	case CON_RCOL_RATE:
		if (counts_acquires(r->kind))
			con_fmt_count(buf, len, r->acquires_per_s);
		else
			snprintf(buf, len, "-");
		break;
	case CON_RCOL_WAIT_P50:
	case CON_RCOL_WAIT_P99:
	case CON_RCOL_WAIT_MAX:
	case CON_RCOL_HOLD_P99: {
		uint64_t v = c == CON_RCOL_WAIT_P50 ? r->wait_p50 :
			     c == CON_RCOL_WAIT_P99 ? r->wait_p99 :
			     c == CON_RCOL_WAIT_MAX ? r->wait_max :
						      r->hold_p99;

		if (!r->hist || !r->hist[c == CON_RCOL_HOLD_P99].count)
			snprintf(buf, len, "-");
		else
			con_fmt_ns(buf, len, v);
		break;
	}
	default:
		buf[0] = '\0';
	}
}

static void resources_draw(const con_session_t *s, con_grid_t *g, int top,
			   int rows)
{
	const con_model_t *m = s->model;
	const char *label[CON_RCOL_MAX];
	int wid[CON_RCOL_MAX];
	int x, y = top;

	for (int c = 0; c < CON_RCOL_MAX; c++) {
		wid[c] = cols[c].width > 0 ? col_width(c, g->w) :
					     -col_width(c, g->w);
		label[c] = con_res_col_label(c);
	}
	x = con_table_head(g, y, wid, label, CON_RCOL_MAX, (int)m->res_sort_col,
			   m->res_sort_invert);
	if (m->res_filter[0])
		con_grid_printf(g, x + 2, y, CON_ROLE_WARN, "filter: %s",
				m->res_filter);
	y++;
	for (size_t i = s->scroll[CON_VIEW_RESOURCES];
	     i < m->nres_list && y < top + rows; i++, y++) {
		const con_resource_t *r = m->res_list[i];
		bool sel = !s->once && i == s->sel[CON_VIEW_RESOURCES];
		con_role_t role =
			sel           ? CON_ROLE_SELECTED :
			r->dropped_ns ? CON_ROLE_DIM :
			r->nwaiters && weft_resource_kind_contends(r->kind) ?
					CON_ROLE_WARN :
					CON_ROLE_NORMAL;

		if (sel)
			con_grid_fill_row(g, y, role);
		x = 0;
		for (int c = 0; c < CON_RCOL_MAX; c++) {
			char buf[CON_RES_STR_MAX + 16];

			cell_text(r, c, buf, sizeof(buf));
			x = con_table_cell(g, x, y, role, wid[c], buf);
		}
	}
	if (!m->nres_list)
		con_grid_put(g, 1, y, CON_ROLE_DIM,
			     m->res_filter[0] ?
				     "(no resource matches the filter)" :
				     "(no resources yet: locks, channels and "
				     "pools show once tasks use them while "
				     "the probe listens)");
	if (m->res_discarded && y + 1 < top + rows)
		con_grid_printf(g, 1, top + rows - 1, CON_ROLE_WARN,
				"(%llu more not kept: over %d resources)",
				(unsigned long long)m->res_discarded,
				CON_MAX_RESOURCES);
}

static unsigned resources_enter(con_session_t *s)
{
	uint64_t id = con_resources_selected(s);

	if (!id)
		return 0;
	s->detail_res = id;
	s->sel[CON_VIEW_RESOURCE] = 0;
	s->scroll[CON_VIEW_RESOURCE] = 0;
	s->prev_view = s->view;
	s->view = CON_VIEW_RESOURCE;
	return CON_REDRAW;
}

const con_view_t con_view_resources = {
	.name = "resources",
	.letter = 'r',
	.title = "Resources",
	.draw = resources_draw,
	.count = resources_count,
	.enter = resources_enter,
};

/* ------------------------------------------------------- one resource */

static const con_resource_t *shown(const con_session_t *s)
{
	uint64_t id = s->detail_res ? s->detail_res : con_resources_selected(s);

	return id ? con_model_resource(s->model, id) : NULL;
}

static size_t resource_count(const con_session_t *s)
{
	const con_resource_t *r = shown(s);

	return r ? (size_t)r->nholders_kept + r->nwaiters_kept : 0;
}

uint64_t con_resource_row_task(const con_session_t *s, size_t i)
{
	const con_resource_t *r = shown(s);

	if (!r)
		return 0;
	if (i < r->nholders_kept)
		return r->holders[i];
	i -= r->nholders_kept;
	return i < r->nwaiters_kept ? r->waiters[i] : 0;
}

/* "task 41  worker-3  idle  spawned at app.c:12": one row. */
static void task_row(const con_model_t *m, uint64_t id, bool waiter, char *buf,
		     size_t len)
{
	const con_task_t *t = con_model_task(m, id);
	char since[16];

	if (!t) {
		snprintf(buf, len, "task %llu  (not known to the console)",
			 (unsigned long long)id);
		return;
	}
	if (waiter && t->waiting_since_ns && m->now_ns > t->waiting_since_ns)
		con_fmt_ns(since, sizeof(since),
			   m->now_ns - t->waiting_since_ns);
	else
		snprintf(since, sizeof(since), "-");
	snprintf(buf, len, "task %-7llu %-16s %-9s %s%s  spawned at %s:%u",
		 (unsigned long long)id, t->name[0] ? t->name : "-",
		 con_task_status_name(m, t), waiter ? "waiting " : "",
		 waiter ? since : "", t->file[0] ? t->file : "?", t->line);
}

static void resource_draw(const con_session_t *s, con_grid_t *g, int top,
			  int rows)
{
	const con_model_t *m = s->model;
	const con_resource_t *r = shown(s);
	char label[CON_RES_STR_MAX + 16], a[16], b[16], c[16], d[16];
	int y = top;
	size_t row = 0, sel = s->sel[CON_VIEW_RESOURCE];

	if (!r) {
		con_grid_put(g, 1, y, CON_ROLE_DIM,
			     "(no resource selected, or no longer kept: pick "
			     "one in Resources, Enter)");
		return;
	}
	con_grid_fill_row(g, y, CON_ROLE_COLUMN);
	con_grid_printf(g, 0, y++, CON_ROLE_COLUMN, " %s %s  (resource %llu)%s",
			weft_resource_kind_name(r->kind),
			con_res_label(r, label, sizeof(label)),
			(unsigned long long)r->id,
			r->dropped_ns ? "  dropped" : "");
	if (r->file[0] && y < top + rows)
		con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
				"initialised at %s:%u", r->file, r->line);
	if (y < top + rows && counts_acquires(r->kind))
		con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
				"holders %u   waiters %u   acquires %llu (%s/s)"
				"   waits ended %llu",
				r->nholders, r->nwaiters,
				(unsigned long long)r->acquires,
				con_fmt_count(a, sizeof(a), r->acquires_per_s),
				(unsigned long long)r->waits);
	else if (y < top + rows)
		con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
				"holders %u   waiters %u   waits ended %llu",
				r->nholders, r->nwaiters,
				(unsigned long long)r->waits);
	if (r->hist && y < top + rows)
		con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
				"wait p50 %s  p99 %s  max %s   hold p99 %s",
				con_fmt_ns(a, sizeof(a), r->wait_p50),
				con_fmt_ns(b, sizeof(b), r->wait_p99),
				con_fmt_ns(c, sizeof(c), r->wait_max),
				con_fmt_ns(d, sizeof(d), r->hold_p99));
	if (r->oldest_wait_ns && m->now_ns > r->oldest_wait_ns &&
	    y < top + rows)
		con_grid_printf(g, 1, y++,
				weft_resource_kind_contends(r->kind) ?
					CON_ROLE_WARN :
					CON_ROLE_NORMAL,
				"the oldest wait began %s ago",
				con_fmt_ns(a, sizeof(a),
					   m->now_ns - r->oldest_wait_ns));
	if (r->longest_holder && y < top + rows) {
		const con_task_t *t = con_model_task(m, r->longest_holder);

		con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
				"longest hold %s, by task %llu %s",
				con_fmt_ns(a, sizeof(a), r->longest_hold_ns),
				(unsigned long long)r->longest_holder,
				t && t->name[0] ? t->name :
						  r->longest_holder_name);
	}
	if (r->owner && y < top + rows) {
		const con_task_t *t = con_model_task(m, r->owner);

		con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
				"serves task %llu %s",
				(unsigned long long)r->owner,
				t && t->name[0] ? t->name : "");
	}
	y++;
	for (int part = 0; part < 2 && y < top + rows; part++) {
		uint32_t whole = part ? r->nwaiters : r->nholders;
		uint8_t kept = part ? r->nwaiters_kept : r->nholders_kept;
		const uint64_t *ids = part ? r->waiters : r->holders;

		con_grid_printf(g, 1, y++, CON_ROLE_TITLE, "%s: %u%s",
				part ? "waiters (oldest first)" : "holders",
				whole,
				whole > kept ? " (the first listed)" : "");
		if (!kept && y < top + rows)
			con_grid_put(g, 3, y++, CON_ROLE_DIM, "(none)");
		for (uint8_t i = 0; i < kept && y < top + rows; i++, row++) {
			char buf[256];
			bool on = !s->once && row == sel;

			task_row(m, ids[i], part == 1, buf, sizeof(buf));
			if (on)
				con_grid_fill_row(g, y, CON_ROLE_SELECTED);
			con_grid_put(g, 3, y++,
				     on ? CON_ROLE_SELECTED : CON_ROLE_NORMAL,
				     buf);
		}
	}
}

static unsigned resource_enter(con_session_t *s)
{
	uint64_t id = con_resource_row_task(s, s->sel[CON_VIEW_RESOURCE]);

	if (!id)
		return 0;
	s->detail_task = id;
	s->prev_view = s->view;
	s->view = CON_VIEW_DETAIL;
	return CON_REDRAW;
}

const con_view_t con_view_resource = {
	.name = "resource",
	.letter = 0,
	.title = "Resource",
	.draw = resource_draw,
	.count = resource_count,
	.enter = resource_enter,
};
