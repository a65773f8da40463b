/* SPDX-License-Identifier: MIT */
/*
 * The wire format (proto/weft.proto) in C: records, the streaming record
 * decoder, event batches in column form, and the process's hello.
 *
 * A record is field 1 of weft.v1.Trace: the tag byte 0x0a, the Frame's
 * length as a varint, then the Frame.  The same records make a socket
 * stream and a trace file, so a whole file is one valid Trace message.
 *
 * Nothing here has threads or global state; every object belongs to its
 * caller.  Decoders never trust a length: a record longer than the
 * decoder's limit is refused when its header is read, before anything is
 * allocated for it.
 */
#ifndef WEFT_WIRE_H
#define WEFT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.pb-c.h"
#include "weft/probe_events.h"
#include "weft/probe_model.h"

#define WEFT_WIRE_PROTOCOL_VERSION 1u
#define WEFT_TRACE_MAGIC "WEFTTRC1"
#define WEFT_TRACE_FORMAT_VERSION 1u

/* The largest Frame a decoder accepts by default (and an encoder writes). */
#define WEFT_WIRE_MAX_RECORD (4u << 20)
/* The tag byte of Trace.frame (field 1, length-delimited). */
#define WEFT_WIRE_RECORD_TAG 0x0au
/* Events per EventBatch at most: keeps a batch far below the record limit. */
#define WEFT_WIRE_BATCH_MAX 8192u

/* Results of weft_wire_decoder_feed(). */
#define WEFT_WIRE_NEED_MORE 0 /* every byte taken, no whole frame yet */
#define WEFT_WIRE_FRAME 1     /* *frame holds one whole frame */
/* Errors (negative): the stream cannot go on.
 *   -EMSGSIZE  the length prefix exceeds the limit
 *   -EILSEQ    not a record tag, or a malformed (over-long) varint
 *   -EBADMSG   the Frame does not decode
 *   -ENOMEM    no memory for a record's bytes */

/* A growable byte buffer (encoders append records to it). */
typedef struct weft_wire_buf_s {
	uint8_t *data;
	size_t len;
	size_t cap;
} weft_wire_buf_t;

/* The streaming decoder: caller-allocated, _init / _fini. */
typedef struct weft_wire_decoder_s {
	/* public, read-only */
	uint64_t offset;        /* stream bytes consumed so far */
	uint64_t record_offset; /* where the record being read starts */
	uint64_t records;       /* whole frames returned */
	/* private */
	size_t max_record;
	uint8_t hdr[11];
	size_t hdr_len;
	uint8_t *body;   /* the record being assembled */
	size_t body_len; /* its length (from the header) */
	size_t body_have;
	bool in_body;
	int error; /* sticky once set */
	/*
	 * The trace reader's lean mode (trace_reader.c): a Frame's bytes
	 * it takes (returns true) are not unpacked, and come out as
	 * WEFT_WIRE_FRAME with a NULL frame; those it leaves are unpacked
	 * as ever.  NULL: every one is unpacked.
	 */
	bool (*take)(void *ctx, const uint8_t *body, size_t len);
	void *take_ctx;
	/* Keep the body's buffer for the next record (body_cap bytes; at
	 * most max_record): one reader of big records (a trace file), not
	 * a server's many clients. */
	bool keep_body;
	size_t body_cap;
} weft_wire_decoder_t;

/* An event batch being encoded: the message and its column storage. */
typedef struct weft_wire_batch_s {
	Weft__V1__EventBatch msg; /* public, read-only */
	/* private */
	size_t cap;
	uint32_t *head, *a2, *flag_index, *flag_value;
	int64_t *ts_delta;
	uint64_t *task, *a1;
} weft_wire_batch_t;

/*
 * An event encoder: a batch plus the room to regroup a collector pass's
 * events (time-ordered across threads) into one run per emitting thread.
 * Caller-allocated, _init / _fini; used by one thread at a time.
 */
typedef struct weft_wire_events_s {
	weft_wire_batch_t batch; /* public: the last batch encoded */
	/* private */
	weft_event_t *scratch;
	uint64_t *keys;
	size_t cap;
} weft_wire_events_t;

/* The hello of this process: the message and the strings it points to. */
typedef struct weft_wire_hello_s {
	Weft__V1__Hello msg; /* public, read-only */
	/* private */
	char name[64];
	char host[256];
	char clock[64];
	char *cmdline;
	char **argv;
} weft_wire_hello_t;

/**
 * weft_hist_index() - the bucket of @ns in a weft_hist_t.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the bucket's index; WEFT_HIST_BUCKETS for an outlier.
 */
static inline unsigned weft_hist_index(uint64_t ns)
{
	unsigned e;

	if (ns < 64)
		return 0;
	e = 63 ^ (unsigned)__builtin_clzll(ns); /* 6 .., the top bit's */
	if (e >= 38)
		return WEFT_HIST_BUCKETS; /* outlier */
	/* 1 + (e - 6) * 2 + the bit below the top one: ns >> (e - 1) is
	 * the top two bits, 2 or 3, so no mask is needed. */
	return 2 * e - 13 + (unsigned)(ns >> (e - 1));
}

