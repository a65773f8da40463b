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
 * feeding every record before it.  Checkpoints bound that: packed copies
 * of a model (con_model_pack(), model_pack.c: about 30 bytes a task
 * against a deep copy's 290, so about 4 MB for the 115,000 tasks of the
 * big-trace model against 34) every ckpt_every bytes of file
 * (CON_CKPT_EVERY, 8 MiB, at first).  Their packed tasks go to a spill
 * file (unlinked, in $TMPDIR, /var/tmp or /tmp, not a tmpfs:
 * spill_budget bytes of them at most, CON_CKPT_DISK_BUDGET and a quarter
 * of the trace by default, WEFT_CONSOLE_CHECKPOINT_DISK_MB), the rest of
 * each (120-300 KB: the timeline's top polls, the workers' series, the
 * warnings) stays in memory; without that file they all stay in
 * memory.  Their
 * bytes in memory (con_packed_bytes(), less what was spilled) are at most
 * ckpt_budget (CON_CKPT_BUDGET, 128 MiB; WEFT_CONSOLE_CHECKPOINT_MB):
 * before a new one would pass either budget, every other one goes and
 * the spacing doubles, so a file of any size keeps a bounded number,
 * spread over what was read.  They are taken by the index pass, which
 * feeds a model of its own (im) every record it indexes, so that a seek
 * forward into what was never replayed finds one too; and while the
 * replay reads forward (a part replayed again after thinning fills in
 * where the spacing allows).  A seek restores the nearest checkpoint at
 * or before the time wanted, when the model is past it or behind that
 * checkpoint, and reads on from its record; with none there (or one
 * that does not read back), from the first record.  Either way the
 * model keeps the session's title, sort, filter, mode and retention.  A
 * model bigger than the whole budget is not copied.  The price: the
 * index pass runs at the model's speed (about 55 MB/s against 200 for
 * the index alone; the first screen does not wait for it, and a seek
 * past what is indexed waits for the index to get there), and it holds
 * a second model.  A seek reads at most the spacing's worth of file: 16
 * MB at 1 GB (50 checkpoints, 200 MB spilled), 32 MB from 2 to 16 GB
 * (2 GiB spilled at most), 64 MB beyond (tools/bench/README.md, "Big
 * traces").  With a side index, its checkpoints are 32 MiB of file
 * apart at most instead, on disk only.
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

/* The checkpoints' budget: CON_CKPT_BUDGET, or
 * WEFT_CONSOLE_CHECKPOINT_MB MiB (0: no checkpoints). */
static uint64_t env_mb(const char *name, uint64_t dflt)
{
	const char *e = getenv(name);
	char *end;
	unsigned long long mb;

	if (!e || !*e)
		return dflt;
	errno = 0;
	mb = strtoull(e, &end, 10);
	if (errno || *end || mb >= (SIZE_MAX >> 20))
		return dflt;
	return (uint64_t)mb << 20;
}

/*
 * A file for the checkpoints' packed tasks: unlinked from the start (it
 * goes with the process), in $TMPDIR, /var/tmp or /tmp, the first that
 * is not a tmpfs (there the "disk" is memory, and RSS would not show
 * it); -1 when none will do (they stay in memory, under its budget).
 */
static int spill_in(const char *dir)
{
	char path[4096];
	struct statfs fs;
	int fd = -1;

#ifdef O_TMPFILE
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
	if (fd < 0) {
		if ((size_t)snprintf(path, sizeof(path),
				     "%s/weft-console-XXXXXX",
				     dir) >= sizeof(path))
			return -1;
		fd = mkstemp(path);
		if (fd >= 0)
			unlink(path);
	}
	if (fd >= 0 && (fstatfs(fd, &fs) || fs.f_type == TMPFS_MAGIC)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int spill_open(void)
{
	const char *dirs[] = { getenv("TMPDIR"), "/var/tmp", "/tmp" };
	int fd = -1;

	for (size_t i = 0; i < 3 && fd < 0; i++)
		if (dirs[i] && *dirs[i])
			fd = spill_in(dirs[i]);
	return fd;
}

/* The checkpoints' budgets: CON_CKPT_BUDGET in memory, or
 * WEFT_CONSOLE_CHECKPOINT_MB MiB (0: no checkpoints); on disk
 * WEFT_CONSOLE_CHECKPOINT_DISK_MB (0: none, the file not made), or by
 * default CON_CKPT_DISK_BUDGET and at most a quarter of the trace. */
static void ckpt_config(con_replay_t *r)
{
	r->ckpt_budget =
		(size_t)env_mb("WEFT_CONSOLE_CHECKPOINT_MB", CON_CKPT_BUDGET);
	r->ckpt_every = r->ckpt_budget ? CON_CKPT_EVERY : UINT64_MAX;
	r->spill_budget = env_mb("WEFT_CONSOLE_CHECKPOINT_DISK_MB", UINT64_MAX);
	if (r->spill_budget == UINT64_MAX)
		r->spill_budget = r->size / 4 < CON_CKPT_DISK_BUDGET ?
					  r->size / 4 :
					  CON_CKPT_DISK_BUDGET;
	r->spill_fd = -1;
	if (r->ckpt_budget && r->spill_budget)
		r->spill_fd = spill_open();
}

static void ckpt_maybe(con_replay_t *r, const con_model_t *m, size_t next);

/* The index pass's model goes (the index done, or no checkpoints). */
static void im_free(con_replay_t *r)
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
	im_free(r);
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
	if (r->im && r->ckpt_every == UINT64_MAX)
		im_free(r); /* no more checkpoints: the model is too big */
	if (r->im) {
		/* As a seek from the start would feed it: the hello, then
		 * records [0, n).  Its checkpoints to the side index, while
		 * one is written; else kept in memory (and the spill file). */
		con_model_frame(r->im, f);
		if (r->side && r->side->writing)
			con_side_step(r, r->im, r->side_covered, ix->skipped);
		else
			ckpt_maybe(r, r->im, r->n);
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
		im_free(r);
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
	ckpt_config(r);
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

static void ckpt_drop(con_replay_t *r, size_t i);
static void ckpt_free_all(con_replay_t *r);

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
	ckpt_free_all(r);
	im_free(r);
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
		im_free(r);
	}
	while (r->nckpt && r->ckpt[r->nckpt - 1].next > i)
		ckpt_drop(r, --r->nckpt);
	/* The side index's past it too; none written any more (the next
	 * open checks the trace against it again). */
	if (r->side) {
		while (r->side->nck && r->side->ck[r->side->nck - 1].next > i)
			r->side->nck--;
		r->side->writing = false;
	}
}

/* What a model keeps over a reset or a restore: the session's
 * settings (sort, filter, mode, retention). */
typedef struct model_settings_s {
	con_task_col_t col;
	bool inv;
	char filter[sizeof(((con_model_t *)0)->filter)];
	con_mode_t mode;
	uint64_t retain;
	size_t retain_max;
} model_settings_t;

static void settings_get(const con_model_t *m, model_settings_t *st)
{
	st->col = m->sort_col;
	st->inv = m->sort_invert;
	memcpy(st->filter, m->filter, sizeof(st->filter));
	st->mode = m->mode;
	st->retain = m->retain_ns;
	st->retain_max = m->retain_max;
}

static void settings_put(con_model_t *m, const model_settings_t *st)
{
	con_model_set_sort(m, st->col, st->inv);
	con_model_set_filter(m, st->filter);
	m->mode = st->mode;
	m->retain_ns = st->retain;
	m->retain_max = st->retain_max;
}

void con_replay_model_reset(con_model_t *m)
{
	char *target = con_xstrdup(m->target);
	model_settings_t st;

	settings_get(m, &st);
	con_model_fini(m);
	con_model_init(m, target);
	free(target);
	settings_put(m, &st);
}

/* ------------------------------------------------------- checkpoints */

/* @c's memory freed, its blocks in the spill file given back (the
 * file's length stays; where punching fails they stay until the file
 * goes: the budget counts what is live). */
static void ckpt_release(con_replay_t *r, con_replay_ckpt_t *c)
{
	if (c->spilled)
		(void)fallocate(r->spill_fd,
				FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)c->spill_off, (off_t)c->pk.len);
	con_packed_free(&c->pk);
}

static void ckpt_drop(con_replay_t *r, size_t i)
{
	con_replay_ckpt_t *c = &r->ckpt[i];

	r->ckpt_bytes -= c->bytes;
	if (c->spilled)
		r->spill_bytes -= c->pk.len;
	ckpt_release(r, c);
}

static void ckpt_free_all(con_replay_t *r)
{
	for (size_t i = 0; i < r->nckpt; i++)
		ckpt_drop(r, i);
	free(r->ckpt);
	r->ckpt = NULL;
	r->nckpt = r->ckpt_cap = 0;
}

/*
 * Room for @extra more bytes in the budget: every other checkpoint goes
 * (the first stays) and the spacing doubles, as often as needed (the
 * last one too, when it and @extra do not fit together).
 */
static void ckpt_thin(con_replay_t *r, size_t extra, uint64_t extra_disk)
{
	while (r->nckpt && (r->ckpt_bytes + extra > r->ckpt_budget ||
			    r->spill_bytes + extra_disk > r->spill_budget)) {
		size_t k = 0;

		for (size_t i = 0; i < r->nckpt; i++) {
			if (i % 2 || r->nckpt == 1) {
				ckpt_drop(r, i);
				r->ckpt_thinned++;
			} else {
				r->ckpt[k++] = r->ckpt[i];
			}
		}
		r->nckpt = k;
		r->ckpt_every = r->ckpt_every > UINT64_MAX / 2 ?
					UINT64_MAX - 1 :
					2 * r->ckpt_every;
	}
}

void con_replay_checkpoints(con_replay_t *r, size_t budget)
{
	r->ckpt_budget = budget;
	ckpt_thin(r, 0, 0);
	if (!budget) {
		r->ckpt_every = UINT64_MAX;
		im_free(r);
	} else if (r->ckpt_every == UINT64_MAX) {
		r->ckpt_every = CON_CKPT_EVERY;
	}
}

size_t con_replay_ckpt_before(const void *ckpts, size_t n, size_t size,
			      size_t next)
{
	const char *a = ckpts;
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		size_t at;

		memcpy(&at, a + mid * size, sizeof(at));
		if (at <= next)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : n;
}

/* The last checkpoint at or before record count @next (nckpt: none). */
static size_t ckpt_before(const con_replay_t *r, size_t next)
{
	static_assert(offsetof(con_replay_ckpt_t, next) == 0,
		      "con_replay_ckpt_before() reads next first");
	return con_replay_ckpt_before(r->ckpt, r->nckpt, sizeof(*r->ckpt),
				      next);
}

/* The file's offset of record count @next (0 for the start). */
static uint64_t ckpt_off(const con_replay_t *r, size_t next)
{
	return next ? r->rec[next - 1].off : 0;
}

/*
 * A checkpoint due at r->next: the nearest ones either side are at least
 * ckpt_every bytes of file away (a part replayed again after a seek back
 * fills in what thinning left out only where the spacing allows); *@at
 * is where it goes in the array.
 */
static bool ckpt_due(const con_replay_t *r, size_t next, size_t *at)
{
	size_t i = ckpt_before(r, next);
	uint64_t off = ckpt_off(r, next);

	if (off - (i < r->nckpt ? ckpt_off(r, r->ckpt[i].next) : 0) <
	    r->ckpt_every)
		return false;
	if (i < r->nckpt && r->ckpt[i].next == next)
		return false;
	*at = i < r->nckpt ? i + 1 : 0;
	return *at >= r->nckpt ||
	       ckpt_off(r, r->ckpt[*at].next) - off >= r->ckpt_every;
}

/*
 * After record @next - 1 was fed to @m (the session's model, or the
 * index pass's): a checkpoint of @m when one is due, the budget thinned
 * first to make room (the spacing doubles, so it may no longer be due).
 * The checkpoints' bytes never pass the budget; a model bigger than the
 * whole budget stops them (those kept stay).
 */
static void ckpt_maybe(con_replay_t *r, const con_model_t *m, size_t next)
{
	con_replay_ckpt_t c = { .next = next };
	size_t at;
	uint64_t disk = 0;

	if (r->ckpt_every == UINT64_MAX || !ckpt_due(r, next, &at))
		return;
	/* Room made first, by the last one's size (a pack costs a pass
	 * over the tasks: not one made to be thrown away), then checked
	 * again by its own. */
	if (r->ckpt_bytes + r->ckpt_last_mem > r->ckpt_budget ||
	    r->spill_bytes + r->ckpt_last_disk > r->spill_budget) {
		ckpt_thin(r, r->ckpt_last_mem, r->ckpt_last_disk);
		if (!ckpt_due(r, next, &at))
			return;
	}
	con_model_pack(&c.pk, m);
	c.bytes = con_packed_bytes(&c.pk);
	/* Its blob to the spill file when there is room (it was not made,
	 * or a write fails: in memory). */
	if (r->spill_fd >= 0 && c.pk.len <= r->spill_budget &&
	    pwrite(r->spill_fd, c.pk.blob, c.pk.len, (off_t)r->spill_end) ==
		    (ssize_t)c.pk.len) {
		c.spilled = true;
		c.spill_off = r->spill_end;
		r->spill_end += c.pk.len;
		c.bytes -= c.pk.len;
		disk = c.pk.len;
		free(c.pk.blob);
		c.pk.blob = NULL;
	}
	if (c.bytes > r->ckpt_budget) {
		r->ckpt_every = UINT64_MAX; /* those kept stay */
		ckpt_release(r, &c);
		return;
	}
	if (r->ckpt_bytes + c.bytes > r->ckpt_budget ||
	    r->spill_bytes + disk > r->spill_budget) {
		ckpt_thin(r, c.bytes, disk);
		if (!ckpt_due(r, next, &at)) {
			ckpt_release(r, &c);
			return;
		}
	}
	if (r->nckpt == r->ckpt_cap) {
		r->ckpt_cap = r->ckpt_cap ? 2 * r->ckpt_cap : 16;
		r->ckpt = con_xreallocarray(r->ckpt, r->ckpt_cap,
					    sizeof(*r->ckpt));
	}
	memmove(r->ckpt + at + 1, r->ckpt + at,
		(r->nckpt - at) * sizeof(*r->ckpt));
	r->ckpt[at] = c;
	r->nckpt++;
	r->ckpt_bytes += c.bytes;
	r->spill_bytes += disk;
	r->ckpt_last_mem = c.bytes;
	r->ckpt_last_disk = disk;
	r->ckpt_taken++;
	if (r->ckpt_bytes > r->ckpt_peak)
		r->ckpt_peak = r->ckpt_bytes;
}

/* @m becomes @got (a checkpoint's model, taken), keeping its own
 * settings and title. */
static void adopt(con_model_t *m, con_model_t *got)
{
	model_settings_t st;

	settings_get(m, &st);
	/* The session's title, not the one the copy was taken with (the
	 * index pass's model). */
	free(got->target);
	got->target = m->target;
	m->target = NULL;
	con_model_fini(m);
	*m = *got;
	settings_put(m, &st);
	/* The watched task: none, as after a reset (the session watches
	 * again and fills it from the file). */
	m->watch_task = 0;
	m->nwatch = 0;
}

/* @m becomes checkpoint @i's model, keeping its own settings. */
static bool ckpt_restore(con_replay_t *r, con_model_t *m, size_t i)
{
	con_replay_ckpt_t *c = &r->ckpt[i];
	con_model_t got;
	bool ok;

	if (c->spilled) {
		/* Its blob read back for the while. */
		c->pk.blob = con_xmalloc(c->pk.len ? c->pk.len : 1);
		ok = pread(r->spill_fd, c->pk.blob, c->pk.len,
			   (off_t)c->spill_off) == (ssize_t)c->pk.len &&
		     con_model_unpack(&got, &c->pk);
		free(c->pk.blob);
		c->pk.blob = NULL;
	} else {
		ok = con_model_unpack(&got, &c->pk);
	}
	if (!ok)
		return false;
	adopt(m, &got);
	r->next = r->ckpt[i].next;
	r->hello_fed = true;
	r->ckpt_restored++;
	return true;
}

/* @m becomes the side index's checkpoint @i's model (false: it did not
 * read back, and is dropped). */
static bool side_restore(con_replay_t *r, con_model_t *m, size_t i)
{
	con_model_t got;

	if (!con_side_restore(r->side, i, &got))
		return false;
	adopt(m, &got);
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
	c = ckpt_before(r, want);

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
		if (use_c && ckpt_restore(r, m, c))
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
			ckpt_maybe(r, m, r->next);
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
