/* SPDX-License-Identifier: MIT */
/*
 * The wire format (proto/src/record.c, batch.c, update.c, hello.c): every frame type through a record
 * and back (an Update with a resource and a task waiting on it too), events through column batches and back bit for bit, the size
 * of a realistic batch, and the record decoder against oversized, short
 * and garbage input.
 *
 * `test_wire --write-sample FILE` writes a small file of records instead
 * (one of each frame type) for the protoc check (tests/wire_protoc.sh);
 * `--write-resources FILE` a trace about resources and
 * `--write-pool-many FILE` one of 1,100 blocking jobs' submitters
 * (tests/trace_res.sh).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_helpers.h"

#include "weft/probe.h"

#include "weft/wire.h"

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

	weft_wire_decoder_init(&d, 0);
	while (off < len) {
		size_t take = len - off < chunk ? len - off : chunk, used;

		while (take) {
			Weft__V1__Frame *f;
			int rc = weft_wire_decoder_feed(&d, buf + off, take,
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
	assert_false(weft_wire_decoder_mid_record(&d));
	assert_int_equal(d.offset, len);
	weft_wire_decoder_fini(&d);
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
	weft_hist_t wait_h = { 0 };
	weft_probe_resource_t res = { .id = 17,
				      .kind = WEFT_RES_MUTEX,
				      .name = "cache",
				      .file = "srv.c",
				      .line = 12,
				      .nholders = 1,
				      .nwaiters = 10,
				      .holders = { 41 },
				      .waiters = { 42, 43, 44, 45, 46, 47, 48,
						   49 },
				      .acquires = 300,
				      .acquires_per_s = 12.5,
				      .wait_hist = &wait_h };
	const weft_probe_resource_t *rp[] = { &res };
	weft_probe_update_t u = { .stats = &st,
				  .tasks = tp,
				  .ntasks = 1,
				  .workers = w,
				  .nworkers = 2,
				  .warnings = &warn,
				  .nwarnings = 1,
				  .resources = rp,
				  .nresources = 1 };
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

	t.waiting_on = 17;
	t.waiting_since_ns = 8000;
	t.waiting_op = WEFT_RES_OP_ACQUIRE;
	t.nwaited = 2;
	t.waited[0] = (weft_probe_task_wait_t){ 17, 900000, 3 };
	t.waited[1] = (weft_probe_task_wait_t){ 4, 1000, 1 };
	weft_hist_record(&wait_h, 5000);
	w[1].counters.polls = 77;
	w[1].nstolen = 1;
	w[1].stolen[0] = (weft_probe_steal_t){ .victim = 0, .tasks = 5 };
	w[0].stolen_out = 5;
	w[1].off_cpu_ns = 75000000;
	w[1].off_cpu_ratio = 0.25;
	snprintf(warn.detail, sizeof(warn.detail), "long poll");
	assert_int_equal(weft_wire_hello_init(hello, 2, "tsc", 1234), 0);
	assert_int_equal(weft_wire_header_append(b, &hello->msg, 0), 0);

	weft__v1__frame__init(&f);
	f.body_case = WEFT__V1__FRAME__BODY_HELLO;
	f.hello = &hello->msg;
	assert_int_equal(weft_wire_record_append(b, &f), 0);

	filt.n_tasks = 2;
	filt.tasks = tasks;
	sub.updates = true;
	sub.events = true;
	sub.interval_ms = 250;
	sub.filter = &filt;
	f.body_case = WEFT__V1__FRAME__BODY_SUBSCRIBE;
	f.subscribe = &sub;
	assert_int_equal(weft_wire_record_append(b, &f), 0);

	assert_int_equal(weft_wire_update_append(b, &u, 500), 0);

	weft_wire_batch_init(&batch);
	assert_int_equal(weft_wire_batch_encode(&batch, ev, 3), 3);
	f.body_case = WEFT__V1__FRAME__BODY_EVENTS;
	f.events = &batch.msg;
	assert_int_equal(weft_wire_record_append(b, &f), 0);
	weft_wire_batch_fini(&batch);

	ctl.op = WEFT__V1__CONTROL_OP__CONTROL_OP_TASK_DETAIL;
	ctl.task = 42;
	f.body_case = WEFT__V1__FRAME__BODY_CONTROL;
	f.control = &ctl;
	assert_int_equal(weft_wire_record_append(b, &f), 0);
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
			assert_int_equal(u->workers[1]->n_stolen, 1);
			assert_int_equal(u->workers[1]->stolen[0]->victim, 0);
			assert_int_equal(u->workers[1]->stolen[0]->tasks, 5);
			assert_int_equal(u->workers[0]->stolen_out, 5);
			assert_int_equal(u->workers[1]->n_stolen_from, 0);
			assert_int_equal(u->workers[1]->off_cpu_ns, 75000000);
			assert_true(u->workers[1]->off_cpu_ratio == 0.25);
			/* Not read: absent, as in a file from before them. */
			assert_int_equal(u->workers[0]->off_cpu_ns, 0);
			assert_true(u->workers[0]->off_cpu_ratio == 0);
			assert_int_equal(u->n_warnings, 1);
			assert_string_equal(u->warnings[0]->detail,
					    "long poll");
			assert_int_equal(u->tasks[0]->waiting_on, 17);
			assert_int_equal(u->tasks[0]->waiting_since_ns, 8000);
			assert_int_equal(u->tasks[0]->waiting_op,
					 WEFT_RES_OP_ACQUIRE);
			assert_int_equal(u->tasks[0]->n_waited, 2);
			assert_int_equal(u->tasks[0]->waited[0]->resource, 17);
			assert_int_equal(u->tasks[0]->waited[0]->total_ns,
					 900000);
			assert_int_equal(u->tasks[0]->waited[0]->waits, 3);
			assert_int_equal(u->tasks[0]->waited[1]->resource, 4);
			assert_int_equal(u->tasks[0]->waited[1]->waits, 1);
			/* The resource: lists cut to WEFT_RES_LIST, the
			 * counts whole. */
			assert_int_equal(u->n_resources, 1);
			assert_int_equal(u->resources[0]->id, 17);
			assert_int_equal(u->resources[0]->kind, WEFT_RES_MUTEX);
			assert_string_equal(u->resources[0]->name, "cache");
			assert_string_equal(u->resources[0]->file, "srv.c");
			assert_int_equal(u->resources[0]->line, 12);
			assert_int_equal(u->resources[0]->nholders, 1);
			assert_int_equal(u->resources[0]->n_holders, 1);
			assert_int_equal(u->resources[0]->holders[0], 41);
			assert_int_equal(u->resources[0]->nwaiters, 10);
			assert_int_equal(u->resources[0]->n_waiters,
					 WEFT_RES_LIST);
			assert_int_equal(u->resources[0]->waiters[7], 49);
			assert_int_equal(u->resources[0]->acquires, 300);
			assert_true(u->resources[0]->acquires_per_s == 12.5);
			assert_int_equal(u->resources[0]->wait_hist->count, 1);
			assert_null(u->resources[0]->hold_hist);
		}

		assert_int_equal(fr[4]->body_case,
				 WEFT__V1__FRAME__BODY_EVENTS);
		assert_int_equal(weft_wire_batch_decode(fr[4]->events, ev, 3),
				 3);
		assert_int_equal(ev[1].a1, 42);
		assert_int_equal(ev[1].a2, 0x101);
		assert_int_equal(ev[2].flags, 3);
		assert_int_equal(ev[2].task, 0);

		assert_int_equal(fr[5]->body_case,
				 WEFT__V1__FRAME__BODY_CONTROL);
		assert_int_equal(fr[5]->control->task, 42);
		for (size_t i = 0; i < n; i++)
			weft_wire_frame_free(fr[i]);
	}
	weft_wire_hello_fini(&hello);
	weft_wire_buf_fini(&b);
}

/* ------------------------------------------------------------ events */

static void encode_events(weft_wire_buf_t *b, const weft_event_t *ev, size_t n,
			  size_t *batches)
{
	weft_wire_batch_t batch;
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;

	weft_wire_batch_init(&batch);
	f.body_case = WEFT__V1__FRAME__BODY_EVENTS;
	f.events = &batch.msg;
	while (n) {
		int k = weft_wire_batch_encode(&batch, ev, n);

		assert_true(k > 0);
		assert_int_equal(weft_wire_record_append(b, &f), 0);
		ev += k;
		n -= (size_t)k;
		(*batches)++;
	}
	weft_wire_batch_fini(&batch);
}

/* Random everything, in runs of random length per worker, including the
 * extremes: zero, all ones, tasks 2^63 apart. */
static void rnd_events(weft_event_t *ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
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
	rnd_events(ev, N);
	encode_events(&b, ev, N, &batches);
	assert_true(batches > 100);

	weft_wire_decoder_init(&d, 0);
	while (off < b.len) {
		Weft__V1__Frame *f;
		size_t used;
		int rc = weft_wire_decoder_feed(&d, b.data + off, b.len - off,
						 &used, &f);

		assert_int_equal(rc, WEFT_WIRE_FRAME);
		off += used;
		rc = weft_wire_batch_decode(f->events, back + got, N - got);
		assert_true(rc > 0);
		got += (size_t)rc;
		weft_wire_frame_free(f);
	}
	weft_wire_decoder_fini(&d);
	assert_int_equal(got, N);
	assert_memory_equal(ev, back, N * sizeof(*ev));
	weft_wire_buf_fini(&b);
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
	weft_wire_buf_fini(&b);
	free(ev);
}

/* ------------------------------------------------------------ the decoder */

static int feed_bytes(weft_wire_decoder_t *d, const uint8_t *p, size_t n,
		      Weft__V1__Frame **f)
{
	size_t used;

	return weft_wire_decoder_feed(d, p, n, &used, f);
}

