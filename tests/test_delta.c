/* SPDX-License-Identifier: MIT */
/*
 * Delta streams and split updates (probe/src/delta.c, proto/src/update.c): id sets
 * against a model, filters from a Subscribe, a stream's interval (changes
 * accumulate until it is due), thin task records (names once, histograms
 * at most once a second or at the end), and a full update larger than
 * the record limit split into records that each fit and together hold
 * every task; resources: changed ones once per record, every one in a
 * full update, a dropped one once more, split records.  No runtime: the collector is played by the test.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_helpers.h"

#include "delta_internal.h"
#include "weft/wire.h"

/* ------------------------------------------------------------ id sets */

static void test_delta_idset_matches_model(void **state)
{
	enum { RANGE = 4096 };
	static bool model[RANGE];
	weft_idset_t s = { 0 };
	uint64_t x = 0x9E3779B97F4A7C15ull;
	size_t n = 0;

	(void)state;
	memset(model, 0, sizeof(model));
	/* Adds and removes at random (a third removals), so chains wrap
	 * and backward shifts run. */
	for (int i = 0; i < 50000; i++) {
		uint64_t id;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		id = 1 + (x >> 8) % (RANGE - 1);
		if (x % 3 == 0) {
			weft__idset_remove(&s, id);
			if (model[id]) {
				model[id] = false;
				n--;
			}
		} else {
			assert_int_equal(weft__idset_add(&s, id), 0);
			if (!model[id]) {
				model[id] = true;
				n++;
			}
		}
		assert_int_equal(s.n, n);
		if (i % 5000 == 0)
			for (uint64_t k = 1; k < RANGE; k++)
				assert_int_equal(weft__idset_has(&s, k),
						 model[k]);
	}
	for (uint64_t id = 1; id < RANGE; id++)
		assert_int_equal(weft__idset_has(&s, id), model[id]);
	assert_false(weft__idset_has(&s, 0));
	weft__idset_clear(&s);
	assert_int_equal(s.n, 0);
	for (uint64_t id = 1; id < RANGE; id++)
		assert_false(weft__idset_has(&s, id));
	weft__idset_fini(&s);
}

/* ------------------------------------------------------------ filters */

static void test_delta_filter_from_subscribe(void **state)
{
	Weft__V1__Filter m = WEFT__V1__FILTER__INIT;
	uint64_t tasks[] = { 9, 3, 9, 5 };
	uint32_t workers[] = { 1, 65535 }, kinds[] = { WEFT_EV_POLL };
	uint32_t high[] = { 99, 4095, 64 };
	uint32_t bad_worker[] = { 4096 }, bad_kind[] = { 64 };
	weft_delta_filter_t f, g;
	weft_event_t ev = { .task = 3, .worker = 1, .kind = WEFT_EV_POLL };

	(void)state;
	assert_int_equal(weft__delta_filter_set(&f, NULL), 0);
	assert_true(weft__delta_filter_event(&f, &ev));
	weft__delta_filter_fini(&f);

	m.n_tasks = 4;
	m.tasks = tasks;
	m.n_workers = 2;
	m.workers = workers;
	m.n_kinds = 1;
	m.kinds = kinds;
	assert_int_equal(weft__delta_filter_set(&f, &m), 0);
	assert_int_equal(f.ntasks, 3); /* sorted, duplicates gone */
	assert_true(f.other_threads);
	assert_int_equal(f.nwords, 1);
	assert_int_equal(f.workers[0], 1u << 1);
	assert_true(weft__delta_filter_event(&f, &ev));
	ev.worker = WEFT_EVENT_NO_WORKER;
	assert_true(weft__delta_filter_event(&f, &ev));
	ev.worker = 0;
	assert_false(weft__delta_filter_event(&f, &ev));
	ev.worker = 1;
	ev.kind = WEFT_EV_WAKE;
	assert_false(weft__delta_filter_event(&f, &ev));
	ev.kind = WEFT_EV_POLL;
	ev.task = 4;
	assert_false(weft__delta_filter_event(&f, &ev));
	/* An await site's announcement (its task field a site's id) goes
	 * whatever the tasks asked for, when its kind is asked for; not on
	 * a worker filtered out. */
	ev.kind = WEFT_EV_AWAIT_SITE;
	ev.task = 4;
	assert_false(weft__delta_filter_event(&f, &ev)); /* kinds: POLL */
	f.kinds |= 1ull << WEFT_EV_AWAIT_SITE;
	assert_true(weft__delta_filter_event(&f, &ev));
	ev.worker = 0;
	assert_false(weft__delta_filter_event(&f, &ev));
	f.kinds &= ~(1ull << WEFT_EV_AWAIT_SITE);
	ev.worker = 1;
	ev.kind = WEFT_EV_POLL;

	assert_int_equal(weft__delta_filter_copy(&g, &f), 0);
	assert_true(weft__delta_filter_equal(&f, &g));
	g.kinds = 0;
	assert_false(weft__delta_filter_equal(&f, &g));
	weft__delta_filter_fini(&g);
	weft__delta_filter_fini(&f);

	/* Any worker the runtime may have, past 64 too. */
	m.n_workers = 3;
	m.workers = high;
	ev.task = 3;
	assert_int_equal(weft__delta_filter_set(&f, &m), 0);
	assert_int_equal(f.nwords, 64);
	assert_false(f.other_threads);
	for (uint16_t w = 0; w < 4096; w++) {
		ev.worker = w;
		assert_int_equal(weft__delta_filter_event(&f, &ev),
				 w == 99 || w == 4095 || w == 64);
	}
	ev.worker = WEFT_EVENT_NO_WORKER;
	assert_false(weft__delta_filter_event(&f, &ev));
	assert_int_equal(weft__delta_filter_copy(&g, &f), 0);
	assert_true(weft__delta_filter_equal(&f, &g));
	g.workers[1] = 0; /* 64 gone */
	assert_false(weft__delta_filter_equal(&f, &g));
	weft__delta_filter_fini(&g);
	weft__delta_filter_fini(&f);
	ev.worker = 1;

	m.n_workers = 1;
	m.workers = bad_worker;
	assert_int_equal(weft__delta_filter_set(&f, &m), -EINVAL);
	m.workers = workers;
	m.kinds = bad_kind;
	assert_int_equal(weft__delta_filter_set(&f, &m), -EINVAL);
	m.kinds = kinds;
	m.n_tasks = WEFT_DELTA_FILTER_MAX_TASKS + 1;
	assert_int_equal(weft__delta_filter_set(&f, &m), -EINVAL);
}

