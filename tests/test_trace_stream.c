/* SPDX-License-Identifier: MIT */
/*
 * The trace stream (proto/src/trace_stream.c) and the reader's seek
 * (proto/src/trace_reader.c), over traces built in memory with the
 * library's own encoders: one EventBatch per thread's run, Updates and
 * a FileHeader as the recorder writes them.
 *
 * Every event carries a serial number in a2 (1, 2, ... in file order),
 * so an event out of the stream names the one that went in, and "every
 * event exactly once, in order" is a comparison with the file's events
 * sorted stably by time (ties in file order).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_helpers.h"

#include "weft/trace_stream.h"

/* A small deterministic generator (xorshift64*). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static uint64_t rnd_below(uint64_t n)
{
	return rnd() % n;
}

/* ------------------------------------------------------------ building */

/* A trace being built: its bytes, its events in file order, where each
 * record starts and what it is. */
struct trace {
	weft_wire_buf_t b;
	weft_wire_hello_t hello;
	weft_event_t *ev; /* every event, in file order */
	size_t *batch_of; /* the EventBatch each came in (0, 1, ...) */
	size_t n, cap;
	size_t batches;
	uint64_t *rec; /* record offsets */
	int *body;     /* and their body_case */
	size_t nrec, rec_cap;
	uint64_t *upd; /* the Updates' now_ns, in file order */
	size_t nupd;
};

static void rec_mark(struct trace *t, int body)
{
	if (t->nrec == t->rec_cap) {
		t->rec_cap = t->rec_cap ? 2 * t->rec_cap : 64;
		t->rec = realloc(t->rec, t->rec_cap * sizeof(*t->rec));
		t->body = realloc(t->body, t->rec_cap * sizeof(*t->body));
		t->upd = realloc(t->upd, t->rec_cap * sizeof(*t->upd));
		assert_non_null(t->rec);
		assert_non_null(t->body);
		assert_non_null(t->upd);
	}
	t->rec[t->nrec] = t->b.len;
	t->body[t->nrec++] = body;
}

static void trace_init(struct trace *t)
{
	memset(t, 0, sizeof(*t));
	assert_int_equal(weft_wire_hello_init(&t->hello, 4, "ns", 0), 0);
	rec_mark(t, WEFT__V1__FRAME__BODY_HEADER);
	assert_int_equal(weft_wire_header_append(&t->b, &t->hello.msg, 0), 0);
}

static void trace_fini(struct trace *t)
{
	weft_wire_hello_fini(&t->hello);
	weft_wire_buf_fini(&t->b);
	free(t->ev);
	free(t->batch_of);
	free(t->rec);
	free(t->body);
	free(t->upd);
}

/* One thread's run as one EventBatch: @ev all of one worker; their a2
 * is overwritten with the next serial numbers. */
static void trace_batch(struct trace *t, weft_event_t *ev, size_t n)
{
	weft_wire_batch_t batch;

	assert_true(n > 0 && n <= WEFT_WIRE_BATCH_MAX);
	if (t->n + n > t->cap) {
		t->cap = 2 * (t->n + n);
		t->ev = realloc(t->ev, t->cap * sizeof(*t->ev));
		t->batch_of =
			realloc(t->batch_of, t->cap * sizeof(*t->batch_of));
		assert_non_null(t->ev);
		assert_non_null(t->batch_of);
	}
	for (size_t i = 0; i < n; i++) {
		ev[i].a2 = (uint32_t)(t->n + i + 1);
		t->ev[t->n + i] = ev[i];
		t->batch_of[t->n + i] = t->batches;
	}
	t->n += n;
	weft_wire_batch_init(&batch);
	assert_int_equal(weft_wire_batch_encode(&batch, ev, n), (int)n);
	rec_mark(t, WEFT__V1__FRAME__BODY_EVENTS);
	assert_int_equal(weft_wire_batch_append(&t->b, &batch.msg), 0);
	weft_wire_batch_fini(&batch);
	t->batches++;
}

/* An Update with only its stats (now_ns). */
static void trace_update(struct trace *t, uint64_t now_ns)
{
	weft_probe_stats_t st = { .now_ns = now_ns,
				  .workers = 4,
				  .clock = "ns" };
	weft_probe_update_t u = { .stats = &st };

	t->upd[t->nupd++] = now_ns;
	rec_mark(t, WEFT__V1__FRAME__BODY_UPDATE);
	assert_int_equal(weft_wire_update_append(&t->b, &u, 0), 0);
}

/* A run of @n events of @worker, stamps from @ts (in the order given). */
static void fill_run(weft_event_t *ev, size_t n, uint16_t worker,
		     const uint64_t *ts)
{
	for (size_t i = 0; i < n; i++) {
		memset(&ev[i], 0, sizeof(ev[i]));
		ev[i].ts = ts[i];
		ev[i].task = 1 + i % 3;
		ev[i].kind = WEFT_EV_POLL;
		ev[i].a1 = 10 + i;
		ev[i].worker = worker;
	}
}

struct keyed {
	weft_event_t ev;
	size_t at;
};

