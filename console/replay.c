/* SPDX-License-Identifier: MIT */
/*
 * Replaying a trace file in bounded memory.  The replay keeps an index:
 * per record its place in the file, its time (weft_trace_frame_time():
 * an Update's now, an EventBatch's first stamp; made non-decreasing)
 * and two bits, "an Update with warnings" and "an EventBatch".  The
 * frames themselves are read again from the file as the replay clock
 * reaches them, fed to the model and freed; that reader stays open, and
 * is moved only when the record wanted is not the one it reads next, so
 * playing on reads the file in order.
 *
 * The index is made incrementally, not in one pass at open (issue 21:
 * the first screen of a 10 GB file must not wait for a read of all of
 * it): a second reader of its own indexes the first record and at most
 * a budget more at open (the console: CON_INDEX_OPEN_NS), then on in
 * steps (con_replay_index(): the console's UI does CON_INDEX_STEP_NS a
 * frame, the status line showing "indexing N%" and an end time that
 * grows), and a seek past what is known indexes as far as it needs.
 * last_ns, truncated, skipped and error are final once indexed is set.
 *
 * What the index pass learns is kept between runs in a side index next
 * to the trace (replay_side.c: FILE.weftidx, or in the cache where the
 * folder is not writable): the records, and checkpoints of its model
 * saved whole (con_model_save(): packed tasks and the rest), written as
 * the pass goes.  An open that finds a whole one that fits the trace
 * reads it instead of the trace (its first screen in milliseconds at 10
 * GB); a part (a pass cut short) or the index of a trace that grew since
 * gives the records to its last checkpoint, and the pass goes on from
 * there with that checkpoint's model.  While a side index is kept, the
 * index pass's checkpoints go there, not to memory, and seeks take
 * none of their own; the side ones are read back (and checked) only
 * when a seek restores one.  WEFT_CONSOLE_INDEX=0: none (the in-memory
 * checkpoints below).
 *
 * A seek past what is indexed does not wait for the pass when the trace
 * has checkpoint marks (a recorder writes one before a full update every
 * 16 MB or more: probe/src/recorder_ckpt.c): replay_ahead.c restores a
 * fresh model from the last mark before the time wanted and reads on,
 * a model that knows the tasks live there, not the history before it;
 * once the pass covers that time, the exact path below takes over.  In
 * a file without marks, such a seek waits for the pass (first opens
 * only: later ones have the side index).
 *
 * Updates carry only changes, so the state at a time is known only by
 * feeding every record before it: checkpoints of the model bound that
 * (replay_ckpt.c: their spacing, budgets and the spill file).  A seek
 * restores the nearest one at or before the time wanted (in memory or
 * in the side index) and reads on from its record.
 *
 * A file cut short replays up to its last whole record; a malformed
 * record ends the replay there with the reason kept in error.
 *
 * Only a regular file is opened: a directory would only say "read
 * error", a FIFO with no writer would block the open for ever, a device
 * might never end.  The path is opened without blocking and looked at
 * first (one line says what it is), then the reader opens it by name: a
 * FIFO put in the file's place between the two would still block (the
 * reader takes a path, not a descriptor).
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "replay_internal.h"

#include "weft/trace_reader.h"
#include "weft/trace_stream.h"

static bool bit_get(const uint64_t *bits, size_t i)
{
	return bits[i / 64] >> (i % 64) & 1;
}

static void bit_set(uint64_t *bits, size_t i)
{
	bits[i / 64] |= 1ull << (i % 64);
}

/* The header's frame is the reader's: keep a copy, for the hello. */
static Weft__V1__Frame *frame_copy(const Weft__V1__Frame *f)
{
	size_t len = weft__v1__frame__get_packed_size(f);
	uint8_t *buf = con_xmalloc(len ? len : 1);
	Weft__V1__Frame *h;

	weft__v1__frame__pack(f, buf);
	h = weft__v1__frame__unpack(NULL, len, buf);
	free(buf);
	return h;
}

/* @f is the reader's header frame (it frees it on close), which the
 * public header field points into; every other frame is the caller's. */
static bool is_reader_header(const weft_trace_reader_t *rd,
			     const Weft__V1__Frame *f)
{
	return f->body_case == WEFT__V1__FRAME__BODY_HEADER &&
	       f->header == rd->header;
}

