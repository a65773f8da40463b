/* SPDX-License-Identifier: MIT */
/*
 * The bounded MPSC channel: waking the consumer, and the consumer.  The
 * ring, the waking and the memory-ordering argument are described at the
 * top of sync_mpsc_internal.h, with rx_wake(), the producers' fast check.
 */
#include <errno.h>
#include <string.h>

#include "resource_internal.h"
#include "sync_mpsc_internal.h"

/* -------------------------------------------------------- waking the rx */

/*
 * The last producer out of the count, with RX_SWAP set: install the
 * consumer's new waker and wake it.  Called holding our place in the count
 * with RX_WAITING clear, so no other producer reads rx_waker meanwhile.
 */
static void rx_install(mpsc_t *ch)
{
	weft_waker_t old;

	pthread_mutex_lock(&ch->lock);
	old = ch->rx_waker;
	ch->rx_waker = ch->rx_next;
	ch->rx_next = WEFT_WAKER_EMPTY;
	/*
	 * Release: our write of rx_waker happens before the consumer reads
	 * it again, which it does only once RX_SWAP is clear (pairs with
	 * the acquire loads in rx_register()).
	 */
	atomic_fetch_and_explicit(&ch->rx_state, ~RX_SWAP,
				  memory_order_release);
	pthread_mutex_unlock(&ch->lock);
	weft_waker_drop(&old);
	/*
	 * The consumer did not look at the ring again after leaving its
	 * waker: it counts on this wake.  We are still in the count, so the
	 * field stays as it is while we read it.
	 */
	weft_waker_wake_by_ref(&ch->rx_waker);
}

/* A producer's wake is over: leave the count (installing, if asked). */
static void rx_wake_done(mpsc_t *ch)
{
	/*
	 * Acquire, here and wherever @s is read below: if we turn out to be
	 * the last one out and install, the reads of rx_waker by the
	 * producers who left before us happen before our write of it
	 * (pairs with the release of their leaving CAS).
	 */
	uint32_t s = load_acquire(&ch->rx_state);

	for (;;) {
		if ((s & RX_SWAP) && rx_wakers(s) == 1) {
			/*
			 * Last one out, and the consumer left a new waker.
			 * Take RX_WAITING back first (it was set for the old
			 * waker, and the consumer does not set it while RX_SWAP
			 * is), so that no producer joins the count to read the
			 * field we are about to write.  Acquire as above; the
			 * consumer's rx_next comes to us through the lock.
			 */
			if ((s & RX_WAITING) &&
			    !atomic_compare_exchange_weak_explicit(
				    &ch->rx_state, &s, s & ~RX_WAITING,
				    memory_order_acquire, memory_order_acquire))
				continue;
			rx_install(ch);
			s = load_acquire(&ch->rx_state);
			continue;
		}
		/*
		 * Release: our read of rx_waker happens before the consumer
		 * (or the producer that installs) writes it again; pairs
		 * with the acquire loads in rx_register(),
		 * weft_mpsc_recv_fini() and above.
		 */
		if (atomic_compare_exchange_weak_explicit(
			    &ch->rx_state, &s, s - RX_WAKER_ONE,
			    memory_order_release, memory_order_acquire))
			return;
	}
}

/* Wakes the consumer if it set RX_WAITING (@s: a recent rx_state). */
void weft__mpsc_rx_wake_slow(mpsc_t *ch, uint32_t s)
{
	do {
		if (!(s & RX_WAITING))
			return;
		/*
		 * Acquire: the last write of rx_waker happens before our read
		 * of it (pairs with the consumer's seq_cst RMW setting
		 * RX_WAITING in rx_register(), which comes after its own
		 * write of the field or after its acquire of the one
		 * rx_install() made).
		 */
	} while (!atomic_compare_exchange_weak_explicit(
		&ch->rx_state, &s, (s & ~RX_WAITING) + RX_WAKER_ONE,
		memory_order_acquire, memory_order_relaxed));
	weft_waker_wake_by_ref(&ch->rx_waker);
	rx_wake_done(ch);
}

/* ------------------------------------------------------------- consumer */

/*
 * Stores the new head and hands the room to queued senders, if any.
 * Consumer only.
 */
