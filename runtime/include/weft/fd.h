/* SPDX-License-Identifier: MIT */
/*
 * Any file descriptor's readiness, awaited: a pipe, an eventfd, a
 * timerfd, an inotify fd, another library's socket (Tokio's AsyncFd).
 *
 * The fd stays the caller's.  weft_fd_register() adds it to the runtime's
 * driver (epoll, edge-triggered); the caller does its own read(2),
 * write(2) or the library's call, and weft only says when to try:
 *
 *	for (;;) {
 *		weft_fd_ready_t r;
 *
 *		if (weft_fd_poll_ready(f, WEFT_FD_READ, cx, &r) == WEFT_PENDING)
 *			return WEFT_PENDING;
 *		if (r.events & WEFT_FD_SHUTDOWN)
 *			return WEFT_READY;          // the runtime is going
 *		n = read(fd, buf, len);
 *		if (n < 0 && errno == EAGAIN) {
 *			weft_fd_clear_ready(f, r);  // then wait again
 *			continue;
 *		}
 *		break;                              // data, EOF or an error
 *	}
 *
 * The rules, which are epoll's edge-triggered ones:
 * - The fd must be non-blocking (O_NONBLOCK): a blocking read stalls the
 *   worker.  weft_fd_register() refuses one that is not (-EINVAL).
 * - Readiness, once reported, stays set until the caller clears it with
 *   the weft_fd_ready_t the poll returned, and the caller clears it only
 *   after the operation said EAGAIN (or a short read or write: the kernel
 *   buffer is empty or full).  An edge that arrives between the poll and
 *   the clear is kept (the token carries a tick), so no wake-up is lost.
 *   Clearing without having seen EAGAIN can wait for ever on data that
 *   is already there: the kernel will not report that edge again.
 * - Hang-up and error are final for their direction: the poll stays
 *   READY (WEFT_FD_HUP, WEFT_FD_ERR in events), and the operation reports
 *   what happened (read returns 0, or -1 with the error).
 * - One task may await each direction at a time (a reader and a writer
 *   may be two tasks); a second task awaiting the same direction replaces
 *   the first's waker.
 * - Regular files and directories cannot be registered (epoll refuses
 *   them: -EPERM); use weft/fs.h, which runs them on the blocking pool.
 *   An fd registered twice (or a dup of one, with the same open file) is
 *   -EEXIST.
 * - Deregister before closing the fd: epoll keeps watching an open file
 *   while any dup of it is open, and a closed fd number may be reused.
 * - Shutdown: weft_runtime_destroy() detaches every registration still
 *   live and wakes its waiters with WEFT_FD_SHUTDOWN; unlike net.h's
 *   sockets the fd is not closed (it is the caller's).  Call
 *   weft_fd_deregister() all the same: it frees the handle.
 *
 * Threads: weft_fd_poll_ready() from a task; weft_fd_clear_ready() from
 * the task that got the token; register and deregister from any thread
 * of the runtime's process (a task, a blocking job, a plain thread), but
 * never while a poll of the same handle runs.
 */
#ifndef WEFT_FD_H
#define WEFT_FD_H

#include "weft/common.h"
#include "weft/future.h"
#include "weft/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A registered fd.  Opaque. */
typedef struct weft_fd_s weft_fd_t;

/* What to await. */
typedef enum weft_fd_dir_e {
	WEFT_FD_READ = 0,  /* readable, or the peer hung up, or an error */
	WEFT_FD_WRITE = 1, /* writable, or the fd can no longer be written */
} weft_fd_dir_t;

/* weft_fd_ready_t.events: what made the poll READY. */
#define WEFT_FD_IN 0x01u       /* readable (WEFT_FD_READ) */
#define WEFT_FD_OUT 0x02u      /* writable (WEFT_FD_WRITE) */
#define WEFT_FD_HUP 0x04u      /* this direction is closed: final */
#define WEFT_FD_ERR 0x10u      /* an error is pending on the fd */
#define WEFT_FD_SHUTDOWN 0x80u /* the runtime was destroyed: final */

/* One poll's readiness: what it saw, and the token to clear it with.
 * Passed by value: fixed for good (weft/common.h). */
typedef struct weft_fd_ready_s {
	uint32_t events; /* WEFT_FD_* bits */
	uint32_t token;  /* private: the readiness word it was read from */
} weft_fd_ready_t;

/**
 * weft_fd_register() - watch @fd's readiness with @rt's driver.
 * @rt: the runtime, or NULL for weft_runtime_current().
 * @fd: an open, non-blocking fd that epoll accepts; stays the caller's.
 * @out: receives the handle.
 *
 * Safe from any thread.
 *
 * Context: any thread of the process (a task, a blocking job, a plain
 * thread); a task may call it (never blocks).
 * Return: 0; -EINVAL (no runtime, @fd negative or not O_NONBLOCK, NULL
 * @out); -EPERM (a regular file or a directory); -EEXIST (already
 * registered); -EBADF; -ENOMEM; -ESHUTDOWN once weft_runtime_destroy() has
 * begun; another error of epoll_ctl(2).
 */
WEFT_EXTERN int weft_fd_register(weft_runtime_t *rt, int fd, weft_fd_t **out);

/**
 * weft_fd_poll_ready() - await @dir's readiness.
 * @f: the handle.
 * @dir: WEFT_FD_READ or WEFT_FD_WRITE.
 * @cx: the polling context.
 * @ready: receives what was seen and the token for weft_fd_clear_ready().
 *
 * Takes one unit of the task's coop budget when READY (a task that
 * finds its fd ready for ever still lets others run).  A task only.
 *
 * Context: a task inside its poll (a weft_block_on() future works too); one
 * awaiter per direction (a second replaces the first's waker).
 * Return: WEFT_READY with *@ready set, or WEFT_PENDING (the task is woken
 * at the next edge, hang-up, error or shutdown).
 */
WEFT_EXTERN weft_poll_t weft_fd_poll_ready(weft_fd_t *f, weft_fd_dir_t dir,
					   weft_cx_t *cx,
					   weft_fd_ready_t *ready);

/**
 * weft_fd_clear_ready() - forget the readiness @ready reported, after the
 * operation said EAGAIN.
 * @f: the handle.
 * @ready: what weft_fd_poll_ready() returned.
 *
 * Keeps an edge newer than @ready, and the final HUP, ERR and SHUTDOWN
 * bits (ERR is cleared: an error the operation did not report was
 * transient).  Never fails.
 *
 * Context: the task that got @ready from weft_fd_poll_ready(), inside its
 * poll; never blocks.
 */
WEFT_EXTERN void weft_fd_clear_ready(weft_fd_t *f, weft_fd_ready_t ready);

/**
 * weft_fd_fd() - the fd @f watches.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the fd given to weft_fd_register().
 */
WEFT_EXTERN int weft_fd_fd(const weft_fd_t *f);

/**
 * weft_fd_deregister() - stop watching and free the handle; the fd stays
 * open (close it afterwards, if it is yours to close).
 * @f: the handle; NULL is ignored.
 *
 * Must not run while a poll of @f does.  Safe from any thread.
 *
 * Context: any thread, never while a poll of @f runs; a task may call it
 * (never blocks).
 * Return: 0; -ESHUTDOWN when the runtime had already detached it (the
 * handle is freed all the same, and the fd is still open).
 */
WEFT_EXTERN int weft_fd_deregister(weft_fd_t *f);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_FD_H */
