/* SPDX-License-Identifier: MIT */
/*
 * The io_uring backend (io_backend.h), readiness only: one ring per
 * driver, every registered fd watched by one multishot IORING_OP_POLL_ADD
 * (edge-triggered, as the kernel makes a multishot poll unless told
 * IORING_POLL_ADD_LEVEL) whose CQEs become the same events the epoll
 * backend gives.  liburing does the ring's setup, mmap and SQE preparation.
 *
 * A registration is a token (struct ureg), the user_data of its poll
 * request.  The kernel ends a multishot poll with a CQE without
 * IORING_CQE_F_MORE: when we cancel it (ASYNC_CANCEL, from del), when the
 * thread that submitted it exits (the kernel cancels a task's requests),
 * or when the CQ ring overflowed.  Until that last CQE is handled the
 * token stays allocated, so a CQE never names freed memory; then the
 * poller frees it (removed) or arms it again (anything else).
 *
 * Waking the poller: an IORING_OP_NOP, whose CQE the kernel posts in the
 * submitting thread's own io_uring_enter, the driver's unpark uses instead
 * of an eventfd.  (A poll's wake-up runs as task work of the thread that
 * submitted the poll: the eventfd's poll would be owned by the thread that
 * created the runtime, which would have to wake, or be interrupted, to
 * post each wake's CQE.)  At most one wake is in flight (wake_pending).
 *
 * Who arms a poll: the thread that adds the fd, at once, so that the
 * registration takes effect before add returns.  Its wake-ups then run as
 * that thread's task work (an extra wake-up when it has parked since).
 * Cancelling from another thread than add's may find a wake-up's task
 * work queued on that thread and not yet run; the cancel marks the poll
 * anyway and it ends there, so the file may stay open after the caller's
 * close() until that thread runs: microseconds when it is running, a
 * wake-up when it is parked.  (A POLL_REMOVE, used first, failed with
 * -EALREADY in that window and left the poll armed for good: see del.)
 * Arming on the poller instead would make cross-thread dels the common
 * case: a listener so closed still took a connection in test_net's
 * connect_refused (seen with POLL_REMOVE).
 *
 * Threads.  The SQ ring is single-producer: every SQE is prepared and
 * submitted under b->lock: by add and del, at once (del's cancel so
 * that the fd may be closed right after: an armed poll holds a reference
 * to the file, and the socket would otherwise stay open), by any thread
 * waking the poller, and by the poller for its re-arms (batched: one
 * submit per poll).  The CQ ring is the poller's alone: the driver's
 * holder, one thread at a time (the driver lock orders one holder's CQ
 * head before the next's).  Waiting never touches the SQ ring:
 * io_uring_enter with to_submit 0.  No IORING_SETUP_SINGLE_ISSUER: many
 * threads submit.  Token fields: data is atomic (the poller reads it
 * without the lock); error_ends is the poller's; the rest, the fd table
 * and the list are b->lock's.
 *
 * When the kernel refuses a submit, or takes only some of the SQEs
 * (short of memory: -EAGAIN, or a count short of what was queued; the
 * -EBUSY of an overflow backlog went in 5.13, older than this backend
 * needs) the rest stay queued in the ring.  A thread other than the
 * poller retries at once, backing off (a yield, then sleeps growing to
 * 1 ms) with the lock dropped between tries, for up to 5 s, then panics:
 * the poller may be blocked in the ring with no timeout and would never
 * submit them (a wake NOP so lost would be lost for good: wake_pending
 * stays set).  The poller never spins: it keeps b->resubmit set and
 * waits at most 1 ms per poll until a submit goes through.  (The poller
 * does not wake itself: weft__parker_unpark() skips the wake of the
 * caller's own parker, whose driver turn is under way.)
 *
 * Arming again: an ended poll is queued on the rearm list, and the poller
 * arms from it as the CQ ring has room, none while the kernel holds
 * overflowed CQEs (retry_locked() says why); the rest wait, the poller
 * waiting at most 1 ms meanwhile.  A poll ended by an error is armed
 * again too (the driver clears an error its syscall does not see, and
 * would then wait for an edge no poll reports), up to MAX_ERROR_ENDS
 * ends in a row: the last is reported as final (closed both ways, error)
 * and not armed again.  A wait that says the kernel dropped CQEs
 * (-EBADR) has every live fd reported ready once, and the ring made
 * anew (rebuild_locked()): a poll whose last CQE was among the dropped
 * is gone from the kernel while its token still says armed, and no
 * answer the old ring can give tells it from a live one on every kernel
 * this backend runs on.  Another wait error costs a 1 ms sleep, so that
 * it cannot spin the driver.
 */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>

