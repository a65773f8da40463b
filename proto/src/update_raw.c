/* SPDX-License-Identifier: MIT */
/*
 * Updates read from their bytes (issue 21): an Update's task records are
 * about half of a trace file, and protobuf-c unpacks each into a dozen
 * allocations (the record, its strings, its histograms and their
 * buckets, its waits).  weft_wire_task_decode_raw() reads one record into
 * storage kept from one record to the next, as the same
 * Weft__V1__Task protobuf-c would make; weft_wire_update_split_raw()
 * checks an Update's tasks that way and hands the rest of its fields to
 * protobuf-c (small: stats, workers, warnings, resources).
 *
 * Strictness, as weft_wire_batch_decode_raw()'s: only bytes protobuf-c
 * would unpack, and unpack to the same values, are taken.  Anything this
 * code does not know or is not sure of (an unknown field, a known one of
 * another wire type, a histogram twice, which protobuf-c would merge, a
 * varint over ten bytes or over its field's width, a length over what is
 * left, a tag protobuf-c would read otherwise) is refused, and the caller
 * unpacks the Frame with protobuf-c as before, so every error and skip
 * stays as it was.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "weft/wire.h"

#define REFUSED (-EAGAIN)

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/*
 * A varint as protobuf-c reads one (at most 10 bytes), over 64 bits
 * refused (protobuf-c would drop the top bits).  Return: its bytes, 0
 * when refused.
 */
static inline size_t rd_varint(const uint8_t *p, const uint8_t *end,
			       uint64_t *v)
{
	size_t n = (size_t)(end - p);
	uint64_t x = 0;

	if (n && p[0] < 0x80) {
		*v = p[0];
		return 1;
	}
	if (n > 10)
		n = 10;
	for (size_t i = 0; i < n; i++) {
		x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			if (i == 9 && p[i] > 1)
				return 0;
			*v = x;
			return i + 1;
		}
	}
	return 0;
}

/*
 * A field's tag: protobuf-c reads at most 5 bytes, into 32 bits of field
 * number; taken only when that is the value whole (under 2^32), field
 * numbers from 1.
 */
static inline size_t rd_tag(const uint8_t *p, const uint8_t *end,
			    uint32_t *field, unsigned *wt)
{
	uint64_t v;
	size_t k;

	if (p < end && p[0] < 0x80) {
		*field = p[0] >> 3;
		*wt = p[0] & 7;
		return *field ? 1 : 0;
	}
	k = rd_varint(p, end, &v);
	if (!k || k > 5 || v > UINT32_MAX || !(v >> 3))
		return 0;
	*field = (uint32_t)(v >> 3);
	*wt = (unsigned)(v & 7);
	return k;
}

/*
 * A length-delimited value: protobuf-c reads the length in at most 5
 * bytes, and refuses one over INT_MAX or over what is left.  Return: the
 * prefix's bytes (the value is *@n bytes after it), 0 when refused.
 */
static inline size_t rd_len(const uint8_t *p, const uint8_t *end, size_t *n)
{
	uint64_t v;
	size_t k = rd_varint(p, end, &v);

	if (!k || k > 5 || v > 0x7fffffffu || v > (uint64_t)(end - p - k))
		return 0;
	*n = (size_t)v;
	return k;
}

/* The bytes of a field's value of wire type @wt at @p (0: refused). */
static size_t value_len(const uint8_t *p, const uint8_t *end, unsigned wt)
{
	uint64_t v;
	size_t n, k;

	switch (wt) {
	case WT_VARINT:
		return rd_varint(p, end, &v);
	case WT_I64:
		return end - p >= 8 ? 8 : 0;
	case WT_LEN:
		k = rd_len(p, end, &n);
		return k ? k + n : 0;
	case WT_I32:
		return end - p >= 4 ? 4 : 0;
	default: /* groups (3, 4), 6, 7 */
		return 0;
	}
}

static bool grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return true;
	while (c < need)
		c *= 2;
	q = realloc(*p, c * size);
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

