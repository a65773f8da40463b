/* SPDX-License-Identifier: MIT */
/*
 * Seeks ahead of the index pass (console/replay_ahead.c, issue 21) on
 * real traces written by weft-bench-gentrace (argv[1]; 24 MB, a
 * checkpoint mark every 2 MiB or more: 10 of them), first opens with no
 * side index (WEFT_CONSOLE_INDEX=0): the marks are found (the chain,
 * every one the file holds), a seek to 90% restores from one without
 * indexing on, and the model there has the live tasks (ids, states,
 * names) the exact replay (the whole file indexed) has at that time; a
 * file cut inside its last checkpoint uses the one before; bytes that
 * look like a mark (a copy made valid for its own offset, planted after
 * the last one) are not taken for one; a file with no marks seeks as
 * before; once the marks are turned off (--once), a seek is the exact
 * replay's again.  The mark's own checks (ckpt.c) at the end.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "console.h"
#include "replay_internal.h"

#include "weft/wire.h"

static const char *gentrace;
static char dir[256], trace[320], plain[320], work[320];

static void gen(const char *path, unsigned ckpt_mb)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd),
		 "'%s' '%s' --bytes 24M --rate 50000 --seed 3 "
		 "--checkpoint-mb %u --quiet >/dev/null",
		 gentrace, path, ckpt_mb);
	assert_int_equal(system(cmd), 0);
}

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b;
	long len;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	rewind(f);
	b = malloc((size_t)len + 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	*n = (size_t)len;
	return b;
}

static void spill(const char *path, const uint8_t *b, size_t n)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

/* The marks in the file's bytes, by a plain scan (offsets, up to @max). */
static size_t marks_in(const uint8_t *b, size_t n, weft_wire_ckpt_t *out,
		       size_t max)
{
	size_t k = 0;

	for (size_t at = 0; at + WEFT_WIRE_CKPT_LEN <= n && k < max;) {
		const uint8_t *p = weft_wire_ckpt_find(b + at, n - at);

		if (!p)
			break;
		at = (size_t)(p - b);
		if (weft_wire_ckpt_get(p, n - at, at, &out[k]))
			k++;
		at++;
	}
	return k;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "%s/weft-ahead-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(dir));
	snprintf(trace, sizeof(trace), "%s/t.weft", dir);
	snprintf(plain, sizeof(plain), "%s/plain.weft", dir);
	snprintf(work, sizeof(work), "%s/w.weft", dir);
	gen(trace, 2);
	gen(plain, 0);
	setenv("WEFT_CONSOLE_INDEX", "0", 1);
	return 0;
}

static int teardown(void **state)
{
	char cmd[512];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	unsetenv("WEFT_CONSOLE_INDEX");
	return 0;
}

/* A first open: its first record indexed, nothing more. */
static void open_first(con_replay_t *r, const char *path, con_model_t *m)
{
	assert_int_equal(con_replay_open_lazy(r, path, 0), 0);
	con_model_init(m, "t");
	m->mode = CON_MODE_REPLAY;
}

/* @pos of the whole file's time span @f (0..1), from a whole index. */
static uint64_t time_at(const char *path, double f)
{
	con_replay_t r;
	uint64_t t;

	assert_int_equal(con_replay_open(&r, path), 0);
	t = r.first_ns + (uint64_t)(f * (double)(r.last_ns - r.first_ns));
	con_replay_close(&r);
	return t;
}

static size_t live_tasks(const con_model_t *m)
{
	size_t n = 0;

	for (size_t i = 0; i < m->ntasks; i++)
		n += !m->tasks[i]->finished_ns;
	return n;
}

/* Every live task of @want is in @got, the same state and name, and
 * @got has no other live ones. */
static void assert_same_live(const con_model_t *got, const con_model_t *want)
{
	size_t n = 0;

	for (size_t i = 0; i < want->ntasks; i++) {
		const con_task_t *t = want->tasks[i], *g;

		if (t->finished_ns)
			continue;
		g = con_model_task(got, t->id);
		assert_non_null(g);
		assert_null(g->finished_ns ? g : NULL);
		assert_int_equal(g->state, t->state);
		assert_string_equal(g->name, t->name);
		assert_true(*g->name); /* named: a full update names all */
		n++;
	}
	assert_true(n > 100);
	assert_int_equal(live_tasks(got), n);
	assert_int_equal(got->stats.live_tasks, want->stats.live_tasks);
	assert_int_equal(got->now_ns, want->now_ns);
}

/* The marks are found (all of them, by the chain); a seek to 90% is
 * served from one, the index pass not moved, and the model matches the
 * exact replay's live tasks. */
