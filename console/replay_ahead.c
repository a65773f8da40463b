/* SPDX-License-Identifier: MIT */
/*
 * Seeks ahead of the index pass (issue 21): on a first open of a big
 * trace (no side index yet), a seek to a time the index pass has not
 * reached starts from a checkpoint mark in the trace itself (a recorder
 * writes one before a full update every 16 MB or so: weft/wire.h,
 * weft_wire_ckpt_*; probe/src/recorder_ckpt.c) instead of waiting for
 * the pass to get there (5 minutes at 10 GB).
 *
 * Finding the marks (con_ahead_open(), once at open, when the index is
 * not whole yet): whether the file has marks at all (one in its first
 * 32 MiB: a recording's first full update is marked), then its last
 * whole mark, by a scan back from its end in 1 MiB reads (256 MiB at
 * most) for the sync pattern (each hit checked:
 * weft_wire_ckpt_get() checks its shape, its checksum and the offset it
 * names for itself, so a pattern inside a name or an event does not
 * pass; and the full update it announces must follow it whole, as
 * records ending where it says: full_follows()),
 * then the chain of marks before it, each naming the previous one's
 * offset: one 54-byte read a mark, each checked the same way, down to
 * the first (prev 0) or one that does not check (a damaged file: the
 * marks before it are not used).  So about 300 small reads at 10 GB,
 * instead of a binary search that would scan up to a spacing's worth
 * of bytes (16 MB) at each of its steps.  Then the trace's end time:
 * the records after the last mark read (times only, in lean mode), up
 * to the end, so that the status line and a seek to "the end" know it.
 *
 * A seek to @pos beyond the last record indexed: from the last mark at
 * or before @pos, a fresh model (the session's settings kept) is fed
 * the header's hello, the mark's full update and the records after it
 * up to @pos (times made non-decreasing, as the index makes them); a
 * seek later on (playing) reads on from there while no later mark is
 * at or before its time.  The model then names every task live at the
 * mark and what changed after it; what ended before the mark (finished
 * tasks kept for retain_ns, the warnings, the timeline's past, the
 * workers' series) is not known: the status line says so.  A seek that
 * the index covers (the pass got there, or a seek back) leaves this: the
 * model is reset and the usual path restores the index pass's own
 * checkpoint (the exact replay).  A file with no marks (written before
 * them, or with WEFT_TRACE_CHECKPOINT_MB=0) seeks as before: it waits
 * for the index pass.  Neither the index nor the side index learns from
 * what is read here.  --once never seeks from a mark
 * (con_replay_ahead_off()): its text is the exact state, the same with
 * a side index or without.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay_internal.h"

#include "weft/trace_reader.h"
#include "weft/trace_stream.h"

#define SCAN_CHUNK (1u << 20)
/* A marked file's first mark is in its first SCAN_HEAD bytes (its first
 * full update: 100 ms of trace in); its last in its last SCAN_BACK_MAX
 * (16 MB apart, more where a full update is big: then those farther
 * from the end than this are not found, and a seek there waits for the
 * index pass as in a file without marks). */
#define SCAN_HEAD (32u << 20)
#define SCAN_BACK_MAX (256ull << 20)

/* r->rd_at while rd is where the read-ahead left it. */
#define RD_AHEAD (SIZE_MAX - 1)

/* A varint at @p (@n bytes): its length, 0 when cut or too long. */
static size_t varint(const uint8_t *p, size_t n, uint64_t *v)
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
 * Whether what mark @c announces follows it, whole: records (a record
 * tag and length, the Frame's one field, length-delimited, whose own
 * length fills the record: Updates, as a full update is written today)
 * back to back, ending exactly full_bytes after the mark.
 * Bytes that only look like a mark (even a copy planted at its own
 * offset inside a name) are not followed by that.
 */
static bool full_follows(int fd, const weft_wire_ckpt_t *c, uint64_t size)
{
	uint64_t at = c->offset + WEFT_WIRE_CKPT_LEN;
	uint64_t end = at + c->full_bytes;

	if (!c->full_bytes || c->full_bytes > size || end > size)
		return false;
	for (unsigned n = 0; at < end; n++) {
		uint8_t h[24];
		ssize_t got = pread(fd, h, sizeof(h), (off_t)at);
		uint64_t len, sub;
		size_t k, k2;

		if (got < 4 || h[0] != 0x0a || n >= 4096)
			return false;
		k = varint(h + 1, (size_t)got - 1, &len);
		/* A Frame of one length-delimited field (an Update, or
		 * whatever else a full update's records come to hold). */
		if (!k || 1 + k >= (size_t)got || (h[1 + k] & 7) != 2 ||
		    h[1 + k] & 0x80)
			return false;
		k2 = varint(h + 2 + k, (size_t)got - 2 - k, &sub);
		if (!k2 || 1 + k2 + sub != len)
			return false;
		at += 1 + k + len;
	}
	return at == end;
}

