/* SPDX-License-Identifier: MIT */
/*
 * Replaying a trace file in bounded memory.  Opening reads the file once
 * and keeps only an index: per record its place in the file, its time
 * (weft_trace_frame_time(): an Update's now, an EventBatch's first
 * stamp; made non-decreasing) and two bits, "an Update with warnings"
 * and "an EventBatch".  The frames themselves are read again from the
 * file as the replay clock reaches them, fed to the model and freed; the
 * reader stays open, and is moved only when the record wanted is not
 * the one it reads next, so playing on reads the file in order.
 *
 * Seeking back rebuilds the model from the first record, keeping its
 * sort and filter: updates carry only changes, so there is no other way
 * to know the state at an earlier time.  (Checkpoints of the model every
 * so often would bound that re-reading; not yet.)
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
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "console.h"

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

/* One more record in the index: the frame @f read at @off. */
static void index_add(con_replay_t *r, size_t *cap, uint64_t off,
		      const Weft__V1__Frame *f)
{
	size_t i = r->n;

	if (i == *cap) {
		size_t words = (*cap ? 2 * *cap : 4096) / 64, old = *cap / 64;

		*cap = words * 64;
		r->rec = con_xreallocarray(r->rec, *cap, sizeof(*r->rec));
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
	r->rec[i].at = weft_trace_frame_time(f);
	if (i && r->rec[i].at < r->rec[i - 1].at)
		r->rec[i].at = r->rec[i - 1].at;
	if (!r->first_ns && r->rec[i].at)
		r->first_ns = r->rec[i].at;
	if (f->body_case == WEFT__V1__FRAME__BODY_UPDATE &&
	    f->update->n_warnings)
		bit_set(r->warn_bits, i);
	if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS &&
	    f->events->count <= WEFT_WIRE_BATCH_MAX)
		bit_set(r->batch_bits, i);
	r->n++;
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

int con_replay_open(con_replay_t *r, const char *path)
{
	weft_trace_reader_t *rd;
	Weft__V1__Frame *f;
	struct stat st;
	size_t cap = 0;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = regular_file(path, &st);
	if (rc)
		return rc;
	rd = con_xmalloc(sizeof(*rd));
	rc = weft_trace_reader_open(rd, path);
	if (rc) {
		fprintf(stderr, "weft-console: %s: %s\n", path, strerror(-rc));
		free(rd);
		return rc;
	}
	r->rd = rd;
	r->rd_at = SIZE_MAX;
	r->path = path;
	r->size = (uint64_t)st.st_size;
	r->progress = isatty(STDERR_FILENO);
	r->progress_start = r->pass_start = weft_wire_now_ns();
	while ((rc = weft_trace_reader_next(rd, &f)) == 1) {
		if (!(r->n & 15))
			progress(r, rd->dec.offset, false);
		/* The header is the reader's (freed on close): a copy is
		 * kept, fed first of all on replay.  Any other frame is
		 * ours, a second FileHeader too (indexed, fed as its hello,
		 * freed). */
		if (is_reader_header(rd, f)) {
			if (!r->hello)
				r->hello = frame_copy(f);
			continue;
		}
		index_add(r, &cap, rd->dec.record_offset, f);
		weft_wire_frame_free(f);
	}
	progress(r, 0, true);
	if (rc < 0) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s (record at byte %llu)",
			 weft_trace_reader_strerror(rc),
			 (unsigned long long)rd->error_offset);
		r->error = con_xstrdup(msg);
		if (!r->n && !r->hello) {
			fprintf(stderr, "weft-console: %s: %s\n", path, msg);
			con_replay_close(r);
			return rc;
		}
	}
	r->truncated = rd->truncated;
	r->skipped = rd->skipped;
	if (!r->n && !r->hello) {
		fprintf(stderr, "weft-console: %s: empty file\n", path);
		con_replay_close(r);
		return -ENODATA;
	}
	r->last_ns = r->n ? r->rec[r->n - 1].at : 0;
	r->pos_ns = r->first_ns;
	return 0;
}

void con_replay_close(con_replay_t *r)
{
	if (r->rd) {
		weft_trace_reader_close(r->rd);
		free(r->rd);
	}
	weft_wire_frame_free(r->hello);
	free(r->rec);
	free(r->warn_bits);
	free(r->batch_bits);
	free(r->error);
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
}

static void model_reset(con_model_t *m)
{
	char *target = con_xstrdup(m->target);
	con_task_col_t col = m->sort_col;
	bool inv = m->sort_invert;
	char filter[sizeof(m->filter)];
	con_mode_t mode = m->mode;
	uint64_t retain = m->retain_ns;
	size_t retain_max = m->retain_max;

	memcpy(filter, m->filter, sizeof(filter));
	con_model_fini(m);
	con_model_init(m, target);
	free(target);
	con_model_set_sort(m, col, inv);
	con_model_set_filter(m, filter);
	m->mode = mode;
	m->retain_ns = retain;
	m->retain_max = retain_max;
}

void con_replay_seek(con_replay_t *r, con_model_t *m, uint64_t pos_ns)
{
	/* Back: from the first record again (no checkpoints yet). */
	if (pos_ns < r->pos_ns && (r->next || r->hello_fed)) {
		model_reset(m);
		r->next = 0;
		r->hello_fed = false;
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

	if (!id || !max)
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
			if (ev[j].task == id)
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