/* ------------------------------------------------------------ streams */

/* The "collector": tasks 1..NT, looked up by id. */
enum { NT = 600 };
static weft_probe_task_t tasks[NT + 1];
static weft_hist_t hist[2];

static const weft_probe_task_t *lookup(uint64_t id)
{
	return id >= 1 && id <= NT ? &tasks[id] : NULL;
}

static void tasks_make(void)
{
	memset(tasks, 0, sizeof(tasks));
	hist[0].count = hist[1].count = 3;
	hist[0].buckets[5] = 3;
	for (uint64_t i = 1; i <= NT; i++) {
		tasks[i].id = i;
		tasks[i].name = "a-task-with-a-rather-long-name";
		tasks[i].file = "tests/test_delta.c";
		tasks[i].line = 100;
		tasks[i].polls = i;
		tasks[i].spawned_ns = 1;
		tasks[i].poll_hist = &hist[0];
		tasks[i].sched_hist = &hist[1];
	}
}

/* Decodes every record in @b; calls @fn on each Update. */
static size_t updates_in(const weft_wire_buf_t *b, size_t max_record,
			 void (*fn)(const Weft__V1__Update *u, void *ctx),
			 void *ctx)
{
	weft_wire_decoder_t d;
	size_t off = 0, n = 0;

	weft_wire_decoder_init(&d, 0);
	while (off < b->len) {
		Weft__V1__Frame *f;
		size_t used;
		uint64_t start = d.offset;
		int rc = weft_wire_decoder_feed(&d, b->data + off,
						 b->len - off, &used, &f);

		off += used;
		assert_true(rc >= 0);
		if (rc != WEFT_WIRE_FRAME)
			continue;
		/* The Frame's bytes (after the tag and length) fit. */
		assert_true(d.offset - start <= max_record + 6);
		assert_int_equal(f->body_case, WEFT__V1__FRAME__BODY_UPDATE);
		fn(f->update, ctx);
		weft_wire_frame_free(f);
		n++;
	}
	weft_wire_decoder_fini(&d);
	return n;
}

struct tally {
	size_t tasks, named, hists, full, stats;
	bool seen[NT + 1];
};

static void tally_fn(const Weft__V1__Update *u, void *ctx)
{
	struct tally *t = ctx;

	t->full += u->full;
	t->stats += u->stats != NULL;
	for (size_t i = 0; i < u->n_tasks; i++) {
		const Weft__V1__Task *x = u->tasks[i];

		assert_true(x->id >= 1 && x->id <= NT);
		/* Every field but the thin ones is always there. */
		assert_int_equal(x->polls, x->id);
		t->seen[x->id] = true;
		t->tasks++;
		t->named += x->name[0] != '\0';
		t->hists += x->poll_hist != NULL;
	}
}

