/* SPDX-License-Identifier: MIT */
/*
 * Which I/O backend a runtime's driver uses (io_backend.h): $WEFT_IO, read
 * once per runtime at its creation.  "auto" (the default) takes io_uring
 * where it was built in, URING_BY_DEFAULT is set and the kernel gives what
 * io_uring.c needs, and epoll otherwise, saying nothing; "uring" insists,
 * and a runtime that cannot have it is not created (one line on stderr,
 * -EOPNOTSUPP), so a run that asked for io_uring never measures or tests
 * epoll unawares.
 *
 * URING_BY_DEFAULT is 0 while io_uring.c is readiness only: it is slower
 * than epoll at 64 connections (0.65x echo, 0.76x HTTP,
 * tools/bench/README.md), so "auto" keeps epoll until the backend pays.
 *
 * Under valgrind "auto" takes epoll: valgrind (3.19) holds its one big
 * lock through io_uring_enter(), so a driver blocked in the ring would
 * stop every other thread.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define HAVE_VALGRIND_H 1
#endif

#include "io_backend.h"
#include "knob.h"

#define URING_BY_DEFAULT 0

enum { IO_CHOICE_AUTO, IO_CHOICE_EPOLL, IO_CHOICE_URING };

static const char *const io_choices[] = { "auto", "epoll", "uring", NULL };

int weft__io_backend_create(io_backend_t **out)
{
	int choice = weft__knob_choice("WEFT_IO", io_choices, IO_CHOICE_AUTO);
	const char *why;

	if (choice == IO_CHOICE_EPOLL ||
	    (choice == IO_CHOICE_AUTO && !URING_BY_DEFAULT))
		return weft__io_epoll_create(out);
#ifdef HAVE_VALGRIND_H
	if (choice == IO_CHOICE_AUTO && RUNNING_ON_VALGRIND)
		return weft__io_epoll_create(out);
#endif
#ifdef WEFT_HAVE_URING
	int err = weft__io_uring_create(out);

	if (!err)
		return 0;
	why = strerror(-err);
#else
	why = "not built in: liburing not found, or WEFT_URING=OFF";
#endif
	if (choice == IO_CHOICE_AUTO)
		return weft__io_epoll_create(out);
	fprintf(stderr, "weft: WEFT_IO=uring: io_uring unavailable (%s)\n",
		why);
	return -EOPNOTSUPP;
}

const char *weft__io_backend_name(const io_backend_t *b)
{
	return b->kind == IO_BACKEND_URING ? "uring" : "epoll";
}
