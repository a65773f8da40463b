/* SPDX-License-Identifier: MIT */
/*
 * A bounded MPSC channel of fixed-size elements.
 *
 * Elements are copied into a ring of slots (the element size is fixed at
 * creation): no allocation per message, and a message of a few words (an
 * id and a pointer, a u64) costs one small copy in and one out.  A void *
 * channel would force a malloc per message for anything that is not
 * pointer-sized, and leave ownership of the pointees to the user anyway.
 *
 * The ring.  Positions are free-running u64s; slot pos & mask holds
 * position pos.  tail (producers) is claimed by CAS, head is advanced by
 * the consumer alone.  A producer may claim tail while tail - head <
 * capacity, writes the element, then publishes it by storing the slot's
 * sequence number ((pos + 1) << 1; | 1 for a tombstone, a claimed position
 * whose sender gave up).  The consumer reads the slot at head once its
 * sequence says so: it never reads tail, and producers read head only when
 * their cached copy (head_seen) says the ring is full, so in steady state
 * the two sides share only the slots' cache lines.
 *
 * Waking the consumer.  It sets RX_WAITING (after storing its waker) and
 * then looks at the ring again; a producer publishes and then looks at
 * RX_WAITING, with a full fence on each side between the store and the
 * load, so one of them sees the other.  Only a producer that finds
 * RX_WAITING set wakes, and the first to take it (clearing RX_WAITING and
 * adding itself to the count of wakers in rx_state) is the only one: a
 * consumer that is already scheduled or running costs a producer one fence
 * and one load of a line that stays shared.  A producer in the count reads
 * the waker field; the consumer writes it only while RX_WAITING is clear
 * and the count is zero.
 *
 * The consumer never waits by yielding.  Woken by a producer that is still
 * inside its wake (a plain thread in a futex wake, or preempted there), it
 * may find nothing new and need to wait again while the count is not zero.
 * If the field already wakes it, it sets RX_WAITING again without writing
 * the field (the same fence and re-check as above); producers that take
 * it join the count, and reading the field concurrently is fine.  If the
 * field wakes someone else (the receiver moved to another task), it leaves
 * its waker in rx_next under the lock and sets RX_SWAP; the last producer
 * out of the count installs it and wakes it (rx_wake_done()), and the
 * consumer, polled again by that wake, looks at the ring then.  (It yielded
 * instead until issue 15, and a consumer fed from a plain thread was polled
 * thousands of times per message while the sender's wake finished.)
 *
 * Waiting senders.  A sender that finds no room queues (FIFO, under the
 * lock) and sets T_SENDERS in the tail word, which stops the lock-free
 * claims: from then on room goes to queued senders in order.  The
 * consumer, after each advance of head, checks senders_queued (a flag on a
 * line of its own, so reading it costs nothing while it does not change);
 * the queueing sender stores that flag and then re-reads head, the
 * consumer stores head and then reads the flag, all seq_cst, so one of
 * them sees the other and hands out the room.  Handing out means claiming
 * the position for the waiter (under the lock) and waking it: the waiter
 * writes its element when it next runs.  A waiter dropped while holding a
 * position leaves a tombstone there, which the consumer skips, handing the
 * room on as for any other.  (Passing the position to the next waiter
 * instead would let that sender's element overtake the ones it sent
 * before: the dropped position can be older than theirs.)
 *
 * Lifetime: the receiver holds one reference and the senders together
 * hold one; tx_count counts sender handles.  The last sender sets
 * TX_CLOSED (the consumer drains what is published, then sees -EPIPE);
 * the receiver sets T_RX_GONE (claims fail, queued senders complete with
 * -EPIPE) and drops what is buffered.
 *
 * Lock order: ch->lock is a leaf; wakers are woken after it is released.
 */
#include <errno.h>
#include <string.h>

#include "sync_internal.h"

/* The tail word: position << 2 | T_RX_GONE | T_SENDERS. */
#define T_SENDERS ((uint64_t)1)
#define T_RX_GONE ((uint64_t)2)
#define T_SHIFT 2
#define T_ONE ((uint64_t)1 << T_SHIFT)

