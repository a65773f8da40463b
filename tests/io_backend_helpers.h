/* SPDX-License-Identifier: MIT */
/*
 * What test_io_backend.c and test_io_uring.c share: a backend made or the
 * case skipped, a wait for one registration's event, a non-blocking pipe.
 * Include after runtime_internal.h and test_helpers.h.
 */
#ifndef WEFT_TEST_IO_BACKEND_HELPERS_H
#define WEFT_TEST_IO_BACKEND_HELPERS_H

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io_backend.h"

/*
 * The backend @create makes, named @name in the messages; the case skips
 * where it is not to be tested: @ring (io_uring) under valgrind, which
 * stops every thread while one waits in the ring, or with WEFT_IO=epoll;
 * any backend the kernel refuses here.
 */
static inline io_backend_t *io_backend_or_skip(int (*create)(io_backend_t **),
					       const char *name, bool ring)
{
	const char *want = getenv("WEFT_IO");
	io_backend_t *b = NULL;
	int err;

	if (ring && on_valgrind()) {
		print_message("%s: not under valgrind, skipped\n", name);
		skip();
	}
	if (ring && want && !strcmp(want, "epoll")) {
		print_message("%s: WEFT_IO=epoll, skipped\n", name);
		skip();
	}
	err = create(&b);
	if (err == -EPERM || err == -ENOSYS || err == -EOPNOTSUPP) {
		print_message("%s: refused here (%s), skipped\n", name,
			      strerror(-err));
		skip();
	}
	assert_int_equal(err, 0);
	return b;
}

/* Polls until an event for @data comes (at most 5 s): its bits. */
static inline uint32_t wait_for(io_backend_t *b, void *data)
{
	io_event_t ev[16];
	uint64_t end = weft_now_ns() + 5000000000ull;

	while (weft_now_ns() < end) {
		int n = weft__io_backend_poll(b, ev, 16, 100000000);

		assert_true(n >= 0);
		for (int i = 0; i < n; i++)
			if (ev[i].data == data)
				return ev[i].ready;
	}
	fail_msg("no event in 5 s");
	return 0;
}

/* Polls without blocking, twice: whether any event names @data. */
static inline bool any_event_for(io_backend_t *b, void *data)
{
	io_event_t ev[16];
	bool seen = false;

	for (int round = 0; round < 2; round++) {
		int n = weft__io_backend_poll(b, ev, 16, 0);

		assert_true(n >= 0);
		for (int i = 0; i < n; i++)
			seen |= ev[i].data == data;
	}
	return seen;
}

static inline void pipe_nb(int p[2])
{
	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
}

#endif /* WEFT_TEST_IO_BACKEND_HELPERS_H */
