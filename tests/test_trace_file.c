/* SPDX-License-Identifier: MIT */
/*
 * Trace files (probe/src/recorder.c, trace_reader.c): a real workload
 * recorded and read back (header first, events, task names in updates),
 * a file cut at every byte offset reads cleanly up to its last whole
 * record, a torn record in the middle is skipped, rotation, the flight recorder's snapshot, and files that are
 * not traces.
 *
 * `test_trace_file --workload` only runs the workload (for WEFT_TRACE=path
 * from the environment: tests/trace_tools.sh); `--full-disk` and
 * `--splice-torn` serve tests/trace_full_disk.sh; `--spinner PATH IDLE_MS`
 * records a worker that is parked for IDLE_MS, then spins on a task that
 * wakes itself (tests/trace_tools.sh reads its busy % and poll %);
 * `--burst N` runs N tasks of one spawn site, one after the other, each
 * blocking its poll 15 ms, and returns at once (tests/trace_folds.sh).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include "test_helpers.h"
#include "yielders.h"

#include "weft/probe.h"
#include "weft/trace.h"

#include "collector_internal.h"
#include "weft/trace_reader.h"

static weft_poll_t hung_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	return WEFT_PENDING;
}

/* A task that wakes itself until its deadline: a worker never parked. */
struct spinner {
	uint64_t until;
};

static weft_poll_t spinner_poll(void *arg, weft_cx_t *cx)
{
	struct spinner *s = arg;

	if (weft_now_ns() >= s->until)
		return WEFT_READY;
	weft_cx_yield(cx);
	return WEFT_PENDING;
}

/*
 * Recorded into @path: one worker, parked when the recording starts (a
 * mark, from this thread, opens the trace), left parked for @idle_ms,
 * then running a spinner for 300 ms; a mark closes the trace once the
 * spinner is done.  Its busy % is then about 300 / (300 + @idle_ms),
 * however little of that is in polls.  Before the spinner, a task named
 * "hung" waits for a wake that never comes and is aborted (its end:
 * cancelled).
 */
static void spinner_workload(const char *path, unsigned idle_ms)
{
	weft_config_t cfg = { .workers = 1 };
	weft_runtime_t *rt;
	weft_join_t *j, *hung;
	struct spinner sp;

	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	usleep(50 * 1000); /* the worker parks */
	assert_int_equal(weft_trace_start(path, NULL), 0);
	weft_probe_mark(1, 0);
	usleep(idle_ms * 1000);
	/* The hung task before the spinner: behind it, on a loaded host,
	 * its few events could find the ring still full of the spinner's
	 * and be dropped (trace_tools then missed the aborted task). */
	assert_int_equal(weft_spawn_named(rt, "hung", hung_poll,
					  &(struct spinner){ 0 }, &hung),
			 0);
	weft_join_abort(hung);
	assert_int_equal(weft_join_wait(hung, NULL), -ECANCELED);
	weft_join_drop(hung);
	sp.until = weft_now_ns() + 300ull * 1000 * 1000;
	assert_int_equal(weft_spawn_named(rt, "spinner", spinner_poll, &sp,
					  &j),
			 0);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
	weft_probe_mark(2, 0);
	assert_int_equal(weft_trace_stop(), 0);
	weft_runtime_destroy(rt);
}

static char *tmp_path(const char *name)
{
	char *p = malloc(256);

	assert_non_null(p);
	snprintf(p, 256, "%s/weft-test-trace-%d-%s",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
		 name);
	return p;
}

struct summary {
	uint64_t frames, headers, updates, batches, events, polls;
	bool named; /* an update named a task "yielder", spawned in yielders.h */
	bool sleeper; /* an update named a task "sleeper" */
	bool truncated;
	int error;
};

static struct summary read_trace(weft_trace_reader_t *r)
{
	struct summary s = { 0 };
	Weft__V1__Frame *f;
	weft_event_t *ev = malloc(WEFT_WIRE_BATCH_MAX * sizeof(*ev));
	int rc;

	assert_non_null(ev);
	while ((rc = weft_trace_reader_next(r, &f)) == 1) {
		s.frames++;
		switch (f->body_case) {
		case WEFT__V1__FRAME__BODY_HEADER:
			s.headers++;
			break;
		case WEFT__V1__FRAME__BODY_UPDATE: {
			weft_trace_tasks_t ti;
			const Weft__V1__Task *t;

			s.updates++;
			/* Through the reader: a record naming its spawn site
			 * is named by the site. */
			weft_trace_reader_tasks(r, f, &ti);
			while ((t = weft_trace_tasks_next(&ti))) {
				if (!strcmp(t->name, "yielder") &&
				    strstr(t->file, "yielders.h"))
					s.named = true;
				if (!strcmp(t->name, "sleeper"))
					s.sleeper = true;
			}
			break;
		}
		case WEFT__V1__FRAME__BODY_EVENTS: {
			int n = weft_wire_batch_decode(f->events, ev,
							WEFT_WIRE_BATCH_MAX);

			assert_true(n >= 0);
			s.batches++;
			s.events += (uint64_t)n;
			for (int i = 0; i < n; i++)
				s.polls += ev[i].kind == WEFT_EV_POLL;
			break;
		}
		default:
			break;
		}
		if (f->body_case != WEFT__V1__FRAME__BODY_HEADER ||
		    s.headers > 1)
			weft_wire_frame_free(f);
	}
	s.truncated = r->truncated;
	s.error = rc < 0 ? rc : 0;
	free(ev);
	return s;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *buf;
	long n;

	assert_non_null(fp);
	assert_int_equal(fseek(fp, 0, SEEK_END), 0);
	n = ftell(fp);
	assert_true(n >= 0);
	rewind(fp);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
	fclose(fp);
	*len = (size_t)n;
	return buf;
}