#include "atomic_internal.h"
#include "io_backend.h"
#include "runtime_internal.h"

#define MAX_EVENTS 256
#define SQ_ENTRIES 256
#define CQ_ENTRIES 4096

/* How long a thread other than the poller retries a refused submit. */
#define SUBMIT_BOUND_NS 5000000000ull
/* The longest back-off between two such tries, and the poller's longest
 * wait while something is left to submit or to arm. */
#define RETRY_NS 1000000
/* Error ends in a row after which a poll is not armed again. */
#define MAX_ERROR_ENDS 3

/* What every poll asks for (POLLERR and POLLHUP the kernel adds). */
#define POLL_MASK (POLLIN | POLLPRI | POLLOUT | POLLRDHUP)

/* The features io_uring.c needs: say which in the README if this grows. */
#define NEEDED_FEATURES                                                        \
	(IORING_FEAT_NODROP | IORING_FEAT_EXT_ARG | IORING_FEAT_FAST_POLL |    \
	 IORING_FEAT_RSRC_TAGS)

struct ureg {
	/*
	 * The driver's registration; NULL once del has run, and the poller
	 * then drops the token's events.
	 */
	_Atomic(void *) data;
	int fd;
	bool armed;               /* a poll request is in flight */
	bool removed;             /* del ran: free at the last CQE */
	bool rearm;               /* on the rearm list */
	bool lost;                /* to report as ready: CQEs were dropped */
	/* Error ends in a row (reset by a readiness CQE): the poller's. */
	unsigned char error_ends;
	int inject_res; /* weft__io_uring_test_end_poll()'s result, or 0 */
	bool inject_drop; /* tests: its end's CQE taken as dropped; lock */
	struct ureg *rearm_next;  /* lock */
	struct ureg *prev, *next; /* every token not yet freed */
};

struct io_uring_s {
	io_backend_t base; /* first: io_backend.h's dispatch */
	struct io_uring ring;
	unsigned cq_entries;
	unsigned remove_flags; /* IOSQE_CQE_SKIP_SUCCESS where the kernel has it */

	pthread_mutex_t lock; /* the SQ ring, the tokens' armed and removed */
	struct ureg **by_fd;  /* the live token of each fd, or NULL; lock */
	int nfds;
	struct ureg *all; /* lock */
	/*
	 * Ended polls to arm again, oldest first: retry_locked() says when.
	 * Lock.
	 */
	struct ureg *rearm_head, *rearm_tail;
	/*
	 * The last submit failed, or a poll waits on the rearm list: the
	 * poller retries and waits at most RETRY_NS meanwhile.  Written
	 * under the lock.
	 */
	_Atomic bool resubmit;
	bool lost_pending;    /* tokens' lost set: the poller's */
	/* The ring is to be made anew (rebuild_locked()): the poller's. */
	bool rebuild_due;
	bool said_rebuild_error; /* the poller's */
	unsigned sq_entries;     /* as created, for a rebuild */
	bool said_wait_error; /* the poller's */
	/* A wake NOP is in flight or in the CQ ring, not yet reaped. */
	_Atomic bool wake_pending;
};

/* The user_data of a wake NOP; 0 is a failed cancel's.  Neither a token. */
static char wake_tag;
#define WAKE_DATA ((void *)&wake_tag)

static struct io_uring_s *uring_of(io_backend_t *b)
{
	return (struct io_uring_s *)b;
}

/* Tests only (test_io_uring): io_backend.h.  NULL or 0 otherwise. */
int (*weft__io_uring_submit_hook)(void);
int (*weft__io_uring_wait_hook)(void);
unsigned weft__io_uring_test_sq_entries;
uint64_t weft__io_uring_test_submit_bound_ns;
unsigned weft__io_uring_test_cq_entries;

/* A ring of @sq_entries and the backend's CQ size into @ring, its params
 * into @p.  Return: 0 or -errno. */
static int ring_init(struct io_uring *ring, unsigned sq_entries,
		     struct io_uring_params *p)
{
	*p = (struct io_uring_params){
		.flags = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP,
		.cq_entries = weft__io_uring_test_cq_entries ?
				      weft__io_uring_test_cq_entries :
				      CQ_ENTRIES,
	};
	return io_uring_queue_init_params(sq_entries, ring, p);
}

