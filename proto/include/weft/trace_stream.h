/* SPDX-License-Identifier: MIT */
/*
 * A trace file read in one pass, in bounded memory (weft-trace's verbs
 * and the console's replay): every frame as it stands in the file, and
 * every event of its batches in time order.
 *
 * The recorder writes each collector pass as one EventBatch per emitting
 * thread, a run in that thread's order; a pass's runs overlap each other,
 * and an event that waited in its ring (a thread preempted between its
 * stamp and its push) can stand a pass or more after later ones.  The
 * stream merges the runs it holds by (time, place in the file), and lets
 * an event go once the newest stamp read is @window_ns past it (or the
 * runs held reach @max_pending events, or the file ends).  Within that
 * window the order is exactly the file's events sorted stably by time;
 * an event later than that still comes out, and is counted in @late.
 *
 * Frames come out as they are read, ahead of the events of their time:
 * a reader learns a task's name (from an Update) before it meets the
 * task's events.
 */
#ifndef WEFT_TRACE_STREAM_H
#define WEFT_TRACE_STREAM_H

#include "weft/trace_reader.h"

enum {
	WEFT_TRACE_ITEM_FRAME = 1, /* .frame (an EventBatch's events follow) */
	WEFT_TRACE_ITEM_EVENT = 2, /* .ev */
	WEFT_TRACE_ITEM_EVENTS = 3, /* weft_trace_stream_next_events()'s */
};

typedef struct weft_trace_item_s {
	int kind;
	/* A frame: the stream's until the next call. */
	const Weft__V1__Frame *frame;
	uint64_t offset; /* where its record starts in the file */
	uint64_t size;   /* the record's bytes */
	/* An event. */
	weft_event_t ev;
} weft_trace_item_t;

typedef struct weft_trace_stream_opts_s {
	uint64_t window_ns; /* 0: 250 ms */
	size_t max_pending; /* events held at the most; 0: 2 Mi (64 MiB) */
	bool file_order;    /* events as they stand, each batch after its
			     * frame, no time order (a reader that counts) */
	bool lean;          /* batches read without protobuf-c
			     * (weft_trace_reader_lean()): an EventBatch frame
			     * comes out with its scalar fields only, no
			     * columns; its events are the same */
	bool lean_updates;  /* and Updates' tasks without protobuf-c
			     * (weft_trace_reader_lean_updates()): an
			     * Update frame's tasks must then be read with
			     * weft_trace_stream_tasks() */
} weft_trace_stream_opts_t;

typedef struct weft_trace_stream_s weft_trace_stream_t;

/*
 * weft_trace_stream_open() - open @path (@opts may be NULL).
 *
 * Context: any thread; it opens and reads the file with blocking stdio, so
 * not from a task on a worker.
 * Return: 0, or a negative errno (-ENOMEM, or fopen(3)'s when the file does
 * not open).  The first frame's checks (a weft trace, its header) come with
 * the first weft_trace_stream_next().
 */
int weft_trace_stream_open(weft_trace_stream_t **out, const char *path,
			   const weft_trace_stream_opts_t *opts);
/**
 * weft_trace_stream_open_mem() - weft_trace_stream_open() over the @len
 * bytes at @data, which must outlive the stream.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: 0 or -ENOMEM.
 */
int weft_trace_stream_open_mem(weft_trace_stream_t **out, const void *data,
			       size_t len, const weft_trace_stream_opts_t *opts);
/*
 * weft_trace_stream_next() - the next frame or event.
 *
 * Context: any thread, one at a time per @s; it reads the file with
 * blocking stdio, so not from a task on a worker.
 * Return: 1 with *@it set; 0 at the end (a file cut inside a record ends
 * at its last whole one: weft_trace_stream_reader()->truncated); a
 * negative error, for good: the reader's (weft_trace_reader_strerror(),
 * the record at ->error_offset), or -EBADMSG for an EventBatch that does
 * not decode (at weft_trace_stream_error_offset()).
 */
int weft_trace_stream_next(weft_trace_stream_t *s, weft_trace_item_t *it);
/*
 * weft_trace_stream_next_events() - weft_trace_stream_next(), with the
 * events in blocks: WEFT_TRACE_ITEM_EVENTS, *@ev and *@n the next *@n
 * events in order (exactly those that as many weft_trace_stream_next()
 * calls would hand out one by one: the earliest run's, up to where
 * another run's event or one not yet due comes first), valid until the
 * next call.  Frames come out as from weft_trace_stream_next(), *@n 0.
 * A reader that takes each event as it is saves a call and a copy an
 * event.
 *
 * Context: any thread, one at a time per @s; it reads the file with
 * blocking stdio, so not from a task on a worker.
 * Return: as weft_trace_stream_next().
 */
int weft_trace_stream_next_events(weft_trace_stream_t *s,
				  weft_trace_item_t *it,
				  const weft_event_t **ev, size_t *n);
/**
 * weft_trace_stream_reader() - the reader underneath: header, truncated,
 * error, frames.
 *
 * Context: any thread, one at a time per @s; a task may call it (never
 * blocks).
 * Return: the stream's reader, valid until weft_trace_stream_close().
 */
const weft_trace_reader_t *weft_trace_stream_reader(
	const weft_trace_stream_t *s);
/**
 * weft_trace_stream_tasks() - weft_trace_reader_tasks() for @f, the
 * Update frame @s handed out last: how a caller of a stream opened with
 * lean_updates reads an Update's tasks (and may, opened without).
 *
 * Context: any thread, one at a time per @s; a task may call it.
 */
void weft_trace_stream_tasks(weft_trace_stream_t *s, const Weft__V1__Frame *f,
			     weft_trace_tasks_t *it);
/**
 * weft_trace_stream_error_offset() - where the record of the last error
 * starts.
 *
 * Context: any thread, one at a time per @s; a task may call it (never
 * blocks).
 * Return: the record's offset in the file (0 with no error).
 */
uint64_t weft_trace_stream_error_offset(const weft_trace_stream_t *s);
/**
 * weft_trace_stream_late() - events that came out after a later one had
 * (beyond the window).
 *
 * Context: any thread, one at a time per @s; a task may call it (never
 * blocks).
 * Return: their count, so far.
 */
uint64_t weft_trace_stream_late(const weft_trace_stream_t *s);
/**
 * weft_trace_stream_progress() - bytes of whole records read so far
 * (*@done), and the file's size (*@total; 0: unknown).
 *
 * Context: any thread, one at a time per @s; a task may call it (never
 * blocks).
 */
void weft_trace_stream_progress(const weft_trace_stream_t *s, uint64_t *done,
				uint64_t *total);

/**
 * weft_trace_stream_close() - close the stream and free it; NULL is
 * ignored.
 *
 * Context: any thread, one at a time per @s; a task may call it (never
 * blocks).
 */
void weft_trace_stream_close(weft_trace_stream_t *s);

/*
 * weft_trace_frame_time() - a frame's time on the trace's clock: an
 * Update's now, an EventBatch's first stamp, a Checkpoint mark's time; 0 for
 * others (a header).
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: that time; 0 for other frames.
 */
uint64_t weft_trace_frame_time(const Weft__V1__Frame *f);

#endif /* WEFT_TRACE_STREAM_H */