static void test_wire_oversized_length_rejected(void **state)
{
	uint8_t rec[16] = { WEFT_WIRE_RECORD_TAG };
	size_t n = 1 + weft_wire_varint_put(rec + 1, WEFT_WIRE_MAX_RECORD + 1);
	weft_wire_decoder_t d;
	Weft__V1__Frame *f;

	(void)state;
	weft_wire_decoder_init(&d, 0);
	assert_int_equal(feed_bytes(&d, rec, n, &f), -EMSGSIZE);
	assert_null(d.body); /* refused before any allocation */
	assert_null(f);
	/* Sticky. */
	assert_int_equal(feed_bytes(&d, rec, 1, &f), -EMSGSIZE);
	weft_wire_decoder_fini(&d);

	/* A small limit applies the same way. */
	weft_wire_decoder_init(&d, 100);
	n = 1 + weft_wire_varint_put(rec + 1, 101);
	assert_int_equal(feed_bytes(&d, rec, n, &f), -EMSGSIZE);
	weft_wire_decoder_fini(&d);

	/* Exactly the limit is accepted (and waits for its bytes), with
	 * room held for the bytes that came, not for what the header
	 * claims: a peer that stops after a byte holds a few KiB. */
	weft_wire_decoder_init(&d, 0);
	n = 1 + weft_wire_varint_put(rec + 1, WEFT_WIRE_MAX_RECORD);
	assert_int_equal(feed_bytes(&d, rec, n, &f), WEFT_WIRE_NEED_MORE);
	assert_true(weft_wire_decoder_mid_record(&d));
	assert_int_equal(feed_bytes(&d, rec, 1, &f), WEFT_WIRE_NEED_MORE);
	assert_true(d.body_cap <= 4096);
	{
		size_t chunk = 100000, got = 1;
		uint8_t *z = calloc(1, chunk);

		assert_non_null(z);
		for (int i = 0; i < 5; i++) {
			assert_int_equal(feed_bytes(&d, z, chunk, &f),
					 WEFT_WIRE_NEED_MORE);
			got += chunk;
			assert_true(d.body_cap >= got);
			assert_true(d.body_cap <= 2 * got);
		}
		free(z);
	}
	weft_wire_decoder_fini(&d);
}

static void test_wire_truncated_needs_more(void **state)
{
	weft_wire_buf_t b = { 0 };
	weft_wire_hello_t hello;
	weft_wire_decoder_t d;
	Weft__V1__Frame *f;
	size_t used;

	(void)state;
	assert_int_equal(weft_wire_hello_init(&hello, 4, "vdso", 1), 0);
	assert_int_equal(weft_wire_header_append(&b, &hello.msg, 0), 0);
	for (size_t cut = 0; cut < b.len; cut++) {
		weft_wire_decoder_init(&d, 0);
		assert_int_equal(weft_wire_decoder_feed(&d, b.data, cut, &used,
							 &f),
				 WEFT_WIRE_NEED_MORE);
		assert_int_equal(used, cut);
		assert_int_equal(weft_wire_decoder_mid_record(&d), cut > 0);
		assert_int_equal(weft_wire_decoder_feed(&d, b.data + cut,
							 b.len - cut, &used,
							 &f),
				 WEFT_WIRE_FRAME);
		assert_int_equal(used, b.len - cut);
		assert_string_equal(f->header->magic, WEFT_TRACE_MAGIC);
		weft_wire_frame_free(f);
		weft_wire_decoder_fini(&d);
	}
	weft_wire_hello_fini(&hello);
	weft_wire_buf_fini(&b);
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
	weft_wire_decoder_init(&d, 0);
	assert_int_equal(feed_bytes(&d, bad_tag, sizeof(bad_tag), &f), -EILSEQ);
	weft_wire_decoder_fini(&d);
	weft_wire_decoder_init(&d, 0);
	assert_int_equal(feed_bytes(&d, long_varint, sizeof(long_varint), &f),
			 -EILSEQ);
	weft_wire_decoder_fini(&d);
	weft_wire_decoder_init(&d, 0);
	assert_int_equal(feed_bytes(&d, bad_body, sizeof(bad_body), &f),
			 -EBADMSG);
	weft_wire_decoder_fini(&d);
	weft_wire_decoder_init(&d, 0);
	assert_int_equal(feed_bytes(&d, bad_inner, sizeof(bad_inner), &f),
			 -EBADMSG);
	weft_wire_decoder_fini(&d);
	assert_string_equal(weft_wire_strerror(-EMSGSIZE),
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
		weft_wire_decoder_init(&d, 0);
		rc = weft_wire_decoder_feed(&d, buf, len, &used, &f);
		if (rc == WEFT_WIRE_FRAME) {
			if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS) {
				weft_event_t ev[64];

				(void)weft_wire_batch_decode(f->events, ev,
							      64);
			}
			weft_wire_frame_free(f);
		}
		weft_wire_decoder_fini(&d);
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
	weft_wire_batch_init(&b);
	assert_int_equal(weft_wire_batch_encode(&b, ev, 2), 2);
	assert_int_equal(weft_wire_batch_decode(&b.msg, out, 1), -ENOSPC);
	b.msg.n_a1 = 0;
	assert_int_equal(weft_wire_batch_decode(&b.msg, out, 2), -EBADMSG);
	b.msg.n_a1 = 1;
	b.msg.count = 3;
	assert_int_equal(weft_wire_batch_decode(&b.msg, out, 2), -EBADMSG);
	b.msg.count = 2;
	b.msg.n_a2 = 0;
	assert_int_equal(weft_wire_batch_decode(&b.msg, out, 2), -EBADMSG);
	b.msg.n_a2 = 1;
	assert_int_equal(weft_wire_batch_decode(&b.msg, out, 2), 2);
	assert_memory_equal(ev, out, sizeof(ev));
	/* A worker split ends a batch. */
	ev[1].worker = 1;
	assert_int_equal(weft_wire_batch_encode(&b, ev, 2), 1);
	weft_wire_batch_fini(&b);
}

/* ------------------------------------------------------------ the sample */

static int write_sample(const char *path)
{
	weft_wire_buf_t b = { 0 };
	weft_wire_hello_t hello;
	weft_event_t ev[256];
	size_t n, batches = 0;
	FILE *fp;
	weft_probe_task_t st = { .id = 99, .site = 5, .polls = 1 };
	const weft_probe_task_t *stp = &st;
	weft_probe_update_t su = { .tasks = &stp, .ntasks = 1 };
	weft_wire_site_t site = { .id = 5, .name = "s", .file = "s.c" };

	append_all_types(&b, &hello);
	/* A task named by its spawn site, the Site with it. */
	if (weft_wire_update_append_sites(&b, &su, &site, 1, 0, 0, NULL))
		return 1;
	n = realistic_events(ev, 256, 0);
	encode_events(&b, ev, n, &batches);
	fp = fopen(path, "wb");
	if (!fp || fwrite(b.data, 1, b.len, fp) != b.len || fclose(fp)) {
		perror(path);
		return 1;
	}
	weft_wire_hello_fini(&hello);
	weft_wire_buf_fini(&b);
	return 0;
}

/*
 * The blocking pool's and the timer wheel's events of write_resources(),
 * from @t0 on, into @ev; returns how many.  Jobs (ms from t0; W: queued,
 * E: its wait's end, run: BLOCKING_END's duration):
 *
 *   A  task 1 holder    job 0xa000  no wait        run 10
 *   B  task 4 producer  job 0xb000  W 1  E 3  (2)  run 4
 *   C  task 4 producer  job 0xb000  W 2  E 5  (3)  run 1, inside B's
 *   D  task 1 holder    job 0xa000  W 4  E 10 (6)  run 20
 *   E  task 2 waiter-a  job 0xc000  W 11 E 12 (1)  still running
 *   F  task 3 waiter-b  no name     W 13 E 18 (5)  run 2
 *   and task 3 queues at 20 and is cancelled at 21.
 *
 * So: 6 jobs run, 5 waited; waits 1 2 3 5 6 ms: p50 (rank 2) 3 ms, p99
 * (rank 4) 6 ms, max 6 ms, total 17 ms; by run time holder (2 jobs, 1
 * wait, 6 ms waited, 30 ms run), producer (2, 2, 5 ms, 5 ms), waiter-b
 * (1, 1, 5 ms, 2 ms), waiter-a (1, 1, 1 ms, none yet).  Timers fired per
 * turn 3 1 64 10 2: 5 ticks, 80 timers, p50 3, p99 64, max 64.
 */
static size_t pool_events(weft_event_t *ev, uint64_t t0)
{
	static const struct {
		uint64_t task, label;
		int64_t queued, taken; /* -1: no wait */
		uint64_t run;          /* 0: still running */
	} jobs[] = {
		{ 1, 0xa000, -1, 0, 10 }, { 4, 0xb000, 1, 3, 4 },
		{ 4, 0xb000, 2, 5, 1 },   { 1, 0xa000, 4, 10, 20 },
		{ 2, 0xc000, 11, 12, 0 }, { 3, 0, 13, 18, 2 },
	};
	static const uint32_t fired[] = { 3, 1, 64, 10, 2 };
	const uint64_t ms = 1000000, pool = 8;
	const uint16_t other = WEFT_EVENT_NO_WORKER;
	size_t n = 0;

	ev[n++] = (weft_event_t){ .ts = t0, .kind = WEFT_EV_RES_NEW,
				  .a1 = pool, .a2 = WEFT_RES_BLOCKING_POOL,
				  .worker = other };
	for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++) {
		uint64_t task = jobs[i].task, at = t0 + (uint64_t)jobs[i].taken * ms;

		if (jobs[i].queued >= 0) {
			ev[n++] = (weft_event_t){
				.ts = t0 + (uint64_t)jobs[i].queued * ms,
				.task = task, .kind = WEFT_EV_RES_WAIT,
				.a1 = pool, .a2 = WEFT_RES_OP_JOB,
				.worker = other };
			ev[n++] = (weft_event_t){
				.ts = at, .task = task,
				.kind = WEFT_EV_RES_WAIT_END, .a1 = pool,
				.a2 = WEFT_RES_OP_JOB, .worker = other };
		}
		ev[n++] = (weft_event_t){ .ts = at, .task = task,
					  .kind = WEFT_EV_RES_ACQUIRE,
					  .a1 = pool, .a2 = 1,
					  .worker = other };
		ev[n++] = (weft_event_t){ .ts = at, .task = task,
					  .kind = WEFT_EV_RES_SITE,
					  .a1 = 0x1234, .a2 = 50,
					  .worker = other };
		if (jobs[i].label)
			ev[n++] = (weft_event_t){ .ts = at, .task = task,
						  .kind = WEFT_EV_RES_LABEL,
						  .a1 = jobs[i].label,
						  .worker = other };
		ev[n++] = (weft_event_t){ .ts = at + 1000, .task = task,
					  .kind = WEFT_EV_BLOCKING_START,
					  .a1 = jobs[i].label,
					  .worker = other };
		if (!jobs[i].run)
			continue;
		ev[n++] = (weft_event_t){
			.ts = at + 1000 + jobs[i].run * ms, .task = task,
			.kind = WEFT_EV_BLOCKING_END, .a1 = jobs[i].run * ms,
			.worker = other };
		ev[n++] = (weft_event_t){
			.ts = at + 2000 + jobs[i].run * ms, .task = task,
			.kind = WEFT_EV_RES_RELEASE, .a1 = pool, .a2 = 1,
			.worker = other };
	}
	ev[n++] = (weft_event_t){ .ts = t0 + 20 * ms, .task = 3,
				  .kind = WEFT_EV_RES_WAIT, .a1 = pool,
				  .a2 = WEFT_RES_OP_JOB, .worker = other };
	ev[n++] = (weft_event_t){ .ts = t0 + 21 * ms, .task = 3,
				  .kind = WEFT_EV_RES_WAIT_END, .a1 = pool,
				  .a2 = WEFT_RES_OP_JOB | WEFT_RES_CANCELLED,
				  .worker = other };
	/* Time order within the thread, as a ring would hold them. */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && ev[j - 1].ts > ev[j].ts; j--) {
			weft_event_t x = ev[j];

			ev[j] = ev[j - 1];
			ev[j - 1] = x;
		}
	for (size_t i = 0; i < sizeof(fired) / sizeof(fired[0]); i++)
		ev[n++] = (weft_event_t){ .ts = t0 + (uint64_t)(i + 1) * ms,
					  .kind = WEFT_EV_TIMER_FIRE,
					  .a2 = fired[i] };
	return n;
}