static void test_console_ahead_seek_matches_full_pass(void **state)
{
	weft_wire_ckpt_t mk[64];
	con_replay_t r, x;
	con_model_t m, mx;
	size_t len, nmk, n0;
	uint8_t *b = slurp(trace, &len);
	uint64_t pos = time_at(trace, 0.9), from, end;

	(void)state;
	nmk = marks_in(b, len, mk, 64);
	assert_int_equal(nmk, 10);
	open_first(&r, trace, &m);
	assert_false(r.indexed);
	assert_non_null(r.ahead);
	/* Those beyond what the open indexed: the chain back to the first
	 * (the file's first mark, at its start, is indexed already but the
	 * chain goes on to it). */
	assert_int_equal(r.ahead->nmk, nmk);
	for (size_t i = 0; i < nmk; i++)
		assert_int_equal(r.ahead->mk[i].off, mk[i].offset);
	assert_true(r.ahead->end_ns >= pos);
	n0 = r.n;
	con_replay_seek(&r, &m, pos);
	assert_true(con_replay_ahead(&r, &from, &end));
	assert_true(from <= pos && from >= mk[nmk - 2].time_ns);
	assert_int_equal(r.n, n0); /* the index pass did not run */
	assert_false(r.indexed);

	assert_int_equal(con_replay_open(&x, trace), 0);
	con_model_init(&mx, "x");
	mx.mode = CON_MODE_REPLAY;
	con_replay_seek(&x, &mx, pos);
	assert_same_live(&m, &mx);

	/* Played on a little (read on, no mark between), still the same. */
	con_replay_seek(&r, &m, pos + 20000000);
	con_replay_seek(&x, &mx, pos + 20000000);
	assert_true(con_replay_ahead(&r, &from, &end));
	assert_same_live(&m, &mx);

	/* Once the index covers it, the exact path takes over: the same
	 * model as the whole replay's, finished tasks too. */
	con_replay_index(&r, UINT64_MAX);
	con_replay_seek(&r, &m, pos);
	con_replay_seek(&x, &mx, pos);
	assert_false(con_replay_ahead(&r, &from, &end));
	assert_int_equal(m.ntasks, mx.ntasks);
	assert_int_equal(m.updates, mx.updates);
	assert_int_equal(m.events, mx.events);

	con_model_fini(&m);
	con_model_fini(&mx);
	con_replay_close(&r);
	con_replay_close(&x);
	free(b);
}

/* Cut inside the last checkpoint's full update: that mark is not used
 * (its update is not whole), the one before it is, and a seek to the end
 * still reads on to what the file holds. */
static void test_console_ahead_cut_mid_checkpoint(void **state)
{
	weft_wire_ckpt_t mk[64];
	con_replay_t r;
	con_model_t m;
	size_t len, nmk;
	uint8_t *b = slurp(trace, &len);
	uint64_t cut, from, end;

	(void)state;
	nmk = marks_in(b, len, mk, 64);
	assert_true(nmk >= 3);
	cut = mk[nmk - 1].offset + WEFT_WIRE_CKPT_LEN +
	      mk[nmk - 1].full_bytes / 2;
	spill(work, b, (size_t)cut);
	open_first(&r, work, &m);
	assert_non_null(r.ahead);
	assert_int_equal(r.ahead->nmk, nmk - 1);
	assert_int_equal(r.ahead->mk[nmk - 2].off, mk[nmk - 2].offset);
	con_replay_seek(&r, &m, mk[nmk - 1].time_ns + 1000);
	assert_true(con_replay_ahead(&r, &from, &end));
	assert_int_equal(from, mk[nmk - 2].time_ns);
	assert_true(r.ahead->at_end);
	assert_true(live_tasks(&m) > 100);
	con_model_fini(&m);
	con_replay_close(&r);
	free(b);
}

/* A copy of the last mark, made valid for a place after it (inside an
 * event batch: its own offset, the check redone, the previous mark the
 * real last one), is not taken: nothing whole follows it. */
static void test_console_ahead_fake_mark_ignored(void **state)
{
	weft_wire_ckpt_t mk[64], fake, got;
	con_replay_t r;
	con_model_t m;
	size_t len, nmk, at;
	uint8_t *b = slurp(trace, &len);

	(void)state;
	nmk = marks_in(b, len, mk, 64);
	assert_true(nmk >= 2);
	at = (size_t)(mk[nmk - 1].offset + WEFT_WIRE_CKPT_LEN +
		      mk[nmk - 1].full_bytes);
	at += (len - at) / 2;
	fake = mk[nmk - 1];
	fake.offset = at;
	fake.prev = mk[nmk - 1].offset;
	fake.time_ns += 1;
	fake.full_bytes = 4096;
	weft_wire_ckpt_put(b + at, &fake);
	/* It passes the mark's own checks ... */
	assert_true(weft_wire_ckpt_get(b + at, len - at, at, &got));
	spill(work, b, len);
	/* ... not the reader's. */
	open_first(&r, work, &m);
	assert_non_null(r.ahead);
	assert_int_equal(r.ahead->nmk, nmk);
	assert_int_equal(r.ahead->mk[nmk - 1].off, mk[nmk - 1].offset);
	con_model_fini(&m);
	con_replay_close(&r);
	free(b);
}

