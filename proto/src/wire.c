/* SPDX-License-Identifier: MIT */
/*
 * Records, the streaming record decoder and event batches (weft/wire.h
 * has the model).
 *
 * The records of every collector pass (EventBatch, Update) are encoded
 * here by hand, byte for byte what protobuf-c writes (test_wire checks);
 * protobuf-c decodes everything, and encodes the rare frames (hello,
 * header, subscribe, control).
 *
 * Event batches are columns of varints, one batch per emitting thread, so
 * that what repeats from one event to the next (the task, a zero argument,
 * a few microseconds of time) costs about a byte.  Decoding checks every
 * column against the count before touching it: a batch from outside can
 * be short, long or inconsistent and is then refused whole (-EBADMSG).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft/wire.h"

/* ------------------------------------------------------------ buffers */

void weft_wire_buf_fini(weft_wire_buf_t *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int weft_wire_buf_reserve(weft_wire_buf_t *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;
	uint8_t *p;

	if (more > SIZE_MAX / 2 - b->len)
		return -ENOMEM;
	if (b->len + more <= b->cap)
		return 0;
	while (cap < b->len + more)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

/* ------------------------------------------------------------ records */

/*
 * Bytes of @v as a varint: one per started group of seven bits, that is
 * 1 + lg / 7 for lg the index of its top bit; (lg * 9 + 73) / 64 is the
 * same for lg < 64, without the division (a multiply and a shift).
 */
static inline size_t varint_len(uint64_t v)
{
	unsigned lg = 63 - (unsigned)__builtin_clzll(v | 1);

	return (lg * 9 + 73) >> 6;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

size_t weft_wire_varint_put(uint8_t *out, uint64_t v)
{
	return (size_t)(put_varint(out, v) - out);
}

/*
 * Hand encoding (event batches, updates: the records of every pass).  The
 * helpers write what protobuf-c writes for a proto3 field: nothing for 0
 * or an empty string, the field's tag then its value otherwise.
 */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

/* Our field numbers are below 2048: a tag is one or two bytes. */
static inline size_t tag_len(unsigned field)
{
	return field < 16 ? 1 : 2;
}

static inline uint8_t *put_tag(uint8_t *p, unsigned field, unsigned wt)
{
	return put_varint(p, (uint64_t)field << 3 | wt);
}

/* A varint field (uint32, uint64; bool as 0 or 1): absent when 0. */
static inline size_t uint_len(unsigned field, uint64_t v)
{
	return v ? tag_len(field) + varint_len(v) : 0;
}

static inline uint8_t *put_uint(uint8_t *p, unsigned field, uint64_t v)
{
	if (v) {
		p = put_tag(p, field, WT_VARINT);
		p = put_varint(p, v);
	}
	return p;
}

/* sint32: zigzag, as 32 bits. */
static inline uint32_t zigzag32(int32_t v)
{
	return (uint32_t)v << 1 ^ (uint32_t)(v >> 31);
}

/* A double: absent when it compares equal to 0 (so -0.0 too). */
static inline size_t double_len(unsigned field, double v)
{
	return v != 0 ? tag_len(field) + 8 : 0;
}

static inline uint8_t *put_double(uint8_t *p, unsigned field, double v)
{
	uint64_t bits;

	if (v == 0)
		return p;
	memcpy(&bits, &v, sizeof(bits));
	p = put_tag(p, field, WT_I64);
	for (unsigned i = 0; i < 8; i++)
		*p++ = (uint8_t)(bits >> (8 * i));
	return p;
}

/*
 * The sizes and the writes are two codings of one message: a record
 * written longer than it was sized has run past the room reserved for
 * it.  A broken invariant, so abort (not weft_panic(): the fuzzers build
 * this file without the runtime).
 */
static void check_written(const char *what, const uint8_t *start,
			  const uint8_t *end, size_t sized)
{
	if ((size_t)(end - start) != sized) {
		fprintf(stderr, "weft: wire: %s sized %zu bytes, written %zu\n",
			what, sized, (size_t)(end - start));
		abort();
	}
}

/* A string (of @len bytes): absent when empty. */
static inline size_t str_len(unsigned field, size_t len)
{
	return len ? tag_len(field) + varint_len(len) + len : 0;
}

static inline uint8_t *put_str(uint8_t *p, unsigned field, const char *s,
			       size_t len)
{
	if (len) {
		p = put_tag(p, field, WT_LEN);
		p = put_varint(p, len);
		memcpy(p, s, len);
		p += len;
	}
	return p;
}

/* A submessage (or a packed list) whose body is @len bytes. */
static inline size_t sub_len(unsigned field, size_t len)
{
	return tag_len(field) + varint_len(len) + len;
}

static inline uint8_t *put_sub(uint8_t *p, unsigned field, size_t len)
{
	p = put_tag(p, field, WT_LEN);
	return put_varint(p, len);
}

static size_t cstr_len(const char *s)
{
	return s ? strlen(s) : 0;
}

size_t weft_wire_record_size(const Weft__V1__Frame *f)
{
	size_t len = protobuf_c_message_get_packed_size(&f->base);

	return 1 + varint_len(len) + len;
}

/*
 * weft_wire_record_pack() - one record into @out.
 * Return: bytes written; -ENOSPC if @cap is too small; -EMSGSIZE if the
 * frame exceeds WEFT_WIRE_MAX_RECORD.
 */
int weft_wire_record_pack(const Weft__V1__Frame *f, uint8_t *out, size_t cap)
{
	size_t len = protobuf_c_message_get_packed_size(&f->base), n;

	if (len > WEFT_WIRE_MAX_RECORD)
		return -EMSGSIZE;
	if (1 + varint_len(len) + len > cap)
		return -ENOSPC;
	out[0] = WEFT_WIRE_RECORD_TAG;
	n = 1 + weft_wire_varint_put(out + 1, len);
	n += protobuf_c_message_pack(&f->base, out + n);
	return (int)n;
}

/* Return: 0; -ENOMEM; -EMSGSIZE (buffer unchanged either way). */
int weft_wire_record_append(weft_wire_buf_t *b, const Weft__V1__Frame *f)
{
	size_t len = protobuf_c_message_get_packed_size(&f->base);
	size_t need = 1 + varint_len(len) + len;
	int err;

	if (len > WEFT_WIRE_MAX_RECORD)
		return -EMSGSIZE;
	err = weft_wire_buf_reserve(b, need);
	if (err)
		return err;
	err = weft_wire_record_pack(f, b->data + b->len, need);
	if (err < 0)
		return err;
	b->len += (size_t)err;
	return 0;
}

/* ------------------------------------------------------------ decoder */

void weft_wire_decoder_init(weft_wire_decoder_t *d, size_t max_record)
{
	memset(d, 0, sizeof(*d));
	d->max_record = max_record ? max_record : WEFT_WIRE_MAX_RECORD;
}

void weft_wire_decoder_fini(weft_wire_decoder_t *d)
{
	free(d->body);
	d->body = NULL;
}

void weft_wire_frame_free(Weft__V1__Frame *f)
{
	if (f)
		weft__v1__frame__free_unpacked(f, NULL);
}

bool weft_wire_decoder_mid_record(const weft_wire_decoder_t *d)
{
	return d->in_body || d->hdr_len;
}

const char *weft_wire_strerror(int err)
{
	switch (err) {
	case -EMSGSIZE:
		return "record longer than the limit";
	case -EILSEQ:
		return "not a record (bad tag or malformed length)";
	case -EBADMSG:
		return "frame does not decode";
	case -ENOMEM:
		return "out of memory";
	default:
		return "unknown error";
	}
}

/*
 * Parses the header bytes gathered so far.  Return: 1 with *len set when
 * whole, 0 when more bytes are needed, or a negative error.
 */
static int header_parse(const uint8_t *h, size_t n, size_t max, size_t *len)
{
	uint64_t v = 0;

	if (n < 1)
		return 0;
	if (h[0] != WEFT_WIRE_RECORD_TAG)
		return -EILSEQ;
	for (size_t i = 1; i < n; i++) {
		if (i > 10)
			return -EILSEQ;
		if (i == 10 && h[i] > 1)
			return -EILSEQ; /* beyond 64 bits */
		v |= (uint64_t)(h[i] & 0x7f) << (7 * (i - 1));
		if (!(h[i] & 0x80)) {
			if (v > max)
				return -EMSGSIZE;
			*len = (size_t)v;
			return 1;
		}
	}
	return n >= 11 ? -EILSEQ : 0;
}

static int body_unpack(weft_wire_decoder_t *d, const uint8_t *p, size_t n,
		       Weft__V1__Frame **frame)
{
	Weft__V1__Frame *f = weft__v1__frame__unpack(NULL, n, p);

	if (!f)
		return d->error = -EBADMSG;
	d->records++;
	*frame = f;
	return WEFT_WIRE_FRAME;
}

/*
 * weft_wire_decoder_feed() - give the decoder stream bytes.
 * @data, @len: the bytes; @used: how many it took (all, unless a frame
 * ended first); @frame: receives a whole frame (free it with
 * weft_wire_frame_free()).
 *
 * Takes no bytes past the end of a frame, so the caller feeds the rest
 * next.  A record whose bytes are all in @data is decoded in place.
 *
 * Return: WEFT_WIRE_FRAME, WEFT_WIRE_NEED_MORE, or an error (see
 * weft/wire.h), after which every call returns the same error.
 */
int weft_wire_decoder_feed(weft_wire_decoder_t *d, const void *data,
			    size_t len, size_t *used, Weft__V1__Frame **frame)
{
	const uint8_t *p = data;
	size_t i = 0;
	int rc;

	*used = 0;
	*frame = NULL;
	if (d->error)
		return d->error;
	while (i < len) {
		if (!d->in_body) {
			if (!d->hdr_len)
				d->record_offset = d->offset;
			d->hdr[d->hdr_len++] = p[i++];
			d->offset++;
			rc = header_parse(d->hdr, d->hdr_len, d->max_record,
					  &d->body_len);
			if (rc < 0) {
				*used = i;
				return d->error = rc;
			}
			if (rc == 0)
				continue;
			d->hdr_len = 0;
			d->in_body = true;
			d->body_have = 0;
			if (len - i >= d->body_len) {
				/* Whole in the caller's bytes. */
				d->in_body = false;
				rc = body_unpack(d, p + i, d->body_len, frame);
				i += d->body_len;
				d->offset += d->body_len;
				*used = i;
				return rc;
			}
			d->body = malloc(d->body_len ? d->body_len : 1);
			if (!d->body) {
				*used = i;
				return d->error = -ENOMEM;
			}
			continue;
		}
		size_t take = d->body_len - d->body_have;

		if (take > len - i)
			take = len - i;
		memcpy(d->body + d->body_have, p + i, take);
		d->body_have += take;
		d->offset += take;
		i += take;
		if (d->body_have == d->body_len) {
			d->in_body = false;
			rc = body_unpack(d, d->body, d->body_len, frame);
			free(d->body);
			d->body = NULL;
			*used = i;
			return rc;
		}
	}
	*used = i;
	return WEFT_WIRE_NEED_MORE;
}

/* ------------------------------------------------------------ event batches */

static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Kinds whose a1 is a task id: stored relative to the event's task. */
static bool a1_is_task(unsigned kind)
{
	return kind == WEFT_EV_SPAWN || kind == WEFT_EV_WAKE;
}

void weft_wire_batch_init(weft_wire_batch_t *b)
{
	memset(b, 0, sizeof(*b));
	weft__v1__event_batch__init(&b->msg);
}

void weft_wire_batch_fini(weft_wire_batch_t *b)
{
	free(b->head);
	free(b->a2);
	free(b->flag_index);
	free(b->flag_value);
	free(b->ts_delta);
	free(b->task);
	free(b->a1);
	weft_wire_batch_init(b);
}

static int batch_grow(weft_wire_batch_t *b, size_t n)
{
	size_t cap = n;

#define GROW(field)                                                            \
	do {                                                                   \
		void *q = realloc(b->field, cap * sizeof(*b->field));          \
		if (!q)                                                        \
			return -ENOMEM;                                        \
		b->field = q;                                                  \
	} while (0)
	if (n <= b->cap)
		return 0;
	GROW(head);
	GROW(a2);
	GROW(flag_index);
	GROW(flag_value);
	GROW(ts_delta);
	GROW(task);
	GROW(a1);
#undef GROW
	b->cap = cap;
	return 0;
}

/*
 * weft_wire_batch_encode() - put the first events of @ev into @b->msg.
 *
 * Takes the leading run of events from one emitting thread (one worker
 * value), at most WEFT_WIRE_BATCH_MAX; the caller loops on the rest.  A
 * task id exactly 2^63 away from the previous one cannot be delta coded
 * and also ends the batch.  @b->msg points into @b until the next call.
 *
 * Return: events taken (>= 1 when @n > 0); 0 when @n is 0; -ENOMEM.
 */
int weft_wire_batch_encode(weft_wire_batch_t *b, const weft_event_t *ev,
			    size_t n)
{
	Weft__V1__EventBatch *m = &b->msg;
	uint64_t prev_ts, prev_task = 0;
	size_t k, na1 = 0, na2 = 0, nfl = 0;
	int err;

	if (n == 0)
		return 0;
	if (n > WEFT_WIRE_BATCH_MAX)
		n = WEFT_WIRE_BATCH_MAX;
	err = batch_grow(b, n);
	if (err)
		return err;
	weft__v1__event_batch__init(m);
	m->worker = ev[0].worker;
	m->base_ts = prev_ts = ev[0].ts;
	for (k = 0; k < n; k++)
		if (ev[k].task) {
			prev_task = ev[k].task;
			break;
		}
	m->base_task = prev_task;

	for (k = 0; k < n; k++) {
		const weft_event_t *e = &ev[k];
		uint64_t a1 = e->a1;

		if (e->worker != m->worker)
			break;
		if (e->task) {
			int64_t d = (int64_t)(e->task - prev_task);

			if (d == INT64_MIN)
				break;
			b->task[k] = zigzag(d) + 1;
			prev_task = e->task;
		} else {
			b->task[k] = 0;
		}
		if (a1_is_task(e->kind) && a1)
			a1 = zigzag((int64_t)(a1 - e->task));
		b->head[k] = (uint32_t)e->kind << 2 | (e->a1 != 0) << 1 |
			     (e->a2 != 0);
		b->ts_delta[k] = (int64_t)(e->ts - prev_ts);
		prev_ts = e->ts;
		if (e->a1)
			b->a1[na1++] = a1;
		if (e->a2)
			b->a2[na2++] = e->a2;
		if (e->flags) {
			b->flag_index[nfl] = (uint32_t)k;
			b->flag_value[nfl++] = e->flags;
		}
	}
	m->count = (uint32_t)k;
	m->n_head = m->n_ts_delta = m->n_task = k;
	m->head = b->head;
	m->ts_delta = b->ts_delta;
	m->task = b->task;
	m->n_a1 = na1;
	m->a1 = b->a1;
	m->n_a2 = na2;
	m->a2 = b->a2;
	m->n_flag_index = m->n_flag_value = nfl;
	m->flag_index = b->flag_index;
	m->flag_value = b->flag_value;
	return (int)k;
}

/*
 * weft_wire_batch_decode() - rebuild the events of one batch.
 * @out, @cap: room for at least @m->count events.
 *
 * Return: the number of events; -ENOSPC if @cap is too small; -EBADMSG
 * if the columns do not agree with each other.
 */
int weft_wire_batch_decode(const Weft__V1__EventBatch *m, weft_event_t *out,
			    size_t cap)
{
	size_t n = m->count, ia1 = 0, ia2 = 0, ifl = 0;
	uint64_t ts = m->base_ts, prev_task = m->base_task;

	if (n > INT32_MAX)
		return -EBADMSG;
	if (m->n_head != n || m->n_ts_delta != n || m->n_task != n ||
	    m->n_flag_index != m->n_flag_value || m->n_a1 > n || m->n_a2 > n)
		return -EBADMSG;
	if (n > cap)
		return -ENOSPC;
	if (m->worker > UINT16_MAX)
		return -EBADMSG;
	for (size_t k = 0; k < n; k++) {
		weft_event_t *e = &out[k];
		uint32_t h = m->head[k];

		if (h >> 2 > UINT8_MAX)
			return -EBADMSG;
		memset(e, 0, sizeof(*e));
		e->kind = (uint8_t)(h >> 2);
		e->worker = (uint16_t)m->worker;
		ts += (uint64_t)m->ts_delta[k];
		e->ts = ts;
		if (m->task[k]) {
			prev_task += (uint64_t)unzigzag(m->task[k] - 1);
			e->task = prev_task;
		}
		if (h & 2) {
			if (ia1 >= m->n_a1)
				return -EBADMSG;
			e->a1 = m->a1[ia1++];
			if (a1_is_task(e->kind))
				e->a1 = e->task + (uint64_t)unzigzag(e->a1);
			if (!e->a1)
				return -EBADMSG; /* present means nonzero */
		}
		if (h & 1) {
			if (ia2 >= m->n_a2 || !m->a2[ia2])
				return -EBADMSG;
			e->a2 = m->a2[ia2++];
		}
		if (ifl < m->n_flag_index && m->flag_index[ifl] == k) {
			if (m->flag_value[ifl] > UINT8_MAX ||
			    !m->flag_value[ifl])
				return -EBADMSG;
			e->flags = (uint8_t)m->flag_value[ifl++];
		}
	}
	if (ia1 != m->n_a1 || ia2 != m->n_a2 || ifl != m->n_flag_index)
		return -EBADMSG;
	return (int)n;
}

/*
 * Packed columns are written in one pass, not sized first: the values go
 * where the longest length prefix would leave them (the room for @max
 * payload bytes), then the actual length goes in front and the values
 * slide back over the room they did not need, a memmove of bytes still
 * in the cache.  The same for the whole batch behind its two prefixes.
 */
static uint8_t *col_open(uint8_t *p, unsigned field, size_t max)
{
	return p + tag_len(field) + varint_len(max);
}

static uint8_t *col_close(uint8_t *p, unsigned field, const uint8_t *payload,
			  const uint8_t *end)
{
	size_t len = (size_t)(end - payload);

	p = put_sub(p, field, len);
	if (p != payload)
		memmove(p, payload, len);
	return p + len;
}

static uint8_t *put_col32(uint8_t *p, unsigned field, const uint32_t *v,
			  size_t n)
{
	uint8_t *at, *q;

	if (!n)
		return p;
	at = q = col_open(p, field, 5 * n);
	for (size_t i = 0; i < n; i++)
		q = put_varint(q, v[i]);
	return col_close(p, field, at, q);
}

static uint8_t *put_col64(uint8_t *p, unsigned field, const uint64_t *v,
			  size_t n)
{
	uint8_t *at, *q;

	if (!n)
		return p;
	at = q = col_open(p, field, 10 * n);
	for (size_t i = 0; i < n; i++)
		q = put_varint(q, v[i]);
	return col_close(p, field, at, q);
}

/* sint64: zigzag. */
static uint8_t *put_colz(uint8_t *p, unsigned field, const int64_t *v, size_t n)
{
	uint8_t *at, *q;

	if (!n)
		return p;
	at = q = col_open(p, field, 10 * n);
	for (size_t i = 0; i < n; i++)
		q = put_varint(q, zigzag(v[i]));
	return col_close(p, field, at, q);
}

/* A column's bytes at most: tag, the longest prefix, @max payload. */
static size_t col_max(unsigned field, size_t n, size_t max)
{
	return n ? tag_len(field) + varint_len(max) + max : 0;
}

/*
 * weft_wire_batch_append() - @m as one EventBatch record, encoded by hand
 * (the same bytes as weft_wire_record_append() of the Frame, without
 * protobuf-c's three passes over every column: two sizing, one writing).
 *
 * Return: 0; -ENOMEM; -EMSGSIZE (@b unchanged on error).
 */
int weft_wire_batch_append(weft_wire_buf_t *b, const Weft__V1__EventBatch *m)
{
	size_t max, blen, flen, hlen;
	uint8_t *p, *body, *start;
	int err;

	/* A value is a byte at least: longer columns cannot fit, and the
	 * bounds below stay far from overflowing. */
	if (m->n_head > WEFT_WIRE_MAX_RECORD ||
	    m->n_ts_delta > WEFT_WIRE_MAX_RECORD ||
	    m->n_task > WEFT_WIRE_MAX_RECORD ||
	    m->n_a1 > WEFT_WIRE_MAX_RECORD || m->n_a2 > WEFT_WIRE_MAX_RECORD ||
	    m->n_flag_index > WEFT_WIRE_MAX_RECORD ||
	    m->n_flag_value > WEFT_WIRE_MAX_RECORD)
		return -EMSGSIZE;
	max = 4 * 11 + col_max(5, m->n_head, 5 * m->n_head) +
	      col_max(6, m->n_ts_delta, 10 * m->n_ts_delta) +
	      col_max(7, m->n_task, 10 * m->n_task) +
	      col_max(8, m->n_a1, 10 * m->n_a1) +
	      col_max(9, m->n_a2, 5 * m->n_a2) +
	      col_max(10, m->n_flag_index, 5 * m->n_flag_index) +
	      col_max(11, m->n_flag_value, 5 * m->n_flag_value);
	/* Record tag, Frame length, Frame.events tag, EventBatch length. */
	hlen = 1 + varint_len(sub_len(5, max)) + tag_len(5) + varint_len(max);
	err = weft_wire_buf_reserve(b, hlen + max);
	if (err)
		return err;
	start = b->data + b->len;
	p = body = start + hlen;
	p = put_uint(p, 1, m->worker);
	p = put_uint(p, 2, m->count);
	p = put_uint(p, 3, m->base_ts);
	p = put_uint(p, 4, m->base_task);
	p = put_col32(p, 5, m->head, m->n_head);
	p = put_colz(p, 6, m->ts_delta, m->n_ts_delta);
	p = put_col64(p, 7, m->task, m->n_task);
	p = put_col64(p, 8, m->a1, m->n_a1);
	p = put_col32(p, 9, m->a2, m->n_a2);
	p = put_col32(p, 10, m->flag_index, m->n_flag_index);
	p = put_col32(p, 11, m->flag_value, m->n_flag_value);
	blen = (size_t)(p - body);
	flen = sub_len(5, blen); /* Frame.events */
	if (flen > WEFT_WIRE_MAX_RECORD)
		return -EMSGSIZE;
	p = start;
	*p++ = WEFT_WIRE_RECORD_TAG;
	p = put_varint(p, flen);
	p = put_sub(p, 5, blen);
	if (p != body)
		memmove(p, body, blen);
	b->len += (size_t)(p - start) + blen;
	return 0;
}

/* ------------------------------------------------------------ a pass's events */

void weft_wire_events_init(weft_wire_events_t *e)
{
	memset(e, 0, sizeof(*e));
	weft_wire_batch_init(&e->batch);
}

void weft_wire_events_fini(weft_wire_events_t *e)
{
	weft_wire_batch_fini(&e->batch);
	free(e->scratch);
	free(e->keys);
	weft_wire_events_init(e);
}

static int key_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The regrouping as a counting sort over the few distinct emitting threads
 * (workers, and one id for every other thread), in ascending id order as
 * the qsort fallback: O(n) where the sort was a tenth of the collector's
 * time under a busy service.  False when there are too many ids.
 */
#define GROUP_IDS 128

static bool group_by_count(weft_event_t *out, const weft_event_t *ev, size_t n)
{
	uint16_t id[GROUP_IDS];
	size_t count[GROUP_IDS], at[GROUP_IDS];
	unsigned nid = 0, last = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned k = last;

		if (k >= nid || id[k] != ev[i].worker) {
			for (k = 0; k < nid && id[k] != ev[i].worker; k++)
				;
			if (k == nid) {
				if (nid == GROUP_IDS)
					return false;
				id[nid] = ev[i].worker;
				count[nid++] = 0;
			}
		}
		count[k]++;
		last = k;
	}
	/* Offsets in ascending id order (insertion sort of a few ids). */
	{
		unsigned order[GROUP_IDS];
		size_t off = 0;

		for (unsigned a = 0; a < nid; a++) {
			unsigned b = a;

			while (b > 0 && id[order[b - 1]] > id[a]) {
				order[b] = order[b - 1];
				b--;
			}
			order[b] = a;
		}
		for (unsigned a = 0; a < nid; a++) {
			at[order[a]] = off;
			off += count[order[a]];
		}
	}
	last = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned k = last;

		if (id[k] != ev[i].worker)
			for (k = 0; id[k] != ev[i].worker; k++)
				;
		out[at[k]++] = ev[i];
		last = k;
	}
	return true;
}

/*
 * weft_wire_events_group() - @ev regrouped per emitting thread, each
 * thread's events in their order (a stable sort by worker).
 *
 * Return: @ev itself when it holds one thread's events, else @e's scratch
 * copy (valid until the next call); NULL for no memory.
 */
const weft_event_t *weft_wire_events_group(weft_wire_events_t *e,
					    const weft_event_t *ev, size_t n)
{
	bool one_thread = true;

	for (size_t i = 1; i < n && one_thread; i++)
		one_thread = ev[i].worker == ev[0].worker;
	if (one_thread)
		return ev;
	if (n > e->cap) {
		weft_event_t *s = realloc(e->scratch, n * sizeof(*s));
		uint64_t *k;

		if (!s)
			return NULL;
		e->scratch = s;
		k = realloc(e->keys, n * sizeof(*k));
		if (!k)
			return NULL;
		e->keys = k;
		e->cap = n;
	}
	if (group_by_count(e->scratch, ev, n))
		return e->scratch;
	for (size_t i = 0; i < n; i++)
		e->keys[i] = (uint64_t)ev[i].worker << 40 | i;
	qsort(e->keys, n, sizeof(*e->keys), key_cmp);
	for (size_t i = 0; i < n; i++)
		e->scratch[i] = ev[e->keys[i] & ((1ull << 40) - 1)];
	return e->scratch;
}

/*
 * weft_wire_events_append() - a collector pass's events as EventBatch
 * records, one run per emitting thread.
 *
 * Return: 0; -ENOMEM; -EMSGSIZE.  On error @b holds the whole records
 * appended before it.
 */
int weft_wire_events_append(weft_wire_events_t *e, weft_wire_buf_t *b,
			     const weft_event_t *ev, size_t n)
{
	const weft_event_t *g = weft_wire_events_group(e, ev, n);
	int err;

	if (!g)
		return -ENOMEM;
	while (n) {
		int k = weft_wire_batch_encode(&e->batch, g, n);

		if (k <= 0)
			return -ENOMEM;
		err = weft_wire_batch_append(b, &e->batch.msg);
		if (err)
			return err;
		g += k;
		n -= (size_t)k;
	}
	return 0;
}

/* ------------------------------------------------------------ updates */

/*
 * Update records are encoded by hand, from the probe's own structures:
 * protobuf-c's packer walks the descriptors field by field, sizes the whole
 * message once (get_packed_size) and then every submessage again at each
 * level it nests at (an Update's Task's Histogram thrice), and needed the
 * task copied into its message first.  With a task per request in every
 * update of every stream, protobuf-c (these and the event batches) was
 * half the collector's time (perf).
 *
 * The bytes are the ones protobuf-c 1.4 writes for the same message (the
 * decoders stay protobuf-c's, and a file stays the same file): fields in
 * number order, proto3 zeros, empty strings and empty lists left out,
 * repeated scalars packed, a submessage written whenever it is set, even
 * empty.  test_wire packs varied updates both ways and compares the bytes.
 *
 * Sizes come first, once per task: a length-delimited field needs its
 * length before its bytes.  They are kept in a per-thread scratch array
 * from one update to the next (calloc'ed and freed per Update, the message
 * arrays of before were megabytes faulted in again each time).
 */

/* Histogram */

static size_t hist_len(const weft_hist_t *h)
{
	size_t n = 0;

	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++)
		n += varint_len(h->buckets[i]);
	return sub_len(1, n) + uint_len(2, h->count) + uint_len(3, h->sum_ns) +
	       uint_len(4, h->max_ns) + uint_len(5, h->outliers);
}