/* Reads a varint field's value into @v at *@pp (moved on); false: refused. */
#define GET_VARINT(v)                                                  \
	do {                                                           \
		size_t k_;                                             \
		if (wt != WT_VARINT || !(k_ = rd_varint(p, end, &(v)))) \
			return REFUSED;                                \
		p += k_;                                               \
	} while (0)

#define U64(dst)                  \
	do {                              \
		uint64_t v_;              \
		GET_VARINT(v_);           \
		(dst) = v_;               \
	} while (0)

#define U32(dst)                          \
	do {                              \
		uint64_t v_;              \
		GET_VARINT(v_);           \
		if (v_ > UINT32_MAX)      \
			return REFUSED;   \
		(dst) = (uint32_t)v_;     \
	} while (0)

/*
 * A Histogram's bytes: its buckets appended to @t->buckets from *@nb on
 * (packed or not, as protobuf-c takes them both).
 */
static int hist_decode(weft_wire_task_raw_t *t, Weft__V1__Histogram *h,
		       const uint8_t *p, const uint8_t *end, size_t *nb)
{
	weft__v1__histogram__init(h);
	while (p < end) {
		uint32_t field;
		unsigned wt;
		size_t k = rd_tag(p, end, &field, &wt);

		if (!k)
			return REFUSED;
		p += k;
		switch (field) {
		case 1:
			if (wt == WT_LEN) {
				size_t n;
				const uint8_t *e;

				if (!(k = rd_len(p, end, &n)))
					return REFUSED;
				p += k;
				e = p + n;
				/* At most n values (a byte each at least). */
				if (!grow((void **)&t->buckets, &t->buckets_cap,
					  *nb + n, sizeof(*t->buckets)))
					return -ENOMEM;
				while (p < e) {
					uint64_t v;

					if (!(k = rd_varint(p, e, &v)) ||
					    v > UINT32_MAX)
						return REFUSED;
					t->buckets[(*nb)++] = (uint32_t)v;
					p += k;
				}
			} else {
				uint32_t v;

				U32(v);
				if (!grow((void **)&t->buckets, &t->buckets_cap,
					  *nb + 1, sizeof(*t->buckets)))
					return -ENOMEM;
				t->buckets[(*nb)++] = v;
			}
			break;
		case 2:
			U64(h->count);
			break;
		case 3:
			U64(h->sum_ns);
			break;
		case 4:
			U64(h->max_ns);
			break;
		case 5:
			U64(h->outliers);
			break;
		default:
			return REFUSED;
		}
	}
	return 0;
}

static int wait_decode(Weft__V1__TaskWait *w, const uint8_t *p,
		       const uint8_t *end)
{
	weft__v1__task_wait__init(w);
	while (p < end) {
		uint32_t field;
		unsigned wt;
		size_t k = rd_tag(p, end, &field, &wt);

		if (!k)
			return REFUSED;
		p += k;
		switch (field) {
		case 1:
			U64(w->resource);
			break;
		case 2:
			U64(w->total_ns);
			break;
		case 3:
			U32(w->waits);
			break;
		default:
			return REFUSED;
		}
	}
	return 0;
}

struct str {
	const uint8_t *p;
	size_t n;
	bool set;
};

/* A string field's bytes into *@s (the last one stands, as in protobuf-c). */
#define STR(s)                                          \
	do {                                            \
		size_t n_, k_;                          \
		if (wt != WT_LEN || !(k_ = rd_len(p, end, &n_))) \
			return REFUSED;                 \
		(s).p = p + k_;                         \
		(s).n = n_;                             \
		(s).set = true;                         \
		p += k_ + n_;                           \
	} while (0)

static char *str_put(char *to, const struct str *s, char **field)
{
	if (!s->set)
		return to;
	memcpy(to, s->p, s->n);
	to[s->n] = '\0';
	*field = to;
	return to + s->n + 1;
}