static weft_probe_update_t pass(weft_probe_stats_t *st, uint64_t now,
				const weft_probe_task_t **changed, size_t n,
				bool full)
{
	weft_probe_update_t u = {
		.stats = st, .tasks = changed, .ntasks = n, .full = full
	};

	st->now_ns = now;
	return u;
}

/*
 * Streams that share encoded records (pass_seq set: the recorder, the
 * server's streams) keep in step (issue 21): B, started out of phase
 * with A at the same interval, waits for A's next send and sends in
 * A's passes from then on, never sooner than its interval after its last
 * record nor later than two; A, the anchor, sends as a lone stream does
 * (A2, without pass_seq, given the same passes: the same bytes, record
 * for record, though A and B share the encoded tasks).
 */
static void test_delta_shared_streams_in_step(void **state)
{
	enum { PASSES = 200 };
	const uint64_t iv = 100000000, step = 20000000; /* 100, 20 ms */
	weft_probe_stats_t st = { 0 };
	const weft_probe_task_t *ch[NT];
	weft_wire_buf_t ba = { 0 }, ba2 = { 0 }, bb = { 0 };
	weft_delta_t a, a2, b;
	uint64_t last_b = 0, x = 0x9E3779B97F4A7C15ull;
	unsigned together = 0, b_sends = 0;
	bool full;

	(void)state;
	tasks_make();
	weft__delta_init(&a);
	weft__delta_init(&a2);
	weft__delta_init(&b);
	a.interval_ns = a2.interval_ns = b.interval_ns = iv;
	a.lookup = a2.lookup = b.lookup = lookup;
	for (size_t i = 0; i < NT; i++)
		ch[i] = &tasks[i + 1];
	for (unsigned k = 0; k < PASSES; k++) {
		/* Passes 20 ms apart, give or take 3 ms; B starts at the
		 * 3rd, out of A's phase. */
		uint64_t now = 5000000000ull + k * step + (x % 7) * 1000000;
		size_t first = x % (NT - 20), n = 1 + (x >> 20) % 20;
		weft_probe_update_t u;
		int ra, ra2, rb = 0;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* Tasks change between passes (their polls stay their id:
		 * tally_fn()), some finish. */
		for (size_t i = first; i < first + n; i++) {
			tasks[i + 1].busy_ns += now;
			if ((x >> 30) % 8 == 0)
				tasks[i + 1].finished_ns = now;
		}
		a.pass_seq = b.pass_seq = k + 1;
		u = pass(&st, now, ch + first, n, k == 0);
		ra = weft__delta_pass(&a, &u, &ba, &full);
		ra2 = weft__delta_pass(&a2, &u, &ba2, &full);
		assert_int_equal(ra, ra2);
		if (k >= 3) {
			u.full = k == 3;
			rb = weft__delta_pass(&b, &u, &bb, &full);
			assert_true(rb >= 0);
		}
		if (rb == 1) {
			if (last_b && k > 3) {
				assert_true(now - last_b >= iv);
				assert_true(now - last_b <= 2 * iv + step);
			}
			last_b = now;
			b_sends++;
			together += ra == 1;
		}
	}
	/* A as alone, to the byte. */
	assert_int_equal(ba.len, ba2.len);
	assert_memory_equal(ba.data, ba2.data, ba.len);
	/* B in A's passes but for its first two sends at most. */
	assert_true(b_sends > 20);
	assert_true(together + 2 >= b_sends);
	weft_wire_buf_fini(&ba);
	weft_wire_buf_fini(&ba2);
	weft_wire_buf_fini(&bb);
	weft__delta_fini(&a);
	weft__delta_fini(&a2);
	weft__delta_fini(&b);
}