static int keyed_cmp(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;

	if (x->ev.ts != y->ev.ts)
		return x->ev.ts < y->ev.ts ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/* The file's events sorted stably by time: the reference order. */
static weft_event_t *reference(const struct trace *t)
{
	struct keyed *k = calloc(t->n ? t->n : 1, sizeof(*k));
	weft_event_t *out = calloc(t->n ? t->n : 1, sizeof(*out));

	assert_non_null(k);
	assert_non_null(out);
	for (size_t i = 0; i < t->n; i++) {
		k[i].ev = t->ev[i];
		k[i].at = i;
	}
	qsort(k, t->n, sizeof(*k), keyed_cmp);
	for (size_t i = 0; i < t->n; i++)
		out[i] = k[i].ev;
	free(k);
	return out;
}

/* Writes @len bytes to a new temporary file; returns its path. */
static char *write_temp(const void *data, size_t len)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *path = malloc(512);
	FILE *fp;
	int fd;

	assert_non_null(path);
	snprintf(path, 512, "%s/weft-test-stream-XXXXXX", dir);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fp = fdopen(fd, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
	return path;
}

static void remove_temp(char *path)
{
	assert_int_equal(unlink(path), 0);
	free(path);
}

/* ------------------------------------------------------------ draining */

struct seen_frame {
	int body;
	uint64_t offset, size, time;
	size_t events_before; /* events out before this frame */
};

/* What came out of a stream, in order. */
struct drained {
	weft_event_t *ev;
	size_t n, cap;
	struct seen_frame *fr;
	size_t nfr, fr_cap;
	size_t frames_before_event; /* frames out before the first event */
	size_t held_max;            /* events read - events out, at most */
	size_t out_at_last_frame;   /* events out when the last frame came */
	int rc;                     /* the last next()'s */
	int rc_again;               /* one more next() after it */
};

static void drained_fini(struct drained *d)
{
	free(d->ev);
	free(d->fr);
}

/*
 * Runs @s to its end or first error.  Checks each FRAME item's bytes
 * against @t's (when given): the record at it.offset is it.size long and
 * packs back from the frame byte for byte, and progress() stands at its
 * end.
 */
static void drain(weft_trace_stream_t *s, const struct trace *t,
		  struct drained *d)
{
	weft_trace_item_t it;
	size_t in = 0;
	bool any_event = false;
	int rc;

	memset(d, 0, sizeof(*d));
	while ((rc = weft_trace_stream_next(s, &it)) == 1) {
		if (it.kind == WEFT_TRACE_ITEM_EVENT) {
			assert_null(it.frame);
			if (d->n == d->cap) {
				d->cap = d->cap ? 2 * d->cap : 256;
				d->ev = realloc(d->ev, d->cap * sizeof(*d->ev));
				assert_non_null(d->ev);
			}
			d->ev[d->n++] = it.ev;
			any_event = true;
			continue;
		}
		assert_int_equal(it.kind, WEFT_TRACE_ITEM_FRAME);
		assert_non_null(it.frame);
		if (d->nfr == d->fr_cap) {
			d->fr_cap = d->fr_cap ? 2 * d->fr_cap : 64;
			d->fr = realloc(d->fr, d->fr_cap * sizeof(*d->fr));
			assert_non_null(d->fr);
		}
		d->fr[d->nfr++] = (struct seen_frame){
			.body = it.frame->body_case,
			.offset = it.offset,
			.size = it.size,
			.time = weft_trace_frame_time(it.frame),
			.events_before = d->n,
		};
		if (!any_event)
			d->frames_before_event++;
		if (it.frame->body_case == WEFT__V1__FRAME__BODY_EVENTS)
			in += it.frame->events->count;
		if (in - d->n > d->held_max)
			d->held_max = in - d->n;
		d->out_at_last_frame = d->n;
		if (t) {
			uint64_t done, total;
			uint8_t *p = malloc(it.size);

			assert_non_null(p);
			assert_true(it.offset + it.size <= t->b.len);
			assert_int_equal(weft_wire_record_pack(it.frame, p,
							       it.size),
					 (int)it.size);
			assert_memory_equal(p, t->b.data + it.offset, it.size);
			free(p);
			weft_trace_stream_progress(s, &done, &total);
			assert_int_equal(done, it.offset + it.size);
		}
	}
	d->rc = rc;
	d->rc_again = weft_trace_stream_next(s, &it);
}

/* The events out are exactly @want, in that order. */
static void assert_events(const struct drained *d, const weft_event_t *want,
			  size_t n)
{
	assert_int_equal(d->n, n);
	for (size_t i = 0; i < n; i++) {
		if (memcmp(&d->ev[i], &want[i], sizeof(*want))) {
			fail_msg(
				"event %zu: got ts %llu serial %u, want ts %llu "
				"serial %u",
				i, (unsigned long long)d->ev[i].ts, d->ev[i].a2,
				(unsigned long long)want[i].ts, want[i].a2);
		}
	}
}

/* The frames out are @t's records, each once, in file order. */
static void assert_frames(const struct drained *d, const struct trace *t)
{
	assert_int_equal(d->nfr, t->nrec);
	for (size_t i = 0; i < d->nfr; i++) {
		uint64_t end = i + 1 < t->nrec ? t->rec[i + 1] : t->b.len;

		assert_int_equal(d->fr[i].body, t->body[i]);
		assert_int_equal(d->fr[i].offset, t->rec[i]);
		assert_int_equal(d->fr[i].offset + d->fr[i].size, end);
	}
}

static void stream_mem(weft_trace_stream_t **s, const struct trace *t,
		       const weft_trace_stream_opts_t *o)
{
	assert_int_equal(weft_trace_stream_open_mem(s, t->b.data, t->b.len, o),
			 0);
	assert_non_null(*s);
}

/* ------------------------------------------------------------ the order */

/*
 * Several threads' runs, overlapping in time within and across passes,
 * with many equal stamps: the stream's order is the file's events sorted
 * stably, with every event held to the end (the default window) and
 * with a window that lets events go before the end.  A pass's stamps lie
 * in [p * 1000, p * 1000 + 1490], so with a window of 2000 nothing read
 * later can be older than what went: the order is still exact.
 */
static void sort_stamps(uint64_t *ts, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		uint64_t x = ts[i];
		size_t j = i;

		for (; j && ts[j - 1] > x; j--)
			ts[j] = ts[j - 1];
		ts[j] = x;
	}
}

static void build_passes(struct trace *t, unsigned passes, unsigned threads)
{
	weft_event_t ev[64];
	uint64_t ts[64];

	trace_init(t);
	for (unsigned p = 0; p < passes; p++) {
		for (unsigned w = 0; w < threads; w++) {
			size_t n = 1 + rnd_below(40);

			for (size_t i = 0; i < n; i++)
				ts[i] = p * 1000ull + 10 * rnd_below(150);
			/* A thread's own run is in time order here. */
			sort_stamps(ts, n);
			fill_run(ev, n, (uint16_t)w, ts);
			trace_batch(t, ev, n);
		}
	}
}