static bool mark_at(int fd, uint64_t off, uint64_t size, weft_wire_ckpt_t *c)
{
	uint8_t b[WEFT_WIRE_CKPT_LEN];

	return pread(fd, b, sizeof(b), (off_t)off) == (ssize_t)sizeof(b) &&
	       weft_wire_ckpt_get(b, sizeof(b), off, c) &&
	       full_follows(fd, c, size);
}

/* The last whole mark in [@from, @to) of the file, by a scan back. */
static bool last_mark(int fd, uint64_t from, uint64_t to, uint64_t size,
		      weft_wire_ckpt_t *out)
{
	uint8_t *buf = con_xmalloc(SCAN_CHUNK + WEFT_WIRE_CKPT_LEN);
	uint64_t end = to;
	bool found = false;

	while (!found && end > from) {
		uint64_t start = end - from > SCAN_CHUNK ? end - SCAN_CHUNK :
							   from;
		/* The chunk and the bytes after it that a mark starting in
		 * it spans. */
		size_t want = (size_t)(end - start) + WEFT_WIRE_CKPT_LEN - 1;
		ssize_t got = pread(fd, buf, want, (off_t)start);
		const uint8_t *p;
		size_t at = 0;

		if (got <= 0)
			break;
		while (at < (size_t)(end - start) && (size_t)got > at &&
		       (p = weft_wire_ckpt_find(buf + at, (size_t)got - at))) {
			size_t i = (size_t)(p - buf);
			weft_wire_ckpt_t c;

			if (i >= (size_t)(end - start))
				break;
			if (weft_wire_ckpt_get(p, (size_t)got - i, start + i,
					       &c) &&
			    full_follows(fd, &c, size)) {
				*out = c;
				found = true; /* the last in the chunk wins */
			}
			at = i + 1;
		}
		end = start;
	}
	free(buf);
	return found;
}

/* Whether a whole mark is in the file's first SCAN_HEAD bytes. */
static bool first_mark(int fd, uint64_t size)
{
	uint8_t *buf = con_xmalloc(SCAN_CHUNK + WEFT_WIRE_CKPT_LEN);
	bool found = false;

	for (uint64_t start = 0; !found && start < size && start < SCAN_HEAD;
	     start += SCAN_CHUNK) {
		ssize_t got = pread(fd, buf,
				    SCAN_CHUNK + WEFT_WIRE_CKPT_LEN - 1,
				    (off_t)start);
		const uint8_t *p;
		size_t at = 0;

		if (got <= 0)
			break;
		while (!found && at < SCAN_CHUNK && (size_t)got > at &&
		       (p = weft_wire_ckpt_find(buf + at, (size_t)got - at))) {
			size_t i = (size_t)(p - buf);
			weft_wire_ckpt_t c;

			found = i < SCAN_CHUNK &&
				weft_wire_ckpt_get(p, (size_t)got - i,
						   start + i, &c) &&
				full_follows(fd, &c, size);
			at = i + 1;
		}
	}
	free(buf);
	return found;
}

/* The trace's last record's time, read from @off (a mark's end) on. */
static uint64_t end_time(const con_replay_t *r, uint64_t off, uint64_t t)
{
	weft_trace_reader_t rd;
	Weft__V1__Frame *f;

	if (weft_trace_reader_open(&rd, r->path))
		return t;
	if (weft_trace_reader_next(&rd, &f) == 1 &&
	    !weft_trace_reader_lean(&rd) && !weft_trace_reader_seek(&rd, off)) {
		while (weft_trace_reader_next(&rd, &f) == 1) {
			uint64_t at = weft_trace_frame_time(f);

			if (at > t)
				t = at;
			weft_trace_reader_frame_free(&rd, f);
		}
	}
	weft_trace_reader_close(&rd);
	return t;
}