int weft__io_uring_create(io_backend_t **out)
{
	struct io_uring_params p;
	unsigned sq_entries = weft__io_uring_test_sq_entries ?
				      weft__io_uring_test_sq_entries :
				      SQ_ENTRIES;
	struct io_uring_s *b = calloc(1, sizeof(*b));
	int err;

	if (!b)
		return -ENOMEM;
	b->sq_entries = sq_entries;
	err = ring_init(&b->ring, sq_entries, &p);
	if (err)
		goto out_free;
	/*
	 * Multishot poll came in 5.13 and has no feature bit of its own:
	 * IORING_FEAT_RSRC_TAGS came in the same release.
	 */
	if ((p.features & NEEDED_FEATURES) != NEEDED_FEATURES) {
		err = -EOPNOTSUPP;
		goto out_exit;
	}
	b->cq_entries = p.cq_entries;
	if (p.features & IORING_FEAT_CQE_SKIP)
		b->remove_flags = IOSQE_CQE_SKIP_SUCCESS;
	pthread_mutex_init(&b->lock, NULL);
	b->base.kind = IO_BACKEND_URING;
	*out = &b->base;
	return 0;

out_exit:
	io_uring_queue_exit(&b->ring);
out_free:
	free(b);
	return err;
}

/*
 * Submits what is queued, once.  A failure (-EAGAIN, or SQEs left: a
 * partial submit) leaves the SQEs in the ring and sets b->resubmit, which
 * also stays set while a re-arm is pending.  Under the lock.  Return: 0
 * or that -errno.
 */
static int submit_once_locked(struct io_uring_s *b)
{
	int ret = 0;

	if (__builtin_expect(weft__io_uring_submit_hook != NULL, 0))
		ret = weft__io_uring_submit_hook();
	if (ret >= 0) {
		do
			ret = io_uring_submit(&b->ring);
		while (ret == -EINTR);
	}
	/*
	 * A partial submit is a refusal too: the kernel stops at the first
	 * request it cannot allocate and says how many it took, -EAGAIN
	 * only when it took none (the review of these fixes).
	 */
	if (ret >= 0 && io_uring_sq_ready(&b->ring))
		ret = -EAGAIN;
	/*
	 * Relaxed: a hint the poller reads before it takes the lock; the
	 * poller's own stores it sees in program order, and another
	 * thread's failure that thread retries itself.
	 */
	store_relaxed(&b->resubmit, ret < 0 || b->rearm_head);
	return ret < 0 ? ret : 0;
}

/* Before the @round-th retry: a yield, then sleeps from 10 us to 1 ms. */
static void backoff(unsigned round)
{
	long ns = 10000;

	if (round == 0) {
		sched_yield();
		return;
	}
	while (--round && ns < RETRY_NS)
		ns *= 2;
	if (ns > RETRY_NS)
		ns = RETRY_NS;
	nanosleep(&(struct timespec){ .tv_nsec = ns }, NULL);
}

/*
 * Submits what is queued, for a thread other than the poller (add, del,
 * wake): retried until it goes through, the lock dropped during each
 * back-off (the caller's state must be whole by then: every queued SQE
 * complete), for up to SUBMIT_BOUND_NS, then a panic.  Under the lock.
 */
static void submit_locked(struct io_uring_s *b)
{
	uint64_t bound = weft__io_uring_test_submit_bound_ns ?
				 weft__io_uring_test_submit_bound_ns :
				 SUBMIT_BOUND_NS;
	uint64_t end = 0;

	for (unsigned round = 0;; round++) {
		int err = submit_once_locked(b);

		if (!err)
			return;
		if (!end)
			end = weft_now_ns() + bound;
		else if (weft_now_ns() >= end)
			weft_panic("io_uring: submit refused for %.1f s (%s)",
				   (double)bound / 1e9, strerror(-err));
		pthread_mutex_unlock(&b->lock);
		backoff(round);
		pthread_mutex_lock(&b->lock);
	}
}

/*
 * A free SQE, for a thread other than the poller: submits the queued
 * ones to free one, with submit_locked()'s retries, so it may drop the
 * lock (never once it returns the SQE).  Never NULL: submit_locked()
 * panics at its bound.  Under the lock.
 */
static struct io_uring_sqe *get_sqe_locked(struct io_uring_s *b)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&b->ring)))
		submit_locked(b);
	return sqe;
}