/**
 * weft_hist_add_bucket() - @ns counted in its bucket (or as an outlier),
 * and nothing else: weft_hist_add() without count, sum_ns and max_ns, for
 * a caller that adds those itself (the collector's, a batch at a time).
 * The buckets as weft_hist_index() says, taken from @ns as a double: its
 * biased exponent (1023 + e, e the top bit's) and the bit below the top
 * one, the top 13 bits of the double, are 2 * (1023 + e) + that bit, the
 * bucket (2 * e - 11 + the bit) plus a constant.  One unsigned compare
 * of the result keeps 64 <= @ns < 2^38 (exact: under 2^53 a double holds
 * @ns whole; from 2^63, negative as an int64_t, the sign bit makes the
 * index out of range too).  callgrind: 8 instructions a bucket, against
 * 10 with a clz, a shift by e - 1 and a range test on @ns;
 * tests/test_hist.c checks the buckets against weft_hist_index().
 *
 * Context: any thread, one at a time per @h; a task may call it (never
 * blocks).
 */
static inline __attribute__((always_inline)) void
weft_hist_add_bucket(weft_hist_t *h, uint64_t ns)
{
	_Static_assert(sizeof(double) == sizeof(uint64_t) &&
			       __FLT_RADIX__ == 2 && __DBL_MANT_DIG__ == 53 &&
			       __DBL_MAX_EXP__ == 1024,
		       "double is IEEE 754 binary64");
	/* Type-punned through a union: defined in C11. */
	union {
		double f;
		uint64_t u;
	} v = { .f = (double)(int64_t)ns };
	/* Bucket 1 (e 6, the bit 0) at 0: 2 * (1023 + 6). */
	uint64_t i = (v.u >> 51) - 2 * (1023 + 6);

	if (__builtin_expect(i < WEFT_HIST_BUCKETS - 1, 1))
		h->buckets[i + 1]++;
	else if (ns < 64)
		h->buckets[0]++;
	else
		h->outliers++;
}

/**
 * weft_hist_add() - weft_hist_record(), inline for the collector's
 * per-event paths (always: in the collector's loop, two a poll, GCC kept
 * it out of line, a call and a frame each).
 *
 * Context: any thread, one at a time per @h; a task may call it (never
 * blocks).
 */