/*
 * Progress on stderr, when that is a terminal and reading has run for a
 * second (a big file: the index reads it all, --once reads it again to
 * the end): how far through the file, the time left.  Drawn at most 5
 * times a second; @done true clears the line.
 */
static void progress(con_replay_t *r, uint64_t at, bool done)
{
	uint64_t now;
	double secs, left;

	if (!r->progress)
		return;
	if (done) {
		if (r->progress_shown)
			fputs("\r\033[K", stderr);
		r->progress_shown = false;
		return;
	}
	now = weft_wire_now_ns();
	if (now - r->progress_start < 1000000000ull ||
	    now - r->progress_at < 200000000ull)
		return;
	r->progress_at = now;
	/* This pass's rate: the index's, or the model's (slower). */
	secs = (double)(now - r->pass_start) / 1e9;
	left = at && r->size > at ? secs * (double)(r->size - at) / (double)at :
				    0;
	fprintf(stderr,
		"\rweft-console: %s: %s %3.0f%%  %.0f of %.0f MB  %.0f s "
		"left\033[K",
		r->path, r->next ? "replaying" : "indexing",
		r->size ? 100.0 * (double)at / (double)r->size : 0.0,
		(double)at / 1e6, (double)r->size / 1e6, left);
	r->progress_shown = true;
}

void con_replay_progress_off(con_replay_t *r)
{
	progress(r, 0, true);
	r->progress = false;
}

void con_replay_rec_push(con_replay_t *r, uint64_t off, uint64_t at,
			 unsigned flags)
{
	size_t i = r->n;

	if (i == r->rec_cap) {
		size_t words = (r->rec_cap ? 2 * r->rec_cap : 4096) / 64,
		       old = r->rec_cap / 64;

		r->rec_cap = words * 64;
		r->rec = con_xreallocarray(r->rec, r->rec_cap, sizeof(*r->rec));
		r->warn_bits = con_xreallocarray(r->warn_bits, words,
						 sizeof(*r->warn_bits));
		r->batch_bits = con_xreallocarray(r->batch_bits, words,
						  sizeof(*r->batch_bits));
		memset(r->warn_bits + old, 0,
		       (words - old) * sizeof(*r->warn_bits));
		memset(r->batch_bits + old, 0,
		       (words - old) * sizeof(*r->batch_bits));
	}
	r->rec[i].off = off;
	r->rec[i].at = at;
	if (i && r->rec[i].at < r->rec[i - 1].at)
		r->rec[i].at = r->rec[i - 1].at;
	if (!r->first_ns && r->rec[i].at)
		r->first_ns = r->rec[i].at;
	if (flags & CON_REC_WARN)
		bit_set(r->warn_bits, i);
	if (flags & CON_REC_BATCH)
		bit_set(r->batch_bits, i);
	r->n++;
}

/* One more record in the index: the frame @f read at @off. */
static void index_add(con_replay_t *r, uint64_t off, const Weft__V1__Frame *f)
{
	unsigned flags = 0;

	if (f->body_case == WEFT__V1__FRAME__BODY_UPDATE &&
	    f->update->n_warnings)
		flags |= CON_REC_WARN;
	if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS &&
	    f->events->count <= WEFT_WIRE_BATCH_MAX)
		flags |= CON_REC_BATCH;
	con_replay_rec_push(r, off, weft_trace_frame_time(f), flags);
}

static const char *file_kind(mode_t mode)
{
	return S_ISDIR(mode)  ? "is a directory" :
	       S_ISFIFO(mode) ? "is a FIFO" :
	       S_ISCHR(mode)  ? "is a character device" :
	       S_ISBLK(mode)  ? "is a block device" :
	       S_ISSOCK(mode) ? "is a socket" :
				"is not a regular file";
}

/*
 * @path is a regular file: 0 with its identity in @st; else a negative
 * errno, said on stderr in one line.  Never blocks (O_NONBLOCK: a FIFO
 * with no writer opens at once for reading).
 */
static int regular_file(const char *path, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	int err = 0;

	if (fd < 0 || fstat(fd, st))
		err = -errno;
	if (fd >= 0)
		close(fd);
	if (err) {
		fprintf(stderr, "weft-console: %s: %s\n", path, strerror(-err));
		return err;
	}
	if (!S_ISREG(st->st_mode)) {
		fprintf(stderr,
			"weft-console: %s: %s, not a trace file (--replay "
			"reads a regular file)\n",
			path, file_kind(st->st_mode));
		return S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
	}
	return 0;
}

