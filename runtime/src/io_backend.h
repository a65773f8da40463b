/* SPDX-License-Identifier: MIT */
/*
 * The I/O readiness backend: a small static interface that one file per OS
 * mechanism implements (io_epoll.c; io_uring.c where liburing was found at
 * build time), chosen at run time by weft__io_backend_create() in
 * io_backend.c.  Registration is edge-triggered: the backend reports a
 * change to ready once, and the driver keeps the readiness until an
 * operation hits EAGAIN.
 *
 * Threads: add and del may be called from any thread, also while another
 * thread (the driver's holder) is blocked in poll, and take effect at once:
 * an event that happens after add returns is reported by a poll, and once
 * del returns no poll that starts later reports @data again (a poll under
 * way may still hand out @data: the driver frees a registration only at the
 * start of its next turn).  poll and free are the driver holder's.
 *
 * Dispatch: each backend's struct begins with io_backend_t, whose kind the
 * inline wrappers below switch on: one predictable branch, the call itself
 * direct.
 */
#ifndef WEFT_IO_BACKEND_H
#define WEFT_IO_BACKEND_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>

/* Linux's, named by <poll.h> only under _GNU_SOURCE, which not every
 * includer of this header defines (io_epoll.c checks it is epoll's). */
#ifndef POLLRDHUP
#define POLLRDHUP 0x2000
#endif

/* Readiness bits, as the driver keeps them. */
#define IO_READABLE 0x01u
#define IO_WRITABLE 0x02u
#define IO_READ_CLOSED 0x04u
#define IO_WRITE_CLOSED 0x08u
#define IO_ERROR 0x10u
#define IO_READINESS_MASK 0x1fu

enum io_backend_kind {
	IO_BACKEND_EPOLL = 0,
	IO_BACKEND_URING = 1,
};

typedef struct io_backend_s {
	enum io_backend_kind kind;
} io_backend_t;

/*
 * The readiness bits of poll(2)'s events, which io_uring's poll reports
 * and epoll's share (io_epoll.c checks that they are the same values).
 */
static inline uint32_t weft__io_ready_of(uint32_t e)
{
	uint32_t r = 0;

	if (e & (POLLIN | POLLPRI))
		r |= IO_READABLE;
	if (e & POLLOUT)
		r |= IO_WRITABLE;
	if (e & POLLRDHUP)
		r |= IO_READ_CLOSED | IO_READABLE;
	if (e & POLLHUP)
		r |= IO_READ_CLOSED | IO_WRITE_CLOSED | IO_READABLE |
		     IO_WRITABLE;
	if (e & POLLERR)
		r |= IO_ERROR | IO_READABLE | IO_WRITABLE;
	return r;
}

typedef struct io_event_s {
	void *data;
	uint32_t ready; /* IO_* bits */
} io_event_t;

/* io_backend.c */
/*
 * Creates the backend $WEFT_IO asks for: "epoll", "uring", or "auto"
 * (unset or empty is "auto": epoll for now; io_backend.c says when it will
 * take io_uring).
 * Return: 0; -EOPNOTSUPP when WEFT_IO=uring and io_uring cannot be used
 * (said in one line on stderr); -ENOMEM; another -errno from the backend.
 */
int weft__io_backend_create(io_backend_t **out);
/* "epoll" or "uring". */
const char *weft__io_backend_name(const io_backend_t *b);

/* io_epoll.c */
int weft__io_epoll_create(io_backend_t **out);
int weft__io_epoll_add(io_backend_t *b, int fd, void *data);
int weft__io_epoll_del(io_backend_t *b, int fd);
int weft__io_epoll_poll(io_backend_t *b, io_event_t *ev, int max,
			int64_t timeout_ns);
void weft__io_epoll_free(io_backend_t *b);

#ifdef WEFT_HAVE_URING
/* io_uring.c */
/*
 * Return: 0; -EOPNOTSUPP when the kernel lacks a feature io_uring.c needs;
 * -ENOMEM; or the -errno of io_uring_setup() (-ENOSYS, -EPERM under a
 * seccomp policy or kernel.io_uring_disabled).
 */
