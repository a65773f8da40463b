/* SPDX-License-Identifier: MIT */
/*
 * The bounded MPSC channel: its lifetime and the producers.  The ring,
 * the waking and the memory-ordering argument are described at the top
 * of sync_mpsc_internal.h; the consumer is in sync_mpsc_rx.c.
 */
#include <errno.h>
#include <string.h>

#include "resource_internal.h"
#include "sync_mpsc_internal.h"

/* ------------------------------------------------------------ lifetime */

int weft_mpsc_create_at(size_t capacity, size_t elem_size,
			weft_drop_cb elem_drop, weft_mpsc_tx_t **tx,
			weft_mpsc_rx_t **rx, const char *file, int line)
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
	weft__res_init(&ch->res, WEFT_RES_MPSC, file, line);
	*tx = (weft_mpsc_tx_t *)ch;
	*rx = (weft_mpsc_rx_t *)ch;
	return 0;

out_free_ch:
	free(ch);
	return -ENOMEM;
}

/* The function behind the macro, for callers that take its address. */
int(weft_mpsc_create)(size_t capacity, size_t elem_size, weft_drop_cb elem_drop,
		      weft_mpsc_tx_t **tx, weft_mpsc_rx_t **rx)
{
	return weft_mpsc_create_at(capacity, elem_size, elem_drop, tx, rx, NULL,
				   0);
}

void weft_mpsc_name(weft_mpsc_tx_t *tx, const char *name)
{
	weft__res_name(&from_tx(tx)->res, name);
}

/*
 * Drops the published elements from head on, stopping at the first
 * position that is not published when @prefix, else going up to tail.
 * Only the consumer (or the last reference) calls this.
 */
void weft__mpsc_drop_elems(mpsc_t *ch, bool prefix)
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

void weft__mpsc_release(mpsc_t *ch)
{
	/* acq_rel: the last reference sees every use of the channel. */
	if (fetch_sub_acq_rel(&ch->refs, 1) != 1)
		return;
	weft__mpsc_drop_elems(ch, false);
	weft__res_fini(&ch->res);
	weft_waker_drop(&ch->rx_waker);
	weft_waker_drop(&ch->rx_next);
	pthread_mutex_destroy(&ch->lock);
	free(ch->slots);
	free(ch);
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
void weft__mpsc_assign_unlock(mpsc_t *ch)
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
		weft__mpsc_rx_wake_slow(ch, prev | TX_CLOSED);
		weft__mpsc_release(ch);
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
		/* Under the lock: the wait's end is set under it too. */
		WEFT_RES_WAIT(&ch->res, w, WEFT_RES_OP_SEND);
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
	WEFT_RES_WAIT_END(w, WEFT_RES_OP_SEND |
				     (state == SW_CLOSED ? WEFT_RES_CLOSED : 0));
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
	WEFT_RES_WAIT_END(w, WEFT_RES_OP_SEND | WEFT_RES_CANCELLED);
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
