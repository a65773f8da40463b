/* SPDX-License-Identifier: MIT */
/*
 * The I/O backends (runtime/src/io_backend.h) through their internal API,
 * each on its own: the runtime uses the one $WEFT_IO names (so that the
 * test suite's io_uring repeat cannot run epoll unawares), and each
 * backend reports an fd's edges, refuses what epoll refuses, stops
 * reporting a deleted fd, waits no less than its timeout, sees a
 * registration another thread makes while it is blocked, and keeps
 * reporting an fd whose registering thread has exited (io_uring cancels
 * an exiting thread's requests: the backend arms them again).
 *
 * The io_uring cases skip under valgrind (see io_backend.c) and with
 * WEFT_IO=epoll: tools/test.sh runs them in its io_uring repeat.
 *
 * `test_io_backend --uring-available` says in one line whether this kernel
 * gives io_uring what the backend needs, and exits 0 if so, 1 if not:
 * tools/test.sh asks before its io_uring repeat.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime_internal.h"
#include "test_helpers.h"
#include "io_backend_helpers.h"

typedef int (*create_fn)(io_backend_t **out);

struct backend_case {
	const char *name;
	create_fn create;
};

static const struct backend_case epoll_case = { "epoll",
						weft__io_epoll_create };
#ifndef WEFT_HAVE_URING
/* Not built in: every io_uring case says so and skips. */
static int weft__io_uring_create(io_backend_t **out)
{
	(void)out;
	return -ENOSYS;
}
#endif
static const struct backend_case uring_case = { "uring",
						weft__io_uring_create };

/* The backend of @c; the test skips where the kernel refuses it. */
static io_backend_t *backend_new(const struct backend_case *c)
{
	io_backend_t *b = io_backend_or_skip(
		c->create, c->name, c->create != weft__io_epoll_create);

	assert_string_equal(weft__io_backend_name(b), c->name);
	return b;
}

static void edges(const struct backend_case *c)
{
	io_backend_t *b = backend_new(c);
	int p[2], tag_r, tag_w;
	char buf[8];

	pipe_nb(p);
	assert_int_equal(weft__io_backend_add(b, p[0], &tag_r), 0);
	assert_int_equal(weft__io_backend_add(b, p[1], &tag_w), 0);
	/* The write end is writable from the start; the read end quiet. */
	assert_true(wait_for(b, &tag_w) & IO_WRITABLE);
	assert_false(any_event_for(b, &tag_r));
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_true(wait_for(b, &tag_r) & IO_READABLE);
	/* Edge-triggered: nothing new, no event. */
	assert_false(any_event_for(b, &tag_r));
	assert_int_equal(read(p[0], buf, sizeof(buf)), 1);
	/* Deleted before it is closed, as io_backend.h asks. */
	assert_int_equal(weft__io_backend_del(b, p[1]), 0);
	close(p[1]);
	assert_true(wait_for(b, &tag_r) & IO_READ_CLOSED);
	/* Refused as epoll refuses. */
	assert_int_equal(weft__io_backend_add(b, p[0], &tag_w), -EEXIST);
	assert_int_equal(weft__io_backend_del(b, p[0]), 0);
	close(p[0]);
	weft__io_backend_free(b);
}

static void refusals(const struct backend_case *c)
{
	io_backend_t *b = backend_new(c);
	char path[] = "/tmp/weft-io-backend-XXXXXX";
	int file, tag;

	file = mkstemp(path);
	assert_true(file >= 0);
	unlink(path);
	assert_int_equal(weft__io_backend_add(b, file, &tag), -EPERM);
	close(file);
	assert_int_equal(weft__io_backend_add(b, file, &tag), -EBADF);
	/*
	 * A device with no poll (/dev/null, as a daemon's stdin): epoll
	 * refuses it; io_uring's poll would end and be armed again every
	 * turn, a busy poller (the review of the io_uring backend).
	 */
	file = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(file >= 0);
	assert_int_equal(weft__io_backend_add(b, file, &tag), -EPERM);
	close(file);
	weft__io_backend_free(b);
}