/*
 * A Task's bytes into @t->msg; @fill false: only checked (the record
 * left unset), but @t's storage grown as filling it would, so that the
 * same bytes then fill it without allocating.
 */
static int task_decode(weft_wire_task_raw_t *t, const uint8_t *p, size_t len,
		       bool fill)
{
	const uint8_t *end = p + len;
	Weft__V1__Task *m = &t->msg;
	struct str name = { 0 }, file = { 0 }, parked = { 0 };
	size_t nb = 0, poll_at = 0, poll_n = 0, sched_at = 0, sched_n = 0;
	size_t nw = 0;
	bool has_poll = false, has_sched = false;
	char *s;

	if (fill)
		weft__v1__task__init(m);
	while (p < end) {
		uint32_t field;
		unsigned wt;
		size_t k = rd_tag(p, end, &field, &wt);

		if (!k)
			return REFUSED;
		p += k;
		switch (field) {
		case 1:
			U64(m->id);
			break;
		case 2:
			U64(m->parent);
			break;
		case 3:
			STR(name);
			break;
		case 4:
			STR(file);
			break;
		case 5:
			U32(m->line);
			break;
		case 6:
			U32(m->state_size);
			break;
		case 7:
			U32(m->kind);
			break;
		case 8:
			U32(m->state);
			break;
		case 9:
			U32(m->last_worker);
			break;
		case 10: {
			uint32_t z;

			U32(z); /* sint32: zigzag */
			m->status = z & 1 ? -(int32_t)(z >> 1) - 1 :
					    (int32_t)(z >> 1);
			break;
		}
		case 11:
			U64(m->spawned_ns);
			break;
		case 12:
			U64(m->finished_ns);
			break;
		case 13:
			U64(m->polls);
			break;
		case 14:
			U64(m->busy_ns);
			break;
		case 15:
			U64(m->scheduled_ns);
			break;
		case 16:
			U64(m->idle_ns);
			break;
		case 17:
			U64(m->wakes);
			break;
		case 18:
			U64(m->self_wakes);
			break;
		case 19:
			U64(m->waker_clones);
			break;
		case 20:
			U64(m->waker_drops);
			break;
		case 21:
			U64(m->max_poll_ns);
			break;
		case 22:
			U32(m->warnings);
			break;
		case 23:
			U32(m->locks_held);
			break;
		case 24:
		case 25: {
			Weft__V1__Histogram *h = field == 24 ? &t->poll :
							       &t->sched;
			bool *has = field == 24 ? &has_poll : &has_sched;
			size_t n, at = nb;
			int rc;

			/* Twice: protobuf-c merges the two. */
			if (wt != WT_LEN || *has || !(k = rd_len(p, end, &n)))
				return REFUSED;
			p += k;
			rc = hist_decode(t, h, p, p + n, &nb);
			if (rc)
				return rc;
			p += n;
			*has = true;
			if (field == 24)
				poll_at = at, poll_n = nb - at;
			else
				sched_at = at, sched_n = nb - at;
			break;
		}
		case 26:
			STR(parked);
			break;
		case 27:
			U32(m->parked_line);
			break;
		case 28:
			U64(m->idle_since_ns);
			break;
		case 29:
			U64(m->waiting_on);
			break;
		case 30:
			U64(m->waiting_since_ns);
			break;
		case 31:
			U32(m->waiting_op);
			break;
		case 32: {
			size_t n;
			int rc;

			if (wt != WT_LEN || !(k = rd_len(p, end, &n)))
				return REFUSED;
			p += k;
			if (!grow((void **)&t->waits, &t->waits_cap, nw + 1,
				  sizeof(*t->waits)))
				return -ENOMEM;
			rc = wait_decode(&t->waits[nw], p, p + n);
			if (rc)
				return rc;
			nw++;
			p += n;
			break;
		}
		case 33:
			U32(m->site);
			break;
		case 34: {
			uint32_t b;

			U32(b);
			m->spawn_unseen = b != 0;
			break;
		}
		default:
			return REFUSED;
		}
	}
	/* The strings, NUL-ended as protobuf-c makes them ("" when absent). */
	if (name.set || file.set || parked.set) {
		if (!grow((void **)&t->str, &t->str_cap,
			  name.n + file.n + parked.n + 3, 1))
			return -ENOMEM;
	}
	if (nw && !grow((void **)&t->waitp, &t->waitp_cap, nw,
			sizeof(*t->waitp)))
		return -ENOMEM;
	if (!fill)
		return 0;
	if (name.set || file.set || parked.set) {
		s = t->str;
		s = str_put(s, &name, &m->name);
		s = str_put(s, &file, &m->file);
		str_put(s, &parked, &m->parked_file);
	}
	if (has_poll) {
		t->poll.n_buckets = poll_n;
		t->poll.buckets = poll_n ? t->buckets + poll_at : NULL;
		m->poll_hist = &t->poll;
	}
	if (has_sched) {
		t->sched.n_buckets = sched_n;
		t->sched.buckets = sched_n ? t->buckets + sched_at : NULL;
		m->sched_hist = &t->sched;
	}
	if (nw) {
		for (size_t i = 0; i < nw; i++)
			t->waitp[i] = &t->waits[i];
		m->n_waited = nw;
		m->waited = t->waitp;
	}
	return 0;
}