/*
 * `test_wire --write-resources FILE`: a trace of one update and one
 * batch about resources, for tests/trace_res.sh: tasks 1-4 live (1 holds
 * mutex "cache", 2 and 3 wait on it, 4 waits to send on an unnamed mpsc
 * initialised at demo.c:88), a semaphore dropped, and one event of each
 * RES_* kind.  Then, from pool threads (no worker), six blocking jobs on
 * pool 8 and a cancelled wait, and from worker 0 five turns of the timer
 * wheel; see pool_events() for the figures weft-trace stats must give.
 */
static int write_resources(const char *path)
{
	static const char *const names[] = { "", "holder", "waiter-a",
					     "waiter-b", "producer" };
	weft_wire_buf_t b = { 0 };
	weft_wire_hello_t hello;
	weft_wire_batch_t batch;
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	weft_probe_stats_t st = { .now_ns = 3000000000ull,
				  .start_ns = 1000000000ull,
				  .workers = 1 };
	weft_probe_task_t t[5];
	const weft_probe_task_t *tp[4];
	weft_hist_t wait = { 0 }, hold = { 0 };
	weft_probe_resource_t r[3] = {
		{ .id = 5, .kind = WEFT_RES_MUTEX, .name = "cache",
		  .file = "app.c", .line = 20, .nholders = 1, .nwaiters = 2,
		  .holders = { 1 }, .waiters = { 2, 3 }, .acquires = 300,
		  .waits = 40, .longest_holder = 1,
		  .longest_hold_ns = 7000000, .wait_hist = &wait,
		  .hold_hist = &hold },
		{ .id = 6, .kind = WEFT_RES_MPSC, .file = "demo.c",
		  .line = 88, .nwaiters = 1, .waiters = { 4 }, .owner = 1,
		  .acquires = 9 },
		{ .id = 7, .kind = WEFT_RES_SEMAPHORE, .name = "permits",
		  .dropped_ns = 2500000000ull, .acquires = 2 },
	};
	const weft_probe_resource_t *rp[] = { &r[0], &r[1], &r[2] };
	weft_probe_update_t u = { .stats = &st, .tasks = tp, .ntasks = 4,
				  .resources = rp, .nresources = 3,
				  .full = true };
	uint64_t ts = 2000000000ull;
	weft_event_t ev[] = {
		{ .ts = ts + 1, .kind = WEFT_EV_RES_NEW, .a1 = 5,
		  .a2 = WEFT_RES_MUTEX },
		{ .ts = ts + 2, .task = 5, .kind = WEFT_EV_RES_NAME,
		  .a1 = 0x1234 },
		{ .ts = ts + 3, .task = 1, .kind = WEFT_EV_RES_ACQUIRE,
		  .a1 = 5, .a2 = 1 },
		{ .ts = ts + 4, .task = 2, .kind = WEFT_EV_RES_WAIT, .a1 = 5,
		  .a2 = WEFT_RES_OP_ACQUIRE },
		{ .ts = ts + 5, .task = 4, .kind = WEFT_EV_RES_WAIT, .a1 = 6,
		  .a2 = WEFT_RES_OP_SEND },
		{ .ts = ts + 6, .task = 3, .kind = WEFT_EV_RES_WAIT_END,
		  .a1 = 5, .a2 = WEFT_RES_OP_ACQUIRE | WEFT_RES_CANCELLED },
		{ .ts = ts + 7, .task = 1, .kind = WEFT_EV_RES_RELEASE,
		  .a1 = 7, .a2 = 2 },
		{ .ts = ts + 8, .task = 1, .kind = WEFT_EV_RES_OWNER, .a1 = 6 },
		{ .ts = ts + 9, .kind = WEFT_EV_RES_DROP, .a1 = 7 },
	};
	weft_event_t pool[128];
	size_t npool;
	FILE *fp;

	for (int i = 0; i < 100; i++) {
		weft_hist_record(&wait, 2000000);
		weft_hist_record(&hold, 500000);
	}
	for (unsigned i = 1; i <= 4; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].id = i;
		t[i].name = names[i];
		t[i].file = "app.c";
		t[i].line = 100 + i;
		t[i].spawned_ns = 1500000000ull;
		t[i].polls = 1;
		t[i].idle_since_ns = 2000000000ull;
		tp[i - 1] = &t[i];
	}
	t[2].waiting_on = t[3].waiting_on = 5;
	t[2].waiting_op = t[3].waiting_op = WEFT_RES_OP_ACQUIRE;
	t[4].waiting_on = 6;
	t[4].waiting_op = WEFT_RES_OP_SEND;
	if (weft_wire_hello_init(&hello, 1, "mono", 1000000000ull) ||
	    weft_wire_header_append(&b, &hello.msg, 0) ||
	    weft_wire_update_append(&b, &u, 0))
		return 1;
	weft_wire_batch_init(&batch);
	if (weft_wire_batch_encode(&batch, ev, sizeof(ev) / sizeof(ev[0])) !=
	    (int)(sizeof(ev) / sizeof(ev[0])))
		return 1;
	f.body_case = WEFT__V1__FRAME__BODY_EVENTS;
	f.events = &batch.msg;
	if (weft_wire_record_append(&b, &f))
		return 1;
	/* The pool's and the timers' events: a batch per emitting thread. */
	npool = pool_events(pool, ts + 100000000ull);
	for (size_t i = 0; i < npool;) {
		int k = weft_wire_batch_encode(&batch, pool + i, npool - i);

		if (k <= 0 || weft_wire_record_append(&b, &f))
			return 1;
		i += (size_t)k;
	}
	weft_wire_batch_fini(&batch);
	fp = fopen(path, "wb");
	if (!fp || fwrite(b.data, 1, b.len, fp) != b.len || fclose(fp)) {
		perror(path);
		return 1;
	}
	weft_wire_hello_fini(&hello);
	weft_wire_buf_fini(&b);
	return 0;
}

/*
 * `test_wire --write-pool-many FILE`: 1,100 tasks, none named by an
 * update, each running one 1 ms blocking job, told only by BLOCKING_START
 * and BLOCKING_END (as a file from before the resources): weft-trace
 * stats keeps 1,024 submitter rows and sums the other 76 jobs as others.
 */
static int write_pool_many(const char *path)
{
	weft_wire_buf_t b = { 0 };
	weft_wire_hello_t hello;
	weft_wire_batch_t batch;
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	weft_event_t ev[2 * 1100];
	uint64_t ts = 2000000000ull;
	size_t n = 0;
	FILE *fp;

	for (uint64_t task = 1; task <= 1100; task++) {
		ev[n++] = (weft_event_t){ .ts = ts, .task = task,
					  .kind = WEFT_EV_BLOCKING_START,
					  .a1 = 0xd000,
					  .worker = WEFT_EVENT_NO_WORKER };
		ts += 1000000;
		ev[n++] = (weft_event_t){ .ts = ts, .task = task,
					  .kind = WEFT_EV_BLOCKING_END,
					  .a1 = 1000000,
					  .worker = WEFT_EVENT_NO_WORKER };
	}
	if (weft_wire_hello_init(&hello, 1, "mono", 1000000000ull) ||
	    weft_wire_header_append(&b, &hello.msg, 0))
		return 1;
	weft_wire_batch_init(&batch);
	f.body_case = WEFT__V1__FRAME__BODY_EVENTS;
	f.events = &batch.msg;
	for (size_t i = 0; i < n;) {
		int k = weft_wire_batch_encode(&batch, ev + i, n - i);

		if (k <= 0 || weft_wire_record_append(&b, &f))
			return 1;
		i += (size_t)k;
	}
	weft_wire_batch_fini(&batch);
	fp = fopen(path, "wb");
	if (!fp || fwrite(b.data, 1, b.len, fp) != b.len || fclose(fp)) {
		perror(path);
		return 1;
	}
	weft_wire_hello_fini(&hello);
	weft_wire_buf_fini(&b);
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
	weft_wire_events_init(&e);
	g = weft_wire_events_group(&e, ev, n);
	assert_non_null(g);
	for (size_t i = 1; i < n; i++) {
		assert_true(g[i - 1].worker <= g[i].worker);
		if (g[i - 1].worker == g[i].worker)
			assert_true(g[i - 1].ts < g[i].ts);
	}
	for (size_t i = 0; i < n; i++)
		sum += g[i].ts;
	assert_int_equal(sum, (uint64_t)n * (n - 1) / 2);
	weft_wire_events_fini(&e);
	free(ev);
}