static uint8_t *put_hist(uint8_t *p, const weft_hist_t *h)
{
	size_t n = 0;

	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++)
		n += varint_len(h->buckets[i]);
	p = put_sub(p, 1, n);
	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++)
		p = put_varint(p, h->buckets[i]);
	p = put_uint(p, 2, h->count);
	p = put_uint(p, 3, h->sum_ns);
	p = put_uint(p, 4, h->max_ns);
	return put_uint(p, 5, h->outliers);
}

/* Task */

/* A task's sizes, from the size pass to the write. */
struct task_size {
	size_t body;       /* the Task message */
	size_t name, file; /* string lengths */
	size_t hist[2];    /* poll_hist, sched_hist bodies */
	bool is_new, is_finished;
};

static size_t task_len(const weft_probe_task_t *t, struct task_size *s)
{
	size_t n;

	s->name = cstr_len(t->name);
	s->file = cstr_len(t->file);
	n = uint_len(1, t->id) + uint_len(2, t->parent) + str_len(3, s->name) +
	    str_len(4, s->file) + uint_len(5, t->line) +
	    uint_len(6, t->state_size) + uint_len(7, t->kind) +
	    uint_len(8, t->state) + uint_len(9, t->last_worker) +
	    uint_len(10, zigzag32(t->status)) + uint_len(11, t->spawned_ns) +
	    uint_len(12, t->finished_ns) + uint_len(13, t->polls) +
	    uint_len(14, t->busy_ns) + uint_len(15, t->scheduled_ns) +
	    uint_len(16, t->idle_ns) + uint_len(17, t->wakes) +
	    uint_len(18, t->self_wakes) + uint_len(19, t->waker_clones) +
	    uint_len(20, t->waker_drops) + uint_len(21, t->max_poll_ns) +
	    uint_len(22, t->warnings) + uint_len(23, t->locks_held);
	if (t->poll_hist) {
		s->hist[0] = hist_len(t->poll_hist);
		n += sub_len(24, s->hist[0]);
	}
	if (t->sched_hist) {
		s->hist[1] = hist_len(t->sched_hist);
		n += sub_len(25, s->hist[1]);
	}
	return s->body = n;
}

