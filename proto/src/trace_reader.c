/* SPDX-License-Identifier: MIT */
/*
 * Trace-file reading (weft/trace_reader.h has the model): the record
 * decoder fed from a file in 64 KiB reads, or from memory.  The first
 * frame must be the FileHeader; the reader keeps it (header) and returns
 * it too, so a tool sees every frame.
 *
 * Resynchronising.  The framing has no magic and no checksum per record
 * (a record is field 1 of weft.v1.Trace: 0x0a, a varint length, the
 * Frame), so after a record that does not read (a torn one: a write cut
 * short by a full disk, with later records appended behind it) the
 * reader looks for the next place where a whole record stands, with
 * checks that random or misaligned bytes almost never pass:
 *
 *   - 0x0a, then a length within the decoder's limit and the file;
 *   - the Frame inside is exactly one field, an Update (0x22), an
 *     EventBatch (0x2a) or a checkpoint mark (0x7a), the only frames a
 *     recorder writes after the header, whose own length fills the
 *     record to its last byte (two nested lengths that agree);
 *   - the record ends at the file's end, or where another record header
 *     starts (0x0a and a length within the limit);
 *   - the Frame decodes, and an EventBatch's columns agree with each
 *     other (weft_wire_batch_decode()).
 *
 * Random bytes pass the first three byte checks about once in 2^24
 * places, before the decoding; a record's own inner bytes (a nested
 * message whose first field is 1) would need an only field 4 or 5 of
 * exactly the right length.  A false landing is not a silent one
 * either: what follows it must read too, or the next resync says so.
 *
 * A torn record can also decode: cut in its last varint, it takes the
 * next record's tag (0x0a, a valid last byte) and ends inside the next
 * record.  So every record returned must be followed by a record header
 * whose Frame field is length-delimited, or by the end (one byte parsed
 * in the buffer, a pread of 11 bytes at its end: the hot path's only
 * cost).  One that is not is torn when the first whole record after its
 * start starts inside it, or when only a cut record follows it to the
 * end; else it stands, and the bytes after it are skipped.
 *
 * A bad record (starting with the tag) with nothing whole after it
 * before the end is the file's cut tail: the file reads as one cut short
 * (truncated), those bytes are not counted as skipped.
 *
 * The scan is bounded: it looks at most 11 + max_record bytes past the
 * bad record's start (a torn record is the start of one record, so a
 * whole one starts within that); farther, the damage is not a torn
 * record and reading stops with the error, as before.  Memory: the
 * 64 KiB window (the reader's own buffer) and one candidate record
 * (max_record) at a time.  Only a source read at random (memory, a
 * regular file) is resynchronised; a pipe stops at the error.
 *
 * Lean mode (weft_trace_reader_lean(), the trace stream's): the decoder
 * hands each record's Frame to lean_take() before protobuf-c, which
 * takes an EventBatch only when weft_wire_batch_decode_raw() decodes it
 * whole (bytes protobuf-c would unpack, columns that agree); anything
 * else goes to protobuf-c as ever, so every check above, every skip and
 * every error is the same in both modes.  With lean updates
 * (weft_trace_reader_lean_updates()), an Update whose task records
 * weft_wire_update_split_raw() reads whole is taken too: its other fields
 * unpacked by protobuf-c, its bytes kept for weft_trace_reader_tasks().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weft/trace_reader.h"
#include "wire_private.h"

/* The Frame's one field, as a recorder writes it after the header:
 * update = 4 and events = 5, length-delimited. */
#define WINDOW ((size_t)1 << 16) /* a file's read buffer */
#define FRAME_TAG_UPDATE 0x22u
#define FRAME_TAG_EVENTS 0x2au
#define FRAME_TAG_CKPT 0x7au /* a checkpoint mark, field 15 (ckpt.c) */
/* Its magic, "WEFTCKPT" as a little-endian fixed64. */
#define CKPT_MAGIC 0x54504b4354464557ull

/* Lean updates: the last Update taken, and what reads its tasks. */
struct weft_trace_lean_upd_s {
	Weft__V1__Frame frame;  /* update: its fields but the tasks */
	uint8_t *bytes;         /* the Update's bytes (a copy: the record's
				 * buffer may go before the frame does) */
	size_t len, cap;
	weft_wire_buf_t rest;   /* the fields but the tasks, for protobuf-c */
	weft_wire_task_raw_t task;
	size_t ntasks;
	bool taken; /* by the last lean_take() */
};

