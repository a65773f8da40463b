/* SPDX-License-Identifier: MIT */
/*
 * Task detail: one task's identity and figures, its poll-time and
 * scheduled-time histograms (non-empty buckets as bars, with p50, p90,
 * p99 and max), waker counts, locks held and the warnings it raised.
 * The task is the session's detail_task, else the Tasks view's
 * selection.
 */
#include "console.h"

static uint64_t detail_id(const con_session_t *s)
{
	return s->detail_task ? s->detail_task : con_tasks_selected(s);
}

/* Up to @rows rows of histogram at (x, y); returns the rows used. */
static int hist_draw(con_grid_t *g, int x, int y, int rows, int width,
		     const char *title, const weft_hist_t *h)
{
	char a[16], b[16], c[16], d[16];
	int first = -1, last = -1, used = 0;
	uint32_t max = 0;

	con_grid_printf(g, x, y + used++, CON_ROLE_TITLE,
			"%s  n=%llu  p50 %s  p90 %s  p99 %s  max %s", title,
			(unsigned long long)h->count,
			con_fmt_ns(a, sizeof(a), weft_hist_percentile(h, 50)),
			con_fmt_ns(b, sizeof(b), weft_hist_percentile(h, 90)),
			con_fmt_ns(c, sizeof(c), weft_hist_percentile(h, 99)),
			con_fmt_ns(d, sizeof(d), h->max_ns));
	for (int i = 0; i < WEFT_HIST_BUCKETS; i++)
		if (h->buckets[i]) {
			if (first < 0)
				first = i;
			last = i;
			if (h->buckets[i] > max)
				max = h->buckets[i];
		}
	if (first < 0) {
		con_grid_put(g, x + 2, y + used++, CON_ROLE_DIM, "(empty)");
		return used;
	}
	for (int i = first; i <= last && used < rows; i++) {
		char up[16];
		int cx;

		cx = con_grid_printf(g, x + 2, y + used, CON_ROLE_NORMAL,
				     "<=%-7s ",
				     con_fmt_ns(up, sizeof(up),
						weft_hist_bucket_upper(
							(unsigned)i)));
		cx = con_grid_bar(g, cx, y + used, width,
				  (double)h->buckets[i] / max, CON_ROLE_SPARK);
		con_grid_printf(g, cx, y + used, CON_ROLE_NORMAL, " %u",
				h->buckets[i]);
		used++;
	}
	return used;
}

static void detail_draw(const con_session_t *s, con_grid_t *g, int top,
			int rows)
{
	const con_model_t *m = s->model;
	uint64_t id = detail_id(s);
	const con_task_t *t = id ? con_model_task(m, id) : NULL;
	char a[16], b[16], c[16], d[16];
	int y = top, x, half = rows > 14 ? (rows - 12) / 2 : 3;

	if (!t) {
		con_grid_put(g, 1, y, CON_ROLE_DIM,
			     id ? "(task not known, or no longer retained)" :
				  "(no task selected: pick one in Tasks, "
				  "Enter)");
		return;
	}
	con_grid_fill_row(g, y, CON_ROLE_COLUMN);
	con_grid_printf(g, 0, y++, CON_ROLE_COLUMN,
			" task %llu  %s  (%s, %s)  parent %llu",
			(unsigned long long)t->id,
			t->name[0] ? t->name : "(unnamed)",
			t->kind ? "fiber" : "future",
			con_task_state_name(t->state),
			(unsigned long long)t->parent);
	con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
			"spawned at %s:%u   state %u bytes   last worker %u",
			t->file[0] ? t->file : "?", t->line, t->state_size,
			t->last_worker);
	con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
			"polls %llu   busy %s   scheduled %s   idle %s   "
			"max poll %s",
			(unsigned long long)t->polls,
			con_fmt_ns(a, sizeof(a), t->busy_ns),
			con_fmt_ns(b, sizeof(b), t->scheduled_ns),
			con_fmt_ns(c, sizeof(c), t->idle_ns),
			con_fmt_ns(d, sizeof(d), t->max_poll_ns));
	con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
			"wakers: wakes %llu (self %llu)   clones %llu   "
			"drops %llu   locks held %u",
			(unsigned long long)t->wakes,
			(unsigned long long)t->self_wakes,
			(unsigned long long)t->waker_clones,
			(unsigned long long)t->waker_drops, t->locks_held);
	x = con_grid_put(g, 1, y, CON_ROLE_NORMAL, "warnings:");
	if (!t->warnings)
		con_grid_put(g, x + 1, y, CON_ROLE_GOOD, "none");
	for (unsigned k = 1; k < 32; k++)
		if (t->warnings & (1u << k))
			x = con_grid_printf(g, x + 1, y, CON_ROLE_BAD, "%s",
					    weft_warning_kind_name(k));
	y += 2;
	if (!t->has_hist) {
		con_grid_put(g, 1, y, CON_ROLE_DIM,
			     "(no histograms yet: polled fewer than twice)");
		return;
	}
	y += hist_draw(g, 1, y, half, 40, "poll time", &t->poll_hist);
	y++;
	hist_draw(g, 1, y, half, 40, "scheduled time", &t->sched_hist);
}

const con_view_t con_view_detail = {
	.name = "detail",
	.letter = 'd',
	.title = "Detail",
	.draw = detail_draw,
};