static void test_delta_interval_and_thin_records(void **state)
{
	weft_probe_stats_t st = { 0 };
	const weft_probe_task_t *ch[NT];
	weft_wire_buf_t b = { 0 };
	weft_delta_t d;
	weft_probe_update_t u;
	struct tally t;
	bool full;

	(void)state;
	tasks_make();
	weft__delta_init(&d);
	d.interval_ns = 100000000; /* 100 ms */
	d.lookup = lookup;
	for (size_t i = 0; i < NT; i++)
		ch[i] = &tasks[i + 1];

	/* A full pass goes out at once, names and histograms in. */
	u = pass(&st, 1000000000, ch, 10, true);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	assert_true(full);
	memset(&t, 0, sizeof(t));
	updates_in(&b, WEFT_WIRE_MAX_RECORD, tally_fn, &t);
	assert_int_equal(t.tasks, 10);
	assert_int_equal(t.named, 10);
	assert_int_equal(t.hists, 10);
	b.len = 0;

	/* Passes every 20 ms: nothing until 100 ms have passed; then the
	 * tasks changed in any of them, once each. */
	u = pass(&st, 1020000000, ch + 5, 10, false); /* tasks 6..15 */
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 0);
	u = pass(&st, 1040000000, ch + 10, 10, false); /* 11..20 */
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 0);
	assert_int_equal(b.len, 0);
	u = pass(&st, 1100000000, ch, 1, false); /* 1 */
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	assert_false(full);
	memset(&t, 0, sizeof(t));
	assert_int_equal(updates_in(&b, WEFT_WIRE_MAX_RECORD, tally_fn, &t), 1);
	assert_int_equal(t.tasks, 16); /* 1 and 6..20 */
	assert_true(t.seen[1] && t.seen[6] && t.seen[20] && !t.seen[2]);
	/* Names only for the tasks this stream never named (11..20). */
	assert_int_equal(t.named, 10);
	/* Histograms: not a second after the last ones. */
	assert_int_equal(t.hists, 0);
	b.len = 0;

	/* A task sent before the collector could name it is named when
	 * it can be. */
	tasks[30].name = NULL;
	tasks[30].file = NULL;
	u = pass(&st, 1200000000, ch + 29, 1, false); /* 30 */
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	tasks[30].name = "a-task-with-a-rather-long-name";
	tasks[30].file = "tests/test_delta.c";
	u = pass(&st, 1300000000, ch + 29, 1, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	memset(&t, 0, sizeof(t));
	assert_int_equal(updates_in(&b, WEFT_WIRE_MAX_RECORD, tally_fn, &t), 2);
	assert_int_equal(t.tasks, 2);
	assert_int_equal(t.named, 1);
	b.len = 0;

	/* A second on: histograms again, names still not. */
	u = pass(&st, 2100000000, ch, 3, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	memset(&t, 0, sizeof(t));
	updates_in(&b, WEFT_WIRE_MAX_RECORD, tally_fn, &t);
	assert_int_equal(t.tasks, 3);
	assert_int_equal(t.named, 0);
	assert_int_equal(t.hists, 3);
	b.len = 0;

	/* A finished task's last record has its histograms; the final
	 * pass goes out whatever the interval. */
	tasks[2].finished_ns = 2110000000;
	u = pass(&st, 2120000000, ch + 1, 2, false); /* 2, 3 */
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 0);
	d.final = true;
	u = pass(&st, 2130000000, ch, 0, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	memset(&t, 0, sizeof(t));
	updates_in(&b, WEFT_WIRE_MAX_RECORD, tally_fn, &t);
	assert_int_equal(t.tasks, 2);
	assert_int_equal(t.hists, 2);
	b.len = 0;

	/* A filter: only tasks 2 and 4 (the others are not even kept). */
	weft__delta_fini(&d);
	weft__delta_init(&d);
	d.lookup = lookup;
	{
		Weft__V1__Filter m = WEFT__V1__FILTER__INIT;
		uint64_t want[] = { 4, 2 };

		m.n_tasks = 2;
		m.tasks = want;
		assert_int_equal(weft__delta_filter_set(&d.filter, &m), 0);
	}
	u = pass(&st, 3000000000, ch, 10, true);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	memset(&t, 0, sizeof(t));
	updates_in(&b, WEFT_WIRE_MAX_RECORD, tally_fn, &t);
	assert_int_equal(t.tasks, 2);
	assert_true(t.seen[2] && t.seen[4]);
	weft__delta_fini(&d);
	weft_wire_buf_fini(&b);
}

struct order {
	uint64_t id[NT];
	size_t n;
};

static void order_fn(const Weft__V1__Update *u, void *ctx)
{
	struct order *o = ctx;

	for (size_t i = 0; i < u->n_tasks; i++) {
		assert_true(o->n < NT);
		o->id[o->n++] = u->tasks[i]->id;
	}
}

/*
 * A record lists its tasks in the order they first changed since the
 * last (issue 21: the stream walks the ids as it added them, not the
 * dirty set's slots): once each, those gone by then (no record left)
 * left out, across the list's growth; and the next record starts a new
 * list.
 */
static void test_delta_record_in_change_order(void **state)
{
	const weft_probe_task_t *ch[NT];
	weft_probe_stats_t st = { 0 };
	weft_wire_buf_t b = { 0 };
	static struct order o;
	static uint64_t want[NT];
	weft_probe_task_t gone = { .id = NT + 5, .polls = 1 };
	size_t nwant = 0, k = 0;
	weft_delta_t d;
	weft_probe_update_t u;
	bool full;

	(void)state;
	tasks_make();
	weft__delta_init(&d);
	d.interval_ns = 100000000; /* 100 ms */
	d.lookup = lookup;
	/* The first record goes out at once. */
	u = pass(&st, 1000000000, ch, 0, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	b.len = 0;

	/* Pass 1: 7, 3, 12, a task gone by the record, then 300 more (the
	 * list grows past its first 64); pass 2: 3 and 12 again, then 20
	 * and 1; pass 3 (due): 5 and 7 again. */
	ch[k++] = &tasks[7];
	ch[k++] = &tasks[3];
	ch[k++] = &tasks[12];
	ch[k++] = &gone;
	for (uint64_t id = 600; id > 300; id--)
		ch[k++] = &tasks[id];
	u = pass(&st, 1020000000, ch, k, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 0);
	for (size_t i = 0; i < k; i++)
		if (ch[i] != &gone)
			want[nwant++] = ch[i]->id;
	ch[0] = &tasks[3];
	ch[1] = &tasks[12];
	ch[2] = &tasks[20];
	ch[3] = &tasks[1];
	u = pass(&st, 1040000000, ch, 4, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 0);
	want[nwant++] = 20;
	want[nwant++] = 1;
	ch[0] = &tasks[5];
	ch[1] = &tasks[7];
	u = pass(&st, 1100000000, ch, 2, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	want[nwant++] = 5;
	o.n = 0;
	updates_in(&b, WEFT_WIRE_MAX_RECORD, order_fn, &o);
	assert_int_equal(o.n, nwant);
	assert_memory_equal(o.id, want, nwant * sizeof(*want));
	b.len = 0;

	/* The next record: only what changed since, in its order. */
	ch[0] = &tasks[9];
	ch[1] = &tasks[2];
	u = pass(&st, 1200000000, ch, 2, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	o.n = 0;
	updates_in(&b, WEFT_WIRE_MAX_RECORD, order_fn, &o);
	assert_int_equal(o.n, 2);
	assert_int_equal(o.id[0], 9);
	assert_int_equal(o.id[1], 2);

	weft_wire_buf_fini(&b);
	weft__delta_fini(&d);
}

/* The warnings a record carries: the newest 1024 (delta.c's WARN_CAP)
 * of those raised since the stream's last record, oldest first. */
#define WARN_CAP 1024u

struct warn_seqs {
	uint64_t first, last;
	size_t n;
	bool ordered;
};

static void warn_seqs_fn(const Weft__V1__Update *u, void *ctx)
{
	struct warn_seqs *w = ctx;

	w->ordered = true;
	w->n = u->n_warnings;
	for (size_t i = 0; i < u->n_warnings; i++)
		if (i && u->warnings[i]->seq != u->warnings[i - 1]->seq + 1)
			w->ordered = false;
	if (u->n_warnings) {
		w->first = u->warnings[0]->seq;
		w->last = u->warnings[u->n_warnings - 1]->seq;
	}
}

static void test_delta_warnings_keep_the_newest(void **state)
{
	static weft_probe_warning_t w[3000];
	static const size_t per_pass[][3] = {
		{ 10, 20, 0 },      /* under the cap: all */
		{ 700, 700, 0 },    /* over it across passes */
		{ 1500, 0, 0 },     /* over it in one pass */
		{ 1000, 30, 2000 }, /* both */
	};
	weft_probe_stats_t st = { 0 };
	weft_wire_buf_t b = { 0 };
	weft_delta_t d;
	uint64_t seq = 0, now = 1000000000;
	bool full;

	(void)state;
	weft__delta_init(&d);
	d.interval_ns = 100000000;
	d.lookup = lookup;
	/* A stream's first pass goes out at once: out of the way. */
	{
		weft_probe_update_t u = pass(&st, now, NULL, 0, false);

		assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
		b.len = 0;
	}
	for (size_t c = 0; c < sizeof(per_pass) / sizeof(per_pass[0]); c++) {
		struct warn_seqs got = { 0 };
		uint64_t first = seq + 1;
		size_t total = 0;

		for (size_t k = 0; k < 3; k++) {
			weft_probe_update_t u = pass(&st, now, NULL, 0, false);

			for (size_t i = 0; i < per_pass[c][k]; i++) {
				memset(&w[i], 0, sizeof(w[i]));
				w[i].seq = ++seq;
				w[i].worker = WEFT_EVENT_NO_WORKER;
			}
			u.warnings = w;
			u.nwarnings = per_pass[c][k];
			total += per_pass[c][k];
			/* Due on the last pass of each case only. */
			now += k < 2 ? 10000000 : 100000000;
			st.now_ns = now;
			assert_true(weft__delta_pass(&d, &u, &b, &full) >= 0);
		}
		updates_in(&b, WEFT_WIRE_MAX_RECORD, warn_seqs_fn, &got);
		b.len = 0;
		assert_true(got.ordered);
		assert_int_equal(got.n, total < WARN_CAP ? total : WARN_CAP);
		assert_int_equal(got.last, seq);
		assert_int_equal(got.first,
				 total < WARN_CAP ? first : seq - WARN_CAP + 1);
	}
	weft__delta_fini(&d);
	weft_wire_buf_fini(&b);
}

/* A full update of NT tasks under a 16 KiB limit: several records, each
 * under it; the first full with the stats, the others neither. */
static void test_delta_full_update_split(void **state)
{
	enum { CAP = 16 << 10 };
	weft_probe_stats_t st = { .now_ns = 5 };
	const weft_probe_task_t *ch[NT];
	weft_probe_update_t u = {
		.stats = &st, .tasks = ch, .ntasks = NT, .full = true
	};
	weft_wire_buf_t b = { 0 }, rc = { 0 };
	struct tally t = { 0 };
	size_t n;

	(void)state;
	tasks_make();
	for (size_t i = 0; i < NT; i++)
		ch[i] = &tasks[i + 1];
	/* Whole, it would not fit. */
	assert_int_equal(weft_wire_update_append(&b, &u, 0), 0);
	assert_true(b.len > CAP);
	assert_int_equal(updates_in(&b, WEFT_WIRE_MAX_RECORD, tally_fn, &t), 1);
	memset(&t, 0, sizeof(t));
	b.len = 0;
	assert_int_equal(weft_wire_update_append_split(&b, &u, 0, CAP), 0);
	assert_true(b.len > CAP);
	n = updates_in(&b, CAP, tally_fn, &t);
	print_message("%zu tasks in %zu records of at most %d bytes\n", t.tasks,
		      n, CAP);
	assert_true(n >= 2);
	assert_int_equal(t.full, 1);
	assert_int_equal(t.stats, 1);
	assert_int_equal(t.tasks, NT);
	for (size_t i = 1; i <= NT; i++)
		assert_true(t.seen[i]);

	/* A slow client's counts go into the first record; the others
	 * follow unchanged. */
	assert_int_equal(weft_wire_update_recount(&rc, b.data, b.len, 7, 9),
			 0);
	memset(&t, 0, sizeof(t));
	assert_int_equal(updates_in(&rc, CAP + 16, tally_fn, &t), n);
	assert_int_equal(t.tasks, NT);

	/* A limit no record can meet. */
	b.len = 0;
	assert_int_equal(weft_wire_update_append_split(&b, &u, 0, 100),
			 -EMSGSIZE);
	assert_int_equal(b.len, 0);
	weft_wire_buf_fini(&b);
	weft_wire_buf_fini(&rc);
}

/* ---------------------------------------------------------- resources */

/* What the records said of resources, by id (1..8). */
struct res_tally {
	size_t n, hists, records;
	uint64_t acquires[9], dropped[9];
	size_t times[9];
	char name[9][16];
	uint64_t wait_count[9];
};

static void res_tally_fn(const Weft__V1__Update *u, void *ctx)
{
	struct res_tally *t = ctx;

	t->records++;
	for (size_t i = 0; i < u->n_resources; i++) {
		const Weft__V1__Resource *r = u->resources[i];

		assert_true(r->id >= 1 && r->id <= 8);
		t->n++;
		t->times[r->id]++;
		t->acquires[r->id] = r->acquires;
		t->dropped[r->id] = r->dropped_ns;
		snprintf(t->name[r->id], sizeof(t->name[0]), "%s", r->name);
		if (r->wait_hist) {
			t->hists++;
			t->wait_count[r->id] = r->wait_hist->count;
		}
	}
}

static weft_probe_update_t res_pass(weft_probe_stats_t *st, uint64_t now,
				    const weft_probe_resource_t **res, size_t n,
				    bool full)
{
	weft_probe_update_t u = pass(st, now, NULL, 0, full);

	u.resources = res;
	u.nresources = n;
	return u;
}

/*
 * Resources through a stream: a full pass carries every one, with
 * histograms; changed ones accumulate until the interval (the latest
 * copy, histograms copied when the pass came, not read later) and go
 * out once; a dropped one goes out once more, histograms in, then no
 * more, even when a full pass that no longer lists it comes first; a
 * task filter passes the resources that list its tasks.
 */
static void test_delta_resources(void **state)
{
	static weft_probe_resource_t r[9];
	static weft_hist_t h[9];
	weft_probe_stats_t st = { 0 };
	const weft_probe_resource_t *p[8];
	weft_wire_buf_t b = { 0 };
	weft_delta_t d;
	weft_probe_update_t u;
	struct res_tally t;
	bool full;

	(void)state;
	for (unsigned i = 1; i <= 8; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		memset(&h[i], 0, sizeof(h[i]));
		r[i].id = i;
		r[i].kind = WEFT_RES_MUTEX;
		r[i].name = "lock";
		r[i].acquires = 10 * i;
		weft_hist_record(&h[i], 1000);
		r[i].wait_hist = &h[i];
	}
	weft__delta_init(&d);
	d.interval_ns = 100000000;
	d.lookup = lookup;

	/* Full: every resource, histograms in. */
	p[0] = &r[1];
	p[1] = &r[2];
	p[2] = &r[3];
	u = res_pass(&st, 1000000000, p, 3, true);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	memset(&t, 0, sizeof(t));
	updates_in(&b, WEFT_WIRE_MAX_RECORD, res_tally_fn, &t);
	assert_int_equal(t.n, 3);
	assert_int_equal(t.hists, 3);
	assert_string_equal(t.name[2], "lock");
	b.len = 0;

	/* Changes within the interval: the latest copy, once. */
	r[1].acquires = 11;
	p[0] = &r[1];
	u = res_pass(&st, 1020000000, p, 1, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 0);
	r[1].acquires = 12;
	p[1] = &r[4];
	u = res_pass(&st, 1040000000, p, 2, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 0);
	/* The collector's histogram changes after the pass: the stream
	 * sends what the pass said. */
	r[1].acquires = 13;
	weft_hist_record(&h[4], 2000);
	u = res_pass(&st, 1100000000, NULL, 0, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	memset(&t, 0, sizeof(t));
	updates_in(&b, WEFT_WIRE_MAX_RECORD, res_tally_fn, &t);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.times[1], 1);
	assert_int_equal(t.acquires[1], 12);
	assert_int_equal(t.times[4], 1);
	/* Not a second since the last histograms. */
	assert_int_equal(t.hists, 0);
	b.len = 0;

	/* Nothing changed: no resource. */
	u = res_pass(&st, 1200000000, NULL, 0, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	memset(&t, 0, sizeof(t));
	updates_in(&b, WEFT_WIRE_MAX_RECORD, res_tally_fn, &t);
	assert_int_equal(t.n, 0);
	b.len = 0;

	/* Dropped: once more, histograms in; then never. */
	r[2].dropped_ns = 1250000000;
	p[0] = &r[2];
	u = res_pass(&st, 1300000000, p, 1, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	u = res_pass(&st, 1400000000, NULL, 0, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	memset(&t, 0, sizeof(t));
	assert_int_equal(updates_in(&b, WEFT_WIRE_MAX_RECORD, res_tally_fn,
				    &t),
			 2);
	assert_int_equal(t.n, 1);
	assert_int_equal(t.dropped[2], 1250000000);
	assert_int_equal(t.wait_count[2], 1);
	b.len = 0;

	/* Dropped in a pass not yet due, then a full pass that no longer
	 * lists it: the full record carries it too. */
	r[3].dropped_ns = 1410000000;
	p[0] = &r[3];
	u = res_pass(&st, 1420000000, p, 1, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 0);
	p[0] = &r[1];
	p[1] = &r[4];
	u = res_pass(&st, 1440000000, p, 2, true);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	assert_true(full);
	memset(&t, 0, sizeof(t));
	updates_in(&b, WEFT_WIRE_MAX_RECORD, res_tally_fn, &t);
	assert_int_equal(t.n, 3);
	assert_int_equal(t.dropped[3], 1410000000);
	assert_int_equal(t.times[1] + t.times[4], 2);
	assert_int_equal(t.hists, 3);
	b.len = 0;

	/* Changed in every pass, each pass due: in every record. */
	for (int round = 0; round < 3; round++) {
		u = res_pass(&st, 2000000000 + round * 200000000ull, p, 2,
			     false);
		assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	}
	memset(&t, 0, sizeof(t));
	updates_in(&b, WEFT_WIRE_MAX_RECORD, res_tally_fn, &t);
	assert_int_equal(t.n, 6);
	b.len = 0;
	weft__delta_fini(&d);

	/* A filter on task 5: the resources that list it. */
	weft__delta_init(&d);
	d.lookup = lookup;
	{
		Weft__V1__Filter m = WEFT__V1__FILTER__INIT;
		uint64_t want[] = { 5 };

		m.n_tasks = 1;
		m.tasks = want;
		assert_int_equal(weft__delta_filter_set(&d.filter, &m), 0);
	}
	r[5].holders[0] = 5;
	r[5].nholders = 1;
	r[6].waiters[3] = 5;
	r[6].nwaiters = 4;
	r[7].owner = 5;
	r[8].waiters[0] = 6;
	r[8].nwaiters = 1;
	for (unsigned i = 0; i < 4; i++)
		p[i] = &r[5 + i];
	u = res_pass(&st, 3000000000, p, 4, true);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	memset(&t, 0, sizeof(t));
	updates_in(&b, WEFT_WIRE_MAX_RECORD, res_tally_fn, &t);
	assert_int_equal(t.n, 3);
	assert_int_equal(t.times[8], 0);
	weft__delta_fini(&d);
	weft_wire_buf_fini(&b);
}

/*
 * A full update of many resources and tasks under a small limit: split,
 * every resource and task once, resources in the first records.
 */
static void test_delta_full_update_split_resources(void **state)
{
	enum { CAP = 4 << 10, NR = 200 };
	static weft_probe_resource_t r[NR];
	static const weft_probe_resource_t *rp[NR];
	weft_probe_stats_t st = { .now_ns = 5 };
	const weft_probe_task_t *ch[NT];
	weft_delta_t d;
	weft_wire_buf_t b = { 0 };
	struct tally t = { 0 };
	bool full;
	weft_probe_update_t u = { .stats = &st,
				  .tasks = ch,
				  .ntasks = NT,
				  .full = true,
				  .resources = rp,
				  .nresources = NR };
	size_t n;

	(void)state;
	tasks_make();
	for (size_t i = 0; i < NT; i++)
		ch[i] = &tasks[i + 1];
	for (size_t i = 0; i < NR; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].id = i + 1;
		r[i].kind = WEFT_RES_MPSC;
		r[i].file = "tests/test_delta.c";
		r[i].line = (uint32_t)i;
		r[i].nwaiters = 100;
		for (unsigned k = 0; k < WEFT_RES_LIST; k++)
			r[i].waiters[k] = 1000000 + k;
		rp[i] = &r[i];
	}
	weft__delta_init(&d);
	d.lookup = lookup;
	d.max_record = CAP;
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	n = updates_in(&b, CAP, tally_fn, &t);
	assert_true(n >= 2);
	assert_int_equal(t.tasks, NT);
	assert_int_equal(t.full, 1);
	{
		struct res_count {
			size_t n;
			uint64_t next;
		} c = { 0, 1 };
		weft_wire_decoder_t dec;
		size_t off = 0;

		weft_wire_decoder_init(&dec, 0);
		while (off < b.len) {
			Weft__V1__Frame *f;
			size_t used;
			int rc = weft_wire_decoder_feed(&dec, b.data + off,
							 b.len - off, &used,
							 &f);

			off += used;
			assert_true(rc >= 0);
			if (rc != WEFT_WIRE_FRAME)
				continue;
			for (size_t i = 0; i < f->update->n_resources; i++) {
				assert_int_equal(f->update->resources[i]->id,
						 c.next++);
				assert_int_equal(
					f->update->resources[i]->n_waiters,
					WEFT_RES_LIST);
				c.n++;
			}
			weft_wire_frame_free(f);
		}
		weft_wire_decoder_fini(&dec);
		assert_int_equal(c.n, NR);
	}
	weft__delta_fini(&d);
	weft_wire_buf_fini(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delta_idset_matches_model),
		cmocka_unit_test(test_delta_filter_from_subscribe),
		cmocka_unit_test(test_delta_interval_and_thin_records),
		cmocka_unit_test(test_delta_record_in_change_order),
		cmocka_unit_test(test_delta_shared_streams_in_step),
		cmocka_unit_test(test_delta_full_update_split),
		cmocka_unit_test(test_delta_warnings_keep_the_newest),
		cmocka_unit_test(test_delta_resources),
		cmocka_unit_test(test_delta_full_update_split_resources),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