/*
 * Lean updates: a Frame that is one Update field filling it, whose tasks
 * weft_wire_update_split_raw() reads and whose other fields protobuf-c
 * unpacks, is taken; else left to protobuf-c, whole.
 */
static bool lean_take_update(weft_trace_reader_t *r, const uint8_t *p,
			     size_t n)
{
	struct weft_trace_lean_upd_s *u = r->lean_upd;
	static const uint8_t none[1];
	Weft__V1__Update *m;
	uint64_t len;
	size_t k;

	k = varint_get(p + 1, n - 1 < 5 ? n - 1 : 5, &len);
	if (!k || len != n - 1 - k)
		return false;
	p += 1 + k;
	if (weft_wire_update_split_raw(p, (size_t)len, &u->task, &u->rest,
				       &u->ntasks))
		return false;
	m = weft__v1__update__unpack(NULL, u->rest.len,
				     u->rest.len ? u->rest.data : none);
	if (!m)
		return false;
	if (len > u->cap) {
		uint8_t *b = realloc(u->bytes, (size_t)len);

		if (!b) {
			weft__v1__update__free_unpacked(m, NULL);
			return false;
		}
		u->bytes = b;
		u->cap = (size_t)len;
	}
	if (len)
		memcpy(u->bytes, p, (size_t)len);
	u->len = (size_t)len;
	if (u->frame.update)
		weft__v1__update__free_unpacked(u->frame.update, NULL);
	u->frame.update = m;
	u->taken = true;
	return true;
}

/*
 * Lean mode: a Frame that is one EventBatch field filling it, whose bytes
 * weft_wire_batch_decode_raw() takes, is taken here (the decoder's
 * take hook) and never unpacked; any other is left to protobuf-c.  The
 * length prefix as protobuf-c reads one: 5 bytes at most.
 */
static bool lean_take(void *ctx, const uint8_t *p, size_t n)
{
	weft_trace_reader_t *r = ctx;
	uint64_t len;
	size_t k;
	int got;

	if (n >= 2 && p[0] == FRAME_TAG_UPDATE && r->lean_upd)
		return lean_take_update(r, p, n);
	if (n < 2 || p[0] != FRAME_TAG_EVENTS)
		return false;
	k = varint_get(p + 1, n - 1 < 5 ? n - 1 : 5, &len);
	if (!k || len != n - 1 - k)
		return false;
	got = weft_wire_batch_decode_raw(p + 1 + k, (size_t)len,
					 &r->lean_batch, r->lean_ev,
					 r->lean_cap);
	/*
	 * Refused for want of room (the count is read first): grown to the
	 * batch, and again.  Room for the largest batch at once was 256 KiB
	 * a reader, which ASan's allocator maps and unmaps each time: a
	 * fuzz input (four readers) ran at 125 a second.  Only for a count
	 * the bytes can hold: every event has a varint, a byte at least,
	 * in each of three columns (header, time, task).
	 */
	if (got < 0 && r->lean_batch.count > r->lean_cap &&
	    r->lean_batch.count <= WEFT_WIRE_BATCH_MAX &&
	    r->lean_batch.count <= len / 3) {
		size_t cap = r->lean_cap;
		weft_event_t *ev;

		while (cap < r->lean_batch.count)
			cap *= 2;
		if (cap > WEFT_WIRE_BATCH_MAX)
			cap = WEFT_WIRE_BATCH_MAX;
		ev = realloc(r->lean_ev, cap * sizeof(*ev));
		if (!ev)
			return false;
		r->lean_ev = ev;
		r->lean_cap = cap;
		got = weft_wire_batch_decode_raw(p + 1 + k, (size_t)len,
						 &r->lean_batch, r->lean_ev,
						 r->lean_cap);
	}
	if (got < 0)
		return false;
	r->lean_n = (size_t)got;
	return true;
}

/*
 * The decoder afresh (@max: 0 for the default), with the lean hook.  A
 * record longer than the 64 KiB window is put together in the decoder's
 * buffer, which a file's one reader keeps: an Update is 4 MiB, and a
 * malloc and free of it each time cost a mapping and its page faults.
 */