static void test_trace_stream_merges_threads_stably(void **state)
{
	struct trace t;
	struct drained d;
	weft_trace_stream_t *s;
	weft_trace_stream_opts_t o = { .window_ns = 2000 };
	weft_event_t *want;
	size_t ties = 0;

	(void)state;
	rng_state = 0x1234567ull;
	build_passes(&t, 30, 4);
	want = reference(&t);
	/* Equal stamps from different batches: the ties are exercised. */
	for (size_t i = 1; i < t.n; i++)
		ties += want[i].ts == want[i - 1].ts &&
			t.batch_of[want[i].a2 - 1] !=
				t.batch_of[want[i - 1].a2 - 1];
	assert_true(ties > 50);

	/* The default window: everything held to the end. */
	stream_mem(&s, &t, NULL);
	drain(s, &t, &d);
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.rc_again, 0);
	assert_events(&d, want, t.n);
	assert_frames(&d, &t);
	assert_int_equal(d.frames_before_event, t.nrec);
	assert_int_equal(weft_trace_stream_late(s), 0);
	drained_fini(&d);
	weft_trace_stream_close(s);

	/* A 2 us window: events go while the file is read, same order. */
	stream_mem(&s, &t, &o);
	drain(s, &t, &d);
	assert_int_equal(d.rc, 0);
	assert_events(&d, want, t.n);
	assert_frames(&d, &t);
	assert_true(d.frames_before_event < t.nrec / 2);
	assert_true(d.out_at_last_frame > t.n / 2);
	assert_int_equal(weft_trace_stream_late(s), 0);
	drained_fini(&d);
	weft_trace_stream_close(s);

	free(want);
	trace_fini(&t);
}

/*
 * A run whose own stamps are out of order (a SPAWN stamped at its poll's
 * start stands after that poll's earlier events), with equal stamps
 * inside the run and across runs: sorted stably, by hand and against the
 * reference.
 */
static void test_trace_stream_sorts_unordered_run(void **state)
{
	static const uint64_t ts_a[] = { 100, 300, 200, 200, 400, 150, 200 };
	static const uint64_t ts_b[] = { 200, 120, 200 };
	/* Serial numbers (a2) in the order they must come out. */
	static const uint32_t order[] = { 1, 9, 6, 3, 4, 7, 8, 10, 2, 5 };
	weft_event_t a[7], b[3], *want;
	struct trace t;
	struct drained d;
	weft_trace_stream_t *s;

	(void)state;
	trace_init(&t);
	fill_run(a, 7, 0, ts_a);
	a[2].kind = WEFT_EV_SPAWN;
	a[2].a1 = 77; /* the child: a task id, coded against .task */
	a[3].kind = WEFT_EV_WAKE;
	a[3].a1 = 2;
	trace_batch(&t, a, 7);
	fill_run(b, 3, 1, ts_b);
	trace_batch(&t, b, 3);
	want = reference(&t);
	for (size_t i = 0; i < 10; i++)
		assert_int_equal(want[i].a2, order[i]);

	stream_mem(&s, &t, NULL);
	drain(s, &t, &d);
	assert_int_equal(d.rc, 0);
	assert_events(&d, want, t.n);
	assert_int_equal(d.ev[3].kind, WEFT_EV_SPAWN);
	assert_int_equal(d.ev[3].a1, 77);
	assert_int_equal(weft_trace_stream_late(s), 0);
	drained_fini(&d);
	weft_trace_stream_close(s);
	free(want);
	trace_fini(&t);
}

/* ------------------------------------------------------------ frames */

/*
 * Frames come out as read: the FileHeader first at offset 0, each record
 * once with its offset and size (contiguous, ending at the file's end),
 * every EventBatch reported; an Update before every event of its time or
 * later, and an EventBatch before its own events.  Pass p is an Update
 * at p * 1000, then three threads' runs in [p * 1000, p * 1000 + 824];
 * a 900 ns window (wider than a pass's runs, so the order stays exact)
 * lets events go mid-file.
 */
static void test_trace_stream_frames_as_read(void **state)
{
	enum { PASSES = 6, THREADS = 3, RUN = 10 };
	struct trace t;
	struct drained d;
	weft_trace_stream_t *s;
	weft_trace_stream_opts_t o = { .window_ns = 900 };
	weft_event_t ev[RUN], *want;
	uint64_t ts[RUN];
	size_t nupd = 0, nbatch = 0, f = 0;

	(void)state;
	trace_init(&t);
	for (unsigned p = 1; p <= PASSES; p++) {
		trace_update(&t, p * 1000ull);
		for (unsigned w = 0; w < THREADS; w++) {
			for (size_t i = 0; i < RUN; i++)
				ts[i] = p * 1000ull + w * 7 + i * 90;
			fill_run(ev, RUN, (uint16_t)w, ts);
			trace_batch(&t, ev, RUN);
		}
	}
	want = reference(&t);

	stream_mem(&s, &t, &o);
	drain(s, &t, &d);
	assert_int_equal(d.rc, 0);
	assert_events(&d, want, t.n);
	assert_frames(&d, &t);
	assert_int_equal(d.nfr, 1 + PASSES * (1 + THREADS));
	assert_int_equal(d.fr[0].body, WEFT__V1__FRAME__BODY_HEADER);
	assert_int_equal(d.fr[0].offset, 0);
	assert_int_equal(d.fr[d.nfr - 1].offset + d.fr[d.nfr - 1].size,
			 t.b.len);
	for (size_t i = 0; i < d.nfr; i++) {
		nupd += d.fr[i].body == WEFT__V1__FRAME__BODY_UPDATE;
		nbatch += d.fr[i].body == WEFT__V1__FRAME__BODY_EVENTS;
	}
	assert_int_equal(nupd, PASSES);
	assert_int_equal(nbatch, PASSES * THREADS);
	/* Events went before the end. */
	assert_true(d.frames_before_event < d.nfr);

	/*
	 * For each event out: every Update at or before its stamp, and its
	 * own batch, came out before it.
	 */
	for (size_t i = 0; i < d.n; i++) {
		size_t need_upd = 0, seen_upd = 0, seen_batch = 0;
		size_t own = t.batch_of[d.ev[i].a2 - 1];

		for (size_t u = 0; u < t.nupd; u++)
			need_upd += t.upd[u] <= d.ev[i].ts;
		for (f = 0; f < d.nfr && d.fr[f].events_before <= i; f++) {
			seen_upd += d.fr[f].body ==
				    WEFT__V1__FRAME__BODY_UPDATE;
			seen_batch += d.fr[f].body ==
				      WEFT__V1__FRAME__BODY_EVENTS;
		}
		assert_true(seen_upd >= need_upd);
		assert_true(seen_batch > own);
	}
	drained_fini(&d);
	weft_trace_stream_close(s);
	free(want);
	trace_fini(&t);
}

/* ------------------------------------------------------------ window, bound */

