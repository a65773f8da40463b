/* SPDX-License-Identifier: MIT */
/*
 * The collector's seed of a process of many tasks (collector_reconcile.c)
 * paced by what a real console takes in (server_stream.c, seed_room():
 * issue 21).  A runtime's idle tasks, spawned before anyone listened, are
 * seeded over passes once a client subscribes through a real unix
 * socket; the client reads a frame, then sleeps, so that it takes the
 * updates more slowly than the collector could seed them (10,000 tasks
 * a pass, 1.3 MB: the whole seed would come in one 100 ms delta of
 * about 4 MB, over the client's 256 KB bound).  Paced, the client skips
 * nothing, the server starts no resync, its output for the client stays
 * in the bound, and every task comes exactly once, named.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_helpers.h"
#include "server_helpers.h"

#include "collector_internal.h"
#include "server_internal.h"
#include "weft/probe.h"
#include "weft/wire.h"


static void knobs(uint32_t at_once, uint32_t first, uint32_t pass)
{
	pthread_mutex_lock(&weft__probe.lock);
	weft__probe.seed_at_once = at_once;
	weft__probe.seed_first = first;
	weft__probe.seed_pass = pass;
	pthread_mutex_unlock(&weft__probe.lock);
}

static bool seeding(void)
{
	bool on;

	pthread_mutex_lock(&weft__probe.lock);
	on = weft__probe.seed_shards != 0;
	pthread_mutex_unlock(&weft__probe.lock);
	return on;
}

static int cmp_id(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) +
	       (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void test_seed_paced_by_a_slow_client(void **state)
{
	enum { IDLE = 30000, FIRST = 256, AT_ONCE = 1000, PASS = 10000 };
	weft_server_opts_t o = { .workers = 2, .client_buf_max = 256u << 10 };
	uint64_t *ids = calloc(2 * IDLE, sizeof(*ids));
	size_t named = 0, first_named = 0, distinct = 0, frames = 0;
	weft_server_stats_t st;
	struct timespec t0;
	struct tclient c;
	char path[300];
	weft_server_t *srv;
	weft_runtime_t *rt;
	Weft__V1__Frame *f;
	unsigned fulls = 0;
	bool seeded = false;

	(void)state;
	assert_non_null(ids);
	xdg_make();
	weft_notify_init(&idle_note);
	rt = rt_with_server();
	for (int i = 0; i < IDLE; i++) {
		weft_spawn_t sp = { .poll = idle_poll,
				    .state = &(struct idle){ 0 },
				    .size = sizeof(struct idle),
				    .name = "idle" };

		assert_int_equal(weft_spawn_with(rt, &sp, NULL), 0);
	}
	/* Seeded over passes past AT_ONCE live tasks, PASS a pass unless
	 * the streams' room says less. */
	knobs(AT_ONCE, FIRST, PASS);
	snprintf(path, sizeof(path), "%s/seed.sock", xdg);
	o.unix_path = path;
	assert_int_equal(weft__server_create(&o, &srv), 0);

	tc_open(&c, path);
	tc_expect_header(&c);
	tc_subscribe(&c, true, false);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Until every task has come and the seed is over (a delta after
	 * its last pass), or 60 s. */
	while ((named < IDLE || !seeded) && since(&t0) < 60 &&
	       (f = tc_next(&c, 5000)) != NULL) {
		const Weft__V1__Update *u = f->update;
		size_t here = 0;

		assert_int_equal(f->body_case, WEFT__V1__FRAME__BODY_UPDATE);
		assert_int_equal(u->updates_skipped, 0);
		fulls += u->full;
		for (size_t i = 0; i < u->n_tasks; i++)
			if (!strcmp(u->tasks[i]->name, "idle")) {
				assert_true(named < 2 * IDLE);
				ids[named++] = u->tasks[i]->id;
				here++;
			}
		if (u->full)
			first_named += here;
		frames++;
		weft_wire_frame_free(f);
		seeded = !seeding();
		usleep(2000); /* a slow reader */
	}
	weft__server_stats(srv, &st);
	qsort(ids, named, sizeof(*ids), cmp_id);
	for (size_t i = 0; i < named; i++)
		distinct += !i || ids[i] != ids[i - 1];
	print_message("%.2f s, %zu frames, %u full, %zu named (%zu in the "
		      "full one, %zu distinct); skipped %llu, resyncs %llu, "
		      "most held %zu of %zu\n",
		      since(&t0), frames, fulls, named, first_named, distinct,
		      (unsigned long long)st.updates_skipped,
		      (unsigned long long)st.resyncs, st.max_client_buffered,
		      o.client_buf_max);
	assert_true(seeded);
	/* Seeded over passes: the first update names the lowest ids only. */
	assert_int_equal(fulls, 1);
	assert_true(first_named <= FIRST);
	assert_int_equal(named, IDLE);
	assert_int_equal(distinct, IDLE);
	assert_int_equal(st.updates_skipped, 0);
	assert_int_equal(st.resyncs, 0);
	assert_true(st.max_client_buffered <= o.client_buf_max);

	tc_close(&c);
	weft__server_destroy(srv);
	knobs(0, 0, 0);
	weft_notify_waiters(&idle_note);
	weft_runtime_destroy(rt);
	weft_notify_fini(&idle_note);
	xdg_remove();
	free(ids);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seed_paced_by_a_slow_client),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