static void test_wire_events_grouped_per_thread(void **state)
{
	(void)state;
	check_grouping(5, 10000);
	check_grouping(300, 20000);
}

/*
 * weft_wire_events_append() (batch.c's one sweep from events to bytes, the
 * collector's path for a pass's events) against weft_wire_batch_encode()
 * packed by protobuf-c, byte for byte, and decoded back to the events
 * regrouped per thread.
 */
static void check_events_append(const weft_event_t *ev, size_t n)
{
	weft_wire_events_t e, e2;
	weft_wire_buf_t hand = { 0 }, ref = { 0 };
	weft_wire_decoder_t d;
	weft_event_t *back = calloc(n + 1, sizeof(*back));
	const weft_event_t *g;
	size_t batches = 0, got = 0, off = 0;

	assert_non_null(back);
	weft_wire_events_init(&e);
	weft_wire_events_init(&e2);
	assert_int_equal(weft_wire_events_append(&e, &hand, ev, n), 0);
	g = weft_wire_events_group(&e2, ev, n);
	assert_non_null(g);
	encode_events(&ref, g, n, &batches);
	assert_int_equal(hand.len, ref.len);
	assert_memory_equal(hand.data, ref.data, hand.len);

	weft_wire_decoder_init(&d, 0);
	while (off < hand.len) {
		Weft__V1__Frame *f;
		size_t used;
		int rc = weft_wire_decoder_feed(&d, hand.data + off,
						hand.len - off, &used, &f);

		assert_int_equal(rc, WEFT_WIRE_FRAME);
		off += used;
		rc = weft_wire_batch_decode(f->events, back + got, n - got);
		assert_true(rc > 0);
		got += (size_t)rc;
		weft_wire_frame_free(f);
	}
	weft_wire_decoder_fini(&d);
	assert_int_equal(got, n);
	assert_memory_equal(g, back, n * sizeof(*back));
	weft_wire_events_fini(&e);
	weft_wire_events_fini(&e2);
	weft_wire_buf_fini(&hand);
	weft_wire_buf_fini(&ref);
	free(back);
}

static void test_wire_events_append_as_protobuf_c(void **state)
{
	enum { N = 40000 };
	weft_event_t *ev = calloc(N, sizeof(*ev));
	size_t n;

	(void)state;
	assert_non_null(ev);
	/* Mixed threads, every extreme. */
	rnd_events(ev, N);
	check_events_append(ev, N);
	/* One thread past WEFT_WIRE_BATCH_MAX: split. */
	for (size_t i = 0; i < N; i++)
		ev[i].worker = 3;
	check_events_append(ev, N);
	/* As the runtime emits them, two workers interleaved. */
	n = realistic_events(ev, N / 2, 0);
	n += realistic_events(ev + n, N - n, 1);
	for (size_t i = 0; i + 1 < n; i += 7) {
		weft_event_t x = ev[i];

		ev[i] = ev[n - 1 - i];
		ev[n - 1 - i] = x;
	}
	check_events_append(ev, n);
	/* One event, and one with every field zero. */
	check_events_append(ev, 1);
	memset(ev, 0, sizeof(*ev));
	check_events_append(ev, 1);
	free(ev);
}

/* ------------------------------------------------------------ hand encoders */

/*
 * Updates and event batches are encoded by hand (batch.c and update.c); protobuf-c's
 * packer is the reference.  The probe structures go into the generated
 * messages the way the encoder put them there before it encoded by hand, and
 * both encodings of each random update or batch must be the same bytes.
 */

/* Values at the edges of varint lengths, and zeros (fields left out). */
static uint64_t rnd_u64(void)
{
	/* 2^b and 2^b - 1 for b = 0, 7, ..., 63, 70 (0 and UINT64_MAX)
	 * and 32. */
	unsigned b = rnd_below(12) == 0 ? 32 : 7 * (unsigned)rnd_below(11);
	uint64_t edge = b < 64 ? 1ull << b : 0;

	switch (rnd_below(4)) {
	case 0:
		return 0;
	case 1:
		return rnd_below(2) ? edge : edge - 1;
	case 2:
		return rnd_below(300);
	default:
		return rnd() >> rnd_below(64);
	}
}

static uint32_t rnd_u32(void)
{
	return (uint32_t)rnd_u64();
}

static double rnd_double(void)
{
	static const double v[] = { 0.0, -0.0, 1.5, -3e300, 1e-310, 0.25 };

	if (rnd_below(8) == 0)
		return __builtin_nan("");
	return v[rnd_below(sizeof(v) / sizeof(v[0]))];
}

/* NULL, empty, short, or long enough for a two-byte length. */
static const char *rnd_str(void)
{
	static const char *const s[] = { NULL, "", "GET /fast", "x" };
	static char long_str[301];

	if (!long_str[0])
		memset(long_str, 'a', sizeof(long_str) - 1);
	if (rnd_below(5) == 0)
		return long_str + rnd_below(200);
	return s[rnd_below(4)];
}

static void rnd_hist(weft_hist_t *h)
{
	/* Half of them with every bucket under 128 (one byte each: the
	 * encoder's short path), the rank at 127 and 128 included. */
	bool small = rnd_below(2);

	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++)
		h->buckets[i] = rnd_below(3) ? 0 :
				small        ? (uint32_t)rnd_below(128) :
					       rnd_u32();
	if (small && rnd_below(4) == 0)
		h->buckets[rnd_below(WEFT_HIST_BUCKETS)] =
			127 + (uint32_t)rnd_below(2);
	h->count = rnd_u64();
	h->sum_ns = rnd_u64();
	h->max_ns = rnd_u64();
	h->outliers = rnd_u64();
}

static void rnd_task(weft_probe_task_t *t, weft_hist_t *h)
{
	static const int32_t status[] = { 0, -1, 1, -5, INT32_MIN, INT32_MAX };

	memset(t, 0, sizeof(*t));
	t->id = rnd_u64() | 1;
	t->parent = rnd_u64();
	t->name = rnd_str();
	t->file = rnd_str();
	t->line = rnd_u32();
	t->state_size = rnd_u32();
	t->kind = (uint8_t)rnd_below(2);
	t->state = (uint8_t)rnd_below(4);
	t->last_worker = (uint16_t)rnd_u64();
	t->status = status[rnd_below(6)];
	t->spawned_ns = rnd_u64();
	t->finished_ns = rnd_u64();
	t->polls = rnd_u64();
	t->busy_ns = rnd_u64();
	t->scheduled_ns = rnd_u64();
	t->idle_ns = rnd_u64();
	t->wakes = rnd_u64();
	t->self_wakes = rnd_u64();
	t->waker_clones = rnd_u64();
	t->waker_drops = rnd_u64();
	t->max_poll_ns = rnd_u64();
	t->warnings = rnd_u32();
	t->locks_held = rnd_u32();
	t->parked_file = rnd_str();
	t->parked_line = rnd_u32();
	t->idle_since_ns = rnd_u64();
	t->waiting_on = rnd_u64();
	t->waiting_since_ns = rnd_u64();
	t->waiting_op = (uint8_t)rnd_u64();
	if (rnd_below(2)) {
		rnd_hist(&h[0]);
		t->poll_hist = &h[0];
	}
	if (rnd_below(2)) {
		rnd_hist(&h[1]);
		t->sched_hist = &h[1];
	}
}

static void rnd_resource(weft_probe_resource_t *r, weft_hist_t *h)
{
	memset(r, 0, sizeof(*r));
	r->id = rnd_u64() | 1;
	r->kind = (uint8_t)rnd_u64();
	r->name = rnd_str();
	r->file = rnd_str();
	r->line = rnd_u32();
	r->created_ns = rnd_u64();
	r->dropped_ns = rnd_below(2) ? 0 : rnd_u64();
	/* Counts past the lists too: only WEFT_RES_LIST ids go out. */
	r->nholders = rnd_below(3) ? (uint32_t)rnd_below(WEFT_RES_LIST + 1) :
				     rnd_u32();
	r->nwaiters = rnd_below(3) ? (uint32_t)rnd_below(WEFT_RES_LIST + 1) :
				     rnd_u32();
	for (unsigned i = 0; i < WEFT_RES_LIST; i++) {
		r->holders[i] = rnd_u64();
		r->waiters[i] = rnd_u64();
	}
	r->owner = rnd_u64();
	r->acquires = rnd_u64();
	r->waits = rnd_u64();
	r->acquires_per_s = rnd_double();
	r->oldest_wait_ns = rnd_u64();
	r->longest_holder = rnd_u64();
	r->longest_hold_ns = rnd_u64();
	if (rnd_below(2)) {
		rnd_hist(&h[0]);
		r->wait_hist = &h[0];
	}
	if (rnd_below(2)) {
		rnd_hist(&h[1]);
		r->hold_hist = &h[1];
	}
}

static void rnd_worker(weft_probe_worker_t *w)
{
	weft_worker_metrics_t *k = &w->counters;

	memset(w, 0, sizeof(*w));
	w->index = (uint16_t)rnd_u64();
	w->state = (uint8_t)rnd_below(3);
	w->current_task = rnd_u64();
	w->poll_started_ns = rnd_u64();
	k->polls = rnd_u64();
	k->steals = rnd_u64();
	k->steal_ops = rnd_u64();
	k->parks = rnd_u64();
	k->unparks = rnd_u64();
	k->noop_wakes = rnd_u64();
	k->local_schedules = rnd_u64();
	k->lifo_schedules = rnd_u64();
	k->global_schedules = rnd_u64();
	k->remote_schedules = rnd_u64();
	k->overflows = rnd_u64();
	k->spawned = rnd_u64();
	k->completed = rnd_u64();
	k->busy_ns = rnd_u64();
	k->forced_yields = rnd_u64();
	k->local_queue_depth = rnd_u32();
	w->polls_per_s = rnd_double();
	w->steals_per_s = rnd_double();
	w->steal_rate = rnd_double();
	w->busy_ratio = rnd_double();
	w->mean_poll_ns = rnd_u64();
	w->max_poll_ns = rnd_u64();
	w->queue_depth = rnd_u32();
	w->nstolen = (uint8_t)rnd_below(WEFT_WORKER_STOLEN + 1);
	for (unsigned i = 0; i < w->nstolen; i++)
		w->stolen[i] = (weft_probe_steal_t){
			.victim = rnd_below(2) ? rnd_u32() % 4096 : 0,
			.tasks = rnd_below(2) ? 0 : rnd_u64(),
		};
	w->stolen_out = rnd_below(2) ? 0 : rnd_u64();
	w->events_dropped = rnd_below(2) ? 0 : rnd_u64();
	w->off_cpu_ns = rnd_below(2) ? 0 : rnd_u64();
	w->off_cpu_ratio = rnd_below(2) ? 0 : rnd_double();
}

