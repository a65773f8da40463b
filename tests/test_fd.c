/* SPDX-License-Identifier: MIT */
/*
 * weft/fd.h: any fd's readiness awaited by a task, with real pipes and
 * eventfds fed by plain threads.  Every byte and every count arrives
 * exactly once (the edge-triggered rules: clear only after EAGAIN, and an
 * edge between the poll and the clear is kept); a hang-up reads as such;
 * the calls refuse what epoll or the rules refuse; shutdown leaves the
 * caller's fd open.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "test_helpers.h"

#include "weft/fd.h"

static weft_runtime_t *rt_new(unsigned workers)
{
	weft_runtime_t *rt = NULL;

	assert_int_equal(weft_runtime_create(
				 &(weft_config_t){ .workers = workers }, &rt),
			 0);
	return rt;
}

/* A task's state is copied in: the tests' futures live on their stack,
 * and the task holds a pointer to one and its poll. */
struct boxed {
	weft_poll_cb poll;
	void *state;
};

static weft_poll_t boxed_poll(void *arg, weft_cx_t *cx)
{
	struct boxed *b = arg;

	return b->poll(b->state, cx);
}

static int spawn_boxed(weft_runtime_t *rt, weft_poll_cb poll, void *state,
		       weft_join_t **j)
{
	struct boxed b = { poll, state };

	return weft_spawn_with(rt,
			       &(weft_spawn_t){ .poll = boxed_poll,
						.state = &b,
						.size = sizeof(b),
						.name = "fd-test",
						.file = __FILE__,
						.line = __LINE__ },
			       j);
}

/* Runs @poll over @state as a task and waits for it. */
static void run(weft_runtime_t *rt, weft_poll_cb poll, void *state)
{
	weft_join_t *j;

	assert_int_equal(spawn_boxed(rt, poll, state, &j), 0);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
}

/* ------------------------------------------------------- a pipe, read */

struct reader {
	weft_fd_t *f;
	uint64_t bytes, sum;
	_Atomic uint64_t pendings; /* read by the test thread meanwhile */
	uint32_t last_events;
	int err;
};

/* Reads until end of file, the loop weft/fd.h shows. */
static weft_poll_t reader_poll(void *arg, weft_cx_t *cx)
{
	struct reader *r = arg;
	unsigned char buf[512];

	for (;;) {
		weft_fd_ready_t ready;
		ssize_t n;

		if (weft_fd_poll_ready(r->f, WEFT_FD_READ, cx, &ready) ==
		    WEFT_PENDING) {
			r->pendings++;
			return WEFT_PENDING;
		}
		r->last_events = ready.events;
		if (ready.events & WEFT_FD_SHUTDOWN)
			return WEFT_READY;
		n = read(weft_fd_fd(r->f), buf, sizeof(buf));
		if (n < 0 && errno == EAGAIN) {
			weft_fd_clear_ready(r->f, ready);
			continue;
		}
		if (n < 0) {
			r->err = -errno;
			return WEFT_READY;
		}
		if (n == 0)
			return WEFT_READY;
		r->bytes += (uint64_t)n;
		for (ssize_t i = 0; i < n; i++)
			r->sum += buf[i];
	}
}

struct writer_thread {
	int fd;
	unsigned total;
	uint64_t sum;
};

/* Writes @total bytes in uneven bursts, pausing between, then closes. */
static void *pipe_writer(void *arg)
{
	struct writer_thread *w = arg;
	unsigned char buf[700];
	unsigned done = 0, round = 0;
	bool paused = false;

	while (done < w->total) {
		size_t len = 1 + (round * 97u) % sizeof(buf);

		if (len > w->total - done)
			len = w->total - done;
		for (size_t i = 0; i < len; i++) {
			buf[i] = (unsigned char)(done + i);
			w->sum += buf[i];
		}
		for (size_t off = 0; off < len;) {
			ssize_t n = write(w->fd, buf + off, len - off);

			if (n > 0)
				off += (size_t)n;
		}
		done += (unsigned)len;
		if (++round % 16 == 0)
			usleep(200);
		/* Once a long pause, so that the reader drains the pipe and
		 * waits however the threads are scheduled (valgrind runs one
		 * at a time). */
		if (!paused && done >= w->total / 2) {
			usleep(20000);
			paused = true;
		}
	}
	close(w->fd);
	return NULL;
}

static void test_fd_pipe_every_byte(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	struct writer_thread w = { .total = scale_count(400000) };
	struct reader r = { 0 };
	pthread_t t;
	int p[2];

	(void)state;
	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	/* The writer's end blocks: the thread waits for the reader. */
	assert_int_equal(fcntl(p[1], F_SETFL, 0), 0);
	w.fd = p[1];
	assert_int_equal(weft_fd_register(rt, p[0], &r.f), 0);
	assert_int_equal(weft_fd_fd(r.f), p[0]);
	assert_int_equal(pthread_create(&t, NULL, pipe_writer, &w), 0);
	run(rt, reader_poll, &r);
	pthread_join(t, NULL);
	assert_int_equal(r.err, 0);
	assert_int_equal(r.bytes, w.total);
	assert_int_equal(r.sum, w.sum);
	/* It waited: the writer pauses. */
	assert_true(r.pendings > 0);
	assert_int_equal(weft_fd_deregister(r.f), 0);
	close(p[0]);
	weft_runtime_destroy(rt);
}

