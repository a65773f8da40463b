/* SPDX-License-Identifier: MIT */
/*
 * Updates read from their bytes (proto/src/update_raw.c), against
 * protobuf-c: Task records and Updates encoded by protobuf-c and by hand
 * (fields out of order, twice, unpacked buckets, over-long varints) read
 * raw must pack again, with protobuf-c, into the bytes protobuf-c's own
 * unpacking packs into; and what the raw reading does not know or is not
 * sure of (an unknown field, a wrong wire type, a histogram twice, a
 * varint too long or too wide, a cut length) it refuses, whether or not
 * protobuf-c would take it.  Then the trace reader's lean updates: a file
 * read with and without them gives the same tasks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "test_helpers.h"

#include "weft/trace_reader.h"
#include "weft/wire.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* A value of a random width: 0 often, small often, sometimes all 64 bits. */
static uint64_t rnd_val(void)
{
	switch (rnd() % 4) {
	case 0:
		return 0;
	case 1:
		return rnd() % 128;
	case 2:
		return rnd() % 100000;
	default:
		return rnd() >> (rnd() % 64);
	}
}

/* protobuf-c's packing of @m, into a malloc'ed buffer, length in *@n. */
static uint8_t *packed(const ProtobufCMessage *m, size_t *n)
{
	uint8_t *b;

	*n = protobuf_c_message_get_packed_size(m);
	b = malloc(*n + 1);
	assert_non_null(b);
	protobuf_c_message_pack(m, b);
	return b;
}

static void assert_same_packed(const ProtobufCMessage *a,
			       const ProtobufCMessage *b)
{
	size_t na, nb;
	uint8_t *x = packed(a, &na), *y = packed(b, &nb);

	assert_int_equal(na, nb);
	assert_memory_equal(x, y, na);
	free(x);
	free(y);
}

/*
 * @p, @n read raw into @t: 0 and the same as protobuf-c's unpacking, or
 * refused (-EAGAIN).  Returns what the raw reading returned.
 */
/* A brief string: @m's C string, in @len bytes at @s. */
static void brief_str_agrees(const char *want, const char *s, size_t len)
{
	assert_int_equal(len, strlen(want));
	if (len)
		assert_memory_equal(s, want, len);
}

/* weft_wire_task_brief_raw() of a record taken: protobuf-c's values. */
static void brief_agrees(const Weft__V1__Task *m, const uint8_t *p, size_t n)
{
	weft_wire_task_brief_t b;

	assert_int_equal(weft_wire_task_brief_raw(p, n, &b), 0);
	assert_int_equal(b.id, m->id);
	assert_int_equal(b.finished_ns, m->finished_ns);
	assert_int_equal(b.line, m->line);
	assert_int_equal(b.parked_line, m->parked_line);
	brief_str_agrees(m->name, b.name, b.name_len);
	brief_str_agrees(m->file, b.file, b.file_len);
	brief_str_agrees(m->parked_file, b.parked_file, b.parked_len);
}

static int task_agrees(weft_wire_task_raw_t *t, const uint8_t *p, size_t n)
{
	int rc = weft_wire_task_decode_raw(t, p, n);
	Weft__V1__Task *m;

	if (rc) {
		assert_int_equal(rc, -EAGAIN);
		return rc;
	}
	m = weft__v1__task__unpack(NULL, n, p);
	assert_non_null(m);
	assert_same_packed(&m->base, &t->msg.base);
	/* And the fields a reader uses, as C strings. */
	assert_int_equal(m->id, t->msg.id);
	assert_string_equal(m->name, t->msg.name);
	assert_string_equal(m->file, t->msg.file);
	assert_string_equal(m->parked_file, t->msg.parked_file);
	assert_int_equal(m->status, t->msg.status);
	assert_int_equal(!m->poll_hist, !t->msg.poll_hist);
	assert_int_equal(m->n_waited, t->msg.n_waited);
	brief_agrees(m, p, n);
	weft__v1__task__free_unpacked(m, NULL);
	return 0;
}