static void rnd_warning(weft_probe_warning_t *w)
{
	size_t n = rnd_below(sizeof(w->detail));

	memset(w, 0, sizeof(*w));
	w->seq = rnd_u64();
	w->kind = (uint8_t)rnd_u64();
	w->worker = (uint16_t)rnd_u64();
	w->task = rnd_u64();
	w->task_name = rnd_str();
	w->file = rnd_str();
	w->line = rnd_u32();
	w->history = rnd_below(2);
	w->at_ns = rnd_u64();
	w->value_ns = rnd_u64();
	for (size_t i = 0; i < n; i++)
		w->detail[i] = (char)('a' + rnd_below(26));
}

static void rnd_stats(weft_probe_stats_t *s)
{
	memset(s, 0, sizeof(*s));
	s->now_ns = rnd_u64();
	s->start_ns = rnd_u64();
	s->workers = rnd_u32();
	s->live_tasks = rnd_u64();
	s->spawned_tasks = rnd_u64();
	s->global_queue_depth = rnd_u64();
	s->events = rnd_u64();
	s->events_dropped = rnd_u64();
	s->warnings = rnd_u64();
	s->events_per_s = rnd_double();
	s->polls_per_s = rnd_double();
	s->steals_per_s = rnd_double();
	s->clock = rnd_str();
	s->collector_cpu_ns = rnd_u64();
	s->collector_cpu = rnd_double();
	s->blocking_busy = rnd_u64();
	s->blocking_queued = rnd_u64();
	s->blocking_jobs = rnd_u64();
	s->tasks_end_unseen = rnd_u64();
}

static char *ref_str(const char *s)
{
	return (char *)(s ? s : "");
}

static void ref_hist(Weft__V1__Histogram *m, const weft_hist_t *h)
{
	weft__v1__histogram__init(m);
	m->n_buckets = WEFT_HIST_BUCKETS;
	m->buckets = (uint32_t *)h->buckets;
	m->count = h->count;
	m->sum_ns = h->sum_ns;
	m->max_ns = h->max_ns;
	m->outliers = h->outliers;
}

static void ref_task(Weft__V1__Task *m, Weft__V1__Histogram *h,
		     const weft_probe_task_t *t)
{
	weft__v1__task__init(m);
	m->id = t->id;
	m->parent = t->parent;
	m->name = ref_str(t->name);
	m->file = ref_str(t->file);
	m->line = t->line;
	m->state_size = t->state_size;
	m->kind = t->kind;
	m->state = t->state;
	m->last_worker = t->last_worker;
	m->status = t->status;
	m->spawned_ns = t->spawned_ns;
	m->finished_ns = t->finished_ns;
	m->polls = t->polls;
	m->busy_ns = t->busy_ns;
	m->scheduled_ns = t->scheduled_ns;
	m->idle_ns = t->idle_ns;
	m->wakes = t->wakes;
	m->self_wakes = t->self_wakes;
	m->waker_clones = t->waker_clones;
	m->waker_drops = t->waker_drops;
	m->max_poll_ns = t->max_poll_ns;
	m->warnings = t->warnings;
	m->locks_held = t->locks_held;
	m->parked_file = ref_str(t->parked_file);
	m->parked_line = t->parked_line;
	m->idle_since_ns = t->idle_since_ns;
	m->waiting_on = t->waiting_on;
	m->waiting_since_ns = t->waiting_since_ns;
	m->waiting_op = t->waiting_op;
	if (t->poll_hist) {
		ref_hist(&h[0], t->poll_hist);
		m->poll_hist = &h[0];
	}
	if (t->sched_hist) {
		ref_hist(&h[1], t->sched_hist);
		m->sched_hist = &h[1];
	}
}

static void ref_resource(Weft__V1__Resource *m, Weft__V1__Histogram *h,
			 const weft_probe_resource_t *r)
{
	weft__v1__resource__init(m);
	m->id = r->id;
	m->kind = r->kind;
	m->name = ref_str(r->name);
	m->file = ref_str(r->file);
	m->line = r->line;
	m->created_ns = r->created_ns;
	m->dropped_ns = r->dropped_ns;
	m->nholders = r->nholders;
	m->nwaiters = r->nwaiters;
	m->n_holders = r->nholders < WEFT_RES_LIST ? r->nholders :
						     WEFT_RES_LIST;
	m->holders = (uint64_t *)r->holders;
	m->n_waiters = r->nwaiters < WEFT_RES_LIST ? r->nwaiters :
						     WEFT_RES_LIST;
	m->waiters = (uint64_t *)r->waiters;
	m->owner = r->owner;
	m->acquires = r->acquires;
	m->waits = r->waits;
	m->acquires_per_s = r->acquires_per_s;
	m->oldest_wait_ns = r->oldest_wait_ns;
	m->longest_holder = r->longest_holder;
	m->longest_hold_ns = r->longest_hold_ns;
	if (r->wait_hist) {
		ref_hist(&h[0], r->wait_hist);
		m->wait_hist = &h[0];
	}
	if (r->hold_hist) {
		ref_hist(&h[1], r->hold_hist);
		m->hold_hist = &h[1];
	}
}

static void ref_worker(Weft__V1__Worker *m, Weft__V1__WorkerCounters *c,
		       Weft__V1__WorkerSteal *st, Weft__V1__WorkerSteal **stp,
		       const weft_probe_worker_t *w)
{
	const weft_worker_metrics_t *k = &w->counters;

	weft__v1__worker__init(m);
	weft__v1__worker_counters__init(c);
	m->index = w->index;
	m->state = w->state;
	m->current_task = w->current_task;
	m->poll_started_ns = w->poll_started_ns;
	c->polls = k->polls;
	c->steals = k->steals;
	c->steal_ops = k->steal_ops;
	c->parks = k->parks;
	c->unparks = k->unparks;
	c->noop_wakes = k->noop_wakes;
	c->local_schedules = k->local_schedules;
	c->lifo_schedules = k->lifo_schedules;
	c->global_schedules = k->global_schedules;
	c->remote_schedules = k->remote_schedules;
	c->overflows = k->overflows;
	c->spawned = k->spawned;
	c->completed = k->completed;
	c->busy_ns = k->busy_ns;
	c->forced_yields = k->forced_yields;
	c->local_queue_depth = k->local_queue_depth;
	m->counters = c;
	m->polls_per_s = w->polls_per_s;
	m->steals_per_s = w->steals_per_s;
	m->steal_rate = w->steal_rate;
	m->busy_ratio = w->busy_ratio;
	m->mean_poll_ns = w->mean_poll_ns;
	m->max_poll_ns = w->max_poll_ns;
	m->queue_depth = w->queue_depth;
	m->events_dropped = w->events_dropped;
	m->off_cpu_ns = w->off_cpu_ns;
	m->off_cpu_ratio = w->off_cpu_ratio;
	for (size_t i = 0; i < w->nstolen; i++) {
		weft__v1__worker_steal__init(&st[i]);
		st[i].victim = w->stolen[i].victim;
		st[i].tasks = w->stolen[i].tasks;
		stp[i] = &st[i];
	}
	m->n_stolen = w->nstolen;
	m->stolen = stp;
	m->stolen_out = w->stolen_out;
}

static void ref_warning(Weft__V1__Warning *m, const weft_probe_warning_t *w)
{
	weft__v1__warning__init(m);
	m->seq = w->seq;
	m->kind = w->kind;
	m->worker = w->worker;
	m->task = w->task;
	m->task_name = ref_str(w->task_name);
	m->file = ref_str(w->file);
	m->line = w->line;
	m->at_ns = w->at_ns;
	m->value_ns = w->value_ns;
	m->detail = (char *)w->detail;
	m->history = w->history;
}

#define REF_TASKS 40
#define REF_WORKERS 66
#define REF_WARNINGS 4
#define REF_RESOURCES 12

