/* SPDX-License-Identifier: MIT */
/*
 * weft_mutex_t (weft/mutex.h): mutual exclusion with exact counts under
 * contention from plain threads and tasks; trylock; and the mistake the
 * probe warns about, a lock held across an await that is unlocked on
 * another worker than the one that took it: defined (a futex word, not a
 * pthread mutex), clean under ThreadSanitizer, and the lock works after.
 */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_helpers.h"

#include "weft/mutex.h"

static weft_runtime_t *rt_new(unsigned workers)
{
	weft_runtime_t *rt = NULL;

	assert_int_equal(weft_runtime_create(
				 &(weft_config_t){ .workers = workers }, &rt),
			 0);
	return rt;
}

/* ------------------------------------------------------------- counts */

static weft_mutex_t count_lock;
static uint64_t counted; /* guarded by count_lock: a plain word */
static unsigned per_thread;

static void *count_thread(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < per_thread; i++) {
		weft_mutex_lock(&count_lock);
		counted++;
		weft_mutex_unlock(&count_lock);
	}
	return NULL;
}

struct count_task {
	int weft_pc;
	unsigned i;
};

static weft_poll_t count_task_poll(void *arg, weft_cx_t *cx)
{
	struct count_task *c = arg;

	WEFT_ASYNC_BEGIN(c);
	for (c->i = 0; c->i < per_thread; c->i++) {
		weft_mutex_lock(&count_lock);
		counted++;
		weft_mutex_unlock(&count_lock);
		if (c->i % 64 == 0)
			WEFT_YIELD(c, cx);
	}
	WEFT_ASYNC_END(c);
}

/*
 * Four plain threads and four tasks on two workers increment one counter
 * under the lock: the count is exact (no lost update), and TSan sees
 * every increment ordered by the lock's acquire and release.
 */
static void test_mutex_exact_count(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	weft_join_t *j[4];
	pthread_t t[4];

	(void)state;
	weft_mutex_init(&count_lock, "count");
	counted = 0;
	per_thread = scale_count(50000);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, count_thread,
						NULL),
				 0);
		assert_int_equal(
			weft_spawn_with(rt,
					&(weft_spawn_t){
						.poll = count_task_poll,
						.size = sizeof(struct count_task),
						.name = "counter",
						.file = __FILE__,
						.line = __LINE__ },
					&j[i]),
			0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(weft_join_wait(j[i], NULL), 0);
		weft_join_drop(j[i]);
	}
	assert_int_equal(counted, 8ull * per_thread);
	weft_mutex_fini(&count_lock);
	weft_runtime_destroy(rt);
}

static void test_mutex_trylock(void **state)
{
	weft_mutex_t m;

	(void)state;
	weft_mutex_init(&m, "try");
	assert_true(weft_mutex_trylock(&m));
	assert_false(weft_mutex_trylock(&m));
	weft_mutex_unlock(&m);
	assert_true(weft_mutex_trylock(&m));
	weft_mutex_unlock(&m);
	weft_mutex_lock(&m);
	assert_false(weft_mutex_trylock(&m));
	weft_mutex_unlock(&m);
	weft_mutex_fini(&m);
}

/* -------------------------------------------- unlocked on another worker */

static weft_mutex_t across;
static uint64_t across_guarded; /* written while holding across */

struct holder {
	int weft_pc;
	weft_sleep_t sl;
	pthread_t locked_on;
	atomic_int *moved;
};

/* The mistake: lock, await a sleep, unlock wherever the task resumed. */
static weft_poll_t holder_poll(void *arg, weft_cx_t *cx)
{
	struct holder *h = arg;

	WEFT_ASYNC_BEGIN(h);
	weft_mutex_lock(&across);
	across_guarded++;
	h->locked_on = pthread_self();
	weft_sleep_init(&h->sl, WEFT_MSEC(1));
	WEFT_AWAIT(h, weft_sleep_poll(&h->sl, cx));
	weft_sleep_fini(&h->sl);
	across_guarded++;
	if (!pthread_equal(h->locked_on, pthread_self()))
		atomic_fetch_add(h->moved, 1);
	weft_mutex_unlock(&across);
	WEFT_ASYNC_END(h);
}

/* Keeps the worker that took the lock busy, so the holder moves. */
static weft_poll_t busy_poll(void *arg, weft_cx_t *cx)
{
	(void)arg, (void)cx;
	usleep(3000);
	return WEFT_READY;
}

/*
 * Tasks hold the lock across a 1 ms sleep while others keep the workers
 * busy, until at least one has unlocked on another worker than the one
 * that locked (a pthread mutex: undefined; TSan reports it).  Every
 * increment made under the lock is counted, and the lock still works
 * from a plain thread afterwards.
 */
static void test_mutex_unlock_on_another_worker(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	atomic_int moved = 0;
	unsigned rounds = 0;

	(void)state;
	weft_mutex_init(&across, "across");
	across_guarded = 0;
	while (atomic_load(&moved) == 0 && rounds < 200) {
		weft_join_t *j[4];

		for (int i = 0; i < 4; i++) {
			int err = i % 2 ?
				weft_spawn_with(rt,
						&(weft_spawn_t){
							.poll = busy_poll,
							.name = "busy",
							.file = __FILE__,
							.line = __LINE__ },
						&j[i]) :
				weft_spawn_with(
					rt,
					&(weft_spawn_t){
						.poll = holder_poll,
						.state = &(struct holder){
							.moved = &moved },
						.size = sizeof(struct holder),
						.name = "holder",
						.file = __FILE__,
						.line = __LINE__ },
					&j[i]);

			assert_int_equal(err, 0);
		}
		for (int i = 0; i < 4; i++) {
			assert_int_equal(weft_join_wait(j[i], NULL), 0);
			weft_join_drop(j[i]);
		}
		rounds++;
	}
	print_message("unlocked on another worker after %u rounds\n", rounds);
	assert_true(atomic_load(&moved) > 0);
	weft_mutex_lock(&across);
	assert_int_equal(across_guarded, 4ull * rounds);
	weft_mutex_unlock(&across);
	weft_mutex_fini(&across);
	weft_runtime_destroy(rt);
}

/*
 * Unlocking a mutex that is not locked (twice, or never locked) panics,
 * naming it, in a child: no second holder is let in unnoticed.
 */
static void test_mutex_unlock_unlocked_panics(void **state)
{
	char msg[512] = { 0 }, scratch[512];
	ssize_t n, got = 0;
	int fds[2], status;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		weft_mutex_t m;

		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		weft_mutex_init(&m, "twice-unlocked");
		weft_mutex_lock(&m);
		weft_mutex_unlock(&m);
		weft_mutex_unlock(&m);
		_exit(0); /* not reached */
	}
	close(fds[1]);
	/* To its end: a full buffer must not close the pipe on the child
	 * (SIGPIPE, not the SIGABRT looked for). */
	for (;;) {
		bool room = got < (ssize_t)sizeof(msg) - 1;

		n = read(fds[0], room ? msg + got : scratch,
			 room ? sizeof(msg) - 1 - (size_t)got : sizeof(scratch));
		if (n <= 0)
			break;
		if (room)
			got += n;
	}
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
	assert_non_null(strstr(msg, "twice-unlocked"));
	assert_non_null(strstr(msg, "unlocked while not locked"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mutex_exact_count),
		cmocka_unit_test(test_mutex_trylock),
		cmocka_unit_test(test_mutex_unlock_on_another_worker),
		cmocka_unit_test(test_mutex_unlock_unlocked_panics),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
