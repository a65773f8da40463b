/* SPDX-License-Identifier: MIT */
/*
 * Fiber tasks: straight-line code over weft_await(), results through join
 * handles, yields and sleeps, oneshot ping-pong between fibers and
 * stackless tasks, migration between workers, cancellation unwinding the
 * fiber, and a stack overflow dying on the guard page (in a child process).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <weft/weft.h>

/*
 * cmocka's assert_*() may only run on the test's thread; code on fibers
 * (worker threads) counts what went wrong here, and main() fails on it.
 */
static atomic_int fiber_errors;
#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: check failed: %s\n",           \
				__FILE__, __LINE__, #cond);                    \
			atomic_fetch_add(&fiber_errors, 1);                    \
		}                                                              \
	} while (0)
#define CHECK_EQ(a, b) CHECK((a) == (b))

static weft_runtime_t *rt_new(unsigned workers)
{
	weft_runtime_t *rt = NULL;

	assert_int_equal(weft_runtime_create(&(weft_config_t){ .workers = workers },
					     &rt),
			 0);
	return rt;
}

static void *add_one(void *arg)
{
	return (void *)((uintptr_t)arg + 1);
}

static void test_fiber_returns_output(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	assert_int_equal(weft_spawn_fiber(rt, "add", add_one, (void *)41, &j),
			 0);
	assert_int_equal(weft_join_wait(j, &out), 0);
	assert_int_equal((uintptr_t)out, 42);
	weft_join_drop(j);
	weft_runtime_destroy(rt);
}

/* Counts, yielding between steps; records how often it changed thread. */
struct yielder_arg {
	int yields;
	atomic_int *total;
};

static void *yielder(void *arg)
{
	struct yielder_arg *a = arg;

	for (int i = 0; i < a->yields; i++) {
		CHECK_EQ(weft_fiber_yield(), 0);
		atomic_fetch_add(a->total, 1);
	}
	return NULL;
}

static void test_fiber_yields_and_migrates(void **state)
{
	enum { N = 64, Y = 200 };
	weft_runtime_t *rt = rt_new(2);
	struct yielder_arg a[N];
	weft_join_t *j[N];
	atomic_int total = 0;

	(void)state;
	for (int i = 0; i < N; i++) {
		a[i] = (struct yielder_arg){ .yields = Y, .total = &total };
		assert_int_equal(weft_spawn_fiber(rt, "yielder", yielder, &a[i],
						  &j[i]),
				 0);
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(weft_join_wait(j[i], NULL), 0);
		weft_join_drop(j[i]);
	}
	assert_int_equal(atomic_load(&total), N * Y);
	weft_runtime_destroy(rt);
}

static void *sleeper(void *arg)
{
	uint64_t t0 = weft_now_ns();

	(void)arg;
	CHECK_EQ(weft_fiber_sleep(WEFT_MSEC(20)), 0);
	/* Never early. */
	CHECK(weft_now_ns() - t0 >= WEFT_MSEC(20));
	return (void *)1;
}

static void test_fiber_sleep(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	assert_int_equal(weft_spawn_fiber(rt, "sleeper", sleeper, NULL, &j), 0);
	assert_int_equal(weft_join_wait(j, &out), 0);
	assert_ptr_equal(out, (void *)1);
	weft_join_drop(j);
	weft_runtime_destroy(rt);
}

/* Ping-pong over oneshots between two fibers, many rounds. */
struct pp {
	weft_oneshot_rx_t *rx;
	weft_oneshot_tx_t *tx;
	int status;
	void *value;
};

static weft_poll_t pp_recv(void *arg, weft_cx_t *cx)
{
	struct pp *p = arg;

	return weft_oneshot_poll(p->rx, cx, &p->status, &p->value);
}

static void *ponger(void *arg)
{
	struct pp *p = arg;
	void *v;

	CHECK_EQ(weft_await(pp_recv, p), 0);
	CHECK_EQ(p->status, 0);
	v = p->value;
	weft_oneshot_rx_drop(p->rx);
	CHECK_EQ(weft_oneshot_send(p->tx, (void *)((uintptr_t)v + 1)),
			 0);
	return NULL;
}