static void dec_init(weft_trace_reader_t *r, size_t max)
{
	weft_wire_decoder_init(&r->dec, max);
	r->dec.keep_body = true;
	if (r->lean) {
		r->dec.take = lean_take;
		r->dec.take_ctx = r;
	}
}

int weft_trace_reader_open(weft_trace_reader_t *r, const char *path)
{
	memset(r, 0, sizeof(*r));
	r->fp = fopen(path, "rb");
	if (!r->fp)
		return -errno;
	dec_init(r, 0);
	return 0;
}

void weft_trace_reader_open_mem(weft_trace_reader_t *r, const void *data,
				 size_t len)
{
	memset(r, 0, sizeof(*r));
	r->mem = data;
	r->mem_len = len;
	dec_init(r, 0);
}

int weft_trace_reader_lean(weft_trace_reader_t *r)
{
	if (!r->lean_ev) {
		r->lean_cap = 64;
		r->lean_ev = malloc(r->lean_cap * sizeof(*r->lean_ev));
		if (!r->lean_ev)
			return -ENOMEM;
	}
	weft__v1__frame__init(&r->lean_frame);
	r->lean_frame.body_case = WEFT__V1__FRAME__BODY_EVENTS;
	r->lean_frame.events = &r->lean_batch;
	weft__v1__event_batch__init(&r->lean_batch);
	r->lean = true;
	r->dec.take = lean_take;
	r->dec.take_ctx = r;
	return 0;
}

int weft_trace_reader_lean_updates(weft_trace_reader_t *r)
{
	int rc = weft_trace_reader_lean(r);

	if (rc)
		return rc;
	if (!r->lean_upd) {
		r->lean_upd = calloc(1, sizeof(*r->lean_upd));
		if (!r->lean_upd)
			return -ENOMEM;
		weft__v1__frame__init(&r->lean_upd->frame);
		r->lean_upd->frame.body_case = WEFT__V1__FRAME__BODY_UPDATE;
	}
	return 0;
}

void weft_trace_reader_tasks(weft_trace_reader_t *r, const Weft__V1__Frame *f,
			     weft_trace_tasks_t *it)
{
	struct weft_trace_lean_upd_s *u = r ? r->lean_upd : NULL;

	memset(it, 0, sizeof(*it));
	it->sites = r ? &r->sites : NULL;
	if (u && f == &u->frame) {
		it->p = u->bytes;
		it->end = u->bytes + u->len;
		it->raw = &u->task;
	} else if (f && f->body_case == WEFT__V1__FRAME__BODY_UPDATE) {
		it->u = f->update;
	}
}

const Weft__V1__Task *weft_trace_tasks_next(weft_trace_tasks_t *it)
{
	const uint8_t *t;
	size_t n;

	if (!it->raw) {
		const Weft__V1__Task *m;

		if (!it->u || it->i >= it->u->n_tasks)
			return NULL;
		m = it->u->tasks[it->i++];
		if (!it->sites || !m->site)
			return m;
		/* A shallow copy: protobuf-c frees the record's strings. */
		it->copy = *m;
		return weft_wire_sites_resolve(it->sites, &it->copy) ?
			       &it->copy :
			       m;
	}
	t = weft_wire_update_next_task_raw(&it->p, it->end, &n);
	/* Read once already (lean_take_update()): it reads the same, in
	 * storage already big enough. */
	if (!t || weft_wire_task_decode_raw(it->raw, t, n))
		return NULL;
	if (it->sites)
		weft_wire_sites_resolve(it->sites, &it->raw->msg);
	return &it->raw->msg;
}

/* @b named by its site, as weft_wire_sites_resolve() names a task. */
static bool brief_site(weft_trace_tasks_t *it, weft_wire_task_brief_t *b)
{
	const weft_wire_site_t *e;

	if (!it->sites || !b->site || b->name_len || b->file_len)
		return true;
	e = weft_wire_sites_get(it->sites, b->site);
	if (!e) {
		it->sites->unknown++;
		return true;
	}
	b->name = e->name;
	b->name_len = strlen(e->name);
	b->file = e->file;
	b->file_len = strlen(e->file);
	b->line = e->line;
	b->state_size = e->state_size;
	return true;
}

static void brief_of(const char *s, const char **to, size_t *len)
{
	*to = s;
	*len = s ? strlen(s) : 0;
}

