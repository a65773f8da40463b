/* SPDX-License-Identifier: MIT */
/*
 * Timeline: per worker a strip of busy fraction per CON_TL_BUCKET_NS
 * over the last buckets (newest on the right), from the POLL events;
 * buckets holding a poll longer than the long-poll threshold (10 ms) are
 * marked in the "bad" role.
 */
#include "console.h"

#define LONG_POLL_NS (10ull * 1000 * 1000)

static size_t timeline_count(const con_session_t *s)
{
	return s->model->nworkers;
}

static void timeline_draw(const con_session_t *s, con_grid_t *g, int top,
			  int rows)
{
	static const wchar_t uni[] = L" ░▒▓█";
	static const wchar_t asc[] = L" .:+#";
	const con_model_t *m = s->model;
	int width = g->w - 8, y = top;

	if (width > CON_TL_BUCKETS)
		width = CON_TL_BUCKETS;
	con_grid_fill_row(g, y, CON_ROLE_COLUMN);
	con_grid_printf(g, 0, y++, CON_ROLE_COLUMN,
			" W     busy per %llums, newest right (%s: poll over "
			"10ms)",
			CON_TL_BUCKET_NS / 1000000ull, g->ascii ? "!" : "red");
	if (!m->tl_last) {
		con_grid_put(g, 1, y, CON_ROLE_DIM, "(no poll events yet)");
		return;
	}
	for (uint32_t i = 0; i < m->nworkers && y < top + rows; i++, y++) {
		const con_worker_t *w = &m->workers[i];

		con_grid_printf(g, 0, y, CON_ROLE_NORMAL, " %-4u ", i);
		for (int k = 0; k < width; k++) {
			uint64_t b = m->tl_last - (uint64_t)(width - 1 - k);
			double f;
			int level;
			bool spike;
			con_cell_t *c;

			if (b > m->tl_last || b < m->tl_first)
				continue;
			f = (double)w->tl_busy[b % CON_TL_BUCKETS] /
			    (double)CON_TL_BUCKET_NS;
			level = f <= 0 ? 0 : (int)(f * 3.999) + 1;
			if (level > 4)
				level = 4;
			spike = w->tl_max_poll[b % CON_TL_BUCKETS] >=
				LONG_POLL_NS;
			c = &g->cells[y * g->w + 6 + k];
			if (6 + k >= g->w)
				break;
			c->ch = spike && g->ascii ? L'!' :
				g->ascii	  ? asc[level] :
						    uni[level];
			c->role = spike ? CON_ROLE_BAD : CON_ROLE_SPARK;
		}
	}
}

const con_view_t con_view_timeline = {
	.name = "timeline",
	.letter = 'l',
	.title = "Timeline",
	.draw = timeline_draw,
	.count = timeline_count,
};