/* A free SQE for the poller, one submit tried: NULL if none. */
static struct io_uring_sqe *poller_sqe_locked(struct io_uring_s *b)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&b->ring);

	if (!sqe && submit_once_locked(b) == 0)
		sqe = io_uring_get_sqe(&b->ring);
	return sqe;
}

/* An SQE taken and not needed: a NOP whose CQE, if any, is skipped. */
static void prep_unused(struct io_uring_s *b, struct io_uring_sqe *sqe)
{
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data(sqe, NULL);
	sqe->flags |= (__u8)b->remove_flags;
}

static void arm_locked(struct io_uring_sqe *sqe, struct ureg *t)
{
	io_uring_prep_poll_multishot(sqe, t->fd, POLL_MASK);
	io_uring_sqe_set_data(sqe, t);
	t->armed = true;
}

static void unlink_free_locked(struct io_uring_s *b, struct ureg *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		b->all = t->next;
	if (t->next)
		t->next->prev = t->prev;
	free(t);
}

static int grow_locked(struct io_uring_s *b, int fd)
{
	int n = b->nfds ? b->nfds : 64;
	struct ureg **v;

	while (n <= fd)
		n *= 2;
	v = realloc(b->by_fd, sizeof(*v) * (size_t)n);
	if (!v)
		return -ENOMEM;
	memset(v + b->nfds, 0, sizeof(*v) * (size_t)(n - b->nfds));
	b->by_fd = v;
	b->nfds = n;
	return 0;
}

/* Submits a wake NOP.  Under the lock, after winning wake_pending. */
static void submit_wake_locked(struct io_uring_s *b)
{
	struct io_uring_sqe *sqe = get_sqe_locked(b);

	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data(sqe, WAKE_DATA);
	submit_locked(b);
}

/*
 * Wakes the poller, or leaves it to the wake already in flight.  Always
 * the exchange, never a plain load first: the unparker stores its
 * parker's state and then looks here, the poller clears wake_pending and
 * then looks at that state; a plain load could be ordered before the
 * store (x86 too) and skip a needed wake.  Seq_cst exchange: if it reads
 * true, the poller's clearing exchange in reap() comes later in
 * wake_pending's order and reads our true, so that poller sees what we
 * did before (a parker's state) after it; pairs with the
 * exchange in reap().
 */
int weft__io_uring_wake(io_backend_t *base)
{
	struct io_uring_s *b = uring_of(base);

	if (atomic_exchange(&b->wake_pending, true))
		return 0;
	pthread_mutex_lock(&b->lock);
	submit_wake_locked(b);
	pthread_mutex_unlock(&b->lock);
	return 0;
}

int weft__io_uring_add(io_backend_t *base, int fd, void *data)
{
	struct io_uring_s *b = uring_of(base);
	struct io_uring_sqe *sqe;
	struct ureg *t;
	struct stat st;
	int err;

	/*
	 * What epoll_ctl() refuses, refused the same way: a poll request
	 * would take a regular file or a bad fd and fail only in its CQE.
	 */
	if (fstat(fd, &st))
		return -errno;
	if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
		return -EPERM;
	/*
	 * A device may have no poll at all (/dev/null as stdin): epoll
	 * refuses it, while a poll request would end at once with every
	 * bit set, be armed again, and end again, each turn (a busy
	 * poller; the review of this backend).  Asked of epoll itself, on
	 * a scratch instance; sockets, pipes and the like skip the look.
	 */
	if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
		int ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event e = { .events = EPOLLIN };

		if (ep < 0)
			return -errno;
		err = epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
		close(ep);
		if (err)
			return err;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fd = fd;
	/*
	 * Release: orders the registration's set-up (the caller's, before
	 * add) before the poller's acquire load of data in reap(), which
	 * learns of t from a CQE: the kernel orders it too, but
	 * ThreadSanitizer cannot see through the ring.
	 */
	store_release(&t->data, data);

	pthread_mutex_lock(&b->lock);
	/* First: it may drop the lock, the checks below must not. */
	sqe = get_sqe_locked(b);
	if (fd >= b->nfds) {
		err = grow_locked(b, fd);
		if (err)
			goto out_unused;
	}
	if (b->by_fd[fd]) {
		err = -EEXIST;
		goto out_unused;
	}
	b->by_fd[fd] = t;
	t->next = b->all;
	if (b->all)
		b->all->prev = t;
	b->all = t;
	arm_locked(sqe, t);
	/*
	 * Submitted now, under the lock: a poller blocked in the ring sees
	 * the first CQE (the fd's current readiness, which the kernel checks
	 * as it arms the poll) without anyone waking it.  Retried until the
	 * kernel takes it (submit_locked()).
	 */
	submit_locked(b);
	pthread_mutex_unlock(&b->lock);
	return 0;

out_unused:
	prep_unused(b, sqe);
	pthread_mutex_unlock(&b->lock);
	free(t);
	return err;
}

