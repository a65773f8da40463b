/* SPDX-License-Identifier: MIT */
/*
 * The owned list: every task that has been spawned and has not completed,
 * so that shutdown can cancel them all.  Sharded by task id, each shard a
 * doubly linked list under its own mutex.  The list holds one reference on
 * each task it contains.
 */
#include "runtime_internal.h"

void weft__owned_init(owned_t *o)
{
	for (unsigned i = 0; i < OWNED_SHARDS; i++) {
		owned_shard_t *s = &o->shards[i];

		pthread_mutex_init(&s->lock, NULL);
		s->head = NULL;
		s->count = 0;
		s->closed = false;
	}
}

void weft__owned_fini(owned_t *o)
{
	for (unsigned i = 0; i < OWNED_SHARDS; i++)
		pthread_mutex_destroy(&o->shards[i].lock);
}

static owned_shard_t *shard_of(owned_t *o, const weft_task_t *t)
{
	return &o->shards[t->id & (OWNED_SHARDS - 1)];
}

bool weft__owned_insert(owned_t *o, weft_task_t *t)
{
	owned_shard_t *s = shard_of(o, t);

	pthread_mutex_lock(&s->lock);
	if (s->closed) {
		pthread_mutex_unlock(&s->lock);
		return false;
	}
	t->owned_prev = NULL;
	t->owned_next = s->head;
	if (s->head)
		s->head->owned_prev = t;
	s->head = t;
	s->count++;
	pthread_mutex_unlock(&s->lock);
	return true;
}

static void unlink_locked(owned_shard_t *s, weft_task_t *t)
{
	if (t->owned_prev)
		t->owned_prev->owned_next = t->owned_next;
	else
		s->head = t->owned_next;
	if (t->owned_next)
		t->owned_next->owned_prev = t->owned_prev;
	t->owned_prev = t->owned_next = NULL;
	s->count--;
}

void weft__owned_remove(owned_t *o, weft_task_t *t)
{
	owned_shard_t *s = shard_of(o, t);

	pthread_mutex_lock(&s->lock);
	unlink_locked(s, t);
	pthread_mutex_unlock(&s->lock);
}

void weft__owned_close(owned_t *o)
{
	for (unsigned i = 0; i < OWNED_SHARDS; i++) {
		owned_shard_t *s = &o->shards[i];

		pthread_mutex_lock(&s->lock);
		s->closed = true;
		pthread_mutex_unlock(&s->lock);
	}
}

weft_task_t *weft__owned_pop(owned_t *o)
{
	for (unsigned i = 0; i < OWNED_SHARDS; i++) {
		owned_shard_t *s = &o->shards[i];
		weft_task_t *t;

		pthread_mutex_lock(&s->lock);
		t = s->head;
		if (t)
			unlink_locked(s, t);
		pthread_mutex_unlock(&s->lock);
		if (t)
			return t;
	}
	return NULL;
}

uint64_t weft__owned_count(owned_t *o)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < OWNED_SHARDS; i++) {
		owned_shard_t *s = &o->shards[i];

		pthread_mutex_lock(&s->lock);
		n += s->count;
		pthread_mutex_unlock(&s->lock);
	}
	return n;
}
