/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the console's model (console/model.c) fed with bytes
 * from outside, as a target's socket (or a trace file) would deliver
 * them: the record decoder (proto/src/record.c) splits them into frames,
 * each frame is applied to the model, and every 32 frames the model is
 * resorted and one view (each in turn) is rendered into a text grid; at
 * the end the views the second byte names are, with the detail on a
 * task the input named and the timeline's cursor and spike list on its
 * buckets.  The first byte picks the chunk size (records split at every
 * boundary), the sort column and a filter; the second byte's top bit
 * renders the end on a deep copy (con_model_clone()), the model freed
 * first.  Checks: no crash, no sanitizer report,
 * con_model_is_consistent() at every render.  Inputs of odd length go
 * the live path instead (console/live.c: con_live_feed(), Updates and
 * event batches read from their bytes by the hand decoders, anything
 * they refuse unpacked by protobuf-c), a header expected first.
 *
 * Fast (issue 19: it ran 249 inputs a second, the other targets 8-26 k):
 * what an input costs is what it asks for.  It draws the views its
 * second byte names, not all nine and three more every time (every view
 * is still drawn, over the inputs the fuzzer keeps); the grid is made
 * once; the grid's primitives are built without coverage
 * (console_nocov.txt: their loops said nothing about the input); and
 * the model grows its workers, recent events and timeline as they come
 * instead of allocating 3 MB at init.
 *
 * The name tables and histogram maths come from libweft-wire
 * (proto/src), as in weft-console: the target is the console and the
 * wire code, without the runtime.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static const con_view_id_t views[] = {
	CON_VIEW_WORKERS,   CON_VIEW_TASKS,    CON_VIEW_WARNINGS,
	CON_VIEW_DETAIL,    CON_VIEW_TIMELINE, CON_VIEW_SPIKE,
	CON_VIEW_RESOURCES, CON_VIEW_RESOURCE, CON_VIEW_SITES,
};
#define NVIEWS (sizeof(views) / sizeof(views[0]))

/* The model resorted as the views read it, and checked. */
static void resort_and_check(con_model_t *m)
{
	con_model_resort(m);
	con_model_groups_resort(m); /* the sites view reads the groups */
	if (!con_model_is_consistent(m))
		abort();
}

/* View views[@i] of the model as it is now (resorted). */
static void render_one(con_session_t *s, con_grid_t *g, size_t i)
{
	con_model_t *m = s->model;

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

/*
 * At the end: the views whose bit is set in @mask (views[i] is bit i % 8:
 * the sites share bit 0 with the workers), then, as their bits say, the
 * keys that move over what the input built.
 */
static void render_end(con_session_t *s, con_grid_t *g, unsigned mask)
{
	con_model_t *m = s->model;

	resort_and_check(m);
	for (size_t i = 0; i < NVIEWS; i++)
		if (mask & 1u << (i % 8))
			render_one(s, g, i);
	/* The timeline's cursor, its spike list, a poll's task. */
	if (mask & 1u << 4) {
		s->view = CON_VIEW_TIMELINE;
		(void)con_keys_handle(s, 'h');
		(void)con_keys_handle(s, '\n');
		(void)con_keys_handle(s, '\n');
		con_session_watch(s);
		con_screen_draw(s, g);
		(void)con_keys_handle(s, 27);
	}
	/* A spawn site, then its tasks. */
	if (mask & 1u << 0) {
		s->view = CON_VIEW_TASKS;
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
	}
	/* A resource, then one of its tasks. */
	if (mask & 1u << 6) {
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
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	con_session_t s = { .ascii = true, .once = false };
	weft_wire_decoder_t d;
	con_model_t m;
	/* One grid for every input: every draw clears it first. */
	static con_grid_t g;
	size_t chunk, off = 2, frames = 0;

	if (len < 2)
		return 0;
	chunk = (size_t)(data[0] & 0x3f) * 16 + 1;
	con_model_init(&m, "fuzz");
	con_model_set_sort(&m, (con_task_col_t)(data[0] % CON_COL_MAX),
			   data[0] & 0x80);
	if (data[0] & 0x40)
		con_model_set_filter(&m, "a");
	s.model = &m;
	if (!g.cells)
		con_grid_init(&g, 100, 30, true);
	weft_wire_decoder_init(&d, 64 << 10);
	if (len & 1) {
		con_live_t l;

		memset(&l, 0, sizeof(l));
		con_live_begin(&l, -1);
		while (off < len) {
			size_t take = len - off < chunk ? len - off : chunk;

			if (con_live_feed(&l, &m, data + off, take) < 0)
				break;
			off += take;
			if ((size_t)l.frames / 32 > frames / 32) {
				resort_and_check(&m);
				render_one(&s, &g,
					   ((size_t)l.frames / 32 + data[0]) %
						   NVIEWS);
			}
			frames = (size_t)l.frames;
		}
		con_live_fini(&l);
		off = len; /* the rest, after an error, is not fed either */
	}
	while (off < len) {
		size_t take = len - off < chunk ? len - off : chunk, used;
		Weft__V1__Frame *f;
		int rc =
			weft_wire_decoder_feed(&d, data + off, take, &used, &f);

		off += used;
		if (rc < 0)
			break;
		if (rc != WEFT_WIRE_FRAME)
			continue;
		con_model_frame(&m, f);
		weft_wire_frame_free(f);
		/* On the way, one view in turn (which one and when move
		 * with the input); at the end every one, and the keys. */
		if (++frames % 32 == 0) {
			resort_and_check(&m);
			render_one(&s, &g, (frames / 32 + data[0]) % NVIEWS);
		}
	}
	/* Half the inputs end on a clone, the model it came from freed
	 * first (the replay's checkpoints): a pointer the two share is a
	 * use after free under ASan. */
	if (data[1] & 0x80) {
		con_model_t c;

		con_model_clone(&c, &m);
		con_model_fini(&m);
		m = c;
	}
	render_end(&s, &g, data[1]);
	weft_wire_decoder_fini(&d);
	con_model_fini(&m);
	return 0;
}