/*
 * An event goes once the newest stamp read (a run's last) is exactly the
 * window past it, not before: a 1 us window, runs [1000 1500 2000],
 * [2100 2499 2500], [2600 3000 3600].  After the first run's frame 1000
 * goes (2000 read); after the second's, 1500 (2500 read), and 2000 stays
 * (3000 would be needed); after the third's, 2000 2100 2499 2500 2600.
 */
static void test_trace_stream_window_edge(void **state)
{
	static const uint64_t ts[3][3] = { { 1000, 1500, 2000 },
					   { 2100, 2499, 2500 },
					   { 2600, 3000, 3600 } };
	weft_trace_stream_opts_t o = { .window_ns = 1000 };
	weft_event_t ev[3];
	struct trace t;
	struct drained d;
	weft_trace_stream_t *s;

	(void)state;
	trace_init(&t);
	for (unsigned r = 0; r < 3; r++) {
		fill_run(ev, 3, (uint16_t)r, ts[r]);
		trace_batch(&t, ev, 3);
	}
	/* One more frame, to see what went after the third run's. */
	trace_update(&t, 4000);
	stream_mem(&s, &t, &o);
	drain(s, &t, &d);
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.nfr, 5);
	assert_int_equal(d.fr[1].events_before, 0);
	assert_int_equal(d.fr[2].events_before, 1);
	assert_int_equal(d.fr[3].events_before, 2);
	assert_int_equal(d.fr[4].events_before, 7);
	assert_events(&d, t.ev, 9); /* already in time order */
	assert_int_equal(weft_trace_stream_late(s), 0);
	drained_fini(&d);
	weft_trace_stream_close(s);
	trace_fini(&t);
}

/*
 * A 1 us window.  Thread 0's run at 10000.. goes out once thread 1's at
 * 20000.. is read; then thread 2's run, far older (100, 200, 300, and
 * one at 10010, the latest stamp out), still comes out, before thread
 * 1's: the three older events are late, the one equal to the latest out
 * is not.
 */
static void test_trace_stream_window_counts_late(void **state)
{
	static const uint64_t ts_a[] = { 10000, 10004, 10010 };
	static const uint64_t ts_b[] = { 20000, 20003, 20005 };
	static const uint64_t ts_c[] = { 100, 200, 300, 10010 };
	static const uint32_t order[] = { 1, 2, 3, 7, 8, 9, 10, 4, 5, 6 };
	weft_event_t a[3], b[3], c[4];
	struct trace t;
	struct drained d;
	weft_trace_stream_t *s;
	weft_trace_stream_opts_t o = { .window_ns = 1000 };

	(void)state;
	trace_init(&t);
	fill_run(a, 3, 0, ts_a);
	trace_batch(&t, a, 3);
	fill_run(b, 3, 1, ts_b);
	trace_batch(&t, b, 3);
	fill_run(c, 4, 2, ts_c);
	trace_batch(&t, c, 4);

	stream_mem(&s, &t, &o);
	drain(s, &t, &d);
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.n, 10);
	for (size_t i = 0; i < 10; i++)
		assert_int_equal(d.ev[i].a2, order[i]);
	assert_int_equal(weft_trace_stream_late(s), 3);
	/* Thread 0's run went before thread 2's was read. */
	assert_int_equal(d.fr[3].events_before, 3);
	drained_fini(&d);
	weft_trace_stream_close(s);

	/* The default window holds them all: nothing late, exact order. */
	{
		weft_event_t *want = reference(&t);

		stream_mem(&s, &t, NULL);
		drain(s, &t, &d);
		assert_events(&d, want, t.n);
		assert_int_equal(weft_trace_stream_late(s), 0);
		drained_fini(&d);
		weft_trace_stream_close(s);
		free(want);
	}
	trace_fini(&t);
}

/*
 * max_pending = 100 with the default window (which alone would hold
 * everything to the end), 50 runs of 30 events in time order: the fifth
 * frame (header and four runs, 120 events) is the last before the first
 * event; from then on the stream holds 100 between reads, so never more
 * than 100 + one run, and every event comes out once, in order.
 */
static void test_trace_stream_max_pending_bounds(void **state)
{
	enum { RUNS = 50, RUN = 30, MAX = 100 };
	struct trace t;
	struct drained d;
	weft_trace_stream_t *s;
	weft_trace_stream_opts_t o = { .max_pending = MAX };
	weft_event_t ev[RUN];
	uint64_t ts[RUN];

	(void)state;
	trace_init(&t);
	for (unsigned r = 0; r < RUNS; r++) {
		for (size_t i = 0; i < RUN; i++)
			ts[i] = 1000ull * r + 10 * i;
		fill_run(ev, RUN, (uint16_t)(r % 4), ts);
		trace_batch(&t, ev, RUN);
	}
	stream_mem(&s, &t, &o);
	drain(s, &t, &d);
	assert_int_equal(d.rc, 0);
	assert_events(&d, t.ev, t.n); /* already in time order */
	assert_int_equal(d.frames_before_event, 5);
	assert_true(d.held_max <= MAX + RUN);
	/* When the last run was read, all but the 100 held had gone. */
	assert_int_equal(d.out_at_last_frame, (RUNS - 1) * RUN - MAX);
	assert_int_equal(weft_trace_stream_late(s), 0);
	drained_fini(&d);
	weft_trace_stream_close(s);

	/* Without the bound, all held to the end. */
	stream_mem(&s, &t, NULL);
	drain(s, &t, &d);
	assert_int_equal(d.frames_before_event, 1 + RUNS);
	assert_int_equal(d.held_max, RUNS * RUN);
	assert_events(&d, t.ev, t.n);
	drained_fini(&d);
	weft_trace_stream_close(s);
	trace_fini(&t);
}

/* ------------------------------------------------------------ cut, bad */

/* Four runs of 10 events; the file cut inside the fourth record. */
static void build_four_runs(struct trace *t)
{
	weft_event_t ev[10];
	uint64_t ts[10];

	trace_init(t);
	for (unsigned r = 0; r < 4; r++) {
		for (size_t i = 0; i < 10; i++)
			ts[i] = 1000ull * r + 50 * i;
		fill_run(ev, 10, (uint16_t)r, ts);
		trace_batch(t, ev, 10);
	}
}