/*
 * rx_state: RX_WAITING | RX_SWAP | TX_CLOSED, and above them the number of
 * producers waking the consumer (reading rx_waker).
 */
#define RX_WAITING 1u
#define RX_SWAP 2u
#define TX_CLOSED 4u
#define RX_WAKER_SHIFT 3
#define RX_WAKER_ONE (1u << RX_WAKER_SHIFT)

/* A slot's sequence number for position @pos, published or skipped. */
#define SEQ_FULL(pos) (((pos) + 1) << 1)
#define SEQ_TOMB(pos) ((((pos) + 1) << 1) | 1)

/* Send futures: phase (owner only) and waiter state (under the lock). */
enum { S_IDLE, S_QUEUED, S_DONE };
enum { SW_WAITING = 1, SW_ASSIGNED, SW_CLOSED };

/* Recv futures: did this one set RX_WAITING? */
enum { R_IDLE, R_REGISTERED };

typedef struct slot_s {
	_Atomic uint64_t seq;
	_Alignas(8) unsigned char data[];
} slot_t;

typedef struct mpsc_s {
	/* Read-only after creation. */
	uint64_t cap;
	uint64_t mask;
	size_t elem_size;
	size_t slot_size;
	unsigned char *slots;
	weft_drop_cb elem_drop;

	/* Producers: claimed by CAS on every send. */
	weft__cacheline_aligned _Atomic uint64_t tail;
	_Atomic uint64_t head_seen; /* a recent head; never ahead of it */

	/* Consumer: stored on every receive, read by producers when full. */
	weft__cacheline_aligned _Atomic uint64_t head;

	/* Waking the consumer (see the top). */
	weft__cacheline_aligned _Atomic uint32_t rx_state;
	weft_waker_t rx_waker;
	weft_waker_t rx_next; /* under the lock; see RX_SWAP */

	/* Queued senders. */
	weft__cacheline_aligned _Atomic uint32_t senders_queued;
	pthread_mutex_t lock; /* guards the queue and its waiters */
	weft_waiter_t *wait_head;
	weft_waiter_t *wait_tail;

	/* Cold. */
	weft__cacheline_aligned _Atomic uint32_t refs;
	_Atomic uint32_t tx_count;
} mpsc_t;

static uint32_t rx_wakers(uint32_t s)
{
	return s >> RX_WAKER_SHIFT;
}

static mpsc_t *from_tx(weft_mpsc_tx_t *tx)
{
	return (mpsc_t *)tx;
}

static mpsc_t *from_rx(weft_mpsc_rx_t *rx)
{
	return (mpsc_t *)rx;
}

static slot_t *slot_at(mpsc_t *ch, uint64_t pos)
{
	return (slot_t *)(ch->slots + (pos & ch->mask) * ch->slot_size);
}

static void copy_elem(mpsc_t *ch, void *dst, const void *src)
{
	/* The common word-sized case as a fixed-size (inlined) copy. */
	if (ch->elem_size == 8)
		memcpy(dst, src, 8);
	else
		memcpy(dst, src, ch->elem_size);
}

/* ------------------------------------------------------------ lifetime */

