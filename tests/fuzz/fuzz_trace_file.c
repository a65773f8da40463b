/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the trace-file reader (proto/src/trace_reader.c) on a
 * whole file, through the trace stream as weft-trace reads it: the header
 * check, every frame, the event batches, resynchronising past torn
 * records.  Each input is read four times, in file order and in time
 * order, each plain (protobuf-c, an event a call: the reader as a caller
 * of weft_trace_reader_next() sees it) and lean (batches decoded from
 * their bytes, Updates' tasks read from theirs, events in blocks: what
 * weft-trace reads with), and the two readings must agree item for item:
 * the same events in the same order, the same frames at the same places
 * (an Update's fields and tasks the same, packed again by protobuf-c),
 * the same end or error (a crash says where not).  The input's bytes are
 * also read as one Update and as one Task, raw and by protobuf-c: what
 * the raw reading takes, protobuf-c must unpack to the same; and the
 * checkpoint marks in it (weft_wire_ckpt_get()) checked.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weft/trace_reader.h"
#include "weft/trace_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

/* The bytes protobuf-c packs @a and @b into must be the same. */
static void same_packed(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
	size_t na = protobuf_c_message_get_packed_size(a);
	size_t nb = protobuf_c_message_get_packed_size(b);
	uint8_t *x, *y;

	if (na != nb)
		abort();
	x = malloc(na + 1);
	y = malloc(nb + 1);
	if (!x || !y)
		abort();
	protobuf_c_message_pack(a, x);
	protobuf_c_message_pack(b, y);
	if (memcmp(x, y, na))
		abort();
	free(x);
	free(y);
}

/* An Update as unpacked (@p) and as the lean stream @ls handed it (@l):
 * the same fields but the tasks, and the same tasks in order. */
static void same_update(weft_trace_stream_t *ls, const Weft__V1__Frame *p,
			const Weft__V1__Frame *l)
{
	Weft__V1__Update a = *p->update, b = *l->update;
	weft_trace_tasks_t it;
	const Weft__V1__Task *m;
	size_t i = 0;

	a.n_tasks = 0;
	a.tasks = NULL;
	b.n_tasks = 0;
	b.tasks = NULL;
	same_packed(&a.base, &b.base);
	weft_trace_stream_tasks(ls, l, &it);
	while ((m = weft_trace_tasks_next(&it))) {
		if (i >= p->update->n_tasks)
			abort();
		same_packed(&p->update->tasks[i++]->base, &m->base);
	}
	if (i != p->update->n_tasks)
		abort();
}

static void same_frame(weft_trace_stream_t *ls, const weft_trace_item_t *p,
		       const weft_trace_item_t *l)
{
	const Weft__V1__EventBatch *a, *b;

	if (l->kind != WEFT_TRACE_ITEM_FRAME || p->offset != l->offset ||
	    p->size != l->size ||
	    p->frame->body_case != l->frame->body_case)
		abort();
	if (p->frame->body_case == WEFT__V1__FRAME__BODY_UPDATE)
		same_update(ls, p->frame, l->frame);
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
				 lo = { .file_order = file_order, .lean = true,
					.lean_updates = true };
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
		same_frame(l, &pi, &li);
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

/* Brief string @s (@n bytes) against a decoded C string @c (NULL: ""). */
static void same_str(const char *s, size_t n, const char *c)
{
	if (!c)
		c = "";
	if (strlen(c) != n || (n && memcmp(s, c, n)))
		abort();
}

/*
 * A record the raw decoder took, read brief (the fields the trace model
 * keeps): the same values.  weft_wire_task_brief_raw() is only ever
 * given records checked so, as weft-trace's model does.
 */
static void brief_agrees(const uint8_t *data, size_t len,
			 const Weft__V1__Task *m)
{
	weft_wire_task_brief_t b;

	if (weft_wire_task_brief_raw(data, len, &b))
		abort();
	if (b.id != m->id || b.finished_ns != m->finished_ns ||
	    b.line != m->line || b.parked_line != m->parked_line)
		abort();
	same_str(b.name, b.name_len, m->name);
	same_str(b.file, b.file_len, m->file);
	same_str(b.parked_file, b.parked_len, m->parked_file);
}

/* The input as one Task and as one Update: raw only what protobuf-c
 * unpacks to the same. */
static void raw_agrees(const uint8_t *data, size_t len)
{
	static weft_wire_task_raw_t t;
	static weft_wire_buf_t rest;
	Weft__V1__Task *pt;
	Weft__V1__Update *pu, *ru;
	size_t n;

	if (!weft_wire_task_decode_raw(&t, data, len)) {
		pt = weft__v1__task__unpack(NULL, len, data);
		if (!pt)
			abort();
		same_packed(&pt->base, &t.msg.base);
		brief_agrees(data, len, pt);
		weft__v1__task__free_unpacked(pt, NULL);
	}
	if (!weft_wire_update_split_raw(data, len, &t, &rest, &n)) {
		static const uint8_t none[1];
		const uint8_t *p = data, *tb;
		size_t tl, i = 0;

		pu = weft__v1__update__unpack(NULL, len, data);
		ru = weft__v1__update__unpack(NULL, rest.len,
					      rest.len ? rest.data : none);
		/* The rest refused by protobuf-c: the whole is too. */
		if (!pu != !ru)
			abort();
		if (!pu)
			return;
		if (pu->n_tasks != n)
			abort();
		while ((tb = weft_wire_update_next_task_raw(&p, data + len,
							    &tl))) {
			if (i >= n || weft_wire_task_decode_raw(&t, tb, tl))
				abort();
			same_packed(&pu->tasks[i++]->base, &t.msg.base);
		}
		if (i != n)
			abort();
		pu->n_tasks = 0; /* the rest: the same without them */
		same_packed(&pu->base, &ru->base);
		pu->n_tasks = n;
		weft__v1__update__free_unpacked(pu, NULL);
		weft__v1__update__free_unpacked(ru, NULL);
	}
}

/* Every place the input holds a mark's sync pattern, checked as a mark
 * at its offset (ckpt.c): within its bytes, and one that passes packs
 * back to the same bytes. */
static void marks_check(const uint8_t *data, size_t len)
{
	const uint8_t *p = data;
	weft_wire_ckpt_t c;
	uint8_t b[WEFT_WIRE_CKPT_LEN];

	while ((p = weft_wire_ckpt_find(p, len - (size_t)(p - data)))) {
		size_t at = (size_t)(p - data);

		if (weft_wire_ckpt_get(p, len - at, at, &c)) {
			weft_wire_ckpt_put(b, &c);
			if (memcmp(b, p, sizeof(b)))
				abort();
		}
		p++;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	marks_check(data, len);
	raw_agrees(data, len);
	streams_agree(data, len, false);
	streams_agree(data, len, true);
	return 0;
}