static void check_cut(weft_trace_stream_t *s, const struct trace *t)
{
	struct drained d;

	drain(s, NULL, &d);
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.rc_again, 0);
	assert_true(weft_trace_stream_reader(s)->truncated);
	assert_int_equal(weft_trace_stream_reader(s)->error, 0);
	assert_int_equal(d.nfr, 4); /* header and the three whole runs */
	assert_int_equal(d.fr[3].offset + d.fr[3].size, t->rec[4]);
	assert_events(&d, t->ev, 30);
	drained_fini(&d);
}

static void test_trace_stream_cut_file(void **state)
{
	struct trace t;
	weft_trace_stream_t *s;
	size_t cuts[3];
	char *path;

	(void)state;
	build_four_runs(&t);
	cuts[0] = t.rec[4] + 1; /* the tag alone */
	cuts[1] = t.rec[4] + 3; /* inside the body */
	cuts[2] = t.b.len - 1;  /* a byte short */
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(weft_trace_stream_open_mem(&s, t.b.data,
							    cuts[i], NULL),
				 0);
		check_cut(s, &t);
		weft_trace_stream_close(s);
	}
	/* The same through a real file. */
	path = write_temp(t.b.data, cuts[1]);
	assert_int_equal(weft_trace_stream_open(&s, path, NULL), 0);
	check_cut(s, &t);
	weft_trace_stream_close(s);
	remove_temp(path);

	/* Uncut: not truncated, all 40 out. */
	{
		struct drained d;

		stream_mem(&s, &t, NULL);
		drain(s, &t, &d);
		assert_int_equal(d.rc, 0);
		assert_false(weft_trace_stream_reader(s)->truncated);
		assert_events(&d, t.ev, 40);
		drained_fini(&d);
		weft_trace_stream_close(s);
	}
	trace_fini(&t);
}

/* next() on @data: its first result, then the same for good. */
static int first_result(const void *data, size_t len)
{
	weft_trace_stream_t *s;
	weft_trace_item_t it;
	int rc;

	assert_int_equal(weft_trace_stream_open_mem(&s, data, len, NULL), 0);
	rc = weft_trace_stream_next(s, &it);
	assert_int_equal(weft_trace_stream_next(s, &it), rc);
	assert_int_equal(weft_trace_stream_error_offset(s), 0);
	weft_trace_stream_close(s);
	return rc;
}

/*
 * Not a trace: a first record that is not a FileHeader, or a FileHeader
 * without the magic, is WEFT_TRACE_E_NOT_TRACE; bytes that are not even
 * a record are the reader's -EILSEQ.  Both stay.
 */
static void test_trace_stream_not_a_trace(void **state)
{
	static const char text[] = "this is not a weft trace\n";
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__FileHeader h = WEFT__V1__FILE_HEADER__INIT;
	weft_wire_buf_t b = { 0 };
	weft_wire_batch_t batch;
	weft_event_t ev[2];
	static const uint64_t ts[] = { 1, 2 };

	(void)state;
	/* An EventBatch first. */
	fill_run(ev, 2, 0, ts);
	weft_wire_batch_init(&batch);
	assert_int_equal(weft_wire_batch_encode(&batch, ev, 2), 2);
	assert_int_equal(weft_wire_batch_append(&b, &batch.msg), 0);
	weft_wire_batch_fini(&batch);
	assert_int_equal(first_result(b.data, b.len), WEFT_TRACE_E_NOT_TRACE);
	weft_wire_buf_fini(&b);

	/* A FileHeader with another magic. */
	h.magic = (char *)"WEFTTRC0";
	h.format_version = WEFT_TRACE_FORMAT_VERSION;
	f.body_case = WEFT__V1__FRAME__BODY_HEADER;
	f.header = &h;
	assert_int_equal(weft_wire_record_append(&b, &f), 0);
	assert_int_equal(first_result(b.data, b.len), WEFT_TRACE_E_NOT_TRACE);
	weft_wire_buf_fini(&b);

	/* Text: not a record at all. */
	assert_int_equal(first_result(text, sizeof(text) - 1), -EILSEQ);
}

/*
 * A corrupt batch between two good ones: its count (3) does not match
 * its columns (2).  It is skipped, counted as a bad record is (skips,
 * skipped: its bytes, first_skip: its start), and every other record
 * read: one bad byte used to stop the stream there, losing the rest of
 * the file.  Also the other way round (count 0, columns 2), and as the
 * last record, after a good run.
 */
static void check_corrupt(uint32_t count)
{
	struct trace t;
	weft_trace_stream_t *s;
	weft_wire_batch_t batch;
	weft_event_t ev[2];
	static const uint64_t ts[] = { 500, 600 };
	struct drained d;
	uint64_t at, size;

	build_four_runs(&t); /* header + four good runs */
	fill_run(ev, 2, 1, ts);
	weft_wire_batch_init(&batch);
	assert_int_equal(weft_wire_batch_encode(&batch, ev, 2), 2);
	batch.msg.count = count;
	/* Put it in as the second record: rebuild the bytes. */
	{
		weft_wire_buf_t b = { 0 };
		size_t second = t.rec[1];

		assert_int_equal(weft_wire_buf_reserve(&b, second), 0);
		memcpy(b.data, t.b.data, second);
		b.len = second;
		at = b.len;
		assert_int_equal(weft_wire_batch_append(&b, &batch.msg), 0);
		size = b.len - at;
		assert_int_equal(weft_wire_buf_reserve(&b, t.b.len - second),
				 0);
		memcpy(b.data + b.len, t.b.data + second, t.b.len - second);
		b.len += t.b.len - second;
		weft_wire_buf_fini(&t.b);
		t.b = b;
	}
	weft_wire_batch_fini(&batch);

	stream_mem(&s, &t, NULL);
	drain(s, NULL, &d);
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.rc_again, 0);
	assert_int_equal(weft_trace_stream_reader(s)->error, 0);
	assert_false(weft_trace_stream_reader(s)->truncated);
	assert_int_equal(weft_trace_stream_reader(s)->skips, 1);
	assert_int_equal(weft_trace_stream_reader(s)->skipped, size);
	assert_int_equal(weft_trace_stream_reader(s)->first_skip, at);
	/* The header and the four good runs, their events all. */
	assert_int_equal(d.nfr, 5);
	assert_int_equal(d.fr[1].offset, at + size);
	assert_events(&d, t.ev, 40);
	drained_fini(&d);
	weft_trace_stream_close(s);

	/* Last: after a good run, whose events come out. */
	{
		struct trace u;
		weft_event_t e2[2];
		size_t good_end;

		build_four_runs(&u);
		good_end = u.rec[2];
		fill_run(e2, 2, 1, ts);
		weft_wire_batch_init(&batch);
		assert_int_equal(weft_wire_batch_encode(&batch, e2, 2), 2);
		batch.msg.count = count;
		u.b.len = good_end; /* header + the first run */
		assert_int_equal(weft_wire_batch_append(&u.b, &batch.msg), 0);
		weft_wire_batch_fini(&batch);
		stream_mem(&s, &u, NULL);
		drain(s, NULL, &d);
		assert_int_equal(d.rc, 0);
		assert_int_equal(d.nfr, 2);
		assert_int_equal(d.fr[1].offset, u.rec[1]);
		assert_events(&d, u.ev, 10);
		assert_int_equal(weft_trace_stream_reader(s)->skips, 1);
		assert_int_equal(weft_trace_stream_reader(s)->first_skip,
				 good_end);
		assert_int_equal(weft_trace_stream_reader(s)->skipped,
				 u.b.len - good_end);
		drained_fini(&d);
		weft_trace_stream_close(s);
		trace_fini(&u);
	}
	trace_fini(&t);
}

