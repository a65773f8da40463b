/* SPDX-License-Identifier: MIT */
/*
 * Event batches, and a collector pass's events grouped into them
 * (weft/wire.h has the model).
 *
 * Event batches are columns of varints, one batch per emitting thread, so
 * that what repeats from one event to the next (the task, a zero argument,
 * a few microseconds of time) costs about a byte.  Decoding checks every
 * column against the count before touching it: a batch from outside can
 * be short, long or inconsistent and is then refused whole (-EBADMSG).
 *
 * They are encoded here by hand, byte for byte what protobuf-c writes
 * (test_wire checks); protobuf-c decodes them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "weft/wire.h"
#include "wire_private.h"

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
 * The raw decoder's readers: a varint of at most 10 bytes (protobuf-c
 * refuses a longer one, or one cut by its field's end), and one for a
 * uint32 field, taken only when it holds its value whole (protobuf-c
 * keeps 32 bits of a longer one).  They advance *@p and return false
 * when the value is not one to take.
 */
static inline bool raw_u64(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	const uint8_t *q = *p;
	uint64_t x = 0;

	if (q < end && *q < 0x80) {
		*v = *q;
		*p = q + 1;
		return true;
	}
	for (unsigned shift = 0; shift < 70 && q < end; shift += 7) {
		uint8_t b = *q++;

		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			*p = q;
			return true;
		}
	}
	return false;
}

static inline bool raw_u32(const uint8_t **p, const uint8_t *end, uint32_t *v)
{
	const uint8_t *q = *p;
	uint64_t x;

	if (q < end && *q < 0x80) {
		*v = *q;
		*p = q + 1;
		return true;
	}
	if (!raw_u64(&q, end, &x) || q - *p > 5 || x > UINT32_MAX)
		return false;
	*v = (uint32_t)x;
	*p = q;
	return true;
}

/*
 * weft_wire_batch_decode_raw() - the events of an EventBatch from its
 * bytes, or -EAGAIN (weft/wire.h).  Refused unless it is sure: every
 * field known, once, in order, with its wire type (protobuf-c would take
 * it), every column read to its last byte and no further, with the
 * checks of weft_wire_batch_decode() (which takes the same bytes the
 * same way).  The caller's slow path then finds whatever is wrong.
 */