static void test_trace_file_records_workload(void **state)
{
	char *path = tmp_path("work.weft");
	weft_trace_reader_t r;
	struct summary s;

	(void)state;
	assert_int_equal(weft_trace_start(path, NULL), 0);
	assert_int_equal(weft_trace_start(path, NULL), -EBUSY);
	workload_alone(50, 20);
	assert_int_equal(weft_trace_stop(), 0);
	assert_int_equal(weft_trace_stop(), -ENOENT);

	assert_int_equal(weft_trace_reader_open(&r, path), 0);
	s = read_trace(&r);
	assert_int_equal(s.error, 0);
	assert_false(s.truncated);
	assert_int_equal(s.headers, 1);
	assert_non_null(r.header);
	assert_int_equal(r.header->hello->pid, getpid());
	assert_true(s.updates >= 1);
	assert_true(s.named);
	/* 50 tasks x 21 polls, unless the rings dropped some. */
	print_message("%llu frames, %llu events in %llu batches, %llu polls\n",
		      (unsigned long long)s.frames,
		      (unsigned long long)s.events,
		      (unsigned long long)s.batches,
		      (unsigned long long)s.polls);
	assert_true(s.polls > 0);
	weft_trace_reader_close(&r);
	unlink(path);
	free(path);
}

/*
 * A task that parks at two awaits in turn (issue 21), recorded and read
 * back: every pending POLL names its site (WEFT_POLL_SITE_SHIFT), each
 * site announced (AWAIT_SITE) on the ring before the POLL that first
 * names it, and the sites read back say the right line at each step; no
 * PARKED_AT.
 */
#define ALT_STEPS 20
/* Await site ids: 1 .. the runtime's table (await_site.c's SITE_MAX). */
#define ALT_SITE_MAX 4096u

struct alternator {
	int weft_pc;
	int i;
};

static int alt_line[2];

static weft_poll_t alternator_poll(void *arg, weft_cx_t *cx)
{
	struct alternator *s = arg;

	WEFT_ASYNC_BEGIN(s);
	for (s->i = 0; s->i < ALT_STEPS / 2; s->i++) {
		alt_line[0] = __LINE__; WEFT_YIELD(s, cx);
		alt_line[1] = __LINE__; WEFT_YIELD(s, cx);
	}
	WEFT_ASYNC_END(s);
}

static void test_trace_file_await_sites(void **state)
{
	char *path = tmp_path("awaits.weft");
	weft_config_t cfg = { .workers = 1 };
	weft_event_t *ev = malloc(WEFT_WIRE_BATCH_MAX * sizeof(*ev));
	/* By id: the runtime numbers at most ALT_SITE_MAX, process-wide
	 * (other tests' sites come first). */
	uint32_t lines[ALT_SITE_MAX + 1] = { 0 };
	weft_trace_reader_t r;
	weft_runtime_t *rt;
	Weft__V1__Frame *f;
	unsigned steps = 0;
	weft_join_t *j;
	uint64_t id;
	int rc;

	(void)state;
	assert_non_null(ev);
	assert_int_equal(weft_trace_start(path, NULL), 0);
	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	assert_int_equal(weft_spawn_named(rt, "alternator", alternator_poll,
					  &(struct alternator){ 0 }, &j),
			 0);
	id = weft_join_id(j);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
	assert_int_equal(weft_trace_stop(), 0);
	weft_runtime_destroy(rt);

	assert_int_equal(weft_trace_reader_open(&r, path), 0);
	while ((rc = weft_trace_reader_next(&r, &f)) == 1) {
		int n = 0;

		if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS)
			n = weft_wire_batch_decode(f->events, ev,
						   WEFT_WIRE_BATCH_MAX);
		assert_true(n >= 0);
		for (int i = 0; i < n; i++) {
			uint32_t site = ev[i].a2 >> WEFT_POLL_SITE_SHIFT;

			if (ev[i].kind == WEFT_EV_AWAIT_SITE) {
				assert_true(ev[i].task > 0 &&
					    ev[i].task <= ALT_SITE_MAX);
				lines[ev[i].task] = ev[i].a2;
			}
			if (ev[i].task != id ||
			    ev[i].kind == WEFT_EV_AWAIT_SITE)
				continue;
			assert_int_not_equal(ev[i].kind, WEFT_EV_PARKED_AT);
			if (ev[i].kind != WEFT_EV_POLL ||
			    (ev[i].a2 & WEFT_POLL_READY))
				continue;
			/* Announced before it, on its ring: read first. */
			assert_true(site > 0 && site <= ALT_SITE_MAX);
			assert_int_equal(lines[site], alt_line[steps % 2]);
			steps++;
		}
		if (f->body_case != WEFT__V1__FRAME__BODY_HEADER)
			weft_wire_frame_free(f);
	}
	assert_int_equal(rc, 0);
	/* Every pending poll read back (no drops in so few events). */
	assert_int_equal(steps, ALT_STEPS);
	weft_trace_reader_close(&r);
	unlink(path);
	free(path);
	free(ev);
}

/*
 * A recording begun while another subscriber already listens: the rings
 * announced the alternator's sites (AWAIT_SITE) once, to the listening
 * period before the file, so the file's POLLs name sites it never saw
 * announced.  The recording's Updates carry every await site the
 * collector knows (Site id WEFT_WIRE_AWAIT_SITE_BASE + id): every pending
 * poll read back still names its line (without them: none did).
 */
static void alternate_once(weft_runtime_t *rt, uint64_t *id)
{
	weft_join_t *j;

	assert_int_equal(weft_spawn_named(rt, "alternator", alternator_poll,
					  &(struct alternator){ 0 }, &j),
			 0);
	*id = weft_join_id(j);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
}

