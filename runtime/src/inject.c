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
 * CAS and a consumer subtracts only what it took, so len is never below
 * the true count (never wraps) and may briefly exceed it (a spurious look
 * or wake-up at worst).  It is also the emptiness test the lost-wake-up
 * argument uses: a producer's add comes before its push and the seq_cst
 * fence in weft__idle_worker_to_notify(), so a parker that reads 0 after
 * its own fence knows every task counted was taken by a running worker.
 * (Not the stack pointer: a consumer empties it by exchange before it
 * counts what it moved, and keeps only a batch; a parker that looked
 * in between saw an empty queue while tasks waited behind a worker busy
 * elsewhere, the review of this change found.)
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
	weft__lock_init(&q->lock);
	q->head = q->tail = NULL;
	store_relaxed(&q->incoming, NULL);
	store_relaxed(&q->len, 0);
	q->taken_len = 0;
}

void weft__inject_fini(inject_t *q)
{
	(void)q; /* its lock holds nothing to free */
}

static void drop_list(weft_task_t *t)
{
	while (t) {
		weft_task_t *next = t->queue_next;

		weft__task_drop_notified(t);
		t = next;
	}
}

/*
 * Reverses the list @t (NULL-ended); returns its new first, and its length
 * in *@n if @n is not NULL.
 */
static weft_task_t *reverse_n(weft_task_t *t, size_t *n)
{
	weft_task_t *prev = NULL;
	size_t k = 0;

	while (t) {
		weft_task_t *next = t->queue_next;

		t->queue_next = prev;
		prev = t;
		t = next;
		k++;
	}
	if (n)
		*n = k;
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
	if (first != last)
		reverse_n(first, NULL);
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
	weft_task_t *newest = load_relaxed(&q->incoming), *oldest;
	size_t n;

	/* Closed: workers have stopped; leave the mark. */
	if (!newest || newest == INJECT_CLOSED)
		return;
	/*
	 * Acquire: pairs with the producers' release CAS (an RMW reads the
	 * latest value, so every push before ours in the stack's order is
	 * seen, with its tasks' contents).  Only close() stores the mark,
	 * and it holds the lock we hold.
	 */
	newest = exchange_acq_rel(&q->incoming, NULL);
	oldest = reverse_n(newest, &n);
	if (q->tail)
		q->tail->queue_next = oldest;
	else
		q->head = oldest;
	q->tail = newest;
	q->taken_len += n;
}

weft_task_t *weft__inject_pop_batch(inject_t *q, size_t max, size_t *n)
{
	weft_task_t *first, *t;
	size_t have, take;

	*n = 0;
	if (max == 0 || weft__inject_is_empty(q))
		return NULL;
	weft__lock(&q->lock);
	if (q->taken_len < max)
		take_incoming(q);
	have = q->taken_len;
	take = have < max ? have : max;
	if (take == 0) {
		weft__unlock(&q->lock);
		return NULL;
	}
	first = t = q->head;
	for (size_t i = 1; i < take; i++)
		t = t->queue_next;
	q->head = t->queue_next;
	if (!q->head)
		q->tail = NULL;
	t->queue_next = NULL;
	q->taken_len = have - take;
	/*
	 * Relaxed: after the tasks left the queue, so never below the true
	 * count (see the top); a parker's fence orders its read.
	 */
	fetch_sub_relaxed(&q->len, take);
	weft__unlock(&q->lock);
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

	weft__lock(&q->lock);
	/*
	 * Acquire: as in take_incoming().  Every push after this exchange
	 * sees the mark and drops its own tasks.
	 */
	stack = exchange_acq_rel(&q->incoming, INJECT_CLOSED);
	list = q->head;
	q->head = q->tail = NULL;
	q->taken_len = 0;
	/*
	 * What we drop leaves len as a take does: a producer that counted
	 * its tasks and then meets the mark takes its own count back, so
	 * len ends at 0 and never wraps.
	 */
	fetch_sub_relaxed(&q->len, count(list) + count(stack));
	weft__unlock(&q->lock);
	/* May free the runtime's shell, @q included: touch it no more. */
	drop_list(list);
	drop_list(stack);
}

bool weft__inject_is_empty(const inject_t *q)
{
	/*
	 * Relaxed: a parker calls this after its seq_cst fence, which with
	 * the fence in weft__idle_worker_to_notify() after a push (whose
	 * count was added before it) makes the store-buffer pattern of
	 * idle.c.  See the top for why len and not the stack.
	 */
	return load_relaxed(&((inject_t *)q)->len) == 0;
}

size_t weft__inject_len(const inject_t *q)
{
	return load_relaxed(&((inject_t *)q)->len);
}