static void test_trace_stream_corrupt_batch(void **state)
{
	(void)state;
	check_corrupt(3);
	check_corrupt(0);
}

/* ------------------------------------------------------------ frame time */

/* An Update's now, an EventBatch's first stamp (its base, even when a
 * later one is earlier), 0 for a header, another body, or no stats. */
static void test_trace_stream_frame_time(void **state)
{
	static const uint64_t ts[] = { 500, 300, 700 };
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Update u = WEFT__V1__UPDATE__INIT;
	Weft__V1__Control c = WEFT__V1__CONTROL__INIT;
	struct trace t;
	struct drained d;
	weft_trace_stream_t *s;
	weft_event_t ev[3];

	(void)state;
	trace_init(&t);
	trace_update(&t, 9000);
	fill_run(ev, 3, 2, ts);
	trace_batch(&t, ev, 3);
	trace_update(&t, 12345678901ull);
	stream_mem(&s, &t, NULL);
	drain(s, &t, &d);
	assert_int_equal(d.nfr, 4);
	assert_int_equal(d.fr[0].body, WEFT__V1__FRAME__BODY_HEADER);
	assert_int_equal(d.fr[0].time, 0);
	assert_int_equal(d.fr[1].body, WEFT__V1__FRAME__BODY_UPDATE);
	assert_int_equal(d.fr[1].time, 9000);
	assert_int_equal(d.fr[2].body, WEFT__V1__FRAME__BODY_EVENTS);
	assert_int_equal(d.fr[2].time, 500);
	assert_int_equal(d.fr[3].time, 12345678901ull);
	drained_fini(&d);
	weft_trace_stream_close(s);
	trace_fini(&t);

	f.body_case = WEFT__V1__FRAME__BODY_UPDATE;
	f.update = &u; /* no stats */
	assert_int_equal(weft_trace_frame_time(&f), 0);
	f.body_case = WEFT__V1__FRAME__BODY_CONTROL;
	f.control = &c;
	assert_int_equal(weft_trace_frame_time(&f), 0);
}

/* ------------------------------------------------------------ seek */

/*
 * A reader over @t (open already): every frame with its record offset
 * and packed bytes; then seeks back to a middle record and reads the
 * same frames again, to the header and reads it again, to the end
 * (nothing more, not truncated); past a buffer's end is -EINVAL.
 */
static void check_seek(weft_trace_reader_t *r, const struct trace *t)
{
	weft_trace_reader_t fresh;
	Weft__V1__Frame *f;
	uint8_t **packed = calloc(t->nrec, sizeof(*packed));
	size_t *len = calloc(t->nrec, sizeof(*len));
	size_t n = 0, mid = t->nrec / 2;

	assert_non_null(packed);
	assert_non_null(len);
	while (weft_trace_reader_next(r, &f) == 1) {
		assert_true(n < t->nrec);
		assert_int_equal(r->dec.record_offset, t->rec[n]);
		len[n] = weft_wire_record_size(f);
		packed[n] = malloc(len[n]);
		assert_non_null(packed[n]);
		assert_int_equal(weft_wire_record_pack(f, packed[n], len[n]),
				 (int)len[n]);
		if (f != r->header_frame)
			weft_wire_frame_free(f);
		n++;
	}
	assert_int_equal(n, t->nrec);
	assert_int_equal(r->error, 0);
	assert_false(r->truncated);

	/* Back to a middle record: the same frames from there. */
	assert_true(mid > 1);
	assert_int_equal(weft_trace_reader_seek(r, t->rec[mid]), 0);
	for (size_t i = mid; i < t->nrec; i++) {
		uint8_t *p = malloc(len[i]);

		assert_int_equal(weft_trace_reader_next(r, &f), 1);
		assert_int_equal(r->dec.record_offset, t->rec[i]);
		assert_int_equal(weft_wire_record_size(f), len[i]);
		assert_non_null(p);
		assert_int_equal(weft_wire_record_pack(f, p, len[i]),
				 (int)len[i]);
		assert_memory_equal(p, packed[i], len[i]);
		free(p);
		weft_wire_frame_free(f);
	}
	assert_int_equal(weft_trace_reader_next(r, &f), 0);
	assert_false(r->truncated);

	/* To the header: read again (a frame of its own), the kept one
	 * stays. */
	assert_int_equal(weft_trace_reader_seek(r, 0), 0);
	assert_int_equal(weft_trace_reader_next(r, &f), 1);
	assert_int_equal(f->body_case, WEFT__V1__FRAME__BODY_HEADER);
	assert_ptr_not_equal(f, r->header_frame);
	assert_non_null(r->header);
	assert_string_equal(r->header->magic, WEFT_TRACE_MAGIC);
	{
		uint8_t *p = malloc(len[0]);

		assert_non_null(p);
		assert_int_equal(weft_wire_record_pack(f, p, len[0]),
				 (int)len[0]);
		assert_memory_equal(p, packed[0], len[0]);
		free(p);
	}
	weft_wire_frame_free(f);
	assert_int_equal(weft_trace_reader_next(r, &f), 1);
	assert_int_equal(r->dec.record_offset, t->rec[1]);
	weft_wire_frame_free(f);

	/* To the end: nothing more. */
	assert_int_equal(weft_trace_reader_seek(r, t->b.len), 0);
	assert_int_equal(weft_trace_reader_next(r, &f), 0);
	assert_false(r->truncated);
	assert_int_equal(r->error, 0);

	/* Before the header is read: refused. */
	weft_trace_reader_open_mem(&fresh, t->b.data, t->b.len);
	assert_int_equal(weft_trace_reader_seek(&fresh, t->rec[mid]), -EINVAL);
	weft_trace_reader_close(&fresh);

	for (size_t i = 0; i < t->nrec; i++)
		free(packed[i]);
	free(packed);
	free(len);
}

