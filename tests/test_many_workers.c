/* SPDX-License-Identifier: MIT */
/*
 * As many workers in the tools as in the runtime (issue 20): a runtime of
 * 100 workers under the probe, past the 64 the collector, the wire and
 * the server's filters once stopped at.
 *
 * Every worker is made to run a task: 100 gate tasks, spawned one at a
 * time, each block their worker's poll until all 100 have come (or 10 s
 * have passed), so no worker can take a second one and each of the 100
 * takes one.  Then the
 * collector's update (in process), an unfiltered client's Update records
 * (the wire) and a client subscribed to worker 99 alone are looked at.
 */
#include <pthread.h>

#include "server_helpers.h"

#define NW 100

/* ------------------------------------------------------------ the gates */

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static unsigned gate_arrived;
static bool gate_open;

/* Blocks its worker until every gate has come or the gate opens. */
static weft_poll_t gate_poll(void *arg, weft_cx_t *cx)
{
	struct timespec until;

	(void)arg;
	(void)cx;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&gate_lock);
	gate_arrived++;
	pthread_cond_broadcast(&gate_cond);
	while (!gate_open && gate_arrived < NW &&
	       pthread_cond_timedwait(&gate_cond, &gate_lock, &until) == 0)
		;
	pthread_mutex_unlock(&gate_lock);
	return WEFT_READY;
}

/*
 * One gate per worker, each spawned once the one before is on a worker:
 * then every worker but the blocked ones is idle, and the spawn wakes
 * one of them.  (Spawned all at once, a worker may take several into
 * its queue and block on the first, the rest waiting on a steal.)  True
 * when all NW were on a worker at once.
 */
static bool gates_run(weft_runtime_t *rt)
{
	weft_join_t *j[NW];
	struct timespec until;
	unsigned n = 0;
	bool all;

	pthread_mutex_lock(&gate_lock);
	gate_arrived = 0;
	gate_open = false;
	pthread_mutex_unlock(&gate_lock);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	for (bool late = false; n < NW && !late; n++) {
		assert_int_equal(weft_spawn_named(rt, "gate", gate_poll, NULL,
						  &j[n]),
				 0);
		pthread_mutex_lock(&gate_lock);
		while (gate_arrived < n + 1 && !late)
			late = pthread_cond_timedwait(&gate_cond, &gate_lock,
						      &until) != 0;
		pthread_mutex_unlock(&gate_lock);
	}
	pthread_mutex_lock(&gate_lock);
	all = gate_arrived == NW;
	gate_open = true;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(weft_join_wait(j[i], NULL), 0);
		weft_join_drop(j[i]);
	}
	return all;
}

/* ------------------------------------------- the collector's last update */

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_probe_worker_t seen[NW + 1];
static size_t seen_n;
static uint32_t seen_stats_workers;

static void on_update(void *ctx, const weft_probe_update_t *u)
{
	(void)ctx;
	pthread_mutex_lock(&seen_lock);
	if (u->stats)
		seen_stats_workers = u->stats->workers;
	seen_n = u->nworkers;
	memcpy(seen, u->workers,
	       (u->nworkers < NW + 1 ? u->nworkers : NW + 1) * sizeof(*seen));
	pthread_mutex_unlock(&seen_lock);
}

/* ------------------------------------------------------------ a client */

/* Connects, reads the header (a 100-worker hello), subscribes. */
static void client_open(struct tclient *c, const char *path,
			Weft__V1__Filter *flt)
{
	Weft__V1__Frame *f;

	tc_open(c, path);
	f = tc_next(c, 10000);
	assert_non_null(f);
	assert_int_equal(f->body_case, WEFT__V1__FRAME__BODY_HEADER);
	assert_int_equal(f->header->hello->workers, NW);
	weft_wire_frame_free(f);
	tc_subscribe_ex(c, true, true, 10, flt);
	/* Its first (full) update: the subscription is in place. */
	while ((f = tc_next(c, 10000)) != NULL) {
		bool full = f->body_case == WEFT__V1__FRAME__BODY_UPDATE &&
			    f->update->full;

		weft_wire_frame_free(f);
		if (full)
			break;
	}
}

/*
 * The collector, in process and on the wire, lists all 100 workers with
 * the runtime's counters: every one polled a gate, those past 63 too.
 */