static void test_trace_file_await_sites_late(void **state)
{
	char *path = tmp_path("awaits-late.weft");
	weft_config_t cfg = { .workers = 1 };
	weft_event_t *ev = malloc(WEFT_WIRE_BATCH_MAX * sizeof(*ev));
	weft_probe_sub_opts_t so = { .events = true };
	unsigned steps = 0, announced = 0;
	uint32_t sites[ALT_STEPS];
	weft_probe_sub_t *sub;
	weft_trace_reader_t r;
	weft_runtime_t *rt;
	Weft__V1__Frame *f;
	uint64_t id;
	int rc;

	(void)state;
	assert_non_null(ev);
	assert_int_equal(weft_probe_subscribe(&so, &sub), 0);
	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	alternate_once(rt, &id); /* announced to the subscriber's period */
	weft_probe_flush();
	assert_int_equal(weft_trace_start(path, NULL), 0);
	alternate_once(rt, &id);
	assert_int_equal(weft_trace_stop(), 0);
	weft_runtime_destroy(rt);
	weft_probe_unsubscribe(sub);

	assert_int_equal(weft_trace_reader_open(&r, path), 0);
	while ((rc = weft_trace_reader_next(&r, &f)) == 1) {
		int n = 0;

		if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS)
			n = weft_wire_batch_decode(f->events, ev,
						   WEFT_WIRE_BATCH_MAX);
		assert_true(n >= 0);
		for (int i = 0; i < n; i++) {
			announced += ev[i].kind == WEFT_EV_AWAIT_SITE;
			if (ev[i].task == id && ev[i].kind == WEFT_EV_POLL &&
			    !(ev[i].a2 & WEFT_POLL_READY) && steps < ALT_STEPS)
				sites[steps++] = ev[i].a2 >>
						 WEFT_POLL_SITE_SHIFT;
		}
		if (f->body_case != WEFT__V1__FRAME__BODY_HEADER)
			weft_wire_frame_free(f);
	}
	assert_int_equal(rc, 0);
	/* The case this is about: nothing announced in the file. */
	assert_int_equal(announced, 0);
	assert_int_equal(steps, ALT_STEPS);
	/* The file's Updates named them (a pass's Update follows its
	 * events: looked up once the file is read). */
	for (unsigned k = 0; k < steps; k++) {
		const weft_wire_site_t *s =
			weft_wire_sites_await(&r.sites, sites[k]);

		assert_non_null(s);
		assert_int_equal(s->line, alt_line[k % 2]);
		assert_non_null(strstr(s->file, "test_trace_file.c"));
	}
	weft_trace_reader_close(&r);
	unlink(path);
	free(path);
	free(ev);
}

/*
 * The disk fills while recording (RLIMIT_FSIZE: writes past 64 KiB fail
 * with EFBIG, the one that crosses it short): the recorder cuts the file
 * back to its last whole record, stops, and weft_trace_stop() says why.
 * Every record left reads whole (before, a reader failed on the whole
 * file: "frame does not decode").  weft_trace_stats() counts it.  The
 * same file is continued afterwards (weft_trace_continue()) and reads
 * whole to its new end; a new recording starts too.
 */
static void test_trace_file_full_disk(void **state)
{
	char *path = tmp_path("full.weft"), *again = tmp_path("again.weft");
	weft_trace_opts_t rot = { .max_file_bytes = 1 << 20 };
	weft_trace_stats_t before, after;
	struct rlimit old, low;
	weft_trace_reader_t r;
	struct summary sum, more;
	struct stat st;
	off_t kept;
	int err;

	(void)state;
	weft_trace_stats(&before);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	low = old;
	low.rlim_cur = 64 * 1024;
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &low), 0);
	assert_int_equal(weft_trace_start(path, NULL), 0);
	/* Small flushes (one each 100 ms) until the file is half full... */
	for (int i = 0; i < 300; i++) {
		workload_alone(4, 4);
		usleep(120 * 1000);
		assert_int_equal(stat(path, &st), 0);
		if (st.st_size >= 32 * 1024)
			break;
	}
	/* ...then one that crosses the limit. */
	workload_alone(200, 20);
	err = weft_trace_stop();
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(err, -EFBIG);
	assert_int_equal(stat(path, &st), 0);
	print_message("kept %lld bytes\n", (long long)st.st_size);
	assert_true(st.st_size >= 32 * 1024 && st.st_size <= 64 * 1024);
	assert_int_equal(weft_trace_reader_open(&r, path), 0);
	sum = read_trace(&r);
	assert_int_equal(sum.error, 0);
	assert_false(sum.truncated);
	assert_int_equal(sum.headers, 1);
	weft_trace_reader_close(&r);
	/* Counted: one failure, the failed write's bytes lost. */
	weft_trace_stats(&after);
	assert_int_equal(after.write_errors, before.write_errors + 1);
	assert_int_equal(after.error, -EFBIG);
	assert_true(after.bytes_lost > before.bytes_lost);
	assert_true(after.bytes_written >=
		    before.bytes_written + (uint64_t)st.st_size);
	print_message(
		"%llu bytes lost\n",
		(unsigned long long)(after.bytes_lost - before.bytes_lost));

	/* Space back: the same file goes on from its last whole record
	 * (not with rotation; a file that is no trace is refused). */
	kept = st.st_size;
	assert_int_equal(weft_trace_continue(path, &rot), -EINVAL);
	assert_int_equal(weft_trace_continue(again, NULL), 0);
	assert_int_equal(weft_trace_stop(), 0); /* absent: a new trace */
	assert_int_equal(truncate(again, 3), 0);
	assert_int_equal(weft_trace_continue(again, NULL), -EPROTO);
	assert_int_equal(weft_trace_continue(path, NULL), 0);
	workload_alone(10, 5);
	assert_int_equal(weft_trace_stop(), 0);
	weft_trace_stats(&after);
	assert_int_equal(after.error, 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > kept);
	assert_int_equal(weft_trace_reader_open(&r, path), 0);
	more = read_trace(&r);
	assert_int_equal(more.error, 0);
	assert_false(more.truncated);
	assert_int_equal(r.skipped, 0);
	assert_int_equal(more.headers, 1);
	assert_true(more.frames > sum.frames);
	assert_true(more.updates > sum.updates);
	assert_true(more.named);
	weft_trace_reader_close(&r);
	print_message("continued: %lld bytes, %llu frames (%llu before)\n",
		      (long long)st.st_size, (unsigned long long)more.frames,
		      (unsigned long long)sum.frames);

	/* Or a new recording. */
	assert_int_equal(weft_trace_start(again, NULL), 0);
	workload_alone(10, 5);
	assert_int_equal(weft_trace_stop(), 0);
	unlink(path);
	unlink(again);
	free(path);
	free(again);
}

