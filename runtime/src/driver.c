/* SPDX-License-Identifier: MIT */
/*
 * The driver's turn, its I/O registrations and its timers.  See
 * driver_internal.h for who turns it and how the parked holder is woken.
 *
 * Timer entries: state IDLE (not in the wheel), REGISTERED (in the wheel,
 * waker set) or FIRED.  All changes happen under time_lock; FIRED is also
 * stored with release so a poll can see it without the lock (acquire).
 * Firing moves the waker out of the entry under the lock and wakes it
 * after, so an entry may be freed as soon as its owner sees FIRED.
 *
 * I/O registrations sit on the live list from weft__io_register() to
 * weft__io_deregister(); fini detaches the ones left (driver_internal.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "driver_internal.h"
#include "resource_internal.h"
#include "runtime_internal.h"

enum { TIMER_IDLE = 0, TIMER_REGISTERED = 1, TIMER_FIRED = 2 };

#define NS_PER_TICK 1000000u

int weft__driver_init(driver_t *d)
{
	int err;

	memset(d, 0, sizeof(*d));
	err = weft__io_backend_create(&d->backend);
	if (err)
		return err;
	d->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->event_fd < 0) {
		err = -errno;
		goto out_free_backend;
	}
	/*
	 * The eventfd is the wake of a backend that has none of its own
	 * (weft__io_backend_wake(): epoll); io_uring wakes with a NOP.
	 */
	if (d->backend->kind == IO_BACKEND_EPOLL) {
		err = weft__io_backend_add(d->backend, d->event_fd,
					   &d->event_fd);
		if (err)
			goto out_close_eventfd;
	}
	store_relaxed(&d->locked, false);
	store_relaxed(&d->nregs, 0);
	store_relaxed(&d->ntimers, 0);
	pthread_mutex_init(&d->time_lock, NULL);
	pthread_mutex_init(&d->release_lock, NULL);
	weft__wheel_init(&d->wheel);
	d->start_ns = weft_now_ns();
	weft__res_init(&d->timer_res, WEFT_RES_TIMER_WHEEL, NULL, 0);
	weft__res_name(&d->timer_res, "timer wheel");
	return 0;

out_close_eventfd:
	close(d->event_fd);
out_free_backend:
	weft__io_backend_free(d->backend);
	return err;
}