/* A trace with no marks: no read-ahead; a seek waits for the index, as
 * before. */
static void test_console_ahead_none_without_marks(void **state)
{
	con_replay_t r;
	con_model_t m;
	uint64_t from, end, pos = time_at(plain, 0.9);

	(void)state;
	open_first(&r, plain, &m);
	assert_null(r.ahead);
	con_replay_seek(&r, &m, pos);
	assert_false(con_replay_ahead(&r, &from, &end));
	assert_true(r.n > 0 && r.rec[r.n - 1].at > pos);
	con_model_fini(&m);
	con_replay_close(&r);
}

/* con_replay_ahead_off() (--once): a model from a mark is reset, and the
 * next seek is the exact replay's, finished tasks and warnings too, not
 * one from a mark again. */
static void test_console_ahead_off_exact(void **state)
{
	con_replay_t r, x;
	con_model_t m, mx;
	uint64_t from, end, pos = time_at(trace, 0.9);

	(void)state;
	open_first(&r, trace, &m);
	con_replay_seek(&r, &m, pos);
	assert_true(con_replay_ahead(&r, &from, &end));
	con_replay_ahead_off(&r, &m);
	assert_null(r.ahead);
	assert_false(con_replay_ahead(&r, &from, &end));
	assert_int_equal(m.ntasks, 0);
	con_replay_seek(&r, &m, pos);
	assert_false(con_replay_ahead(&r, &from, &end));

	assert_int_equal(con_replay_open(&x, trace), 0);
	con_model_init(&mx, "x");
	mx.mode = CON_MODE_REPLAY;
	con_replay_seek(&x, &mx, pos);
	assert_same_live(&m, &mx);
	assert_int_equal(m.ntasks, mx.ntasks);
	assert_int_equal(m.nwarnings, mx.nwarnings);
	assert_int_equal(m.updates, mx.updates);
	assert_int_equal(m.events, mx.events);

	con_model_fini(&m);
	con_model_fini(&mx);
	con_replay_close(&r);
	con_replay_close(&x);
}

/* The mark's checks: its own offset, its check, its tags. */
static void test_console_ahead_mark_checks(void **state)
{
	weft_wire_ckpt_t c = { .time_ns = 5,
			       .offset = 1000,
			       .prev = 10,
			       .full_bytes = 77 },
			 got;
	uint8_t b[WEFT_WIRE_CKPT_LEN + 8] = { 0 };

	(void)state;
	weft_wire_ckpt_put(b + 3, &c);
	assert_ptr_equal(weft_wire_ckpt_find(b, sizeof(b)), b + 3);
	assert_true(weft_wire_ckpt_get(b + 3, WEFT_WIRE_CKPT_LEN, 1000, &got));
	assert_int_equal(got.time_ns, 5);
	assert_int_equal(got.prev, 10);
	assert_int_equal(got.full_bytes, 77);
	/* Elsewhere than where it says it is. */
	assert_false(weft_wire_ckpt_get(b + 3, WEFT_WIRE_CKPT_LEN, 1003, &got));
	/* Cut short. */
	assert_false(
		weft_wire_ckpt_get(b + 3, WEFT_WIRE_CKPT_LEN - 1, 1000, &got));
	/* Any byte changed. */
	for (size_t i = 0; i < WEFT_WIRE_CKPT_LEN; i++) {
		b[3 + i] ^= 0x10;
		assert_false(weft_wire_ckpt_get(b + 3, WEFT_WIRE_CKPT_LEN, 1000,
						&got));
		b[3 + i] ^= 0x10;
	}
	/* A previous mark that is not before it. */
	c.prev = 990;
	weft_wire_ckpt_put(b + 3, &c);
	assert_false(weft_wire_ckpt_get(b + 3, WEFT_WIRE_CKPT_LEN, 1000, &got));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_console_ahead_mark_checks),
		cmocka_unit_test(test_console_ahead_seek_matches_full_pass),
		cmocka_unit_test(test_console_ahead_cut_mid_checkpoint),
		cmocka_unit_test(test_console_ahead_fake_mark_ignored),
		cmocka_unit_test(test_console_ahead_none_without_marks),
		cmocka_unit_test(test_console_ahead_off_exact),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s WEFT_BENCH_GENTRACE\n", argv[0]);
		return 2;
	}
	gentrace = argv[1];
	return cmocka_run_group_tests(tests, setup, teardown);
}