bool weft_trace_tasks_next_brief(weft_trace_tasks_t *it,
				 weft_wire_task_brief_t *b)
{
	const uint8_t *t;
	size_t n;

	if (!it->raw) {
		const Weft__V1__Task *m;

		if (!it->u || it->i >= it->u->n_tasks)
			return false;
		m = it->u->tasks[it->i++];
		memset(b, 0, sizeof(*b));
		b->id = m->id;
		b->finished_ns = m->finished_ns;
		b->line = m->line;
		b->parked_line = m->parked_line;
		brief_of(m->name, &b->name, &b->name_len);
		brief_of(m->file, &b->file, &b->file_len);
		brief_of(m->parked_file, &b->parked_file, &b->parked_len);
		b->site = m->site;
		b->state_size = m->state_size;
		return brief_site(it, b);
	}
	t = weft_wire_update_next_task_raw(&it->p, it->end, &n);
	/* Checked whole already (lean_take_update()): its fields read as
	 * weft_wire_task_decode_raw() reads them. */
	return t && !weft_wire_task_brief_raw(t, n, b) && brief_site(it, b);
}

void weft_trace_reader_frame_free(weft_trace_reader_t *r, Weft__V1__Frame *f)
{
	if (r->lean_upd && f == &r->lean_upd->frame) {
		if (f->update)
			weft__v1__update__free_unpacked(f->update, NULL);
		f->update = NULL;
		return;
	}
	if (f != r->header_frame && f != &r->lean_frame)
		weft_wire_frame_free(f);
}

void weft_trace_reader_close(weft_trace_reader_t *r)
{
	if (r->fp)
		fclose(r->fp);
	r->fp = NULL;
	weft_wire_decoder_fini(&r->dec);
	weft_wire_frame_free(r->header_frame);
	r->header_frame = NULL;
	r->header = NULL;
	free(r->lean_ev);
	r->lean_ev = NULL;
	r->lean_cap = 0;
	r->lean = false;
	if (r->lean_upd) {
		struct weft_trace_lean_upd_s *u = r->lean_upd;

		if (u->frame.update)
			weft__v1__update__free_unpacked(u->frame.update, NULL);
		free(u->bytes);
		weft_wire_buf_fini(&u->rest);
		weft_wire_task_raw_fini(&u->task);
		free(u);
		r->lean_upd = NULL;
	}
	weft_wire_sites_fini(&r->sites);
	free(r->buf);
	r->buf = NULL;
	r->buf_cap = 0;
}

const char *weft_trace_reader_strerror(int err)
{
	if (err == WEFT_TRACE_E_NOT_TRACE)
		return "not a weft trace (no file header)";
	if (err == -EIO)
		return "read error";
	return weft_wire_strerror(err);
}

/*
 * The window, made on first use: 64 KiB for a file, no more than the
 * bytes for a source in memory (a small input costs no large buffer,
 * which ASan would map and fault in afresh for every fuzz input).
 */
static bool window(weft_trace_reader_t *r)
{
	size_t cap = WINDOW;

	if (r->buf)
		return true;
	if (r->mem && r->mem_len < cap)
		cap = r->mem_len ? r->mem_len : 1;
	r->buf = malloc(cap);
	if (!r->buf)
		return false;
	r->buf_cap = cap;
	return true;
}

/* More bytes into buf; false at the end. */
static bool refill(weft_trace_reader_t *r)
{
	if (!window(r)) {
		r->len = 0;
		r->error = -ENOMEM;
	} else if (r->mem) {
		size_t n = r->mem_len - r->mem_pos;

		if (n > r->buf_cap)
			n = r->buf_cap;
		memcpy(r->buf, r->mem + r->mem_pos, n);
		r->mem_pos += n;
		r->len = n;
	} else if (r->fp) {
		r->len = fread(r->buf, 1, r->buf_cap, r->fp);
		if (!r->len && ferror(r->fp))
			r->error = -EIO;
	} else {
		r->len = 0;
	}
	r->pos = 0;
	return r->len > 0;
}

/* The source's size now; false when it cannot be read at random (a
 * pipe, a terminal): such a source is not resynchronised. */
