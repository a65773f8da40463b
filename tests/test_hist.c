/* SPDX-License-Identifier: MIT */
/*
 * The duration histogram of libweft-wire (proto/src/hist.c, and the
 * inline weft_hist_index() and weft_hist_add() of weft/wire.h):
 * percentiles, outliers, and the bucket of a value against the bounds
 * weft_hist_bucket_upper() reports.  Linked against libweft-wire alone:
 * the clients that read histograms carry no runtime.
 */
#include <string.h>

#include "test_helpers.h"

#include "weft/probe_model.h"
#include "weft/wire.h"

static void test_hist_percentiles(void **state)
{
	weft_hist_t h;

	(void)state;
	memset(&h, 0, sizeof(h));
	/* 1..1000 µs, uniform. */
	for (uint64_t us = 1; us <= 1000; us++)
		weft_hist_record(&h, us * 1000);
	assert_int_equal(h.count, 1000);
	assert_int_equal(h.max_ns, 1000000);
	/* Buckets are two per power of two: at most 50% above. */
	assert_in_range(weft_hist_percentile(&h, 50), 500000, 750000);
	assert_in_range(weft_hist_percentile(&h, 90), 900000, 1000000);
	assert_in_range(weft_hist_percentile(&h, 99), 990000, 1000000);
	assert_int_equal(weft_hist_percentile(&h, 100), 1000000);
	/* Outliers: beyond 2^38 ns. */
	weft_hist_record(&h, (uint64_t)1 << 40);
	assert_int_equal(h.outliers, 1);
	assert_int_equal(h.max_ns, (uint64_t)1 << 40);
	/* Under 64 ns: bucket 0. */
	weft_hist_record(&h, 5);
	assert_int_equal(h.buckets[0], 1);
}

/*
 * Bucket i holds [upper(i - 1), upper(i)): each bound is the first value
 * of the next bucket, and from 2^38 ns on a value is an outlier.
 */
static void test_hist_index_matches_bucket_bounds(void **state)
{
	uint64_t lo = 0;

	(void)state;
	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++) {
		uint64_t up = weft_hist_bucket_upper(i);

		assert_true(up > lo);
		assert_int_equal(weft_hist_index(lo), i);
		assert_int_equal(weft_hist_index(up - 1), i);
		assert_int_equal(weft_hist_index(lo + (up - lo) / 2), i);
		lo = up;
	}
	assert_int_equal(lo, (uint64_t)1 << 38);
	assert_int_equal(weft_hist_index(lo), WEFT_HIST_BUCKETS);
	assert_int_equal(weft_hist_index(UINT64_MAX), WEFT_HIST_BUCKETS);
}

/* The collector's inline add and the library's record agree. */
static void test_hist_add_is_record(void **state)
{
	weft_hist_t a, b;
	uint64_t x = 88172645463325252ull;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	for (unsigned i = 0; i < 10000; i++) {
		/* xorshift64; a value of any magnitude, outliers included. */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		uint64_t ns = x >> (x % 64);

		weft_hist_add(&a, ns);
		weft_hist_record(&b, ns);
	}
	assert_memory_equal(&a, &b, sizeof(a));
	assert_true(a.outliers > 0);
	assert_true(a.buckets[0] > 0);
	assert_int_equal(a.count, 10000);
}

/*
 * weft_hist_add() has its own bucket arithmetic (one range test for the
 * buckets past 0): each value lands where weft_hist_index() says, counted
 * once, with its sum and max, at every bucket's bounds (each side), the
 * range's ends, and values of every magnitude.
 */
static void check_add_at_index(uint64_t ns)
{
	weft_hist_t h, want;
	unsigned i = weft_hist_index(ns);

	memset(&h, 0, sizeof(h));
	memset(&want, 0, sizeof(want));
	h.max_ns = want.max_ns = 7;
	if (i < WEFT_HIST_BUCKETS)
		want.buckets[i] = 1;
	else
		want.outliers = 1;
	want.count = 1;
	want.sum_ns = ns;
	if (ns > want.max_ns)
		want.max_ns = ns;
	weft_hist_add(&h, ns);
	if (memcmp(&h, &want, sizeof(h)))
		fail_msg("weft_hist_add(%llu): not bucket %u",
			 (unsigned long long)ns, i);
}

static void test_hist_add_at_index(void **state)
{
	uint64_t x = 0x9E3779B97F4A7C15ull;

	(void)state;
	for (uint64_t ns = 0; ns < 4096; ns++)
		check_add_at_index(ns);
	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++) {
		uint64_t up = weft_hist_bucket_upper(i);

		for (uint64_t d = 0; d < 3; d++) {
			check_add_at_index(up - 1 - d);
			check_add_at_index(up + d);
		}
	}
	for (unsigned e = 0; e < 64; e++) {
		check_add_at_index((uint64_t)1 << e);
		check_add_at_index(((uint64_t)1 << e) - 1);
		check_add_at_index(((uint64_t)3 << e) >> 1);
	}
	check_add_at_index(UINT64_MAX);
	for (unsigned i = 0; i < 100000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		check_add_at_index(x >> (x % 64));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hist_percentiles),
		cmocka_unit_test(test_hist_index_matches_bucket_bounds),
		cmocka_unit_test(test_hist_add_is_record),
		cmocka_unit_test(test_hist_add_at_index),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
