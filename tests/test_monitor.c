/* SPDX-License-Identifier: MIT */
/*
 * The runtime monitor (runtime/src/monitor.c): a worker that blocks inside
 * a poll stalls only itself.  Each test runs two workers, blocks one of
 * them with a plain blocking call inside a poll (usleep, a pthread mutex
 * through weft_mutex_t), and checks that what the blocked worker held back
 * (the task it woke, the timers and I/O it was the last to turn) goes on
 * on the other worker.
 *
 * The bounds are the (a tick at most 4 ms late, a woken task run
 * within 2 ms), in one of three tries; one tick in a hundred, or a few
 * rounds, may miss them,
 * never by more than a hard bound: on the shared VMs we run on, a plain
 * 1 ms nanosleep() was measured up to 4 ms late, and the monitor runs at
 * nice 19, behind whatever else keeps the CPUs busy.  Without the
 * monitor half the ticks are 8-10 ms late and every woken task waits the
 * whole 10 ms, or the test hangs.  Under sanitizers and valgrind the
 * bounds scale with slowdown().
 */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "runtime_internal.h"
#include "test_helpers.h"
#include "weft/mutex.h"
#include "weft/sync_async.h"

#define MS 1000000ull

/* ------------------------------------------------------- ticker + blocker */

/*
 * A ticker sleeps 1 ms in a loop and records how late each tick was;
 * a blocker, on the other worker, blocks it 20 ms in every 22 ms.  Without
 * the monitor a tick waits out the block (up to 20 ms late); with it, a
 * few ms at most: the bound (14 ms) sits well clear of both, so that a
 * loaded CI host does not fail it (8 ms blocks against a 7 ms bound once
 * did, at 7-8 ms).
 */
typedef struct ticker_s {
	int step;
	unsigned ticks;
	unsigned n;
	uint64_t deadline;
	weft_sleep_t sleep;
	_Atomic uint64_t *worst;
	_Atomic unsigned *late; /* ticks more than the bound late */
	_Atomic unsigned *trapped; /* ticks 15 ms late or more */
	uint64_t bound;
} ticker_t;

static weft_poll_t ticker_poll(void *p, weft_cx_t *cx)
{
	ticker_t *st = p;

	for (;;) {
		if (st->step == 0) {
			if (st->ticks == st->n)
				return WEFT_READY;
			st->deadline = weft_now_ns() + 1 * MS;
			weft_sleep_init_until(&st->sleep, st->deadline);
			st->step = 1;
		}
		if (weft_sleep_poll(&st->sleep, cx) == WEFT_PENDING)
			return WEFT_PENDING;
		{
			uint64_t lateness = weft_now_ns() - st->deadline;
			uint64_t w = atomic_load(st->worst);

			if (lateness > w)
				atomic_store(st->worst, lateness);
			if (lateness > st->bound)
				atomic_fetch_add(st->late, 1);
			if (lateness >= 15 * MS)
				atomic_fetch_add(st->trapped, 1);
		}
		weft_sleep_fini(&st->sleep);
		st->ticks++;
		st->step = 0;
	}
}

static void ticker_drop(void *p)
{
	weft_sleep_fini(&((ticker_t *)p)->sleep);
}

typedef struct blocker_s {
	int step;
	_Atomic bool *stop;
	weft_sleep_t sleep;
	unsigned blocks;
} blocker_t;

static weft_poll_t blocker_poll(void *p, weft_cx_t *cx)
{
	blocker_t *st = p;

	for (;;) {
		if (st->step == 0) {
			if (atomic_load(st->stop))
				return WEFT_READY;
			usleep(20000); /* the mistake: blocks its worker */
			st->blocks++;
			weft_sleep_init(&st->sleep, 2 * MS);
			st->step = 1;
		}
		if (weft_sleep_poll(&st->sleep, cx) == WEFT_PENDING)
			return WEFT_PENDING;
		weft_sleep_fini(&st->sleep);
		st->step = 0;
	}
}

static void blocker_drop(void *p)
{
	weft_sleep_fini(&((blocker_t *)p)->sleep);
}

