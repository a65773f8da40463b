/* SPDX-License-Identifier: MIT */
/*
 * Reading trace files (weft-trace, tests, the fuzz target): frames one at
 * a time from a file or a memory buffer, checking the header first.
 *
 * A file that ends inside a record (a crash, a copy taken while being
 * written) reads cleanly up to its last whole record: the end is then
 * reported with .truncated set, not as an error.
 *
 * A record in the middle that does not read (torn: a write cut short,
 * with whole records appended behind it; or damaged: an event batch
 * whose columns do not agree, which weft_trace_stream_next() skips and
 * counts here too) is skipped when a whole record
 * follows it within one record's length (4 MiB and its header): reading
 * goes on from there, and .skipped counts the bytes passed over (.skips
 * the places, .first_skip where the first bad record started).  How a
 * whole record is told from bytes that look like one, and the bound on
 * the scan, are in trace_reader.c.  Only memory and regular files are
 * resynchronised; a pipe stops at the error.  The header record is never
 * skipped: a file whose first record is bad is not a trace.  A bad record
 * with no whole one after it before the file's end is the file's cut
 * tail: .truncated, as for a file cut inside a record.  A record that
 * decodes but is not followed by a record header is taken for a torn one
 * when a whole record starts inside it (it swallowed that one's start).
 */
#ifndef WEFT_TRACE_READER_H
#define WEFT_TRACE_READER_H

#include <stdio.h>

#include "weft/wire.h"

/* Caller-allocated; _open / _close. */
typedef struct weft_trace_reader_s {
	/* public, read-only */
	const Weft__V1__FileHeader *header; /* the first record's, once read */
	uint64_t frames;       /* whole frames returned (header included) */
	bool truncated;        /* ended inside a record */
	int error;             /* the error that ended reading, or 0 */
	uint64_t error_offset; /* where that record starts */
	uint64_t skipped;      /* bytes of torn or bad records, so far */
	uint64_t skips;        /* places where bytes were skipped */
	uint64_t first_skip;   /* where the first skipped record starts */
	/* private */
	FILE *fp;
	const uint8_t *mem;
	size_t mem_len, mem_pos;
	uint8_t *buf; /* the window, buf_cap bytes: made on the first read */
	size_t buf_cap;
	size_t len, pos;
	weft_wire_decoder_t dec;
	Weft__V1__Frame *header_frame;
	uint64_t resync_from; /* the last bad record a resync left from */
	bool resync_tried;
	bool cut_tail; /* ended at a bad record with nothing whole after it */
	/* Lean mode (weft_trace_reader_lean()): the last EventBatch read
	 * without protobuf-c, its events lean_ev[0, lean_n). */
	bool lean;
	weft_event_t *lean_ev; /* room for lean_cap, grown as batches ask */
	size_t lean_n, lean_cap;
	Weft__V1__Frame lean_frame;
	Weft__V1__EventBatch lean_batch;
	/* Updates read without protobuf-c's tasks
	 * (weft_trace_reader_lean_updates()); NULL: not. */
	struct weft_trace_lean_upd_s *lean_upd;
	/* The spawn sites met (every Update's sites, kept across seeks: a
	 * site's id names it for the whole trace), by which
	 * weft_trace_tasks_next() and _next_brief() name the tasks whose
	 * records name a site; read-only for callers (.unknown: records
	 * of a site not met). */
	weft_wire_sites_t sites;
} weft_trace_reader_t;

/*
 * The tasks of an Update frame, however it was read
 * (weft_trace_reader_tasks()): caller-allocated, private.
 */
typedef struct weft_trace_tasks_s {
	const Weft__V1__Update *u; /* unpacked: its tasks[] */
	size_t i;
	const uint8_t *p, *end; /* lean: the Update's bytes left */
	weft_wire_task_raw_t *raw;
	weft_wire_sites_t *sites; /* the reader's; NULL: none */
	Weft__V1__Task copy;      /* an unpacked task named by its site */
} weft_trace_tasks_t;

/* Extra result of weft_trace_reader_next() for a file whose first record
 * is not a FileHeader with the magic (not a weft trace). */
#define WEFT_TRACE_E_NOT_TRACE (-EPROTO)

/* trace_reader.c */

/**
 * weft_trace_reader_open() - read the trace file at @path.
 *
 * @r is zeroed first, so weft_trace_reader_close() is safe after a failure
 * too.
 *
 * Context: any thread, one at a time per @r; it reads the file with
 * blocking stdio, so not from a task on a worker.
 * Return: 0, or a negative errno from fopen(3).
 */
int weft_trace_reader_open(weft_trace_reader_t *r, const char *path);

/**
 * weft_trace_reader_open_mem() - read a trace from the @len bytes at @data,
 * which must outlive the reader.
 *
 * Context: any thread, one at a time per @r; a task may call it (never
 * blocks).
 */
void weft_trace_reader_open_mem(weft_trace_reader_t *r, const void *data,
				 size_t len);

/**
 * weft_trace_reader_next() - the next frame.
 * @frame: receives it; the caller frees it with weft_wire_frame_free()
 * unless it is the header (@r->header's frame, which the reader owns and
 * frees on close).
 *
 * Context: any thread, one at a time per @r; it reads the file with
 * blocking stdio, so not from a task on a worker.
 * Return: 1 with a frame; 0 at the end (@r->truncated when the file ends
 * inside a record; torn records skipped on the way are in @r->skipped); a
 * negative error, also in @r->error and for good: the decoder's
 * (weft/wire.h), WEFT_TRACE_E_NOT_TRACE, -EIO.
 */
