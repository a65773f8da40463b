/* SPDX-License-Identifier: MIT */
/*
 * The WEFT_* knobs (runtime/src/knob.c): what each kind takes, and the one
 * line a bad value prints (captured from the real stderr).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "knob.h"

#define VAR "WEFT_TEST_KNOB"

static const weft__knob_t ring = {
	.name = VAR,
	.kind = WEFT__KNOB_COUNT,
	.unit = "events",
	.def = 1u << 18,
	.min = 64,
	.max = 1u << 26,
};

static const weft__knob_t poll_ms = {
	.name = VAR,
	.kind = WEFT__KNOB_TIME,
	.unit = "ms",
	.def = 10,
	.min = 1,
	.max = 3600 * 1000,
};

static const weft__knob_t mb = {
	.name = VAR,
	.kind = WEFT__KNOB_SIZE,
	.unit = "MB",
	.def = 0,
	.min = 0,
	.max = 1u << 20,
};

/* stderr, redirected to a file while a knob is read. */
static char said[512];
static int saved_fd = -1;
static FILE *cap;

static void capture(void)
{
	fflush(stderr);
	cap = tmpfile();
	assert_non_null(cap);
	saved_fd = dup(2);
	assert_true(saved_fd >= 0);
	assert_true(dup2(fileno(cap), 2) >= 0);
}

static const char *captured(void)
{
	size_t n;

	fflush(stderr);
	assert_true(dup2(saved_fd, 2) >= 0);
	close(saved_fd);
	rewind(cap);
	n = fread(said, 1, sizeof(said) - 1, cap);
	said[n] = '\0';
	fclose(cap);
	return said;
}

/* The knob read with VAR=@value; what it printed in said[]. */
static uint64_t read_with(const weft__knob_t *k, const char *value)
{
	uint64_t v;

	if (value)
		assert_int_equal(setenv(VAR, value, 1), 0);
	else
		assert_int_equal(unsetenv(VAR), 0);
	capture();
	v = weft__knob(k);
	captured();
	unsetenv(VAR);
	return v;
}

static void test_knob_count(void **state)
{
	(void)state;
	assert_int_equal(read_with(&ring, NULL), 1u << 18);
	assert_string_equal(said, "");
	assert_int_equal(read_with(&ring, ""), 1u << 18);
	assert_string_equal(said, "");
	assert_int_equal(read_with(&ring, "4096"), 4096);
	assert_string_equal(said, "");
	assert_int_equal(read_with(&ring, "1k"), 1024);
	assert_int_equal(read_with(&ring, "4M"), 4u << 20);
	assert_string_equal(said, "");
	/* The two: both said, not ignored. */
	assert_int_equal(read_with(&ring, "16"), 1u << 18);
	assert_string_equal(said, "weft: " VAR "=16: out of range (64 to 64m "
				  "events); using 256k\n");
	assert_int_equal(read_with(&ring, "1kb"), 1u << 18);
	assert_string_equal(said, "weft: " VAR "=1kb: not a whole number, or "
				  "with k or m (64 to 64m events); using "
				  "256k\n");
	assert_int_equal(read_with(&ring, "-1"), 1u << 18);
	assert_non_null(strstr(said, "=-1: not a whole number"));
	assert_int_equal(read_with(&ring, "99999999999999999999999"), 1u << 18);
	assert_non_null(strstr(said, ": out of range"));
	assert_int_equal(read_with(&ring, "99999999999999999m"), 1u << 18);
	assert_non_null(strstr(said, ": out of range"));
}

static void test_knob_time(void **state)
{
	(void)state;
	assert_int_equal(read_with(&poll_ms, NULL), 10000000);
	assert_int_equal(read_with(&poll_ms, "200"), 200000000);
	assert_int_equal(read_with(&poll_ms, "1500us"), 1500000);
	assert_int_equal(read_with(&poll_ms, "2s"), 2000000000);
	assert_string_equal(said, "");
	assert_int_equal(read_with(&poll_ms, "500us"), 10000000);
	assert_string_equal(said, "weft: " VAR "=500us: out of range (1 ms to "
				  "3600000 ms); using 10 ms\n");
	assert_int_equal(read_with(&poll_ms, "0"), 10000000);
	assert_non_null(strstr(said, ": out of range"));
	assert_int_equal(read_with(&poll_ms, "10 ms"), 10000000);
	assert_string_equal(said, "weft: " VAR "=10 ms: not a whole number, "
				  "or with ns, us, ms or s (1 ms to 3600000 "
				  "ms); using 10 ms\n");
	assert_int_equal(read_with(&poll_ms, "fast"), 10000000);
	assert_non_null(strstr(said, "=fast: not a whole number"));
}

static void test_knob_size(void **state)
{
	(void)state;
	assert_int_equal(read_with(&mb, "64"), 64u << 20);
	assert_int_equal(read_with(&mb, "512k"), 512u << 10);
	assert_int_equal(read_with(&mb, "2g"), 2ull << 30);
	assert_int_equal(read_with(&mb, "0"), 0);
	assert_string_equal(said, "");
	assert_int_equal(read_with(&mb, "2t"), 0);
	assert_string_equal(said, "weft: " VAR "=2t: not a whole number of MB, "
				  "or with k, m or g (0 MB to 1048576 MB); "
				  "using 0 MB\n");
}

static void test_knob_bool_and_choice(void **state)
{
	static const char *const clocks[] = { "tsc", "monotonic", NULL };
	const char *on[] = { "1", "on", "ON", "true", "yes" };
	const char *off[] = { "0", "off", "False", "no" };
	bool b;
	int c;

	(void)state;

	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
		setenv(VAR, on[i], 1);
		assert_true(weft__knob_bool(VAR, false));
	}
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
		setenv(VAR, off[i], 1);
		assert_false(weft__knob_bool(VAR, true));
	}
	setenv(VAR, "maybe", 1);
	capture();
	b = weft__knob_bool(VAR, true);
	captured();
	assert_true(b);
	assert_string_equal(said, "weft: " VAR "=maybe: not 1, on, true, yes, "
				  "0, off, false or no; using on\n");

	setenv(VAR, "monotonic", 1);
	assert_int_equal(weft__knob_choice(VAR, clocks, 0), 1);
	setenv(VAR, "rdtsc", 1);
	capture();
	c = weft__knob_choice(VAR, clocks, 0);
	captured();
	assert_int_equal(c, 0);
	assert_string_equal(said, "weft: " VAR "=rdtsc: not one of tsc, "
				  "monotonic; using tsc\n");
	unsetenv(VAR);
	assert_int_equal(weft__knob_choice(VAR, clocks, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_knob_count),
		cmocka_unit_test(test_knob_time),
		cmocka_unit_test(test_knob_size),
		cmocka_unit_test(test_knob_bool_and_choice),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