static uint8_t *put_task(uint8_t *p, const weft_probe_task_t *t,
			 const struct task_size *s)
{
	p = put_sub(p, 2, s->body); /* Update.tasks */
	p = put_uint(p, 1, t->id);
	p = put_uint(p, 2, t->parent);
	p = put_str(p, 3, t->name, s->name);
	p = put_str(p, 4, t->file, s->file);
	p = put_uint(p, 5, t->line);
	p = put_uint(p, 6, t->state_size);
	p = put_uint(p, 7, t->kind);
	p = put_uint(p, 8, t->state);
	p = put_uint(p, 9, t->last_worker);
	p = put_uint(p, 10, zigzag32(t->status));
	p = put_uint(p, 11, t->spawned_ns);
	p = put_uint(p, 12, t->finished_ns);
	p = put_uint(p, 13, t->polls);
	p = put_uint(p, 14, t->busy_ns);
	p = put_uint(p, 15, t->scheduled_ns);
	p = put_uint(p, 16, t->idle_ns);
	p = put_uint(p, 17, t->wakes);
	p = put_uint(p, 18, t->self_wakes);
	p = put_uint(p, 19, t->waker_clones);
	p = put_uint(p, 20, t->waker_drops);
	p = put_uint(p, 21, t->max_poll_ns);
	p = put_uint(p, 22, t->warnings);
	p = put_uint(p, 23, t->locks_held);
	if (t->poll_hist) {
		p = put_sub(p, 24, s->hist[0]);
		p = put_hist(p, t->poll_hist);
	}
	if (t->sched_hist) {
		p = put_sub(p, 25, s->hist[1]);
		p = put_hist(p, t->sched_hist);
	}
	return p;
}

