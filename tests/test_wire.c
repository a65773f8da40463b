/* SPDX-License-Identifier: MIT */
/*
 * The wire format (probe/src/wire.c): every frame type through a record
 * and back, events through column batches and back bit for bit, the size
 * of a realistic batch, and the record decoder against oversized, short
 * and garbage input.
 *
 * `test_wire --write-sample FILE` writes a small file of records instead
 * (one of each frame type) for the protoc check (tests/wire_protoc.sh).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_helpers.h"

#include "weft/probe.h"

#include "wire_internal.h"

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

/* Decodes every record of @buf (fed in @chunk-byte pieces). */
static size_t decode_all(const uint8_t *buf, size_t len, size_t chunk,
			 Weft__V1__Frame **out, size_t max)
{
	weft_wire_decoder_t d;
	size_t n = 0, off = 0;

	weft__wire_decoder_init(&d, 0);
	while (off < len) {
		size_t take = len - off < chunk ? len - off : chunk, used;

		while (take) {
			Weft__V1__Frame *f;
			int rc = weft__wire_decoder_feed(&d, buf + off, take,
							 &used, &f);

			assert_true(rc >= 0);
			off += used;
			take -= used;
			if (rc == WEFT_WIRE_FRAME) {
				assert_true(n < max);
				out[n++] = f;
			}
		}
	}
	assert_false(weft__wire_decoder_mid_record(&d));
	assert_int_equal(d.offset, len);
	weft__wire_decoder_fini(&d);
	return n;
}

/* ------------------------------------------------------------ frame types */

static weft_probe_task_t sample_task(weft_hist_t *h)
{
	weft_probe_task_t t = {
		.id = 42,
		.parent = 7,
		.name = "acceptor",
		.file = "srv.c",
		.line = 99,
		.state_size = 128,
		.kind = 1,
		.state = 3,
		.last_worker = 2,
		.status = -5,
		.spawned_ns = 1000,
		.finished_ns = 5000,
		.polls = 12,
		.busy_ns = 3000,
		.max_poll_ns = 900,
		.warnings = 1u << 2,
		.locks_held = 1,
	};

	memset(h, 0, sizeof(*h));
	weft_hist_record(h, 100);
	weft_hist_record(h, 900);
	t.poll_hist = h;
	return t;
}

static void append_all_types(weft_wire_buf_t *b, weft_wire_hello_t *hello)
{
	Weft__V1__Frame f;
	Weft__V1__Subscribe sub = WEFT__V1__SUBSCRIBE__INIT;
	Weft__V1__Filter filt = WEFT__V1__FILTER__INIT;
	Weft__V1__Control ctl = WEFT__V1__CONTROL__INIT;
	uint64_t tasks[] = { 3, 4 };
	weft_hist_t h;
	weft_probe_task_t t = sample_task(&h);
	const weft_probe_task_t *tp[] = { &t };
	weft_probe_worker_t w[2] = { { .index = 0 }, { .index = 1 } };
	weft_probe_warning_t warn = { .seq = 1,
				      .kind = WEFT_WARN_LONG_POLL,
				      .task = 42,
				      .task_name = "acceptor",
				      .value_ns = 25000000 };
	weft_probe_stats_t st = { .now_ns = 9000,
				  .workers = 2,
				  .clock = "tsc" };
	weft_probe_update_t u = { .stats = &st,
				  .tasks = tp,
				  .ntasks = 1,
				  .workers = w,
				  .nworkers = 2,
				  .warnings = &warn,
				  .nwarnings = 1 };
	weft_event_t ev[3] = {
		{ .ts = 100,
		  .task = 42,
		  .kind = WEFT_EV_POLL,
		  .a1 = 50,
		  .a2 = 1,
		  .worker = 1 },
		{ .ts = 150,
		  .task = 43,
		  .kind = WEFT_EV_WAKE,
		  .a1 = 42,
		  .a2 = 0x101,
		  .worker = 1 },
		{ .ts = 170, .kind = WEFT_EV_PARK, .worker = 1, .flags = 3 },
	};
	weft_wire_batch_t batch;

	w[1].counters.polls = 77;
	w[1].stolen_from[0] = 5;
	snprintf(warn.detail, sizeof(warn.detail), "long poll");
	assert_int_equal(weft__wire_hello_init(hello, 2, "tsc", 1234), 0);
	assert_int_equal(weft__wire_header_append(b, &hello->msg, 0), 0);

	weft__v1__frame__init(&f);
	f.body_case = WEFT__V1__FRAME__BODY_HELLO;
	f.hello = &hello->msg;
	assert_int_equal(weft__wire_record_append(b, &f), 0);

	filt.n_tasks = 2;
	filt.tasks = tasks;
	sub.updates = true;
	sub.events = true;
	sub.interval_ms = 250;
	sub.filter = &filt;
	f.body_case = WEFT__V1__FRAME__BODY_SUBSCRIBE;
	f.subscribe = &sub;
	assert_int_equal(weft__wire_record_append(b, &f), 0);

	assert_int_equal(weft__wire_update_append(b, &u, 500), 0);

	weft__wire_batch_init(&batch);
	assert_int_equal(weft__wire_batch_encode(&batch, ev, 3), 3);
	f.body_case = WEFT__V1__FRAME__BODY_EVENTS;
	f.events = &batch.msg;
	assert_int_equal(weft__wire_record_append(b, &f), 0);
	weft__wire_batch_fini(&batch);

	ctl.op = WEFT__V1__CONTROL_OP__CONTROL_OP_TASK_DETAIL;
	ctl.task = 42;
	f.body_case = WEFT__V1__FRAME__BODY_CONTROL;
	f.control = &ctl;
	assert_int_equal(weft__wire_record_append(b, &f), 0);
}