/*
 * A hang-up wakes the reader and stays: the poll after it is READY with
 * WEFT_FD_HUP, and read says end of file.  (A reader that drains the last
 * data may see end of file before the hang-up's edge is turned: the rule
 * is to do the read, not to wait for the bit.)
 */
static void test_fd_hangup(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	struct reader r = { 0 };
	weft_join_t *j;
	int p[2];

	(void)state;
	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	assert_int_equal(weft_fd_register(rt, p[0], &r.f), 0);
	assert_int_equal(spawn_boxed(rt, reader_poll, &r, &j), 0);
	while (!weft_join_is_finished(j) && !r.pendings)
		usleep(1000);
	close(p[1]);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
	assert_int_equal(r.err, 0);
	assert_int_equal(r.bytes, 0);
	assert_true(r.last_events & WEFT_FD_HUP);
	assert_int_equal(weft_fd_deregister(r.f), 0);
	close(p[0]);
	weft_runtime_destroy(rt);
}

/* ---------------------------------------------------- an eventfd, read */

struct counter {
	weft_fd_t *f;
	uint64_t want, got;
	int err;
};

static weft_poll_t counter_poll(void *arg, weft_cx_t *cx)
{
	struct counter *c = arg;

	while (c->got < c->want) {
		weft_fd_ready_t ready;
		eventfd_t v;

		if (weft_fd_poll_ready(c->f, WEFT_FD_READ, cx, &ready) ==
		    WEFT_PENDING)
			return WEFT_PENDING;
		if (eventfd_read(weft_fd_fd(c->f), &v) == 0) {
			c->got += v;
			continue;
		}
		if (errno != EAGAIN) {
			c->err = -errno;
			return WEFT_READY;
		}
		weft_fd_clear_ready(c->f, ready);
	}
	return WEFT_READY;
}

struct signaller {
	int fd;
	unsigned n;
};

static void *eventfd_signaller(void *arg)
{
	struct signaller *s = arg;

	for (unsigned i = 0; i < s->n; i++) {
		eventfd_write(s->fd, 1);
		if (i % 8 == 0)
			usleep(50);
	}
	return NULL;
}

/*
 * Three threads signal one eventfd; the task counts what it reads.  The
 * count is exact: every signal is in some read, none is read twice, and
 * the task never waits for an edge it cleared away.
 */
static void test_fd_eventfd_exact_count(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	struct signaller s[3];
	struct counter c = { 0 };
	pthread_t t[3];
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	(void)state;
	assert_true(efd >= 0);
	assert_int_equal(weft_fd_register(rt, efd, &c.f), 0);
	for (int i = 0; i < 3; i++) {
		s[i] = (struct signaller){ efd, scale_count(3000) };
		c.want += s[i].n;
		assert_int_equal(pthread_create(&t[i], NULL, eventfd_signaller,
						&s[i]),
				 0);
	}
	run(rt, counter_poll, &c);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(c.err, 0);
	assert_int_equal(c.got, c.want);
	assert_int_equal(weft_fd_deregister(c.f), 0);
	close(efd);
	weft_runtime_destroy(rt);
}

/* --------------------------------------------------- a pipe, written */

struct pusher {
	weft_fd_t *f;
	uint64_t left, pendings;
	int err;
};

static weft_poll_t pusher_poll(void *arg, weft_cx_t *cx)
{
	struct pusher *p = arg;
	char buf[4096];

	memset(buf, 'w', sizeof(buf));
	while (p->left) {
		weft_fd_ready_t ready;
		size_t len = p->left < sizeof(buf) ? (size_t)p->left :
						      sizeof(buf);
		ssize_t n;

		if (weft_fd_poll_ready(p->f, WEFT_FD_WRITE, cx, &ready) ==
		    WEFT_PENDING) {
			p->pendings++;
			return WEFT_PENDING;
		}
		n = write(weft_fd_fd(p->f), buf, len);
		if (n < 0 && errno == EAGAIN) {
			weft_fd_clear_ready(p->f, ready);
			continue;
		}
		if (n < 0) {
			p->err = -errno;
			return WEFT_READY;
		}
		p->left -= (uint64_t)n;
	}
	return WEFT_READY;
}

struct drainer {
	int fd;
	uint64_t bytes;
};