static bool ticker_beside_blocker(void)
{
	weft_runtime_t *rt = rt_create(2);
	_Atomic uint64_t worst = 0;
	_Atomic unsigned late = 0, trapped = 0;
	_Atomic bool stop = false;
	unsigned n = scale_count(300);
	ticker_t tk = { .n = n,
			.worst = &worst,
			.late = &late,
			.trapped = &trapped,
			.bound = 4 * MS * slowdown() };
	blocker_t bl = { .stop = &stop };
	weft_join_t *jt, *jb;

	jb = spawn_ok(rt, blocker_poll, blocker_drop, &bl, sizeof(bl), true);
	jt = spawn_ok(rt, ticker_poll, ticker_drop, &tk, sizeof(tk), true);
	assert_int_equal(join_wait_drop(jt, NULL), 0);
	atomic_store(&stop, true);
	assert_int_equal(join_wait_drop(jb, NULL), 0);
	weft_runtime_destroy(rt);
	print_message("ticker: %u ticks, worst %.2f ms late, %u over %.0f ms, "
		      "%u over 15 ms\n",
		      n, (double)atomic_load(&worst) / MS, atomic_load(&late),
		      (double)tk.bound / MS, atomic_load(&trapped));
	/*
	 * Behind the blocker (no monitor) a tick waits out its 20 ms calls,
	 * tick after tick (without a monitor the run never ends).  A loaded
	 * host makes a few ticks late by preemption (6-15 of 300 over 4 ms,
	 * the worst 21 ms, beside two busy loops): counted, not the worst.
	 */
	return atomic_load(&late) <= n / 10 && atomic_load(&trapped) <= n / 50;
}

/*
 * A latency measurement on a shared host: up to three tries, one of which
 * must hold.  Without the monitor every try misses by the blocking call's
 * length, so the retries hide noise, not the fault.
 */
#define TRIES 3

static void test_ticker_beside_blocker(void **state)
{
	unsigned i;

	(void)state;
	for (i = 0; i < TRIES && !ticker_beside_blocker(); i++)
		;
	assert_true(i < TRIES);
}

/* ---------------------------------------------- woken, then waker blocks */

/*
 * A sleeper parks its waker and waits; a waker task wakes it and then
 * blocks its worker 10 ms.  The woken task sits in the waker's LIFO slot:
 * it must run on the other worker long before the 10 ms are over.
 */
typedef struct trap_s {
	pthread_mutex_t lock;
	weft_waker_t waker;
	bool parked;
	uint64_t woken_at;
	uint64_t ran_at;
	tcount_t ready; /* the sleeper has parked its waker */
	tcount_t done;
} trap_t;

typedef struct sleeper_s {
	trap_t *trap;
	bool waited;
} sleeper_t;

static weft_poll_t sleeper_poll(void *p, weft_cx_t *cx)
{
	sleeper_t *st = p;
	trap_t *tr = st->trap;

	if (!st->waited) {
		st->waited = true;
		pthread_mutex_lock(&tr->lock);
		tr->waker = weft_waker_clone(weft_cx_waker(cx));
		tr->parked = true;
		pthread_mutex_unlock(&tr->lock);
		tcount_add(&tr->ready, 1);
		return WEFT_PENDING;
	}
	tr->ran_at = weft_now_ns();
	tcount_add(&tr->done, 1);
	return WEFT_READY;
}

typedef struct waker_task_s {
	trap_t *trap;
} waker_task_t;

static weft_poll_t waker_task_poll(void *p, weft_cx_t *cx)
{
	trap_t *tr = ((waker_task_t *)p)->trap;
	weft_waker_t w;

	(void)cx;
	pthread_mutex_lock(&tr->lock);
	w = tr->waker;
	tr->waker = WEFT_WAKER_EMPTY;
	pthread_mutex_unlock(&tr->lock);
	tr->woken_at = weft_now_ns();
	weft_waker_wake(&w);
	usleep(10000); /* blocks this worker with the woken task queued */
	return WEFT_READY;
}