/* @u's Update record packed by protobuf-c, appended to @b. */
static void ref_update_append(weft_wire_buf_t *b, const weft_probe_update_t *u,
			      uint64_t prev_now_ns)
{
	static Weft__V1__Task tasks[REF_TASKS];
	static Weft__V1__Task *task_ptrs[REF_TASKS];
	static Weft__V1__Histogram hists[2 * REF_TASKS];
	static Weft__V1__Worker workers[REF_WORKERS];
	static Weft__V1__Worker *worker_ptrs[REF_WORKERS];
	static Weft__V1__WorkerCounters counters[REF_WORKERS];
	static Weft__V1__WorkerSteal steals[REF_WORKERS][WEFT_WORKER_STOLEN];
	static Weft__V1__WorkerSteal
		*steal_ptrs[REF_WORKERS][WEFT_WORKER_STOLEN];
	static Weft__V1__Warning warnings[REF_WARNINGS];
	static Weft__V1__Warning *warning_ptrs[REF_WARNINGS];
	static uint64_t new_ids[REF_TASKS], fin_ids[REF_TASKS];
	static Weft__V1__Resource res[REF_RESOURCES];
	static Weft__V1__Resource *res_ptrs[REF_RESOURCES];
	static Weft__V1__Histogram res_hists[2 * REF_RESOURCES];
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Update m = WEFT__V1__UPDATE__INIT;
	Weft__V1__Stats st = WEFT__V1__STATS__INIT;

	if (u->stats) {
		const weft_probe_stats_t *s = u->stats;

		st.now_ns = s->now_ns;
		st.start_ns = s->start_ns;
		st.workers = s->workers;
		st.live_tasks = s->live_tasks;
		st.spawned_tasks = s->spawned_tasks;
		st.global_queue_depth = s->global_queue_depth;
		st.events = s->events;
		st.events_dropped = s->events_dropped;
		st.warnings = s->warnings;
		st.events_per_s = s->events_per_s;
		st.polls_per_s = s->polls_per_s;
		st.steals_per_s = s->steals_per_s;
		st.clock = ref_str(s->clock);
		st.collector_cpu_ns = s->collector_cpu_ns;
		st.collector_cpu = s->collector_cpu;
		st.blocking_busy = s->blocking_busy;
		st.blocking_queued = s->blocking_queued;
		st.blocking_jobs = s->blocking_jobs;
		st.tasks_end_unseen = s->tasks_end_unseen;
		m.stats = &st;
	}
	for (size_t i = 0; i < u->ntasks; i++) {
		const weft_probe_task_t *t = u->tasks[i];

		ref_task(&tasks[i], &hists[2 * i], t);
		task_ptrs[i] = &tasks[i];
		if (prev_now_ns && t->spawned_ns > prev_now_ns)
			new_ids[m.n_new_tasks++] = t->id;
		if (t->finished_ns && t->finished_ns > prev_now_ns)
			fin_ids[m.n_finished_tasks++] = t->id;
	}
	m.n_tasks = u->ntasks;
	m.tasks = task_ptrs;
	m.new_tasks = new_ids;
	m.finished_tasks = fin_ids;
	for (size_t i = 0; i < u->nworkers; i++) {
		ref_worker(&workers[i], &counters[i], steals[i], steal_ptrs[i],
			   &u->workers[i]);
		worker_ptrs[i] = &workers[i];
	}
	m.n_workers = u->nworkers;
	m.workers = worker_ptrs;
	for (size_t i = 0; i < u->nwarnings; i++) {
		ref_warning(&warnings[i], &u->warnings[i]);
		warning_ptrs[i] = &warnings[i];
	}
	m.n_warnings = u->nwarnings;
	m.warnings = warning_ptrs;
	m.full = u->full;
	for (size_t i = 0; i < u->nresources; i++) {
		ref_resource(&res[i], &res_hists[2 * i], u->resources[i]);
		res_ptrs[i] = &res[i];
	}
	m.n_resources = u->nresources;
	m.resources = res_ptrs;
	f.body_case = WEFT__V1__FRAME__BODY_UPDATE;
	f.update = &m;
	assert_int_equal(weft_wire_record_append(b, &f), 0);
}

static void assert_same_bytes(const weft_wire_buf_t *a,
			      const weft_wire_buf_t *b)
{
	assert_int_equal(a->len, b->len);
	assert_memory_equal(a->data, b->data, a->len);
}

static void test_wire_update_hand_encoded_as_protobuf_c(void **state)
{
	static weft_probe_task_t tasks[REF_TASKS];
	static const weft_probe_task_t *tp[REF_TASKS];
	static weft_hist_t hists[2 * REF_TASKS];
	static weft_probe_worker_t workers[REF_WORKERS];
	static weft_probe_warning_t warnings[REF_WARNINGS];
	static weft_probe_resource_t res[REF_RESOURCES];
	static const weft_probe_resource_t *rp[REF_RESOURCES];
	static weft_hist_t res_hists[2 * REF_RESOURCES];
	weft_probe_stats_t st;

	(void)state;
	for (unsigned round = 0; round < scale_count(2000); round++) {
		weft_probe_update_t u = { 0 };
		weft_wire_buf_t hand = { 0 }, ref = { 0 };
		uint64_t prev = rnd_below(3) ? rnd_u64() : 0;

		/* Empty updates too: no stats, tasks, workers or warnings. */
		if (round % 7) {
			rnd_stats(&st);
			u.stats = &st;
		}
		u.ntasks = round % 5 ? rnd_below(REF_TASKS + 1) : 0;
		for (size_t i = 0; i < u.ntasks; i++) {
			rnd_task(&tasks[i], &hists[2 * i]);
			tp[i] = &tasks[i];
		}
		u.tasks = tp;
		u.nworkers = rnd_below(4) ? rnd_below(5) :
					    rnd_below(REF_WORKERS + 1);
		for (size_t i = 0; i < u.nworkers; i++)
			rnd_worker(&workers[i]);
		u.workers = workers;
		u.nwarnings = rnd_below(REF_WARNINGS + 1);
		for (size_t i = 0; i < u.nwarnings; i++)
			rnd_warning(&warnings[i]);
		u.warnings = warnings;
		u.full = rnd_below(2);
		u.nresources = round % 3 ? rnd_below(REF_RESOURCES + 1) : 0;
		for (size_t i = 0; i < u.nresources; i++) {
			rnd_resource(&res[i], &res_hists[2 * i]);
			rp[i] = &res[i];
		}
		u.resources = rp;

		assert_int_equal(weft_wire_update_append(&hand, &u, prev), 0);
		ref_update_append(&ref, &u, prev);
		assert_same_bytes(&hand, &ref);
		weft_wire_buf_fini(&hand);
		weft_wire_buf_fini(&ref);
	}
}

/*
 * Split updates: every record is what protobuf-c writes for the message it
 * decodes to, no Frame exceeds the cap, and the parts hold the tasks in
 * order with their new and finished ids.
 */
static void test_wire_update_split_hand_encoded(void **state)
{
	static weft_probe_task_t tasks[REF_TASKS];
	static const weft_probe_task_t *tp[REF_TASKS];
	static weft_hist_t hists[2 * REF_TASKS];
	static weft_probe_worker_t workers[2];
	static weft_probe_resource_t res[REF_RESOURCES];
	static const weft_probe_resource_t *rp[REF_RESOURCES];
	static weft_hist_t res_hists[2 * REF_RESOURCES];
	weft_probe_stats_t st;
	Weft__V1__Frame *f[REF_TASKS + REF_RESOURCES + 1];

	(void)state;
	for (unsigned round = 0; round < scale_count(200); round++) {
		weft_probe_update_t u = { .stats = &st,
					  .tasks = tp,
					  .ntasks = REF_TASKS,
					  .workers = workers,
					  .nworkers = 2,
					  .full = true,
					  .resources = rp,
					  .nresources = round % 2 ?
								REF_RESOURCES :
								0 };
		weft_wire_buf_t b = { 0 }, whole = { 0 };
		size_t cap, n, k = 0, off = 0, nnew = 0, nfin = 0, kr = 0;
		bool tasks_seen = false;
		uint64_t prev = 1000;

		rnd_stats(&st);
		st.clock = NULL;
		for (size_t i = 0; i < REF_TASKS; i++) {
			rnd_task(&tasks[i], &hists[2 * i]);
			tasks[i].name = "t";
			tasks[i].file = NULL;
			tp[i] = &tasks[i];
			nnew += tasks[i].spawned_ns > prev;
			nfin += tasks[i].finished_ns > prev;
		}
		for (size_t i = 0; i < u.nresources; i++) {
			rnd_resource(&res[i], &res_hists[2 * i]);
			res[i].name = "r";
			res[i].file = NULL;
			rp[i] = &res[i];
		}
		rnd_worker(&workers[0]);
		rnd_worker(&workers[1]);
		/* A cap a third to a half of the whole (a task is at most
		 * about 1.5 KB, the rest about 2 KB). */
		assert_int_equal(weft_wire_update_append(&whole, &u, prev), 0);
		cap = 4096 + whole.len / 3 + rnd_below(whole.len / 6);
		assert_int_equal(
			weft_wire_update_append_split(&b, &u, prev, cap), 0);
		n = decode_all(b.data, b.len, b.len, f,
			       REF_TASKS + REF_RESOURCES + 1);
		/* Whole when its Frame (the record less 3 bytes) fits the cap
		 * less the slack. */
		assert_true(n > 1 || whole.len - 3 <= cap - 64);
		weft_wire_buf_fini(&whole);
		for (size_t i = 0; i < n; i++) {
			Weft__V1__Update *m = f[i]->update;
			size_t len = weft_wire_record_size(f[i]);
			uint8_t *re = malloc(len);

			assert_non_null(m);
			assert_true(len - 1 - (len > 129 ? 2 : 1) <= cap);
			assert_int_equal(weft_wire_record_pack(f[i], re, len),
					 (int)len);
			assert_memory_equal(re, b.data + off, len);
			off += len;
			free(re);
			assert_int_equal(m->full, i == 0);
			assert_int_equal(m->stats != NULL, i == 0);
			assert_int_equal(m->n_workers, i == 0 ? 2 : 0);
			/* Resources first, in order: none after a task. */
			assert_true(!tasks_seen || !m->n_resources);
			for (size_t j = 0; j < m->n_resources; j++, kr++)
				assert_int_equal(m->resources[j]->id,
						 res[kr].id);
			for (size_t j = 0; j < m->n_tasks; j++, k++)
				assert_int_equal(m->tasks[j]->id, tasks[k].id);
			tasks_seen |= m->n_tasks != 0;
			nnew -= m->n_new_tasks;
			nfin -= m->n_finished_tasks;
			weft_wire_frame_free(f[i]);
		}
		assert_int_equal(off, b.len);
		assert_int_equal(k, REF_TASKS);
		assert_int_equal(kr, u.nresources);
		assert_int_equal(nnew, 0);
		assert_int_equal(nfin, 0);
		weft_wire_buf_fini(&b);
	}
}

/*
 * The memo of encoded tasks (issue 21: a task's record encoded once for
 * every stream of a pass): streams that send thinned copies of one
 * snapshot's tasks (name, file, line, histograms left out or not), in
 * updates of their own, get with a shared memo the bytes they get
 * without it, for snapshot after snapshot (the tasks changed between
 * them, the memo begun for each); and the memo does share.
 */
