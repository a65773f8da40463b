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
 * without the lock); the rest, the fd table and the list are b->lock's.
 */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>

#include "atomic_internal.h"
#include "io_backend.h"
#include "runtime_internal.h"

#define MAX_EVENTS 256
#define SQ_ENTRIES 256
#define CQ_ENTRIES 4096

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
	struct ureg *prev, *next; /* every token not yet freed */
};

struct io_uring_s {
	io_backend_t base; /* first: io_backend.h's dispatch */
	struct io_uring ring;
	unsigned remove_flags; /* IOSQE_CQE_SKIP_SUCCESS where the kernel has it */

	pthread_mutex_t lock; /* the SQ ring, the tokens' armed and removed */
	struct ureg **by_fd;  /* the live token of each fd, or NULL; lock */
	int nfds;
	struct ureg *all; /* lock */
	_Atomic bool resubmit; /* the last submit failed: see submit_locked() */
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

int weft__io_uring_create(io_backend_t **out)
{
	struct io_uring_params p = {
		.flags = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP,
		.cq_entries = CQ_ENTRIES,
	};
	struct io_uring_s *b = calloc(1, sizeof(*b));
	int err;

	if (!b)
		return -ENOMEM;
	err = io_uring_queue_init_params(SQ_ENTRIES, &b->ring, &p);
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
 * Submits what is queued.  A failure (-EAGAIN, -EBUSY: the kernel short of
 * memory) leaves the SQEs in the ring: b->resubmit asks the poller to try
 * again at its next poll.  Return: 0 or that -errno.
 */
static int submit_locked(struct io_uring_s *b)
{
	int ret;

	do
		ret = io_uring_submit(&b->ring);
	while (ret == -EINTR);
	/* Relaxed: a hint read by the poller, which then takes the lock. */
	store_relaxed(&b->resubmit, ret < 0);
	return ret < 0 ? ret : 0;
}

/* A free SQE; NULL only if the kernel refuses to take the queued ones. */
static struct io_uring_sqe *get_sqe(struct io_uring_s *b)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&b->ring);

	if (!sqe && submit_locked(b) == 0)
		sqe = io_uring_get_sqe(&b->ring);
	return sqe;
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
	struct io_uring_sqe *sqe = get_sqe(b);

	if (!sqe)
		weft_panic("io_uring: no SQE for a wake");
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
	if (fd >= b->nfds) {
		err = grow_locked(b, fd);
		if (err)
			goto out_unlock;
	}
	if (b->by_fd[fd]) {
		err = -EEXIST;
		goto out_unlock;
	}
	b->by_fd[fd] = t;
	t->next = b->all;
	if (b->all)
		b->all->prev = t;
	b->all = t;
	sqe = get_sqe(b);
	if (!sqe) {
		err = -EAGAIN;
		goto out_unlink;
	}
	arm_locked(sqe, t);
	/*
	 * Submitted now, under the lock: a poller blocked in the ring sees
	 * the first CQE (the fd's current readiness, which the kernel checks
	 * as it arms the poll) without anyone waking it.  A failed submit
	 * leaves the SQE queued (see submit_locked()); t is armed either way.
	 */
	submit_locked(b);
	pthread_mutex_unlock(&b->lock);
	return 0;

out_unlink:
	b->by_fd[fd] = NULL;
	b->all = t->next;
	if (t->next)
		t->next->prev = NULL;

out_unlock:
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
	t = fd >= 0 && fd < b->nfds ? b->by_fd[fd] : NULL;
	if (!t) {
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
	sqe = get_sqe(b);
	if (!sqe)
		weft_panic("io_uring: no SQE for a poll cancel");
	io_uring_prep_cancel64(sqe, (__u64)(uintptr_t)t, 0);
	io_uring_sqe_set_data(sqe, NULL);
	sqe->flags |= (__u8)b->remove_flags;
	/* Failed, it waits in the ring for the poller's next submit. */
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

	return io_uring_enter2((unsigned)b->ring.ring_fd, 0, 1,
			       IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
			       (sigset_t *)&arg, sizeof(arg));
}

/*
 * A poll's last CQE (no IORING_CQE_F_MORE): free a removed token, arm
 * the others again, except after an error other than the cancel of an
 * exiting submitter: arming again could fail the same way every turn.
 * Under the lock.  Return: an event's readiness bits, or 0.
 */
static uint32_t poll_ended_locked(struct io_uring_s *b, struct ureg *t, int res)
{
	struct io_uring_sqe *sqe;

	t->armed = false;
	if (t->removed) {
		unlink_free_locked(b, t);
		return 0;
	}
	if (res < 0 && res != -ECANCELED)
		return IO_ERROR | IO_READABLE | IO_WRITABLE;
	sqe = get_sqe(b);
	if (!sqe)
		return IO_ERROR | IO_READABLE | IO_WRITABLE;
	arm_locked(sqe, t);
	/* A poll ended by an overflow says what it saw last. */
	return res > 0 ? weft__io_ready_of((uint32_t)res) : 0;
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
		if (data && cqes[i]->res > 0) {
			ev[n].data = data;
			ev[n++].ready =
				weft__io_ready_of((uint32_t)cqes[i]->res);
		}
	}
	io_uring_cq_advance(&b->ring, got);
	if (nended) {
		pthread_mutex_lock(&b->lock);
		for (int i = 0; i < nended; i++) {
			struct ureg *t = ended[i].t;
			/* Read before poll_ended_locked() may free t. */
			void *data = load_relaxed(&t->data);
			uint32_t ready = poll_ended_locked(b, t, ended[i].res);

			if (ready && data) {
				ev[n].data = data;
				ev[n++].ready = ready;
			}
		}
		/* The re-arms, batched: one submit for the turn. */
		submit_locked(b);
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
	if (load_relaxed(&b->resubmit)) {
		pthread_mutex_lock(&b->lock);
		submit_locked(b);
		pthread_mutex_unlock(&b->lock);
	}
	if (timeout_ns != 0 && !io_uring_cq_ready(&b->ring)) {
		int err = wait_cqe(b, timeout_ns);

		if (err < 0 && err != -ETIME && err != -EINTR)
			return err;
	}
	n = reap(b, ev, max);
	return n;
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