int weft_wire_batch_decode_raw(const uint8_t *p, size_t len,
				Weft__V1__EventBatch *m, weft_event_t *out,
				size_t cap)
{
	const uint8_t *end = p + len, *col[12] = { 0 }, *col_end[12] = { 0 };
	uint64_t ts, prev_task, v;
	unsigned last = 0;
	uint32_t flag_at = 0;
	bool flag_next;
	size_t n;

	weft__v1__event_batch__init(m);
	while (p < end) {
		unsigned tag = *p++, field = tag >> 3;
		uint32_t v32;

		if (tag & 0x80 || field <= last || field > 11)
			return -EAGAIN;
		last = field;
		if (field >= 5) {
			if ((tag & 7) != WT_LEN || !raw_u32(&p, end, &v32) ||
			    v32 > (size_t)(end - p))
				return -EAGAIN;
			col[field] = p;
			col_end[field] = p + v32;
			p += v32;
			continue;
		}
		if ((tag & 7) != WT_VARINT)
			return -EAGAIN;
		if (field <= 2) {
			if (!raw_u32(&p, end, &v32))
				return -EAGAIN;
			if (field == 1)
				m->worker = v32;
			else
				m->count = v32;
		} else {
			if (!raw_u64(&p, end, &v))
				return -EAGAIN;
			if (field == 3)
				m->base_ts = v;
			else
				m->base_task = v;
		}
	}
	n = m->count;
	if (n > cap || n > INT32_MAX || m->worker > UINT16_MAX)
		return -EAGAIN;
	ts = m->base_ts;
	prev_task = m->base_task;
	/* The next flag's index, read ahead (taken when its event comes). */
	flag_next = col[10] < col_end[10];
	if (flag_next && !raw_u32(&col[10], col_end[10], &flag_at))
		return -EAGAIN;
	for (size_t k = 0; k < n; k++) {
		weft_event_t *e = &out[k];
		uint32_t h, a2, fl;
		uint64_t a1 = 0, d;

		if (!raw_u32(&col[5], col_end[5], &h) || h >> 2 > UINT8_MAX ||
		    !raw_u64(&col[6], col_end[6], &d) ||
		    !raw_u64(&col[7], col_end[7], &v))
			return -EAGAIN;
		ts += (uint64_t)unzigzag(d);
		if (v)
			prev_task += (uint64_t)unzigzag(v - 1);
		e->ts = ts;
		e->task = v ? prev_task : 0;
		e->kind = (uint8_t)(h >> 2);
		e->worker = (uint16_t)m->worker;
		if (h & 2) {
			if (!raw_u64(&col[8], col_end[8], &a1))
				return -EAGAIN;
			if (a1_is_task(e->kind))
				a1 = e->task + (uint64_t)unzigzag(a1);
			if (!a1)
				return -EAGAIN;
		}
		e->a1 = a1;
		a2 = 0;
		if ((h & 1) && (!raw_u32(&col[9], col_end[9], &a2) || !a2))
			return -EAGAIN;
		e->a2 = a2;
		e->flags = 0;
		if (flag_next && flag_at == k) {
			if (!raw_u32(&col[11], col_end[11], &fl) || !fl ||
			    fl > UINT8_MAX)
				return -EAGAIN;
			e->flags = (uint8_t)fl;
			flag_next = col[10] < col_end[10];
			if (flag_next &&
			    !raw_u32(&col[10], col_end[10], &flag_at))
				return -EAGAIN;
		}
	}
	/* Every column read whole: counts as weft_wire_batch_decode()
	 * wants them, and every varint in them one protobuf-c takes. */
	for (unsigned f = 5; f <= 11; f++)
		if (col[f] != col_end[f])
			return -EAGAIN;
	if (flag_next)
		return -EAGAIN;
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
 * A record's head at @start: its tag, its length and the Frame.events
 * field's head, for an EventBatch of @blen bytes.  Returns where the
 * body goes, or NULL if the record would pass WEFT_WIRE_MAX_RECORD.
 */
static uint8_t *record_head(uint8_t *start, size_t blen)
{
	size_t flen = sub_len(5, blen); /* Frame.events */
	uint8_t *p = start;

	if (flen > WEFT_WIRE_MAX_RECORD)
		return NULL;
	*p++ = WEFT_WIRE_RECORD_TAG;
	p = put_varint(p, flen);
	return put_sub(p, 5, blen);
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
	size_t max, blen, hlen;
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
	p = record_head(start, blen);
	if (!p)
		return -EMSGSIZE;
	if (p != body)
		memmove(p, body, blen);
	b->len += (size_t)(p - start) + blen;
	return 0;
}

/*
 * weft_wire_batch_encode() and weft_wire_batch_append() in one sweep, for
 * a pass's events: each value goes as a varint straight into its
 * column's room in @b (the longest it could be, 5 or 10 bytes an event),
 * not into the arrays of a Weft__V1__EventBatch read back afterwards; the
 * header then goes in front and the columns slide back over the room
 * they did not need.  The same bytes (test_wire checks), for about half
 * the instructions an event (callgrind, yield_many).
 *
 * Return: events taken (>= 1 when @n > 0); -ENOMEM; -EMSGSIZE (@b
 * unchanged on error).
 */
#define NCOL 7 /* fields 5 .. 11: head, ts_delta, task, a1, a2, flags */

static int batch_write(weft_wire_buf_t *b, const weft_event_t *ev, size_t n)
{
	static const unsigned width[NCOL] = { 5, 10, 10, 10, 5, 5, 5 };
	uint8_t *c[NCOL], *c0[NCOL], *start, *p;
	uint64_t prev_ts, prev_task = 0, base_task = 0;
	uint16_t worker;
	size_t k, room, blen, len[NCOL];
	int err;

	if (n == 0)
		return 0;
	if (n > WEFT_WIRE_BATCH_MAX)
		n = WEFT_WIRE_BATCH_MAX;
	/* As weft_wire_batch_encode(): over the @n, not the run only. */
	for (k = 0; k < n; k++)
		if (ev[k].task) {
			base_task = ev[k].task;
			break;
		}
	/*
	 * In front of the columns' room, the most the record's prefix
	 * (tag, Frame length, Frame.events tag, EventBatch length), the
	 * four varint fields and the columns' prefixes can take: each
	 * column then lands at or before where it was written.
	 */
	room = 1 + 10 + 1 + 10 + 4 * 11 + NCOL * 11;
	err = weft_wire_buf_reserve(b, room + 50 * n);
	if (err)
		return err;
	start = b->data + b->len;
	c[0] = c0[0] = start + room;
	for (unsigned i = 1; i < NCOL; i++)
		c[i] = c0[i] = c0[i - 1] + width[i - 1] * n;
	worker = ev[0].worker;
	prev_ts = ev[0].ts;
	prev_task = base_task;
	for (k = 0; k < n; k++) {
		const weft_event_t *e = &ev[k];
		uint64_t a1 = e->a1;

		if (e->worker != worker)
			break;
		if (e->task) {
			int64_t d = (int64_t)(e->task - prev_task);

			if (d == INT64_MIN)
				break;
			c[2] = put_varint(c[2], zigzag(d) + 1);
			prev_task = e->task;
		} else {
			*c[2]++ = 0;
		}
		if (a1_is_task(e->kind) && a1)
			a1 = zigzag((int64_t)(a1 - e->task));
		c[0] = put_varint(c[0], (uint32_t)e->kind << 2 |
						(e->a1 != 0) << 1 | (e->a2 != 0));
		c[1] = put_varint(c[1], zigzag((int64_t)(e->ts - prev_ts)));
		prev_ts = e->ts;
		if (e->a1)
			c[3] = put_varint(c[3], a1);
		if (e->a2)
			c[4] = put_varint(c[4], e->a2);
		if (e->flags) {
			c[5] = put_varint(c[5], (uint32_t)k);
			c[6] = put_varint(c[6], e->flags);
		}
	}
	blen = uint_len(1, worker) + uint_len(2, k) + uint_len(3, ev[0].ts) +
	       uint_len(4, base_task);
	for (unsigned i = 0; i < NCOL; i++) {
		len[i] = (size_t)(c[i] - c0[i]);
		if (len[i])
			blen += sub_len(5 + i, len[i]);
	}
	p = record_head(start, blen);
	if (!p)
		return -EMSGSIZE;
	p = put_uint(p, 1, worker);
	p = put_uint(p, 2, k);
	p = put_uint(p, 3, ev[0].ts);
	p = put_uint(p, 4, base_task);
	for (unsigned i = 0; i < NCOL; i++) {
		if (!len[i])
			continue;
		p = put_sub(p, 5 + i, len[i]);
		memmove(p, c0[i], len[i]);
		p += len[i];
	}
	b->len += (size_t)(p - start);
	return (int)k;
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

	if (!g)
		return -ENOMEM;
	while (n) {
		int k = batch_write(b, g, n);

		if (k <= 0)
			return k < 0 ? k : -ENOMEM;
		g += k;
		n -= (size_t)k;
	}
	return 0;
}