/* Worker, WorkerCounters */

static size_t counters_len(const weft_worker_metrics_t *k)
{
	return uint_len(1, k->polls) + uint_len(2, k->steals) +
	       uint_len(3, k->steal_ops) + uint_len(4, k->parks) +
	       uint_len(5, k->unparks) + uint_len(6, k->noop_wakes) +
	       uint_len(7, k->local_schedules) +
	       uint_len(8, k->lifo_schedules) +
	       uint_len(9, k->global_schedules) +
	       uint_len(10, k->remote_schedules) + uint_len(11, k->overflows) +
	       uint_len(12, k->spawned) + uint_len(13, k->completed) +
	       uint_len(14, k->busy_ns) + uint_len(15, k->forced_yields) +
	       uint_len(16, k->local_queue_depth);
}

/* stolen_from: one count per worker of the update, at most 64. */
static size_t stolen_len(const weft_probe_worker_t *w, size_t n)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++)
		len += varint_len(w->stolen_from[i]);
	return len;
}

static size_t worker_len(const weft_probe_worker_t *w, size_t nstolen)
{
	size_t n =
		uint_len(1, w->index) + uint_len(2, w->state) +
		uint_len(3, w->current_task) + uint_len(4, w->poll_started_ns) +
		sub_len(5, counters_len(&w->counters)) +
		double_len(6, w->polls_per_s) + double_len(7, w->steals_per_s) +
		double_len(8, w->steal_rate) + double_len(9, w->busy_ratio) +
		uint_len(10, w->mean_poll_ns) + uint_len(11, w->max_poll_ns) +
		uint_len(12, w->queue_depth);

	if (nstolen)
		n += sub_len(13, stolen_len(w, nstolen));
	return n;
}

