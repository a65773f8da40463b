/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the console's model (console/model.c) fed with bytes
 * from outside, as a target's socket (or a trace file) would deliver
 * them: the record decoder (proto/src/record.c) splits them into frames,
 * each frame is applied to the model, and every 32 frames the model is
 * resorted and every view is rendered into a text grid, with the detail
 * on a task the input named and the timeline's cursor and spike list on
 * its buckets.  The first byte picks the chunk size (records split at
 * every boundary) and the sort column.  Checks: no crash, no sanitizer
 * report, con_model_is_consistent() after every step.
 *
 * The name tables and histogram maths come from libweft-wire
 * (proto/src), as in weft-console: the target is the console and the
 * wire code, without the runtime.
 */
#include <stdint.h>
#include <stdlib.h>

#include "console.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static void render_all(con_session_t *s, con_grid_t *g)
{
	static const con_view_id_t views[] = {
		CON_VIEW_WORKERS, CON_VIEW_TASKS,    CON_VIEW_WARNINGS,
		CON_VIEW_DETAIL,  CON_VIEW_TIMELINE, CON_VIEW_SPIKE,
		CON_VIEW_RESOURCES, CON_VIEW_RESOURCE, CON_VIEW_SITES,
	};
	con_model_t *m = s->model;

	con_model_resort(m);
	con_model_groups_resort(m); /* the sites view reads the groups */
	if (!con_model_is_consistent(m))
		abort();
	for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
		s->view = views[i];
		if (views[i] == CON_VIEW_DETAIL)
			s->detail_task = m->ntasks ? m->tasks[0]->id : 0;
		if (views[i] == CON_VIEW_RESOURCE)
			s->detail_res = m->nres ? m->res[0]->id : 0;
		s->sel[s->view] = (size_t)m->updates % 7;
		con_session_clamp(s, g->h);
		con_session_watch(s);
		con_screen_draw(s, g);
	}
	/* Keys that move over what the input built. */
	s->view = CON_VIEW_TIMELINE;
	(void)con_keys_handle(s, 'h');
	(void)con_keys_handle(s, '\n');
	(void)con_keys_handle(s, '\n');
	con_session_watch(s);
	con_screen_draw(s, g);
	(void)con_keys_handle(s, 27);
	/* A spawn site, then its tasks. */
	(void)con_keys_handle(s, 's');
	con_model_groups_resort(m);
	(void)con_keys_handle(s, 'j');
	(void)con_keys_handle(s, '>');
	con_model_groups_resort(m);
	con_session_clamp(s, g->h);
	(void)con_keys_handle(s, '\n');
	con_model_resort(m);
	con_session_clamp(s, g->h);
	con_screen_draw(s, g);
	/* A resource, then one of its tasks. */
	(void)con_keys_handle(s, 'r');
	(void)con_keys_handle(s, '\n');
	(void)con_keys_handle(s, 'j');
	(void)con_keys_handle(s, '\n');
	con_model_resort(m);
	con_session_clamp(s, g->h);
	con_session_watch(s);
	con_screen_draw(s, g);
	(void)con_keys_handle(s, 27);
	(void)con_keys_handle(s, 27);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	con_session_t s = { .ascii = true, .once = false };
	weft_wire_decoder_t d;
	con_model_t m;
	con_grid_t g;
	size_t chunk, off = 1, frames = 0;

	if (len < 1)
		return 0;
	chunk = (size_t)(data[0] & 0x3f) * 16 + 1;
	con_model_init(&m, "fuzz");
	con_model_set_sort(&m, (con_task_col_t)(data[0] % CON_COL_MAX),
			   data[0] & 0x80);
	if (data[0] & 0x40)
		con_model_set_filter(&m, "a");
	s.model = &m;
	con_grid_init(&g, 100, 30, true);
	weft_wire_decoder_init(&d, 64 << 10);
	while (off < len) {
		size_t take = len - off < chunk ? len - off : chunk, used;
		Weft__V1__Frame *f;
		int rc = weft_wire_decoder_feed(&d, data + off, take, &used,
						 &f);

		off += used;
		if (rc < 0)
			break;
		if (rc != WEFT_WIRE_FRAME)
			continue;
		con_model_frame(&m, f);
		weft_wire_frame_free(f);
		if (++frames % 32 == 0)
			render_all(&s, &g);
	}
	render_all(&s, &g);
	weft_wire_decoder_fini(&d);
	con_grid_fini(&g);
	con_model_fini(&m);
	return 0;
}