int weft_wire_task_decode_raw(weft_wire_task_raw_t *t, const uint8_t *p,
			      size_t len)
{
	return task_decode(t, p, len, true);
}

/* A string field's value at @p (@n bytes) into *@s, *@len as C string. */
static void brief_str(const uint8_t *p, size_t n, const char **s, size_t *len)
{
	const uint8_t *nul = memchr(p, '\0', n);

	*s = (const char *)p;
	*len = nul ? (size_t)(nul - p) : n;
}

int weft_wire_task_brief_raw(const uint8_t *p, size_t len,
			     weft_wire_task_brief_t *b)
{
	const uint8_t *end = p + len;

	memset(b, 0, sizeof(*b));
	while (p < end) {
		uint32_t field;
		unsigned wt;
		size_t k = rd_tag(p, end, &field, &wt), n;
		uint64_t v;

		if (!k)
			return REFUSED;
		p += k;
		switch (field) {
		case 1:
		case 5:
		case 12:
		case 27:
		case 33:
			if (wt != WT_VARINT || !(k = rd_varint(p, end, &v)))
				return REFUSED;
			p += k;
			if (field == 1)
				b->id = v;
			else if (field == 12)
				b->finished_ns = v;
			else if (field == 5)
				b->line = (uint32_t)v;
			else if (field == 33)
				b->site = (uint32_t)v;
			else
				b->parked_line = (uint32_t)v;
			break;
		case 3:
		case 4:
		case 26:
			if (wt != WT_LEN || !(k = rd_len(p, end, &n)))
				return REFUSED;
			p += k;
			if (field == 3)
				brief_str(p, n, &b->name, &b->name_len);
			else if (field == 4)
				brief_str(p, n, &b->file, &b->file_len);
			else
				brief_str(p, n, &b->parked_file,
					  &b->parked_len);
			p += n;
			break;
		default:
			/* Most skipped fields are varints: to the byte that
			 * ends it, its value not put together (checked by
			 * the split: at most 10 bytes). */
			if (wt == WT_VARINT) {
				while (p < end && *p & 0x80)
					p++;
				if (p++ == end)
					return REFUSED;
				break;
			}
			if (!(k = value_len(p, end, wt)))
				return REFUSED;
			p += k;
			break;
		}
	}
	return 0;
}

void weft_wire_task_raw_fini(weft_wire_task_raw_t *t)
{
	free(t->str);
	free(t->buckets);
	free(t->waits);
	free(t->waitp);
	memset(t, 0, sizeof(*t));
}

/* weft_wire_update_split_raw()'s tasks: checked, counted. */
struct split_s {
	weft_wire_task_raw_t *scratch;
	size_t n;
};