static bool src_size(weft_trace_reader_t *r, uint64_t *size)
{
	struct stat st;

	if (r->mem) {
		*size = r->mem_len;
		return true;
	}
	if (!r->fp || fstat(fileno(r->fp), &st) || !S_ISREG(st.st_mode))
		return false;
	*size = (uint64_t)st.st_size;
	return true;
}

/* Up to @n bytes at @off, leaving the sequential position alone (pread:
 * the FILE's offset and buffer are untouched).  Return: bytes read. */
static size_t src_read_at(weft_trace_reader_t *r, uint64_t off, void *dst,
			  size_t n)
{
	size_t got = 0;

	if (r->mem) {
		if (off >= r->mem_len)
			return 0;
		if (n > r->mem_len - off)
			n = (size_t)(r->mem_len - off);
		memcpy(dst, r->mem + off, n);
		return n;
	}
	while (got < n) {
		ssize_t k = pread(fileno(r->fp), (uint8_t *)dst + got, n - got,
				  (off_t)(off + got));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	return got;
}

/* A record header at @h (@n bytes): the header's size with *@len its
 * Frame's, or 0 when it is none (or its length passes @max). */
static size_t rec_header(const uint8_t *h, size_t n, size_t max, uint64_t *len)
{
	size_t k;

	if (n < 2 || h[0] != WEFT_WIRE_RECORD_TAG)
		return 0;
	k = varint_get(h + 1, n - 1, len);
	if (!k || *len > max)
		return 0;
	return 1 + k;
}

/* Whether the @m bytes at @h, the file's last, start a record header
 * that the file's end cut (a tag, then continuation bytes only). */
static bool header_cut(const uint8_t *h, size_t m)
{
	if (!m || h[0] != WEFT_WIRE_RECORD_TAG || m > 10)
		return false;
	for (size_t i = 1; i < m; i++)
		if (!(h[i] & 0x80))
			return false;
	return true;
}

/* Whether the Frame @f, found by a resync, is one to land on. */
static bool frame_plausible(const Weft__V1__Frame *f)
{
	weft_event_t *ev;
	bool ok;

	if (f->body_case == WEFT__V1__FRAME__BODY_UPDATE)
		return true;
	if (f->body_case == WEFT__V1__FRAME__BODY_CHECKPOINT)
		return f->checkpoint->magic == CKPT_MAGIC;
	if (f->body_case != WEFT__V1__FRAME__BODY_EVENTS ||
	    f->events->count > WEFT_WIRE_BATCH_MAX)
		return false;
	ev = malloc((f->events->count ? f->events->count : 1) * sizeof(*ev));
	if (!ev)
		return false;
	ok = weft_wire_batch_decode(f->events, ev, f->events->count) >= 0;
	free(ev);
	return ok;
}

/* Whether a record a recorder could have written starts at @at, from its
 * first bytes: 0x0a, a length within the limit, and one Frame field, an
 * Update, an EventBatch or a mark, whose length fills the record.
 * Return: the header's size, with *@len the Frame's; 0 when not. */
static size_t record_start_at(weft_trace_reader_t *r, uint64_t at,
			      uint64_t *len)
{
	uint8_t h[24];
	size_t n = src_read_at(r, at, h, sizeof(h)), k, k2;
	uint64_t sub;

	k = rec_header(h, n, r->dec.max_record, len);
	if (!k || *len < 2 || n < k + 2)
		return 0;
	if (h[k] != FRAME_TAG_UPDATE && h[k] != FRAME_TAG_EVENTS &&
	    h[k] != FRAME_TAG_CKPT)
		return 0;
	k2 = varint_get(h + k + 1, n - k - 1, &sub);
	if (!k2 || 1 + k2 + sub != *len)
		return 0;
	return k;
}

/* Whether a whole record that a recorder could have written starts at
 * @at, in a source of @size bytes (the checks: top of file). */
static bool whole_record_at(weft_trace_reader_t *r, uint64_t at, uint64_t size)
{
	uint8_t nx[11];
	size_t max = r->dec.max_record, k, m;
	uint64_t len, nlen, end;
	Weft__V1__Frame *f;
	uint8_t *body;
	bool ok;

	k = record_start_at(r, at, &len);
	if (!k || len > size - at - k)
		return false;
	end = at + k + len;
	if (end < size) {
		m = src_read_at(r, end, nx, sizeof(nx));
		if (!rec_header(nx, m, max, &nlen) &&
		    !(end + m == size && header_cut(nx, m)))
			return false;
	}
	body = malloc((size_t)len);
	if (!body)
		return false;
	ok = src_read_at(r, at + k, body, (size_t)len) == len;
	f = ok ? weft__v1__frame__unpack(NULL, (size_t)len, body) : NULL;
	ok = f && frame_plausible(f);
	weft_wire_frame_free(f);
	free(body);
	return ok;
}

/*
 * The first offset in (@from, @limit) where a record tag starts and
 * @is(@r, offset, @size) holds, into *@found.  The reader's buffer is
 * the window: its bytes are lost either way (the caller repositions).
 */
static bool tag_where(weft_trace_reader_t *r, uint64_t from, uint64_t limit,
		      uint64_t size,
		      bool (*is)(weft_trace_reader_t *, uint64_t, uint64_t),
		      uint64_t *found)
{
	r->len = r->pos = 0;
	if (!window(r))
		return false;
	for (uint64_t base = from + 1; base < limit;) {
		size_t n = r->buf_cap;

		if (n > limit - base)
			n = (size_t)(limit - base);
		n = src_read_at(r, base, r->buf, n);
		if (!n)
			break;
		for (size_t i = 0; i < n; i++) {
			const uint8_t *p =
				memchr(r->buf + i, WEFT_WIRE_RECORD_TAG, n - i);

			if (!p)
				break;
			i = (size_t)(p - r->buf);
			if (is(r, base + i, size)) {
				r->len = r->pos = 0;
				*found = base + i;
				return true;
			}
		}
		base += n;
	}
	r->len = r->pos = 0;
	return false;
}

/* Whether a record starts at @at and runs past the source's @size. */
static bool cut_record_at(weft_trace_reader_t *r, uint64_t at, uint64_t size)
{
	uint64_t len;
	size_t k = record_start_at(r, at, &len);

	return k && len > size - at - k;
}

/*
 * Whether a record that the source's end cuts starts inside (@at,
 * @end): a torn record that decoded swallowed the start of the record
 * after it, and when that one is cut short there is no whole one to
 * find, but its start is there.
 */
static bool cut_record_inside(weft_trace_reader_t *r, uint64_t at, uint64_t end,
			      uint64_t size)
{
	uint64_t where;

	return tag_where(r, at, end, size, cut_record_at, &where);
}

/* Reads on from @at: the decoder starts afresh there. */
static bool position(weft_trace_reader_t *r, uint64_t at)
{
	size_t max = r->dec.max_record;

	if (r->mem) {
		if (at > r->mem_len)
			return false;
		r->mem_pos = (size_t)at;
	} else if (!r->fp || fseeko(r->fp, (off_t)at, SEEK_SET)) {
		return false;
	}
	weft_wire_decoder_fini(&r->dec);
	dec_init(r, max);
	r->dec.offset = at;
	r->len = r->pos = 0;
	return true;
}

/*
 * scan() - the first whole record (whole_record_at()) starting in (@bad,
 * @limit) of a source of @size bytes, into *@found.  The reader's buffer
 * is the window: its bytes are lost either way (the caller repositions).
 */
static bool scan(weft_trace_reader_t *r, uint64_t bad, uint64_t limit,
		 uint64_t size, uint64_t *found)
{
	return tag_where(r, bad, limit, size, whole_record_at, found);
}

/* Reads on from @at, the bytes from @bad counted as skipped. */
static bool skip_to(weft_trace_reader_t *r, uint64_t bad, uint64_t at)
{
	if (!position(r, at))
		return false;
	if (!r->skips)
		r->first_skip = bad;
	r->skips++;
	r->skipped += at - bad;
	return true;
}

/* How far a scan from @bad looks, in a source of @size bytes. */
static uint64_t scan_limit(const weft_trace_reader_t *r, uint64_t bad,
			   uint64_t size)
{
	uint64_t limit = bad + 1 + 10 + r->dec.max_record;

	return limit < size ? limit : size;
}

/*
 * resync() - past the bad record at @bad, to the next whole one (the
 * file's top comment has the checks and the bound).
 * Return: true with the reader there and the bytes skipped counted;
 * false when there is none (or the source cannot be read at random),
 * with *@to_end set when the scan went to the file's end and the bad
 * record starts as a record does: it is then the file's last, and the
 * file is one cut short.
 */
static bool resync(weft_trace_reader_t *r, uint64_t bad, bool *to_end)
{
	uint64_t size, limit, at;
	uint8_t tag;

	*to_end = false;
	/* Not twice from one place (the end of a file read again). */
	if (r->resync_tried && r->resync_from == bad)
		return false;
	r->resync_tried = true;
	r->resync_from = bad;
	if (!src_size(r, &size) || bad >= size)
		return false;
	limit = scan_limit(r, bad, size);
	if (scan(r, bad, limit, size, &at))
		return skip_to(r, bad, at);
	/* A record's start (not bytes that are none: an error, as ever). */
	*to_end = limit == size && src_read_at(r, bad, &tag, 1) == 1 &&
		  tag == WEFT_WIRE_RECORD_TAG;
	return false;
}

/*
 * Whether what follows the record just decoded starts a record (or the
 * file ends).  A torn record can decode: one cut in its last varint,
 * say, takes the next record's tag for its last byte, and the record
 * then ends inside the next one.  A record header and its Frame field
 * parsed, in the buffer mostly; near its end a pread of 24 bytes (none
 * on a pipe: what the buffer has is checked).
 */
static bool followed_well(weft_trace_reader_t *r)
{
	const uint8_t *p = r->buf + r->pos;
	size_t m = r->len - r->pos, k, k2;
	uint8_t nx[24];
	uint64_t len, sub;

	/* Fewer bytes in the buffer than the checks read: read them. */
	if (m < sizeof(nx) && (r->mem || r->fp)) {
		m = src_read_at(r, r->dec.offset, nx, sizeof(nx));
		p = nx;
	}
	if (m > sizeof(nx))
		m = sizeof(nx);
	if (!m || header_cut(p, m))
		return true;
	k = rec_header(p, m, r->dec.max_record, &len);
	if (!k)
		return false;
	if (k == m || !len)
		return true;
	/*
	 * And one of Frame's fields after it, length-delimited (every
	 * field of Frame is a message), whose length fills the record, as
	 * every encoder here writes one (and the resync lands only on such:
	 * record_start_at()).  A record's own inner bytes after a torn
	 * one's end often start 0x0a too (an Update's Stats, field 1), but
	 * with a varint field inside; and a 0x0a, a length and a
	 * length-delimited tag did come together inside an Update, 25 bytes
	 * from a torn copy's end, once in some hundred runs of
	 * test_trace_file_torn_record_skipped (the torn record read whole,
	 * the file then as cut short).  Bytes the file's end cut pass.
	 */
	if (p[k] != 0x0a && p[k] != 0x12 && p[k] != 0x1a &&
	    p[k] != FRAME_TAG_UPDATE && p[k] != FRAME_TAG_EVENTS &&
	    p[k] != 0x32 && p[k] != FRAME_TAG_CKPT)
		return false;
	k2 = varint_get(p + k + 1, m - k - 1, &sub);
	if (!k2)
		return m - k - 1 < 10; /* the end cut it, or no varint */
	return 1 + k2 + sub == len;
}

static bool is_header(const Weft__V1__Frame *f)
{
	return f->body_case == WEFT__V1__FRAME__BODY_HEADER &&
	       f->header->magic && !strcmp(f->header->magic, WEFT_TRACE_MAGIC);
}

/*
 * weft_trace_reader_next() - the next frame.
 * @frame: receives it; the caller frees it with weft_wire_frame_free()
 * unless it is the header (r->header's frame, which the reader owns and
 * frees on close).
 *
 * Return: 1 with a frame; 0 at the end (r->truncated when the file ends
 * inside a record; torn records skipped on the way are in r->skipped); a
 * negative error (also in r->error): see
 * weft/wire.h, WEFT_TRACE_E_NOT_TRACE, -EIO.
 */
int weft_trace_reader_next(weft_trace_reader_t *r, Weft__V1__Frame **frame)
{
	*frame = NULL;
	if (r->error)
		return r->error;
	if (r->cut_tail)
		return 0;
	for (;;) {
		Weft__V1__Frame *f;
		bool to_end = false;
		size_t used;
		int rc;

		if (r->pos == r->len && !refill(r)) {
			if (r->error)
				return r->error;
			r->truncated = weft_wire_decoder_mid_record(&r->dec);
			/* A record that claims more than the file holds: a
			 * torn one, if whole records follow its start. */
			if (r->truncated && r->frames &&
			    resync(r, r->dec.record_offset, &to_end)) {
				r->truncated = false;
				continue;
			}
			return 0;
		}
		rc = weft_wire_decoder_feed(&r->dec, r->buf + r->pos,
					     r->len - r->pos, &used, &f);
		r->pos += used;
		if (rc < 0) {
			/* Past the header, a record that does not read is
			 * skipped when a whole one follows (-ENOMEM is
			 * ours, not the file's). */
			if (rc != -ENOMEM && r->frames &&
			    resync(r, r->dec.record_offset, &to_end))
				continue;
			/* Nothing whole after it: the file's cut tail (a torn
			 * record, then the end) reads as a file cut short. */
			if (to_end) {
				r->truncated = r->cut_tail = true;
				return 0;
			}
			r->error_offset = r->dec.record_offset;
			return r->error = rc;
		}
		if (rc == WEFT_WIRE_NEED_MORE)
			continue;
		if (!f && r->lean_upd && r->lean_upd->taken) {
			r->lean_upd->taken = false;
			f = &r->lean_upd->frame; /* lean_take_update() */
		} else if (!f) {
			f = &r->lean_frame; /* taken by lean_take() */
		}
		if (!r->frames && !is_header(f)) {
			weft_trace_reader_frame_free(r, f);
			r->error_offset = 0;
			return r->error = WEFT_TRACE_E_NOT_TRACE;
		}
		/*
		 * A record not followed by a record (nor the end): in a
		 * recorder's file, either a torn record that decoded (one
		 * cut in its last varint takes the next record's tag for
		 * its last byte, and ends inside that record) or a whole one
		 * with a torn one after it.  Torn when the first whole
		 * record after its start starts inside it (the one whose
		 * start it swallowed), or when none follows before the
		 * file's end: skipped.  Else it stands, and reading goes on
		 * at its end, where the torn bytes after it are skipped.
		 */
		if (r->frames && !followed_well(r)) {
			uint64_t at = r->dec.record_offset, end = r->dec.offset;
			uint64_t size, limit, next;
			bool found;

			if (src_size(r, &size) && end <= size) {
				limit = scan_limit(r, at, size);
				found = scan(r, at, limit, size, &next);
				if (found && next < end) {
					weft_trace_reader_frame_free(r, f);
					if (!skip_to(r, at, next))
						return r->error = -EIO;
					continue;
				}
				if (!found && limit == size &&
				    cut_record_inside(r, at, end, size)) {
					weft_trace_reader_frame_free(r, f);
					r->truncated = r->cut_tail = true;
					return 0;
				}
				if (!position(r, end)) {
					weft_trace_reader_frame_free(r, f);
					return r->error = -EIO;
				}
				/* Callers read the record's place here. */
				r->dec.record_offset = at;
			}
		}
		if (!r->frames) {
			r->header_frame = f;
			r->header = f->header;
		}
		/* No memory: its tasks go unnamed (counted), reading goes on. */
		if (f->body_case == WEFT__V1__FRAME__BODY_UPDATE)
			(void)weft_wire_sites_add_update(&r->sites, f->update);
		r->frames++;
		*frame = f;
		return 1;
	}
}

/*
 * weft_trace_reader_seek() - read on from the record that starts at
 * @offset (one a frame's record_offset named: the console's replay
 * index).  The header, read first, stays.
 * Return: 0, or a negative errno (-EINVAL before the header, or past
 * the end of a buffer).
 */
int weft_trace_reader_seek(weft_trace_reader_t *r, uint64_t offset)
{
	if (!r->frames)
		return -EINVAL;
	if (r->mem) {
		if (offset > r->mem_len)
			return -EINVAL;
		r->mem_pos = (size_t)offset;
	} else if (!r->fp || fseeko(r->fp, (off_t)offset, SEEK_SET)) {
		return r->fp ? -errno : -EINVAL;
	}
	weft_wire_decoder_fini(&r->dec);
	dec_init(r, 0);
	r->dec.offset = offset;
	r->len = r->pos = 0;
	r->error = 0;
	r->error_offset = 0;
	r->truncated = false;
	r->resync_tried = false;
	r->cut_tail = false;
	return 0;
}
