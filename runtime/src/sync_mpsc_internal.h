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
#ifndef WEFT_SYNC_MPSC_INTERNAL_H
#define WEFT_SYNC_MPSC_INTERNAL_H

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
	/* What the probe sees; rx_task: the receiving task it was last
	 * told of (the consumer's, while the probe listens). */
	weft_resource_t res;
	uint64_t rx_task;
	uint32_t rx_gen; /* the listening period rx_task was told in */
} mpsc_t;

static inline uint32_t rx_wakers(uint32_t s)
{
	return s >> RX_WAKER_SHIFT;
}

static inline mpsc_t *from_tx(weft_mpsc_tx_t *tx)
{
	return (mpsc_t *)tx;
}

static inline mpsc_t *from_rx(weft_mpsc_rx_t *rx)
{
	return (mpsc_t *)rx;
}

static inline slot_t *slot_at(mpsc_t *ch, uint64_t pos)
{
	return (slot_t *)(ch->slots + (pos & ch->mask) * ch->slot_size);
}

static inline void copy_elem(mpsc_t *ch, void *dst, const void *src)
{
	/* The common word-sized case as a fixed-size (inlined) copy. */
	if (ch->elem_size == 8)
		memcpy(dst, src, 8);
	else
		memcpy(dst, src, ch->elem_size);
}

/* Under the lock, the queue just emptied: let claims through again. */
static inline void senders_clear_locked(mpsc_t *ch)
{
	/* Relaxed: the flags say "take the lock"; the lock orders the rest. */
	atomic_fetch_and_explicit(&ch->tail, ~T_SENDERS, memory_order_relaxed);
	store_relaxed(&ch->senders_queued, 0);
}

/* ------------------------ lifetime and producers (sync_mpsc.c) */

void weft__mpsc_drop_elems(mpsc_t *ch, bool prefix);
void weft__mpsc_release(mpsc_t *ch);
void weft__mpsc_assign_unlock(mpsc_t *ch);

/* ------------------------- waking the rx (sync_mpsc_rx.c) */

void weft__mpsc_rx_wake_slow(mpsc_t *ch, uint32_t s);

/* After publishing a slot: wake the consumer if it is waiting. */
static inline void rx_wake(mpsc_t *ch)
{
	/*
	 * Full fence: orders the slot's publication before the load of
	 * rx_state, so either we see RX_WAITING or the consumer's re-check
	 * sees the slot; pairs with the fence in rx_register().
	 */
	fence_seqcst();
	/*
	 * Relaxed: the fence does the ordering; weft__mpsc_rx_wake_slow()
	 * acquires.
	 */
	uint32_t s = load_relaxed(&ch->rx_state);

	if (s & RX_WAITING)
		weft__mpsc_rx_wake_slow(ch, s);
}

#endif /* WEFT_SYNC_MPSC_INTERNAL_H */