static inline __attribute__((always_inline)) void weft_hist_add(weft_hist_t *h,
								uint64_t ns)
{
	weft_hist_add_bucket(h, ns);
	h->count++;
	h->sum_ns += ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

/* record.c: buffers */

/**
 * weft_wire_buf_fini() - free the buffer's bytes; @b is left empty, ready
 * for reuse.
 *
 * Context: any thread, one at a time per @b; a task may call it (never
 * blocks).
 */
void weft_wire_buf_fini(weft_wire_buf_t *b);

/**
 * weft_wire_buf_reserve() - make room for @more bytes past @b->len.
 *
 * Context: any thread, one at a time per @b; a task may call it (never
 * blocks).
 * Return: 0; -ENOMEM (no memory, or @more too large; @b unchanged).
 */
int weft_wire_buf_reserve(weft_wire_buf_t *b, size_t more);

/* record.c: records */

/**
 * weft_wire_varint_put() - @v as a protobuf varint at @out, which has room
 * for 10 bytes.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the bytes written, 1 to 10.
 */
size_t weft_wire_varint_put(uint8_t *out, uint64_t v);

/**
 * weft_wire_record_append() - @f as one record at the end of @b.
 *
 * Context: any thread, one at a time per @b; a task may call it (never
 * blocks).
 * Return: 0; -ENOMEM; -EMSGSIZE when the frame exceeds WEFT_WIRE_MAX_RECORD
 * (@b's contents unchanged either way).
 */
int weft_wire_record_append(weft_wire_buf_t *b, const Weft__V1__Frame *f);

/**
 * weft_wire_record_pack() - @f as one record into the @cap bytes at @out.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the bytes written; -ENOSPC if @cap is too small; -EMSGSIZE if the
 * frame exceeds WEFT_WIRE_MAX_RECORD.
 */
int weft_wire_record_pack(const Weft__V1__Frame *f, uint8_t *out, size_t cap);

/**
 * weft_wire_record_size() - the bytes @f takes as a record (tag, length and
 * Frame).
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: that size.
 */
size_t weft_wire_record_size(const Weft__V1__Frame *f);

/**
 * weft_wire_record_len() - the length of the whole record @rec starts with
 * (its header and its Frame), from the header.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: that length; 0 when the @n bytes do not hold one (not a record
 * tag, a bad length, or cut short).
 */
size_t weft_wire_record_len(const uint8_t *rec, size_t n);

/* record.c: the decoder */

/**
 * weft_wire_decoder_init() - a decoder refusing records longer than
 * @max_record (0: WEFT_WIRE_MAX_RECORD).
 *
 * Context: any thread, one at a time per @d; a task may call it (never
 * blocks).
 */
void weft_wire_decoder_init(weft_wire_decoder_t *d, size_t max_record);

/**
 * weft_wire_decoder_fini() - free what the decoder holds.
 *
 * Context: any thread, one at a time per @d; a task may call it (never
 * blocks).
 */
void weft_wire_decoder_fini(weft_wire_decoder_t *d);

/**
 * weft_wire_decoder_feed() - give the decoder stream bytes.
 * @data, @len: the bytes.
 * @used: receives how many it took (all, unless a frame ended first: feed
 * the rest next).
 * @frame: receives a whole frame, to free with weft_wire_frame_free().
 *
 * Context: any thread, one at a time per @d; a task may call it (never
 * blocks).
 * Return: WEFT_WIRE_FRAME, WEFT_WIRE_NEED_MORE, or an error (-EMSGSIZE,
 * -EILSEQ, -EBADMSG, -ENOMEM: see above), after which every call returns
 * the same error.
 */
int weft_wire_decoder_feed(weft_wire_decoder_t *d, const void *data, size_t len,
			   size_t *used, Weft__V1__Frame **frame);

/**
 * weft_wire_decoder_mid_record() - whether the decoder holds part of a
 * record.
 *
 * Context: any thread, one at a time per @d; a task may call it (never
 * blocks).
 * Return: true when bytes of an unfinished record were taken (a stream that
 * ends now is cut short).
 */
bool weft_wire_decoder_mid_record(const weft_wire_decoder_t *d);

/**
 * weft_wire_frame_free() - free a frame a decoder returned; NULL is
 * ignored.
 *
 * Context: any thread; a task may call it (never blocks).
 */
void weft_wire_frame_free(Weft__V1__Frame *f);

/**
 * weft_wire_strerror() - what a decoder error means.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: a static string; "unknown error" for a value not listed above.
 */
const char *weft_wire_strerror(int err);

/* batch.c: event batches */

/**
 * weft_wire_batch_init() - an empty batch.
 *
 * Context: any thread, one at a time per @b; a task may call it (never
 * blocks).
 */
void weft_wire_batch_init(weft_wire_batch_t *b);

/**
 * weft_wire_batch_fini() - free the batch's columns; @b is left as after
 * _init.
 *
 * Context: any thread, one at a time per @b; a task may call it (never
 * blocks).
 */
void weft_wire_batch_fini(weft_wire_batch_t *b);

/**
 * weft_wire_batch_encode() - put the first events of @ev into @b->msg: the
 * leading run from one emitting thread, at most WEFT_WIRE_BATCH_MAX (a task
 * id 2^63 from the previous one also ends it); the caller loops on the
 * rest.  @b->msg points into @b until the next call.
 *
 * Context: any thread, one at a time per @b; a task may call it (never
 * blocks).
 * Return: events taken (>= 1 when @n > 0); 0 when @n is 0; -ENOMEM.
 */
int weft_wire_batch_encode(weft_wire_batch_t *b, const weft_event_t *ev,
			   size_t n);

/**
 * weft_wire_batch_decode() - rebuild the events of one batch into @out,
 * room for @cap events.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the number of events; -ENOSPC if @cap is too small; -EBADMSG if
 * the columns do not agree with each other.
 */
int weft_wire_batch_decode(const Weft__V1__EventBatch *m, weft_event_t *out,
			   size_t cap);

/**
 * weft_wire_batch_decode_raw() - weft_wire_batch_decode() straight from
 * the @len bytes of an EventBatch message (no protobuf-c, no allocation),
 * when they are laid out as weft_wire_batch_append() writes them: each
 * field once, in field order, packed columns, every varint whole.
 * @m: receives the scalar fields (worker, count, base_ts, base_task);
 * its columns are left empty.
 * @out, @cap: room for the events.
 *
 * Only bytes that protobuf-c would unpack, and whose columns
 * weft_wire_batch_decode() would accept, decode here, into the same
 * events; anything else (another layout, a bad varint, columns that do
 * not agree, more than @cap events) is refused, and the caller unpacks
 * the Frame with protobuf-c as before to learn what it is.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the number of events; -EAGAIN when refused.
 */
int weft_wire_batch_decode_raw(const uint8_t *p, size_t len,
			       Weft__V1__EventBatch *m, weft_event_t *out,
			       size_t cap);

/*
 * A Task record read from its bytes (weft_wire_task_decode_raw()): the
 * message as protobuf-c would unpack it, in storage kept from one record
 * to the next (no allocation a field).  Caller-allocated, zeroed to
 * start, weft_wire_task_raw_fini() at the end.
 */
typedef struct weft_wire_task_raw_s {
	Weft__V1__Task msg; /* public, read-only: valid until the next decode */
	/* private */
	Weft__V1__Histogram poll, sched;
	char *str; /* name, file, parked_file: copies, each NUL-ended */
	size_t str_cap;
	uint32_t *buckets; /* both histograms' */
	size_t buckets_cap;
	Weft__V1__TaskWait *waits;
	Weft__V1__TaskWait **waitp;
	size_t waits_cap, waitp_cap;
} weft_wire_task_raw_t;

/**
 * weft_wire_task_decode_raw() - the @len bytes of a Task message into
 * @t->msg, without protobuf-c: the same fields, strings NUL-ended,
 * histograms and waits as protobuf-c unpacks them, but in @t's storage.
 *
 * Only bytes that protobuf-c would unpack decode here; of those, a known
 * field of the wrong wire type, an unknown field, a histogram twice (which
 * protobuf-c merges), a varint longer than protobuf-c reads or over its
 * field's width are refused too (the caller unpacks with protobuf-c).
 *
 * Context: any thread, one at a time per @t; a task may call it.
 * Return: 0; -EAGAIN when refused; -ENOMEM (growing @t's storage).
 */
int weft_wire_task_decode_raw(weft_wire_task_raw_t *t, const uint8_t *p,
			      size_t len);
/**
 * weft_wire_task_raw_fini() - free @t's storage; @t is left zeroed, ready
 * for another decode.
 *
 * Context: any thread, one at a time per @t; a task may call it.
 */
void weft_wire_task_raw_fini(weft_wire_task_raw_t *t);

/*
 * A Task record's identity, end and places (weft_wire_task_brief_raw()):
 * what a reader that keeps names, not figures, takes of each record.
 * The strings point into the record's bytes, not NUL-ended: *_len is
 * their length as C strings (up to a NUL, as protobuf-c's copy reads);
 * NULL and 0 when absent.
 */
typedef struct weft_wire_task_brief_s {
	uint64_t id;
	uint64_t finished_ns;
	uint32_t line;
	uint32_t parked_line;
	const char *name, *file, *parked_file;
	size_t name_len, file_len, parked_len;
	uint32_t site;       /* Task.site (0: none) */
	uint32_t state_size; /* weft_trace_tasks_next_brief(): its site's */
} weft_wire_task_brief_t;

/**
 * weft_wire_task_brief_raw() - fields 1, 3, 4, 5, 12, 26, 27 and 33 of the
 * @len bytes of a Task message into @b, as weft_wire_task_decode_raw()
 * reads them (the last of a field repeated stands); the other fields
 * only skipped.  For a record weft_wire_update_split_raw() took (checked
 * already): it does not check the fields it skips.
 *
 * Context: any thread; a task may call it.
 * Return: 0; -EAGAIN for bytes it cannot walk.
 */
int weft_wire_task_brief_raw(const uint8_t *p, size_t len,
			     weft_wire_task_brief_t *b);

/**
 * weft_wire_update_split_raw() - walk the @len bytes of an Update message:
 * each of its tasks (field 2) must decode with weft_wire_task_decode_raw()
 * (checked only, @scratch's storage grown so that each of them then
 * decodes into it without allocating), and
 * the bytes of every other field are appended to @rest as they stand,
 * for protobuf-c to unpack (the Update without its tasks: protobuf-c reads
 * the others the same with or without them).
 * @ntasks: receives the number of tasks.
 *
 * Context: any thread; a task may call it.
 * Return: 0; -EAGAIN when refused (a task refused, a field whose tag,
 * wire type or length protobuf-c would not read the same way); -ENOMEM.
 */
int weft_wire_update_split_raw(const uint8_t *p, size_t len,
			       weft_wire_task_raw_t *scratch,
			       weft_wire_buf_t *rest, size_t *ntasks);

/**
 * weft_wire_update_next_task_raw() - the next task's bytes in the Update
 * bytes [*@p, @end) that weft_wire_update_split_raw() accepted: the
 * task's start, its length in *@len, *@p moved past it.
 *
 * Context: any thread; a task may call it.
 * Return: the task's bytes; NULL after the last one.
 */
const uint8_t *weft_wire_update_next_task_raw(const uint8_t **p,
					      const uint8_t *end, size_t *len);

/**
 * weft_wire_update_walk_raw() - walk the @len bytes of an Update message
 * as weft_wire_update_split_raw() does, without reading its tasks: each
 * task's bytes (field 2) go to @task as they come, the bytes of every
 * other field are appended to @rest as they stand (for protobuf-c).  A
 * reader that decodes each task once (weft_wire_task_decode_raw()) and
 * applies it as it comes, where the split read each twice; the tasks
 * before a refused one have been handed over by then.
 * @task: called with @ctx and a task's bytes; nonzero stops the walk.
 *
 * Context: any thread; a task may call it.
 * Return: 0; -EAGAIN when refused (a field whose tag, wire type or length
 * protobuf-c would not read the same way); -ENOMEM; or what @task
 * returned.
 */
int weft_wire_update_walk_raw(
	const uint8_t *p, size_t len, weft_wire_buf_t *rest,
	int (*task)(void *ctx, const uint8_t *p, size_t len), void *ctx);

/**
 * weft_wire_frame_one_raw() - the @n bytes of a Frame read as one
 * length-delimited field filling them, as a server and a recorder write
 * every Frame (update = 4, events = 5): its field number, and its value's
 * bytes in *@body, *@len.  Tag and length as protobuf-c reads them.
 *
 * Context: any thread; a task may call it.
 * Return: the field number; 0 when the bytes are not one such field (the
 * caller unpacks the Frame with protobuf-c).
 */
uint32_t weft_wire_frame_one_raw(const uint8_t *p, size_t n,
				 const uint8_t **body, size_t *len);

/**
 * weft_wire_batch_append() - @m as one EventBatch record at the end of @b
 * (the bytes weft_wire_record_append() would write, encoded by hand).
 *
 * Context: any thread, one at a time per @b; a task may call it (never
 * blocks).
 * Return: 0; -ENOMEM; -EMSGSIZE (@b unchanged on error).
 */
int weft_wire_batch_append(weft_wire_buf_t *b, const Weft__V1__EventBatch *m);

/* batch.c: a collector pass's events */

/**
 * weft_wire_events_init() - an empty event encoder.
 *
 * Context: any thread, one at a time per @e; a task may call it (never
 * blocks).
 */
void weft_wire_events_init(weft_wire_events_t *e);

/**
 * weft_wire_events_fini() - free what the encoder holds; @e is left as
 * after _init.
 *
 * Context: any thread, one at a time per @e; a task may call it (never
 * blocks).
 */
void weft_wire_events_fini(weft_wire_events_t *e);

/**
 * weft_wire_events_group() - @ev regrouped per emitting thread, each
 * thread's events in their order (a stable sort by worker).
 *
 * Context: any thread, one at a time per @e; a task may call it (never
 * blocks).
 * Return: @ev itself when it holds one thread's events, else @e's scratch
 * copy (valid until the next call); NULL for no memory.
 */
const weft_event_t *weft_wire_events_group(weft_wire_events_t *e,
					   const weft_event_t *ev, size_t n);

/**
 * weft_wire_events_append() - a collector pass's events as EventBatch
 * records at the end of @b, one run per emitting thread.
 *
 * Context: any thread, one at a time per @e; a task may call it (never
 * blocks).
 * Return: 0; -ENOMEM; -EMSGSIZE.  On error @b holds the whole records
 * appended before it.
 */
int weft_wire_events_append(weft_wire_events_t *e, weft_wire_buf_t *b,
			    const weft_event_t *ev, size_t n);

/*
 * Spawn sites (weft.proto's Site).  A stream sends a site once, in an
 * Update's sites, before or with the first Task record that names it
 * (Task.site); such a record leaves out name, file, line and
 * state_size.  An encoder's site: the strings are the caller's.
 */
typedef struct weft_wire_site_s {
	uint32_t id; /* 1 .. WEFT_WIRE_SITE_MAX */
	uint32_t line;
	uint32_t state_size;
	const char *name, *file; /* NULL: none */
} weft_wire_site_t;

/* Site ids a reader keeps (one above: refused, its tasks unnamed). */
#define WEFT_WIRE_SITE_MAX 65536u

/*
 * Await sites (the POLLs' WEFT_POLL_SITE_SHIFT ids) travel as Sites too:
 * await site N is Site id WEFT_WIRE_AWAIT_SITE_BASE + N, with its file
 * and line and no name.  A stream sends every await site its collector
 * knows once, and again after a full update, a resync or a new file, as
 * it sends spawn sites: a reader that came late, or lost the AWAIT_SITE
 * event that announced one, still learns every site a POLL names.  Past
 * WEFT_WIRE_SITE_MAX, so readers from before them refuse them (and name
 * their tasks as ever); WEFT_WIRE_AWAIT_SITE_MAX of them at most (the
 * runtime's table holds as many: runtime/src/await_site.c), so that
 * what a peer sends cannot make a reader hold more.
 */
#define WEFT_WIRE_AWAIT_SITE_BASE (1u << 20)
#define WEFT_WIRE_AWAIT_SITE_MAX 4096u

/*
 * A reader's sites (sites.c): every Site met, by id, its strings copied.
 * Caller-allocated, zeroed to start, weft_wire_sites_fini() at the end.
 * unknown counts the Task records resolved that named a site not met
 * (they stay unnamed, never another site's name).
 */
typedef struct weft_wire_sites_s {
	weft_wire_site_t *v; /* by id; name NULL: not met */
	size_t cap;
	size_t n;         /* spawn sites met */
	uint64_t unknown; /* records naming a site not met */
	/* Await sites, by their own id (Site id less
	 * WEFT_WIRE_AWAIT_SITE_BASE); file NULL: not met. */
	weft_wire_site_t *await;
	size_t await_cap;
} weft_wire_sites_t;

/**
 * weft_wire_sites_add() - keep Site @m (again: its new values).
 * An await site's Site (WEFT_WIRE_AWAIT_SITE_BASE + its id) is kept
 * apart, for weft_wire_sites_await().
 *
 * Context: any thread, one at a time per @s; a task may call it.
 * Return: 0; -EINVAL (id 0, over WEFT_WIRE_SITE_MAX and not an await
 * site's: ignored); -ENOMEM (@s unchanged).
 */
int weft_wire_sites_add(weft_wire_sites_t *s, const Weft__V1__Site *m);

/**
 * weft_wire_sites_add_update() - keep the sites of Update @u.
 *
 * Context: any thread, one at a time per @s; a task may call it.
 * Return: 0; -ENOMEM (the sites before the one that failed are kept).
 */
int weft_wire_sites_add_update(weft_wire_sites_t *s, const Weft__V1__Update *u);

/**
 * weft_wire_sites_get() - site @id as met.
 *
 * Context: any thread, one at a time per @s; a task may call it.
 * Return: the site (valid until @s changes); NULL when not met.
 */
const weft_wire_site_t *weft_wire_sites_get(const weft_wire_sites_t *s,
					    uint32_t id);

/**
 * weft_wire_sites_await() - await site @id (a POLL's, not its Site id)
 * as met in an Update's sites.
 *
 * Context: any thread, one at a time per @s; a task may call it.
 * Return: the site (its file and line; valid until @s changes); NULL
 * when not met.
 */
const weft_wire_site_t *weft_wire_sites_await(const weft_wire_sites_t *s,
					      uint32_t id);

/**
 * weft_wire_sites_resolve() - Task @t named by its site: a record with
 * a site and neither name nor file gets the site's name, file, line and
 * state_size (pointers into @s, valid while @s keeps the site); a site
 * not met leaves it unnamed and counts it in @s->unknown.  A record
 * with its own strings is left as it is.  @t must not be one protobuf-c
 * will free (a raw decode's, or a shallow copy).
 *
 * Context: any thread, one at a time per @s; a task may call it.
 * Return: true when @t was named from its site.
 */
bool weft_wire_sites_resolve(weft_wire_sites_t *s, Weft__V1__Task *t);

/**
 * weft_wire_sites_fini() - free what @s holds; @s is left zeroed.
 *
 * Context: any thread, one at a time per @s; a task may call it.
 */
void weft_wire_sites_fini(weft_wire_sites_t *s);

/**
 * weft_wire_update_walk_sites_raw() - each Site of the @len bytes of an
 * Update message (field 11), unpacked and kept in @s, wherever they
 * stand among its fields: a reader that takes the tasks from the bytes
 * (weft_wire_update_walk_raw()) calls it first.
 *
 * Context: any thread, one at a time per @s; a task may call it.
 * Return: 0; -EAGAIN for bytes it cannot walk or a Site that does not
 * unpack; -ENOMEM.
 */
int weft_wire_update_walk_sites_raw(const uint8_t *p, size_t len,
				    weft_wire_sites_t *s);

/* update.c: updates, split and recount */

/**
 * weft_wire_update_append() - one collector pass as an Update record at the
 * end of @b; tasks spawned after @prev_now_ns are listed as new (0: none
 * are).
 *
 * Context: any thread, one at a time per @b; a task may call it (never
 * blocks).
 * Return: 0; -ENOMEM; -EMSGSIZE (@b unchanged on error).
 */
int weft_wire_update_append(weft_wire_buf_t *b, const weft_probe_update_t *u,
			    uint64_t prev_now_ns);

/**
 * weft_wire_hist_get() - histogram @m as read from the wire into @h: its
 * buckets (those past WEFT_HIST_BUCKETS dropped, those missing zero),
 * count, sum, maximum and outliers.
 *
 * Context: any thread; a task may call it (never blocks).
 */
void weft_wire_hist_get(weft_hist_t *h, const Weft__V1__Histogram *m);

/**
 * weft_wire_update_append_split() - weft_wire_update_append() that splits
 * an update larger than @max_record (0: WEFT_WIRE_MAX_RECORD) into records
 * back to back, applied in order as one update.
 *
 * Context: any thread, one at a time per @b; a task may call it (never
 * blocks).
 * Return: 0; -ENOMEM; -EMSGSIZE (one task or resource alone, or everything
 * but them, exceeds @max_record); @b unchanged on error.
 */
int weft_wire_update_append_split(weft_wire_buf_t *b,
				  const weft_probe_update_t *u,
				  uint64_t prev_now_ns, size_t max_record);

/*
 * A memo of Task records encoded for one snapshot of the tasks (a probe
 * collector's pass): several encoders of that snapshot (a recorder, the
 * streams of a probe server) encode each task once and copy the bytes.
 * An entry is a task's id and which of name, file, line, poll_hist and
 * sched_hist its record carries (a thinned copy leaves them out: its
 * own entry); every other field is the snapshot's.  Its bytes are at
 * most WEFT_WIRE_TASK_MEMO_MAX; past them tasks are encoded as without
 * one.  Fields private.
 */
#define WEFT_WIRE_TASK_MEMO_MAX (8u << 20)

struct weft_wire_memo_entry;

typedef struct weft_wire_task_memo_s {
	uint64_t gen;   /* the snapshot the entries are of */
	uint64_t epoch; /* begins so far: the entries' tag */
	struct weft_wire_memo_entry *slot;
	size_t cap, n, peak;
	uint8_t *bytes;
	size_t len, bytes_cap;
} weft_wire_task_memo_t;

/**
 * weft_wire_task_memo_begin() - @m for snapshot @gen: the entries of
 * another snapshot are let go (memory kept, most of it given back after
 * a burst).  A zeroed @m is empty, and keeps nothing until begun.
 *
 * Context: any thread, one at a time per @m (never blocks).
 */
void weft_wire_task_memo_begin(weft_wire_task_memo_t *m, uint64_t gen);

/**
 * weft_wire_task_memo_fini() - frees @m's memory; @m is empty after.
 *
 * Context: any thread, one at a time per @m (never blocks).
 */
void weft_wire_task_memo_fini(weft_wire_task_memo_t *m);

/**
 * weft_wire_update_append_memo() - weft_wire_update_append_split() whose
 * Task records come from @m (NULL: none) when encoded there before, and
 * are kept there otherwise.  The bytes are the same as without @m
 * provided every task of @u with an id is its snapshot's record (fields
 * as in @m's snapshot, bar name, file, line and the histograms, which
 * may be left out).
 *
 * Context: any thread, one at a time per @b and @m; a task may call it
 * (never blocks).
 * Return: as weft_wire_update_append_split().
 */
int weft_wire_update_append_memo(weft_wire_buf_t *b,
				 const weft_probe_update_t *u,
				 uint64_t prev_now_ns, size_t max_record,
				 weft_wire_task_memo_t *m);

/**
 * weft_wire_update_append_sites() - weft_wire_update_append_memo() with
 * the @n spawn sites at @sites in the (first) record's sites, and every
 * task of @u that names a site (site not 0) written without its name,
 * file, line and state_size: the caller makes sure they are its site's
 * (and that the reader has the site, from these records or earlier
 * ones); a task to keep its strings goes with site 0.
 *
 * Context: any thread, one at a time per @b and @m; a task may call it
 * (never blocks).
 * Return: as weft_wire_update_append_split().
 */
int weft_wire_update_append_sites(weft_wire_buf_t *b,
				  const weft_probe_update_t *u,
				  const weft_wire_site_t *sites, size_t n,
				  uint64_t prev_now_ns, size_t max_record,
				  weft_wire_task_memo_t *m);

/**
 * weft_wire_update_recount() - the Update records at @rec (@len bytes, from
 * weft_wire_update_append_split()) again into @b, with one subscriber's
 * updates_skipped (@skipped) and events_not_sent (@not_sent) set in the
 * first.
 *
 * Context: any thread, one at a time per @b; a task may call it (never
 * blocks).
 * Return: 0; -EINVAL (the first is not an Update record); -ENOMEM (@b
 * unchanged).
 */
int weft_wire_update_recount(weft_wire_buf_t *b, const uint8_t *rec, size_t len,
			     uint64_t skipped, uint64_t not_sent);

/* hello.c: the hello, a trace file's header */

/**
 * weft_wire_hello_init() - this process's hello, for @workers workers, its
 * @clock and start time.
 *
 * Context: any thread, one at a time per @h; it reads /proc and the host
 * name (local files, never the network), so a task may call it.
 * Return: 0; -ENOMEM.
 */
int weft_wire_hello_init(weft_wire_hello_t *h, uint32_t workers,
			 const char *clock, uint64_t start_ns);

/**
 * weft_wire_hello_fini() - free what the hello holds.
 *
 * Context: any thread, one at a time per @h; a task may call it (never
 * blocks).
 */
void weft_wire_hello_fini(weft_wire_hello_t *h);

/**
 * weft_wire_header_append() - a trace file's first record (segment @segment
 * of a rotation) at the end of @b.
 *
 * Context: any thread, one at a time per @b; a task may call it (never
 * blocks).
 * Return: 0; -ENOMEM; -EMSGSIZE (a hello over WEFT_WIRE_MAX_RECORD).
 */
int weft_wire_header_append(weft_wire_buf_t *b, const Weft__V1__Hello *hello,
			    uint32_t segment);

/*
 * client.c: weft_wire_socket_dir() - the per-user socket directory:
 * $XDG_RUNTIME_DIR/weft, else /tmp/weft-<uid>.
 * @create: make it (mode 0700) if missing.
 *
 * Context: any thread; it makes blocking file-system calls (lstat(2),
 * mkdir(2)): a client's, not a task's.
 * Return: 0; -ENAMETOOLONG; -ENOTDIR; -EPERM (owned by someone else, or
 * open to group or others: refused); a negative errno from mkdir(2) or
 * lstat(2).
 */
int weft_wire_socket_dir(char *buf, size_t len, int create);

/*
 * client.c: weft_wire_connect() - connect to a live process's probe:
 * @target is a pid (its socket in weft_wire_socket_dir()), unix:PATH or
 * tcp://HOST:PORT.  weft_wire_connect_unix() takes a socket's path.
 * Over TCP the Hello holding the token (WEFT_CONSOLE_TOKEN from the
 * environment, empty if unset) is sent at once: the server sends
 * nothing before it, and closes the connection if it does not match.
 *
 * Context: any thread but a task on a worker: it blocks in connect(2), over
 * TCP in getaddrinfo(3) and send(2) too.
 * Return: the connected fd (close-on-exec, blocking); -EINVAL for a target
 * of none of those forms; -EHOSTUNREACH when the host does not resolve;
 * -ENAMETOOLONG for a socket path too long; else a negative errno from
 * socket(2), connect(2) or send(2) (-EMSGSIZE, -ENOMEM from encoding the
 * Hello).
 */
int weft_wire_connect(const char *target);
int weft_wire_connect_unix(const char *path);

/*
 * client.c: weft_wire_connect_why() - why weft_wire_connect(@target)
 * failed with @err, in words for a one-line error: for a pid, whether
 * there is no such process, or it has no probe socket (not a weft
 * program, its probe off, another user's), or its socket refuses (a
 * process gone that left it); else strerror(-@err).
 *
 * Context: any thread; it may call kill(2) with signal 0 and stat(2).
 * Return: @buf.
 */
const char *weft_wire_connect_why(const char *target, int err, char *buf,
				  size_t len);

/* The longest console token a client sends and a server takes. */
#define WEFT_WIRE_TOKEN_MAX 128

/*
 * client.c: weft_wire_token_read() - a token from its file's first line
 * (the server's token file, or one the user wrote) into @buf.
 *
 * Context: any thread; it reads the file with blocking stdio: a client's,
 * not a task's.
 * Return: 0; -EINVAL (empty, longer than WEFT_WIRE_TOKEN_MAX or @len);
 * a negative errno from fopen(3).
 */
int weft_wire_token_read(const char *path, char *buf, size_t len);

/**
 * weft_wire_send() - encode @f as one record and write it all to @fd (no
 * SIGPIPE).
 *
 * Context: any thread, one writer per @fd; it blocks until everything is
 * written when @fd is blocking (a task must not give it one).
 * Return: 0; -ENOMEM; -EMSGSIZE (a frame over WEFT_WIRE_MAX_RECORD); a
 * negative errno from send(2).
 */
int weft_wire_send(int fd, const Weft__V1__Frame *f);

/*
 * client.c: weft_wire_each_socket() - calls @fn with the path of every
 * socket in this user's socket directory.  @fn returns 1 if a process
 * answered there, 0 if none did (a socket whose process is gone is then
 * removed), or a negative errno to stop the walk.
 *
 * Context: any thread; blocking directory reads, and @fn runs on the
 * caller's thread: a client's, not a task's.
 * Return: 0; @fn's error; or weft_wire_socket_dir()'s (-ENOENT: no
 * directory, so no live process).
 */
int weft_wire_each_socket(int (*fn)(const char *path, void *arg), void *arg);

/*
 * Checkpoint marks (ckpt.c; weft.proto's Checkpoint): a 54-byte record
 * of a fixed shape that a recorder writes before a full update every so
 * often, so that a reader can find the state near any byte offset of a
 * file.  A reader scans for its first WEFT_WIRE_CKPT_SYNC_LEN bytes and
 * checks the rest with weft_wire_ckpt_get().
 */
#define WEFT_WIRE_CKPT_LEN 54
#define WEFT_WIRE_CKPT_SYNC_LEN 13

/* A mark's fields: the full update's time (its stats' now), the mark's
 * own offset in its file, the previous mark's (0: none known) and the
 * bytes of the full update's records that follow the mark. */
typedef struct weft_wire_ckpt_s {
	uint64_t time_ns, offset, prev, full_bytes;
} weft_wire_ckpt_t;

/**
 * ckpt.c: weft_wire_ckpt_put() - the mark @c as its record's
 * WEFT_WIRE_CKPT_LEN bytes at @out (patching one written before: the
 * length stays).
 *
 * Context: any thread; a task may call it (never blocks).
 */
void weft_wire_ckpt_put(uint8_t *out, const weft_wire_ckpt_t *c);

/**
 * ckpt.c: weft_wire_ckpt_append() - the mark @c's record at the end of
 * @b.
 *
 * Context: any thread, one at a time per @b; a task may call it.
 * Return: 0; -ENOMEM (@b unchanged).
 */
int weft_wire_ckpt_append(weft_wire_buf_t *b, const weft_wire_ckpt_t *c);

/**
 * ckpt.c: weft_wire_ckpt_get() - whether the @n bytes at @p, read at
 * offset @at of a file, start a whole mark: its shape, its check, its
 * own offset @at, a previous mark before it.  Fills @c when so.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: true with @c filled; false (bytes that only look like one).
 */
bool weft_wire_ckpt_get(const uint8_t *p, size_t n, uint64_t at,
			weft_wire_ckpt_t *c);

/**
 * ckpt.c: weft_wire_ckpt_find() - the first place in the @n bytes at @p
 * where a mark's sync pattern starts (to be checked by
 * weft_wire_ckpt_get()).
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: a pointer into @p, or NULL when the pattern is not there.
 */
const uint8_t *weft_wire_ckpt_find(const uint8_t *p, size_t n);

/**
 * client.c: weft_wire_now_ns() - CLOCK_MONOTONIC in nanoseconds.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: CLOCK_MONOTONIC, in nanoseconds.
 */
uint64_t weft_wire_now_ns(void);

#endif /* WEFT_WIRE_H */