static uint8_t *put_worker(uint8_t *p, const weft_probe_worker_t *w,
			   size_t nstolen)
{
	const weft_worker_metrics_t *k = &w->counters;

	p = put_sub(p, 3, worker_len(w, nstolen)); /* Update.workers */
	p = put_uint(p, 1, w->index);
	p = put_uint(p, 2, w->state);
	p = put_uint(p, 3, w->current_task);
	p = put_uint(p, 4, w->poll_started_ns);
	p = put_sub(p, 5, counters_len(k));
	p = put_uint(p, 1, k->polls);
	p = put_uint(p, 2, k->steals);
	p = put_uint(p, 3, k->steal_ops);
	p = put_uint(p, 4, k->parks);
	p = put_uint(p, 5, k->unparks);
	p = put_uint(p, 6, k->noop_wakes);
	p = put_uint(p, 7, k->local_schedules);
	p = put_uint(p, 8, k->lifo_schedules);
	p = put_uint(p, 9, k->global_schedules);
	p = put_uint(p, 10, k->remote_schedules);
	p = put_uint(p, 11, k->overflows);
	p = put_uint(p, 12, k->spawned);
	p = put_uint(p, 13, k->completed);
	p = put_uint(p, 14, k->busy_ns);
	p = put_uint(p, 15, k->forced_yields);
	p = put_uint(p, 16, k->local_queue_depth);
	p = put_double(p, 6, w->polls_per_s);
	p = put_double(p, 7, w->steals_per_s);
	p = put_double(p, 8, w->steal_rate);
	p = put_double(p, 9, w->busy_ratio);
	p = put_uint(p, 10, w->mean_poll_ns);
	p = put_uint(p, 11, w->max_poll_ns);
	p = put_uint(p, 12, w->queue_depth);
	if (nstolen) {
		p = put_sub(p, 13, stolen_len(w, nstolen));
		for (size_t i = 0; i < nstolen; i++)
			p = put_varint(p, w->stolen_from[i]);
	}
	return p;
}