int weft_mpsc_create(size_t capacity, size_t elem_size, weft_drop_cb elem_drop,
		     weft_mpsc_tx_t **tx, weft_mpsc_rx_t **rx)
{
	uint64_t size = 1;
	void *mem;
	mpsc_t *ch;

	if (capacity == 0 || capacity > WEFT_MPSC_MAX_CAPACITY ||
	    elem_size == 0 || elem_size > WEFT_MPSC_MAX_ELEM || !tx || !rx)
		return -EINVAL;
	while (size < capacity)
		size <<= 1;

	if (posix_memalign(&mem, WEFT_CACHELINE, sizeof(*ch)))
		return -ENOMEM;
	ch = mem;
	memset(ch, 0, sizeof(*ch));
	ch->cap = capacity;
	ch->mask = size - 1;
	ch->elem_size = elem_size;
	ch->slot_size = sizeof(slot_t) + ((elem_size + 7) & ~(size_t)7);
	ch->elem_drop = elem_drop;
	if (posix_memalign(&mem, WEFT_CACHELINE, size * ch->slot_size))
		goto out_free_ch;
	/* Sequence 0 matches no position: every slot starts empty. */
	memset(mem, 0, size * ch->slot_size);
	ch->slots = mem;
	pthread_mutex_init(&ch->lock, NULL);
	ch->rx_waker = WEFT_WAKER_EMPTY;
	ch->rx_next = WEFT_WAKER_EMPTY;
	/* Not yet shared: relaxed stores. */
	store_relaxed(&ch->refs, 2);
	store_relaxed(&ch->tx_count, 1);
	*tx = (weft_mpsc_tx_t *)ch;
	*rx = (weft_mpsc_rx_t *)ch;
	return 0;

out_free_ch:
	free(ch);
	return -ENOMEM;
}

/*
 * Drops the published elements from head on, stopping at the first
 * position that is not published when @prefix, else going up to tail.
 * Only the consumer (or the last reference) calls this.
 */
static void drop_elems(mpsc_t *ch, bool prefix)
{
	uint64_t h = load_relaxed(&ch->head);
	uint64_t t = load_relaxed(&ch->tail) >> T_SHIFT;

	for (; h != t; h++) {
		slot_t *s = slot_at(ch, h);
		/* Acquire: pairs with the release in write_slot(). */
		uint64_t seq = load_acquire(&s->seq);

		if (seq == SEQ_FULL(h)) {
			if (ch->elem_drop)
				ch->elem_drop(s->data);
		} else if (seq != SEQ_TOMB(h) && prefix) {
			break;
		}
	}
	/* Release: as in advance_head(); no sender is queued any more. */
	store_release(&ch->head, h);
}

static void mpsc_release(mpsc_t *ch)
{
	/* acq_rel: the last reference sees every use of the channel. */
	if (fetch_sub_acq_rel(&ch->refs, 1) != 1)
		return;
	drop_elems(ch, false);
	weft_waker_drop(&ch->rx_waker);
	weft_waker_drop(&ch->rx_next);
	pthread_mutex_destroy(&ch->lock);
	free(ch->slots);
	free(ch);
}

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
static void rx_wake_slow(mpsc_t *ch, uint32_t s)
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

/* After publishing a slot: wake the consumer if it is waiting. */
static void rx_wake(mpsc_t *ch)
{
	/*
	 * Full fence: orders the slot's publication before the load of
	 * rx_state, so either we see RX_WAITING or the consumer's re-check
	 * sees the slot; pairs with the fence in rx_register().
	 */
	fence_seqcst();
	/* Relaxed: the fence does the ordering; rx_wake_slow() acquires. */
	uint32_t s = load_relaxed(&ch->rx_state);

	if (s & RX_WAITING)
		rx_wake_slow(ch, s);
}

/* ------------------------------------------------------------ producers */

/*
 * Is there room at @pos?  Reads the shared head only when the cached one
 * says no.  A head ahead of @pos means @pos is stale: say yes, and let the
 * claim's CAS fail.
 */
static bool has_room(mpsc_t *ch, uint64_t pos)
{
	/*
	 * Acquire: the head was read by a producer with acquire and stored
	 * with release (below), so the consumer's reads of the slot we may
	 * reuse happen before our write (pairs with the release store).
	 */
	uint64_t h = load_acquire(&ch->head_seen);

	if ((int64_t)(pos - h) < 0 || pos - h < ch->cap)
		return true;
	/*
	 * Acquire: the consumer's reads of the slots it freed happen before
	 * our writes to them; pairs with the store in advance_head().
	 */
	h = load_acquire(&ch->head);
	/* Release: hands that ordering on to the producers reading it. */
	store_release(&ch->head_seen, h);
	return (int64_t)(pos - h) < 0 || pos - h < ch->cap;
}

enum claim { CLAIM_OK, CLAIM_CLOSED, CLAIM_WAIT };