static void advance_head(mpsc_t *ch, uint64_t h)
{
	/*
	 * seq_cst store, then seq_cst load: either a sender that queues
	 * sees this head (its seq_cst load in assign_locked()) or we see
	 * its flag (its seq_cst store in send_slow()).  The release part
	 * orders our reads of the slot before a producer's reuse of it
	 * (pairs with the acquire loads of head).
	 */
	store_seqcst(&ch->head, h);
	if (load_seqcst(&ch->senders_queued)) {
		pthread_mutex_lock(&ch->lock);
		weft__mpsc_assign_unlock(ch);
	}
}

/* Takes the element at head into @out, skipping tombstones. */
static bool pop(mpsc_t *ch, void *out)
{
	/* Relaxed: we are head's only writer. */
	uint64_t h = load_relaxed(&ch->head);

	for (;;) {
		slot_t *s = slot_at(ch, h);
		/*
		 * Acquire: the element (or the tombstone's reason) is
		 * visible; pairs with the release in write_slot() and
		 * weft_mpsc_send_fini().
		 */
		uint64_t seq = load_acquire(&s->seq);

		if (seq == SEQ_FULL(h)) {
			copy_elem(ch, out, s->data);
			advance_head(ch, h + 1);
			return true;
		}
		if (seq != SEQ_TOMB(h))
			return false;
		advance_head(ch, ++h);
	}
}

/* Is every sender gone?  Then what they sent is visible. */
static bool tx_closed(mpsc_t *ch)
{
	/* Acquire: pairs with the release of TX_CLOSED in tx_drop(). */
	return load_acquire(&ch->rx_state) & TX_CLOSED;
}

int weft_mpsc_try_recv(weft_mpsc_rx_t *rx, void *out)
{
	mpsc_t *ch = from_rx(rx);

	if (pop(ch, out))
		return 0;
	if (!tx_closed(ch))
		return -EAGAIN;
	/* Sent before the close and not seen by the first try. */
	return pop(ch, out) ? 0 : -EPIPE;
}

void weft_mpsc_rx_drop(weft_mpsc_rx_t *rx)
{
	mpsc_t *ch;
	wake_list_t wl;
	weft_waiter_t *w;

	if (!rx)
		return;
	ch = from_rx(rx);
	/* Relaxed: claims fail from now on; queued senders are told below. */
	atomic_fetch_or_explicit(&ch->tail, T_RX_GONE, memory_order_relaxed);
	wake_list_init(&wl);
	pthread_mutex_lock(&ch->lock);
	while ((w = ch->wait_head)) {
		waitq_pop_front(&ch->wait_head, &ch->wait_tail);
		wake_list_take(&wl, &w->waker);
		w->state = SW_CLOSED;
		if (wake_list_full(&wl)) {
			pthread_mutex_unlock(&ch->lock);
			wake_list_wake(&wl);
			pthread_mutex_lock(&ch->lock);
		}
	}
	senders_clear_locked(ch);
	pthread_mutex_unlock(&ch->lock);
	wake_list_wake(&wl);
	/* What is published now; the last reference drops the rest. */
	weft__mpsc_drop_elems(ch, true);
	weft__mpsc_release(ch);
}

void weft_mpsc_recv_init(weft_mpsc_recv_t *r, weft_mpsc_rx_t *rx, void *out)
{
	r->rx = rx;
	r->out = out;
	r->phase = R_IDLE;
	r->status = 0;
	r->task = 0;
}

enum reg { REG_SET, REG_ALREADY, REG_HANDED, REG_RETRY };

/*
 * Producers are in their wake and the field wakes someone else (or the
 * consumer already left a waker for them): leave @w in rx_next for the
 * last of them to install and wake.  REG_HANDED: done, that wake will
 * come.  REG_RETRY: they all left meanwhile; register as usual.
 */
static enum reg rx_hand_over(mpsc_t *ch, const weft_waker_t *w)
{
	weft_waker_t old = WEFT_WAKER_EMPTY;
	enum reg ret = REG_HANDED;
	uint32_t s;