static void test_wire_round_trip_every_frame_type(void **state)
{
	weft_wire_buf_t b = { 0 };
	weft_wire_hello_t hello;
	Weft__V1__Frame *fr[8];
	weft_event_t ev[3];
	size_t n;

	(void)state;
	append_all_types(&b, &hello);
	/* Whole, then a byte at a time, then in odd chunks. */
	for (size_t chunk = b.len; chunk; chunk = chunk == b.len ? 1 :
						  chunk == 1     ? 7 :
								   0) {
		n = decode_all(b.data, b.len, chunk, fr, 8);
		assert_int_equal(n, 6);

		assert_int_equal(fr[0]->body_case,
				 WEFT__V1__FRAME__BODY_HEADER);
		assert_string_equal(fr[0]->header->magic, WEFT_TRACE_MAGIC);
		assert_int_equal(fr[0]->header->format_version,
				 WEFT_TRACE_FORMAT_VERSION);
		assert_int_equal(fr[0]->header->hello->pid, getpid());
		assert_int_equal(fr[0]->header->hello->workers, 2);
		assert_string_equal(fr[0]->header->hello->clock, "tsc");
		assert_int_equal(fr[0]->header->hello->start_ns, 1234);
		assert_true(fr[0]->header->hello->n_argv >= 1);
		assert_string_equal(fr[0]->header->event_kinds[WEFT_EV_POLL],
				    "poll");

		assert_int_equal(fr[1]->body_case, WEFT__V1__FRAME__BODY_HELLO);
		assert_string_equal(fr[1]->hello->process_name,
				    hello.msg.process_name);

		assert_int_equal(fr[2]->body_case,
				 WEFT__V1__FRAME__BODY_SUBSCRIBE);
		assert_true(fr[2]->subscribe->events);
		assert_int_equal(fr[2]->subscribe->interval_ms, 250);
		assert_int_equal(fr[2]->subscribe->filter->n_tasks, 2);
		assert_int_equal(fr[2]->subscribe->filter->tasks[1], 4);

		assert_int_equal(fr[3]->body_case,
				 WEFT__V1__FRAME__BODY_UPDATE);
		{
			Weft__V1__Update *u = fr[3]->update;

			assert_int_equal(u->stats->now_ns, 9000);
			assert_string_equal(u->stats->clock, "tsc");
			assert_int_equal(u->n_tasks, 1);
			assert_int_equal(u->tasks[0]->id, 42);
			assert_string_equal(u->tasks[0]->name, "acceptor");
			assert_string_equal(u->tasks[0]->file, "srv.c");
			assert_int_equal(u->tasks[0]->line, 99);
			assert_int_equal(u->tasks[0]->status, -5);
			assert_int_equal(u->tasks[0]->poll_hist->count, 2);
			assert_null(u->tasks[0]->sched_hist);
			assert_int_equal(u->n_new_tasks, 1);
			assert_int_equal(u->n_finished_tasks, 1);
			assert_int_equal(u->n_workers, 2);
			assert_int_equal(u->workers[1]->counters->polls, 77);
			assert_int_equal(u->workers[1]->stolen_from[0], 5);
			assert_int_equal(u->n_warnings, 1);
			assert_string_equal(u->warnings[0]->detail,
					    "long poll");
		}

		assert_int_equal(fr[4]->body_case,
				 WEFT__V1__FRAME__BODY_EVENTS);
		assert_int_equal(weft__wire_batch_decode(fr[4]->events, ev, 3),
				 3);
		assert_int_equal(ev[1].a1, 42);
		assert_int_equal(ev[1].a2, 0x101);
		assert_int_equal(ev[2].flags, 3);
		assert_int_equal(ev[2].task, 0);

		assert_int_equal(fr[5]->body_case,
				 WEFT__V1__FRAME__BODY_CONTROL);
		assert_int_equal(fr[5]->control->task, 42);
		for (size_t i = 0; i < n; i++)
			weft__wire_frame_free(fr[i]);
	}
	weft__wire_hello_fini(&hello);
	weft__wire_buf_fini(&b);
}