/* The index pass's model goes (the index done, or no checkpoints). */
void con_replay_im_free(con_replay_t *r)
{
	if (!r->im)
		return;
	con_model_fini(r->im);
	free(r->im);
	r->im = NULL;
}

/*
 * The indexing pass's end (the file's end, or what stopped it, rc < 0):
 * what it found kept, its reader closed.
 */
static void index_end(con_replay_t *r, int rc)
{
	weft_trace_reader_t *ix = r->ix;

	if (rc < 0 && !r->error) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s (record at byte %llu)",
			 weft_trace_reader_strerror(rc),
			 (unsigned long long)ix->error_offset);
		r->error = con_xstrdup(msg);
	}
	r->truncated = ix->truncated;
	r->skipped = ix->skipped;
	r->indexed_bytes = r->size;
	/* The side index's end (its last checkpoint: the model at the
	 * file's end), and its name. */
	con_side_end(r, r->im, r->side_covered);
	weft_trace_reader_close(ix);
	free(ix);
	r->ix = NULL;
	r->indexed = true;
	con_replay_im_free(r);
	progress(r, 0, true);
}

/* One more frame into the index (or its end); its rc when it ended. */
static int index_one(con_replay_t *r)
{
	weft_trace_reader_t *ix = r->ix;
	Weft__V1__Frame *f;
	int rc;

	if (r->indexed)
		return 0;
	rc = weft_trace_reader_next(ix, &f);
	if (rc != 1) {
		index_end(r, rc);
		return rc;
	}
	r->indexed_bytes = ix->dec.offset;
	if (!(r->n & 15))
		progress(r, ix->dec.offset, false);
	/* The header is the reader's (freed on close): a copy is kept, fed
	 * first of all on replay.  Any other frame is ours, a second
	 * FileHeader too (indexed, fed as its hello, freed). */
	if (is_reader_header(ix, f)) {
		if (!r->hello) {
			r->hello = frame_copy(f);
			if (r->im)
				con_model_frame(r->im, r->hello);
		}
		return 1;
	}
	index_add(r, ix->dec.record_offset, f);
	r->side_covered = ix->dec.offset;
	r->last_ns = r->rec[r->n - 1].at;
	/* No more checkpoints (the model is too big, or none wanted), in
	 * memory nor in a side index. */
	if (r->im && r->ckpt_every == UINT64_MAX && !con_replay_side_writing(r))
		con_replay_im_free(r);
	if (r->im) {
		/* As a seek from the start would feed it: the hello, then
		 * records [0, n).  Its checkpoints to the side index, while
		 * one is written; else kept in memory (and the spill file). */
		con_model_frame(r->im, f);
		if (r->side && r->side->writing)
			con_side_step(r, r->im, r->side_covered, ix->skipped);
		else
			con_replay_ckpt_maybe(r, r->im, r->n);
	}
	weft_wire_frame_free(f);
	return 1;
}

bool con_replay_index(con_replay_t *r, uint64_t budget_ns)
{
	uint64_t until = budget_ns == UINT64_MAX ?
				 UINT64_MAX :
				 weft_wire_now_ns() + budget_ns;

	while (!r->indexed) {
		index_one(r);
		if (budget_ns != UINT64_MAX && weft_wire_now_ns() >= until)
			break;
	}
	return r->indexed;
}

/* Index on until a record after @pos_ns is known, or the end. */
static void index_past(con_replay_t *r, uint64_t pos_ns)
{
	while (!r->indexed && (!r->n || r->rec[r->n - 1].at <= pos_ns))
		index_one(r);
}

static bool side_restore(con_replay_t *r, con_model_t *m, size_t i);

/*
 * The side index, when one is kept: a whole one is the index (the
 * trace's header read, nothing else); a part gives the records to its
 * last mark, and the index pass goes on from there with that mark's
 * model.
 */
