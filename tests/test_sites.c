/* SPDX-License-Identifier: MIT */
/*
 * Spawn sites on the wire (proto/src/sites.c, update_site.c, the readers;
 * probe/src/delta.c's site rule): a delta stream sends a site's record
 * once, with the first Task record naming it, and leaves the task's name,
 * file, line and state_size out; a full update and a forget send the
 * sites again; a site whose record could not go out is sent with the
 * next record naming it; a task named otherwise than its site keeps its
 * strings.  Readers name a task by its site, by every path (protobuf-c,
 * the raw walk, the trace reader's tasks and briefs, across a seek); a
 * record naming a site not met stays unnamed and is counted.  Records
 * with names and no site (every file before sites) read as before.  No
 * runtime: the collector is played by the test, as in test_delta.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_helpers.h"

#include "delta_internal.h"
#include "weft/trace_reader.h"
#include "weft/wire.h"

/* The "collector": tasks 1..NT; site 7 names tasks 1..4 and 6 (6 named
 * otherwise), task 5 has no site. */
enum { NT = 6, SITE = 7 };
static weft_probe_task_t tasks[NT + 1];
static const char site_name[] = "GET /fast-task";
static const char site_file[] = "tools/demo/demo.c";
static const char other_name[] = "renamed";
static bool site_known = true;
static unsigned site_looks; /* site_of() calls */

static const weft_probe_task_t *lookup(uint64_t id)
{
	return id >= 1 && id <= NT ? &tasks[id] : NULL;
}

static bool site_of(uint32_t id, weft_wire_site_t *out)
{
	site_looks++;
	if (id != SITE || !site_known)
		return false;
	*out = (weft_wire_site_t){ .id = SITE,
				   .line = 321,
				   .state_size = 96,
				   .name = site_name,
				   .file = site_file };
	return true;
}

static void tasks_make(void)
{
	memset(tasks, 0, sizeof(tasks));
	for (uint64_t i = 1; i <= NT; i++) {
		tasks[i].id = i;
		tasks[i].polls = i;
		tasks[i].spawned_ns = 1;
		tasks[i].name = site_name;
		tasks[i].file = site_file;
		tasks[i].line = 321;
		tasks[i].state_size = 96;
		tasks[i].site = SITE;
	}
	tasks[5].site = 0;
	tasks[5].name = "seeded";
	tasks[6].name = other_name;
}

static weft_probe_update_t pass(weft_probe_stats_t *st, uint64_t now,
				const weft_probe_task_t **ch, size_t n,
				bool full)
{
	st->now_ns = now;
	return (weft_probe_update_t){
		.stats = st, .tasks = ch, .ntasks = n, .full = full
	};
}

/* What the records in @b hold, read as a reader reads them. */
struct seen {
	size_t updates, sites, tasks, thin, named_by_site, unnamed;
	char name[NT + 1][32];
};

static void read_records(const weft_wire_buf_t *b, weft_wire_sites_t *sites,
			 struct seen *s)
{
	weft_wire_decoder_t d;
	size_t off = 0;

	memset(s, 0, sizeof(*s));
	weft_wire_decoder_init(&d, 0);
	while (off < b->len) {
		Weft__V1__Frame *f;
		size_t used;
		int rc = weft_wire_decoder_feed(&d, b->data + off, b->len - off,
						&used, &f);

		off += used;
		assert_true(rc >= 0);
		if (rc != WEFT_WIRE_FRAME)
			continue;
		assert_int_equal(f->body_case, WEFT__V1__FRAME__BODY_UPDATE);
		s->updates++;
		s->sites += f->update->n_sites;
		assert_int_equal(weft_wire_sites_add_update(sites, f->update),
				 0);
		for (size_t i = 0; i < f->update->n_tasks; i++) {
			Weft__V1__Task c = *f->update->tasks[i];

			s->tasks++;
			s->thin += !c.name[0] && !c.file[0] && !c.line &&
				   !c.state_size;
			s->named_by_site += weft_wire_sites_resolve(sites, &c);
			s->unnamed += !c.name[0];
			if (c.id <= NT)
				snprintf(s->name[c.id], sizeof(s->name[0]),
					 "%s", c.name);
			if (c.name == site_name || !strcmp(c.name, site_name)) {
				assert_string_equal(c.file, site_file);
				assert_int_equal(c.line, 321);
				assert_int_equal(c.state_size, 96);
			}
		}
		weft_wire_frame_free(f);
	}
	assert_false(weft_wire_decoder_mid_record(&d));
	weft_wire_decoder_fini(&d);
}