/* ------------------------------------------------------------ events */

static void encode_events(weft_wire_buf_t *b, const weft_event_t *ev, size_t n,
			  size_t *batches)
{
	weft_wire_batch_t batch;
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;

	weft__wire_batch_init(&batch);
	f.body_case = WEFT__V1__FRAME__BODY_EVENTS;
	f.events = &batch.msg;
	while (n) {
		int k = weft__wire_batch_encode(&batch, ev, n);

		assert_true(k > 0);
		assert_int_equal(weft__wire_record_append(b, &f), 0);
		ev += k;
		n -= (size_t)k;
		(*batches)++;
	}
	weft__wire_batch_fini(&batch);
}

static void test_wire_events_round_trip_exactly(void **state)
{
	enum { N = 50000 };
	weft_event_t *ev = calloc(N, sizeof(*ev));
	weft_event_t *back = calloc(N, sizeof(*back));
	weft_wire_buf_t b = { 0 };
	weft_wire_decoder_t d;
	size_t batches = 0, got = 0, off = 0;

	(void)state;
	assert_non_null(ev);
	assert_non_null(back);
	/* Random everything, in runs of random length per worker, including
	 * the extremes: zero, all ones, tasks 2^63 apart. */
	for (size_t i = 0; i < N; i++) {
		weft_event_t *e = &ev[i];
		uint64_t r = rnd();

		e->worker = i && r % 5 ? ev[i - 1].worker :
					 (uint16_t)(r % 4 == 0 ? 0xffff :
								 rnd_below(8));
		e->kind = (uint8_t)(r >> 8);
		e->ts = r % 3 ? (i ? ev[i - 1].ts + rnd_below(10000) : 0) :
				rnd();
		e->task = r % 7 == 0 ? 0 :
			  r % 7 == 1 ? (i ? ev[i - 1].task ^ (1ull << 63) : 1) :
			  r % 7 == 2 ? UINT64_MAX :
				       rnd_below(1000) + rnd() % 2;
		e->a1 = r % 11 < 3 ? 0 : r % 11 == 3 ? UINT64_MAX : rnd();
		e->a2 = r % 13 < 5 ? 0 : (uint32_t)rnd();
		e->flags = r % 17 == 0 ? (uint8_t)rnd() : 0;
		if ((r >> 20) % 5 == 0)
			e->kind = WEFT_EV_WAKE;
		if ((r >> 20) % 5 == 1)
			e->kind = WEFT_EV_SPAWN;
	}
	encode_events(&b, ev, N, &batches);
	assert_true(batches > 100);

	weft__wire_decoder_init(&d, 0);
	while (off < b.len) {
		Weft__V1__Frame *f;
		size_t used;
		int rc = weft__wire_decoder_feed(&d, b.data + off, b.len - off,
						 &used, &f);

		assert_int_equal(rc, WEFT_WIRE_FRAME);
		off += used;
		rc = weft__wire_batch_decode(f->events, back + got, N - got);
		assert_true(rc > 0);
		got += (size_t)rc;
		weft__wire_frame_free(f);
	}
	weft__wire_decoder_fini(&d);
	assert_int_equal(got, N);
	assert_memory_equal(ev, back, N * sizeof(*ev));
	weft__wire_buf_fini(&b);
	free(ev);
	free(back);
}

/*
 * A poll/wake-heavy stretch of one worker, as the runtime emits it: a wake
 * (by a task or I/O), the schedule, the poll a little later; steals,
 * parks and spawns now and then.  Task ids are sequential, polls last
 * 0.5-20 us and events come 0.1-5 us apart.
 */