static bool woken_task_not_trapped(void)
{
	weft_runtime_t *rt = rt_create(2);
	unsigned rounds = scale_count(20), over = 0, trapped = 0;
	uint64_t bound = 2 * MS * slowdown(), worst = 0;

	for (unsigned i = 0; i < rounds; i++) {
		trap_t tr;
		sleeper_t sl = { .trap = &tr };
		waker_task_t wk = { .trap = &tr };
		weft_join_t *js, *jw;
		uint64_t d;

		memset(&tr, 0, sizeof(tr));
		pthread_mutex_init(&tr.lock, NULL);
		tcount_init(&tr.ready);
		tcount_init(&tr.done);
		js = spawn_ok(rt, sleeper_poll, NULL, &sl, sizeof(sl), true);
		tcount_wait(&tr.ready, 1);
		/* Let the sleeper's worker park, as a quiet service's would. */
		usleep(2000);
		jw = spawn_ok(rt, waker_task_poll, NULL, &wk, sizeof(wk), true);
		assert_int_equal(join_wait_drop(js, NULL), 0);
		assert_int_equal(join_wait_drop(jw, NULL), 0);
		d = tr.ran_at - tr.woken_at;
		if (getenv("TEST_VERBOSE"))
			print_message("%.3f\n", (double)d / MS);
		if (d > worst)
			worst = d;
		if (d > bound)
			over++;
		if (d >= 8 * MS)
			trapped++;
		tcount_fini(&tr.ready);
		tcount_fini(&tr.done);
		pthread_mutex_destroy(&tr.lock);
	}
	weft_runtime_destroy(rt);
	print_message("woken before a 10 ms block: worst %.2f ms in %u rounds, "
		      "%u over %.0f ms\n",
		      (double)worst / MS, rounds, over, (double)bound / MS);
	/*
	 * The median within the bound, and few rounds trapped: one left in
	 * the waker's slot runs after its 10 ms block, every round.  Not the
	 * worst: a loaded host preempts a round or two past 5 ms.
	 */
	return over <= rounds / 2 && trapped <= rounds / 4;
}

static void test_woken_task_not_trapped(void **state)
{
	unsigned i;

	(void)state;
	for (i = 0; i < TRIES && !woken_task_not_trapped(); i++)
		;
	assert_true(i < TRIES);
}

/* ------------------------------------------ producer beside slow consumer */

/*
 * A producer computes each message for 3 ms (CPU) and sends it through an
 * mpsc of capacity 1; the consumer takes it and blocks 5 ms in the same
 * poll (the mistake), then takes the next.  Taking a message wakes the
 * producer, waiting for room, into the consumer's LIFO slot.  Trapped
 * there, it computes only once the consumer's poll returns: 8 ms a
 * message, the other worker idle.  Freed by the monitor, it computes on
 * the other worker while the consumer blocks: about 5 ms a message.
 */
#define PC_WORK_MS 3
#define PC_BLOCK_MS 5

typedef struct pc_s {
	weft_mpsc_tx_t *tx;
	weft_mpsc_rx_t *rx;
	unsigned n;
	unsigned made;
	unsigned taken;
	bool sending;
	weft_mpsc_send_t send;
	weft_mpsc_recv_t recv;
	uint64_t msg;
	uint64_t msg_out;
} pc_t;

static void spin_ms(unsigned ms)
{
	uint64_t end = weft_now_ns() + ms * MS;

	while (weft_now_ns() < end)
		;
}

static weft_poll_t producer_poll(void *p, weft_cx_t *cx)
{
	pc_t *st = *(pc_t **)p;

	for (;;) {
		if (!st->sending) {
			if (st->made == st->n) {
				weft_mpsc_tx_drop(st->tx);
				st->tx = NULL;
				return WEFT_READY;
			}
			spin_ms(PC_WORK_MS);
			st->msg = st->made;
			weft_mpsc_send_init(&st->send, st->tx, &st->msg);
			st->sending = true;
		}
		if (weft_mpsc_send_poll(&st->send, cx) == WEFT_PENDING)
			return WEFT_PENDING;
		assert_int_equal(st->send.status, 0);
		weft_mpsc_send_fini(&st->send);
		st->sending = false;
		st->made++;
	}
}