/* Warning (detail is a char array: bounded by it, not trusted to end). */

static size_t warning_len(const weft_probe_warning_t *w)
{
	return uint_len(1, w->seq) + uint_len(2, w->kind) +
	       uint_len(3, w->worker) + uint_len(4, w->task) +
	       str_len(5, cstr_len(w->task_name)) +
	       str_len(6, cstr_len(w->file)) + uint_len(7, w->line) +
	       uint_len(8, w->at_ns) + uint_len(9, w->value_ns) +
	       str_len(10, strnlen(w->detail, sizeof(w->detail)));
}

static uint8_t *put_warning(uint8_t *p, const weft_probe_warning_t *w)
{
	p = put_sub(p, 4, warning_len(w)); /* Update.warnings */
	p = put_uint(p, 1, w->seq);
	p = put_uint(p, 2, w->kind);
	p = put_uint(p, 3, w->worker);
	p = put_uint(p, 4, w->task);
	p = put_str(p, 5, w->task_name, cstr_len(w->task_name));
	p = put_str(p, 6, w->file, cstr_len(w->file));
	p = put_uint(p, 7, w->line);
	p = put_uint(p, 8, w->at_ns);
	p = put_uint(p, 9, w->value_ns);
	return put_str(p, 10, w->detail, strnlen(w->detail, sizeof(w->detail)));
}

/* Stats */

static size_t stats_len(const weft_probe_stats_t *s)
{
	return uint_len(1, s->now_ns) + uint_len(2, s->start_ns) +
	       uint_len(3, s->workers) + uint_len(4, s->live_tasks) +
	       uint_len(5, s->spawned_tasks) +
	       uint_len(6, s->global_queue_depth) + uint_len(7, s->events) +
	       uint_len(8, s->events_dropped) + uint_len(9, s->warnings) +
	       double_len(10, s->events_per_s) +
	       double_len(11, s->polls_per_s) +
	       double_len(12, s->steals_per_s) +
	       str_len(13, cstr_len(s->clock)) +
	       uint_len(14, s->collector_cpu_ns) +
	       double_len(15, s->collector_cpu) +
	       uint_len(16, s->blocking_busy) +
	       uint_len(17, s->blocking_queued) +
	       uint_len(18, s->blocking_jobs) +
	       uint_len(19, s->tasks_end_unseen);
}

static uint8_t *put_stats(uint8_t *p, const weft_probe_stats_t *s)
{
	p = put_sub(p, 1, stats_len(s)); /* Update.stats */
	p = put_uint(p, 1, s->now_ns);
	p = put_uint(p, 2, s->start_ns);
	p = put_uint(p, 3, s->workers);
	p = put_uint(p, 4, s->live_tasks);
	p = put_uint(p, 5, s->spawned_tasks);
	p = put_uint(p, 6, s->global_queue_depth);
	p = put_uint(p, 7, s->events);
	p = put_uint(p, 8, s->events_dropped);
	p = put_uint(p, 9, s->warnings);
	p = put_double(p, 10, s->events_per_s);
	p = put_double(p, 11, s->polls_per_s);
	p = put_double(p, 12, s->steals_per_s);
	p = put_str(p, 13, s->clock, cstr_len(s->clock));
	p = put_uint(p, 14, s->collector_cpu_ns);
	p = put_double(p, 15, s->collector_cpu);
	p = put_uint(p, 16, s->blocking_busy);
	p = put_uint(p, 17, s->blocking_queued);
	p = put_uint(p, 18, s->blocking_jobs);
	return put_uint(p, 19, s->tasks_end_unseen);
}

/* The per-thread scratch: one task_size per task of the update. */
struct update_scratch {
	struct task_size *sizes;
	size_t cap;
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static _Thread_local struct update_scratch scratch_tls;

static void scratch_free(void *arg)
{
	struct update_scratch *s = arg;

	free(s->sizes);
	memset(s, 0, sizeof(*s));
}

static void scratch_key_create(void)
{
	(void)pthread_key_create(&scratch_key, scratch_free);
}

/* Return: room for @n task sizes (freed when the thread exits), or NULL. */
static struct task_size *scratch_sizes(size_t n)
{
	struct update_scratch *s = &scratch_tls;