static void side_open(con_replay_t *r, const struct stat *st)
{
	weft_trace_reader_t *ix = r->ix;
	uint64_t covered = 0, skipped = 0, hdr_end;
	Weft__V1__Frame *f;
	int got = con_side_open(r, st, &covered, &skipped);

	r->side_loaded = got;
	if (!got)
		return;
	/* The hello, from the trace's header. */
	if (weft_trace_reader_next(ix, &f) == 1) {
		if (is_reader_header(ix, f))
			r->hello = frame_copy(f);
		else
			weft_wire_frame_free(f);
	}
	hdr_end = ix->dec.offset;
	r->last_ns = r->n ? r->rec[r->n - 1].at : 0;
	if (got == 1) {
		r->indexed_bytes = r->size;
		weft_trace_reader_close(ix);
		free(ix);
		r->ix = NULL;
		r->indexed = true;
		con_replay_im_free(r);
		return;
	}
	/* A part: on from its mark, with its model. */
	r->side_covered = r->indexed_bytes = covered;
	if (r->hello && r->im && r->side->nck &&
	    side_restore(r, r->im, r->side->nck - 1) &&
	    !weft_trace_reader_seek(ix, covered)) {
		ix->skipped = skipped;
		return;
	}
	/* It does not read back: the whole trace is indexed again, into
	 * a side index started anew (or none, when that fails). */
	r->side_loaded = 0;
	memset(r->warn_bits, 0, r->rec_cap / 64 * sizeof(*r->warn_bits));
	memset(r->batch_bits, 0, r->rec_cap / 64 * sizeof(*r->batch_bits));
	r->n = 0;
	r->first_ns = r->last_ns = 0;
	r->indexed_bytes = 0;
	if (!con_side_anew(r->side, st)) {
		con_side_close(r->side);
		free(r->side);
		r->side = NULL;
	}
	if (r->im) {
		con_model_fini(r->im);
		con_model_init(r->im, "replay");
		r->im->mode = CON_MODE_REPLAY;
		con_model_frame(r->im, r->hello);
	}
	if (!r->hello || weft_trace_reader_seek(ix, hdr_end))
		index_end(r, -EIO);
}

int con_replay_open_lazy(con_replay_t *r, const char *path, uint64_t budget_ns)
{
	weft_trace_reader_t *rd, *ix;
	struct stat st;
	int rc;

	memset(r, 0, sizeof(*r));
	r->spill_fd = -1;
	rc = regular_file(path, &st);
	if (rc)
		return rc;
	rd = con_xmalloc(sizeof(*rd));
	ix = con_xmalloc(sizeof(*ix));
	rc = weft_trace_reader_open(ix, path);
	if (!rc) {
		rc = weft_trace_reader_open(rd, path);
		if (rc)
			weft_trace_reader_close(ix);
	}
	if (rc) {
		fprintf(stderr, "weft-console: %s: %s\n", path, strerror(-rc));
		free(rd);
		free(ix);
		return rc;
	}
	/* rd moves only once its header is read: read it now (the reader's
	 * own frame, or a first record, then ours to free). */
	{
		Weft__V1__Frame *f;

		if (weft_trace_reader_next(rd, &f) == 1 &&
		    !is_reader_header(rd, f))
			weft_wire_frame_free(f);
	}
	r->rd = rd;
	r->ix = ix;
	r->rd_at = SIZE_MAX;
	r->path = path;
	r->size = (uint64_t)st.st_size;
	r->progress = isatty(STDERR_FILENO);
	r->progress_start = r->pass_start = weft_wire_now_ns();
	con_replay_ckpt_config(r);
	if (r->ckpt_budget) {
		r->im = con_xmalloc(sizeof(*r->im));
		con_model_init(r->im, "replay");
		r->im->mode = CON_MODE_REPLAY;
	}
	side_open(r, &st);
	/* The first record at least (the first screen), then as much as
	 * the budget allows. */
	while (!r->indexed && !r->n)
		index_one(r);
	con_replay_index(r, budget_ns);
	con_ahead_open(r);
	if (r->indexed && !r->n && !r->hello) {
		if (r->error) {
			fprintf(stderr, "weft-console: %s: %s\n", path,
				r->error);
			rc = -EINVAL;
		} else {
			fprintf(stderr, "weft-console: %s: empty file\n", path);
			rc = -ENODATA;
		}
		con_replay_close(r);
		return rc;
	}
	r->pos_ns = r->first_ns;
	return 0;
}