static weft_poll_t consumer_poll(void *p, weft_cx_t *cx)
{
	pc_t *st = *(pc_t **)p;
	uint64_t v;

	for (;;) {
		if (weft_mpsc_recv_poll(&st->recv, cx) == WEFT_PENDING)
			return WEFT_PENDING;
		if (st->recv.status != 0)
			return WEFT_READY; /* every sender gone */
		memcpy(&v, &st->msg_out, sizeof(v));
		assert_int_equal(v, st->taken);
		st->taken++;
		weft_mpsc_recv_fini(&st->recv);
		usleep(PC_BLOCK_MS * 1000); /* the mistake: blocks its worker */
		weft_mpsc_recv_init(&st->recv, st->rx, &st->msg_out);
	}
}

static bool producer_beside_slow_consumer(void)
{
	weft_runtime_t *rt = rt_create(2);
	unsigned n = scale_count(40);
	pc_t pc = { .n = n };
	pc_t *pp = &pc;
	uint64_t t0, took,
		serial = n * (uint64_t)(PC_WORK_MS + PC_BLOCK_MS) * MS;
	weft_join_t *jp, *jc;

	assert_int_equal(
		weft_mpsc_create(1, sizeof(uint64_t), NULL, &pc.tx, &pc.rx), 0);
	weft_mpsc_recv_init(&pc.recv, pc.rx, &pc.msg_out);
	t0 = weft_now_ns();
	jc = spawn_ok(rt, consumer_poll, NULL, &pp, sizeof(pp), true);
	jp = spawn_ok(rt, producer_poll, NULL, &pp, sizeof(pp), true);
	assert_int_equal(join_wait_drop(jp, NULL), 0);
	assert_int_equal(join_wait_drop(jc, NULL), 0);
	took = weft_now_ns() - t0;
	weft_mpsc_recv_fini(&pc.recv);
	weft_mpsc_rx_drop(pc.rx);
	weft_runtime_destroy(rt);
	assert_int_equal(pc.taken, n);
	print_message("producer beside a slow consumer: %u messages in %.1f ms "
		      "(%.2f ms each; trapped, %u ms each)\n",
		      n, (double)took / MS, (double)took / MS / n,
		      PC_WORK_MS + PC_BLOCK_MS);
	/*
	 * Valgrind runs one thread at a time: nothing overlaps there, and
	 * the run only shows that nothing hangs.
	 */
	if (on_valgrind())
		return true;
	return took < serial * 85 / 100;
}

static void test_producer_beside_slow_consumer(void **state)
{
	unsigned i;

	(void)state;
	for (i = 0; i < TRIES && !producer_beside_slow_consumer(); i++)
		;
	assert_true(i < TRIES);
}

/* --------------------------------------- weft_mutex_t held across a sleep */

/*
 * Two tasks take one weft_mutex_t and hold it across a 2 ms sleep (the
 * mistake the lock-held-across-await warning names).  The second blocks
 * its worker in pthread_mutex_lock until the first's sleep ends, which
 * needs someone to turn the timers: the other worker, or the monitor.
 */
typedef struct holder_s {
	int step;
	unsigned rounds;
	unsigned done;
	weft_mutex_t *m;
	weft_sleep_t sleep;
} holder_t;

static void holder_drop(void *p)
{
	weft_sleep_fini(&((holder_t *)p)->sleep);
}

static weft_poll_t holder_poll(void *p, weft_cx_t *cx)
{
	holder_t *st = p;

	for (;;) {
		if (st->step == 0) {
			if (st->done == st->rounds)
				return WEFT_READY;
			/* Unlocked, a while: the other holder's timer fires
			 * while this one's is pending, on either worker. */
			weft_sleep_init(&st->sleep, (1 + st->done % 2) * MS);
			st->step = 1;
		}
		if (st->step == 1) {
			if (weft_sleep_poll(&st->sleep, cx) == WEFT_PENDING)
				return WEFT_PENDING;
			weft_sleep_fini(&st->sleep);
			weft_mutex_lock(st->m);
			weft_sleep_init(&st->sleep, 2 * MS);
			st->step = 2;
		}
		if (weft_sleep_poll(&st->sleep, cx) == WEFT_PENDING)
			return WEFT_PENDING;
		weft_sleep_fini(&st->sleep);
		weft_mutex_unlock(st->m);
		st->done++;
		st->step = 0;
	}
}

