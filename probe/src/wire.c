/* SPDX-License-Identifier: MIT */
/*
 * Records, the streaming record decoder and event batches (wire_internal.h
 * has the model).
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

#include "wire_internal.h"

/* ------------------------------------------------------------ buffers */

void weft__wire_buf_fini(weft_wire_buf_t *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int weft__wire_buf_reserve(weft_wire_buf_t *b, size_t more)
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

size_t weft__wire_varint_put(uint8_t *out, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

size_t weft__wire_record_size(const Weft__V1__Frame *f)
{
	size_t len = protobuf_c_message_get_packed_size(&f->base);

	return 1 + varint_len(len) + len;
}

/*
 * weft__wire_record_pack() - one record into @out.
 * Return: bytes written; -ENOSPC if @cap is too small; -EMSGSIZE if the
 * frame exceeds WEFT_WIRE_MAX_RECORD.
 */
int weft__wire_record_pack(const Weft__V1__Frame *f, uint8_t *out, size_t cap)
{
	size_t len = protobuf_c_message_get_packed_size(&f->base), n;

	if (len > WEFT_WIRE_MAX_RECORD)
		return -EMSGSIZE;
	if (1 + varint_len(len) + len > cap)
		return -ENOSPC;
	out[0] = WEFT_WIRE_RECORD_TAG;
	n = 1 + weft__wire_varint_put(out + 1, len);
	n += protobuf_c_message_pack(&f->base, out + n);
	return (int)n;
}

/* Return: 0; -ENOMEM; -EMSGSIZE (buffer unchanged either way). */
int weft__wire_record_append(weft_wire_buf_t *b, const Weft__V1__Frame *f)
{
	size_t len = protobuf_c_message_get_packed_size(&f->base);
	size_t need = 1 + varint_len(len) + len;
	int err;

	if (len > WEFT_WIRE_MAX_RECORD)
		return -EMSGSIZE;
	err = weft__wire_buf_reserve(b, need);
	if (err)
		return err;
	err = weft__wire_record_pack(f, b->data + b->len, need);
	if (err < 0)
		return err;
	b->len += (size_t)err;
	return 0;
}

/* ------------------------------------------------------------ decoder */

void weft__wire_decoder_init(weft_wire_decoder_t *d, size_t max_record)
{
	memset(d, 0, sizeof(*d));
	d->max_record = max_record ? max_record : WEFT_WIRE_MAX_RECORD;
}

void weft__wire_decoder_fini(weft_wire_decoder_t *d)
{
	free(d->body);
	d->body = NULL;
}

void weft__wire_frame_free(Weft__V1__Frame *f)
{
	if (f)
		weft__v1__frame__free_unpacked(f, NULL);
}

bool weft__wire_decoder_mid_record(const weft_wire_decoder_t *d)
{
	return d->in_body || d->hdr_len;
}

const char *weft__wire_strerror(int err)
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
 * weft__wire_decoder_feed() - give the decoder stream bytes.
 * @data, @len: the bytes; @used: how many it took (all, unless a frame
 * ended first); @frame: receives a whole frame (free it with
 * weft__wire_frame_free()).
 *
 * Takes no bytes past the end of a frame, so the caller feeds the rest
 * next.  A record whose bytes are all in @data is decoded in place.
 *
 * Return: WEFT_WIRE_FRAME, WEFT_WIRE_NEED_MORE, or an error (see
 * wire_internal.h), after which every call returns the same error.
 */
int weft__wire_decoder_feed(weft_wire_decoder_t *d, const void *data,
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

void weft__wire_batch_init(weft_wire_batch_t *b)
{
	memset(b, 0, sizeof(*b));
	weft__v1__event_batch__init(&b->msg);
}

void weft__wire_batch_fini(weft_wire_batch_t *b)
{
	free(b->head);
	free(b->a2);
	free(b->flag_index);
	free(b->flag_value);
	free(b->ts_delta);
	free(b->task);
	free(b->a1);
	weft__wire_batch_init(b);
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
 * weft__wire_batch_encode() - put the first events of @ev into @b->msg.
 *
 * Takes the leading run of events from one emitting thread (one worker
 * value), at most WEFT_WIRE_BATCH_MAX; the caller loops on the rest.  A
 * task id exactly 2^63 away from the previous one cannot be delta coded
 * and also ends the batch.  @b->msg points into @b until the next call.
 *
 * Return: events taken (>= 1 when @n > 0); 0 when @n is 0; -ENOMEM.
 */
int weft__wire_batch_encode(weft_wire_batch_t *b, const weft_event_t *ev,
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
 * weft__wire_batch_decode() - rebuild the events of one batch.
 * @out, @cap: room for at least @m->count events.
 *
 * Return: the number of events; -ENOSPC if @cap is too small; -EBADMSG
 * if the columns do not agree with each other.
 */
int weft__wire_batch_decode(const Weft__V1__EventBatch *m, weft_event_t *out,
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

/* ------------------------------------------------------------ a pass's events */

void weft__wire_events_init(weft_wire_events_t *e)
{
	memset(e, 0, sizeof(*e));
	weft__wire_batch_init(&e->batch);
}

void weft__wire_events_fini(weft_wire_events_t *e)
{
	weft__wire_batch_fini(&e->batch);
	free(e->scratch);
	free(e->keys);
	weft__wire_events_init(e);
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
 * weft__wire_events_group() - @ev regrouped per emitting thread, each
 * thread's events in their order (a stable sort by worker).
 *
 * Return: @ev itself when it holds one thread's events, else @e's scratch
 * copy (valid until the next call); NULL for no memory.
 */
const weft_event_t *weft__wire_events_group(weft_wire_events_t *e,
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
 * weft__wire_events_append() - a collector pass's events as EventBatch
 * records, one run per emitting thread.
 *
 * Return: 0; -ENOMEM; -EMSGSIZE.  On error @b holds the whole records
 * appended before it.
 */
int weft__wire_events_append(weft_wire_events_t *e, weft_wire_buf_t *b,
			     const weft_event_t *ev, size_t n)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	const weft_event_t *g = weft__wire_events_group(e, ev, n);
	int err;

	if (!g)
		return -ENOMEM;
	f.body_case = WEFT__V1__FRAME__BODY_EVENTS;
	f.events = &e->batch.msg;
	while (n) {
		int k = weft__wire_batch_encode(&e->batch, g, n);

		if (k <= 0)
			return -ENOMEM;
		err = weft__wire_record_append(b, &f);
		if (err)
			return err;
		g += k;
		n -= (size_t)k;
	}
	return 0;
}

/* ------------------------------------------------------------ updates */

static char *str_or_empty(const char *s)
{
	return (char *)(s ? s : "");
}

static void hist_set(Weft__V1__Histogram *m, const weft_hist_t *h)
{
	weft__v1__histogram__init(m);
	m->n_buckets = WEFT_HIST_BUCKETS;
	m->buckets = (uint32_t *)h->buckets;
	m->count = h->count;
	m->sum_ns = h->sum_ns;
	m->max_ns = h->max_ns;
	m->outliers = h->outliers;
}

/* Everything one Update message points to, freed in one go. */
struct update_parts {
	Weft__V1__Task *tasks;
	Weft__V1__Task **task_ptrs;
	Weft__V1__Histogram *hists;
	Weft__V1__Worker *workers;
	Weft__V1__Worker **worker_ptrs;
	Weft__V1__WorkerCounters *counters;
	Weft__V1__Warning *warnings;
	Weft__V1__Warning **warning_ptrs;
	uint64_t *new_ids, *finished_ids;
};

static void update_parts_free(struct update_parts *p)
{
	free(p->tasks);
	free(p->task_ptrs);
	free(p->hists);
	free(p->workers);
	free(p->worker_ptrs);
	free(p->counters);
	free(p->warnings);
	free(p->warning_ptrs);
	free(p->new_ids);
	free(p->finished_ids);
}

/*
 * The message arrays of an Update, kept per thread and grown, never
 * shrunk, between calls: calloc'ed and freed for every Update they were
 * megabytes that the collector's arena gave back to the kernel and faulted
 * in again, a fifth of its time under a busy service (perf).  Every
 * element used is initialised by task_set() and the like, so no zeroing.
 * Freed when the thread exits.
 */
struct update_parts_cache {
	struct update_parts p;
	size_t nt, nw, nx;
};

static pthread_key_t parts_key;
static pthread_once_t parts_once = PTHREAD_ONCE_INIT;
static _Thread_local struct update_parts_cache parts_tls;

static void parts_cache_free(void *arg)
{
	struct update_parts_cache *c = arg;

	update_parts_free(&c->p);
	memset(c, 0, sizeof(*c));
}

static void parts_key_create(void)
{
	(void)pthread_key_create(&parts_key, parts_cache_free);
}

static struct update_parts_cache *parts_cache(void)
{
	pthread_once(&parts_once, parts_key_create);
	if (!pthread_getspecific(parts_key) &&
	    pthread_setspecific(parts_key, &parts_tls))
		return NULL;
	return &parts_tls;
}

#define PARTS_GROW(field, n)                                                   \
	do {                                                                   \
		void *np_ = realloc(c->p.field, (n) * sizeof(*c->p.field));    \
		if (!np_)                                                      \
			return -ENOMEM;                                        \
		c->p.field = np_;                                              \
	} while (0)

static int parts_reserve(struct update_parts_cache *c, size_t nt, size_t nw,
			 size_t nx)
{
	if (nt + 1 > c->nt) {
		size_t n = nt + 1 + nt / 2;

		PARTS_GROW(tasks, n);
		PARTS_GROW(task_ptrs, n);
		PARTS_GROW(hists, 2 * n);
		PARTS_GROW(new_ids, n);
		PARTS_GROW(finished_ids, n);
		c->nt = n;
	}
	if (nw + 1 > c->nw) {
		size_t n = nw + 1;

		PARTS_GROW(workers, n);
		PARTS_GROW(worker_ptrs, n);
		PARTS_GROW(counters, n);
		c->nw = n;
	}
	if (nx + 1 > c->nx) {
		size_t n = nx + 1 + nx / 2;

		PARTS_GROW(warnings, n);
		PARTS_GROW(warning_ptrs, n);
		c->nx = n;
	}
	return 0;
}

static void task_set(Weft__V1__Task *m, Weft__V1__Histogram *hists,
		     const weft_probe_task_t *t)
{
	weft__v1__task__init(m);
	m->id = t->id;
	m->parent = t->parent;
	m->name = str_or_empty(t->name);
	m->file = str_or_empty(t->file);
	m->line = t->line;
	m->state_size = t->state_size;
	m->kind = t->kind;
	m->state = t->state;
	m->last_worker = t->last_worker;
	m->status = t->status;
	m->spawned_ns = t->spawned_ns;
	m->finished_ns = t->finished_ns;
	m->polls = t->polls;
	m->busy_ns = t->busy_ns;
	m->scheduled_ns = t->scheduled_ns;
	m->idle_ns = t->idle_ns;
	m->wakes = t->wakes;
	m->self_wakes = t->self_wakes;
	m->waker_clones = t->waker_clones;
	m->waker_drops = t->waker_drops;
	m->max_poll_ns = t->max_poll_ns;
	m->warnings = t->warnings;
	m->locks_held = t->locks_held;
	if (t->poll_hist) {
		hist_set(&hists[0], t->poll_hist);
		m->poll_hist = &hists[0];
	}
	if (t->sched_hist) {
		hist_set(&hists[1], t->sched_hist);
		m->sched_hist = &hists[1];
	}
}

static void worker_set(Weft__V1__Worker *m, Weft__V1__WorkerCounters *c,
		       const weft_probe_worker_t *w, size_t nworkers)
{
	const weft_worker_metrics_t *k = &w->counters;

	weft__v1__worker__init(m);
	weft__v1__worker_counters__init(c);
	m->index = w->index;
	m->state = w->state;
	m->current_task = w->current_task;
	m->poll_started_ns = w->poll_started_ns;
	c->polls = k->polls;
	c->steals = k->steals;
	c->steal_ops = k->steal_ops;
	c->parks = k->parks;
	c->unparks = k->unparks;
	c->noop_wakes = k->noop_wakes;
	c->local_schedules = k->local_schedules;
	c->lifo_schedules = k->lifo_schedules;
	c->global_schedules = k->global_schedules;
	c->remote_schedules = k->remote_schedules;
	c->overflows = k->overflows;
	c->spawned = k->spawned;
	c->completed = k->completed;
	c->busy_ns = k->busy_ns;
	c->forced_yields = k->forced_yields;
	c->local_queue_depth = k->local_queue_depth;
	m->counters = c;
	m->polls_per_s = w->polls_per_s;
	m->steals_per_s = w->steals_per_s;
	m->steal_rate = w->steal_rate;
	m->busy_ratio = w->busy_ratio;
	m->mean_poll_ns = w->mean_poll_ns;
	m->max_poll_ns = w->max_poll_ns;
	m->queue_depth = w->queue_depth;
	m->n_stolen_from = nworkers < 64 ? nworkers : 64;
	m->stolen_from = (uint64_t *)w->stolen_from;
}

static void warning_set(Weft__V1__Warning *m, const weft_probe_warning_t *w)
{
	weft__v1__warning__init(m);
	m->seq = w->seq;
	m->kind = w->kind;
	m->worker = w->worker;
	m->task = w->task;
	m->task_name = str_or_empty(w->task_name);
	m->file = str_or_empty(w->file);
	m->line = w->line;
	m->at_ns = w->at_ns;
	m->value_ns = w->value_ns;
	m->detail = (char *)w->detail;
}

/* Appends one Update record for @m; restores @b's length on error. */
static int update_record(weft_wire_buf_t *b, Weft__V1__Update *m,
			 size_t max_record)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	size_t len;

	f.body_case = WEFT__V1__FRAME__BODY_UPDATE;
	f.update = m;
	len = protobuf_c_message_get_packed_size(&f.base);
	if (len > max_record)
		return -EMSGSIZE;
	return weft__wire_record_append(b, &f);
}

/* Room kept free in each part for weft__wire_update_recount()'s two
 * varint fields and the frame's own tag and length. */
#define PART_SLACK 64u

/*
 * Splits @m (whose task list makes it larger than @max_record) into
 * several records: the first carries everything but the tasks that do
 * not fit (full stays as it was), the others only tasks, with full unset.
 */
static int update_split(weft_wire_buf_t *b, Weft__V1__Update *m,
			size_t max_record)
{
	Weft__V1__Task **tasks = m->tasks;
	uint64_t *new_ids = m->new_tasks, *fin_ids = m->finished_tasks;
	size_t nt = m->n_tasks, nnew = m->n_new_tasks,
	       nfin = m->n_finished_tasks;
	size_t start = b->len, i = 0, inew = 0, ifin = 0, base;
	bool first = true;
	int err = 0;

	if (max_record <= 2 * PART_SLACK)
		return -EMSGSIZE;
	m->n_tasks = m->n_new_tasks = m->n_finished_tasks = 0;
	base = protobuf_c_message_get_packed_size(&m->base);
	while (!err && (first || i < nt)) {
		size_t used = (first ? base : 0) + PART_SLACK, k = i;
		size_t n0 = inew, f0 = ifin;

		while (k < nt) {
			size_t sz = protobuf_c_message_get_packed_size(
				&tasks[k]->base);
			size_t cost = 1 + varint_len(sz) + sz;

			/* Its ids in new_tasks / finished_tasks, if any
			 * (those lists follow the task order). */
			if (inew < nnew && new_ids[inew] == tasks[k]->id)
				cost += 11;
			if (ifin < nfin && fin_ids[ifin] == tasks[k]->id)
				cost += 11;
			if (used + cost > max_record)
				break;
			used += cost;
			if (inew < nnew && new_ids[inew] == tasks[k]->id)
				inew++;
			if (ifin < nfin && fin_ids[ifin] == tasks[k]->id)
				ifin++;
			k++;
		}
		if (k == i && !first) {
			err = -EMSGSIZE; /* one task alone is too big */
			break;
		}
		if (first && base + PART_SLACK > max_record) {
			err = -EMSGSIZE; /* too big without any task */
			break;
		}
		{
			Weft__V1__Update part = WEFT__V1__UPDATE__INIT;

			if (first)
				part = *m;
			part.tasks = tasks + i;
			part.n_tasks = k - i;
			part.new_tasks = new_ids + n0;
			part.n_new_tasks = inew - n0;
			part.finished_tasks = fin_ids + f0;
			part.n_finished_tasks = ifin - f0;
			err = update_record(b, &part, max_record);
		}
		i = k;
		first = false;
	}
	m->tasks = tasks;
	m->n_tasks = nt;
	m->new_tasks = new_ids;
	m->n_new_tasks = nnew;
	m->finished_tasks = fin_ids;
	m->n_finished_tasks = nfin;
	if (err)
		b->len = start;
	return err;
}

/*
 * weft__wire_update_append() - one collector pass as an Update record.
 * @prev_now_ns: the previous update's time: tasks spawned after it are
 * listed as new (0: none are).
 *
 * Return: 0; -ENOMEM; -EMSGSIZE (@b unchanged on error).
 */
int weft__wire_update_append(weft_wire_buf_t *b, const weft_probe_update_t *u,
			     uint64_t prev_now_ns)
{
	return weft__wire_update_append_split(b, u, prev_now_ns, 0);
}

/*
 * weft__wire_update_append_split() - weft__wire_update_append() that
 * splits an update larger than @max_record (0: WEFT_WIRE_MAX_RECORD)
 * into several records, appended back to back: the first carries the
 * stats, workers, warnings, the full flag and the tasks that fit; each
 * of the others only more tasks (full unset).  A reader applies them in
 * order, as one update.
 *
 * Return: 0; -ENOMEM; -EMSGSIZE (one task alone, or everything but the
 * tasks, exceeds @max_record); @b unchanged on error.
 */
int weft__wire_update_append_split(weft_wire_buf_t *b,
				   const weft_probe_update_t *u,
				   uint64_t prev_now_ns, size_t max_record)
{
	Weft__V1__Update m = WEFT__V1__UPDATE__INIT;
	Weft__V1__Stats st = WEFT__V1__STATS__INIT;
	struct update_parts_cache *c = parts_cache();
	size_t nt = u->ntasks, nw = u->nworkers, nx = u->nwarnings;
	struct update_parts p;
	int err = -ENOMEM;

	if (!max_record || max_record > WEFT_WIRE_MAX_RECORD)
		max_record = WEFT_WIRE_MAX_RECORD;
	if (!c || parts_reserve(c, nt, nw, nx))
		return -ENOMEM;
	p = c->p;

	if (u->stats) {
		const weft_probe_stats_t *s = u->stats;

		st.now_ns = s->now_ns;
		st.start_ns = s->start_ns;
		st.workers = s->workers;
		st.live_tasks = s->live_tasks;
		st.spawned_tasks = s->spawned_tasks;
		st.global_queue_depth = s->global_queue_depth;
		st.events = s->events;
		st.events_dropped = s->events_dropped;
		st.warnings = s->warnings;
		st.events_per_s = s->events_per_s;
		st.polls_per_s = s->polls_per_s;
		st.steals_per_s = s->steals_per_s;
		st.clock = str_or_empty(s->clock);
		m.stats = &st;
	}
	for (size_t i = 0; i < nt; i++) {
		const weft_probe_task_t *t = u->tasks[i];

		task_set(&p.tasks[i], &p.hists[2 * i], t);
		p.task_ptrs[i] = &p.tasks[i];
		if (prev_now_ns && t->spawned_ns > prev_now_ns)
			p.new_ids[m.n_new_tasks++] = t->id;
		if (t->finished_ns && t->finished_ns > prev_now_ns)
			p.finished_ids[m.n_finished_tasks++] = t->id;
	}
	m.n_tasks = nt;
	m.tasks = p.task_ptrs;
	m.new_tasks = p.new_ids;
	m.finished_tasks = p.finished_ids;
	for (size_t i = 0; i < nw; i++) {
		worker_set(&p.workers[i], &p.counters[i], &u->workers[i], nw);
		p.worker_ptrs[i] = &p.workers[i];
	}
	m.n_workers = nw;
	m.workers = p.worker_ptrs;
	for (size_t i = 0; i < nx; i++) {
		warning_set(&p.warnings[i], &u->warnings[i]);
		p.warning_ptrs[i] = &p.warnings[i];
	}
	m.n_warnings = nx;
	m.warnings = p.warning_ptrs;
	m.full = u->full;

	/*
	 * Whole, it keeps the parts' slack too: weft__wire_update_recount()
	 * may add to it, and readers hold every record to the cap.
	 */
	err = update_record(b, &m,
			    max_record > 2 * PART_SLACK ? max_record - PART_SLACK
							: max_record);
	if (err == -EMSGSIZE && nt)
		err = update_split(b, &m, max_record);
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
 * weft__wire_update_recount() - Update records again, with one
 * subscriber's updates_skipped and events_not_sent set in the first.
 * @rec, @len: whole records from weft__wire_update_append_split(); the
 * first is an Update, the others are copied as they are.
 *
 * The fields are appended to the Update's bytes (protobuf keeps the last
 * value of a repeated scalar field), so the record is re-framed, not
 * re-encoded: the cost is a copy.
 *
 * Return: 0; -EINVAL (not an Update record); -ENOMEM (@b unchanged).
 */
int weft__wire_update_recount(weft_wire_buf_t *b, const uint8_t *rec,
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
		nx += weft__wire_varint_put(extra + nx, skipped);
	}
	if (not_sent) {
		extra[nx++] = 9u << 3; /* Update.events_not_sent, varint */
		nx += weft__wire_varint_put(extra + nx, not_sent);
	}
	ulen += nx;
	flen = 1 + varint_len(ulen) + ulen;
	hdr[nh++] = WEFT_WIRE_RECORD_TAG;
	nh += weft__wire_varint_put(hdr + nh, flen);
	hdr[nh++] = 4u << 3 | 2u;
	nh += weft__wire_varint_put(hdr + nh, ulen);
	err = weft__wire_buf_reserve(b, nh + (end - i) + nx + rest);
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
 * weft__wire_hello_init() - this process's hello.
 * Return: 0; -ENOMEM.
 */
int weft__wire_hello_init(weft_wire_hello_t *h, uint32_t workers,
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

void weft__wire_hello_fini(weft_wire_hello_t *h)
{
	free(h->argv);
	free(h->cmdline);
	h->argv = NULL;
	h->cmdline = NULL;
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
 * weft__wire_header_append() - a trace file's first record.
 * Return: 0; -ENOMEM.
 */
int weft__wire_header_append(weft_wire_buf_t *b, const Weft__V1__Hello *hello,
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
	return weft__wire_record_append(b, &f);
}