int weft_trace_reader_next(weft_trace_reader_t *r, Weft__V1__Frame **frame);

/**
 * weft_trace_reader_lean() - read event batches without protobuf-c (a
 * reader that wants their events, not their columns: the trace stream).
 *
 * From the next record on, an EventBatch laid out as the encoders write
 * it is decoded straight from its bytes: it comes out as the reader's
 * own frame (@r->lean_frame, freed by nobody: see
 * weft_trace_reader_frame_free()), an EventBatch with its scalar fields
 * only (worker, count, base_ts, base_task; no columns), and its events
 * in @r->lean_ev[0, @r->lean_n), both valid until the next call.  Any
 * other record, and a batch whose bytes are not so laid out or do not
 * decode, is unpacked as before: what reads, and every error, is the
 * same in both modes.
 *
 * Context: any thread, one at a time per @r; a task may call it (never
 * blocks).
 * Return: 0, or -ENOMEM (the events' buffer, 256 KiB).
 */
int weft_trace_reader_lean(weft_trace_reader_t *r);

/**
 * weft_trace_reader_lean_updates() - weft_trace_reader_lean(), and read
 * the task records of Updates without protobuf-c too (a reader that goes
 * through every Update's tasks once, in order: weft-trace's model).
 *
 * From the next record on, an Update whose bytes
 * weft_wire_update_split_raw() accepts comes out as the reader's own
 * frame: an Update with every field but its tasks (n_tasks 0, unpacked by
 * protobuf-c), whose tasks weft_trace_reader_tasks() hands out one at a
 * time from the record's bytes (kept by the reader until the next call).
 * Any other Update is unpacked whole, as before; what reads, and every
 * error, is the same in both modes.  A caller that reads an Update's
 * tasks must do so through weft_trace_reader_tasks().
 *
 * Context: any thread, one at a time per @r; a task may call it.
 * Return: 0, or -ENOMEM.
 */
int weft_trace_reader_lean_updates(weft_trace_reader_t *r);

/**
 * weft_trace_reader_tasks() - start going through the tasks of @f, an
 * Update frame @r returned last (lean or not; @r may be NULL for a frame
 * from elsewhere, a socket's); nothing for another frame.
 * weft_trace_tasks_next() then gives each task in record order (the same
 * Weft__V1__Task protobuf-c would unpack), a task whose record names a
 * spawn site met with the site's name, file, line and state_size
 * (weft_wire_sites_resolve(); @r's sites, none when @r is NULL: a
 * caller reading a socket resolves them itself).
 *
 * Context: any thread, one at a time per @r; a task may call it.
 */
void weft_trace_reader_tasks(weft_trace_reader_t *r, const Weft__V1__Frame *f,
			     weft_trace_tasks_t *it);
/**
 * weft_trace_tasks_next() - the next task of @it (weft_trace_reader_tasks()).
 *
 * Context: any thread, one at a time per reader; a task may call it.
 * Return: the task (a lean one valid until the next call), NULL after the
 * last.
 */
const Weft__V1__Task *weft_trace_tasks_next(weft_trace_tasks_t *it);
/**
 * weft_trace_tasks_next_brief() - the next task of @it as
 * weft_trace_tasks_next() would hand it out, only its identity, end and
 * places, into @b (weft_wire_task_brief_t): a lean Update's record read
 * for those fields alone (the figures, histograms and waits skipped).
 * Use one or the other on an @it, not both.
 *
 * Context: any thread, one at a time per reader; a task may call it.
 * Return: true; false after the last.
 */
bool weft_trace_tasks_next_brief(weft_trace_tasks_t *it,
				 weft_wire_task_brief_t *b);

/**
 * weft_trace_reader_frame_free() - free a frame weft_trace_reader_next()
 * returned, unless the reader keeps it (the header; a lean batch).
 * NULL is ignored.
 *
 * Context: any thread, one at a time per @r; a task may call it (never
 * blocks).
 */
void weft_trace_reader_frame_free(weft_trace_reader_t *r,
				  Weft__V1__Frame *f);

/**
 * weft_trace_reader_seek() - read on from the record that starts at @offset
 * (one a frame's record_offset named: the console's replay index).  The
 * header, read first, stays.
 *
 * Context: any thread, one at a time per @r; it reads the file with
 * blocking stdio, so not from a task on a worker.
 * Return: 0; -EINVAL before the header was read, or past the end of a
 * buffer; a negative errno from fseeko(3).
 */
int weft_trace_reader_seek(weft_trace_reader_t *r, uint64_t offset);

/**
 * weft_trace_reader_close() - close the file and free what the reader holds
 * (the header frame too).
 *
 * Context: any thread, one at a time per @r; a task may call it (never
 * blocks).
 */
void weft_trace_reader_close(weft_trace_reader_t *r);

/**
 * weft_trace_reader_strerror() - what a weft_trace_reader_next() error
 * means.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: a static string.
 */
const char *weft_trace_reader_strerror(int err);

#endif /* WEFT_TRACE_READER_H */