void con_ahead_open(con_replay_t *r)
{
	con_ahead_t *a;
	weft_wire_ckpt_t c;
	int fd;

	if (r->indexed || !r->hello)
		return;
	fd = open(r->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	/* A file with marks has one at its start (a recording's first full
	 * update); a file without (older, or marks turned off) is not
	 * scanned back from its end: that would read all of it. */
	if (!first_mark(fd, r->size) ||
	    !last_mark(fd,
		       r->size > SCAN_BACK_MAX ? r->size - SCAN_BACK_MAX : 0,
		       r->size, r->size, &c)) {
		close(fd);
		return;
	}
	a = con_xcalloc(1, sizeof(*a));
	a->fd = fd;
	/* The chain back, newest first, then turned around. */
	for (;;) {
		if (a->nmk == a->cap) {
			a->cap = a->cap ? 2 * a->cap : 64;
			a->mk = con_xreallocarray(a->mk, a->cap,
						  sizeof(*a->mk));
		}
		a->mk[a->nmk].off = c.offset;
		a->mk[a->nmk].at = c.time_ns;
		a->nmk++;
		if (!c.prev || !mark_at(fd, c.prev, r->size, &c) ||
		    c.time_ns > a->mk[a->nmk - 1].at)
			break;
	}
	for (size_t i = 0; i < a->nmk / 2; i++) {
		con_ahead_mark_t t = a->mk[i];

		a->mk[i] = a->mk[a->nmk - 1 - i];
		a->mk[a->nmk - 1 - i] = t;
	}
	a->end_ns = end_time(r, a->mk[a->nmk - 1].off, a->mk[a->nmk - 1].at);
	r->ahead = a;
}

void con_ahead_close(con_replay_t *r)
{
	con_ahead_t *a = r->ahead;

	if (!a)
		return;
	weft_wire_frame_free(a->pending);
	free(a->mk);
	close(a->fd);
	free(a);
	r->ahead = NULL;
}

/* The model leaves the read-ahead: reset, for the usual path to fill. */
static void leave(con_replay_t *r, con_model_t *m)
{
	con_ahead_t *a = r->ahead;

	a->active = false;
	weft_wire_frame_free(a->pending);
	a->pending = NULL;
	con_replay_model_reset(m);
	r->next = 0;
	r->hello_fed = false;
	if (r->rd_at == RD_AHEAD)
		r->rd_at = SIZE_MAX;
}

/* The last mark at or before @pos (nmk: none). */
static size_t mark_before(const con_ahead_t *a, uint64_t pos)
{
	size_t lo = 0, hi = a->nmk;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->mk[mid].at <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : a->nmk;
}

/* The records from where rd is up to @pos fed to @m. */
static void read_on(con_replay_t *r, con_model_t *m, uint64_t pos)
{
	con_ahead_t *a = r->ahead;

	if (r->rd_at != RD_AHEAD) {
		if (weft_trace_reader_seek(r->rd, a->next_off)) {
			a->at_end = true;
			return;
		}
		r->rd_at = RD_AHEAD;
	}
	while (!a->at_end) {
		Weft__V1__Frame *f = a->pending;
		uint64_t at;

		a->pending = NULL;
		if (!f && weft_trace_reader_next(r->rd, &f) != 1) {
			a->at_end = true;
			break;
		}
		at = weft_trace_frame_time(f);
		if (at < a->last_at)
			at = a->last_at;
		if (at > pos) {
			a->pending = f;
			break;
		}
		a->last_at = at;
		/* Every frame, as the index pass feeds them (a second
		 * file's header too, files put end to end). */
		con_model_frame(m, f);
		weft_trace_reader_frame_free(r->rd, f);
		a->next_off = r->rd->dec.offset;
	}
}

bool con_ahead_seek(con_replay_t *r, con_model_t *m, uint64_t pos)
{
	con_ahead_t *a = r->ahead;
	uint64_t known;
	size_t k;

	if (!a)
		return false;
	known = r->n ? r->rec[r->n - 1].at : 0;
	/* What the index covers: the usual path (exact). */
	if (r->indexed || pos <= known) {
		if (a->active)
			leave(r, m);
		return false;
	}
	k = mark_before(a, pos);
	if (a->active && pos >= r->pos_ns &&
	    (k == a->nmk || a->mk[k].off < a->next_off)) {
		read_on(r, m, pos);
		r->pos_ns = pos;
		return true;
	}
	if (k == a->nmk) {
		/* Before the first mark: the index pass gets there. */
		if (a->active)
			leave(r, m);
		return false;
	}
	/* From mark k: a fresh model, the hello, the full update on. */
	weft_wire_frame_free(a->pending);
	a->pending = NULL;
	con_replay_model_reset(m);
	con_model_frame(m, r->hello);
	a->active = true;
	a->at_end = false;
	a->from = a->mk[k].off;
	a->from_ns = a->mk[k].at;
	a->last_at = a->mk[k].at;
	a->next_off = a->mk[k].off;
	a->seeks++;
	r->rd_at = SIZE_MAX;
	/* The index's records are not the model's now: none fed (the
	 * next seek the index covers resets it). */
	r->next = r->n;
	r->hello_fed = true;
	read_on(r, m, pos);
	r->pos_ns = pos;
	return true;
}

/*
 * The marks forgotten: every seek from now on waits for the index pass
 * and restores the index's own checkpoints (the exact state).  --once
 * prints the state at a time as text, for scripts and tests to compare:
 * a model from a mark lacks what ended before it (finished tasks,
 * warnings, the workers' series, the timeline, the blocking pool's job
 * count), and whether a seek went ahead depended on how far the open's
 * tenth of a second indexed, so the text changed with the machine's
 * speed and with whether a side index was there.
 */
void con_replay_ahead_off(con_replay_t *r, con_model_t *m)
{
	if (!r->ahead)
		return;
	if (r->ahead->active)
		leave(r, m);
	con_ahead_close(r);
}

bool con_replay_ahead(const con_replay_t *r, uint64_t *from_ns,
		      uint64_t *end_ns)
{
	const con_ahead_t *a = r->ahead;

	*from_ns = a && a->active ? a->from_ns : 0;
	*end_ns = a ? a->end_ns : 0;
	return a && a->active;
}