static void test_trace_file_truncated_at_every_offset(void **state)
{
	char *path = tmp_path("cut.weft");
	weft_trace_reader_t r;
	struct summary whole, s;
	uint8_t *buf;
	size_t len, keep = 0, nends = 0, e = 0;
	static uint64_t ends[4096];
	uint64_t prev_frames = 0;
	Weft__V1__Frame *f;

	(void)state;
	assert_int_equal(weft_trace_start(path, NULL), 0);
	workload_alone(4, 3);
	assert_int_equal(weft_trace_stop(), 0);
	buf = slurp(path, &len);

	/* Keep the first records up to ~6 KiB (every cut costs a read), and
	 * where each record ends. */
	weft_trace_reader_open_mem(&r, buf, len);
	while (weft_trace_reader_next(&r, &f) == 1) {
		keep = r.dec.offset;
		assert_true(nends < 4096);
		ends[nends++] = keep;
		if (r.frames > 1)
			weft_wire_frame_free(f);
		if (keep > 6144 && r.frames >= 2)
			break;
	}
	weft_trace_reader_close(&r);
	assert_true(keep > 0);

	weft_trace_reader_open_mem(&r, buf, keep);
	whole = read_trace(&r);
	weft_trace_reader_close(&r);
	assert_int_equal(whole.error, 0);
	assert_false(whole.truncated);
	assert_true(whole.frames >= 2);

	for (size_t cut = 0; cut <= keep; cut++) {
		weft_trace_reader_open_mem(&r, buf, cut);
		s = read_trace(&r);
		assert_int_equal(s.error, 0);
		/* Frames only grow with the cut; all of them at the end. */
		assert_true(s.frames >= prev_frames);
		assert_true(s.frames <= whole.frames);
		/* Cut short exactly when the cut is inside a record. */
		while (e < nends && ends[e] < cut)
			e++;
		assert_int_equal(s.truncated,
				 cut > 0 && !(e < nends && ends[e] == cut));
		assert_int_equal(s.frames,
				 e < nends && ends[e] == cut ? e + 1 : e);
		prev_frames = s.frames;
		weft_trace_reader_close(&r);
	}
	assert_int_equal(prev_frames, whole.frames);
	free(buf);
	unlink(path);
	free(path);
}

/* The sizes of the whole records a reader returns, in order (at most
 * @cap); the reader is left at its end. */
static size_t record_sizes(weft_trace_reader_t *r, uint64_t *sizes, size_t cap,
			   int *rc)
{
	Weft__V1__Frame *f;
	size_t n = 0;

	while ((*rc = weft_trace_reader_next(r, &f)) == 1) {
		assert_true(n < cap);
		sizes[n++] = r->dec.offset - r->dec.record_offset;
		if (r->frames > 1)
			weft_wire_frame_free(f);
	}
	return n;
}

/* @a then @b into a new buffer of @alen + @blen bytes. */
static uint8_t *splice2(const uint8_t *a, size_t alen, const uint8_t *b,
			size_t blen)
{
	uint8_t *p = malloc(alen + blen + 1);

	assert_non_null(p);
	memcpy(p, a, alen);
	memcpy(p + alen, b, blen);
	return p;
}

/*
 * A torn record in the middle of a file (what the recorder left before it
 * cut files back: part of a record, then whole records appended behind
 * it): the first @torn bytes of a record spliced between the whole
 * records before and after it.  Every whole record on both sides reads,
 * in order, and the reader counts the torn bytes as skipped; cut short
 * as well, the file still reads to its last whole record.  Each record of
 * a real recording is torn at a few lengths, the largest at about 400;
 * one splice is read from a file too (pread, not memory).
 */
static void test_trace_file_torn_record_skipped(void **state)
{
	char *path = tmp_path("torn.weft"), *spliced = tmp_path("spl.weft");
	static uint64_t sizes[4096], got[4096];
	uint64_t total_skipped = 0, cases = 0;
	size_t len, n, big = 1, ng;
	weft_trace_reader_t r;
	uint64_t *start;
	uint8_t *buf;
	int rc;

	(void)state;
	assert_int_equal(weft_trace_start(path, NULL), 0);
	workload_alone(8, 4);
	assert_int_equal(weft_trace_stop(), 0);
	buf = slurp(path, &len);
	weft_trace_reader_open_mem(&r, buf, len);
	n = record_sizes(&r, sizes, 4096, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(r.skipped, 0);
	weft_trace_reader_close(&r);
	assert_true(n >= 4);
	start = calloc(n + 1, sizeof(*start));
	assert_non_null(start);
	for (size_t i = 0; i < n; i++) {
		start[i + 1] = start[i] + sizes[i];
		if (i && sizes[i] > sizes[big])
			big = i;
	}
	assert_int_equal(start[n], len);
	print_message("%zu records, %zu bytes; the largest %llu bytes\n", n,
		      len, (unsigned long long)sizes[big]);

	for (size_t m = 1; m < n; m++) {
		uint64_t sz = sizes[m];

		for (uint64_t torn = 1; torn < sz; torn++) {
			uint8_t *b;

			/* For the largest, its first and last 64 lengths
			 * (the header cut, the last varints) and every 16th
			 * between; a few for others: the header cut, the
			 * body cut at its middle and one byte short. */
			if (m == big ?
				    torn > 64 && torn < sz - 64 && torn % 16 :
				    torn > 3 && torn != sz / 2 &&
					    torn != sz - 1)
				continue;
			/* Records 0..m-1, @torn bytes of record m, then
			 * records m.. whole. */
			b = splice2(buf, start[m] + torn, buf + start[m],
				    len - start[m]);
			weft_trace_reader_open_mem(&r, b, len + torn);
			ng = record_sizes(&r, got, 4096, &rc);
			if (rc || ng != n || r.skipped != torn ||
			    r.first_skip != start[m])
				print_message(
					"record %zu torn at %llu: rc %d, "
					"%zu of %zu records, %llu at %llu "
					"skipped\n",
					m, (unsigned long long)torn, rc, ng, n,
					(unsigned long long)r.skipped,
					(unsigned long long)r.first_skip);
			assert_int_equal(rc, 0);
			assert_false(r.truncated);
			assert_int_equal(ng, n);
			assert_memory_equal(got, sizes, n * sizeof(*sizes));
			assert_int_equal(r.skipped, torn);
			assert_int_equal(r.skips, 1);
			assert_int_equal(r.first_skip, start[m]);
			weft_trace_reader_close(&r);

			/* Cut inside the last record as well: every whole
			 * record before the cut, marked truncated. */
			weft_trace_reader_open_mem(&r, b, len + torn - 1);
			ng = record_sizes(&r, got, 4096, &rc);
			if (rc || ng != n - 1)
				print_message(
					"record %zu torn at %llu, cut: rc "
					"%d, %zu of %zu records\n",
					m, (unsigned long long)torn, rc, ng,
					n - 1);
			assert_int_equal(rc, 0);
			assert_true(r.truncated);
			assert_int_equal(ng, n - 1);
			/* The last record torn, then cut: both are the
			 * file's cut tail, nothing skipped. */
			assert_int_equal(r.skipped, m == n - 1 ? 0 : torn);
			weft_trace_reader_close(&r);
			total_skipped += torn;
			cases++;
			free(b);
		}
	}
	print_message("%llu splices, %llu bytes skipped in all\n",
		      (unsigned long long)cases,
		      (unsigned long long)total_skipped);

	/* The largest record torn at its middle, read from a file. */
	{
		uint64_t torn = sizes[big] / 2;
		uint8_t *b = splice2(buf, start[big] + torn, buf + start[big],
				     len - start[big]);
		FILE *fp = fopen(spliced, "wb");

		assert_non_null(fp);
		assert_int_equal(fwrite(b, 1, len + torn, fp), len + torn);
		assert_int_equal(fclose(fp), 0);
		assert_int_equal(weft_trace_reader_open(&r, spliced), 0);
		ng = record_sizes(&r, got, 4096, &rc);
		assert_int_equal(rc, 0);
		assert_int_equal(ng, n);
		assert_int_equal(r.skipped, torn);
		weft_trace_reader_close(&r);
		free(b);
	}
	free(start);
	free(buf);
	unlink(path);
	unlink(spliced);
	free(path);
	free(spliced);
}

static weft_poll_t sleeper_poll(void *arg, weft_cx_t *cx)
{
	return weft_sleep_poll(arg, cx);
}

static void sleeper_drop(void *arg)
{
	weft_sleep_fini(arg);
}

/* @n tasks named "sleeper", each asleep for an hour. */
static void spawn_sleepers(weft_runtime_t *rt, int n)
{
	weft_sleep_t sl;

	weft_sleep_init(&sl, 3600ull * 1000000000u);
	for (int i = 0; i < n; i++)
		assert_int_equal(
			weft_spawn_with(rt,
					&(weft_spawn_t){ .poll = sleeper_poll,
							 .drop = sleeper_drop,
							 .state = &sl,
							 .size = sizeof(sl),
							 .name = "sleeper" },
					NULL),
			0);
}

/* Segment @i of the trace at @path (path, path.1, ...) in @buf: whether
 * it exists. */
static bool segment(char *buf, size_t size, const char *path, unsigned i)
{
	struct stat st;

	if (i)
		snprintf(buf, size, "%s.%u", path, i);
	else
		snprintf(buf, size, "%s", path);
	return !stat(buf, &st);
}

static weft_poll_t ready_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	return WEFT_READY;
}