static void del_silences(const struct backend_case *c)
{
	io_backend_t *b = backend_new(c);
	int p[2], tag;

	pipe_nb(p);
	assert_int_equal(weft__io_backend_add(b, p[0], &tag), 0);
	assert_int_equal(weft__io_backend_del(b, p[0]), 0);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_false(any_event_for(b, &tag));
	/* The same fd number again, a new registration: reported. */
	assert_int_equal(weft__io_backend_add(b, p[0], &tag), 0);
	assert_true(wait_for(b, &tag) & IO_READABLE);
	assert_int_equal(weft__io_backend_del(b, p[0]), 0);
	close(p[0]);
	close(p[1]);
	weft__io_backend_free(b);
}

/*
 * The blocking polls below run on a thread of their own, which has never
 * used an io_uring: a thread that has may find task work the kernel left
 * it (a ring's teardown, an earlier case's) that interrupts its next
 * wait, which a poll reports as 0 events, like a timeout.  The thread only
 * records; the asserts are the test's.
 */
struct timed_poll {
	io_backend_t *b;
	int64_t timeout_ns;
	int n;
	io_event_t ev[4];
	uint64_t took_ns;
};

static void *timed_poll_main(void *arg)
{
	struct timed_poll *tp = arg;
	uint64_t t0 = weft_now_ns();

	tp->n = weft__io_backend_poll(tp->b, tp->ev, 4, tp->timeout_ns);
	tp->took_ns = weft_now_ns() - t0;
	return NULL;
}

/*
 * The same until an event comes or the timeout passes: io_uring's poller
 * is woken by an add (a turn with no event) and arms it at its next poll.
 */
static void *poll_until_event_main(void *arg)
{
	struct timed_poll *tp = arg;
	uint64_t t0 = weft_now_ns(), end = t0 + (uint64_t)tp->timeout_ns;

	do
		tp->n = weft__io_backend_poll(tp->b, tp->ev, 4,
					      (int64_t)(end - weft_now_ns()));
	while (tp->n == 0 && weft_now_ns() < end);
	tp->took_ns = weft_now_ns() - t0;
	return NULL;
}

static void timed_poll_start(struct timed_poll *tp, pthread_t *th,
			     io_backend_t *b, int64_t timeout_ns)
{
	memset(tp, 0, sizeof(*tp));
	tp->b = b;
	tp->timeout_ns = timeout_ns;
	assert_int_equal(pthread_create(th, NULL, timed_poll_main, tp), 0);
}

static void timeout_not_early(const struct backend_case *c)
{
	io_backend_t *b = backend_new(c);
	static const int64_t timeouts[] = { 20000000, 1500000 };
	struct timed_poll tp;
	pthread_t th;

	/* 1.5 ms: not rounded to whole milliseconds either way. */
	for (size_t i = 0; i < 2; i++) {
		timed_poll_start(&tp, &th, b, timeouts[i]);
		assert_int_equal(pthread_join(th, NULL), 0);
		assert_int_equal(tp.n, 0);
		assert_true(tp.took_ns >= (uint64_t)timeouts[i]);
	}
	weft__io_backend_free(b);
}

struct adder {
	io_backend_t *b;
	int fd;
	void *tag;
	int err;
};

static void *adder_main(void *arg)
{
	struct adder *a = arg;

	a->err = weft__io_backend_add(a->b, a->fd, a->tag);
	return NULL;
}