	pthread_mutex_lock(&ch->lock);
	/*
	 * Relaxed: RX_SWAP changes only under the lock, and the CAS below
	 * re-checks the count.
	 */
	s = load_relaxed(&ch->rx_state);
	if (s & RX_SWAP) {
		/* Not installed yet: replace what we left. */
		old = waker_replace(&ch->rx_next, w);
		goto out;
	}
	/* Empty while RX_SWAP is clear. */
	ch->rx_next = weft_waker_clone(w);
	for (;;) {
		if (!rx_wakers(s)) {
			old = ch->rx_next;
			ch->rx_next = WEFT_WAKER_EMPTY;
			ret = REG_RETRY;
			break;
		}
		/*
		 * Relaxed: the installer sees RX_SWAP, then reads rx_next
		 * under the lock we hold, which orders our write of it.
		 */
		if (atomic_compare_exchange_weak_explicit(
			    &ch->rx_state, &s, s | RX_SWAP,
			    memory_order_relaxed, memory_order_relaxed))
			break;
	}
out:
	pthread_mutex_unlock(&ch->lock);
	weft_waker_drop(&old);
	return ret;
}

/*
 * Makes the consumer wakeable by @cx's waker.  REG_SET: RX_WAITING was
 * just set (*@prev: rx_state before), look at the ring again.
 * REG_ALREADY: it was already set for this waker.  REG_HANDED: the waker
 * was left for the producers now waking (rx_hand_over()), whose last one
 * wakes it.
 */
static enum reg rx_register(mpsc_t *ch, weft_cx_t *cx, uint32_t *prev)
{
	const weft_waker_t *w = weft_cx_waker(cx);
	/*
	 * Acquire: the producers that read the waker field are done with
	 * it (pairs with the release in rx_wake_done()), and a waker that
	 * rx_install() wrote there is visible (pairs with its release of
	 * RX_SWAP).
	 */
	uint32_t s = load_acquire(&ch->rx_state);
	weft_waker_t old;
	enum reg r;

	for (;;) {
		if (s & RX_SWAP)
			goto hand_over;
		if (rx_wakers(s)) {
			/* Producers read the field: it stays as it is. */
			if (!weft_waker_will_wake(&ch->rx_waker, w))
				goto hand_over;
			if (s & RX_WAITING)
				return REG_ALREADY;
			/*
			 * The field wakes us: arm it again, for the producers
			 * after the ones now waking.  seq_cst as the fetch_or
			 * below (and the fence after it); acquire on failure,
			 * for the field, as on the first load.
			 */
			if (atomic_compare_exchange_weak_explicit(
				    &ch->rx_state, &s, s | RX_WAITING,
				    memory_order_seq_cst,
				    memory_order_acquire)) {
				*prev = s;
				fence_seqcst();
				return REG_SET;
			}
			continue;
		}
		if (!(s & RX_WAITING))
			break;
		if (weft_waker_will_wake(&ch->rx_waker, w))
			return REG_ALREADY;
		/* Take the field back to change it (acquire as above). */
		if (atomic_compare_exchange_weak_explicit(
			    &ch->rx_state, &s, s & ~RX_WAITING,
			    memory_order_acquire, memory_order_acquire))
			break;
		continue;
hand_over:
		r = rx_hand_over(ch, w);
		if (r != REG_RETRY)
			return r;
		s = load_acquire(&ch->rx_state); /* acquire as above */
	}
	/* Neither RX_WAITING nor producers in the count: the field is ours. */
	old = waker_replace(&ch->rx_waker, w);
	weft_waker_drop(&old);
	/*
	 * seq_cst: releases the waker field to the producer that takes
	 * RX_WAITING (pairs with the acquire CAS in
	 * weft__mpsc_rx_wake_slow()), and is ordered against the last
	 * sender's RMW of TX_CLOSED.
	 */
	*prev = atomic_fetch_or_explicit(&ch->rx_state, RX_WAITING,
					 memory_order_seq_cst);
	/*
	 * Full fence: RX_WAITING is stored before we look at the ring
	 * again; pairs with the fence in rx_wake().
	 */
	fence_seqcst();
	return REG_SET;
}

/* Registered, but something arrived after all: take RX_WAITING back. */
static void rx_unregister(mpsc_t *ch)
{
	/*
	 * Relaxed: a producer that already took it wakes us once more,
	 * harmlessly; the field is not touched here.
	 */
	atomic_fetch_and_explicit(&ch->rx_state, ~RX_WAITING,
				  memory_order_relaxed);
}

/*
 * READY.  A future that registered gives RX_WAITING back now, so that
 * finishing it later (recv_fini) cannot cancel a newer future's
 * registration (found in review: the newer one's wake-up was lost).
 */