int weft__io_uring_del(io_backend_t *base, int fd)
{
	struct io_uring_s *b = uring_of(base);
	struct io_uring_sqe *sqe;
	struct ureg *t;

	pthread_mutex_lock(&b->lock);
	/* First: it may drop the lock, the look-up below must not. */
	sqe = get_sqe_locked(b);
	t = fd >= 0 && fd < b->nfds ? b->by_fd[fd] : NULL;
	if (!t) {
		prep_unused(b, sqe);
		pthread_mutex_unlock(&b->lock);
		return -ENOENT;
	}
	b->by_fd[fd] = NULL;
	/*
	 * Relaxed: the driver frees the registration only at the start of a
	 * later turn, after taking release_lock, which orders this store
	 * before that turn's loads; a poll under way that still reads the
	 * old pointer hands it out before the registration is freed
	 * (driver_internal.h).
	 */
	store_relaxed(&t->data, NULL);
	t->removed = true;
	if (!t->armed) {
		prep_unused(b, sqe);
		/* On the rearm list, retry_locked() frees it. */
		if (!t->rearm)
			unlink_free_locked(b, t);
		pthread_mutex_unlock(&b->lock);
		return 0;
	}
	/*
	 * The poll's last CQE frees t (weft__io_uring_poll()).  If that CQE
	 * is already in the CQ ring (the poll ended on its own), the cancel
	 * finds nothing and fails with -ENOENT, a CQE of user_data 0 that
	 * the poller skips.  A cancel, not a POLL_REMOVE: a remove fails
	 * with -EALREADY while a wake-up's task work for the poll is queued
	 * and not yet run (on the thread that armed it), and the poll then
	 * stayed armed for good, holding the file: a closed socket never
	 * sent its FIN, a closed listener kept accepting (the review of this
	 * backend, reproduced with a pipe on this kernel).  A cancel marks
	 * the poll cancelled even then; it ends with -ECANCELED.
	 */
	io_uring_prep_cancel64(sqe, (__u64)(uintptr_t)t, 0);
	io_uring_sqe_set_data(sqe, NULL);
	sqe->flags |= (__u8)b->remove_flags;
	submit_locked(b);
	pthread_mutex_unlock(&b->lock);
	return 0;
}

/*
 * Blocks for a CQE up to @timeout_ns (-1: forever), passed exactly
 * (IORING_ENTER_EXT_ARG: no timeout SQE).  Return: 0 or -errno (-ETIME on
 * timeout).
 */
static int wait_cqe(struct io_uring_s *b, int64_t timeout_ns)
{
	struct __kernel_timespec ts = {
		.tv_sec = timeout_ns / 1000000000,
		.tv_nsec = timeout_ns % 1000000000,
	};
	struct io_uring_getevents_arg arg = {
		.sigmask_sz = _NSIG / 8,
		.ts = timeout_ns < 0 ? 0 : (uint64_t)(uintptr_t)&ts,
	};

	if (__builtin_expect(weft__io_uring_wait_hook != NULL, 0)) {
		int err = weft__io_uring_wait_hook();

		if (err < 0)
			return err;
	}
	return io_uring_enter2((unsigned)b->ring.ring_fd, 0, 1,
			       IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
			       (sigset_t *)&arg, sizeof(arg));
}

/* Queues @t to be armed again (retry_locked()).  Under the lock. */
static void queue_rearm_locked(struct io_uring_s *b, struct ureg *t)
{
	t->rearm = true;
	t->rearm_next = NULL;
	if (b->rearm_tail)
		b->rearm_tail->rearm_next = t;
	else
		b->rearm_head = t;
	b->rearm_tail = t;
}

/*
 * A poll's last CQE (no IORING_CQE_F_MORE): free a removed token, queue
 * the others to be armed again.  An error end is reported (IO_ERROR) and armed again
 * too, except the MAX_ERROR_ENDS-th in a row: arming could fail the same
 * way each turn, so that one is final (closed both ways), and the task
 * sees its syscall's error or end of file.  The cancel of an exiting
 * submitter (-ECANCELED) is no error.  Under the lock.  Return: an
 * event's readiness bits, or 0.
 */