/*
 * Segments rotate at 256 KiB; each reads alone: one header, its segment
 * number, and, in each after the first that holds an update, the name of
 * a task that sleeps unchanged through all of them (from the update with
 * every task that follows a rotation).  @burst: first, that many short
 * tasks, then a wait until the collector has let them go (an update with
 * every task was too big for a rotation to ask while they were kept; it
 * is small again after).
 */
static void rotates(int burst)
{
	char *path = tmp_path("rot.weft");
	char seg[300];
	weft_trace_opts_t o = { .max_file_bytes = 256 << 10,
				.flush_ms = 1,
				.update_ms = 1 };
	weft_config_t cfg = { .workers = 1 };
	weft_trace_reader_t r;
	weft_runtime_t *rt;
	struct summary s;
	unsigned n = 0, with_updates = 0;
	bool last_named = false;

	/* Asleep before the recording starts, and all through it. */
	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	spawn_sleepers(rt, 1);
	assert_int_equal(weft_trace_start(path, &o), 0);
	if (burst) {
		uint64_t retain;

		for (int i = 0; i < burst; i++)
			assert_int_equal(
				weft_spawn_with(
					rt,
					&(weft_spawn_t){ .poll = ready_poll,
							 .name = "burst" },
					NULL),
				0);
		weft_probe_flush();
		pthread_mutex_lock(&weft__probe.lock);
		retain = weft__probe.config.retain_ns;
		weft__probe.config.retain_ns = 100 * 1000 * 1000;
		pthread_mutex_unlock(&weft__probe.lock);
		for (int i = 0; i < 5000; i++) {
			size_t known;

			usleep(1000);
			weft_probe_flush();
			pthread_mutex_lock(&weft__probe.lock);
			known = weft__probe.ntasks;
			pthread_mutex_unlock(&weft__probe.lock);
			if (known < 100)
				break;
		}
		pthread_mutex_lock(&weft__probe.lock);
		weft__probe.config.retain_ns = retain;
		pthread_mutex_unlock(&weft__probe.lock);
	}
	/* Few tasks, many events: an update with every task stays well
	 * under a quarter of a segment, as rotation asks for one. */
	workload_alone(20, 20000);
	assert_int_equal(weft_trace_stop(), 0);
	weft_runtime_destroy(rt);
	for (unsigned i = 0; segment(seg, sizeof(seg), path, i); i++) {
		assert_int_equal(weft_trace_reader_open(&r, seg), 0);
		s = read_trace(&r);
		assert_int_equal(s.error, 0);
		assert_int_equal(s.headers, 1);
		assert_int_equal(r.header->segment, i);
		if (i && s.updates) {
			if (!s.sleeper)
				print_message("segment %u: %llu updates, no "
					      "sleeper\n",
					      i, (unsigned long long)s.updates);
			/* While the burst's tasks were kept, a rotation
			 * asked for no update with every task. */
			if (!burst)
				assert_true(s.sleeper);
			with_updates++;
			last_named = s.sleeper;
		}
		weft_trace_reader_close(&r);
		unlink(seg);
		n++;
	}
	print_message("%u files, %u after the first with updates\n", n,
		      with_updates);
	assert_true(n >= 2);
	assert_true(with_updates >= 1);
	/* After the burst, named again. */
	assert_true(last_named);
	free(path);
}

static void test_trace_file_rotates(void **state)
{
	(void)state;
	rotates(0);
}

static void test_trace_file_rotates_after_burst(void **state)
{
	(void)state;
	rotates(10000);
}

/*
 * Many tasks, small segments: an update with every task fills most of a
 * file, so a rotation must not ask for one (each would start the next
 * file: a file a pass).  3,000 sleeping tasks, 64 KiB segments, a third
 * of a second of an idle recording: a couple of files, not dozens.
 */