/* Added by this thread while another is blocked: its polls see it. */
static void add_while_blocked(const struct backend_case *c)
{
	io_backend_t *b = backend_new(c);
	struct timed_poll tp;
	pthread_t th;
	int p[2], tag;

	pipe_nb(p);
	assert_int_equal(write(p[1], "x", 1), 1);
	memset(&tp, 0, sizeof(tp));
	tp.b = b;
	tp.timeout_ns = 5000000000;
	assert_int_equal(pthread_create(&th, NULL, poll_until_event_main, &tp),
			 0);
	usleep(20000);
	assert_int_equal(weft__io_backend_add(b, p[0], &tag), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(tp.n, 1);
	assert_ptr_equal(tp.ev[0].data, &tag);
	assert_true(tp.ev[0].ready & IO_READABLE);
	assert_int_equal(weft__io_backend_del(b, p[0]), 0);
	close(p[0]);
	close(p[1]);
	weft__io_backend_free(b);
}

/* Registered by a thread that has exited since: still reported. */
static void registrar_exits(const struct backend_case *c)
{
	io_backend_t *b = backend_new(c);
	int p[2], tag;
	struct adder a;
	pthread_t th;

	pipe_nb(p);
	a = (struct adder){ .b = b, .fd = p[0], .tag = &tag };
	assert_int_equal(pthread_create(&th, NULL, adder_main, &a), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.err, 0);
	for (int i = 0; i < 3; i++) {
		char ch;

		assert_int_equal(write(p[1], "x", 1), 1);
		assert_true(wait_for(b, &tag) & IO_READABLE);
		assert_int_equal(read(p[0], &ch, 1), 1);
	}
	assert_int_equal(weft__io_backend_del(b, p[0]), 0);
	close(p[0]);
	close(p[1]);
	weft__io_backend_free(b);
}

/* Each case once per backend. */
#define BOTH(fn)                                                               \
	static void test_io_backend_epoll_##fn(void **state)                   \
	{                                                                      \
		(void)state;                                                   \
		fn(&epoll_case);                                               \
	}                                                                      \
	static void test_io_backend_uring_##fn(void **state)                   \
	{                                                                      \
		(void)state;                                                   \
		fn(&uring_case);                                               \
	}

BOTH(edges)
BOTH(refusals)
BOTH(del_silences)
BOTH(timeout_not_early)
BOTH(add_while_blocked)
BOTH(registrar_exits)

/* The runtime's driver uses what $WEFT_IO says. */
static void test_io_backend_runtime_uses_weft_io(void **state)
{
	const char *want = getenv("WEFT_IO");
	weft_runtime_t *rt;

	(void)state;
	assert_int_equal(weft_runtime_create(NULL, &rt), 0);
	if (want && (!strcmp(want, "epoll") || !strcmp(want, "uring")))
		assert_string_equal(weft__io_backend_name(rt->driver.backend),
				    want);
	print_message("runtime's I/O backend: %s (WEFT_IO=%s)\n",
		      weft__io_backend_name(rt->driver.backend),
		      want ? want : "");
	weft_runtime_destroy(rt);
}

static int uring_available(void)
{
#ifdef WEFT_HAVE_URING
	io_backend_t *b;
	int err = weft__io_uring_create(&b);

	if (!err) {
		weft__io_backend_free(b);
		printf("io_uring: available\n");
		return 0;
	}
	printf("io_uring: refused by this kernel (%s)\n", strerror(-err));
#else
	printf("io_uring: not built in (liburing not found)\n");
#endif
	return 1;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_io_backend_runtime_uses_weft_io),
		cmocka_unit_test(test_io_backend_epoll_edges),
		cmocka_unit_test(test_io_backend_uring_edges),
		cmocka_unit_test(test_io_backend_epoll_refusals),
		cmocka_unit_test(test_io_backend_uring_refusals),
		cmocka_unit_test(test_io_backend_epoll_del_silences),
		cmocka_unit_test(test_io_backend_uring_del_silences),
		cmocka_unit_test(test_io_backend_epoll_timeout_not_early),
		cmocka_unit_test(test_io_backend_uring_timeout_not_early),
		cmocka_unit_test(test_io_backend_epoll_add_while_blocked),
		cmocka_unit_test(test_io_backend_uring_add_while_blocked),
		cmocka_unit_test(test_io_backend_epoll_registrar_exits),
		cmocka_unit_test(test_io_backend_uring_registrar_exits),
	};

	if (argc == 2 && !strcmp(argv[1], "--uring-available"))
		return uring_available();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