static uint32_t poll_ended_locked(struct io_uring_s *b, struct ureg *t, int res)
{
	uint32_t ready = 0;

	t->armed = false;
	if (t->removed) {
		unlink_free_locked(b, t);
		return 0;
	}
	if (t->inject_res && res == -ECANCELED)
		res = t->inject_res;
	t->inject_res = 0;
	if (res < 0 && res != -ECANCELED) {
		if (++t->error_ends >= MAX_ERROR_ENDS)
			return IO_ERROR | IO_READ_CLOSED | IO_WRITE_CLOSED |
			       IO_READABLE | IO_WRITABLE;
		ready = IO_ERROR | IO_READABLE | IO_WRITABLE;
	} else if (res > 0) {
		/* A poll ended by an overflow says what it saw last. */
		t->error_ends = 0;
		ready = weft__io_ready_of((uint32_t)res);
	}
	queue_rearm_locked(b, t);
	return ready;
}

/*
 * The poller's retries: the queued re-arms, then the queued SQEs.  A
 * poll armed again posts its fd's readiness at once, so no more are
 * armed than the CQ ring has room for, and none while the kernel holds
 * overflowed CQEs: it then posts every new CQE to its overflow list too
 * (order kept), so a multishot poll armed then ends at once, again each
 * turn, for as long as that list is not empty: a storm that never
 * settled (test_io_uring, a CQ ring of 8).  The rest wait for a later
 * poll.  Under the lock.
 */
static void retry_locked(struct io_uring_s *b)
{
	unsigned room = io_uring_cq_has_overflow(&b->ring) ?
				0 :
				b->cq_entries - io_uring_cq_ready(&b->ring);

	while (b->rearm_head && room) {
		struct ureg *t = b->rearm_head;
		struct io_uring_sqe *sqe = NULL;

		if (!t->removed) {
			sqe = poller_sqe_locked(b);
			if (!sqe)
				break;
		}
		b->rearm_head = t->rearm_next;
		if (!b->rearm_head)
			b->rearm_tail = NULL;
		t->rearm = false;
		if (t->removed) {
			unlink_free_locked(b, t);
			continue;
		}
		arm_locked(sqe, t);
		room--;
	}
	submit_once_locked(b);
}

/*
 * The ring made anew after dropped CQEs (mark_lost()).  A poll whose last
 * CQE was dropped is gone while its token says armed, so its fd would
 * never be watched again; asking the old ring (a cancel of each poll,
 * whose -ENOENT says gone) is not sound on every kernel this backend
 * runs on: before the cancel hash went under the ring's lock (6.12), a
 * poll could leave the hash before its end was posted, and a -ENOENT
 * then came before an end still on its way (the review of that
 * attempt).  A new ring knows nothing of the old: the old one is closed
 * (the kernel cancels its requests; none of its CQEs is read again),
 * every removed token is freed (its end would have come from the old
 * ring), every live one queued to be armed on the new ring, paced by
 * its CQ's room (retry_locked()).  The old ring's polls let go of their
 * files a moment later, as its exit work runs (a listener closed just
 * then may still take a connection, as with a cross-thread del), and
 * the polls armed again are the poller's: their wake-ups run as its task
 * work until each fd is added again.  SQEs queued on the old ring and not
 * yet submitted go with it: adds are armed again from the list, dels'
 * and test cancels are moot, a wake NOP's poller is awake (this one).
 * Without memory for a new ring, said once, rebuild_due stays set and
 * the next poll tries again.  Under the lock, on the poller.
 */