static void test_trace_file_rotation_bounded(void **state)
{
	enum { SLEEPERS = 3000 };
	char *path = tmp_path("rotb.weft");
	char seg[300];
	weft_trace_opts_t o = { .max_file_bytes = 64 << 10, .flush_ms = 1 };
	weft_config_t cfg = { .workers = 1 };
	weft_runtime_t *rt;
	unsigned n = 0;

	(void)state;
	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	spawn_sleepers(rt, SLEEPERS);
	assert_int_equal(weft_trace_start(path, &o), 0);
	usleep(300 * 1000);
	assert_int_equal(weft_trace_stop(), 0);
	weft_runtime_destroy(rt);
	for (unsigned i = 0; segment(seg, sizeof(seg), path, i); i++) {
		unlink(seg);
		n++;
	}
	print_message("%u files\n", n);
	/* At least one rotation (the first update fills a file). */
	assert_true(n >= 2 && n <= 3);
	free(path);
}

/*
 * A burst that one pass drains, two or three files' worth of marks
 * (about 5 bytes each): every file with events holds an update (the one
 * its rotation asked for, naming the sleeper; the last, the stop's), so
 * that each read alone names what it shows, and none passes the limit by
 * more than FILE_WAIT_MAX (4) times it and a flush.  Before, the drain
 * filled file after file with its events before the pass's update came,
 * and the files between held events alone
 * (test_trace_file_await_sites_rotated failed so under TSan).
 */
static void test_trace_file_rotation_waits_for_update(void **state)
{
	enum { MAX = 16 << 10 };
	char *path = tmp_path("rotw.weft");
	char seg[300];
	weft_trace_opts_t o = { .max_file_bytes = MAX, .flush_ms = 1 };
	weft_config_t cfg = { .workers = 1 };
	weft_trace_reader_t r;
	weft_runtime_t *rt;
	struct summary s;
	struct stat st;
	unsigned n = 0;

	(void)state;
	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	spawn_sleepers(rt, 1);
	assert_int_equal(weft_trace_start(path, &o), 0);
	weft_probe_flush(); /* the first file's update */
	for (uint32_t i = 0; i < 8000; i++)
		weft_probe_mark(1, i + 1);
	weft_probe_flush();
	/* Marks after the rotation that the drain's update ended with: the
	 * file they go to has events however many passes the drain took,
	 * so its update must name the sleeper (it did not when the drain's
	 * full update carried the subscription's warning history, which the
	 * size estimate took for the sleeper's). */
	for (uint32_t i = 0; i < 1000; i++)
		weft_probe_mark(1, 8001 + i);
	weft_probe_flush();
	assert_int_equal(weft_trace_stop(), 0);
	weft_runtime_destroy(rt);
	for (unsigned i = 0; segment(seg, sizeof(seg), path, i); i++) {
		assert_int_equal(stat(seg, &st), 0);
		assert_int_equal(weft_trace_reader_open(&r, seg), 0);
		s = read_trace(&r);
		weft_trace_reader_close(&r);
		print_message("file %u: %lld bytes, %llu updates, %llu "
			      "events\n",
			      i, (long long)st.st_size,
			      (unsigned long long)s.updates,
			      (unsigned long long)s.events);
		assert_int_equal(s.error, 0);
		/* The last one too, if it has events: the stop's final
		 * update (a file begun just before the stop may have none,
		 * and nothing to name). */
		if (s.events) {
			assert_true(s.updates >= 1);
			assert_true(s.sleeper);
		}
		assert_true(st.st_size <= 5 * MAX);
		unlink(seg);
		n++;
	}
	assert_true(n >= 2);
	free(path);
}

static void test_trace_file_flight_snapshot(void **state)
{
	char *path = tmp_path("flight.weft");
	weft_trace_opts_t o = { .flight_bytes = 64 << 10 };
	weft_trace_reader_t r;
	struct summary s;
	struct stat st;

	(void)state;
	assert_int_equal(weft_trace_snapshot(path), -ENOENT);
	assert_int_equal(weft_trace_start(NULL, NULL), -EINVAL);
	assert_int_equal(weft_trace_start(NULL, &o), 0);
	workload_alone(200, 30);
	weft_probe_flush();
	assert_int_equal(weft_trace_snapshot(path), 0);
	assert_int_equal(weft_trace_stop(), 0);

	assert_int_equal(stat(path, &st), 0);
	/* The budget plus at most one chunk and the snapshot's own update. */
	assert_true((uint64_t)st.st_size < (64u << 10) + (512u << 10));
	assert_int_equal(weft_trace_reader_open(&r, path), 0);
	s = read_trace(&r);
	assert_int_equal(s.error, 0);
	assert_int_equal(s.headers, 1);
	assert_true(s.updates >= 1);
	assert_true(s.events > 0);
	weft_trace_reader_close(&r);
	unlink(path);
	free(path);
}

/*
 * The pending polls of task @id in the trace at @path: each names its
 * await site, known from the file's AWAIT_SITE events or its Updates'
 * sites, at the alternator's line of its turn.  Returns how many; *@ann:
 * the file's AWAIT_SITE events of the alternator's two lines.
 */
static unsigned alternator_sites(const char *path, uint64_t id, unsigned *ann)
{
	weft_event_t *ev = malloc(WEFT_WIRE_BATCH_MAX * sizeof(*ev));
	uint32_t lines[ALT_SITE_MAX + 1] = { 0 }, sites[ALT_STEPS];
	weft_trace_reader_t r;
	Weft__V1__Frame *f;
	unsigned steps = 0;

	assert_non_null(ev);
	*ann = 0;
	assert_int_equal(weft_trace_reader_open(&r, path), 0);
	while (weft_trace_reader_next(&r, &f) == 1) {
		int n = 0;

		if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS)
			n = weft_wire_batch_decode(f->events, ev,
						   WEFT_WIRE_BATCH_MAX);
		assert_true(n >= 0);
		for (int i = 0; i < n; i++) {
			if (ev[i].kind == WEFT_EV_AWAIT_SITE) {
				assert_true(ev[i].task > 0 &&
					    ev[i].task <= ALT_SITE_MAX);
				lines[ev[i].task] = ev[i].a2;
				*ann += ev[i].a2 == (uint64_t)alt_line[0] ||
					ev[i].a2 == (uint64_t)alt_line[1];
			}
			if (ev[i].task == id && ev[i].kind == WEFT_EV_POLL &&
			    !(ev[i].a2 & WEFT_POLL_READY) && steps < ALT_STEPS)
				sites[steps++] = ev[i].a2 >>
						 WEFT_POLL_SITE_SHIFT;
		}
		if (r.frames > 1)
			weft_wire_frame_free(f);
	}
	assert_int_equal(r.error, 0);
	for (unsigned k = 0; k < steps; k++) {
		const weft_wire_site_t *s =
			weft_wire_sites_await(&r.sites, sites[k]);
		uint32_t line = sites[k] <= ALT_SITE_MAX ? lines[sites[k]] : 0;

		if (!line && s)
			line = s->line;
		assert_int_equal(line, alt_line[k % 2]);
	}
	weft_trace_reader_close(&r);
	free(ev);
	return steps;
}