static void test_wire_update_memo_as_without(void **state)
{
	enum { STREAMS = 3 };
	static weft_probe_task_t tasks[REF_TASKS];
	static weft_probe_task_t copies[REF_TASKS];
	static const weft_probe_task_t *tp[REF_TASKS];
	static weft_hist_t hists[2 * REF_TASKS];
	weft_wire_task_memo_t memo = { 0 };
	weft_probe_stats_t st;
	size_t encoded = 0, hits = 0;

	(void)state;
	for (unsigned gen = 1; gen <= scale_count(300); gen++) {
		/* A new snapshot: changed tasks, the same ids, one each (an
		 * odd number times an odd constant), and one 0: never kept. */
		for (size_t i = 0; i < REF_TASKS; i++) {
			rnd_task(&tasks[i], &hists[2 * i]);
			tasks[i].id = i ? (2 * i + 1) * 0x9E3779B97F4A7C15ull :
					  0;
		}
		rnd_stats(&st);
		weft_wire_task_memo_begin(&memo, gen);
		for (unsigned k = 0; k < STREAMS; k++) {
			weft_probe_update_t u = { .stats = &st, .tasks = tp };
			weft_wire_buf_t with = { 0 }, without = { 0 };
			uint64_t prev = rnd_below(2) ? rnd_u64() : 0;
			size_t max = rnd_below(4) ? 0 : 2048 + rnd_below(8192);
			size_t before = memo.n;
			int a, b;

			for (size_t i = 0; i < REF_TASKS; i++) {
				weft_probe_task_t *c = &copies[u.ntasks];

				if (rnd_below(3) == 0)
					continue;
				*c = tasks[i];
				if (rnd_below(2)) {
					c->name = NULL;
					c->file = NULL;
					c->line = 0;
				}
				if (rnd_below(2)) {
					c->poll_hist = NULL;
					c->sched_hist = NULL;
				}
				tp[u.ntasks++] = c;
			}
			a = weft_wire_update_append_memo(&with, &u, prev, max,
							 &memo);
			b = weft_wire_update_append_split(&without, &u, prev,
							  max);
			assert_int_equal(a, b);
			assert_same_bytes(&with, &without);
			encoded += memo.n - before;
			hits += u.ntasks - (memo.n - before);
			weft_wire_buf_fini(&with);
			weft_wire_buf_fini(&without);
		}
	}
	/* Shared: of 4 variants a task, 3 streams each taking it 2 times
	 * in 3 (1.68 encodings, 0.32 copies a task expected). */
	assert_true(hits > encoded / 8);
	weft_wire_task_memo_fini(&memo);
	assert_null(memo.slot);
}

/* Decoded task @m is @t: every field, its waits and site too. */
static void assert_task_is(const Weft__V1__Task *m, const weft_probe_task_t *t)
{
	unsigned nw = t->nwaited < WEFT_TASK_WAITED ? t->nwaited :
						      WEFT_TASK_WAITED;

	assert_int_equal(m->id, t->id);
	assert_int_equal(m->parent, t->parent);
	assert_string_equal(m->name, t->name ? t->name : "");
	assert_string_equal(m->file, t->file ? t->file : "");
	assert_int_equal(m->line, t->line);
	assert_int_equal(m->state_size, t->state_size);
	assert_int_equal(m->kind, t->kind);
	assert_int_equal(m->state, t->state);
	assert_int_equal(m->last_worker, t->last_worker);
	assert_int_equal(m->status, t->status);
	assert_int_equal(m->spawned_ns, t->spawned_ns);
	assert_int_equal(m->finished_ns, t->finished_ns);
	assert_int_equal(m->polls, t->polls);
	assert_int_equal(m->busy_ns, t->busy_ns);
	assert_int_equal(m->scheduled_ns, t->scheduled_ns);
	assert_int_equal(m->idle_ns, t->idle_ns);
	assert_int_equal(m->wakes, t->wakes);
	assert_int_equal(m->self_wakes, t->self_wakes);
	assert_int_equal(m->waker_clones, t->waker_clones);
	assert_int_equal(m->waker_drops, t->waker_drops);
	assert_int_equal(m->max_poll_ns, t->max_poll_ns);
	assert_int_equal(m->warnings, t->warnings);
	assert_int_equal(m->locks_held, t->locks_held);
	assert_string_equal(m->parked_file,
			    t->parked_file ? t->parked_file : "");
	assert_int_equal(m->parked_line, t->parked_line);
	assert_int_equal(m->idle_since_ns, t->idle_since_ns);
	assert_int_equal(m->waiting_on, t->waiting_on);
	assert_int_equal(m->waiting_since_ns, t->waiting_since_ns);
	assert_int_equal(m->waiting_op, t->waiting_op);
	assert_int_equal(m->site, t->site);
	assert_int_equal(m->poll_hist != NULL, t->poll_hist != NULL);
	assert_int_equal(m->sched_hist != NULL, t->sched_hist != NULL);
	if (t->poll_hist) {
		assert_int_equal(m->poll_hist->count, t->poll_hist->count);
		assert_int_equal(m->poll_hist->sum_ns, t->poll_hist->sum_ns);
		assert_int_equal(m->poll_hist->n_buckets, WEFT_HIST_BUCKETS);
		for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++)
			assert_int_equal(m->poll_hist->buckets[i],
					 t->poll_hist->buckets[i]);
	}
	if (t->sched_hist)
		assert_int_equal(m->sched_hist->max_ns, t->sched_hist->max_ns);
	assert_int_equal(m->n_waited, nw);
	for (unsigned i = 0; i < nw; i++) {
		assert_int_equal(m->waited[i]->resource, t->waited[i].res);
		assert_int_equal(m->waited[i]->total_ns, t->waited[i].total_ns);
		assert_int_equal(m->waited[i]->waits, t->waited[i].waits);
	}
}

/*
 * An update's task bodies written once each into the encoder's own memo
 * (issue 21: no sizing pass when no memo is shared), and past that
 * memo's cap (WEFT_WIRE_TASK_MEMO_MAX) sized and written in place as
 * before: each record decodes to every field of its tasks (waits and
 * site too, big varints, long strings, histograms) and is what
 * protobuf-c packs for what it decodes to.
 */
static void test_wire_update_own_memo_decodes(void **state)
{
	enum { BIG = 3 << 20 }; /* three of these pass the memo's cap */
	static weft_probe_task_t tasks[REF_TASKS];
	static const weft_probe_task_t *tp[REF_TASKS];
	static weft_hist_t hists[2 * REF_TASKS];
	Weft__V1__Frame *f[REF_TASKS + 1];
	char *big = malloc(BIG + 1);
	weft_probe_stats_t st;

	(void)state;
	assert_non_null(big);
	memset(big, 'n', BIG);
	big[BIG] = '\0';
	for (unsigned round = 0; round < scale_count(300) + 1; round++) {
		bool huge = round == 0;
		weft_probe_update_t u = { .stats = &st, .tasks = tp };
		weft_wire_buf_t b = { 0 };
		size_t n, k = 0;

		rnd_stats(&st);
		u.ntasks = huge ? 4 : 1 + rnd_below(REF_TASKS);
		for (size_t i = 0; i < u.ntasks; i++) {
			weft_probe_task_t *t = &tasks[i];

			rnd_task(t, &hists[2 * i]);
			t->nwaited = (uint8_t)rnd_below(WEFT_TASK_WAITED + 2);
			for (unsigned w = 0; w < WEFT_TASK_WAITED; w++)
				t->waited[w] = (weft_probe_task_wait_t){
					.res = rnd_u64(),
					.total_ns = rnd_u64(),
					.waits = rnd_u32()
				};
			t->site = rnd_u32();
			/* The first round: tasks of 3 MiB, the third past
			 * the memo's cap (and every one a record alone). */
			if (huge)
				t->name = big;
			tp[i] = t;
		}
		assert_int_equal(weft_wire_update_append(&b, &u, rnd_u64()), 0);
		n = decode_all(b.data, b.len, b.len, f, REF_TASKS + 1);
		assert_true(huge ? n == u.ntasks : n == 1);
		for (size_t i = 0, off = 0; i < n; i++) {
			size_t len = weft_wire_record_size(f[i]);
			uint8_t *re = malloc(len);

			assert_non_null(re);
			assert_int_equal(f[i]->body_case,
					 WEFT__V1__FRAME__BODY_UPDATE);
			assert_int_equal(weft_wire_record_pack(f[i], re, len),
					 (int)len);
			assert_memory_equal(re, b.data + off, len);
			off += len;
			free(re);
			for (size_t j = 0; j < f[i]->update->n_tasks; j++)
				assert_task_is(f[i]->update->tasks[j], tp[k++]);
			weft_wire_frame_free(f[i]);
		}
		assert_int_equal(k, u.ntasks);
		weft_wire_buf_fini(&b);
	}
	free(big);
}

/*
 * An update whose warnings outweigh a record (a new subscriber's history
 * of 1,024 against an 8 KiB cap): the warnings come first in records of
 * their own, in order, then the update; none over the cap.
 */
static void test_wire_update_split_warnings(void **state)
{
	enum { NW = 1024, CAP = 8 << 10 };
	static weft_probe_warning_t warns[NW];
	static Weft__V1__Frame *f[NW + 1];
	weft_probe_stats_t st;
	weft_probe_update_t u = { .stats = &st, .warnings = warns,
				  .nwarnings = NW };
	weft_wire_buf_t b = { 0 };
	size_t n, k = 0;

	(void)state;
	rnd_stats(&st);
	st.clock = NULL;
	for (size_t i = 0; i < NW; i++) {
		rnd_warning(&warns[i]);
		warns[i].task_name = "w";
		warns[i].file = NULL;
		warns[i].seq = i + 1;
	}
	assert_int_equal(weft_wire_update_append_split(&b, &u, 0, CAP), 0);
	n = decode_all(b.data, b.len, b.len, f, NW + 1);
	assert_true(n > 2);
	for (size_t i = 0; i < n; i++) {
		Weft__V1__Update *m = f[i]->update;

		assert_non_null(m);
		assert_true(weft_wire_record_size(f[i]) <= CAP + 8);
		/* The stats in the last record, the update itself. */
		assert_int_equal(m->stats != NULL, i == n - 1);
		for (size_t j = 0; j < m->n_warnings; j++, k++)
			assert_int_equal(m->warnings[j]->seq, k + 1);
		weft_wire_frame_free(f[i]);
	}
	assert_int_equal(k, NW);
	weft_wire_buf_fini(&b);
}

static void rnd_col32(uint32_t *v, size_t *n, size_t max)
{
	*n = rnd_below(4) ? rnd_below(max + 1) : 0;
	for (size_t i = 0; i < *n; i++)
		v[i] = rnd_u32();
}

static void rnd_col64(uint64_t *v, size_t *n, size_t max)
{
	*n = rnd_below(4) ? rnd_below(max + 1) : 0;
	for (size_t i = 0; i < *n; i++)
		v[i] = rnd_u64();
}

