/* SPDX-License-Identifier: MIT */
/*
 * The recorder (weft/trace.h): a probe subscriber that turns each
 * collector pass into records (one EventBatch per emitting thread; an
 * Update every update_ms, through a delta stream: delta_internal.h) and
 * writes them to a trace file, or keeps the last N bytes or seconds of
 * them in memory (the flight recorder).
 *
 * Threads.  The callbacks run on the collector thread with probe.lock
 * held; everything here is guarded by rec.lock.  Lock order: probe.lock,
 * then rec.lock.  So start, stop and snapshot never call into the probe
 * (subscribe, flush, unsubscribe) while holding rec.lock; the state
 * field keeps a second start or stop out meanwhile.
 *
 * The file.  The first record is a FileHeader (magic, format version,
 * hello); records are whole when they reach the file, so a crash leaves
 * a file that reads up to its last whole record.  Writes happen on the
 * collector thread every flush interval (or sooner when much is
 * buffered): the runtime's threads never wait for the disk.  On rotation
 * (once a file has max_file_bytes) path.N starts with its own header,
 * names again the tasks it mentions, and gets an update with every task
 * (while such an update is under a quarter of a file): read alone, it
 * names the tasks that wait unchanged through it too.  Every 16 MB or
 * more of a file, a checkpoint: a full update after a mark a reader
 * finds from any offset (recorder_ckpt.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weft/metrics.h"
#include "weft/time.h"
#include "weft/trace.h"

#include "abi_internal.h"
#include "collector.h"
#include "delta_internal.h"
#include "probe_internal.h"
#include "recorder_internal.h"
#include "weft/trace_reader.h"
#include "weft/wire.h"

#define FLUSH_DEFAULT_MS 250u
/* Write out before the interval once this much is buffered. */
#define FLUSH_EARLY_BYTES (4u << 20)
/* Flight-recorder memory comes in chunks of whole records. */
#define FLIGHT_CHUNK (256u << 10)
/* A flight recorder bounded by time alone keeps at most this much. */
#define FLIGHT_TIME_ONLY_CAP (512ull << 20)
/* Update records at most this often unless the options say otherwise. */
#define UPDATE_DEFAULT_MS 100u
/* A file that waits for its first update ends anyway at this many times
 * max_file_bytes (flush_out()). */
#define FILE_WAIT_MAX 4u

enum rec_state { REC_IDLE, REC_STARTING, REC_RUNNING, REC_STOPPING };

struct chunk {
	struct chunk *next;
	uint64_t first_ns; /* when its oldest record was added */
	uint64_t last_ns;  /* when its newest record was added */
	weft_wire_buf_t buf;
};

static struct recorder {
	pthread_mutex_t lock;
	enum rec_state state;
	weft_probe_sub_t *sub;
	weft_trace_opts_t opts;
	char *path;
	int fd;
	unsigned segment;
	uint64_t file_bytes;
	weft_wire_buf_t out; /* records not yet written */
	uint64_t last_flush_ns;
	weft_delta_t delta; /* the Update records: interval, thinning */
	bool header_done;
	bool hello_ready;
	bool want_full; /* a new segment: ask the collector for every task */
	/* This file holds an update: it may end (flush_out()). */
	bool file_updated;
	/* The last full update: its records' size and its task count, for
	 * an estimate of the next one's (rec_want_full()). */
	size_t last_full_bytes;
	size_t last_full_tasks;
	weft_rec_ckpt_t ckpt; /* a file's checkpoint marks (recorder_ckpt.c) */
	weft_wire_hello_t hello;
	weft_wire_events_t enc;
	int error;                 /* the first write error */
	bool said;                 /* a write error was said on stderr */
	unsigned start_workers;    /* of the runtime known at start, if any */
	struct chunk *head, *tail; /* flight recorder, oldest first */
	uint64_t flight_total;
} rec = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.fd = -1,
};