static void io_reg_free(io_reg_t *r)
{
	weft_waker_drop(&r->waker[IO_DIR_READ]);
	weft_waker_drop(&r->waker[IO_DIR_WRITE]);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static void release_regs(driver_t *d)
{
	io_reg_t *r;

	pthread_mutex_lock(&d->release_lock);
	r = d->release_list;
	d->release_list = NULL;
	pthread_mutex_unlock(&d->release_lock);
	while (r) {
		io_reg_t *next = r->release_next;

		io_reg_free(r);
		r = next;
	}
}

/*
 * Shutdown: close the fd of every registration still live, wake its
 * wakers and hand it to its owner (see driver_internal.h).  The workers
 * are joined, so no turn runs concurrently.
 */
static void detach_regs(driver_t *d)
{
	io_reg_t *r;

	pthread_mutex_lock(&d->release_lock);
	r = d->live;
	d->live = NULL;
	pthread_mutex_unlock(&d->release_lock);
	while (r) {
		io_reg_t *next = r->live_next;
		weft_waker_t wake[2];

		pthread_mutex_lock(&r->lock);
		wake[0] = r->waker[IO_DIR_READ];
		wake[1] = r->waker[IO_DIR_WRITE];
		r->waker[IO_DIR_READ] = WEFT_WAKER_EMPTY;
		r->waker[IO_DIR_WRITE] = WEFT_WAKER_EMPTY;
		pthread_mutex_unlock(&r->lock);
		if (!r->borrowed)
			close(r->fd);
		r->fd = -1;
		r->driver = NULL;
		r->live_prev = r->live_next = NULL;
		/*
		 * Release: orders the close and the field writes above before
		 * the owner's acquire load that sees IO_SHUTDOWN (in
		 * weft__io_poll_ready() or weft__io_deregister()); we do not
		 * touch r after this, as the owner may free it.
		 */
		atomic_fetch_or_explicit(&r->readiness, IO_SHUTDOWN,
					 memory_order_release);
		weft_waker_wake(&wake[0]);
		weft_waker_wake(&wake[1]);
		r = next;
	}
}

void weft__driver_fini(driver_t *d)
{
	release_regs(d);
	detach_regs(d);
	weft__io_backend_free(d->backend);
	close(d->event_fd);
	pthread_mutex_destroy(&d->time_lock);
	pthread_mutex_destroy(&d->release_lock);
	weft__res_fini(&d->timer_res);
}

bool weft__driver_try_lock(driver_t *d)
{
	/*
	 * Acquire: the previous holder's turn (its reads of the backend's
	 * events buffer and the wheel's elapsed time) happens before ours;
	 * pairs with the release in weft__driver_unlock().
	 */
	return !load_relaxed(&d->locked) &&
	       !atomic_exchange_explicit(&d->locked, true,
					 memory_order_acquire);
}

void weft__driver_unlock(driver_t *d)
{
	/* Release: pairs with the acquire in weft__driver_try_lock(). */
	store_release(&d->locked, false);
}

void weft__driver_unpark(driver_t *d)
{
	uint64_t one = 1;

	if (weft__io_backend_wake(d->backend) == 0)
		return;
	/* EAGAIN means the counter is already non-zero: a wake is pending. */
	if (write(d->event_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		weft_panic("driver: eventfd write: %d", errno);
}

bool weft__driver_has_work(driver_t *d)
{
	/* Relaxed: a hint for the busy poll; parking never relies on it. */
	return load_relaxed(&d->nregs) > 1 || load_relaxed(&d->ntimers) > 0;
}

driver_t *weft__driver_current(void)
{
	weft_runtime_t *rt = weft__cur_rt;

	return rt ? &rt->driver : NULL;
}

/* ------------------------------------------------------------------ time */

static uint64_t tick_of(const driver_t *d, uint64_t ns)
{
	return ns <= d->start_ns ? 0 : (ns - d->start_ns) / NS_PER_TICK;
}

static uint64_t tick_ceil(const driver_t *d, uint64_t ns)
{
	return ns <= d->start_ns ?
		       0 :
		       (ns - d->start_ns + NS_PER_TICK - 1) / NS_PER_TICK;
}

/* Fires the timers due at @now; wakes them outside the lock. */
static void process_timers(driver_t *d, uint64_t now)
{
	weft_timer_entry_t *fired[TIMERS_PER_BATCH];
	weft_waker_t wakers[TIMERS_PER_BATCH];
	uint64_t tick = tick_of(d, now);
	size_t n;

	if (load_relaxed(&d->ntimers) == 0)
		return;
	do {
		pthread_mutex_lock(&d->time_lock);
		n = weft__wheel_advance(&d->wheel, tick, fired,
					TIMERS_PER_BATCH);
		for (size_t i = 0; i < n; i++) {
			wakers[i] = fired[i]->waker;
			fired[i]->waker = WEFT_WAKER_EMPTY;
			/*
			 * Release: pairs with the acquire load in
			 * weft__timer_poll(); the entry is the owner's from
			 * here on, we no longer touch it.
			 */
			__atomic_store_n(&fired[i]->state, TIMER_FIRED,
					 __ATOMIC_RELEASE);
		}
		/* Relaxed: a count for has_work(); see there. */
		store_relaxed(&d->ntimers, d->wheel.count);
		pthread_mutex_unlock(&d->time_lock);
		if (n) {
			fetch_add_relaxed(&d->timers_fired, n);
			WEFT_PROBE_EVENT(TIMER_FIRE, 0, 0, (uint32_t)n);
		}
		for (size_t i = 0; i < n; i++)
			weft_waker_wake(&wakers[i]);
	} while (n == TIMERS_PER_BATCH);
}

/* The time to block for: until the next timer, or -1 for none. */
static int64_t block_timeout(driver_t *d, uint64_t now)
{
	uint64_t next, deadline;
	int64_t timeout = -1;

	pthread_mutex_lock(&d->time_lock);
	next = weft__wheel_next_expiration(&d->wheel);
	if (next != UINT64_MAX) {
		/* Tick `next` is due once the clock reaches its start. */
		deadline = d->start_ns + next * NS_PER_TICK;
		timeout = deadline > now ? (int64_t)(deadline - now) : 0;
	}
	d->sleeping_until = timeout == 0       ? 0 :
			    next == UINT64_MAX ? UINT64_MAX :
						 next;
	pthread_mutex_unlock(&d->time_lock);
	return timeout;
}

static void io_set_ready(io_reg_t *r, uint32_t ready)
{
	uint32_t cur = load_relaxed(&r->readiness), next;
	weft_waker_t wake[2] = { WEFT_WAKER_EMPTY, WEFT_WAKER_EMPTY };

	do {
		next = ((cur | ready) & IO_READINESS_MASK) |
		       ((cur + 0x100u) & ~0xffu);
		/*
		 * Release: pairs with the acquire in weft__io_poll_ready(); a
		 * task that sees the bit may then read the fd.
		 */
	} while (!cas_release(&r->readiness, &cur, next));

	pthread_mutex_lock(&r->lock);
	if (ready & (IO_READABLE | IO_READ_CLOSED | IO_ERROR)) {
		wake[0] = r->waker[IO_DIR_READ];
		r->waker[IO_DIR_READ] = WEFT_WAKER_EMPTY;
	}
	if (ready & (IO_WRITABLE | IO_WRITE_CLOSED | IO_ERROR)) {
		wake[1] = r->waker[IO_DIR_WRITE];
		r->waker[IO_DIR_WRITE] = WEFT_WAKER_EMPTY;
	}
	pthread_mutex_unlock(&r->lock);
	weft_waker_wake(&wake[0]);
	weft_waker_wake(&wake[1]);
}

void weft__driver_turn(driver_t *d, bool block)
{
	uint64_t now = weft_now_ns();
	uint8_t saved_source = weft__wake_source;
	int64_t timeout = 0;
	int n;

	release_regs(d);
	if (block)
		timeout = block_timeout(d, now);
	n = weft__io_backend_poll(d->backend, d->events, IO_EVENTS_PER_TURN,
				  timeout);
	if (block) {
		pthread_mutex_lock(&d->time_lock);
		d->sleeping_until = 0;
		pthread_mutex_unlock(&d->time_lock);
	}
	weft__wake_source = WEFT_WAKE_IO;
	/* Only the holder writes it: a load and a store. */
	store_relaxed(&d->turns, load_relaxed(&d->turns) + 1);
	if (n > 0)
		fetch_add_relaxed(&d->io_events, (uint64_t)n);
	for (int i = 0; i < n; i++) {
		if (d->events[i].data == &d->event_fd) {
			uint64_t v;

			/* Drain; EAGAIN if another turn drained it. */
			if (read(d->event_fd, &v, sizeof(v)) < 0 &&
			    errno != EAGAIN)
				weft_panic("driver: eventfd read: %d", errno);
			continue;
		}
		WEFT_PROBE_EVENT(IO_READY, 0,
				 ((io_reg_t *)d->events[i].data)->fd,
				 d->events[i].ready);
		io_set_ready(d->events[i].data, d->events[i].ready);
	}
	weft__wake_source = WEFT_WAKE_TIMER;
	process_timers(d, weft_now_ns());
	weft__wake_source = saved_source;
}

/* ----------------------------------------------------------------- timers */

/*
 * A sleep is a wait on the timer wheel (a resource): told at its
 * registration while the probe listens, ended when it fires or is
 * cancelled.  e->told is the owner's alone (its polls and its cancel).
 * The end is said for the task running now: a sleep is its owner's.
 */
static void timer_wait_told(driver_t *d, weft_timer_entry_t *e)
{
	if (!WEFT_PROBE_ON() || !weft__cur_task_id)
		return;
	e->told = 1;
	WEFT_RES_EVENT(&d->timer_res, RES_WAIT, weft__cur_task_id,
		       WEFT_RES_OP_SLEEP);
}

static void timer_wait_end(weft_timer_entry_t *e, uint32_t flags)
{
	driver_t *d = e->driver;

	e->told = 0;
	if (d)
		WEFT_RES_EVENT(&d->timer_res, RES_WAIT_END, weft__cur_task_id,
			       WEFT_RES_OP_SLEEP | flags);
}

weft_poll_t weft__timer_poll(weft_timer_entry_t *e, weft_cx_t *cx)
{
	driver_t *d = e->driver;
	bool wake_driver = false;
	uint8_t state;

	if (!weft__coop_poll(cx))
		return WEFT_PENDING;
	/* Acquire: pairs with the release in process_timers(). */
	if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == TIMER_FIRED)
		goto ready;
	if (!d) {
		d = weft__driver_current();
		if (!d)
			weft_panic("timer polled outside a runtime");
		e->driver = d;
	}
	if (weft_now_ns() >= e->deadline_ns) {
		/* Served, not cancelled: it ends before the cancel's look. */
		if (e->told)
			timer_wait_end(e, 0);
		weft__timer_cancel(e);
		__atomic_store_n(&e->state, TIMER_FIRED, __ATOMIC_RELAXED);
		goto ready;
	}

	pthread_mutex_lock(&d->time_lock);
	state = __atomic_load_n(&e->state, __ATOMIC_RELAXED);
	if (state == TIMER_FIRED) {
		pthread_mutex_unlock(&d->time_lock);
		goto ready;
	}
	if (state == TIMER_IDLE) {
		e->when = tick_ceil(d, e->deadline_ns);
		if (!weft__wheel_insert(&d->wheel, e)) {
			__atomic_store_n(&e->state, TIMER_FIRED,
					 __ATOMIC_RELAXED);
			pthread_mutex_unlock(&d->time_lock);
			goto ready;
		}
		__atomic_store_n(&e->state, TIMER_REGISTERED, __ATOMIC_RELAXED);
		e->waker = weft_waker_clone(weft_cx_waker(cx));
		timer_wait_told(d, e);
		store_relaxed(&d->ntimers, d->wheel.count);
		if (e->when < d->sleeping_until) {
			/* Earlier than the parked driver will look: wake it. */
			wake_driver = true;
			d->sleeping_until = 0;
		}
	} else {
		weft_waker_set(&e->waker, weft_cx_waker(cx));
	}
	pthread_mutex_unlock(&d->time_lock);
	if (wake_driver)
		weft__driver_unpark(d);
	return WEFT_PENDING;

ready:
	if (e->told)
		timer_wait_end(e, 0);
	weft__coop_progress();
	return WEFT_READY;
}

void weft__timer_cancel(weft_timer_entry_t *e)
{
	driver_t *d = e->driver;
	weft_waker_t w = WEFT_WAKER_EMPTY;

	if (e->told)
		timer_wait_end(e, WEFT_RES_CANCELLED);
	if (!d ||
	    __atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != TIMER_REGISTERED)
		return;
	pthread_mutex_lock(&d->time_lock);
	if (__atomic_load_n(&e->state, __ATOMIC_RELAXED) == TIMER_REGISTERED) {
		weft__wheel_remove(&d->wheel, e);
		store_relaxed(&d->ntimers, d->wheel.count);
		__atomic_store_n(&e->state, TIMER_IDLE, __ATOMIC_RELAXED);
		w = e->waker;
		e->waker = WEFT_WAKER_EMPTY;
	}
	pthread_mutex_unlock(&d->time_lock);
	weft_waker_drop(&w);
}

/* -------------------------------------------------------------------- I/O */

static int io_register(driver_t *d, int fd, bool borrowed, io_reg_t **out)
{
	io_reg_t *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	r->fd = fd;
	r->borrowed = borrowed;
	r->driver = d;
	/* Named by its fd: "fd:N" where a resource shows file:line. */
	weft__res_init(&r->res, WEFT_RES_IO, fd > 0 ? "fd" : NULL, fd);
	if (fd == 0)
		r->res.name = "fd 0";
	pthread_mutex_init(&r->lock, NULL);
	store_relaxed(&r->readiness, 0);
	err = weft__io_backend_add(d->backend, fd, r);
	if (err) {
		pthread_mutex_destroy(&r->lock);
		free(r);
		return err;
	}
	fetch_add_relaxed(&d->nregs, 1);
	pthread_mutex_lock(&d->release_lock);
	r->live_next = d->live;
	if (d->live)
		d->live->live_prev = r;
	d->live = r;
	pthread_mutex_unlock(&d->release_lock);
	*out = r;
	return 0;
}

int weft__io_register(driver_t *d, int fd, io_reg_t **out)
{
	return io_register(d, fd, false, out);
}

int weft__io_register_borrowed(driver_t *d, int fd, io_reg_t **out)
{
	return io_register(d, fd, true, out);
}

/*
 * Return: 0, the caller closes the fd; -ESHUTDOWN when the driver detached
 * @r at shutdown and already closed it (@r is freed here).
 */
/*
 * A task's wait for @dir's readiness, told when it starts (the first
 * PENDING while the probe listens) and ended when it is READY or the
 * registration goes (see io_reg_t.wait_task).
 */
static void io_wait_end(io_reg_t *r, enum io_dir dir, uint32_t flags);

static void io_wait_told(io_reg_t *r, enum io_dir dir)
{
	uint64_t task = weft__cur_task_id, was;

	if (!task)
		return;
	was = load_relaxed(&r->wait_task[dir]);
	if (was == task)
		return; /* told already */
	/*
	 * Another task's wait, never ended: its future went without a
	 * READY (a timeout around a read) and another task awaits the fd
	 * now.  Its end is said, as cancelled, before this one starts.
	 */
	if (was)
		io_wait_end(r, dir, WEFT_RES_CANCELLED);
	store_relaxed(&r->wait_task[dir], task);
	WEFT_RES_EVENT(&r->res, RES_WAIT, task,
		       dir == IO_DIR_READ ? WEFT_RES_OP_READABLE :
					    WEFT_RES_OP_WRITABLE);
}

static void io_wait_end(io_reg_t *r, enum io_dir dir, uint32_t flags)
{
	uint64_t task = load_relaxed(&r->wait_task[dir]);

	if (!task)
		return;
	store_relaxed(&r->wait_task[dir], 0);
	WEFT_RES_EVENT(&r->res, RES_WAIT_END, task,
		       (dir == IO_DIR_READ ? WEFT_RES_OP_READABLE :
					     WEFT_RES_OP_WRITABLE) |
			       flags);
}

int weft__io_deregister(io_reg_t *r)
{
	driver_t *d;

	io_wait_end(r, IO_DIR_READ, WEFT_RES_CANCELLED);
	io_wait_end(r, IO_DIR_WRITE, WEFT_RES_CANCELLED);
	weft__res_fini(&r->res);

	/* Acquire: pairs with the release in detach_regs(). */
	if (load_acquire(&r->readiness) & IO_SHUTDOWN) {
		io_reg_free(r);
		return -ESHUTDOWN;
	}
	d = r->driver;
	weft__io_backend_del(d->backend, r->fd);
	fetch_sub_relaxed(&d->nregs, 1);
	pthread_mutex_lock(&d->release_lock);
	if (r->live_prev)
		r->live_prev->live_next = r->live_next;
	else
		d->live = r->live_next;
	if (r->live_next)
		r->live_next->live_prev = r->live_prev;
	r->release_next = d->release_list;
	d->release_list = r;
	pthread_mutex_unlock(&d->release_lock);
	return 0;
}

static uint32_t dir_mask(enum io_dir dir)
{
	return IO_SHUTDOWN |
	       (dir == IO_DIR_READ ? IO_READABLE | IO_READ_CLOSED | IO_ERROR :
				     IO_WRITABLE | IO_WRITE_CLOSED | IO_ERROR);
}

weft_poll_t weft__io_poll_ready(io_reg_t *r, enum io_dir dir, weft_cx_t *cx,
				uint32_t *event)
{
	uint32_t mask = dir_mask(dir);
	/*
	 * Acquire: pairs with the release in io_set_ready() (and in
	 * detach_regs() for IO_SHUTDOWN).
	 */
	uint32_t cur = load_acquire(&r->readiness);

	/*
	 * The event keeps the tick but only this direction's bits, so that
	 * clearing it after EAGAIN never clears the other direction's
	 * readiness under a concurrent reader or writer.
	 */
	if (cur & mask) {
		*event = cur & (mask | ~0xffu);
		goto ready;
	}
	pthread_mutex_lock(&r->lock);
	weft_waker_set(&r->waker[dir], weft_cx_waker(cx));
	pthread_mutex_unlock(&r->lock);
	/*
	 * Re-check after registering: io_set_ready() sets the bits before it
	 * takes the lock to collect wakers, so either it saw our waker or we
	 * see its bits here.
	 */
	cur = load_acquire(&r->readiness);
	if (cur & mask) {
		*event = cur & (mask | ~0xffu);
		goto ready;
	}
	if (WEFT_PROBE_ON())
		io_wait_told(r, dir);
	return WEFT_PENDING;

ready:
	/* Relaxed: see io_reg_t.wait_task; 0 unless a wait was told. */
	if (load_relaxed(&r->wait_task[dir]))
		io_wait_end(r, dir, 0);
	return WEFT_READY;
}

void weft__io_clear_ready(io_reg_t *r, uint32_t event)
{
	uint32_t cur = load_relaxed(&r->readiness), next;
	/*
	 * IO_ERROR goes too: an error the syscall did not report (it said
	 * EAGAIN) was transient, e.g. an ICMP error on a UDP socket, and
	 * keeping the bit would make every poll READY: a busy loop.  The
	 * closed bits are final and stay.
	 */
	uint32_t clear = event & (IO_READABLE | IO_WRITABLE | IO_ERROR);

	do {
		/* A newer event arrived since @event was read: keep it. */
		if ((cur & ~0xffu) != (event & ~0xffu))
			return;
		next = cur & ~clear;
		/* Relaxed success: clearing publishes nothing. */
	} while (!atomic_compare_exchange_weak_explicit(
		&r->readiness, &cur, next, memory_order_relaxed,
		memory_order_relaxed));
}