static void *pinger(void *arg)
{
	atomic_int *done = arg;

	for (uintptr_t i = 0; i < 200; i++) {
		weft_oneshot_tx_t *tx1, *tx2;
		weft_oneshot_rx_t *rx1, *rx2;
		struct pp partner, mine;

		CHECK_EQ(weft_oneshot_create(&tx1, &rx1), 0);
		CHECK_EQ(weft_oneshot_create(&tx2, &rx2), 0);
		partner = (struct pp){ .rx = rx1, .tx = tx2 };
		/* partner lives on our stack until we have its answer. */
		CHECK_EQ(weft_spawn_fiber(NULL, "ponger", ponger,
						  &partner, NULL),
				 0);
		CHECK_EQ(weft_oneshot_send(tx1, (void *)i), 0);
		mine = (struct pp){ .rx = rx2 };
		CHECK_EQ(weft_await(pp_recv, &mine), 0);
		CHECK_EQ(mine.status, 0);
		CHECK_EQ((uintptr_t)mine.value, i + 1);
		weft_oneshot_rx_drop(rx2);
	}
	atomic_fetch_add(done, 1);
	return NULL;
}

static void test_fiber_ping_pong(void **state)
{
	enum { N = 16 };
	weft_runtime_t *rt = rt_new(2);
	weft_join_t *j[N];
	atomic_int done = 0;

	(void)state;
	for (int i = 0; i < N; i++)
		assert_int_equal(weft_spawn_fiber(rt, "pinger", pinger, &done,
						  &j[i]),
				 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(weft_join_wait(j[i], NULL), 0);
		weft_join_drop(j[i]);
	}
	assert_int_equal(atomic_load(&done), N);
	weft_runtime_destroy(rt);
}

/* A fiber joining a stackless task and another fiber. */
static weft_poll_t stackless_seven(void *arg, weft_cx_t *cx)
{
	(void)arg;
	weft_cx_return(cx, (void *)7);
	return WEFT_READY;
}

static void *joiner(void *arg)
{
	weft_join_t *a, *b;
	void *va = NULL, *vb = NULL;
	int sa = -1, sb = -1;

	(void)arg;
	CHECK_EQ(weft_spawn_with(NULL,
					 &(weft_spawn_t){ .poll = stackless_seven },
					 &a),
			 0);
	CHECK_EQ(weft_spawn_fiber(NULL, "add", add_one, (void *)9, &b),
			 0);
	CHECK_EQ(weft_fiber_join(a, &sa, &va), 0);
	CHECK_EQ(weft_fiber_join(b, &sb, &vb), 0);
	weft_join_drop(a);
	weft_join_drop(b);
	CHECK_EQ(sa, 0);
	CHECK_EQ(sb, 0);
	return (void *)((uintptr_t)va + (uintptr_t)vb);
}

static void test_fiber_joins_tasks(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	weft_join_t *j;
	void *out;

	(void)state;
	assert_int_equal(weft_spawn_fiber(rt, "joiner", joiner, NULL, &j), 0);
	assert_int_equal(weft_join_wait(j, &out), 0);
	assert_int_equal((uintptr_t)out, 17);
	weft_join_drop(j);
	weft_runtime_destroy(rt);
}

/* Cancellation: the fiber sees -ECANCELED and unwinds normally. */
struct cancel_arg {
	atomic_int started;
	atomic_int unwound;
	atomic_int after_cancel_awaits;
};

static void *forever(void *arg)
{
	struct cancel_arg *c = arg;
	char *buf = malloc(64); /* freed on the unwind path: ASan checks */

	atomic_store(&c->started, 1);
	while (weft_fiber_sleep(WEFT_SEC(3600)) == 0)
		;
	/* Every await after cancellation fails at once. */
	if (weft_fiber_yield() == -ECANCELED)
		atomic_fetch_add(&c->after_cancel_awaits, 1);
	free(buf);
	atomic_store(&c->unwound, 1);
	return NULL;
}