static void rebuild_locked(struct io_uring_s *b)
{
	struct io_uring fresh;
	struct io_uring_params p;
	struct ureg *t, *next;
	int err;

	err = ring_init(&fresh, b->sq_entries, &p);
	if (err) {
		if (!b->said_rebuild_error) {
			fprintf(stderr,
				"weft: io_uring: the kernel dropped events and "
				"a new ring could not be made (%s); trying "
				"again each turn\n",
				strerror(-err));
			b->said_rebuild_error = true;
		}
		return;
	}
	io_uring_queue_exit(&b->ring);
	b->ring = fresh;
	/*
	 * A wake NOP may have gone with the old ring, or its CQE: taken as
	 * come (seq_cst, as reap()'s), and the poll that rebuilt does not
	 * block after (weft__io_uring_poll()), so the waker's store is seen
	 * as a reaped NOP's would be.  Else wake_pending would stay set and
	 * every later wake be skipped (the review of the rebuild: a wake
	 * between mark_lost()'s clear and its lock, or one submitted while
	 * a rebuild waited for memory).
	 */
	atomic_exchange(&b->wake_pending, false);
	b->cq_entries = p.cq_entries;
	b->rearm_head = b->rearm_tail = NULL;
	for (t = b->all; t; t = next) {
		next = t->next;
		t->rearm = false;
		t->armed = false;
		if (t->removed) {
			unlink_free_locked(b, t);
			continue;
		}
		t->error_ends = 0;
		t->inject_res = 0;
		t->inject_drop = false;
		queue_rearm_locked(b, t);
	}
	b->rebuild_due = false;
	retry_locked(b);
}

/*
 * After the kernel dropped CQEs (-EBADR: an overflow it had no memory to
 * keep): every live token may have missed an edge, so each is reported
 * ready once, and its task tries its syscall again.  Marks them.
 */
static void mark_lost(struct io_uring_s *b)
{
	/*
	 * A wake NOP's CQE may be among the dropped: taken as come, or
	 * wake_pending would stay set and every later wake be skipped.
	 * Seq_cst, as reap()'s; the poller returns from this poll anyway.
	 * A poll's last CQE may be among them too: the ring is made anew
	 * (rebuild_locked()), now or, short of memory, at a later poll.
	 */
	atomic_exchange(&b->wake_pending, false);
	pthread_mutex_lock(&b->lock);
	for (struct ureg *t = b->all; t; t = t->next)
		t->lost = true;
	b->rebuild_due = true;
	rebuild_locked(b);
	pthread_mutex_unlock(&b->lock);
	b->lost_pending = true;
}

/* The marked tokens, as events into @ev (at most @max): how many. */
static int report_lost(struct io_uring_s *b, io_event_t *ev, int max)
{
	struct ureg *t;
	int n = 0;

	pthread_mutex_lock(&b->lock);
	for (t = b->all; t && n < max; t = t->next) {
		/*
		 * Relaxed: t was linked into b->all under the lock after
		 * add's release store of data, and del's store of NULL is
		 * under the lock too.
		 */
		void *data = load_relaxed(&t->data);

		if (!t->lost)
			continue;
		t->lost = false;
		if (data) {
			ev[n].data = data;
			ev[n++].ready = IO_READABLE | IO_WRITABLE;
		}
	}
	while (t && !t->lost)
		t = t->next;
	b->lost_pending = t != NULL;
	pthread_mutex_unlock(&b->lock);
	return n;
}

/* The CQEs ready now, as events into @ev (at most @max). */
static int reap(struct io_uring_s *b, io_event_t *ev, int max)
{
	struct io_uring_cqe *cqes[MAX_EVENTS];
	struct {
		struct ureg *t;
		int res;
	} ended[MAX_EVENTS];
	int n = 0, nended = 0;
	unsigned got;

	got = io_uring_peek_batch_cqe(&b->ring, cqes, (unsigned)max);
	for (unsigned i = 0; i < got; i++) {
		void *ud = io_uring_cqe_get_data(cqes[i]);
		struct ureg *t = ud;
		void *data;

		if (!ud)
			continue; /* a cancel that found the poll ended */
		if (ud == WAKE_DATA) {
			/*
			 * Seq_cst: pairs with the exchange in
			 * weft__io_uring_wake().
			 */
			atomic_exchange(&b->wake_pending, false);
			continue;
		}
		if (!(cqes[i]->flags & IORING_CQE_F_MORE)) {
			ended[nended].t = t;
			ended[nended++].res = cqes[i]->res;
			continue;
		}
		/*
		 * t is live: its last CQE is not handled yet.  Acquire: pairs
		 * with the release in weft__io_uring_add().
		 */
		data = load_acquire(&t->data);
		if (cqes[i]->res > 0)
			t->error_ends = 0;
		if (data && cqes[i]->res > 0) {
			ev[n].data = data;
			ev[n++].ready =
				weft__io_ready_of((uint32_t)cqes[i]->res);
		}
	}
	io_uring_cq_advance(&b->ring, got);
	/*
	 * Overflowed CQEs into the room just made (liburing flushes only an
	 * empty ring): until none is left, no poll is armed again.
	 */
	if (io_uring_cq_has_overflow(&b->ring))
		io_uring_enter((unsigned)b->ring.ring_fd, 0, 0,
			       IORING_ENTER_GETEVENTS, NULL);
	if (nended) {
		pthread_mutex_lock(&b->lock);
		for (int i = 0; i < nended; i++) {
			struct ureg *t = ended[i].t;
			/* Read before poll_ended_locked() may free t. */
			void *data = load_relaxed(&t->data);
			uint32_t ready = 0;

			if (__builtin_expect(t->inject_drop, 0))
				t->inject_drop = false; /* as if dropped */
			else
				ready = poll_ended_locked(b, t, ended[i].res);

			if (ready && data) {
				ev[n].data = data;
				ev[n++].ready = ready;
			}
		}
		/* The re-arms, batched: one submit for the turn, tried once. */
		retry_locked(b);
		pthread_mutex_unlock(&b->lock);
	}
	return n;
}