static const char *const names[] = { "", "accept", "handler::serve",
				     "a much longer task name, past 64 bytes "
				     "of it, so that the copies grow",
				     "n\xc3\xa4me" };

static void rnd_hist(Weft__V1__Histogram *h, uint32_t *b)
{
	weft__v1__histogram__init(h);
	h->n_buckets = rnd() % 8 ? rnd() % 70 : 0;
	for (size_t i = 0; i < h->n_buckets; i++)
		b[i] = (uint32_t)rnd_val();
	h->buckets = b;
	h->count = rnd_val();
	h->sum_ns = rnd_val();
	h->max_ns = rnd_val();
	h->outliers = rnd_val();
}

/* A random Task, as protobuf-c packs it. */
static uint8_t *rnd_task(size_t *n)
{
	static uint32_t b1[70], b2[70];
	static Weft__V1__Histogram h1, h2;
	static Weft__V1__TaskWait w[5], *wp[5];
	Weft__V1__Task m;

	weft__v1__task__init(&m);
	m.id = rnd_val();
	m.parent = rnd_val();
	m.name = (char *)names[rnd() % 5];
	m.file = (char *)names[rnd() % 5];
	m.line = (uint32_t)rnd_val();
	m.state_size = (uint32_t)rnd_val();
	m.kind = (uint32_t)rnd_val();
	m.state = (uint32_t)rnd_val();
	m.last_worker = (uint32_t)rnd_val();
	m.status = (int32_t)(uint32_t)rnd_val();
	m.spawned_ns = rnd_val();
	m.finished_ns = rnd_val();
	m.polls = rnd_val();
	m.busy_ns = rnd_val();
	m.scheduled_ns = rnd_val();
	m.idle_ns = rnd_val();
	m.wakes = rnd_val();
	m.self_wakes = rnd_val();
	m.waker_clones = rnd_val();
	m.waker_drops = rnd_val();
	m.max_poll_ns = rnd_val();
	m.warnings = (uint32_t)rnd_val();
	m.locks_held = (uint32_t)rnd_val();
	if (rnd() % 2) {
		rnd_hist(&h1, b1);
		m.poll_hist = &h1;
	}
	if (rnd() % 2) {
		rnd_hist(&h2, b2);
		m.sched_hist = &h2;
	}
	m.parked_file = (char *)names[rnd() % 5];
	m.parked_line = (uint32_t)rnd_val();
	m.idle_since_ns = rnd_val();
	m.waiting_on = rnd_val();
	m.waiting_since_ns = rnd_val();
	m.waiting_op = (uint32_t)rnd_val();
	m.n_waited = rnd() % 6;
	for (size_t i = 0; i < m.n_waited; i++) {
		weft__v1__task_wait__init(&w[i]);
		w[i].resource = rnd_val();
		w[i].total_ns = rnd_val();
		w[i].waits = (uint32_t)rnd_val();
		wp[i] = &w[i];
	}
	m.waited = wp;
	return packed(&m.base, n);
}

/* Tasks as protobuf-c writes them: every one read raw, the same. */
static void test_task_random(void **state)
{
	weft_wire_task_raw_t t = { 0 };

	(void)state;
	for (int i = 0; i < 5000; i++) {
		size_t n;
		uint8_t *p = rnd_task(&n);

		assert_int_equal(task_agrees(&t, p, n), 0);
		free(p);
	}
	weft_wire_task_raw_fini(&t);
}

/* ------------------------------------------------------------ by hand */

struct enc {
	uint8_t b[512];
	size_t n;
};