	pthread_once(&scratch_once, scratch_key_create);
	if (!pthread_getspecific(scratch_key) &&
	    pthread_setspecific(scratch_key, s))
		return NULL;
	/* Grown as needed; shrunk when far larger (a full update of every
	 * task kept, then thousands of times less each pass). */
	if (n + 1 > s->cap || (s->cap > 65536 && s->cap / 8 > n + 1)) {
		size_t cap = n + 1 + n / 2;
		struct task_size *z = realloc(s->sizes, cap * sizeof(*z));

		if (!z && n + 1 > s->cap)
			return NULL;
		if (z) {
			s->sizes = z;
			s->cap = cap;
		}
	}
	return s->sizes;
}

/* An update being encoded: what update_part() needs besides the range. */
struct update_enc {
	const weft_probe_update_t *u;
	const struct task_size *sz;
	size_t base; /* stats, workers, warnings and full: the first part's */
	size_t nstolen;
};

/* Update.new_tasks or finished_tasks over tasks [@i, @k): payload bytes. */
static size_t ids_len(const struct update_enc *e, size_t i, size_t k,
		      bool finished)
{
	size_t n = 0;

	for (; i < k; i++)
		if (finished ? e->sz[i].is_finished : e->sz[i].is_new)
			n += varint_len(e->u->tasks[i]->id);
	return n;
}

/* Writes what ids_len() sized (@n payload bytes). */
static uint8_t *put_ids(uint8_t *p, const struct update_enc *e, size_t i,
			size_t k, bool finished, size_t n)
{
	if (!n)
		return p;
	p = put_sub(p, finished ? 7 : 6, n);
	for (; i < k; i++)
		if (finished ? e->sz[i].is_finished : e->sz[i].is_new)
			p = put_varint(p, e->u->tasks[i]->id);
	return p;
}

/*
 * Appends one Update record holding tasks [@i, @k) (and, when @first,
 * the stats, workers, warnings and full flag).  Return: 0; -ENOMEM;
 * -EMSGSIZE (the Frame would exceed @max); @b unchanged on error.
 */
static int update_part(weft_wire_buf_t *b, const struct update_enc *e, size_t i,
		       size_t k, bool first, size_t max)
{
	const weft_probe_update_t *u = e->u;
	size_t nnew = ids_len(e, i, k, false), nfin = ids_len(e, i, k, true);
	size_t ulen = first ? e->base : 0, flen;
	uint8_t *p, *start;
	int err;

	for (size_t j = i; j < k; j++)
		ulen += sub_len(2, e->sz[j].body);
	if (nnew)
		ulen += sub_len(6, nnew);
	if (nfin)
		ulen += sub_len(7, nfin);
	flen = sub_len(4, ulen); /* Frame.update */
	if (flen > max)
		return -EMSGSIZE;
	err = weft_wire_buf_reserve(b, 1 + varint_len(flen) + flen);
	if (err)
		return err;
	p = start = b->data + b->len;
	*p++ = WEFT_WIRE_RECORD_TAG;
	p = put_varint(p, flen);
	p = put_sub(p, 4, ulen);
	if (first && u->stats)
		p = put_stats(p, u->stats);
	for (size_t j = i; j < k; j++)
		p = put_task(p, u->tasks[j], &e->sz[j]);
	if (first) {
		for (size_t j = 0; j < u->nworkers; j++)
			p = put_worker(p, &u->workers[j], e->nstolen);
		for (size_t j = 0; j < u->nwarnings; j++)
			p = put_warning(p, &u->warnings[j]);
		p = put_uint(p, 5, u->full);
	}
	p = put_ids(p, e, i, k, false, nnew);
	p = put_ids(p, e, i, k, true, nfin);
	check_written("Update", start, p, 1 + varint_len(flen) + flen);
	b->len += (size_t)(p - start);
	return 0;
}

/* Room kept free in each part for weft_wire_update_recount()'s two
 * varint fields and the frame's own tag and length. */
#define PART_SLACK 64u

/*
 * Splits an update (whose task list makes it larger than @max_record)
 * into several records: the first carries everything but the tasks that
 * do not fit (full stays as it was), the others only tasks, with full
 * unset.
 */
static int update_split(weft_wire_buf_t *b, const struct update_enc *e,
			size_t max_record)
{
	size_t nt = e->u->ntasks, start = b->len, i = 0;
	bool first = true;
	int err = 0;

	if (max_record <= 2 * PART_SLACK)
		return -EMSGSIZE;
	while (!err && (first || i < nt)) {
		size_t used = (first ? e->base : 0) + PART_SLACK, k = i;

		while (k < nt) {
			size_t cost = sub_len(2, e->sz[k].body);

			/* Its id in new_tasks / finished_tasks, if any. */
			if (e->sz[k].is_new)
				cost += 11;
			if (e->sz[k].is_finished)
				cost += 11;
			if (used + cost > max_record)
				break;
			used += cost;
			k++;
		}
		if (k == i && !first) {
			err = -EMSGSIZE; /* one task alone is too big */
			break;
		}
		if (first && e->base + PART_SLACK > max_record) {
			err = -EMSGSIZE; /* too big without any task */
			break;
		}
		err = update_part(b, e, i, k, first, max_record);
		i = k;
		first = false;
	}
	if (err)
		b->len = start;
	return err;
}

/*
 * weft_wire_update_append() - one collector pass as an Update record.
 * @prev_now_ns: the previous update's time: tasks spawned after it are
 * listed as new (0: none are).
 *
 * Return: 0; -ENOMEM; -EMSGSIZE (@b unchanged on error).
 */
int weft_wire_update_append(weft_wire_buf_t *b, const weft_probe_update_t *u,
			     uint64_t prev_now_ns)
{
	return weft_wire_update_append_split(b, u, prev_now_ns, 0);
}

/*
 * weft_wire_update_append_split() - weft_wire_update_append() that
 * splits an update larger than @max_record (0: WEFT_WIRE_MAX_RECORD)
 * into several records, appended back to back: the first carries the
 * stats, workers, warnings, the full flag and the tasks that fit; each
 * of the others only more tasks (full unset).  A reader applies them in
 * order, as one update.
 *
 * Return: 0; -ENOMEM; -EMSGSIZE (one task alone, or everything but the
 * tasks, exceeds @max_record); @b unchanged on error.
 */
int weft_wire_update_append_split(weft_wire_buf_t *b,
				   const weft_probe_update_t *u,
				   uint64_t prev_now_ns, size_t max_record)
{
	struct update_enc e = { .u = u };
	struct task_size *sz = scratch_sizes(u->ntasks);
	size_t nt = u->ntasks;
	int err;

	if (!max_record || max_record > WEFT_WIRE_MAX_RECORD)
		max_record = WEFT_WIRE_MAX_RECORD;
	if (!sz)
		return -ENOMEM;
	for (size_t i = 0; i < nt; i++) {
		const weft_probe_task_t *t = u->tasks[i];

		task_len(t, &sz[i]);
		sz[i].is_new = prev_now_ns && t->spawned_ns > prev_now_ns;
		sz[i].is_finished = t->finished_ns &&
				    t->finished_ns > prev_now_ns;
	}
	e.sz = sz;
	e.nstolen = u->nworkers < 64 ? u->nworkers : 64;
	if (u->stats)
		e.base += sub_len(1, stats_len(u->stats));
	for (size_t i = 0; i < u->nworkers; i++)
		e.base += sub_len(3, worker_len(&u->workers[i], e.nstolen));
	for (size_t i = 0; i < u->nwarnings; i++)
		e.base += sub_len(4, warning_len(&u->warnings[i]));
	e.base += uint_len(5, u->full);

	/*
	 * Whole, it keeps the parts' slack too: weft_wire_update_recount()
	 * may add to it, and readers hold every record to the cap.
	 */
	err = update_part(b, &e, 0, nt, true,
			  max_record > 2 * PART_SLACK ?
				  max_record - PART_SLACK :
				  max_record);
	if (err == -EMSGSIZE && nt)
		err = update_split(b, &e, max_record);
	return err;
}

/* Reads a varint at @p (at most @n bytes).  Return: its length, 0 if bad. */
static size_t varint_get(const uint8_t *p, size_t n, uint64_t *v)
{
	*v = 0;
	for (size_t i = 0; i < n && i < 10; i++) {
		*v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80))
			return i + 1;
	}
	return 0;
}

/*
 * weft_wire_record_len() - the length of the whole record @rec starts
 * with (its header and its Frame), from the header; 0 when @n bytes do
 * not hold one (not a record tag, a bad length, or cut short).
 */
size_t weft_wire_record_len(const uint8_t *rec, size_t n)
{
	uint64_t len;
	size_t k;

	if (n < 2 || rec[0] != WEFT_WIRE_RECORD_TAG)
		return 0;
	k = varint_get(rec + 1, n - 1, &len);
	if (!k || len > n - 1 - k)
		return 0;
	return 1 + k + (size_t)len;
}

/*
 * weft_wire_update_recount() - Update records again, with one
 * subscriber's updates_skipped and events_not_sent set in the first.
 * @rec, @len: whole records from weft_wire_update_append_split(); the
 * first is an Update, the others are copied as they are.
 *
 * The fields are appended to the Update's bytes (protobuf keeps the last
 * value of a repeated scalar field), so the record is re-framed, not
 * re-encoded: the cost is a copy.
 *
 * Return: 0; -EINVAL (not an Update record); -ENOMEM (@b unchanged).
 */