static void test_wire_batch_hand_encoded_as_protobuf_c(void **state)
{
	enum { COL = 300 };
	static uint32_t head[COL], a2[COL], fi[COL], fv[COL];
	static uint64_t task[COL], a1[COL];
	static int64_t ts[COL];

	(void)state;
	for (unsigned round = 0; round < scale_count(3000); round++) {
		Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
		Weft__V1__EventBatch m = WEFT__V1__EVENT_BATCH__INIT;
		weft_wire_buf_t hand = { 0 }, ref = { 0 };

		m.worker = rnd_u32();
		m.count = rnd_u32();
		m.base_ts = rnd_u64();
		m.base_task = rnd_u64();
		rnd_col32(head, &m.n_head, COL);
		m.head = head;
		rnd_col64((uint64_t *)ts, &m.n_ts_delta, COL);
		for (size_t i = 0; i < m.n_ts_delta; i++)
			if (rnd_below(2))
				ts[i] = (int64_t)(0 - (uint64_t)ts[i]);
		m.ts_delta = ts;
		rnd_col64(task, &m.n_task, COL);
		m.task = task;
		rnd_col64(a1, &m.n_a1, COL);
		m.a1 = a1;
		rnd_col32(a2, &m.n_a2, COL);
		m.a2 = a2;
		rnd_col32(fi, &m.n_flag_index, COL);
		m.flag_index = fi;
		rnd_col32(fv, &m.n_flag_value, COL);
		m.flag_value = fv;
		f.body_case = WEFT__V1__FRAME__BODY_EVENTS;
		f.events = &m;

		assert_int_equal(weft_wire_batch_append(&hand, &m), 0);
		assert_int_equal(weft_wire_record_append(&ref, &f), 0);
		assert_same_bytes(&hand, &ref);
		weft_wire_buf_fini(&hand);
		weft_wire_buf_fini(&ref);
	}
}

/*
 * weft_wire_batch_decode_raw() against protobuf-c and
 * weft_wire_batch_decode(), on the EventBatch bytes of @rec (a record as
 * weft_wire_batch_append() writes it, maybe altered since): whatever the
 * raw decoder takes, the slow path takes too, into the same events; and
 * it refuses what the slow path refuses.  Return: whether it took them.
 */
static bool raw_agrees(const uint8_t *body, size_t len)
{
	static weft_event_t raw[WEFT_WIRE_BATCH_MAX], slow[WEFT_WIRE_BATCH_MAX];
	Weft__V1__EventBatch m;
	Weft__V1__EventBatch *u;
	int got, want;

	got = weft_wire_batch_decode_raw(body, len, &m, raw,
					 WEFT_WIRE_BATCH_MAX);
	u = weft__v1__event_batch__unpack(NULL, len, body);
	if (!u) {
		assert_int_equal(got, -EAGAIN);
		return false;
	}
	want = u->count <= WEFT_WIRE_BATCH_MAX ?
		       weft_wire_batch_decode(u, slow, WEFT_WIRE_BATCH_MAX) :
		       -ENOSPC;
	if (got >= 0) {
		assert_int_equal(got, want);
		assert_int_equal(m.worker, u->worker);
		assert_int_equal(m.count, u->count);
		assert_true(m.base_ts == u->base_ts);
		assert_true(m.base_task == u->base_task);
		assert_memory_equal(raw, slow, (size_t)got * sizeof(*raw));
	} else {
		assert_int_equal(got, -EAGAIN);
		/* Refused: what the encoder writes is never refused. */
	}
	weft__v1__event_batch__free_unpacked(u, NULL);
	return got >= 0;
}

static size_t get_varint(const uint8_t *p, size_t n, uint64_t *v)
{
	*v = 0;
	for (size_t i = 0; i < n && i < 10; i++) {
		*v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80))
			return i + 1;
	}
	fail_msg("bad varint");
	return 0;
}

/* The EventBatch's bytes in one record of weft_wire_batch_append(). */
static const uint8_t *batch_body(const weft_wire_buf_t *b, size_t *len)
{
	uint64_t flen, blen;
	size_t k = 1, k2;

	k += get_varint(b->data + 1, b->len - 1, &flen);
	assert_int_equal(b->data[k], 0x2a);
	k2 = get_varint(b->data + k + 1, b->len - k - 1, &blen);
	*len = (size_t)blen;
	return b->data + k + 1 + k2;
}

static void test_wire_batch_decode_raw_as_slow_path(void **state)
{
	static weft_event_t ev[4096];
	static uint8_t bad[1 << 18];
	size_t n, len, took = 0, refused = 0;

	(void)state;
	for (unsigned round = 0; round < scale_count(200); round++) {
		weft_wire_batch_t wb;
		weft_wire_buf_t b = { 0 };
		const uint8_t *body;

		n = realistic_events(ev, 8 + rnd_below(4088), 3);
		for (size_t i = 0; i < n; i++)
			if (!rnd_below(8))
				ev[i].flags = (uint8_t)(1 + rnd_below(255));
		weft_wire_batch_init(&wb);
		assert_true(weft_wire_batch_encode(&wb, ev, n) > 0);
		assert_int_equal(weft_wire_batch_append(&b, &wb.msg), 0);
		body = batch_body(&b, &len);
		/* What the encoder writes, the raw decoder takes. */
		assert_true(raw_agrees(body, len));
		assert_true(len <= sizeof(bad));
		/* Altered: bytes changed, cut short, a column's length. */
		for (unsigned k = 0; k < 20; k++) {
			size_t l = len;

			memcpy(bad, body, len);
			if (k % 4 == 3)
				l = rnd_below(len + 1);
			else
				for (unsigned j = 0; j <= k % 3; j++)
					bad[rnd_below(len)] ^=
						(uint8_t)(1u << rnd_below(8));
			if (raw_agrees(bad, l))
				took++;
			else
				refused++;
		}
		weft_wire_buf_fini(&b);
		weft_wire_batch_fini(&wb);
	}
	/* Both kinds seen (flipped bits in a ts or an a1 often still
	 * decode). */
	assert_true(took > 0);
	assert_true(refused > 0);
}

/* weft_wire_record_len(): whole records from their headers, 0 for
 * anything else. */
static void test_wire_record_len(void **state)
{
	weft_wire_buf_t b = { 0 };
	weft_wire_hello_t hello;
	size_t off = 0, n = 0, k;

	(void)state;
	append_all_types(&b, &hello);
	while (off < b.len) {
		k = weft_wire_record_len(b.data + off, b.len - off);
		assert_true(k > 2);
		/* Cut short by a byte, or with a bad tag: not a record. */
		assert_int_equal(weft_wire_record_len(b.data + off, k - 1), 0);
		b.data[off] ^= 1;
		assert_int_equal(weft_wire_record_len(b.data + off, k), 0);
		b.data[off] ^= 1;
		off += k;
		n++;
	}
	assert_int_equal(off, b.len);
	assert_int_equal(n, 6);
	assert_int_equal(weft_wire_record_len(b.data, 1), 0);
	weft_wire_hello_fini(&hello);
	weft_wire_buf_fini(&b);
}

/* A histogram read from the wire: buckets past WEFT_HIST_BUCKETS
 * dropped, the ones it lacks zero, whatever @h held before. */
static void test_wire_hist_get(void **state)
{
	Weft__V1__Histogram m = WEFT__V1__HISTOGRAM__INIT;
	uint32_t many[WEFT_HIST_BUCKETS + 3], few[3] = { 7, 0, 9 };
	weft_hist_t h;

	(void)state;
	for (size_t i = 0; i < WEFT_HIST_BUCKETS + 3; i++)
		many[i] = (uint32_t)i + 1;
	m.buckets = many;
	m.n_buckets = WEFT_HIST_BUCKETS + 3;
	m.count = 12;
	m.sum_ns = 3400;
	m.max_ns = 900;
	m.outliers = 2;
	weft_wire_hist_get(&h, &m);
	assert_int_equal(h.buckets[0], 1);
	assert_int_equal(h.buckets[WEFT_HIST_BUCKETS - 1], WEFT_HIST_BUCKETS);
	assert_int_equal(h.count, 12);
	assert_int_equal(h.sum_ns, 3400);
	assert_int_equal(h.max_ns, 900);
	assert_int_equal(h.outliers, 2);

	m.buckets = few;
	m.n_buckets = 3;
	weft_wire_hist_get(&h, &m);
	assert_int_equal(h.buckets[0], 7);
	assert_int_equal(h.buckets[2], 9);
	for (size_t i = 3; i < WEFT_HIST_BUCKETS; i++)
		assert_int_equal(h.buckets[i], 0);

	m.buckets = NULL;
	m.n_buckets = 0;
	weft_wire_hist_get(&h, &m);
	assert_int_equal(h.buckets[0], 0);
	assert_int_equal(h.count, 12);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wire_round_trip_every_frame_type),
		cmocka_unit_test(test_wire_update_split_warnings),
		cmocka_unit_test(test_wire_events_round_trip_exactly),
		cmocka_unit_test(test_wire_bytes_per_event_realistic),
		cmocka_unit_test(test_wire_oversized_length_rejected),
		cmocka_unit_test(test_wire_truncated_needs_more),
		cmocka_unit_test(test_wire_garbage_rejected),
		cmocka_unit_test(test_wire_batch_inconsistent_rejected),
		cmocka_unit_test(test_wire_events_grouped_per_thread),
		cmocka_unit_test(test_wire_update_hand_encoded_as_protobuf_c),
		cmocka_unit_test(test_wire_update_split_hand_encoded),
		cmocka_unit_test(test_wire_update_memo_as_without),
		cmocka_unit_test(test_wire_update_own_memo_decodes),
		cmocka_unit_test(test_wire_batch_hand_encoded_as_protobuf_c),
		cmocka_unit_test(test_wire_batch_decode_raw_as_slow_path),
		cmocka_unit_test(test_wire_events_append_as_protobuf_c),
		cmocka_unit_test(test_wire_record_len),
		cmocka_unit_test(test_wire_hist_get),
	};

	if (argc == 3 && !strcmp(argv[1], "--write-sample"))
		return write_sample(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "--write-resources"))
		return write_resources(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "--write-pool-many"))
		return write_pool_many(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