static void test_trace_stream_reader_seek(void **state)
{
	struct trace t;
	weft_trace_reader_t r;
	Weft__V1__Frame *f;
	char *path;

	(void)state;
	rng_state = 0xabcdefull;
	build_passes(&t, 3, 3);
	trace_update(&t, 99999);

	weft_trace_reader_open_mem(&r, t.b.data, t.b.len);
	check_seek(&r, &t);
	/* Past a buffer's end. */
	assert_int_equal(weft_trace_reader_seek(&r, t.b.len + 1), -EINVAL);
	weft_trace_reader_close(&r);

	path = write_temp(t.b.data, t.b.len);
	assert_int_equal(weft_trace_reader_open(&r, path), 0);
	check_seek(&r, &t);
	weft_trace_reader_close(&r);
	/* A file reader before its header: refused too. */
	assert_int_equal(weft_trace_reader_open(&r, path), 0);
	assert_int_equal(weft_trace_reader_seek(&r, t.rec[2]), -EINVAL);
	assert_int_equal(weft_trace_reader_next(&r, &f), 1);
	assert_ptr_equal(f, r.header_frame);
	assert_int_equal(weft_trace_reader_seek(&r, t.rec[2]), 0);
	assert_int_equal(weft_trace_reader_next(&r, &f), 1);
	assert_int_equal(r.dec.record_offset, t.rec[2]);
	weft_wire_frame_free(f);
	weft_trace_reader_close(&r);
	remove_temp(path);

	/*
	 * From the end of a file cut inside a record (the decoder holds
	 * part of it): a seek starts clean, not truncated, and reads the
	 * same records again, to the same cut.
	 */
	weft_trace_reader_open_mem(&r, t.b.data, t.rec[t.nrec - 1] + 2);
	while (weft_trace_reader_next(&r, &f) == 1)
		if (f != r.header_frame)
			weft_wire_frame_free(f);
	assert_true(r.truncated);
	assert_int_equal(weft_trace_reader_seek(&r, t.rec[1]), 0);
	assert_false(r.truncated);
	for (size_t i = 1; i + 1 < t.nrec; i++) {
		assert_int_equal(weft_trace_reader_next(&r, &f), 1);
		assert_int_equal(r.dec.record_offset, t.rec[i]);
		assert_int_equal(f->body_case, t.body[i]);
		weft_wire_frame_free(f);
	}
	assert_int_equal(weft_trace_reader_next(&r, &f), 0);
	assert_true(r.truncated);
	assert_int_equal(r.error, 0);
	weft_trace_reader_close(&r);

	/* From an error (bytes that are no record after the last one): a
	 * seek clears it, and reading meets it again at the same place. */
	{
		uint8_t *bad = malloc(t.b.len + 2);
		size_t n;

		assert_non_null(bad);
		memcpy(bad, t.b.data, t.b.len);
		bad[t.b.len] = 0xff;
		bad[t.b.len + 1] = 0xff;
		weft_trace_reader_open_mem(&r, bad, t.b.len + 2);
		for (int pass = 0; pass < 2; pass++) {
			n = pass ? 1 : 0;
			while (weft_trace_reader_next(&r, &f) == 1) {
				if (f != r.header_frame)
					weft_wire_frame_free(f);
				n++;
			}
			assert_int_equal(n, t.nrec);
			assert_int_equal(r.error, -EILSEQ);
			assert_int_equal(r.error_offset, t.b.len);
			assert_int_equal(weft_trace_reader_seek(&r, t.rec[1]),
					 0);
			assert_int_equal(r.error, 0);
		}
		weft_trace_reader_close(&r);
		free(bad);
	}
	trace_fini(&t);
}

/*
 * opts.file_order: events as they stand, each batch's right after its
 * frame, unsorted (the out-of-order run and the older thread stay as
 * written), nothing counted late; frames as without it.
 */
static void test_trace_stream_file_order(void **state)
{
	static const uint64_t ts_a[] = { 100, 300, 200, 200, 400, 150, 200 };
	static const uint64_t ts_b[] = { 200, 120, 200 };
	static const uint64_t ts_c[] = { 50, 60 };
	weft_trace_stream_opts_t o = { .file_order = true, .window_ns = 10 };
	weft_event_t a[7], b[3], c[2];
	struct trace t;
	struct drained d;
	weft_trace_stream_t *s;

	(void)state;
	trace_init(&t);
	trace_update(&t, 90);
	fill_run(a, 7, 0, ts_a);
	trace_batch(&t, a, 7);
	fill_run(b, 3, 1, ts_b);
	trace_batch(&t, b, 3);
	trace_update(&t, 500);
	fill_run(c, 2, 2, ts_c);
	trace_batch(&t, c, 2);
	stream_mem(&s, &t, &o);
	drain(s, &t, &d);
	assert_int_equal(d.rc, 0);
	assert_events(&d, t.ev, t.n);
	assert_frames(&d, &t);
	/* header, update, a (7 follow), b (3), update, c (2). */
	assert_int_equal(d.fr[2].events_before, 0);
	assert_int_equal(d.fr[3].events_before, 7);
	assert_int_equal(d.fr[4].events_before, 10);
	assert_int_equal(d.fr[5].events_before, 10);
	assert_int_equal(d.out_at_last_frame, 10);
	assert_int_equal(weft_trace_stream_late(s), 0);
	drained_fini(&d);
	weft_trace_stream_close(s);
	trace_fini(&t);
}

/* ------------------------------------------------------------ progress */

/* done from 0 to the file's length (at each frame, its record's end:
 * drain() checks), total the length; through memory and a file.  A
 * file that does not open is its errno, and no stream. */