int weft__io_uring_poll(io_backend_t *base, io_event_t *ev, int max,
			int64_t timeout_ns)
{
	struct io_uring_s *b = uring_of(base);
	int n;

	if (max > MAX_EVENTS)
		max = MAX_EVENTS;
	if (timeout_ns > (int64_t)1000000000 * 3600)
		timeout_ns = (int64_t)1000000000 * 3600;
	if (__builtin_expect(b->rebuild_due, 0)) {
		pthread_mutex_lock(&b->lock);
		rebuild_locked(b);
		pthread_mutex_unlock(&b->lock);
		/* It took any wake in flight (rebuild_locked()): no block. */
		if (!b->rebuild_due)
			timeout_ns = 0;
	}
	/* Relaxed: submit_once_locked() says why. */
	if (load_relaxed(&b->resubmit)) {
		pthread_mutex_lock(&b->lock);
		retry_locked(b);
		pthread_mutex_unlock(&b->lock);
	}
	if (b->lost_pending)
		timeout_ns = 0;
	if (timeout_ns != 0 && !io_uring_cq_ready(&b->ring)) {
		int err;

		/* Something left to submit or arm: back soon, not never. */
		if (load_relaxed(&b->resubmit) &&
		    (timeout_ns < 0 || timeout_ns > RETRY_NS))
			timeout_ns = RETRY_NS;
		err = wait_cqe(b, timeout_ns);
		if (err == -EBADR) {
			mark_lost(b);
		} else if (err < 0 && err != -ETIME && err != -EINTR) {
			/* Not at once again: the driver calls straight back. */
			if (!b->said_wait_error) {
				fprintf(stderr,
					"weft: io_uring: waiting failed (%s), "
					"retrying every 1 ms\n",
					strerror(-err));
				b->said_wait_error = true;
			}
			nanosleep(&(struct timespec){ .tv_nsec = RETRY_NS },
				  NULL);
			return err;
		}
	}
	n = reap(b, ev, max);
	if (b->lost_pending && n < max)
		n += report_lost(b, ev + n, max - n);
	return n;
}

int weft__io_uring_test_end_poll(io_backend_t *base, int fd, int res)
{
	struct io_uring_s *b = uring_of(base);
	struct io_uring_sqe *sqe;
	struct ureg *t;

	pthread_mutex_lock(&b->lock);
	sqe = get_sqe_locked(b);
	t = fd >= 0 && fd < b->nfds ? b->by_fd[fd] : NULL;
	if (!t || !t->armed) {
		prep_unused(b, sqe);
		pthread_mutex_unlock(&b->lock);
		return -ENOENT;
	}
	if (res == WEFT__IO_URING_TEST_DROP_END)
		t->inject_drop = true;
	else
		t->inject_res = res;
	io_uring_prep_cancel64(sqe, (__u64)(uintptr_t)t, 0);
	io_uring_sqe_set_data(sqe, NULL);
	sqe->flags |= (__u8)b->remove_flags;
	submit_locked(b);
	pthread_mutex_unlock(&b->lock);
	return 0;
}

void weft__io_uring_free(io_backend_t *base)
{
	struct io_uring_s *b = uring_of(base);
	struct ureg *t = b->all;

	/* Cancels every request still armed: no CQE is read after this. */
	io_uring_queue_exit(&b->ring);
	while (t) {
		struct ureg *next = t->next;

		free(t);
		t = next;
	}
	free(b->by_fd);
	pthread_mutex_destroy(&b->lock);
	free(b);
}