/* The lock-free claim of the next position. */
static enum claim claim_fast(mpsc_t *ch, uint64_t *pos)
{
	uint64_t t = load_relaxed(&ch->tail);

	for (;;) {
		if (t & T_RX_GONE)
			return CLAIM_CLOSED;
		if ((t & T_SENDERS) || !has_room(ch, t >> T_SHIFT))
			return CLAIM_WAIT;
		/*
		 * Relaxed: claiming publishes nothing (the slot's sequence
		 * does) and the room was checked with acquire above.
		 */
		if (atomic_compare_exchange_weak_explicit(
			    &ch->tail, &t, t + T_ONE, memory_order_relaxed,
			    memory_order_relaxed)) {
			*pos = t >> T_SHIFT;
			return CLAIM_OK;
		}
	}
}

static void write_slot(mpsc_t *ch, uint64_t pos, const void *elem)
{
	slot_t *s = slot_at(ch, pos);

	copy_elem(ch, s->data, elem);
	/*
	 * Release: the element is written before the consumer reads it;
	 * pairs with the acquire load in pop().
	 */
	store_release(&s->seq, SEQ_FULL(pos));
}

/* Under the lock, the queue just emptied: let claims through again. */
static void senders_clear_locked(mpsc_t *ch)
{
	/* Relaxed: the flags say "take the lock"; the lock orders the rest. */
	atomic_fetch_and_explicit(&ch->tail, ~T_SENDERS, memory_order_relaxed);
	store_relaxed(&ch->senders_queued, 0);
}

/*
 * Under the lock: hand free positions to queued senders, in order, until
 * the ring is full, the queue is empty or @wl is.
 * Return: true when it stopped because @wl is full.
 */
static bool assign_locked(mpsc_t *ch, wake_list_t *wl)
{
	weft_waiter_t *w;

	while ((w = ch->wait_head)) {
		/* Only lock holders claim while T_SENDERS is set. */
		uint64_t t = load_relaxed(&ch->tail);
		/*
		 * seq_cst: against the consumer's seq_cst store of head and
		 * load of senders_queued (advance_head()): if it missed our
		 * flag we see its head.  The acquire part orders its reads
		 * of the freed slot before the waiter's write.
		 */
		uint64_t h = load_seqcst(&ch->head);

		if ((t & T_RX_GONE) || (t >> T_SHIFT) - h >= ch->cap)
			return false;
		/* Relaxed: as in claim_fast(); fails only on T_RX_GONE. */
		if (!atomic_compare_exchange_strong_explicit(
			    &ch->tail, &t, t + T_ONE, memory_order_relaxed,
			    memory_order_relaxed))
			continue;
		waitq_pop_front(&ch->wait_head, &ch->wait_tail);
		w->value = t >> T_SHIFT;
		wake_list_take(wl, &w->waker);
		/* Last touch: its future may free it once we unlock. */
		w->state = SW_ASSIGNED;
		if (!ch->wait_head)
			senders_clear_locked(ch);
		if (wake_list_full(wl))
			return true;
	}
	return false;
}

/* Called with the lock held; hands out room, unlocks, wakes. */
static void assign_unlock(mpsc_t *ch)
{
	wake_list_t wl;

	wake_list_init(&wl);
	while (assign_locked(ch, &wl)) {
		pthread_mutex_unlock(&ch->lock);
		wake_list_wake(&wl);
		pthread_mutex_lock(&ch->lock);
	}
	pthread_mutex_unlock(&ch->lock);
	wake_list_wake(&wl);
}

weft_mpsc_tx_t *weft_mpsc_tx_clone(weft_mpsc_tx_t *tx)
{
	/* Relaxed: made from a live sender, which keeps the count above 0. */
	fetch_add_relaxed(&from_tx(tx)->tx_count, 1);
	return tx;
}