/* A stream sends site 7 once; full updates and forget send it again. */
static void test_sites_sent_once_per_stream(void **state)
{
	weft_probe_stats_t st = { 0 };
	const weft_probe_task_t *ch[NT];
	weft_wire_sites_t sites = { 0 };
	weft_wire_buf_t b = { 0 };
	weft_delta_t d;
	weft_probe_update_t u;
	struct seen s;
	bool full;

	(void)state;
	tasks_make();
	weft__delta_init(&d);
	d.lookup = lookup;
	d.site = site_of;
	for (size_t i = 0; i < NT; i++)
		ch[i] = &tasks[i + 1];

	/* The first record: the site once, for its five tasks; tasks 1..4
	 * thin (named by it), 5 (no site) and 6 (named otherwise) with
	 * their strings. */
	u = pass(&st, 1000, ch, NT, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	read_records(&b, &sites, &s);
	assert_int_equal(s.sites, 1);
	assert_int_equal(s.tasks, NT);
	assert_int_equal(s.thin, 4);
	assert_int_equal(s.named_by_site, 4);
	assert_int_equal(s.unnamed, 0);
	for (int i = 1; i <= 4; i++)
		assert_string_equal(s.name[i], site_name);
	assert_string_equal(s.name[5], "seeded");
	assert_string_equal(s.name[6], other_name);
	assert_int_equal(sites.n, 1);
	b.len = 0;

	/* Later records name the site, without it. */
	u = pass(&st, 2000, ch, 3, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	read_records(&b, &sites, &s);
	assert_int_equal(s.sites, 0);
	assert_int_equal(s.thin, 3);
	assert_int_equal(s.named_by_site, 3);
	b.len = 0;

	/* A full update: again (a reader may start there). */
	u = pass(&st, 3000, ch, NT, true);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	assert_true(full);
	read_records(&b, &sites, &s);
	assert_int_equal(s.sites, 1);
	assert_int_equal(s.thin, 4);
	b.len = 0;
	u = pass(&st, 4000, ch, 2, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	read_records(&b, &sites, &s);
	assert_int_equal(s.sites, 0);
	b.len = 0;

	/* Forgotten (a new file, a resync): again. */
	weft__delta_forget(&d);
	u = pass(&st, 5000, ch, 2, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	read_records(&b, &sites, &s);
	assert_int_equal(s.sites, 1);
	assert_int_equal(s.named_by_site, 2);
	b.len = 0;

	/* A record that could not go out (too big): its site goes with
	 * the next record naming it. */
	weft__delta_forget(&d);
	d.max_record = 200;
	tasks[1].parked_file = memset(calloc(1, 400), 'x', 399);
	u = pass(&st, 6000, ch, 1, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), -EMSGSIZE);
	free((char *)tasks[1].parked_file);
	tasks[1].parked_file = NULL;
	d.max_record = 0;
	b.len = 0;
	u = pass(&st, 7000, ch + 1, 1, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	read_records(&b, &sites, &s);
	assert_int_equal(s.sites, 1);
	b.len = 0;

	/* A site the collector has not met: the strings go out. */
	weft__delta_forget(&d);
	site_known = false;
	u = pass(&st, 8000, ch, 4, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	read_records(&b, &sites, &s);
	assert_int_equal(s.sites, 0);
	assert_int_equal(s.thin, 0);
	assert_int_equal(s.named_by_site, 0);
	assert_string_equal(s.name[1], site_name);
	site_known = true;

	assert_int_equal(sites.unknown, 0);
	weft_wire_sites_fini(&sites);
	weft_wire_buf_fini(&b);
	weft__delta_fini(&d);
}

/*
 * A pass looks a site up once, however many of its tasks name it (issue
 * 21: a task per request, each looked up by site_names() before), and
 * each pass again (a site the collector meets later, or forgets, is
 * seen in the next); the tasks between them, with no site or named
 * otherwise, do not spoil the look.
 */
static void test_sites_looked_up_once_a_pass(void **state)
{
	weft_probe_stats_t st = { 0 };
	/* Site 7's tasks around one named otherwise and one with none. */
	const weft_probe_task_t *ch[] = { &tasks[1], &tasks[6], &tasks[2],
					  &tasks[5], &tasks[3], &tasks[4] };
	weft_wire_sites_t sites = { 0 };
	weft_wire_buf_t b = { 0 };
	weft_delta_t d;
	weft_probe_update_t u;
	struct seen s;
	bool full;

	(void)state;
	tasks_make();
	weft__delta_init(&d);
	d.lookup = lookup;
	d.site = site_of;
	site_looks = 0;
	u = pass(&st, 1000, ch, NT, true);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	assert_int_equal(site_looks, 1);
	read_records(&b, &sites, &s);
	assert_int_equal(s.sites, 1);
	assert_int_equal(s.thin, 4);
	assert_int_equal(s.named_by_site, 4);
	assert_string_equal(s.name[6], other_name);
	assert_string_equal(s.name[5], "seeded");
	b.len = 0;

	/* The next pass looks again: the site unknown now, the strings go
	 * out; then known again, thin again (sent already). */
	site_known = false;
	u = pass(&st, 2000, ch, NT, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	assert_int_equal(site_looks, 2);
	read_records(&b, &sites, &s);
	assert_int_equal(s.thin, 0);
	assert_string_equal(s.name[1], site_name);
	b.len = 0;
	site_known = true;
	u = pass(&st, 3000, ch, NT, false);
	assert_int_equal(weft__delta_pass(&d, &u, &b, &full), 1);
	assert_int_equal(site_looks, 3);
	read_records(&b, &sites, &s);
	assert_int_equal(s.sites, 0);
	assert_int_equal(s.thin, 4);

	weft_wire_sites_fini(&sites);
	weft_wire_buf_fini(&b);
	weft__delta_fini(&d);
}

/* Task records naming sites 3 (met) and 9 (never met), by hand. */
static void records_by_hand(weft_wire_buf_t *b, bool with_site)
{
	weft_probe_stats_t st = { .now_ns = 10 };
	weft_probe_task_t t[3] = {
		{ .id = 1, .site = 3, .polls = 1 },
		{ .id = 2, .site = 9, .polls = 2 },
		{ .id = 3,
		  .name = "old",
		  .file = "old.c",
		  .line = 4,
		  .polls = 3 },
	};
	const weft_probe_task_t *tp[3] = { &t[0], &t[1], &t[2] };
	weft_probe_update_t u = { .stats = &st, .tasks = tp, .ntasks = 3 };
	weft_wire_site_t s = { .id = 3,
			       .name = "three",
			       .file = "3.c",
			       .line = 33,
			       .state_size = 300 };

	assert_int_equal(weft_wire_update_append_sites(b, &u, &s, with_site, 0,
						       0, NULL),
			 0);
}

/* A site not met: the task stays unnamed (never another site's name),
 * counted; a record with its own strings (an old file's) as it was. */
static void test_sites_unknown_unnamed_counted(void **state)
{
	weft_wire_sites_t sites = { 0 };
	weft_wire_buf_t b = { 0 };
	struct seen s;

	(void)state;
	records_by_hand(&b, true);
	read_records(&b, &sites, &s);
	assert_int_equal(s.sites, 1);
	assert_int_equal(s.named_by_site, 1);
	assert_string_equal(s.name[1], "three");
	assert_string_equal(s.name[2], "");
	assert_string_equal(s.name[3], "old");
	assert_int_equal(s.unnamed, 1);
	assert_int_equal(sites.unknown, 1);
	assert_null(weft_wire_sites_get(&sites, 9));
	assert_null(weft_wire_sites_get(&sites, 0));
	assert_null(weft_wire_sites_get(&sites, WEFT_WIRE_SITE_MAX + 1));
	weft_wire_sites_fini(&sites);

	/* Site ids past the bound are refused, not kept. */
	{
		Weft__V1__Site m = WEFT__V1__SITE__INIT;

		m.id = WEFT_WIRE_SITE_MAX + 1;
		m.name = "far";
		assert_int_equal(weft_wire_sites_add(&sites, &m), -EINVAL);
		m.id = 0;
		assert_int_equal(weft_wire_sites_add(&sites, &m), -EINVAL);
		assert_int_equal(sites.n, 0);

		/* Await sites: ids 1 .. WEFT_WIRE_AWAIT_SITE_MAX past the
		 * base, as many as a runtime gives; a peer's larger id is
		 * refused, not a table grown to it. */
		m.name = "";
		m.file = "a.c";
		m.line = 7;
		m.id = WEFT_WIRE_AWAIT_SITE_BASE;
		assert_int_equal(weft_wire_sites_add(&sites, &m), -EINVAL);
		m.id = WEFT_WIRE_AWAIT_SITE_BASE + WEFT_WIRE_AWAIT_SITE_MAX + 1;
		assert_int_equal(weft_wire_sites_add(&sites, &m), -EINVAL);
		assert_true(sites.await_cap <= 64);
		m.id = WEFT_WIRE_AWAIT_SITE_BASE + WEFT_WIRE_AWAIT_SITE_MAX;
		assert_int_equal(weft_wire_sites_add(&sites, &m), 0);
		assert_int_equal(weft_wire_sites_await(&sites,
						       WEFT_WIRE_AWAIT_SITE_MAX)
					 ->line,
				 7);
		assert_null(weft_wire_sites_await(
			&sites, WEFT_WIRE_AWAIT_SITE_MAX + 1));
		weft_wire_sites_fini(&sites);
	}
	weft_wire_buf_fini(&b);
}

static int raw_task(void *ctx, const uint8_t *p, size_t len)
{
	void **c = ctx;
	weft_wire_task_raw_t *raw = c[0];
	weft_wire_sites_t *sites = c[1];
	char(*names)[32] = c[2];

	assert_int_equal(weft_wire_task_decode_raw(raw, p, len), 0);
	weft_wire_sites_resolve(sites, &raw->msg);
	if (raw->msg.id <= 3)
		snprintf(names[raw->msg.id], 32, "%s:%u:%u", raw->msg.name,
			 raw->msg.line, raw->msg.state_size);
	return 0;
}

/* The console's live path: sites walked from the bytes first, then each
 * task decoded by hand and named by its site. */
static void test_sites_raw_walk(void **state)
{
	weft_wire_sites_t sites = { 0 };
	weft_wire_task_raw_t raw = { 0 };
	weft_wire_buf_t b = { 0 }, rest = { 0 };
	char names[4][32] = { { 0 } };
	void *ctx[3] = { &raw, &sites, names };
	const uint8_t *body;
	size_t len, hdr;
	uint64_t flen;

	(void)state;
	records_by_hand(&b, true);
	/* The record: tag, length, then a Frame of one field (update). */
	hdr = 1;
	while (b.data[hdr] & 0x80)
		hdr++;
	hdr++;
	flen = b.len - hdr;
	assert_int_equal(
		weft_wire_frame_one_raw(b.data + hdr, flen, &body, &len), 4);
	assert_int_equal(weft_wire_update_walk_sites_raw(body, len, &sites), 0);
	assert_int_equal(sites.n, 1);
	assert_int_equal(
		weft_wire_update_walk_raw(body, len, &rest, raw_task, ctx), 0);
	assert_string_equal(names[1], "three:33:300");
	assert_string_equal(names[2], ":0:0");
	assert_string_equal(names[3], "old:4:0");
	assert_int_equal(sites.unknown, 1);
	weft_wire_task_raw_fini(&raw);
	weft_wire_buf_fini(&rest);
	weft_wire_buf_fini(&b);
	weft_wire_sites_fini(&sites);
}

/* A trace in memory: its first Update has the site, its second only
 * names it.  Tasks and briefs, lean or not, name both; a seek back to
 * the second keeps the sites met. */
static void test_sites_trace_reader(void **state)
{
	Weft__V1__Hello hello = WEFT__V1__HELLO__INIT;
	weft_wire_buf_t b = { 0 };
	uint64_t second = 0;

	(void)state;
	assert_int_equal(weft_wire_header_append(&b, &hello, 0), 0);
	records_by_hand(&b, true);
	second = b.len;
	records_by_hand(&b, false);
	for (int lean = 0; lean < 2; lean++) {
		weft_trace_reader_t r;
		Weft__V1__Frame *f;
		size_t named = 0, brief_named = 0, seen = 0;
		int rc, round;

		weft_trace_reader_open_mem(&r, b.data, b.len);
		if (lean)
			assert_int_equal(weft_trace_reader_lean_updates(&r), 0);
		for (round = 0; round < 2; round++) {
			while ((rc = weft_trace_reader_next(&r, &f)) == 1) {
				weft_trace_tasks_t ti;
				weft_wire_task_brief_t br;
				const Weft__V1__Task *t;

				if (f->body_case !=
				    WEFT__V1__FRAME__BODY_UPDATE)
					continue;
				weft_trace_reader_tasks(&r, f, &ti);
				while ((t = weft_trace_tasks_next(&ti))) {
					seen++;
					if (t->id == 1) {
						assert_string_equal(t->name,
								    "three");
						assert_string_equal(t->file,
								    "3.c");
						assert_int_equal(t->state_size,
								 300);
						named++;
					}
				}
				weft_trace_reader_tasks(&r, f, &ti);
				while (weft_trace_tasks_next_brief(&ti, &br))
					if (br.id == 1 && br.name_len == 5 &&
					    !memcmp(br.name, "three", 5) &&
					    br.line == 33)
						brief_named++;
				weft_trace_reader_frame_free(&r, f);
			}
			assert_int_equal(rc, 0);
			/* Again from the second record: the site stays
			 * met. */
			if (round == 0)
				assert_int_equal(
					weft_trace_reader_seek(&r, second), 0);
		}
		assert_int_equal(seen, 9);
		assert_int_equal(named, 3);
		assert_int_equal(brief_named, 3);
		/* Task 2's site was never met: once a read, twice a pass
		 * (tasks and briefs), three records. */
		assert_int_equal(r.sites.unknown, 6);
		weft_trace_reader_close(&r);
	}
	/* A reader that starts at the second record never met the site:
	 * task 1 unnamed there. */
	{
		weft_trace_reader_t r;
		Weft__V1__Frame *f;
		weft_trace_tasks_t ti;
		const Weft__V1__Task *t;
		size_t unnamed = 0;

		weft_trace_reader_open_mem(&r, b.data, b.len);
		assert_int_equal(weft_trace_reader_next(&r, &f), 1);
		assert_int_equal(weft_trace_reader_seek(&r, second), 0);
		assert_int_equal(weft_trace_reader_next(&r, &f), 1);
		weft_trace_reader_tasks(&r, f, &ti);
		while ((t = weft_trace_tasks_next(&ti)))
			unnamed += t->id == 1 && !t->name[0];
		weft_trace_reader_frame_free(&r, f);
		assert_int_equal(unnamed, 1);
		weft_trace_reader_close(&r);
	}
	weft_wire_buf_fini(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sites_sent_once_per_stream),
		cmocka_unit_test(test_sites_looked_up_once_a_pass),
		cmocka_unit_test(test_sites_unknown_unnamed_counted),
		cmocka_unit_test(test_sites_raw_walk),
		cmocka_unit_test(test_sites_trace_reader),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