static void test_mutex_holders_across_sleep(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	weft_mutex_t m;
	unsigned rounds = scale_count(200);
	holder_t h = { .rounds = rounds, .m = &m };
	weft_join_t *j1, *j2;

	(void)state;
#if defined(WEFT_TSAN)
	/*
	 * The holder resumes, and unlocks, on another worker: undefined for
	 * the pthread mutex under weft_mutex_t, and TSan says so.  That is
	 * the API's fault (issue 20), not the monitor's.
	 */
	skip();
#endif
	weft_mutex_init(&m, "test-mutex");
	j1 = spawn_ok(rt, holder_poll, holder_drop, &h, sizeof(h), true);
	j2 = spawn_ok(rt, holder_poll, holder_drop, &h, sizeof(h), true);
	/* Without the monitor this hangs (the test's TIMEOUT). */
	assert_int_equal(join_wait_drop(j1, NULL), 0);
	assert_int_equal(join_wait_drop(j2, NULL), 0);
	weft_runtime_destroy(rt);
	weft_mutex_fini(&m);
}

/* ------------------------------------------------- weft_block_in_place */

/*
 * With the monitor off, a task queues work on its own worker (spawns go
 * to its LIFO slot and local queue) and then blocks in place until all of
 * that work has run: only weft_block_in_place()'s hand-over can let the
 * other worker run it, else the test hangs (its TIMEOUT).
 */
#define IN_PLACE_CHILDREN 8

typedef struct in_place_s {
	tcount_t *ran;
	bool was_worker_inside; /* weft_runtime_current() inside fn */
} in_place_t;

static weft_poll_t child_poll(void *p, weft_cx_t *cx)
{
	(void)cx;
	tcount_add(*(tcount_t **)p, 1);
	return WEFT_READY;
}

static void wait_children(void *arg)
{
	in_place_t *ip = arg;

	ip->was_worker_inside = weft_runtime_current() != NULL;
	tcount_wait(ip->ran, IN_PLACE_CHILDREN);
}

typedef struct parent_s {
	in_place_t *ip;
} parent_t;

static weft_poll_t parent_poll(void *p, weft_cx_t *cx)
{
	in_place_t *ip = ((parent_t *)p)->ip;

	(void)cx;
	for (unsigned i = 0; i < IN_PLACE_CHILDREN; i++) {
		weft_spawn_t spec = { .poll = child_poll,
				      .state = &ip->ran,
				      .size = sizeof(ip->ran),
				      .name = "child" };

		if (weft_spawn_with(NULL, &spec, NULL))
			return WEFT_READY; /* the count never completes */
	}
	weft_block_in_place(wait_children, ip);
	return WEFT_READY;
}

static void test_block_in_place_hands_work_on(void **state)
{
	weft_runtime_t *rt;
	tcount_t ran;
	in_place_t ip = { .ran = &ran };
	parent_t pa = { .ip = &ip };
	unsigned rounds = scale_count(20);

	(void)state;
	setenv("WEFT_MONITOR", "0", 1);
	rt = rt_create(2);
	unsetenv("WEFT_MONITOR");
	assert_int_equal(rt->monitor.started, false);
	for (unsigned i = 0; i < rounds; i++) {
		tcount_init(&ran);
		assert_int_equal(join_wait_drop(spawn_ok(rt, parent_poll, NULL,
							 &pa, sizeof(pa), true),
						NULL),
				 0);
		assert_int_equal(tcount_get(&ran), IN_PLACE_CHILDREN);
		assert_true(ip.was_worker_inside);
		tcount_fini(&ran);
	}
	weft_runtime_destroy(rt);
	/* Outside a worker it is just a call. */
	tcount_init(&ran);
	tcount_add(&ran, IN_PLACE_CHILDREN);
	weft_block_in_place(wait_children, &ip);
	assert_false(ip.was_worker_inside);
	tcount_fini(&ran);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ticker_beside_blocker),
		cmocka_unit_test(test_woken_task_not_trapped),
		cmocka_unit_test(test_producer_beside_slow_consumer),
		cmocka_unit_test(test_mutex_holders_across_sleep),
		cmocka_unit_test(test_block_in_place_hands_work_on),
	};

	/* TEST_FILTER=test_woken_task_not_trapped runs one case (by hand). */
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
