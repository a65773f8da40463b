/* SPDX-License-Identifier: MIT */
/*
 * The global (inject) queue: tasks spawned or woken from outside a worker,
 * and the overflow of full local queues.
 *
 * A push never blocks.  Producers push onto a lock-free stack, `incoming`
 * (newest first), with one CAS: a thread spawning from outside the
 * runtime, or a worker pushing its overflow, is never put to sleep behind
 * a consumer holding a lock, nor holds one when the OS preempts it (the
 * mutex this replaced made the spawning thread sleep on a futex whenever
 * a worker was popping, and that hand-off is what a busy neighbour on the
 * same CPUs makes slow).
 *
 * Consumers (workers) are rare and take turns under `lock`: one takes the
 * whole stack with an exchange, reverses it into push order and appends
 * it to its FIFO head..tail, then takes a batch from the head.  Push
 * order is kept: everything on head..tail was taken from the stack before
 * anything now on it was pushed.  No ABA: nobody pops a single node off
 * the stack, only the whole of it.
 *
 * `len` counts pushed tasks not yet taken.  A producer adds before its
 * CAS and a consumer subtracts what it took, so len is never below the
 * true count (never wraps) and may briefly exceed it: it is a hint, for
 * sizing batches and for metrics.  Emptiness, which the lost-wake-up
 * argument needs exact, is read from the stack pointer itself.
 *
 * Once closed (at shutdown) the stack holds INJECT_CLOSED and a push
 * drops the task's queued reference instead of queueing it.  A producer
 * touches the queue after its CAS only if the CAS failed on the closed
 * mark: a successful push may be taken, run and freed (and with its last
 * reference the runtime's shell) before the producer's next instruction.
 */
#include "runtime_internal.h"

#define INJECT_CLOSED ((weft_task_t *)(uintptr_t)1)

void weft__inject_init(inject_t *q)
{
	pthread_mutex_init(&q->lock, NULL);
	q->head = q->tail = NULL;
	store_relaxed(&q->incoming, NULL);
	store_relaxed(&q->len, 0);
	store_relaxed(&q->taken_len, 0);
}

void weft__inject_fini(inject_t *q)
{
	pthread_mutex_destroy(&q->lock);
}

static void drop_list(weft_task_t *t)
{
	while (t) {
		weft_task_t *next = t->queue_next;

		weft__task_drop_notified(t);
		t = next;
	}
}

/* Reverses the list @t (NULL-ended); returns its new first. */
static weft_task_t *reverse(weft_task_t *t)
{
	weft_task_t *prev = NULL;

	while (t) {
		weft_task_t *next = t->queue_next;

		t->queue_next = prev;
		prev = t;
		t = next;
	}
	return prev;
}

bool weft__inject_push_batch(inject_t *q, weft_task_t *first,
			     weft_task_t *last, size_t n)
{
	weft_task_t *old;

	/*
	 * The stack is newest first: put the batch that way round, so that
	 * the consumer's reversal gives it back in order.  After this,
	 * @last leads and @first ends the chain.
	 */
	last->queue_next = NULL;
	if (n > 1)
		reverse(first);
	/*
	 * Relaxed: a hint (see the top).  Counted before the CAS so that a
	 * consumer never subtracts a task not yet counted.
	 */
	fetch_add_relaxed(&q->len, n);
	old = load_relaxed(&q->incoming);
	do {
		if (old == INJECT_CLOSED) {
			/*
			 * Nothing of ours is on the queue, and our tasks'
			 * references still hold the runtime's shell.
			 */
			fetch_sub_relaxed(&q->len, n);
			first->queue_next = NULL; /* a failed CAS linked it */
			/* May free the runtime's shell, @q included: last. */
			drop_list(last);
			return false;
		}
		first->queue_next = old;
		/*
		 * Release: the tasks' fields and links, written before, are
		 * seen by the consumer whose acquire exchange takes them.
		 * The lost-wake-up argument needs this store ordered before
		 * the caller's read of the idle state: the seq_cst fence in
		 * weft__idle_worker_to_notify() does that.
		 */
	} while (!cas_release(&q->incoming, &old, last));
	return true;
}