static void test_trace_stream_progress(void **state)
{
	struct trace t;
	struct drained d;
	weft_trace_stream_t *s;
	uint64_t done, total;
	char *path;

	(void)state;
	rng_state = 0x55aa55aaull;
	build_passes(&t, 5, 2);
	trace_update(&t, 6000);

	stream_mem(&s, &t, NULL);
	weft_trace_stream_progress(s, &done, &total);
	assert_int_equal(done, 0);
	assert_int_equal(total, t.b.len);
	drain(s, &t, &d);
	assert_int_equal(d.rc, 0);
	weft_trace_stream_progress(s, &done, &total);
	assert_int_equal(done, t.b.len);
	assert_int_equal(total, t.b.len);
	drained_fini(&d);
	weft_trace_stream_close(s);

	path = write_temp(t.b.data, t.b.len);
	assert_int_equal(weft_trace_stream_open(&s, path, NULL), 0);
	weft_trace_stream_progress(s, &done, &total);
	assert_int_equal(done, 0);
	assert_int_equal(total, t.b.len);
	drain(s, &t, &d);
	assert_int_equal(d.rc, 0);
	{
		weft_event_t *want = reference(&t);

		assert_events(&d, want, t.n);
		assert_frames(&d, &t);
		free(want);
	}
	weft_trace_stream_progress(s, &done, &total);
	assert_int_equal(done, t.b.len);
	assert_int_equal(total, t.b.len);
	drained_fini(&d);
	weft_trace_stream_close(s);
	remove_temp(path);

	s = (weft_trace_stream_t *)&d; /* not left as it was */
	assert_int_equal(weft_trace_stream_open(&s, "/nonexistent/weft/x",
						NULL),
			 -ENOENT);
	assert_null(s);
	trace_fini(&t);
}

/* ------------------------------------------------ found by these tests */

/*
 * Each of these failed against the first trace_stream.c; each names what
 * the header promises.
 */

/*
 * An EventBatch whose count (3) has no columns at all does not decode
 * (weft_wire_batch_decode() says -EBADMSG), so next() must fail with
 * -EBADMSG at its record.  add_run() took the event count from n_head
 * (0) and returned before decoding: the batch was skipped silently and
 * the stream ended with 0.
 */
static void test_trace_stream_bug_count_without_columns(void **state)
{
	Weft__V1__EventBatch m = WEFT__V1__EVENT_BATCH__INIT;
	weft_trace_stream_t *s;
	weft_event_t out[3];
	struct trace t;
	struct drained d;
	uint64_t at;

	(void)state;
	trace_init(&t);
	m.count = 3;
	m.base_ts = 100;
	assert_int_equal(weft_wire_batch_decode(&m, out, 3), -EBADMSG);
	at = t.b.len;
	assert_int_equal(weft_wire_batch_append(&t.b, &m), 0);
	stream_mem(&s, &t, NULL);
	drain(s, NULL, &d);
	/* Skipped, as any batch that does not decode (check_corrupt()). */
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.n, 0);
	assert_int_equal(weft_trace_stream_reader(s)->skips, 1);
	assert_int_equal(weft_trace_stream_reader(s)->first_skip, at);
	drained_fini(&d);
	weft_trace_stream_close(s);
	trace_fini(&t);
}

/*
 * window_ns = UINT64_MAX ("never by time"): may_emit() tested
 * ts + window_ns <= newest, which wrapped to ts - 1 <= newest, true for
 * every event: each went as soon as it was read.  A second run older
 * than the first then comes out after it, counted late, where the
 * order must be the stable sort (the whole file fits in the window).
 */
static void test_trace_stream_bug_window_overflow(void **state)
{
	static const uint64_t ts_a[] = { 1000, 2000 };
	static const uint64_t ts_b[] = { 500, 1500 };
	weft_trace_stream_opts_t o = { .window_ns = UINT64_MAX };
	weft_event_t a[2], b[2], *want;
	weft_trace_stream_t *s;
	struct trace t;
	struct drained d;

	(void)state;
	trace_init(&t);
	fill_run(a, 2, 0, ts_a);
	trace_batch(&t, a, 2);
	fill_run(b, 2, 1, ts_b);
	trace_batch(&t, b, 2);
	want = reference(&t);
	stream_mem(&s, &t, &o);
	drain(s, &t, &d);
	assert_int_equal(weft_trace_stream_late(s), 0);
	assert_events(&d, want, t.n);
	drained_fini(&d);
	weft_trace_stream_close(s);
	free(want);
	trace_fini(&t);
}

/*
 * progress() is "bytes of whole records read so far"; a file cut inside
 * its last record has read t.rec[4] bytes of whole records at its end,
 * but done was the decoder's offset, which counted the cut record's
 * bytes too (the file's length).
 */
static void test_trace_stream_bug_progress_cut(void **state)
{
	struct trace t;
	struct drained d;
	weft_trace_stream_t *s;
	uint64_t done, total;
	size_t cut;

	(void)state;
	build_four_runs(&t);
	cut = t.rec[4] + 3;
	assert_int_equal(weft_trace_stream_open_mem(&s, t.b.data, cut, NULL),
			 0);
	drain(s, NULL, &d);
	assert_true(weft_trace_stream_reader(s)->truncated);
	weft_trace_stream_progress(s, &done, &total);
	assert_int_equal(total, cut);
	assert_int_equal(done, t.rec[4]);
	drained_fini(&d);
	weft_trace_stream_close(s);
	trace_fini(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trace_stream_merges_threads_stably),
		cmocka_unit_test(test_trace_stream_sorts_unordered_run),
		cmocka_unit_test(test_trace_stream_frames_as_read),
		cmocka_unit_test(test_trace_stream_window_edge),
		cmocka_unit_test(test_trace_stream_window_counts_late),
		cmocka_unit_test(test_trace_stream_max_pending_bounds),
		cmocka_unit_test(test_trace_stream_cut_file),
		cmocka_unit_test(test_trace_stream_not_a_trace),
		cmocka_unit_test(test_trace_stream_corrupt_batch),
		cmocka_unit_test(test_trace_stream_frame_time),
		cmocka_unit_test(test_trace_stream_reader_seek),
		cmocka_unit_test(test_trace_stream_file_order),
		cmocka_unit_test(test_trace_stream_progress),
		cmocka_unit_test(test_trace_stream_bug_count_without_columns),
		cmocka_unit_test(test_trace_stream_bug_window_overflow),
		cmocka_unit_test(test_trace_stream_bug_progress_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