int weft__io_uring_create(io_backend_t **out);
int weft__io_uring_add(io_backend_t *b, int fd, void *data);
int weft__io_uring_del(io_backend_t *b, int fd);
int weft__io_uring_poll(io_backend_t *b, io_event_t *ev, int max,
			int64_t timeout_ns);
void weft__io_uring_free(io_backend_t *b);
int weft__io_uring_wake(io_backend_t *b);
/*
 * Tests only (test_io_uring), to make the kernel's rare failures on
 * demand; NULL or 0 otherwise.  A negative return of submit_hook is that
 * submit's result (nothing submitted), of wait_hook that wait's.  The
 * entries, if set, size the next rings created.
 */
extern __attribute__((visibility("hidden"))) int (*weft__io_uring_submit_hook)(
	void);
extern __attribute__((visibility("hidden"))) int (*weft__io_uring_wait_hook)(
	void);
extern __attribute__((
	visibility("hidden"))) unsigned weft__io_uring_test_sq_entries;
extern __attribute__((
	visibility("hidden"))) unsigned weft__io_uring_test_cq_entries;
/* Tests only: the bound of a refused submit's retries, in ns; 0: 5 s. */
extern __attribute__((visibility("hidden")))
uint64_t weft__io_uring_test_submit_bound_ns;
/*
 * Tests only: cancels @fd's poll and has its end reported as @res (an
 * error the kernel will not give on demand), or, with @res
 * WEFT__IO_URING_TEST_DROP_END, its end's CQE skipped as if the kernel
 * had dropped it (the poll stays marked armed; a wait's -EBADR, from
 * wait_hook, then says CQEs were dropped).  Return: 0; -ENOENT (not
 * registered or not armed).
 */
#define WEFT__IO_URING_TEST_DROP_END 1
int weft__io_uring_test_end_poll(io_backend_t *b, int fd, int res);
#endif

/*
 * Registers @fd for read and write readiness, edge-triggered.
 * Return: 0; -EEXIST (already registered); -EPERM (a regular file or a
 * directory); -EBADF; -ENOMEM; another -errno.
 */
static inline int weft__io_backend_add(io_backend_t *b, int fd, void *data)
{
#ifdef WEFT_HAVE_URING
	if (b->kind == IO_BACKEND_URING)
		return weft__io_uring_add(b, fd, data);
#endif
	return weft__io_epoll_add(b, fd, data);
}

/*
 * Ends @fd's registration; the caller closes the fd after, never before:
 * an io_uring poll holds the file, so a socket closed while registered
 * would stay open (no FIN) until the ring goes.
 */
static inline int weft__io_backend_del(io_backend_t *b, int fd)
{
#ifdef WEFT_HAVE_URING
	if (b->kind == IO_BACKEND_URING)
		return weft__io_uring_del(b, fd);
#endif
	return weft__io_epoll_del(b, fd);
}

/*
 * Waits up to @timeout_ns (-1: forever, 0: do not block) and fills @ev.
 * Return: the number of events, 0 on timeout or EINTR, or -errno.
 */
static inline int weft__io_backend_poll(io_backend_t *b, io_event_t *ev,
					int max, int64_t timeout_ns)
{
#ifdef WEFT_HAVE_URING
	if (b->kind == IO_BACKEND_URING)
		return weft__io_uring_poll(b, ev, max, timeout_ns);
#endif
	return weft__io_epoll_poll(b, ev, max, timeout_ns);
}

/*
 * Wakes a poll blocked in another thread, if the backend has a way of its
 * own (io_uring: a NOP); any thread.  Return: 0, or -EOPNOTSUPP (epoll:
 * the driver registers an eventfd and writes it instead).
 */
static inline int weft__io_backend_wake(io_backend_t *b)
{
#ifdef WEFT_HAVE_URING
	if (b->kind == IO_BACKEND_URING)
		return weft__io_uring_wake(b);
#endif
	(void)b;
	return -EOPNOTSUPP;
}

static inline void weft__io_backend_free(io_backend_t *b)
{
#ifdef WEFT_HAVE_URING
	if (b->kind == IO_BACKEND_URING) {
		weft__io_uring_free(b);
		return;
	}
#endif
	weft__io_epoll_free(b);
}

#endif /* WEFT_IO_BACKEND_H */