static size_t realistic_events(weft_event_t *ev, size_t cap, uint16_t worker)
{
	uint64_t ts = 1000000000ull, next_id = 1000;
	size_t n = 0;

	while (n + 8 <= cap) {
		uint64_t task = 1000 + rnd_below(next_id - 999);
		uint64_t r = rnd_below(100);
		uint64_t dur = 500 + rnd_below(20000);

		ts += 100 + rnd_below(5000);
		if (r < 10) {
			ev[n++] = (weft_event_t){ .ts = ts,
						  .task = next_id,
						  .a1 = task,
						  .kind = WEFT_EV_SPAWN,
						  .worker = worker };
			ev[n++] = (weft_event_t){ .ts = ts,
						  .task = next_id,
						  .a1 = 0x55d0c0ffee00ull,
						  .a2 = 256,
						  .kind = WEFT_EV_SPAWN_INFO,
						  .worker = worker };
			ev[n++] = (weft_event_t){ .ts = ts,
						  .task = next_id,
						  .a1 = 0x55d0c0ffe000ull,
						  .a2 = 120,
						  .kind = WEFT_EV_SPAWN_LOC,
						  .worker = worker };
			task = next_id++;
		} else if (r < 14) {
			ev[n++] = (weft_event_t){ .ts = ts,
						  .a1 = rnd_below(4),
						  .a2 = 1 + rnd_below(16),
						  .kind = WEFT_EV_STEAL,
						  .worker = worker };
		} else if (r < 17) {
			ev[n++] = (weft_event_t){ .ts = ts,
						  .kind = WEFT_EV_PARK,
						  .worker = worker };
			ts += 1000 + rnd_below(100000);
			ev[n++] = (weft_event_t){ .ts = ts,
						  .a2 = 1,
						  .kind = WEFT_EV_UNPARK,
						  .worker = worker };
		}
		ev[n++] = (weft_event_t){
			.ts = ts,
			.task = task,
			.a1 = rnd_below(2) ? task - rnd_below(3) : 0,
			.a2 = (uint32_t)(rnd_below(3)) | WEFT_WAKE_BY_VAL,
			.kind = WEFT_EV_WAKE,
			.worker = worker
		};
		ts += 50 + rnd_below(300);
		ev[n++] = (weft_event_t){ .ts = ts,
					  .task = task,
					  .a2 = (uint32_t)rnd_below(2),
					  .kind = WEFT_EV_SCHEDULE,
					  .worker = worker };
		ts += 200 + rnd_below(3000) + dur;
		ev[n++] = (weft_event_t){ .ts = ts,
					  .task = task,
					  .a1 = dur,
					  .a2 = rnd_below(8) == 0,
					  .kind = WEFT_EV_POLL,
					  .worker = worker };
	}
	return n;
}

static void test_wire_bytes_per_event_realistic(void **state)
{
	enum { N = 4096 };
	weft_event_t *ev = calloc(N, sizeof(*ev));
	weft_wire_buf_t b = { 0 };
	size_t n, batches = 0;
	double per;

	(void)state;
	assert_non_null(ev);
	n = realistic_events(ev, N, 3);
	encode_events(&b, ev, n, &batches);
	per = (double)b.len / (double)n;
	print_message("bytes/event: %.2f (%zu events, %zu bytes, %zu "
		      "batch(es))\n",
		      per, n, b.len, batches);
	assert_true(per <= 8.0);
	weft__wire_buf_fini(&b);
	free(ev);
}

/* ------------------------------------------------------------ the decoder */

static int feed_bytes(weft_wire_decoder_t *d, const uint8_t *p, size_t n,
		      Weft__V1__Frame **f)
{
	size_t used;

	return weft__wire_decoder_feed(d, p, n, &used, f);
}

static void test_wire_oversized_length_rejected(void **state)
{
	uint8_t rec[16] = { WEFT_WIRE_RECORD_TAG };
	size_t n = 1 + weft__wire_varint_put(rec + 1, WEFT_WIRE_MAX_RECORD + 1);
	weft_wire_decoder_t d;
	Weft__V1__Frame *f;

	(void)state;
	weft__wire_decoder_init(&d, 0);
	assert_int_equal(feed_bytes(&d, rec, n, &f), -EMSGSIZE);
	assert_null(d.body); /* refused before any allocation */
	assert_null(f);
	/* Sticky. */
	assert_int_equal(feed_bytes(&d, rec, 1, &f), -EMSGSIZE);
	weft__wire_decoder_fini(&d);

	/* A small limit applies the same way. */
	weft__wire_decoder_init(&d, 100);
	n = 1 + weft__wire_varint_put(rec + 1, 101);
	assert_int_equal(feed_bytes(&d, rec, n, &f), -EMSGSIZE);
	weft__wire_decoder_fini(&d);

	/* Exactly the limit is accepted (and waits for its bytes). */
	weft__wire_decoder_init(&d, 0);
	n = 1 + weft__wire_varint_put(rec + 1, WEFT_WIRE_MAX_RECORD);
	assert_int_equal(feed_bytes(&d, rec, n, &f), WEFT_WIRE_NEED_MORE);
	assert_true(weft__wire_decoder_mid_record(&d));
	weft__wire_decoder_fini(&d);
}

