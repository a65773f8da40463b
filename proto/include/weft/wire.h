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

/* The bucket of @ns in a weft_hist_t; WEFT_HIST_BUCKETS for an outlier. */
static inline unsigned weft_hist_index(uint64_t ns)
{
	unsigned e;

	if (ns < 64)
		return 0;
	e = 63 - (unsigned)__builtin_clzll(ns); /* 6 .. */
	if (e >= 38)
		return WEFT_HIST_BUCKETS; /* outlier */
	/* 1 + (e - 6) * 2 + the bit below the top one: ns >> (e - 1) is
	 * the top two bits, 2 or 3, so no mask is needed. */
	return 2 * e - 13 + (unsigned)(ns >> (e - 1));
}

/* weft_hist_record(), inline for the collector's per-event paths. */
static inline void weft_hist_add(weft_hist_t *h, uint64_t ns)
{
	unsigned i = weft_hist_index(ns);

	if (i >= WEFT_HIST_BUCKETS)
		h->outliers++;
	else
		h->buckets[i]++;
	h->count++;
	h->sum_ns += ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

/* record.c: buffers */
void weft_wire_buf_fini(weft_wire_buf_t *b);
int weft_wire_buf_reserve(weft_wire_buf_t *b, size_t more);

/* record.c: records */
size_t weft_wire_varint_put(uint8_t *out, uint64_t v);
int weft_wire_record_append(weft_wire_buf_t *b, const Weft__V1__Frame *f);
int weft_wire_record_pack(const Weft__V1__Frame *f, uint8_t *out, size_t cap);
size_t weft_wire_record_size(const Weft__V1__Frame *f);
size_t weft_wire_record_len(const uint8_t *rec, size_t n);

/* record.c: the decoder */
void weft_wire_decoder_init(weft_wire_decoder_t *d, size_t max_record);
void weft_wire_decoder_fini(weft_wire_decoder_t *d);
int weft_wire_decoder_feed(weft_wire_decoder_t *d, const void *data,
			    size_t len, size_t *used, Weft__V1__Frame **frame);
bool weft_wire_decoder_mid_record(const weft_wire_decoder_t *d);
void weft_wire_frame_free(Weft__V1__Frame *f);
const char *weft_wire_strerror(int err);

/* batch.c: event batches */
void weft_wire_batch_init(weft_wire_batch_t *b);
void weft_wire_batch_fini(weft_wire_batch_t *b);
int weft_wire_batch_encode(weft_wire_batch_t *b, const weft_event_t *ev,
			    size_t n);
int weft_wire_batch_decode(const Weft__V1__EventBatch *m, weft_event_t *out,
			    size_t cap);
int weft_wire_batch_append(weft_wire_buf_t *b, const Weft__V1__EventBatch *m);

/* batch.c: a collector pass's events */
void weft_wire_events_init(weft_wire_events_t *e);
void weft_wire_events_fini(weft_wire_events_t *e);
const weft_event_t *weft_wire_events_group(weft_wire_events_t *e,
					    const weft_event_t *ev, size_t n);
int weft_wire_events_append(weft_wire_events_t *e, weft_wire_buf_t *b,
			     const weft_event_t *ev, size_t n);

/* update.c: updates, split and recount */
int weft_wire_update_append(weft_wire_buf_t *b, const weft_probe_update_t *u,
			     uint64_t prev_now_ns);
int weft_wire_update_append_split(weft_wire_buf_t *b,
				   const weft_probe_update_t *u,
				   uint64_t prev_now_ns, size_t max_record);
int weft_wire_update_recount(weft_wire_buf_t *b, const uint8_t *rec,
			      size_t len, uint64_t skipped, uint64_t not_sent);

/* hello.c: the hello, a trace file's header */
int weft_wire_hello_init(weft_wire_hello_t *h, uint32_t workers,
			  const char *clock, uint64_t start_ns);
void weft_wire_hello_fini(weft_wire_hello_t *h);
int weft_wire_header_append(weft_wire_buf_t *b, const Weft__V1__Hello *hello,
			     uint32_t segment);

/*
 * client.c: weft_wire_socket_dir() - the per-user socket directory:
 * $XDG_RUNTIME_DIR/weft, else /tmp/weft-<uid>.
 * @create: make it (mode 0700) if missing.
 *
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
 * Return: the connected fd (close-on-exec, blocking); -EINVAL for a
 * target of none of those forms; -EHOSTUNREACH when the host does not
 * resolve; else a negative errno from socket(2), connect(2) or send(2).
 */
int weft_wire_connect(const char *target);
int weft_wire_connect_unix(const char *path);

/* The longest console token a client sends and a server takes. */
#define WEFT_WIRE_TOKEN_MAX 128

/*
 * client.c: weft_wire_token_read() - a token from its file's first line
 * (the server's token file, or one the user wrote) into @buf.
 * Return: 0; -EINVAL (empty, longer than WEFT_WIRE_TOKEN_MAX or @len);
 * a negative errno from fopen(3).
 */
int weft_wire_token_read(const char *path, char *buf, size_t len);

/*
 * client.c: weft_wire_send() - encode @f as one record and write it all
 * to @fd (no SIGPIPE).  Return: 0, -ENOMEM or a negative errno.
 */
int weft_wire_send(int fd, const Weft__V1__Frame *f);

/*
 * client.c: weft_wire_each_socket() - calls @fn with the path of every
 * socket in this user's socket directory.  @fn returns 1 if a process
 * answered there, 0 if none did (a socket whose process is gone is then
 * removed), or a negative errno to stop the walk.
 *
 * Return: 0; @fn's error; or weft_wire_socket_dir()'s (-ENOENT: no
 * directory, so no live process).
 */
int weft_wire_each_socket(int (*fn)(const char *path, void *arg), void *arg);

/** client.c: weft_wire_now_ns() - CLOCK_MONOTONIC in nanoseconds. */
uint64_t weft_wire_now_ns(void);

#endif /* WEFT_WIRE_H */