void weft_mpsc_tx_drop(weft_mpsc_tx_t *tx)
{
	mpsc_t *ch;
	uint32_t prev;

	if (!tx)
		return;
	ch = from_tx(tx);
	/*
	 * acq_rel: every sender's sends happen before the last drop, which
	 * then releases them all with TX_CLOSED below.
	 */
	if (fetch_sub_acq_rel(&ch->tx_count, 1) == 1) {
		/*
		 * acq_rel: release publishes every send to a consumer that
		 * sees TX_CLOSED (pairs with its acquire loads); acquire,
		 * with the consumer's RMW of RX_WAITING, for the waker.
		 */
		prev = atomic_fetch_or_explicit(&ch->rx_state, TX_CLOSED,
						memory_order_acq_rel);
		rx_wake_slow(ch, prev | TX_CLOSED);
		mpsc_release(ch);
	}
}

int weft_mpsc_try_send(weft_mpsc_tx_t *tx, const void *elem)
{
	mpsc_t *ch = from_tx(tx);
	uint64_t pos;

	switch (claim_fast(ch, &pos)) {
	case CLAIM_OK:
		write_slot(ch, pos, elem);
		rx_wake(ch);
		return 0;
	case CLAIM_CLOSED:
		return -EPIPE;
	default:
		return -EAGAIN;
	}
}

void weft_mpsc_send_init(weft_mpsc_send_t *s, weft_mpsc_tx_t *tx,
			 const void *elem)
{
	s->waiter = (weft_waiter_t){ 0 };
	s->tx = tx;
	s->elem = elem;
	s->phase = S_IDLE;
	s->status = 0;
}

static weft_poll_t send_done(weft_mpsc_send_t *s, int status)
{
	s->phase = S_DONE;
	s->status = status;
	weft__coop_progress();
	return WEFT_READY;
}

/* Writes into the position we were handed, unless the receiver left. */
static weft_poll_t send_assigned(weft_mpsc_send_t *s, uint64_t pos)
{
	mpsc_t *ch = from_tx(s->tx);

	/* Relaxed: a hint; a receiver that leaves later drops the element. */
	if (load_relaxed(&ch->tail) & T_RX_GONE)
		return send_done(s, -EPIPE);
	write_slot(ch, pos, s->elem);
	rx_wake(ch);
	return send_done(s, 0);
}

/* No room, or senders queued: queue behind them. */
static weft_poll_t send_slow(weft_mpsc_send_t *s, weft_cx_t *cx)
{
	mpsc_t *ch = from_tx(s->tx);
	weft_waiter_t *w = &s->waiter;
	wake_list_t wl;
	bool more;

	wake_list_init(&wl);
	pthread_mutex_lock(&ch->lock);
	/* Relaxed: T_RX_GONE is set before the receiver takes the lock. */
	if (load_relaxed(&ch->tail) & T_RX_GONE) {
		pthread_mutex_unlock(&ch->lock);
		return send_done(s, -EPIPE);
	}
	/* Relaxed: stops the lock-free claims; the lock orders the queue. */
	atomic_fetch_or_explicit(&ch->tail, T_SENDERS, memory_order_relaxed);
	/*
	 * seq_cst: against the consumer's store of head and load of this
	 * flag (advance_head()); assign_locked() re-reads head after it.
	 */
	store_seqcst(&ch->senders_queued, 1);
	w->state = SW_WAITING;
	waitq_push_back(&ch->wait_head, &ch->wait_tail, w);
	/* Room freed meanwhile goes to the queue in order, maybe to us. */
	more = assign_locked(ch, &wl);
	if (w->state == SW_WAITING) {
		w->waker = weft_waker_clone(weft_cx_waker(cx));
		s->phase = S_QUEUED;
	}
	while (more) {
		pthread_mutex_unlock(&ch->lock);
		wake_list_wake(&wl);
		pthread_mutex_lock(&ch->lock);
		more = assign_locked(ch, &wl);
	}
	pthread_mutex_unlock(&ch->lock);
	wake_list_wake(&wl);
	if (s->phase == S_QUEUED)
		return WEFT_PENDING;
	/* Assigned before we queued a waker: nothing will wake us. */
	return send_assigned(s, w->value);
}