static void test_many_workers_update_lists_all(void **state)
{
	weft_probe_sub_opts_t o = { .on_update = on_update };
	weft_config_t cfg = { .workers = NW };
	weft_probe_sub_t *sub;
	weft_runtime_t *rt;
	struct tclient c;
	Weft__V1__Frame *f;
	uint64_t polls[NW];
	bool checked = false;

	(void)state;
	xdg_make();
	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	assert_int_equal(weft_runtime_workers(rt), NW);
	assert_int_equal(weft_probe_subscribe(&o, &sub), 0);
	assert_true(gates_run(rt));
	for (unsigned i = 0; i < NW; i++) {
		weft_worker_metrics_t m;

		weft_worker_metrics(rt, i, &m);
		polls[i] = m.polls;
		assert_true(polls[i] > 0);
	}
	/* Idle now: the next passes read the same counters. */
	weft_probe_flush();
	weft_probe_flush();
	pthread_mutex_lock(&seen_lock);
	assert_int_equal(seen_stats_workers, NW);
	assert_int_equal(seen_n, NW);
	for (unsigned i = 0; i < NW; i++) {
		assert_int_equal(seen[i].index, i);
		assert_true(seen[i].counters.polls >= polls[i]);
		assert_true(seen[i].counters.polls > 0);
	}
	pthread_mutex_unlock(&seen_lock);

	/*
	 * On the wire: Updates with the 100 Worker records, in order, every
	 * worker's polls in them.  The console attaches now: attached during
	 * the gates and not read, it was closed for not reading when they
	 * took 5 s (CI, at a load of 6 on two cores).
	 */
	client_open(&c, weft__server_unix_path(weft__server_default()), NULL);
	/*
	 * Each worker's highest polls seen so far, over the updates: a
	 * slow run (TSan on a crowded host) may send them across several.
	 */
	uint64_t got[NW] = { 0 };

	while (!checked && (f = tc_next(&c, 30000)) != NULL) {
		const Weft__V1__Update *u = f->update;

		if (f->body_case == WEFT__V1__FRAME__BODY_UPDATE &&
		    u->n_workers) {
			assert_non_null(u->stats);
			assert_int_equal(u->stats->workers, NW);
			assert_int_equal(u->n_workers, NW);
			checked = true;
			for (unsigned i = 0; i < NW; i++) {
				assert_int_equal(u->workers[i]->index, i);
				if (u->workers[i]->counters &&
				    u->workers[i]->counters->polls > got[i])
					got[i] = u->workers[i]->counters->polls;
				checked &= got[i] >= polls[i];
			}
		}
		weft_wire_frame_free(f);
	}
	if (!checked)
		for (unsigned i = 0; i < NW; i++)
			if (got[i] < polls[i])
				print_message("worker %u: %llu polls on the "
					      "wire, %llu in the runtime\n",
					      i, (unsigned long long)got[i],
					      (unsigned long long)polls[i]);
	assert_true(checked);

	tc_close(&c);
	weft_probe_unsubscribe(sub);
	weft_runtime_destroy(rt);
	xdg_remove();
}

/*
 * A client subscribed to worker 99 gets worker 99's events (a POLL of
 * its gate among them) and no other's, and its Worker record alone.
 */
/*
 * The client subscribed to worker 99 is read by its own thread from the
 * moment it subscribes: left unread while the gates run (5 s and more at
 * a load of 6 on two cores), it was closed for not reading, or its
 * events skipped as a slow client's, and the test saw no POLL at all.
 */
struct w99 {
	struct tclient *c;
	weft_event_t *ev;
	pthread_mutex_t lock;
	unsigned polls, wupdates, wrong;
	bool stop, closed;
};

static void *w99_read(void *arg)
{
	struct w99 *r = arg;
	Weft__V1__Frame *f;

	for (;;) {
		pthread_mutex_lock(&r->lock);
		bool stop = r->stop;
		pthread_mutex_unlock(&r->lock);
		if (stop)
			break;
		f = tc_next(r->c, 200);
		if (!f) {
			if (r->c->eof) {
				pthread_mutex_lock(&r->lock);
				r->closed = true;
				pthread_mutex_unlock(&r->lock);
				break;
			}
			continue;
		}
		pthread_mutex_lock(&r->lock);
		if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS) {
			int n = weft_wire_batch_decode(f->events, r->ev,
						       WEFT_WIRE_BATCH_MAX);

			r->wrong += n < 0;
			for (int i = 0; i < n; i++) {
				r->wrong += r->ev[i].worker != NW - 1;
				r->polls += r->ev[i].kind == WEFT_EV_POLL;
			}
		} else if (f->body_case == WEFT__V1__FRAME__BODY_UPDATE &&
			   f->update->n_workers) {
			r->wrong += f->update->n_workers != 1 ||
				    f->update->workers[0]->index != NW - 1;
			if (f->update->workers[0]->counters &&
			    f->update->workers[0]->counters->polls)
				r->wupdates++;
		}
		pthread_mutex_unlock(&r->lock);
		weft_wire_frame_free(f);
	}
	return NULL;
}

static void test_many_workers_filter_worker_99(void **state)
{
	uint32_t only[] = { NW - 1 };
	Weft__V1__Filter flt = WEFT__V1__FILTER__INIT;
	weft_config_t cfg = { .workers = NW };
	struct w99 r = { .lock = PTHREAD_MUTEX_INITIALIZER };
	weft_runtime_t *rt;
	struct tclient c;
	pthread_t th;
	bool done = false;

	(void)state;
	r.c = &c;
	r.ev = malloc(WEFT_WIRE_BATCH_MAX * sizeof(*r.ev));
	assert_non_null(r.ev);
	xdg_make();
	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	flt.n_workers = 1;
	flt.workers = only;
	client_open(&c, weft__server_unix_path(weft__server_default()), &flt);
	assert_int_equal(pthread_create(&th, NULL, w99_read, &r), 0);

	assert_true(gates_run(rt));
	weft_probe_flush();
	/* Ten seconds after the gates for a POLL and two Worker records. */
	for (int i = 0; i < 1000 && !done; i++) {
		pthread_mutex_lock(&r.lock);
		done = (r.polls && r.wupdates >= 2) || r.closed;
		pthread_mutex_unlock(&r.lock);
		if (!done)
			usleep(10000);
	}
	pthread_mutex_lock(&r.lock);
	r.stop = true;
	pthread_mutex_unlock(&r.lock);
	pthread_join(th, NULL);
	assert_false(r.closed);
	assert_int_equal(r.wrong, 0);
	assert_true(r.polls > 0);
	assert_true(r.wupdates >= 2);

	tc_close(&c);
	free(r.ev);
	weft_runtime_destroy(rt);
	xdg_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_workers_update_lists_all),
		cmocka_unit_test(test_many_workers_filter_worker_99),
	};

	unsetenv("WEFT_CONSOLE");
	unsetenv("WEFT_CONSOLE_BIND");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
