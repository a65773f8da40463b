/* SPDX-License-Identifier: MIT */
/*
 * Any fd's readiness, awaited (weft/fd.h): a registration with the driver
 * like net.c's sockets, except that the fd stays the caller's (shutdown
 * does not close it: io_reg_t.borrowed) and the caller does its own
 * operations.  The readiness word, its tick and the lost-wake-up argument
 * are the driver's (driver.c: weft__io_poll_ready() registers the waker,
 * then re-checks; weft__io_clear_ready() keeps a newer edge).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "weft/fd.h"

#include "driver_internal.h"
#include "runtime_internal.h"

struct weft_fd_s {
	io_reg_t *reg;
	int fd; /* reg->fd becomes -1 when shutdown detaches it */
};

/* The driver's bits for one direction as weft/fd.h's. */
static uint32_t to_events(uint32_t ev)
{
	uint32_t out = ev & (WEFT_FD_IN | WEFT_FD_OUT | WEFT_FD_ERR |
			     WEFT_FD_SHUTDOWN);

	if (ev & (IO_READ_CLOSED | IO_WRITE_CLOSED))
		out |= WEFT_FD_HUP;
	return out;
}

_Static_assert(WEFT_FD_IN == IO_READABLE && WEFT_FD_OUT == IO_WRITABLE &&
		       WEFT_FD_ERR == IO_ERROR &&
		       WEFT_FD_SHUTDOWN == IO_SHUTDOWN,
	       "weft/fd.h's bits are the driver's");

int weft_fd_register(weft_runtime_t *rt, int fd, weft_fd_t **out)
{
	weft_fd_t *f;
	int flags, err;

	if (!rt)
		rt = weft_runtime_current();
	if (!rt || fd < 0 || !out)
		return -EINVAL;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0)
		return -errno;
	/* A blocking fd would stall the worker that tries it. */
	if (!(flags & O_NONBLOCK))
		return -EINVAL;
	/* Relaxed: a courtesy check; racing destroy is the caller's fault. */
	if (load_relaxed(&rt->shutdown))
		return -ESHUTDOWN;
	f = malloc(sizeof(*f));
	if (!f)
		return -ENOMEM;
	err = weft__io_register_borrowed(&rt->driver, fd, &f->reg);
	if (err) {
		free(f);
		return err;
	}
	f->fd = fd;
	*out = f;
	return 0;
}

weft_poll_t weft_fd_poll_ready(weft_fd_t *f, weft_fd_dir_t dir, weft_cx_t *cx,
			       weft_fd_ready_t *ready)
{
	uint32_t ev;

	if (!weft__coop_poll(cx))
		return WEFT_PENDING;
	if (weft__io_poll_ready(f->reg,
				dir == WEFT_FD_WRITE ? IO_DIR_WRITE : IO_DIR_READ,
				cx, &ev) == WEFT_PENDING)
		return WEFT_PENDING;
	weft__coop_progress();
	ready->events = to_events(ev);
	ready->token = ev;
	return WEFT_READY;
}

void weft_fd_clear_ready(weft_fd_t *f, weft_fd_ready_t ready)
{
	weft__io_clear_ready(f->reg, ready.token);
}

int weft_fd_fd(const weft_fd_t *f)
{
	return f->fd;
}

int weft_fd_deregister(weft_fd_t *f)
{
	int err;

	if (!f)
		return 0;
	/* Frees a detached registration, or hands it to the driver. */
	err = weft__io_deregister(f->reg);
	free(f);
	return err;
}