static weft_poll_t send_queued(weft_mpsc_send_t *s, weft_cx_t *cx)
{
	mpsc_t *ch = from_tx(s->tx);
	weft_waiter_t *w = &s->waiter;
	weft_waker_t old;
	uint32_t state;

	pthread_mutex_lock(&ch->lock);
	state = w->state;
	if (state == SW_WAITING) {
		old = waker_replace(&w->waker, weft_cx_waker(cx));
		pthread_mutex_unlock(&ch->lock);
		weft_waker_drop(&old);
		return WEFT_PENDING;
	}
	/* Set under the lock by whoever dequeued us; the lock orders it. */
	pthread_mutex_unlock(&ch->lock);
	if (state == SW_CLOSED)
		return send_done(s, -EPIPE);
	return send_assigned(s, w->value);
}

weft_poll_t weft_mpsc_send_poll(weft_mpsc_send_t *s, weft_cx_t *cx)
{
	mpsc_t *ch = from_tx(s->tx);
	uint64_t pos;

	if (s->phase == S_DONE)
		return WEFT_READY;
	if (!weft__coop_poll(cx))
		return WEFT_PENDING;
	if (s->phase == S_QUEUED)
		return send_queued(s, cx);
	switch (claim_fast(ch, &pos)) {
	case CLAIM_OK:
		write_slot(ch, pos, s->elem);
		rx_wake(ch);
		return send_done(s, 0);
	case CLAIM_CLOSED:
		return send_done(s, -EPIPE);
	default:
		return send_slow(s, cx);
	}
}

void weft_mpsc_send_fini(weft_mpsc_send_t *s)
{
	mpsc_t *ch;
	weft_waiter_t *w = &s->waiter;
	weft_waker_t old = WEFT_WAKER_EMPTY;
	bool tomb = false;
	uint64_t pos;

	if (s->phase != S_QUEUED)
		goto out;
	ch = from_tx(s->tx);
	pthread_mutex_lock(&ch->lock);
	switch (w->state) {
	case SW_WAITING:
		waitq_remove(&ch->wait_head, &ch->wait_tail, w);
		if (!ch->wait_head)
			senders_clear_locked(ch);
		old = w->waker;
		w->waker = WEFT_WAKER_EMPTY;
		break;
	case SW_ASSIGNED:
		/*
		 * A position we will not fill: skipped by the consumer, which
		 * then hands the room on.  Not passed to the next queued
		 * sender: that sender may have sent earlier elements to later
		 * positions, and its element would overtake them.  Release:
		 * pairs with the acquire in pop().
		 */
		pos = w->value;
		store_release(&slot_at(ch, pos)->seq, SEQ_TOMB(pos));
		tomb = true;
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&ch->lock);
	weft_waker_drop(&old);
	if (tomb)
		rx_wake(ch); /* the consumer may be waiting at that slot */
out:
	s->phase = S_DONE;
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
		assign_unlock(ch);
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
	drop_elems(ch, true);
	mpsc_release(ch);
}

void weft_mpsc_recv_init(weft_mpsc_recv_t *r, weft_mpsc_rx_t *rx, void *out)
{
	r->rx = rx;
	r->out = out;
	r->phase = R_IDLE;
	r->status = 0;
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
	 * RX_WAITING (pairs with the acquire CAS in rx_wake_slow()), and is
	 * ordered against the last sender's RMW of TX_CLOSED.
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
		rx_unregister(ch);
		r->phase = R_IDLE;
	}
	r->status = status;
	weft__coop_progress();
	return WEFT_READY;
}

weft_poll_t weft_mpsc_recv_poll(weft_mpsc_recv_t *r, weft_cx_t *cx)
{
	mpsc_t *ch = from_rx(r->rx);
	uint32_t prev = 0;

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
		r->phase = R_REGISTERED;
		return WEFT_PENDING;
	default:
		break;
	}
	r->phase = R_REGISTERED;
	if (pop(ch, r->out))
		return recv_done(ch, r, 0);
	if (!(prev & TX_CLOSED))
		return WEFT_PENDING;
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
