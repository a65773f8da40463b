/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the trace-file reader (proto/src/trace_reader.c) on a
 * whole file, through the trace stream as weft-trace reads it: the header
 * check, every frame, the event batches, resynchronising past torn
 * records.  Each input is read four times, in file order and in time
 * order, each plain (protobuf-c, an event a call: the reader as a caller
 * of weft_trace_reader_next() sees it) and lean (batches decoded from
 * their bytes, events in blocks: what weft-trace reads with), and the
 * two readings must agree item for item: the same events in the same
 * order, the same frames at the same places, the same end or error (a
 * crash says where not).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weft/trace_reader.h"
#include "weft/trace_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static void same_frame(const weft_trace_item_t *p, const weft_trace_item_t *l)
{
	const Weft__V1__EventBatch *a, *b;

	if (l->kind != WEFT_TRACE_ITEM_FRAME || p->offset != l->offset ||
	    p->size != l->size ||
	    p->frame->body_case != l->frame->body_case)
		abort();
	if (p->frame->body_case != WEFT__V1__FRAME__BODY_EVENTS)
		return;
	a = p->frame->events;
	b = l->frame->events;
	if (a->worker != b->worker || a->count != b->count ||
	    a->base_ts != b->base_ts || a->base_task != b->base_task)
		abort();
}

static void streams_agree(const uint8_t *data, size_t len, bool file_order)
{
	weft_trace_stream_opts_t po = { .file_order = file_order },
				 lo = { .file_order = file_order, .lean = true };
	weft_trace_stream_t *p, *l;
	weft_trace_item_t pi, li;
	const weft_event_t *blk = NULL;
	size_t nblk = 0, at = 0;
	int rp, rl = 0;

	if (weft_trace_stream_open_mem(&p, data, len, &po))
		return;
	if (weft_trace_stream_open_mem(&l, data, len, &lo)) {
		weft_trace_stream_close(p);
		return;
	}
	for (;;) {
		rp = weft_trace_stream_next(p, &pi);
		if (at == nblk) {
			rl = weft_trace_stream_next_events(l, &li, &blk, &nblk);
			at = 0;
		}
		if (rp != rl)
			abort();
		if (rp != 1)
			break;
		if (pi.kind == WEFT_TRACE_ITEM_EVENT) {
			if (li.kind != WEFT_TRACE_ITEM_EVENTS || at >= nblk ||
			    memcmp(&pi.ev, &blk[at], sizeof(pi.ev)))
				abort();
			at++;
			continue;
		}
		same_frame(&pi, &li);
		nblk = at = 0;
	}
	if (weft_trace_stream_error_offset(p) !=
		    weft_trace_stream_error_offset(l) ||
	    weft_trace_stream_late(p) != weft_trace_stream_late(l) ||
	    weft_trace_stream_reader(p)->truncated !=
		    weft_trace_stream_reader(l)->truncated ||
	    weft_trace_stream_reader(p)->skipped !=
		    weft_trace_stream_reader(l)->skipped ||
	    weft_trace_stream_reader(p)->frames !=
		    weft_trace_stream_reader(l)->frames)
		abort();
	weft_trace_stream_close(p);
	weft_trace_stream_close(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	streams_agree(data, len, false);
	streams_agree(data, len, true);
	return 0;
}