/*
 * A flight recorder's snapshot, and a rotated file's later segments, hold
 * the alternator's second run but not the announcements of its sites
 * (made once, in the first run's records, which fell out of the flight
 * budget, or went into the first segment): every pending poll still
 * names its line, from the snapshot's and each segment's full Update.
 */
static void test_trace_file_await_sites_flight(void **state)
{
	char *path = tmp_path("flight-awaits.weft");
	weft_trace_opts_t o = { .flight_ms = 200 };
	weft_config_t cfg = { .workers = 1 };
	weft_runtime_t *rt;
	unsigned ann;
	uint64_t id;

	(void)state;
	assert_int_equal(weft_trace_start(NULL, &o), 0);
	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	alternate_once(rt, &id);
	usleep(600 * 1000); /* the first run's records older than kept */
	alternate_once(rt, &id);
	weft_probe_flush();
	assert_int_equal(weft_trace_snapshot(path), 0);
	assert_int_equal(weft_trace_stop(), 0);
	weft_runtime_destroy(rt);
	assert_int_equal(alternator_sites(path, id, &ann), ALT_STEPS);
	assert_int_equal(ann, 0);
	unlink(path);
	free(path);
}

static void test_trace_file_await_sites_rotated(void **state)
{
	char *path = tmp_path("rot-awaits.weft");
	weft_trace_opts_t o = { .max_file_bytes = 16 << 10, .flush_ms = 1 };
	weft_config_t cfg = { .workers = 1 };
	weft_runtime_t *rt;
	unsigned n = 0, ann, found = 0;
	char seg[300];
	uint64_t id;

	(void)state;
	assert_int_equal(weft_trace_start(path, &o), 0);
	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	alternate_once(rt, &id);
	workload_alone(200, 30); /* segments on */
	alternate_once(rt, &id);
	assert_int_equal(weft_trace_stop(), 0);
	weft_runtime_destroy(rt);
	for (unsigned i = 0; segment(seg, sizeof(seg), path, i); i++) {
		/* Its polls are in one of the last segments, which never
		 * saw the announcements (the first run's). */
		unsigned k = alternator_sites(seg, id, &ann);

		found += k;
		if (k)
			assert_int_equal(ann, 0);
		unlink(seg);
		n++;
	}
	print_message("%u files\n", n);
	assert_true(n >= 2);
	assert_int_equal(found, ALT_STEPS);
	free(path);
}

/* MARK events with this a1 in a trace file. */
static unsigned marks_with(const char *path, uint64_t a1)
{
	weft_event_t *ev = malloc(WEFT_WIRE_BATCH_MAX * sizeof(*ev));
	weft_trace_reader_t r;
	Weft__V1__Frame *f;
	unsigned n = 0;

	assert_non_null(ev);
	assert_int_equal(weft_trace_reader_open(&r, path), 0);
	while (weft_trace_reader_next(&r, &f) == 1) {
		if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS) {
			int k = weft_wire_batch_decode(f->events, ev,
							WEFT_WIRE_BATCH_MAX);

			assert_true(k >= 0);
			for (int i = 0; i < k; i++)
				n += ev[i].kind == WEFT_EV_MARK &&
				     ev[i].a1 == a1;
		}
		if (r.frames > 1)
			weft_wire_frame_free(f);
	}
	assert_int_equal(r.error, 0);
	weft_trace_reader_close(&r);
	free(ev);
	return n;
}

/*
 * The flight recorder by time: marks made long before the snapshot
 * (more than flight_ms) are gone from it, the recent ones are there,
 * however few bytes they all take.
 */
static void test_trace_file_flight_by_seconds(void **state)
{
	char *path = tmp_path("flight-s.weft");
	weft_trace_opts_t o = { .flight_ms = 300 };

	(void)state;
	assert_int_equal(weft_trace_start(NULL, &o), 0);
	for (uint32_t i = 0; i < 1000; i++)
		weft_probe_mark(1, i + 1);
	weft_probe_flush();
	/* Well past flight_ms, in passes (each one trims). */
	for (int i = 0; i < 40; i++) {
		usleep(25000);
		weft_probe_flush();
	}
	for (uint32_t i = 0; i < 1000; i++)
		weft_probe_mark(2, i + 1);
	weft_probe_flush();
	assert_int_equal(weft_trace_snapshot(path), 0);
	assert_int_equal(weft_trace_stop(), 0);
	assert_int_equal(marks_with(path, 1), 0);
	assert_int_equal(marks_with(path, 2), 1000);
	unlink(path);

	/* WEFT_TRACE_FLIGHT_S: seconds from the environment are taken by
	 * weft_runtime_create(); here, the option itself: 0 ms and 0
	 * bytes is no flight recorder (a path is needed). */
	o.flight_ms = 0;
	assert_int_equal(weft_trace_start(NULL, &o), -EINVAL);
	free(path);
}

static void test_trace_file_not_a_trace(void **state)
{
	static const uint8_t junk[] = "hello, not a trace";
	/* A valid record, but a Control frame first: not a trace. */
	static const uint8_t control[] = { 0x0a, 0x04, 0x32, 0x02, 0x08, 0x01 };
	weft_trace_reader_t r;
	struct summary s;

	(void)state;
	weft_trace_reader_open_mem(&r, junk, sizeof(junk));
	s = read_trace(&r);
	assert_int_equal(s.error, -EILSEQ);
	weft_trace_reader_close(&r);

	weft_trace_reader_open_mem(&r, control, sizeof(control));
	s = read_trace(&r);
	assert_int_equal(s.error, WEFT_TRACE_E_NOT_TRACE);
	assert_string_equal(weft_trace_reader_strerror(s.error),
			    "not a weft trace (no file header)");
	weft_trace_reader_close(&r);

	weft_trace_reader_open_mem(&r, junk, 0);
	s = read_trace(&r);
	assert_int_equal(s.error, 0);
	assert_int_equal(s.frames, 0);
	weft_trace_reader_close(&r);

	assert_int_equal(weft_trace_reader_open(&r, "/nonexistent/x.weft"),
			 -ENOENT);
}