int con_replay_open(con_replay_t *r, const char *path)
{
	return con_replay_open_lazy(r, path, UINT64_MAX);
}


void con_replay_close(con_replay_t *r)
{
	con_ahead_close(r);
	if (r->rd) {
		weft_trace_reader_close(r->rd);
		free(r->rd);
	}
	if (r->ix) {
		weft_trace_reader_close(r->ix);
		free(r->ix);
	}
	weft_wire_frame_free(r->hello);
	free(r->rec);
	free(r->warn_bits);
	free(r->batch_bits);
	free(r->error);
	con_replay_ckpt_free_all(r);
	con_replay_im_free(r);
	if (r->side) {
		con_side_close(r->side);
		free(r->side);
	}
	if (r->rd && r->spill_fd >= 0)
		close(r->spill_fd);
	memset(r, 0, sizeof(*r));
}

/*
 * Record @i's frame, read from the file (the caller frees it), or NULL
 * when it no longer reads as it did at open (the file changed).
 */
static Weft__V1__Frame *read_rec(con_replay_t *r, size_t i)
{
	weft_trace_reader_t *rd = r->rd;
	Weft__V1__Frame *f;

	if (r->rd_at != i) {
		r->rd_at = SIZE_MAX;
		if (weft_trace_reader_seek(rd, r->rec[i].off))
			return NULL;
	}
	if (weft_trace_reader_next(rd, &f) != 1) {
		r->rd_at = SIZE_MAX;
		return NULL;
	}
	if (is_reader_header(rd, f) || rd->dec.record_offset != r->rec[i].off) {
		if (!is_reader_header(rd, f))
			weft_wire_frame_free(f);
		r->rd_at = SIZE_MAX;
		return NULL;
	}
	r->rd_at = i + 1;
	return f;
}

/* Record @i no longer reads: the replay ends before it. */
static void cut_at(con_replay_t *r, size_t i)
{
	if (!r->error) {
		char msg[256];

		snprintf(msg, sizeof(msg),
			 "the file changed while replaying (record at byte "
			 "%llu)",
			 (unsigned long long)r->rec[i].off);
		r->error = con_xstrdup(msg);
	}
	r->n = i;
	r->last_ns = i ? r->rec[i - 1].at : r->first_ns;
	if (!r->indexed) {
		weft_trace_reader_close(r->ix);
		free(r->ix);
		r->ix = NULL;
		r->indexed = true;
		con_replay_im_free(r);
	}
	while (r->nckpt && r->ckpt[r->nckpt - 1].next > i)
		con_replay_ckpt_drop(r, --r->nckpt);
	/* The side index's past it too; none written any more (the next
	 * open checks the trace against it again). */
	if (r->side) {
		while (r->side->nck && r->side->ck[r->side->nck - 1].next > i)
			r->side->nck--;
		r->side->writing = false;
	}
}

/* @m becomes the side index's checkpoint @i's model (false: it did not
 * read back, and is dropped). */
static bool side_restore(con_replay_t *r, con_model_t *m, size_t i)
{
	con_model_t got;

	if (!con_side_restore(r->side, i, &got))
		return false;
	con_replay_model_adopt(m, &got);
	return true;
}