static weft_poll_t recv_done(mpsc_t *ch, weft_mpsc_recv_t *r, int status)
{
	if (r->phase == R_REGISTERED) {
		WEFT_RES_EVENT(&ch->res, RES_WAIT_END, r->task,
			       WEFT_RES_OP_RECV |
				       (status ? WEFT_RES_CLOSED : 0));
		rx_unregister(ch);
		r->phase = R_IDLE;
	}
	r->status = status;
	weft__coop_progress();
	return WEFT_READY;
}

#if WEFT_PROBE
/*
 * The probe learns which task receives (RES_OWNER) when it changes: a
 * full channel's warning names it even if it never waits.  The consumer
 * alone writes rx_task.
 */
static __attribute__((noinline, cold)) void rx_owner(mpsc_t *ch, uint32_t gen)
{
	ch->rx_task = weft__cur_task_id;
	ch->rx_gen = gen;
	weft__res_emit(&ch->res, WEFT_EV_RES_OWNER, ch->rx_task, 0);
}
/* Told again in each listening period: a new console hears it too. */
#define RX_OWNER(ch)                                                           \
	do {                                                                   \
		if (__builtin_expect(weft__probe_on(), 0)) {                   \
			uint32_t g_ = load_relaxed(&weft__probe_listen_gen);   \
			if ((ch)->rx_task != weft__cur_task_id ||              \
			    (ch)->rx_gen != g_)                                \
				rx_owner((ch), g_);                            \
		}                                                              \
	} while (0)
#else
#define RX_OWNER(ch) ((void)(ch))
#endif

/* The receiver's first PENDING: it waits for a message. */
static weft_poll_t recv_wait(mpsc_t *ch, weft_mpsc_recv_t *r)
{
	if (r->phase != R_REGISTERED) {
		/* Kept: its end may come from a drop on another thread. */
		r->task = weft__cur_task_id;
		WEFT_RES_EVENT(&ch->res, RES_WAIT, r->task, WEFT_RES_OP_RECV);
	}
	r->phase = R_REGISTERED;
	return WEFT_PENDING;
}

weft_poll_t weft_mpsc_recv_poll(weft_mpsc_recv_t *r, weft_cx_t *cx)
{
	mpsc_t *ch = from_rx(r->rx);
	uint32_t prev = 0;

	RX_OWNER(ch);
	if (!weft__coop_poll(cx))
		return WEFT_PENDING;
	if (pop(ch, r->out))
		return recv_done(ch, r, 0);
	if (tx_closed(ch))
		goto closed;
	switch (rx_register(ch, cx, &prev)) {
	case REG_ALREADY:
		return WEFT_PENDING;
	case REG_HANDED:
		/* The last producer out wakes us; we look again then. */
		return recv_wait(ch, r);
	default:
		break;
	}
	if (pop(ch, r->out)) {
		r->phase = R_REGISTERED;
		return recv_done(ch, r, 0);
	}
	if (!(prev & TX_CLOSED))
		return recv_wait(ch, r);
	r->phase = R_REGISTERED;
closed:
	/* Every sender is gone: drain, then -EPIPE. */
	if (pop(ch, r->out))
		return recv_done(ch, r, 0);
	return recv_done(ch, r, -EPIPE);
}

void weft_mpsc_recv_fini(weft_mpsc_recv_t *r)
{
	mpsc_t *ch = from_rx(r->rx);
	uint32_t s;

	if (r->phase != R_REGISTERED)
		return;
	WEFT_RES_EVENT(&ch->res, RES_WAIT_END, r->task,
		       WEFT_RES_OP_RECV | WEFT_RES_CANCELLED);
	r->phase = R_IDLE;
	s = load_relaxed(&ch->rx_state);
	while (s & RX_WAITING) {
		/*
		 * Acquire: as in rx_register(); once RX_WAITING is ours
		 * again, with nobody in the count, no producer reads the
		 * waker.
		 */
		if (atomic_compare_exchange_weak_explicit(
			    &ch->rx_state, &s, s & ~RX_WAITING,
			    memory_order_acquire, memory_order_relaxed)) {
			/* Release the task reference now, not at teardown. */
			if (!rx_wakers(s))
				weft_waker_drop(&ch->rx_waker);
			return;
		}
	}
	/*
	 * Producers in the count hold the waker (and maybe a waker left in
	 * rx_next): teardown drops them.
	 */
}