static int split_task(void *ctx, const uint8_t *p, size_t len)
{
	struct split_s *sp = ctx;
	/* Checked only: the reader fills it later. */
	int rc = task_decode(sp->scratch, p, len, false);

	sp->n += !rc;
	return rc;
}

int weft_wire_update_split_raw(const uint8_t *p, size_t len,
			       weft_wire_task_raw_t *scratch,
			       weft_wire_buf_t *rest, size_t *ntasks)
{
	struct split_s sp = { .scratch = scratch };
	int rc;

	*ntasks = 0;
	rc = weft_wire_update_walk_raw(p, len, rest, split_task, &sp);
	if (rc)
		return rc;
	*ntasks = sp.n;
	return 0;
}

const uint8_t *weft_wire_update_next_task_raw(const uint8_t **pp,
					      const uint8_t *end, size_t *len)
{
	const uint8_t *p = *pp;

	while (p < end) {
		uint32_t field;
		unsigned wt;
		size_t k = rd_tag(p, end, &field, &wt), v;

		if (!k)
			break;
		p += k;
		if (field == 2 && wt == WT_LEN) {
			size_t n;

			k = rd_len(p, end, &n);
			if (!k)
				break;
			*pp = p + k + n;
			*len = n;
			return p + k;
		}
		if (!(v = value_len(p, end, wt)))
			break;
		p += v;
	}
	*pp = end;
	return NULL;
}

uint32_t weft_wire_frame_one_raw(const uint8_t *p, size_t n,
				 const uint8_t **body, size_t *len)
{
	const uint8_t *end = p + n;
	uint32_t field;
	unsigned wt;
	size_t k = rd_tag(p, end, &field, &wt), v;

	if (!k || wt != WT_LEN)
		return 0;
	p += k;
	k = rd_len(p, end, &v);
	if (!k || v != (size_t)(end - p) - k)
		return 0;
	*body = p + k;
	*len = v;
	return field;
}

int weft_wire_update_walk_raw(
	const uint8_t *p, size_t len, weft_wire_buf_t *rest,
	int (*task)(void *ctx, const uint8_t *p, size_t len), void *ctx)
{
	const uint8_t *end = p + len;

	rest->len = 0;
	while (p < end) {
		const uint8_t *at = p;
		uint32_t field;
		unsigned wt;
		size_t k = rd_tag(p, end, &field, &wt), v;
		int rc;

		if (!k)
			return REFUSED;
		p += k;
		if (!(v = value_len(p, end, wt)))
			return REFUSED;
		if (field == 2) {
			size_t tl = 0;

			if (wt != WT_LEN)
				return REFUSED;
			k = rd_len(p, end, &tl);
			rc = task(ctx, p + k, tl);
			if (rc)
				return rc;
		} else {
			size_t f = (size_t)(p - at) + v;

			if (weft_wire_buf_reserve(rest, f))
				return -ENOMEM;
			memcpy(rest->data + rest->len, at, f);
			rest->len += f;
		}
		p += v;
	}
	return 0;
}

int weft_wire_update_walk_sites_raw(const uint8_t *p, size_t len,
				    weft_wire_sites_t *s)
{
	const uint8_t *end = p + len;

	while (p < end) {
		uint32_t field;
		unsigned wt;
		size_t k = rd_tag(p, end, &field, &wt), v, n;

		if (!k)
			return REFUSED;
		p += k;
		if (!(v = value_len(p, end, wt)))
			return REFUSED;
		if (field == 11) {
			Weft__V1__Site *m;
			int rc;

			if (wt != WT_LEN || !(k = rd_len(p, end, &n)))
				return REFUSED;
			m = weft__v1__site__unpack(NULL, n, p + k);
			if (!m)
				return REFUSED;
			rc = weft_wire_sites_add(s, m);
			weft__v1__site__free_unpacked(m, NULL);
			if (rc == -ENOMEM)
				return rc;
		}
		p += v;
	}
	return 0;
}