int weft_wire_update_recount(weft_wire_buf_t *b, const uint8_t *rec,
			      size_t len, uint64_t skipped, uint64_t not_sent)
{
	uint8_t extra[2 * 11], hdr[2 * 11];
	uint64_t flen, ulen;
	size_t i = 1, k, nx = 0, nh = 0, end, rest;
	int err;

	if (len < 2 || rec[0] != WEFT_WIRE_RECORD_TAG)
		return -EINVAL;
	k = varint_get(rec + i, len - i, &flen);
	if (!k || flen > len - i - k)
		return -EINVAL;
	i += k;
	end = i + (size_t)flen; /* the first record's end */
	rest = len - end;
	/* Frame.update: field 4, length-delimited. */
	if (i >= end || rec[i] != (4u << 3 | 2u))
		return -EINVAL;
	i++;
	k = varint_get(rec + i, end - i, &ulen);
	if (!k || ulen != end - i - k)
		return -EINVAL;
	i += k;
	if (skipped) {
		extra[nx++] = 8u << 3; /* Update.updates_skipped, varint */
		nx += weft_wire_varint_put(extra + nx, skipped);
	}
	if (not_sent) {
		extra[nx++] = 9u << 3; /* Update.events_not_sent, varint */
		nx += weft_wire_varint_put(extra + nx, not_sent);
	}
	ulen += nx;
	flen = 1 + varint_len(ulen) + ulen;
	hdr[nh++] = WEFT_WIRE_RECORD_TAG;
	nh += weft_wire_varint_put(hdr + nh, flen);
	hdr[nh++] = 4u << 3 | 2u;
	nh += weft_wire_varint_put(hdr + nh, ulen);
	err = weft_wire_buf_reserve(b, nh + (end - i) + nx + rest);
	if (err)
		return err;
	memcpy(b->data + b->len, hdr, nh);
	memcpy(b->data + b->len + nh, rec + i, end - i);
	memcpy(b->data + b->len + nh + (end - i), extra, nx);
	memcpy(b->data + b->len + nh + (end - i) + nx, rec + end, rest);
	b->len += nh + (end - i) + nx + rest;
	return 0;
}

/* ------------------------------------------------------------ hello, header */

static char *read_file_all(const char *path, size_t *len)
{
	size_t cap = 256, n = 0;
	char *buf = malloc(cap);
	FILE *fp = fopen(path, "rb");

	if (!buf || !fp) {
		free(buf);
		if (fp)
			fclose(fp);
		return NULL;
	}
	for (;;) {
		size_t got = fread(buf + n, 1, cap - n - 1, fp);

		n += got;
		if (n < cap - 1)
			break;
		if (cap >= (1u << 20))
			break;
		char *q = realloc(buf, cap * 2);

		if (!q)
			break;
		buf = q;
		cap *= 2;
	}
	fclose(fp);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/*
 * weft_wire_hello_init() - this process's hello.
 * Return: 0; -ENOMEM.
 */
int weft_wire_hello_init(weft_wire_hello_t *h, uint32_t workers,
			  const char *clock, uint64_t start_ns)
{
	struct timespec mono, real;
	size_t len = 0, argc = 0;
	char *comm;

	memset(h, 0, sizeof(*h));
	weft__v1__hello__init(&h->msg);
	comm = read_file_all("/proc/self/comm", &len);
	if (comm) {
		if (len && comm[len - 1] == '\n')
			comm[len - 1] = '\0';
		snprintf(h->name, sizeof(h->name), "%s", comm);
		free(comm);
	}
	if (gethostname(h->host, sizeof(h->host) - 1))
		h->host[0] = '\0';
	snprintf(h->clock, sizeof(h->clock), "%s", clock ? clock : "");
	h->cmdline = read_file_all("/proc/self/cmdline", &len);
	if (h->cmdline) {
		for (size_t i = 0; i < len; i++)
			argc += h->cmdline[i] == '\0';
		h->argv = calloc(argc + 1, sizeof(*h->argv));
		if (!h->argv) {
			free(h->cmdline);
			h->cmdline = NULL;
			return -ENOMEM;
		}
		for (size_t i = 0, a = 0; i < len && a < argc; a++) {
			h->argv[a] = h->cmdline + i;
			i += strlen(h->cmdline + i) + 1;
		}
		h->msg.n_argv = argc;
		h->msg.argv = h->argv;
	}
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	h->msg.protocol_version = WEFT_WIRE_PROTOCOL_VERSION;
	h->msg.pid = (uint32_t)getpid();
	h->msg.process_name = h->name;
	h->msg.workers = workers;
	h->msg.clock = h->clock;
	h->msg.start_ns = start_ns;
	/* The realtime instant of start_ns, from one pair of readings. */
	h->msg.start_realtime_ns = (uint64_t)real.tv_sec * 1000000000u +
				   (uint64_t)real.tv_nsec -
				   ((uint64_t)mono.tv_sec * 1000000000u +
				    (uint64_t)mono.tv_nsec - start_ns);
	h->msg.hostname = h->host;
	return 0;
}

void weft_wire_hello_fini(weft_wire_hello_t *h)
{
	free(h->argv);
	free(h->cmdline);
	h->argv = NULL;
	h->cmdline = NULL;
}

static char *str_or_empty(const char *s)
{
	return (char *)(s ? s : "");
}

#define KIND_NAME(name, value, label, doc) [value] = label,
static const char *const event_kind_names[WEFT_EV_MAX] = { WEFT_EVENT_KINDS(
	KIND_NAME) };
#undef KIND_NAME
#define WARN_NAME(name, value, label) [value] = label,
static const char *const warning_kind_names[WEFT_WARN_MAX] = {
	WEFT_WARNING_KINDS(WARN_NAME)
};
#undef WARN_NAME

/*
 * weft_wire_header_append() - a trace file's first record.
 * Return: 0; -ENOMEM.
 */
int weft_wire_header_append(weft_wire_buf_t *b, const Weft__V1__Hello *hello,
			     uint32_t segment)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__FileHeader h = WEFT__V1__FILE_HEADER__INIT;
	char *ev[WEFT_EV_MAX], *wn[WEFT_WARN_MAX];

	for (unsigned i = 0; i < WEFT_EV_MAX; i++)
		ev[i] = str_or_empty(event_kind_names[i]);
	for (unsigned i = 0; i < WEFT_WARN_MAX; i++)
		wn[i] = str_or_empty(warning_kind_names[i]);
	h.magic = (char *)WEFT_TRACE_MAGIC;
	h.format_version = WEFT_TRACE_FORMAT_VERSION;
	h.hello = (Weft__V1__Hello *)hello;
	h.segment = segment;
	h.n_event_kinds = WEFT_EV_MAX;
	h.event_kinds = ev;
	h.n_warning_kinds = WEFT_WARN_MAX;
	h.warning_kinds = wn;
	f.body_case = WEFT__V1__FRAME__BODY_HEADER;
	f.header = &h;
	return weft_wire_record_append(b, &f);
}