static void test_wire_truncated_needs_more(void **state)
{
	weft_wire_buf_t b = { 0 };
	weft_wire_hello_t hello;
	weft_wire_decoder_t d;
	Weft__V1__Frame *f;
	size_t used;

	(void)state;
	assert_int_equal(weft__wire_hello_init(&hello, 4, "vdso", 1), 0);
	assert_int_equal(weft__wire_header_append(&b, &hello.msg, 0), 0);
	for (size_t cut = 0; cut < b.len; cut++) {
		weft__wire_decoder_init(&d, 0);
		assert_int_equal(weft__wire_decoder_feed(&d, b.data, cut, &used,
							 &f),
				 WEFT_WIRE_NEED_MORE);
		assert_int_equal(used, cut);
		assert_int_equal(weft__wire_decoder_mid_record(&d), cut > 0);
		assert_int_equal(weft__wire_decoder_feed(&d, b.data + cut,
							 b.len - cut, &used,
							 &f),
				 WEFT_WIRE_FRAME);
		assert_int_equal(used, b.len - cut);
		assert_string_equal(f->header->magic, WEFT_TRACE_MAGIC);
		weft__wire_frame_free(f);
		weft__wire_decoder_fini(&d);
	}
	weft__wire_hello_fini(&hello);
	weft__wire_buf_fini(&b);
}

static void test_wire_garbage_rejected(void **state)
{
	static const uint8_t bad_tag[] = { 0x12, 0x00 };
	static const uint8_t long_varint[] = { 0x0a, 0xff, 0xff, 0xff,
					       0xff, 0xff, 0xff, 0xff,
					       0xff, 0xff, 0xff, 0x01 };
	static const uint8_t bad_body[] = { 0x0a, 0x03, 0xff, 0xff, 0xff };
	/* Frame.events (field 5) claiming 100 bytes inside a 2-byte body. */
	static const uint8_t bad_inner[] = { 0x0a, 0x02, 0x2a, 0x64 };
	weft_wire_decoder_t d;
	Weft__V1__Frame *f;

	(void)state;
	weft__wire_decoder_init(&d, 0);
	assert_int_equal(feed_bytes(&d, bad_tag, sizeof(bad_tag), &f), -EILSEQ);
	weft__wire_decoder_fini(&d);
	weft__wire_decoder_init(&d, 0);
	assert_int_equal(feed_bytes(&d, long_varint, sizeof(long_varint), &f),
			 -EILSEQ);
	weft__wire_decoder_fini(&d);
	weft__wire_decoder_init(&d, 0);
	assert_int_equal(feed_bytes(&d, bad_body, sizeof(bad_body), &f),
			 -EBADMSG);
	weft__wire_decoder_fini(&d);
	weft__wire_decoder_init(&d, 0);
	assert_int_equal(feed_bytes(&d, bad_inner, sizeof(bad_inner), &f),
			 -EBADMSG);
	weft__wire_decoder_fini(&d);
	assert_string_equal(weft__wire_strerror(-EMSGSIZE),
			    "record longer than the limit");

	/* Random bytes never crash the decoder or the batch decoder. */
	for (int round = 0; round < 2000; round++) {
		uint8_t buf[64];
		size_t used, len = 1 + rnd_below(sizeof(buf));
		int rc;

		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)rnd();
		if (round % 2)
			buf[0] = WEFT_WIRE_RECORD_TAG;
		if (round % 4 == 1)
			buf[1] = (uint8_t)(len - 2 < 0x7f ? len - 2 : 0);
		weft__wire_decoder_init(&d, 0);
		rc = weft__wire_decoder_feed(&d, buf, len, &used, &f);
		if (rc == WEFT_WIRE_FRAME) {
			if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS) {
				weft_event_t ev[64];

				(void)weft__wire_batch_decode(f->events, ev,
							      64);
			}
			weft__wire_frame_free(f);
		}
		weft__wire_decoder_fini(&d);
	}
}