static void test_fiber_abort_unwinds(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	struct cancel_arg c = { 0 };
	weft_join_t *j;

	(void)state;
	assert_int_equal(weft_spawn_fiber(rt, "forever", forever, &c, &j), 0);
	while (!atomic_load(&c.started))
		usleep(1000);
	weft_join_abort(j);
	assert_int_equal(weft_join_wait(j, NULL), -ECANCELED);
	weft_join_drop(j);
	assert_int_equal(atomic_load(&c.unwound), 1);
	assert_int_equal(atomic_load(&c.after_cancel_awaits), 1);
	weft_runtime_destroy(rt);
}

static void test_fiber_shutdown_unwinds(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	struct cancel_arg c[8];

	(void)state;
	memset(c, 0, sizeof(c));
	for (int i = 0; i < 8; i++)
		assert_int_equal(weft_spawn_fiber(rt, "forever", forever, &c[i],
						  NULL),
				 0);
	for (int i = 0; i < 8; i++)
		while (!atomic_load(&c[i].started))
			usleep(1000);
	weft_runtime_destroy(rt);
	for (int i = 0; i < 8; i++)
		assert_int_equal(atomic_load(&c[i].unwound), 1);
}

static void test_fiber_await_outside_fiber(void **state)
{
	weft_runtime_t *rt = rt_new(1);

	(void)state;
	assert_false(weft_in_fiber());
	/* On a plain thread weft_await is block_on. */
	assert_int_equal(weft_await(stackless_seven, NULL), 0);
	weft_runtime_destroy(rt);
}

/* Deep recursion that the optimiser cannot flatten. */
__attribute__((noinline)) static int recurse(volatile char *prev, int depth)
{
	volatile char frame[512];

	frame[0] = (char)depth;
	frame[511] = prev ? prev[0] : 0;
	if (depth == 0)
		return frame[0] + frame[511];
	return recurse(frame, depth - 1) + frame[1 % 512];
}

static void *overflow(void *arg)
{
	(void)arg;
	/* 64 KiB stack, 512+ bytes a frame: 10,000 frames overflow. */
	return (void *)(intptr_t)recurse(NULL, 10000);
}

static void test_fiber_stack_overflow_hits_guard(void **state)
{
	int fds[2], status;
	char msg[512] = { 0 };
	ssize_t n, got = 0;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		weft_runtime_t *rt = NULL;
		weft_join_t *j;

		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		if (weft_runtime_create(&(weft_config_t){ .workers = 1 }, &rt))
			_exit(3);
		if (weft_spawn_fiber(rt, "deep-recursion", overflow, NULL, &j))
			_exit(4);
		weft_join_wait(j, NULL);
		_exit(0); /* not reached: the overflow kills us */
	}
	close(fds[1]);
	while ((n = read(fds[0], msg + got, sizeof(msg) - 1 - (size_t)got)) > 0)
		got += n;
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
	assert_non_null(strstr(msg, "fiber stack overflow"));
	assert_non_null(strstr(msg, "deep-recursion"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fiber_returns_output),
		cmocka_unit_test(test_fiber_yields_and_migrates),
		cmocka_unit_test(test_fiber_sleep),
		cmocka_unit_test(test_fiber_ping_pong),
		cmocka_unit_test(test_fiber_joins_tasks),
		cmocka_unit_test(test_fiber_abort_unwinds),
		cmocka_unit_test(test_fiber_shutdown_unwinds),
		cmocka_unit_test(test_fiber_await_outside_fiber),
		cmocka_unit_test(test_fiber_stack_overflow_hits_guard),
	};

	int failed = cmocka_run_group_tests(tests, NULL, NULL);

	if (atomic_load(&fiber_errors)) {
		fprintf(stderr, "%d checks failed on fibers\n",
			atomic_load(&fiber_errors));
		return 1;
	}
	return failed;
}