static void e_varint(struct enc *e, uint64_t v)
{
	while (v >= 0x80) {
		e->b[e->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	e->b[e->n++] = (uint8_t)v;
}

static void e_tag(struct enc *e, unsigned field, unsigned wt)
{
	e_varint(e, (uint64_t)field << 3 | wt);
}

static void e_uint(struct enc *e, unsigned field, uint64_t v)
{
	e_tag(e, field, 0);
	e_varint(e, v);
}

static void e_bytes(struct enc *e, unsigned field, const void *p, size_t n)
{
	e_tag(e, field, 2);
	e_varint(e, n);
	memcpy(e->b + e->n, p, n);
	e->n += n;
}

static void e_raw(struct enc *e, const void *p, size_t n)
{
	memcpy(e->b + e->n, p, n);
	e->n += n;
}

/* Layouts protobuf-c takes that its packer never writes: the same. */
static void test_task_by_hand(void **state)
{
	weft_wire_task_raw_t t = { 0 };
	struct enc e = { .n = 0 }, h = { .n = 0 }, w = { .n = 0 };

	(void)state;
	/* Out of order, a scalar and a string twice (the last stands),
	 * a varint longer than it needs, an empty string. */
	e_uint(&e, 27, 12);
	e_bytes(&e, 3, "first", 5);
	e_uint(&e, 1, 77);
	e_bytes(&e, 3, "second", 6);
	e_uint(&e, 1, 78);
	e_raw(&e, "\x08\xd0\x80\x80\x80\x80\x00", 7); /* id 80, 7 bytes */
	e_bytes(&e, 4, "", 0);
	e_uint(&e, 10, 3); /* status -2 */
	/* Buckets packed, then unpacked, then packed again. */
	e_bytes(&h, 1, "\x01\x02\x80\x01", 4);
	e_uint(&h, 1, 5);
	e_uint(&h, 2, 9);
	e_bytes(&h, 1, "\x07", 1);
	e_bytes(&e, 24, h.b, h.n);
	e_bytes(&e, 25, "", 0); /* an empty histogram, present */
	e_uint(&w, 3, 4);
	e_uint(&w, 1, 99);
	e_bytes(&e, 32, w.b, w.n);
	e_bytes(&e, 32, w.b, w.n);
	assert_int_equal(task_agrees(&t, e.b, e.n), 0);
	assert_int_equal(t.msg.id, 80);
	assert_string_equal(t.msg.name, "second");
	assert_string_equal(t.msg.file, "");
	assert_int_equal(t.msg.status, -2);
	assert_int_equal(t.msg.poll_hist->n_buckets, 5);
	assert_int_equal(t.msg.poll_hist->buckets[2], 128);
	assert_int_equal(t.msg.poll_hist->buckets[4], 7);
	assert_non_null(t.msg.sched_hist);
	assert_int_equal(t.msg.sched_hist->n_buckets, 0);
	assert_int_equal(t.msg.n_waited, 2);
	assert_int_equal(t.msg.waited[1]->resource, 99);
	/* Empty: every field its default. */
	assert_int_equal(task_agrees(&t, e.b, 0), 0);
	assert_string_equal(t.msg.name, "");
	assert_null(t.msg.poll_hist);
	/* Strings with a NUL inside, and bytes that are not UTF-8:
	 * whatever protobuf-c does, the raw reading agrees or refuses. */
	e.n = 0;
	e_bytes(&e, 3, "a\0b", 3);
	e_bytes(&e, 26, "\xff\xfe", 2);
	task_agrees(&t, e.b, e.n);
	weft_wire_task_raw_fini(&t);
}

/* Bytes the raw reading refuses; @pbc: whether protobuf-c takes them. */
static void refused(const struct enc *e, bool pbc)
{
	weft_wire_task_raw_t t = { 0 };
	Weft__V1__Task *m;

	assert_int_equal(weft_wire_task_decode_raw(&t, e->b, e->n), -EAGAIN);
	m = weft__v1__task__unpack(NULL, e->n, e->b);
	assert_int_equal(m != NULL, pbc);
	if (m)
		weft__v1__task__free_unpacked(m, NULL);
	weft_wire_task_raw_fini(&t);
}

static void test_task_refused(void **state)
{
	struct enc e, h;

	(void)state;
	/* Taken by protobuf-c, refused here (it would keep the unknown
	 * field, merge the histograms, cut the values). */
	e.n = 0;
	e_uint(&e, 1, 5);
	e_uint(&e, 40, 1); /* unknown */
	refused(&e, true);
	e.n = 0;
	h.n = 0;
	e_uint(&h, 2, 1);
	e_bytes(&e, 24, h.b, h.n);
	e_bytes(&e, 24, h.b, h.n); /* twice */
	refused(&e, true);
	e.n = 0;
	e_uint(&e, 5, (uint64_t)1 << 32); /* uint32 over 32 bits */
	refused(&e, true);
	e.n = 0;
	e_uint(&e, 10, (uint64_t)1 << 33); /* sint32 over 32 bits */
	refused(&e, true);
	/* Not taken by protobuf-c either. */
	e.n = 0;
	e_bytes(&e, 1, "xy", 2); /* id, length-delimited */
	refused(&e, false);
	e.n = 0;
	e_raw(&e, "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12);
	refused(&e, false); /* an 11-byte varint */
	e.n = 0;
	e_raw(&e, "\x08\xff\xff", 3); /* cut in a varint */
	refused(&e, false);
	e.n = 0;
	e_raw(&e, "\x1a\x05" "ab", 4); /* a string past the end */
	refused(&e, false);
	e.n = 0;
	e_raw(&e, "\x0b\x0c", 2); /* field 1 as a group */
	refused(&e, false);
	e.n = 0;
	h.n = 0;
	e_raw(&h, "\x0a\x02\x01\x81", 4); /* packed buckets cut in one */
	e_bytes(&e, 24, h.b, h.n);
	refused(&e, false);
}

/* ------------------------------------------------------------ updates */

/*
 * @p, @n split raw: the rest unpacked and the tasks read one by one
 * must be protobuf-c's unpacking of the whole.  Returns what the split
 * returned.
 */
static int update_agrees(const uint8_t *p, size_t n)
{
	static const uint8_t none[1];
	weft_wire_task_raw_t t = { 0 };
	weft_wire_buf_t rest = { 0 };
	Weft__V1__Update *whole, *r;
	const uint8_t *at = p, *tb;
	size_t ntasks, tl, i = 0;
	int rc = weft_wire_update_split_raw(p, n, &t, &rest, &ntasks);

	if (rc) {
		assert_int_equal(rc, -EAGAIN);
		goto out;
	}
	whole = weft__v1__update__unpack(NULL, n, p);
	r = weft__v1__update__unpack(NULL, rest.len, rest.len ? rest.data : none);
	/* The rest refused by protobuf-c: the whole is too. */
	assert_int_equal(!whole, !r);
	if (!whole) {
		rc = 1;
		goto out;
	}
	assert_int_equal(whole->n_tasks, ntasks);
	while ((tb = weft_wire_update_next_task_raw(&at, p + n, &tl))) {
		assert_true(i < ntasks);
		assert_int_equal(weft_wire_task_decode_raw(&t, tb, tl), 0);
		assert_same_packed(&whole->tasks[i++]->base, &t.msg.base);
	}
	assert_int_equal(i, ntasks);
	whole->n_tasks = 0;
	assert_same_packed(&whole->base, &r->base);
	whole->n_tasks = ntasks;
	weft__v1__update__free_unpacked(whole, NULL);
	weft__v1__update__free_unpacked(r, NULL);
out:
	weft_wire_task_raw_fini(&t);
	weft_wire_buf_fini(&rest);
	return rc;
}

/* An Update with every kind of field, tasks among them, in any order. */
static void test_update_split(void **state)
{
	static uint8_t buf[1 << 16];

	(void)state;
	for (int round = 0; round < 300; round++) {
		size_t n = 0, len;
		uint8_t *p;
		Weft__V1__Stats st;
		Weft__V1__Worker wk;
		Weft__V1__Warning wn;
		Weft__V1__Resource rs;
		uint64_t ids[3] = { 1, 2, (uint64_t)1 << 40 };
		struct enc e;

		weft__v1__stats__init(&st);
		st.now_ns = rnd_val();
		st.clock = "tsc";
		weft__v1__worker__init(&wk);
		wk.index = (uint32_t)(rnd() % 8);
		wk.busy_ratio = 0.5;
		wk.n_stolen_from = 3;
		wk.stolen_from = ids;
		weft__v1__warning__init(&wn);
		wn.detail = "slow";
		wn.at_ns = rnd_val();
		weft__v1__resource__init(&rs);
		rs.id = rnd_val();
		rs.name = "cache";
		rs.n_holders = 2;
		rs.holders = ids;
		for (int f = 0; f < 12; f++) {
			const ProtobufCMessage *m = NULL;
			unsigned field = 0;

			switch (rnd() % 7) {
			case 0:
			case 1:
			case 2:
				p = rnd_task(&len);
				e.n = 0;
				e_tag(&e, 2, 2);
				e_varint(&e, len);
				memcpy(buf + n, e.b, e.n);
				memcpy(buf + n + e.n, p, len);
				n += e.n + len;
				free(p);
				continue;
			case 3:
				m = &wk.base, field = 3;
				break;
			case 4:
				m = &wn.base, field = 4;
				break;
			case 5:
				m = &rs.base, field = 10;
				break;
			default:
				e.n = 0;
				if (rnd() % 2)
					e_uint(&e, 6, rnd_val()); /* new_tasks */
				else
					e_uint(&e, 5, 1); /* full */
				memcpy(buf + n, e.b, e.n);
				n += e.n;
				continue;
			}
			p = packed(m, &len);
			e.n = 0;
			e_tag(&e, field, 2);
			e_varint(&e, len);
			memcpy(buf + n, e.b, e.n);
			memcpy(buf + n + e.n, p, len);
			n += e.n + len;
			free(p);
		}
		if (round % 2) { /* stats, once, anywhere: at the end */
			size_t sl;

			p = packed(&st.base, &sl);
			e.n = 0;
			e_tag(&e, 1, 2);
			e_varint(&e, sl);
			memcpy(buf + n, e.b, e.n);
			memcpy(buf + n + e.n, p, sl);
			n += e.n + sl;
			free(p);
		}
		assert_int_equal(update_agrees(buf, n), 0);
	}
}

static void test_update_refused(void **state)
{
	struct enc e, t;

	(void)state;
	/* A task refused: the Update is. */
	t.n = 0;
	e_uint(&t, 1, 5);
	e_uint(&t, 40, 1);
	e.n = 0;
	e_bytes(&e, 2, t.b, t.n);
	assert_int_equal(update_agrees(e.b, e.n), -EAGAIN);
	/* Tasks as a varint. */
	e.n = 0;
	e_uint(&e, 2, 5);
	assert_int_equal(update_agrees(e.b, e.n), -EAGAIN);
	/* A field cut short, a group, a tag of six bytes. */
	e.n = 0;
	e_raw(&e, "\x0a\x09\x08", 3);
	assert_int_equal(update_agrees(e.b, e.n), -EAGAIN);
	e.n = 0;
	e_raw(&e, "\x5b\x5c", 2);
	assert_int_equal(update_agrees(e.b, e.n), -EAGAIN);
	e.n = 0;
	e_raw(&e, "\x90\x80\x80\x80\x80\x00\x01", 7);
	assert_int_equal(update_agrees(e.b, e.n), -EAGAIN);
	/* Other fields go to protobuf-c as they stand: a Stats with a
	 * wrong wire type inside is split, then refused by protobuf-c,
	 * the rest as the whole (1). */
	e.n = 0;
	e_bytes(&e, 1, "\x32\x02\x08\x01", 4);
	e_bytes(&e, 2, "\x08\x01", 2);
	assert_int_equal(update_agrees(e.b, e.n), 1);
	/* Unknown fields outside the tasks go to protobuf-c: taken. */
	e.n = 0;
	e_uint(&e, 99, 7);
	e_bytes(&e, 2, "\x08\x01", 2);
	e_bytes(&e, 98, "zz", 2);
	assert_int_equal(update_agrees(e.b, e.n), 0);
}

/* ------------------------------------------------------------ reader */

/* A file (header, Updates, a batch) read with and without lean updates. */
static void test_reader_lean_updates(void **state)
{
	weft_wire_buf_t b = { 0 };
	Weft__V1__Frame f, *pf, *lf;
	Weft__V1__FileHeader h;
	Weft__V1__Update u;
	Weft__V1__Task tk[40], *tp[40];
	weft_trace_reader_t p, l;
	int rp, rl, updates = 0;

	(void)state;
	weft__v1__file_header__init(&h);
	h.magic = WEFT_TRACE_MAGIC;
	h.format_version = WEFT_TRACE_FORMAT_VERSION;
	weft__v1__frame__init(&f);
	f.body_case = WEFT__V1__FRAME__BODY_HEADER;
	f.header = &h;
	assert_int_equal(weft_wire_record_append(&b, &f), 0);
	for (int k = 0; k < 6; k++) {
		weft__v1__update__init(&u);
		u.n_tasks = (size_t)k * 8;
		for (size_t i = 0; i < u.n_tasks; i++) {
			weft__v1__task__init(&tk[i]);
			tk[i].id = 100 * (uint64_t)k + i;
			tk[i].name = (char *)names[i % 5];
			tk[i].parked_file = (char *)names[(i + 1) % 5];
			tk[i].parked_line = (uint32_t)i;
			tp[i] = &tk[i];
		}
		u.tasks = tp;
		u.full = k == 2;
		f.body_case = WEFT__V1__FRAME__BODY_UPDATE;
		f.update = &u;
		assert_int_equal(weft_wire_record_append(&b, &f), 0);
	}
	weft_trace_reader_open_mem(&p, b.data, b.len);
	weft_trace_reader_open_mem(&l, b.data, b.len);
	assert_int_equal(weft_trace_reader_lean_updates(&l), 0);
	for (;;) {
		weft_trace_tasks_t ip, il;
		const Weft__V1__Task *a, *c;

		rp = weft_trace_reader_next(&p, &pf);
		rl = weft_trace_reader_next(&l, &lf);
		assert_int_equal(rp, rl);
		if (rp != 1)
			break;
		assert_int_equal(pf->body_case, lf->body_case);
		if (pf->body_case == WEFT__V1__FRAME__BODY_UPDATE) {
			updates++;
			/* Read lean: no tasks[], the same tasks read. */
			assert_int_equal(lf->update->n_tasks, 0);
			assert_int_equal(lf->update->full, pf->update->full);
			weft_trace_reader_tasks(&p, pf, &ip);
			weft_trace_reader_tasks(&l, lf, &il);
			while ((a = weft_trace_tasks_next(&ip))) {
				c = weft_trace_tasks_next(&il);
				assert_non_null(c);
				assert_same_packed(&a->base, &c->base);
			}
			assert_null(weft_trace_tasks_next(&il));
		}
		weft_trace_reader_frame_free(&p, pf);
		weft_trace_reader_frame_free(&l, lf);
	}
	assert_int_equal(updates, 6);
	weft_trace_reader_close(&p);
	weft_trace_reader_close(&l);
	weft_wire_buf_fini(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_task_random),
		cmocka_unit_test(test_task_by_hand),
		cmocka_unit_test(test_task_refused),
		cmocka_unit_test(test_update_split),
		cmocka_unit_test(test_update_refused),
		cmocka_unit_test(test_reader_lean_updates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