static void test_wire_batch_inconsistent_rejected(void **state)
{
	weft_event_t ev[2] = {
		{ .ts = 1, .task = 5, .a1 = 9, .kind = WEFT_EV_POLL },
		{ .ts = 2, .task = 5, .a2 = 1, .kind = WEFT_EV_POLL },
	}, out[2];
	weft_wire_batch_t b;

	(void)state;
	weft__wire_batch_init(&b);
	assert_int_equal(weft__wire_batch_encode(&b, ev, 2), 2);
	assert_int_equal(weft__wire_batch_decode(&b.msg, out, 1), -ENOSPC);
	b.msg.n_a1 = 0;
	assert_int_equal(weft__wire_batch_decode(&b.msg, out, 2), -EBADMSG);
	b.msg.n_a1 = 1;
	b.msg.count = 3;
	assert_int_equal(weft__wire_batch_decode(&b.msg, out, 2), -EBADMSG);
	b.msg.count = 2;
	b.msg.n_a2 = 0;
	assert_int_equal(weft__wire_batch_decode(&b.msg, out, 2), -EBADMSG);
	b.msg.n_a2 = 1;
	assert_int_equal(weft__wire_batch_decode(&b.msg, out, 2), 2);
	assert_memory_equal(ev, out, sizeof(ev));
	/* A worker split ends a batch. */
	ev[1].worker = 1;
	assert_int_equal(weft__wire_batch_encode(&b, ev, 2), 1);
	weft__wire_batch_fini(&b);
}

/* ------------------------------------------------------------ the sample */

static int write_sample(const char *path)
{
	weft_wire_buf_t b = { 0 };
	weft_wire_hello_t hello;
	weft_event_t ev[256];
	size_t n, batches = 0;
	FILE *fp;

	append_all_types(&b, &hello);
	n = realistic_events(ev, 256, 0);
	encode_events(&b, ev, n, &batches);
	fp = fopen(path, "wb");
	if (!fp || fwrite(b.data, 1, b.len, fp) != b.len || fclose(fp)) {
		perror(path);
		return 1;
	}
	weft__wire_hello_fini(&hello);
	weft__wire_buf_fini(&b);
	return 0;
}

/*
 * A pass's events regrouped per emitting thread: every event once, each
 * thread's in their order, threads in ascending id order; both with a
 * few threads (the counting sort) and with more ids than it keeps (the
 * sort it falls back to).
 */
static void check_grouping(unsigned ids, size_t n)
{
	weft_wire_events_t e;
	weft_event_t *ev = calloc(n, sizeof(*ev));
	const weft_event_t *g;
	uint64_t x = 0x9E3779B97F4A7C15ull;
	uint64_t sum = 0;

	assert_non_null(ev);
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		ev[i].worker = (uint16_t)(x % ids == ids - 1 ? 65535
							      : x % ids * 3);
		ev[i].ts = i; /* the original position */
		ev[i].kind = 4;
	}
	weft__wire_events_init(&e);
	g = weft__wire_events_group(&e, ev, n);
	assert_non_null(g);
	for (size_t i = 1; i < n; i++) {
		assert_true(g[i - 1].worker <= g[i].worker);
		if (g[i - 1].worker == g[i].worker)
			assert_true(g[i - 1].ts < g[i].ts);
	}
	for (size_t i = 0; i < n; i++)
		sum += g[i].ts;
	assert_int_equal(sum, (uint64_t)n * (n - 1) / 2);
	weft__wire_events_fini(&e);
	free(ev);
}

static void test_wire_events_grouped_per_thread(void **state)
{
	(void)state;
	check_grouping(5, 10000);
	check_grouping(300, 20000);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wire_round_trip_every_frame_type),
		cmocka_unit_test(test_wire_events_round_trip_exactly),
		cmocka_unit_test(test_wire_bytes_per_event_realistic),
		cmocka_unit_test(test_wire_oversized_length_rejected),
		cmocka_unit_test(test_wire_truncated_needs_more),
		cmocka_unit_test(test_wire_garbage_rejected),
		cmocka_unit_test(test_wire_batch_inconsistent_rejected),
		cmocka_unit_test(test_wire_events_grouped_per_thread),
	};

	if (argc == 3 && !strcmp(argv[1], "--write-sample"))
		return write_sample(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