bool weft__inject_push(inject_t *q, weft_task_t *t)
{
	return weft__inject_push_batch(q, t, t, 1);
}

/* Under q->lock: moves the stack, in push order, onto head..tail. */
static void take_incoming(inject_t *q)
{
	/* Relaxed: only a look; the exchange below does the acquire. */
	weft_task_t *t = load_relaxed(&q->incoming);
	size_t n = 0;

	/* Closed: workers have stopped; leave the mark. */
	if (!t || t == INJECT_CLOSED)
		return;
	/*
	 * Acquire: pairs with the producers' release CAS (an RMW reads the
	 * latest value, so every push before ours in the stack's order is
	 * seen, with its tasks' contents).  Only close() stores the mark,
	 * and it holds the lock we hold.
	 */
	t = exchange_acq_rel(&q->incoming, NULL);
	t = reverse(t);
	if (q->tail)
		q->tail->queue_next = t;
	else
		q->head = t;
	for (; t; t = t->queue_next) {
		q->tail = t;
		n++;
	}
	store_relaxed(&q->taken_len, load_relaxed(&q->taken_len) + n);
}

weft_task_t *weft__inject_pop_batch(inject_t *q, size_t max, size_t *n)
{
	weft_task_t *first, *t;
	size_t have, take;

	*n = 0;
	if (max == 0 || weft__inject_is_empty(q))
		return NULL;
	pthread_mutex_lock(&q->lock);
	if (load_relaxed(&q->taken_len) < max)
		take_incoming(q);
	have = load_relaxed(&q->taken_len);
	take = have < max ? have : max;
	if (take == 0) {
		pthread_mutex_unlock(&q->lock);
		return NULL;
	}
	first = t = q->head;
	for (size_t i = 1; i < take; i++)
		t = t->queue_next;
	q->head = t->queue_next;
	if (!q->head)
		q->tail = NULL;
	t->queue_next = NULL;
	store_relaxed(&q->taken_len, have - take);
	/* Relaxed: a hint; never below the true count (see the top). */
	fetch_sub_relaxed(&q->len, take);
	pthread_mutex_unlock(&q->lock);
	*n = take;
	return first;
}

static size_t count(const weft_task_t *t)
{
	size_t n = 0;

	for (; t; t = t->queue_next)
		n++;
	return n;
}

void weft__inject_close(inject_t *q)
{
	weft_task_t *list, *stack;

	pthread_mutex_lock(&q->lock);
	/*
	 * Acquire: as in take_incoming().  Every push after this exchange
	 * sees the mark and drops its own tasks.
	 */
	stack = exchange_acq_rel(&q->incoming, INJECT_CLOSED);
	list = q->head;
	q->head = q->tail = NULL;
	store_relaxed(&q->taken_len, 0);
	/*
	 * What we drop leaves len as a take does: a producer that counted
	 * its tasks and then meets the mark takes its own count back, so
	 * len ends at 0 and never wraps.
	 */
	fetch_sub_relaxed(&q->len, count(list) + count(stack));
	pthread_mutex_unlock(&q->lock);
	/* May free the runtime's shell, @q included: touch it no more. */
	drop_list(list);
	drop_list(stack);
}

bool weft__inject_is_empty(const inject_t *q)
{
	/*
	 * Relaxed loads: a parker calls this after its seq_cst fence, which
	 * with the fence in weft__idle_worker_to_notify() after a push makes
	 * the store-buffer pattern of idle.c (the pointer, not len, is the
	 * push's visible store).  Tasks already moved to head..tail are
	 * another consumer's to finish: a worker that is not parked.
	 */
	weft_task_t *t = load_relaxed(&((inject_t *)q)->incoming);

	return (!t || t == INJECT_CLOSED) &&
	       load_relaxed(&((inject_t *)q)->taken_len) == 0;
}

size_t weft__inject_len(const inject_t *q)
{
	return load_relaxed(&((inject_t *)q)->len);
}
