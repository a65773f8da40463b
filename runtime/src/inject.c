/* SPDX-License-Identifier: MIT */
/*
 * The global (inject) queue: tasks spawned or woken from outside a worker,
 * and the overflow of full local queues.  An intrusive FIFO list under a
 * mutex; `len` is kept as an atomic so that workers can skip the lock when
 * the queue is empty.
 *
 * Once closed (at shutdown) a push drops the task's queued reference
 * instead of queueing it.
 */
#include "runtime_internal.h"

void weft__inject_init(inject_t *q)
{
	pthread_mutex_init(&q->lock, NULL);
	q->head = q->tail = NULL;
	q->closed = false;
	store_relaxed(&q->len, 0);
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

bool weft__inject_push_batch(inject_t *q, weft_task_t *first,
			     weft_task_t *last, size_t n)
{
	last->queue_next = NULL;
	pthread_mutex_lock(&q->lock);
	if (q->closed) {
		pthread_mutex_unlock(&q->lock);
		/* May free the runtime's shell, @q included: last. */
		drop_list(first);
		return false;
	}
	if (q->tail)
		q->tail->queue_next = first;
	else
		q->head = first;
	q->tail = last;
	/*
	 * Relaxed under the lock: readers of len only use it as a hint and
	 * take the lock before touching the list.  Pushers that must not
	 * lose a wake-up fence after the push (weft__notify_parked()).
	 */
	store_relaxed(&q->len, load_relaxed(&q->len) + n);
	pthread_mutex_unlock(&q->lock);
	return true;
}

bool weft__inject_push(inject_t *q, weft_task_t *t)
{
	return weft__inject_push_batch(q, t, t, 1);
}

weft_task_t *weft__inject_pop_batch(inject_t *q, size_t max, size_t *n)
{
	weft_task_t *first, *t;
	size_t len, take;

	*n = 0;
	if (max == 0 || load_relaxed(&q->len) == 0)
		return NULL;
	pthread_mutex_lock(&q->lock);
	len = load_relaxed(&q->len);
	take = len < max ? len : max;
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
	store_relaxed(&q->len, len - take);
	pthread_mutex_unlock(&q->lock);
	*n = take;
	return first;
}

void weft__inject_close(inject_t *q)
{
	weft_task_t *list;

	pthread_mutex_lock(&q->lock);
	q->closed = true;
	list = q->head;
	q->head = q->tail = NULL;
	store_relaxed(&q->len, 0);
	pthread_mutex_unlock(&q->lock);
	drop_list(list);
}

bool weft__inject_is_empty(const inject_t *q)
{
	return load_relaxed((_Atomic size_t *)&q->len) == 0;
}

size_t weft__inject_len(const inject_t *q)
{
	return load_relaxed((_Atomic size_t *)&q->len);
}
