/* SPDX-License-Identifier: MIT */
/*
 * The driver: I/O readiness (through io_backend.h) and time (the timer
 * wheel), turned by one worker at a time.
 *
 * Who turns it: a worker about to park takes the driver if it is free and
 * parks inside it (the backend's wait, with the next timer deadline as
 * timeout); the others park on their futex.  Busy workers take it every
 * global_queue_interval ticks for a turn that does not block.  The lock is
 * a try-lock flag: nobody ever waits for the driver.
 *
 * Waking the parked holder: the worker's parker says PARKED_DRIVER, and
 * unpark writes the eventfd.  A timer inserted earlier than the holder's
 * wake-up writes the eventfd too (sleeping_until, under the time lock).
 *
 * I/O registrations are freed only by the driver holder at the start of a
 * turn, so an event returned by the backend never points to freed memory:
 * deregistration removes the fd from the backend first, and the events of
 * a turn are all handled before the next turn begins.  (The io_uring
 * backend keeps its own token per fd until the kernel's last CQE for it,
 * and drops the events of a removed one: io_uring.c.)
 *
 * Shutdown closes registered fds: the driver keeps every live registration
 * on a list (under release_lock).  weft__driver_fini() detaches what is
 * still on it: it sets IO_SHUTDOWN in the readiness word, wakes the wakers,
 * closes the fd (unless it is borrowed: weft/fd.h) and hands the
 * registration to its owner, who frees it in
 * weft__io_deregister() (which then reports -ESHUTDOWN: do not close the
 * fd again).  A detached registration never touches the driver again, so
 * its owner may outlive the runtime.  Fini runs after the workers are
 * joined and every task is cancelled; a registration must not be used from
 * another thread while it runs.
 */
#ifndef WEFT_DRIVER_INTERNAL_H
#define WEFT_DRIVER_INTERNAL_H

#include <pthread.h>

#include "weft/weft.h"

#include "atomic_internal.h"
#include "io_backend.h"
#include "timer_internal.h"

typedef struct driver_s driver_t;
typedef struct io_reg_s io_reg_t;

enum io_dir { IO_DIR_READ = 0, IO_DIR_WRITE = 1 };

/*
 * Readiness bit set by weft__driver_fini() on a detached registration: the
 * fd is closed, every poll is READY.  Never cleared; beside the backend's
 * IO_* bits in the low byte.
 */
#define IO_SHUTDOWN 0x80u

/*
 * One registered fd.  readiness packs the IO_* bits (low byte) and a tick
 * (bits 8..31) bumped by every event, so clearing readiness after EAGAIN
 * never erases an event that arrived in between.
 */
struct io_reg_s {
	_Atomic uint32_t readiness;
	int fd;
	/* The fd is the owner's (weft/fd.h): shutdown does not close it. */
	bool borrowed;
	driver_t *driver;
	pthread_mutex_t lock; /* guards waker[] */
	weft_waker_t waker[2];
	/*
	 * What the probe sees: the registration is a resource ("fd:N"),
	 * and a task awaiting a direction's readiness waits on it.
	 * wait_task[dir]: the task whose wait was told (RES_WAIT), 0 if
	 * none; written by the tasks that poll that direction (relaxed:
	 * only the probe's bookkeeping depends on it, and a race between
	 * two pollers of one direction at worst tells a wait twice or
	 * ends it for the other task, which the collector's sweep mends).
	 */
	weft_resource_t res;
	_Atomic uint64_t wait_task[2];
	io_reg_t *release_next;
	/* The driver's live list; release_lock. */
	io_reg_t *live_prev;
	io_reg_t *live_next;
};

#define IO_EVENTS_PER_TURN 256
#define TIMERS_PER_BATCH 64

struct driver_s {
	weft__cacheline_aligned _Atomic bool locked;
	io_backend_t *backend;
	int event_fd;
	io_event_t events[IO_EVENTS_PER_TURN]; /* holder only */
	_Atomic uint64_t nregs;

	weft__cacheline_aligned pthread_mutex_t time_lock;
	timer_wheel_t wheel;
	uint64_t start_ns;
	/* Tick the parked holder sleeps until; 0 if none.  time_lock. */
	uint64_t sleeping_until;
	_Atomic uint64_t ntimers;
	/*
	 * Counters for weft_runtime_metrics(): added once a turn by the
	 * thread turning the driver (one at a time, but not always the
	 * same), so relaxed atomics; read relaxed.
	 */
	_Atomic uint64_t io_events; /* readiness events dispatched */
	_Atomic uint64_t turns;     /* for the monitor: turned lately? */
	_Atomic uint64_t timers_fired;

	/* The timer wheel as the probe sees it: sleeping tasks wait on it. */
	weft_resource_t timer_res;

	pthread_mutex_t release_lock;
	io_reg_t *release_list;
	io_reg_t *live; /* registered, not deregistered; release_lock */
};

/* driver.c */
int weft__driver_init(driver_t *d);
void weft__driver_fini(driver_t *d);
bool weft__driver_try_lock(driver_t *d);
void weft__driver_unlock(driver_t *d);
void weft__driver_turn(driver_t *d, bool block);
void weft__driver_unpark(driver_t *d);
bool weft__driver_has_work(driver_t *d);
driver_t *weft__driver_current(void);

int weft__io_register(driver_t *d, int fd, io_reg_t **out);
/* The same for an fd its owner keeps (and closes): weft/fd.h. */
int weft__io_register_borrowed(driver_t *d, int fd, io_reg_t **out);
int weft__io_deregister(io_reg_t *r);
weft_poll_t weft__io_poll_ready(io_reg_t *r, enum io_dir dir, weft_cx_t *cx,
				uint32_t *event);
void weft__io_clear_ready(io_reg_t *r, uint32_t event);

weft_poll_t weft__timer_poll(weft_timer_entry_t *e, weft_cx_t *cx);
void weft__timer_cancel(weft_timer_entry_t *e);

#endif /* WEFT_DRIVER_INTERNAL_H */