/*
 * `--full-disk PATH GO [FSIZE]` (tests/trace_full_disk.sh): records into
 * PATH, on a filesystem nearly full, until a write fails (FSIZE: or with
 * RLIMIT_FSIZE at that many bytes instead, SIGXFSZ ignored); says "full"
 * on stdout; waits for the file GO (the script freed space: the limit
 * goes too); stops (the error comes back), continues PATH and records
 * more.  Exit 0, or the step that failed.
 */
static int full_disk_mode(const char *path, const char *go, const char *fsize)
{
	weft_trace_stats_t st0, st;
	struct rlimit old, low;
	int err;

	if (fsize) {
		if (getrlimit(RLIMIT_FSIZE, &old))
			return 10;
		low = old;
		low.rlim_cur = strtoull(fsize, NULL, 10);
		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &low))
			return 10;
	}
	weft_trace_stats(&st0);
	st = st0;
	if (weft_trace_start(path, NULL))
		return 2;
	for (int i = 0; i < 600 && st.write_errors == st0.write_errors; i++) {
		workload_alone(20, 10);
		usleep(20 * 1000);
		weft_trace_stats(&st);
	}
	if (st.write_errors == st0.write_errors) {
		fprintf(stderr, "full-disk: no write failed\n");
		return 3;
	}
	printf("full %d\n", st.error);
	fflush(stdout);
	for (int i = 0; i < 1200 && access(go, F_OK); i++)
		usleep(50 * 1000);
	if (fsize && setrlimit(RLIMIT_FSIZE, &old))
		return 10;
	err = weft_trace_stop();
	if (err != st.error) {
		fprintf(stderr, "full-disk: stop said %d, not %d\n", err,
			st.error);
		return 4;
	}
	err = weft_trace_continue(path, NULL);
	if (err) {
		fprintf(stderr, "full-disk: continue: %s\n", strerror(-err));
		return 5;
	}
	workload_alone(50, 20);
	err = weft_trace_stop();
	if (err) {
		fprintf(stderr, "full-disk: stop: %s\n", strerror(-err));
		return 6;
	}
	return 0;
}

/*
 * `--splice-torn IN OUT` (tests/trace_full_disk.sh): OUT is IN with the
 * first half of its middle record (past the header) put in before that
 * record: a torn record, then the whole ones, as the recorder left files
 * before it cut them back.  Prints the torn bytes.
 */
static int splice_torn_mode(const char *in, const char *out)
{
	static uint64_t sizes[1 << 16];
	weft_trace_reader_t r;
	uint64_t at = 0, torn;
	size_t len, n, m;
	uint8_t *buf = slurp(in, &len);
	FILE *fp;
	int rc;

	weft_trace_reader_open_mem(&r, buf, len);
	n = record_sizes(&r, sizes, 1 << 16, &rc);
	weft_trace_reader_close(&r);
	if (rc || n < 3)
		return 2;
	m = n / 2;
	for (size_t i = 0; i < m; i++)
		at += sizes[i];
	torn = sizes[m] / 2;
	fp = fopen(out, "wb");
	if (!fp || fwrite(buf, 1, at + torn, fp) != at + torn ||
	    fwrite(buf + at, 1, len - at, fp) != len - at || fclose(fp))
		return 3;
	printf("%llu\n", (unsigned long long)torn);
	free(buf);
	return 0;
}

static weft_poll_t blocker_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	usleep(15000); /* a blocking call on a worker */
	return WEFT_READY;
}

/*
 * @n handlers of one spawn site, each a 15 ms blocking poll, on one
 * worker, then the process ends at once: the long polls past the fold's
 * first five are still counted in its window when the recorder stops at
 * exit (WEFT_TRACE=path).
 */
static void burst_mode(unsigned n)
{
	weft_runtime_t *rt = rt_create(1);

	for (unsigned i = 0; i < n; i++) {
		weft_join_t *j = NULL;
		weft_spawn_t spec = {
			.poll = blocker_poll,
			.name = "blocker",
			.file = __FILE__,
			.line = __LINE__,
		};

		assert_int_equal(weft_spawn_with(rt, &spec, &j), 0);
		assert_int_equal(join_wait_drop(j, NULL), 0);
	}
	weft_runtime_destroy(rt);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trace_file_records_workload),
		cmocka_unit_test(test_trace_file_await_sites),
		cmocka_unit_test(test_trace_file_await_sites_late),
		cmocka_unit_test(test_trace_file_await_sites_flight),
		cmocka_unit_test(test_trace_file_await_sites_rotated),
		cmocka_unit_test(test_trace_file_full_disk),
		cmocka_unit_test(test_trace_file_truncated_at_every_offset),
		cmocka_unit_test(test_trace_file_torn_record_skipped),
		cmocka_unit_test(test_trace_file_rotates),
		cmocka_unit_test(test_trace_file_rotates_after_burst),
		cmocka_unit_test(test_trace_file_rotation_bounded),
		cmocka_unit_test(test_trace_file_rotation_waits_for_update),
		cmocka_unit_test(test_trace_file_flight_snapshot),
		cmocka_unit_test(test_trace_file_flight_by_seconds),
		cmocka_unit_test(test_trace_file_not_a_trace),
	};

	if (argc == 3 && !strcmp(argv[1], "--burst")) {
		burst_mode((unsigned)atoi(argv[2]));
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "--workload")) {
		workload_alone(200, 50);
		return 0;
	}
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "--full-disk"))
		return full_disk_mode(argv[2], argv[3],
				      argc == 5 ? argv[4] : NULL);
	if (argc == 4 && !strcmp(argv[1], "--splice-torn"))
		return splice_torn_mode(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "--spinner")) {
		spinner_workload(argv[2], (unsigned)atoi(argv[3]));
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