static void *pipe_drainer(void *arg)
{
	struct drainer *d = arg;
	char buf[1000];
	ssize_t n;

	while ((n = read(d->fd, buf, sizeof(buf))) > 0) {
		d->bytes += (uint64_t)n;
		if (d->bytes % 7 == 0)
			usleep(20);
	}
	return NULL;
}

/* The writable side: a full pipe, a slow reader, every byte through. */
static void test_fd_pipe_writable(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	struct pusher pu = { .left = scale_count(1u << 22) };
	struct drainer d = { 0 };
	uint64_t total = pu.left, prefill = 0;
	pthread_t t;
	char c = 'x';
	int p[2];

	(void)state;
	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	/* Full before the task starts: its first write says EAGAIN. */
	while (write(p[1], &c, 1) == 1)
		prefill++;
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(fcntl(p[0], F_SETFL, 0), 0);
	d.fd = p[0];
	assert_int_equal(weft_fd_register(rt, p[1], &pu.f), 0);
	assert_int_equal(pthread_create(&t, NULL, pipe_drainer, &d), 0);
	run(rt, pusher_poll, &pu);
	assert_int_equal(weft_fd_deregister(pu.f), 0);
	close(p[1]);
	pthread_join(t, NULL);
	assert_int_equal(pu.err, 0);
	assert_true(pu.pendings > 0);
	assert_int_equal(d.bytes, total + prefill);
	close(p[0]);
	weft_runtime_destroy(rt);
}

/* ------------------------------------------------------------ refusals */

static void test_fd_refusals(void **state)
{
	weft_runtime_t *rt = rt_new(1);
	char path[] = "/tmp/weft-test-fd-XXXXXX";
	weft_fd_t *f, *g;
	int file = mkstemp(path), p[2];

	(void)state;
	assert_true(file >= 0);
	unlink(path);
	assert_int_equal(fcntl(file, F_SETFL, O_NONBLOCK), 0);
	/* epoll refuses regular files. */
	assert_int_equal(weft_fd_register(rt, file, &f), -EPERM);
	close(file);
	/* Closed, negative, and no runtime current on this thread. */
	assert_int_equal(weft_fd_register(rt, file, &f), -EBADF);
	assert_int_equal(weft_fd_register(rt, -1, &f), -EINVAL);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(weft_fd_register(NULL, p[0], &f), -EINVAL);
	/* Blocking: it would stall the worker. */
	assert_int_equal(weft_fd_register(rt, p[0], &f), -EINVAL);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(weft_fd_register(rt, p[0], &f), 0);
	/* Twice. */
	assert_int_equal(weft_fd_register(rt, p[0], &g), -EEXIST);
	assert_int_equal(weft_fd_deregister(f), 0);
	assert_int_equal(weft_fd_deregister(NULL), 0);
	/* Again after deregistering: fine. */
	assert_int_equal(weft_fd_register(rt, p[0], &f), 0);
	assert_int_equal(weft_fd_deregister(f), 0);
	close(p[0]);
	close(p[1]);
	weft_runtime_destroy(rt);
}

/* ------------------------------------------------------------ shutdown */

struct parked_reader {
	weft_fd_t *f;
	atomic_int polled;
};

static weft_poll_t parked_reader_poll(void *arg, weft_cx_t *cx)
{
	struct parked_reader *r = arg;
	weft_fd_ready_t ready;

	atomic_store(&r->polled, 1);
	/* No data ever comes: parked until the runtime goes. */
	if (weft_fd_poll_ready(r->f, WEFT_FD_READ, cx, &ready) == WEFT_PENDING)
		return WEFT_PENDING;
	return WEFT_READY;
}

/*
 * A handle still registered when the runtime is destroyed (owned by the
 * test, not by the task parked on it): destroy detaches it and does not
 * close the fd, which stays the caller's; deregistering then frees the
 * handle and says so.
 */
static void test_fd_shutdown_keeps_fd(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	struct parked_reader r = { 0 };
	char c = 'k';
	int p[2];

	(void)state;
	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	assert_int_equal(weft_fd_register(rt, p[0], &r.f), 0);
	assert_int_equal(spawn_boxed(rt, parked_reader_poll, &r, NULL), 0);
	while (!atomic_load(&r.polled))
		usleep(1000);
	weft_runtime_destroy(rt);
	assert_int_equal(weft_fd_deregister(r.f), -ESHUTDOWN);
	/* Still open, still the pipe. */
	assert_int_equal(fcntl(p[0], F_GETFD) >= 0, 1);
	assert_int_equal(write(p[1], &c, 1), 1);
	c = 0;
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_int_equal(c, 'k');
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fd_pipe_every_byte),
		cmocka_unit_test(test_fd_hangup),
		cmocka_unit_test(test_fd_eventfd_exact_count),
		cmocka_unit_test(test_fd_pipe_writable),
		cmocka_unit_test(test_fd_refusals),
		cmocka_unit_test(test_fd_shutdown_keeps_fd),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
