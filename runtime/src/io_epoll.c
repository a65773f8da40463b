/* SPDX-License-Identifier: MIT */
/*
 * The epoll backend: one epoll instance, every fd registered once for
 * EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, the registration's pointer in
 * the event data.  Timeouts are rounded up to whole milliseconds (never
 * early), or passed exactly through epoll_pwait2() where the kernel has it.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "io_backend.h"

#define MAX_EVENTS 256

struct io_epoll_s {
	io_backend_t base; /* first: io_backend.h's dispatch */
	int epfd;
	int have_pwait2; /* 1 yes, 0 no, -1 unknown */
	struct epoll_event events[MAX_EVENTS];
};

int weft__io_epoll_create(io_backend_t **out)
{
	struct io_epoll_s *b = malloc(sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (b->epfd < 0) {
		int err = -errno;

		free(b);
		return err;
	}
	b->base.kind = IO_BACKEND_EPOLL;
	b->have_pwait2 = -1;
	*out = &b->base;
	return 0;
}

static struct io_epoll_s *epoll_of(io_backend_t *b)
{
	return (struct io_epoll_s *)b;
}

int weft__io_epoll_add(io_backend_t *b, int fd, void *data)
{
	struct epoll_event ev = {
		.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
		.data.ptr = data,
	};

	return epoll_ctl(epoll_of(b)->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno :
								      0;
}

int weft__io_epoll_del(io_backend_t *b, int fd)
{
	return epoll_ctl(epoll_of(b)->epfd, EPOLL_CTL_DEL, fd, NULL) ? -errno :
								       0;
}

/* epoll's event bits are poll(2)'s: one mapping serves both backends. */
_Static_assert(EPOLLIN == POLLIN && EPOLLPRI == POLLPRI &&
		       EPOLLOUT == POLLOUT && EPOLLRDHUP == POLLRDHUP &&
		       EPOLLHUP == POLLHUP && EPOLLERR == POLLERR,
	       "epoll's event bits are poll's");

#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441
#endif

static int wait_events(struct io_epoll_s *b, int max, int64_t timeout_ns)
{
	int n;

	if (timeout_ns > 0 && b->have_pwait2 != 0) {
		struct timespec ts = {
			.tv_sec = timeout_ns / 1000000000,
			.tv_nsec = timeout_ns % 1000000000,
		};

		n = (int)syscall(SYS_epoll_pwait2, b->epfd, b->events, max,
				 &ts, NULL, 0);
		if (n >= 0 || errno != ENOSYS) {
			b->have_pwait2 = 1;
			return n;
		}
		b->have_pwait2 = 0;
	}
	if (timeout_ns < 0)
		return epoll_wait(b->epfd, b->events, max, -1);
	/* Round up: never wake before the deadline. */
	return epoll_wait(b->epfd, b->events, max,
			  (int)((timeout_ns + 999999) / 1000000));
}

int weft__io_epoll_poll(io_backend_t *base, io_event_t *ev, int max,
			int64_t timeout_ns)
{
	struct io_epoll_s *b = epoll_of(base);
	int n;

	if (max > MAX_EVENTS)
		max = MAX_EVENTS;
	if (timeout_ns > (int64_t)1000000000 * 3600)
		timeout_ns = (int64_t)1000000000 * 3600;
	n = wait_events(b, max, timeout_ns);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		ev[i].data = b->events[i].data.ptr;
		ev[i].ready = weft__io_ready_of(b->events[i].events);
	}
	return n;
}

void weft__io_epoll_free(io_backend_t *base)
{
	struct io_epoll_s *b = epoll_of(base);

	close(b->epfd);
	free(b);
}