/*
 * What weft_trace_stats() reads, from any thread and without rec.lock
 * (which the collector holds across its writes to the disk: a slow disk
 * must not stall a metrics scrape).  Written only under rec.lock, so one
 * writer at a time (counter_add()'s contract); read relaxed: each value
 * whole, the set not taken at one instant, which statistics do not
 * need, and nothing else is published through them.
 */
static struct {
	weft_counter_t bytes_written;
	weft_counter_t bytes_lost;
	weft_counter_t write_errors;
	_Atomic int error;
} counts;

static bool flight_mode(void)
{
	return rec.opts.flight_bytes != 0 || rec.opts.flight_ms != 0;
}

/* A write failed (write_failed()): the recording writes no more, and its
 * callbacks encode nothing until weft_trace_stop(). */
static bool writing_stopped(void)
{
	return !flight_mode() && rec.fd < 0;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void note_error(int err)
{
	if (err && !rec.error) {
		rec.error = err;
		/* Relaxed: a statistic (counts' comment). */
		store_relaxed(&counts.error, err);
	}
}

/* The hello, once: called with rec.lock held, and in a collector callback
 * when @in_callback (weft__sub_hello() then reads the described runtime). */
static void hello_ready(bool in_callback)
{
	unsigned workers = 0;
	uint64_t start_ns = weft_now_ns();

	if (rec.hello_ready)
		return;
	if (in_callback)
		weft__sub_hello(&workers, &start_ns);
	if (workers < rec.start_workers)
		workers = rec.start_workers;
	if (weft_wire_hello_init(&rec.hello, workers,
				 weft__probe_clock_describe(), start_ns))
		note_error(-ENOMEM);
	rec.hello_ready = true;
}

static char *segment_path(unsigned seg)
{
	size_t n = strlen(rec.path) + 16;
	char *p = malloc(n);

	if (!p)
		return NULL;
	if (seg)
		snprintf(p, n, "%s.%u", rec.path, seg);
	else
		snprintf(p, n, "%s", rec.path);
	return p;
}

static void write_failed(int err, size_t lost);

/* Closes the current file and opens the next, headed. */
static int rotate(void)
{
	weft_wire_buf_t hdr = { 0 };
	char *path;
	int err;

	close(rec.fd);
	rec.fd = -1;
	rec.segment++;
	if (rec.opts.max_files && rec.segment >= rec.opts.max_files) {
		char *old = segment_path(rec.segment - rec.opts.max_files);

		if (old)
			unlink(old);
		free(old);
	}
	path = segment_path(rec.segment);
	if (!path)
		return -ENOMEM;
	rec.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (rec.fd < 0) {
		/* Recording stops as for a failed write: said once. */
		err = -errno;
		fprintf(stderr,
			"weft: trace: opening %s: %s; recording stopped, the "
			"files before it whole\n",
			path, strerror(-err));
		rec.said = true;
		counter_inc(&counts.write_errors);
		free(path);
		return err;
	}
	free(path);
	rec.file_bytes = 0;
	rec.file_updated = false;
	/*
	 * Names and files again in the records still to come, and every
	 * task in the next update (rec_want_full()): a segment read alone
	 * names the tasks that wait all along as well as those that change.
	 */
	weft__delta_forget(&rec.delta);
	rec.want_full = true;
	weft__rec_ckpt_new_file(&rec.ckpt);
	err = weft_wire_header_append(&hdr, &rec.hello.msg, rec.segment);
	if (!err) {
		err = write_all(rec.fd, hdr.data, hdr.len);
		if (err) {
			write_failed(err, hdr.len);
			err = 0; /* noted, said */
		} else {
			rec.file_bytes += hdr.len;
			counter_add(&counts.bytes_written, hdr.len);
		}
	}
	weft_wire_buf_fini(&hdr);
	return err;
}

/*
 * A write into the file failed (a full disk, a quota, EFBIG, EIO): the
 * file is cut back to its last whole record (rec.file_bytes, the size
 * before the write; a short write leaves part of a record, which a
 * reader would take for the file's corruption), closed, and recording
 * stops with one line on stderr.  weft_trace_stop() returns the error;
 * weft_trace_start() afterwards records anew (into a new file, or this
 * one continued: weft_trace_continue()).  What the probe sends until
 * then is not even encoded (writing_stopped()).  @lost: the bytes the
 * failed write held, which no file has.
 */
static void write_failed(int err, size_t lost)
{
	char *path = segment_path(rec.segment);
	bool cut = ftruncate(rec.fd, (off_t)rec.file_bytes) == 0;

	note_error(err);
	rec.said = true;
	counter_inc(&counts.write_errors);
	counter_add(&counts.bytes_lost, lost);
	close(rec.fd);
	rec.fd = -1;
	fprintf(stderr,
		"weft: trace: writing %s: %s; recording stopped, %llu bytes "
		"kept%s\n",
		path ? path : rec.path, strerror(-err),
		(unsigned long long)rec.file_bytes,
		cut ? " (up to its last whole record)" :
		      " (could not cut the partial record off)");
	free(path);
}

/* @last: the recording's last write (no file after it). */
static void flush_out(uint64_t now, bool last)
{
	int err;

	rec.last_flush_ns = now;
	if (rec.fd < 0 || !rec.out.len) {
		rec.out.len = 0;
		return;
	}
	err = write_all(rec.fd, rec.out.data, rec.out.len);
	if (err) {
		write_failed(err, rec.out.len);
		rec.out.len = 0;
		return;
	}
	rec.file_bytes += rec.out.len;
	counter_add(&counts.bytes_written, rec.out.len);
	rec.out.len = 0;
	/*
	 * The next file once this one has max_file_bytes, after the write:
	 * what was encoded for this file (updates that leave out the names
	 * it already has) stays in it, and the next one gets records encoded
	 * for it.  A file passes the limit by what one flush wrote: a
	 * quarter of the limit at most when flushed early, or one
	 * callback's records (a big update goes whole).  Not after the last
	 * write: no empty file follows it.
	 *
	 * And not before the file holds an update (the one a rotation asks
	 * for, which names every site and, small enough, every task): a
	 * pass's drain that filled a file and then the next would leave that
	 * one events only, whose polls and tasks a reader of it alone could
	 * not name (test_trace_file_await_sites_rotated failed so, under
	 * TSan, one run in four).  The update comes at the end of the pass,
	 * or within update_ms; a file that waits passes the limit by that
	 * pass's events, and by FILE_WAIT_MAX times the limit at most.
	 */
	if (!last && rec.opts.max_file_bytes &&
	    rec.file_bytes >= rec.opts.max_file_bytes && rec.header_done &&
	    (rec.file_updated ||
	     rec.file_bytes >= FILE_WAIT_MAX * rec.opts.max_file_bytes))
		note_error(rotate());
}

static void maybe_flush(void)
{
	uint64_t now = weft_now_ns();
	uint64_t every = (uint64_t)(rec.opts.flush_ms ? rec.opts.flush_ms :
							FLUSH_DEFAULT_MS) *
			 1000000u;
	uint64_t early = FLUSH_EARLY_BYTES;

	if (rec.opts.max_file_bytes && rec.opts.max_file_bytes / 4 < early)
		early = rec.opts.max_file_bytes / 4;
	if (now - rec.last_flush_ns >= every || rec.out.len >= early)
		flush_out(now, false);
}

/* Where records go: the file's buffer, or the flight recorder's tail. */
static weft_wire_buf_t *sink(void)
{
	uint64_t now, span = (uint64_t)rec.opts.flight_ms * 1000000u / 8;
	struct chunk *c;

	if (!flight_mode())
		return &rec.out;
	now = weft_now_ns();
	/* A chunk spans at most an eighth of flight_ms, so that time-based
	 * trimming keeps about what it should. */
	if (rec.tail && rec.tail->buf.len < FLIGHT_CHUNK &&
	    (!span || now - rec.tail->first_ns < span)) {
		rec.tail->last_ns = now;
		return &rec.tail->buf;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->first_ns = c->last_ns = now;
	if (rec.tail)
		rec.tail->next = c;
	else
		rec.head = c;
	rec.tail = c;
	return &c->buf;
}

/*
 * Forgets the oldest chunks beyond the flight recorder's budget: the
 * chunks that hold flight_bytes without them, and those whose newest
 * record is older than flight_ms (chunks go whole, so a little more than
 * the budget stays).
 */
static void flight_trim(void)
{
	uint64_t total = 0, bytes = rec.opts.flight_bytes, now = weft_now_ns();
	uint64_t keep_ns = (uint64_t)rec.opts.flight_ms * 1000000u;

	if (!bytes)
		bytes = FLIGHT_TIME_ONLY_CAP;
	for (struct chunk *c = rec.head; c; c = c->next)
		total += c->buf.len;
	while (rec.head && rec.head != rec.tail &&
	       (total - rec.head->buf.len >= bytes ||
		(keep_ns && rec.head->last_ns + keep_ns < now))) {
		struct chunk *c = rec.head;

		total -= c->buf.len;
		rec.head = c->next;
		weft_wire_buf_fini(&c->buf);
		free(c);
	}
	rec.flight_total = total;
}

static void ensure_header(bool probe_locked)
{
	if (rec.header_done)
		return;
	hello_ready(probe_locked);
	if (!flight_mode())
		note_error(
			weft_wire_header_append(&rec.out, &rec.hello.msg, 0));
	rec.header_done = true;
}

static void encode_run(const weft_event_t *ev, size_t n)
{
	while (n) {
		weft_wire_buf_t *b = sink();
		int k = weft_wire_batch_encode(&rec.enc.batch, ev, n);

		if (k <= 0 || !b) {
			note_error(-ENOMEM);
			return;
		}
		note_error(weft_wire_batch_append(b, &rec.enc.batch.msg));
		ev += k;
		n -= (size_t)k;
	}
}

/* Copies whole records (the pass's events, encoded once for every
 * subscriber), each where sink() says: a flight chunk holds whole ones. */
static void copy_records(const uint8_t *r, size_t len)
{
	while (len) {
		size_t k = flight_mode() ? weft_wire_record_len(r, len) : len;
		weft_wire_buf_t *b = sink();

		if (!k) {
			note_error(-EBADMSG); /* not whole records: a bug */
			return;
		}
		if (!b || weft_wire_buf_reserve(b, k)) {
			note_error(-ENOMEM);
			return;
		}
		memcpy(b->data + b->len, r, k);
		b->len += k;
		r += k;
		len -= k;
	}
}

/*
 * After a rotation: the recorder's next update is a full one.  In the
 * callbacks only (probe.lock and rec.lock held), which is where the
 * subscription's flag may be written; the update comes with the next
 * pass at the latest.
 */
/*
 * What a full update would take now: the last one's size a task, times
 * the tasks the collector holds now (probe.lock held).  Not the last
 * one's size alone: one made in a burst of tasks would then stop every
 * later request, though the burst's tasks are long gone.
 */
static size_t full_estimate(void)
{
	if (!rec.last_full_tasks)
		return rec.last_full_bytes;
	return rec.last_full_bytes / rec.last_full_tasks * weft__sub_tasks_held();
}

static void rec_want_full(void)
{
	/* A checkpoint due (recorder_ckpt.c): a full update naming every
	 * live task, marked when it comes. */
	if (!rec.want_full && rec.sub && !flight_mode() &&
	    weft__rec_ckpt_want(&rec.ckpt, rec.file_bytes + rec.out.len)) {
		weft__sub_want_full(rec.sub);
		weft__sub_seed_whole_locked();
	}
	if (rec.want_full && rec.sub) {
		/*
		 * Only while a full update is small beside a file: one that
		 * filled a file would start the next, which would ask for
		 * another, and so on, a file a pass (every task, finished
		 * ones too, can make megabytes).  Larger, the new file names
		 * the tasks that change in it, as before.
		 */
		if (full_estimate() <= rec.opts.max_file_bytes / 4) {
			weft__sub_want_full(rec.sub);
			weft__sub_seed_whole_locked();
		}
		rec.want_full = false;
	}
}

static void on_events(void *ctx, const weft_event_t *ev, size_t n)
{
	const weft_event_t *g;
	const uint8_t *r;
	size_t len;
	int err;

	(void)ctx;
	pthread_mutex_lock(&rec.lock);
	if (rec.state == REC_IDLE || writing_stopped())
		goto out_unlock;
	ensure_header(true);
	err = weft__sub_event_records(ev, n, &r, &len);
	if (err != -EINVAL) {
		note_error(err);
		copy_records(r, len);
		goto out_trim;
	}
	/* The batch is in time order across threads: one run per emitting
	 * thread, each in its order. */
	g = weft_wire_events_group(&rec.enc, ev, n);
	if (!g) {
		note_error(-ENOMEM);
		goto out_unlock;
	}
	encode_run(g, n);
out_trim:
	if (flight_mode())
		flight_trim();
	else
		maybe_flush();
	rec_want_full();
out_unlock:
	pthread_mutex_unlock(&rec.lock);
}

static const weft_probe_task_t *rec_lookup(uint64_t id)
{
	/* In the collector's callbacks: probe.lock is held. */
	return weft__sub_task(id);
}

/* A full update's records in the file's buffer from @before: its mark
 * (recorder_ckpt.c). */
static void mark_full(weft_wire_buf_t *b, size_t before,
		      const weft_probe_update_t *u)
{
	const weft_probe_task_t *const *t;
	const weft_probe_resource_t *const *res;
	size_t changed, nres;

	weft__sub_pass_changes(&t, &changed, &res, &nres);
	note_error(weft__rec_ckpt_mark(
		&rec.ckpt, b, before, rec.file_bytes + before,
		u->stats ? u->stats->now_ns : 0, u->ntasks, changed));
}

static void on_update(void *ctx, const weft_probe_update_t *u)
{
	weft_wire_buf_t *b;
	bool full;
	int rc;

	(void)ctx;
	pthread_mutex_lock(&rec.lock);
	if (rec.state == REC_IDLE || writing_stopped())
		goto out_unlock;
	ensure_header(true);
	b = sink();
	if (!b) {
		note_error(-ENOMEM);
	} else {
		size_t before = b->len;

		/* Its records shared with the server's streams (delta.c). */
		rec.delta.pass_seq = weft__sub_publish_seq();
		rc = weft__delta_pass(&rec.delta, u, b, &full);
		if (rc < 0)
			note_error(rc);
		/* In rec.out, it goes into the file open now. */
		if (rc > 0 && !flight_mode())
			rec.file_updated = true;
		if (rc > 0 && full) {
			size_t len = b->len - before;

			/* Its tasks' bytes: not the warnings kept since the
			 * last update that it carried too (a new
			 * subscription's history, a burst's), which the next
			 * full one will not, and which, taken for one task's,
			 * kept the next file from a full update. */
			rec.last_full_bytes =
				len > rec.delta.full_warn_bytes ?
					len - rec.delta.full_warn_bytes :
					0;
			rec.last_full_tasks = u->ntasks;
			/* In a file, after its mark (b is rec.out, written
			 * at file_bytes). */
			if (!flight_mode())
				mark_full(b, before, u);
		}
	}
	if (flight_mode())
		flight_trim();
	else
		maybe_flush();
	rec_want_full();
out_unlock:
	pthread_mutex_unlock(&rec.lock);
}

/* Frees what a recording holds; rec.lock held. */
static void release(void)
{
	if (rec.fd >= 0)
		close(rec.fd);
	rec.fd = -1;
	while (rec.head) {
		struct chunk *c = rec.head;

		rec.head = c->next;
		weft_wire_buf_fini(&c->buf);
		free(c);
	}
	rec.tail = NULL;
	rec.flight_total = 0;
	weft_wire_buf_fini(&rec.out);
	weft_wire_events_fini(&rec.enc);
	weft__delta_fini(&rec.delta);
	if (rec.hello_ready)
		weft_wire_hello_fini(&rec.hello);
	rec.hello_ready = false;
	rec.header_done = false;
	rec.want_full = false;
	rec.last_full_bytes = 0;
	rec.last_full_tasks = 0;
	free(rec.path);
	rec.path = NULL;
	rec.sub = NULL;
}

/*
 * Where the trace at @path ends whole, for weft_trace_continue(): read
 * through once, as weft-trace reads it (torn records skipped, a cut one
 * at the end left out).  Return: the offset (0: empty or absent), or a
 * negative errno: -EPROTO (not a weft trace, or cut inside its header:
 * nothing to continue), -ESRCH (another process's
 * recording), -ENOMEM, the reader's (a record that does not read and
 * has whole records after it too far to resynchronise), open(2)'s.
 */
static int64_t whole_end(const char *path)
{
	weft_trace_reader_t *r = malloc(sizeof(*r));
	Weft__V1__Frame *f;
	int64_t end = 0;
	int rc;

	if (!r)
		return -ENOMEM;
	rc = weft_trace_reader_open(r, path);
	if (rc) {
		free(r);
		return rc == -ENOENT ? 0 : rc;
	}
	while ((rc = weft_trace_reader_next(r, &f)) == 1) {
		end = (int64_t)r->dec.offset;
		if (f != r->header_frame)
			weft_wire_frame_free(f);
	}
	/* No header: empty, or bytes that are no trace (one cut inside its
	 * header too: nothing to continue). */
	if (!rc && !r->frames && (r->truncated || r->dec.offset))
		rc = -EPROTO;
	if (!rc && r->header &&
	    (!r->header->hello || r->header->hello->pid != (uint32_t)getpid()))
		rc = -ESRCH;
	weft_trace_reader_close(r);
	free(r);
	return rc < 0 ? rc : end;
}

/* weft_trace_start(), or weft_trace_continue() when @append. */
static int start(const char *path, const weft_trace_opts_t *opts, bool append)
{
	weft_probe_sub_opts_t so = {
		.events = true,
		.on_events = on_events,
		.on_update = on_update,
	};
	weft_probe_sub_t *sub;
	unsigned workers;
	int err = 0;

	if (opts &&
	    !weft__reserved_zero(opts->reserved_, sizeof(opts->reserved_)))
		return -EINVAL;
	if (!WEFT_PROBE)
		return -ENOTSUP;
	if (weft__in_collector)
		return -EDEADLK; /* a callback: it would subscribe */
	pthread_mutex_lock(&rec.lock);
	if (rec.state != REC_IDLE) {
		pthread_mutex_unlock(&rec.lock);
		return -EBUSY;
	}
	memset(&rec.opts, 0, sizeof(rec.opts));
	if (opts)
		rec.opts = *opts;
	if ((!path && !flight_mode()) ||
	    (append && (!path || flight_mode() || rec.opts.max_file_bytes))) {
		pthread_mutex_unlock(&rec.lock);
		return -EINVAL;
	}
	rec.error = 0;
	rec.said = false;
	/* Relaxed: a statistic (counts' comment). */
	store_relaxed(&counts.error, 0);
	rec.start_workers = 0;
	rec.segment = 0;
	rec.file_bytes = 0;
	rec.file_updated = false;
	rec.last_flush_ns = weft_now_ns();
	weft_wire_events_init(&rec.enc);
	weft__delta_init(&rec.delta);
	weft__rec_ckpt_start(&rec.ckpt);
	if (flight_mode())
		rec.ckpt.every = 0; /* a snapshot is small: no marks */
	rec.delta.interval_ns = (uint64_t)(rec.opts.update_ms ?
						   rec.opts.update_ms :
						   UPDATE_DEFAULT_MS) *
				1000000u;
	rec.delta.lookup = rec_lookup;
	rec.delta.lookup_ahead = weft__sub_task_ahead;
	rec.delta.site = weft__sub_site;
	rec.delta.await_site = weft__sub_await_site;
	rec.delta.await_known = weft__sub_await_known;
	if (path) {
		rec.path = strdup(path);
		if (!rec.path) {
			err = -ENOMEM;
			goto out_release;
		}
	}
	if (!flight_mode()) {
		/* Under rec.lock, state idle: no callback of ours runs, and
		 * nobody waits for the lock but a start, stop or snapshot. */
		int64_t end = append ? whole_end(path) : 0;

		if (end < 0) {
			err = (int)end;
			goto out_release;
		}
		rec.fd = open(path,
			      O_WRONLY | O_CREAT | O_CLOEXEC |
				      (end ? 0 : O_TRUNC),
			      0644);
		if (rec.fd < 0) {
			err = -errno;
			goto out_release;
		}
		/* Continued: cut back to its last whole record, written
		 * on from there under its own header. */
		if (end && (ftruncate(rec.fd, (off_t)end) ||
			    lseek(rec.fd, (off_t)end, SEEK_SET) < 0)) {
			err = -errno;
			goto out_release;
		}
		rec.file_bytes = (uint64_t)end;
		rec.header_done = end > 0;
	}
	rec.state = REC_STARTING;
	pthread_mutex_unlock(&rec.lock);

	/* The hello's worker count, in case the first pass comes after the
	 * runtime is gone (a short program).  Lock order: probe.lock alone. */
	workers = weft__probe_workers();
	pthread_mutex_lock(&rec.lock);
	rec.start_workers = workers;
	pthread_mutex_unlock(&rec.lock);

	/* Outside rec.lock: subscribing takes probe.lock (lock order).
	 * The file's first full update names every live task, a seed of
	 * many over several passes (a console's) ended first. */
	weft__sub_seed_whole();
	err = weft_probe_subscribe(&so, &sub);
	pthread_mutex_lock(&rec.lock);
	if (err)
		goto out_release;
	rec.sub = sub;
	rec.state = REC_RUNNING;
	pthread_mutex_unlock(&rec.lock);
	return 0;

out_release:
	release();
	rec.state = REC_IDLE;
	pthread_mutex_unlock(&rec.lock);
	return err;
}

int weft_trace_start(const char *path, const weft_trace_opts_t *opts)
{
	return start(path, opts, false);
}

int weft_trace_continue(const char *path, const weft_trace_opts_t *opts)
{
	return start(path, opts, true);
}

void weft_trace_stats(weft_trace_stats_t *out)
{
	/* Relaxed loads: statistics (counts' comment). */
	memset(out, 0, sizeof(*out));
	out->bytes_written = load_relaxed(&counts.bytes_written);
	out->bytes_lost = load_relaxed(&counts.bytes_lost);
	out->write_errors = load_relaxed(&counts.write_errors);
	out->error = load_relaxed(&counts.error);
}

/* weft_trace_stop(); *@said: its error was said on stderr already. */
static int stop(bool *said)
{
	weft_probe_sub_t *sub;
	int err;

	*said = false;
	if (weft__in_collector)
		return -EDEADLK; /* a callback: it would unsubscribe */
	pthread_mutex_lock(&rec.lock);
	if (rec.state != REC_RUNNING) {
		pthread_mutex_unlock(&rec.lock);
		return -ENOENT;
	}
	rec.state = REC_STOPPING;
	sub = rec.sub;
	/* The last pass writes the tasks' last state, due or not. */
	rec.delta.final = true;
	pthread_mutex_unlock(&rec.lock);

	/* One last pass for what the rings hold, then no more callbacks. */
	weft_probe_flush();
	weft_probe_unsubscribe(sub);

	pthread_mutex_lock(&rec.lock);
	ensure_header(false);
	flush_out(weft_now_ns(), true);
	if (rec.fd >= 0 && close(rec.fd))
		note_error(-errno);
	rec.fd = -1;
	err = rec.error;
	*said = rec.said;
	release();
	rec.state = REC_IDLE;
	pthread_mutex_unlock(&rec.lock);
	return err;
}

int weft_trace_stop(void)
{
	bool said;

	return stop(&said);
}

int weft__trace_stop_said(bool *said)
{
	return stop(said);
}

/* The snapshot's view of every known task: one full update. */
struct capture {
	weft_wire_buf_t buf;
	bool done;
	int err;
};

static void capture_update(void *ctx, const weft_probe_update_t *u)
{
	struct capture *c = ctx;

	weft_wire_site_t *sites;
	size_t n;

	if (c->done || !u->full)
		return;
	/* Every site met: the kept records may name one whose own record
	 * went out with an older chunk. */
	sites = weft__sub_sites_all(&n);
	c->err =
		weft_wire_update_append_sites(&c->buf, u, sites, n, 0, 0, NULL);
	free(sites);
	c->done = true;
}

int weft__trace_snapshot_append(weft_wire_buf_t *out)
{
	struct capture cap = { 0 };
	weft_probe_sub_opts_t so = { .on_update = capture_update, .ctx = &cap };
	weft_probe_sub_t *sub;
	int err;

	pthread_mutex_lock(&rec.lock);
	err = rec.state == REC_RUNNING && flight_mode() ? 0 : -ENOENT;
	pthread_mutex_unlock(&rec.lock);
	if (err)
		return err;

	/* Outside rec.lock (lock order): a short-lived subscriber's first
	 * update is full, so the snapshot names tasks whose spawn fell out
	 * of the kept records. */
	weft__sub_seed_whole();
	if (!weft_probe_subscribe(&so, &sub)) {
		weft_probe_flush();
		weft_probe_unsubscribe(sub);
	}

	pthread_mutex_lock(&rec.lock);
	if (rec.state != REC_RUNNING) {
		err = -ENOENT;
		goto out_unlock;
	}
	hello_ready(false);
	err = weft_wire_header_append(out, &rec.hello.msg, 0);
	if (!err && cap.done && !cap.err) {
		err = weft_wire_buf_reserve(out, cap.buf.len);
		if (!err) {
			memcpy(out->data + out->len, cap.buf.data, cap.buf.len);
			out->len += cap.buf.len;
		}
	}
	for (struct chunk *c = rec.head; c && !err; c = c->next) {
		if (!c->buf.len)
			continue; /* made for an update that was not due */
		err = weft_wire_buf_reserve(out, c->buf.len);
		if (!err) {
			memcpy(out->data + out->len, c->buf.data, c->buf.len);
			out->len += c->buf.len;
		}
	}
out_unlock:
	pthread_mutex_unlock(&rec.lock);
	weft_wire_buf_fini(&cap.buf);
	return err;
}

int weft_trace_snapshot(const char *path)
{
	weft_wire_buf_t b = { 0 };
	int fd, err;

	if (!path)
		return -EINVAL;
	if (weft__in_collector)
		return -EDEADLK; /* a callback: it would subscribe */
	err = weft__trace_snapshot_append(&b);
	if (err)
		goto out_free;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = -errno;
		goto out_free;
	}
	err = write_all(fd, b.data, b.len);
	if (close(fd) && !err)
		err = -errno;
out_free:
	weft_wire_buf_fini(&b);
	return err;
}