/* Records with a time at most @pos_ns: how many (times are sorted). */
static size_t recs_upto(const con_replay_t *r, uint64_t pos_ns)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->rec[mid].at <= pos_ns)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void con_replay_seek(con_replay_t *r, con_model_t *m, uint64_t pos_ns)
{
	size_t want, c;

	/* Ahead of the index pass: from a mark in the trace. */
	if (con_ahead_seek(r, m, pos_ns))
		return;
	index_past(r, pos_ns);
	want = recs_upto(r, pos_ns);
	c = con_replay_ckpt_find(r, want);

	/* From the nearest checkpoint at or before the records wanted (in
	 * memory or in the side index: the later of the two, memory on a
	 * tie), when the model is past them, or behind that checkpoint;
	 * from the start when the model is past them and there is none.  A
	 * side one that does not read back is dropped: the next is tried. */
	for (;;) {
		size_t sc = con_side_before(r->side, want);
		size_t cn = c < r->nckpt ? r->ckpt[c].next : 0;
		bool use_c = c < r->nckpt && (want < r->next || cn > r->next);
		bool use_s =
			r->side && sc < r->side->nck &&
			(want < r->next || r->side->ck[sc].next > r->next) &&
			(!use_c || r->side->ck[sc].next > cn);

		if (use_s) {
			size_t next = r->side->ck[sc].next;

			if (!side_restore(r, m, sc))
				continue;
			r->next = next;
			r->hello_fed = true;
			r->ckpt_restored++;
			r->side_restored++;
			break;
		}
		if (use_c && con_replay_ckpt_restore(r, m, c))
			break;
		if (want < r->next) {
			con_replay_model_reset(m);
			r->next = 0;
			r->hello_fed = false;
		}
		break;
	}
	if (!r->hello_fed) {
		con_model_frame(m, r->hello);
		r->hello_fed = true;
	}
	r->pass_start = weft_wire_now_ns();
	while (r->next < r->n && r->rec[r->next].at <= pos_ns) {
		Weft__V1__Frame *f = read_rec(r, r->next);

		if (!f) {
			cut_at(r, r->next);
			break;
		}
		con_model_frame(m, f);
		weft_wire_frame_free(f);
		r->next++;
		/* Checkpoints of its own where the side index has none. */
		if (!r->side || !r->side->nck)
			con_replay_ckpt_maybe(r, m, r->next);
		if (!(r->next & 15))
			progress(r, r->rec[r->next - 1].off, false);
	}
	progress(r, 0, true);
	r->pos_ns = pos_ns;
}

uint64_t con_replay_next_warning(const con_replay_t *r)
{
	for (size_t i = r->next; i < r->n;) {
		if (!(i % 64) && !r->warn_bits[i / 64]) {
			i += 64;
			continue;
		}
		if (bit_get(r->warn_bits, i))
			return r->rec[i].at;
		i++;
	}
	return 0;
}

uint64_t con_replay_find_warning(con_replay_t *r)
{
	uint64_t at;

	while (!(at = con_replay_next_warning(r)) && !r->indexed)
		con_replay_index(r, CON_INDEX_STEP_NS);
	return at;
}

static int ev_cmp_ts(const void *a, const void *b)
{
	const weft_event_t *x = a, *y = b;

	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/*
 * Walks back from the current position through the event batches,
 * reading each from the file, until @max events of the task are found
 * (batches of different threads overlap in time, so a few more are
 * gathered, then sorted) or the file's start, or 4096 batches back (a
 * detail opened on a quiet task of a big file costs a bounded time).
 * Malformed batches, and any that no longer read, are skipped.
 */
size_t con_replay_task_events(con_replay_t *r, uint64_t id, weft_event_t *out,
			      size_t max)
{
	static weft_event_t ev[WEFT_WIRE_BATCH_MAX];
	size_t cap = 2 * max + 64, n = 0, batches = 0, scanned = 0;
	weft_event_t *got;

	/* Ahead of the index (replay_ahead.c): the batches before the
	 * position are not indexed. */
	if (!id || !max || (r->ahead && r->ahead->active))
		return 0;
	got = con_xcalloc(cap, sizeof(*got));
	for (size_t i = r->next; i-- > 0 && batches < 64 && scanned < 4096;) {
		Weft__V1__Frame *f;
		int k;

		if (!bit_get(r->batch_bits, i))
			continue;
		f = read_rec(r, i);
		if (!f)
			continue;
		if (f->body_case != WEFT__V1__FRAME__BODY_EVENTS ||
		    f->events->count > WEFT_WIRE_BATCH_MAX) {
			weft_wire_frame_free(f);
			continue;
		}
		scanned++;
		k = weft_wire_batch_decode(f->events, ev, f->events->count);
		weft_wire_frame_free(f);
		for (int j = k - 1; j >= 0 && n < cap; j--)
			if (weft_event_task(&ev[j]) == id)
				got[n++] = ev[j];
		/* Once enough are found, a few more batches for the overlap. */
		if (n >= max)
			batches++;
		if (n == cap)
			break;
	}
	qsort(got, n, sizeof(*got), ev_cmp_ts);
	if (n > max) {
		memmove(got, got + (n - max), max * sizeof(*got));
		n = max;
	}
	memcpy(out, got, n * sizeof(*out));
	free(got);
	return n;
}
