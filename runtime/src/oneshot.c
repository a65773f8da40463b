/* SPDX-License-Identifier: MIT */
/*
 * A oneshot channel: one void * from one sender to one receiver.
 *
 * state bits: SENT (value written), TX_GONE (sender dropped unsent),
 * RX_GONE (receiver dropped), RX_WAKER (the receiver's waker is set and
 * belongs to the sender side; while clear only the receiver writes it).
 * Both halves hold a reference; the last one frees the channel (and drops
 * the receiver's waker).
 */
#include <errno.h>

#include "resource_internal.h"
#include "runtime_internal.h"

#define OS_SENT 1u
#define OS_TX_GONE 2u
#define OS_RX_GONE 4u
#define OS_RX_WAKER 8u

typedef struct oneshot_s {
	_Atomic uint32_t state;
	_Atomic uint32_t refs;
	void *value;
	weft_waker_t rx_waker;
	/*
	 * What the probe sees; rx_task: the receiving task while its wait
	 * was told (RES_WAIT), 0 otherwise.  The receiver's alone.
	 */
	weft_resource_t res;
	uint64_t rx_task;
	/*
	 * The sender took rx_waker and woke it by value (tx_finish()): the
	 * last reference must not drop it.  Written by the sender before its
	 * release, read by the last reference after its acq_rel drop.
	 */
	bool rx_woken;
} oneshot_t;

int weft_oneshot_create_at(weft_oneshot_tx_t **tx, weft_oneshot_rx_t **rx,
			   const char *file, int line)
{
	oneshot_t *o = malloc(sizeof(*o));

	if (!o)
		return -ENOMEM;
	store_relaxed(&o->state, 0);
	store_relaxed(&o->refs, 2);
	o->value = NULL;
	o->rx_waker = WEFT_WAKER_EMPTY;
	weft__res_init(&o->res, WEFT_RES_ONESHOT, file, line);
	o->rx_task = 0;
	o->rx_woken = false;
	*tx = (weft_oneshot_tx_t *)o;
	*rx = (weft_oneshot_rx_t *)o;
	return 0;
}

/* The function behind the macro, for callers that take its address. */
int(weft_oneshot_create)(weft_oneshot_tx_t **tx, weft_oneshot_rx_t **rx)
{
	return weft_oneshot_create_at(tx, rx, NULL, 0);
}

/* The receiver's wait, told: its end (@flags: 0 served, else why not). */
static void rx_wait_end(oneshot_t *o, uint32_t flags)
{
	if (!o->rx_task)
		return;
	WEFT_RES_EVENT(&o->res, RES_WAIT_END, o->rx_task,
		       WEFT_RES_OP_DONE | flags);
	o->rx_task = 0;
}

static void oneshot_release(oneshot_t *o)
{
	/* acq_rel: the last reference frees (see weft__task_ref_dec_n()). */
	if (fetch_sub_acq_rel(&o->refs, 1) == 1) {
		if (!o->rx_woken)
			weft_waker_drop(&o->rx_waker);
		weft__res_fini(&o->res);
		free(o);
	}
}

/* Marks the sender side done with @bit; wakes the receiver. */
static uint32_t tx_finish(oneshot_t *o, uint32_t bit)
{
	/*
	 * acq_rel: release publishes the value (pairs with the receiver's
	 * acquire); acquire pairs with the receiver's release of RX_WAKER so
	 * the waker is fully written before we use it.
	 */
	uint32_t prev = atomic_fetch_or_explicit(&o->state, bit,
						 memory_order_acq_rel);

	/*
	 * The receiver never writes the field once we are done, but may
	 * still read it (will_wake): we wake a copy by value (one WAKE, no
	 * WAKER_DROP at the free, one RMW on the task's word fewer) and
	 * tell the last reference not to drop it.
	 */
	if ((prev & OS_RX_WAKER) && !(prev & OS_RX_GONE)) {
		weft_waker_t w = o->rx_waker;

		o->rx_woken = true;
		weft_waker_wake(&w);
	}
	return prev;
}

int weft_oneshot_send(weft_oneshot_tx_t *tx, void *value)
{
	oneshot_t *o = (oneshot_t *)tx;
	uint32_t prev;

	o->value = value;
	prev = tx_finish(o, OS_SENT);
	oneshot_release(o);
	return (prev & OS_RX_GONE) ? -EPIPE : 0;
}

void weft_oneshot_tx_drop(weft_oneshot_tx_t *tx)
{
	oneshot_t *o = (oneshot_t *)tx;

	/* A zeroed state's handle: a drop callback needs no flag. */
	if (!o)
		return;
	tx_finish(o, OS_TX_GONE);
	oneshot_release(o);
}

static weft_poll_t rx_ready(oneshot_t *o, uint32_t s, int *status,
			    void **value)
{
	rx_wait_end(o, (s & OS_SENT) ? 0 : WEFT_RES_CLOSED);
	weft__coop_progress();
	/* s was read with acquire (load or failed CAS). */
	if (s & OS_SENT) {
		if (status)
			*status = 0;
		if (value)
			*value = o->value;
	} else {
		if (status)
			*status = -EPIPE;
		if (value)
			*value = NULL;
	}
	return WEFT_READY;
}

weft_poll_t weft_oneshot_poll(weft_oneshot_rx_t *rx, weft_cx_t *cx,
			      int *status, void **value)
{
	oneshot_t *o = (oneshot_t *)rx;
	const weft_waker_t *w = weft_cx_waker(cx);
	/* Acquire: pairs with the release in tx_finish(). */
	uint32_t s = load_acquire(&o->state);

	if (!weft__coop_poll(cx))
		return WEFT_PENDING;
	if (s & (OS_SENT | OS_TX_GONE))
		return rx_ready(o, s, status, value);
	if (s & OS_RX_WAKER) {
		if (weft_waker_will_wake(&o->rx_waker, w))
			return WEFT_PENDING;
		/* Take the field back: clear RX_WAKER unless done. */
		do {
			if (s & (OS_SENT | OS_TX_GONE))
				return rx_ready(o, s, status, value);
			/* acq_rel: acquire exclusive use of the field. */
		} while (!cas_acq_rel(&o->state, &s, s & ~OS_RX_WAKER));
	}
	weft_waker_drop(&o->rx_waker);
	o->rx_waker = weft_waker_clone(w);
	/* Acquire: SENT seen here means the value is read next. */
	s = load_acquire(&o->state);
	do {
		if (s & (OS_SENT | OS_TX_GONE))
			return rx_ready(o, s, status, value);
		/* acq_rel: release publishes the waker to the sender. */
	} while (!cas_acq_rel(&o->state, &s, s | OS_RX_WAKER));
#if WEFT_PROBE
	/* The first PENDING of this wait: told once. */
	if (__builtin_expect(weft__probe_on(), 0) && !o->rx_task &&
	    weft__cur_task_id) {
		o->rx_task = weft__cur_task_id;
		weft__res_emit(&o->res, WEFT_EV_RES_WAIT, o->rx_task,
			       WEFT_RES_OP_DONE);
	}
#endif
	return WEFT_PENDING;
}

void weft_oneshot_rx_drop(weft_oneshot_rx_t *rx)
{
	oneshot_t *o = (oneshot_t *)rx;

	/* As in weft_oneshot_tx_drop(). */
	if (!o)
		return;
	rx_wait_end(o, WEFT_RES_CANCELLED);
	/* acq_rel: tells the sender its value will not be taken. */
	atomic_fetch_or_explicit(&o->state, OS_RX_GONE, memory_order_acq_rel);
	oneshot_release(o);
}
