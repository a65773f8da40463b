/* SPDX-License-Identifier: MIT */
/*
 * The owned list: every task that has been spawned and has not completed,
 * so that shutdown can cancel them all.  Sharded by task id, each shard a
 * doubly linked list under its own mutex.  The list holds one reference on
 * each task it contains.
 */
#include <pthread.h>

#include "runtime_internal.h"

void (*weft__owned_walk_hook)(owned_shard_t *s);

void weft__owned_init(owned_t *o)
{
	for (unsigned i = 0; i < OWNED_SHARDS; i++) {
		owned_shard_t *s = &o->shards[i];

		weft__lock_init(&s->lock);
		s->head = NULL;
		s->count = 0;
		s->walk_at = NULL;
		s->closed = false;
	}
	pthread_mutex_init(&o->walk_lock, NULL);
}

void weft__owned_fini(owned_t *o)
{
	/* The shards' locks hold nothing to free. */
	pthread_mutex_destroy(&o->walk_lock);
}

static owned_shard_t *shard_of(owned_t *o, const weft_task_t *t)
{
	return &o->shards[t->id & (OWNED_SHARDS - 1)];
}

bool weft__owned_insert(owned_t *o, weft_task_t *t)
{
	owned_shard_t *s = shard_of(o, t);

	weft__lock(&s->lock);
	if (s->closed) {
		weft__unlock(&s->lock);
		return false;
	}
	t->owned_prev = NULL;
	t->owned_next = s->head;
	if (s->head)
		s->head->owned_prev = t;
	s->head = t;
	s->count++;
	weft__unlock(&s->lock);
	return true;
}

static void unlink_locked(owned_shard_t *s, weft_task_t *t)
{
	if (s->walk_at == t)
		s->walk_at = t->owned_next;
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

	weft__lock(&s->lock);
	unlink_locked(s, t);
	weft__unlock(&s->lock);
}

void weft__owned_close(owned_t *o)
{
	for (unsigned i = 0; i < OWNED_SHARDS; i++) {
		owned_shard_t *s = &o->shards[i];

		weft__lock(&s->lock);
		s->closed = true;
		weft__unlock(&s->lock);
	}
}

weft_task_t *weft__owned_pop(owned_t *o)
{
	for (unsigned i = 0; i < OWNED_SHARDS; i++) {
		owned_shard_t *s = &o->shards[i];
		weft_task_t *t;

		weft__lock(&s->lock);
		t = s->head;
		if (t)
			unlink_locked(s, t);
		weft__unlock(&s->lock);
		if (t)
			return t;
	}
	return NULL;
}

/*
 * Shutdown, with workers still finishing their polls: takes off the list
 * every task that weft__task_claim_idle() claims (under the shard's lock,
 * so that no worker completes it meanwhile: a worker holds RUNNING before
 * it removes a task) and returns them linked through owned_next.  Tasks
 * being polled stay on the list.
 */
weft_task_t *weft__owned_take_idle(owned_t *o)
{
	weft_task_t *taken = NULL;

	for (unsigned i = 0; i < OWNED_SHARDS; i++) {
		owned_shard_t *s = &o->shards[i];
		weft_task_t *t, *next;

		weft__lock(&s->lock);
		for (t = s->head; t; t = next) {
			next = t->owned_next;
			if (!weft__task_claim_idle(t))
				continue;
			unlink_locked(s, t);
			t->owned_next = taken;
			taken = t;
		}
		weft__unlock(&s->lock);
	}
	return taken;
}

/*
 * Where @t is parked, into @out: a relaxed load of a pointer to a static
 * site (weft__task_parked_at()), so the worker that stores it after a
 * poll never waits for us; the list's lock only keeps @t alive.
 */
static void describe_parked(weft_task_t *t, weft__task_info_t *out)
{
	const weft_site_t *site = weft__task_parked_at(t);
	/*
	 * Relaxed: one word, a consistent view of it; a hint for the
	 * probe.  Idle (not running, queued, done or being cancelled) with
	 * only the owned list's reference and the join handle's: no waker
	 * holds one, and only a waker (or the task's own poll, which it
	 * will never get) can make another.
	 */
	uint64_t st = load_relaxed(&t->state);

	out->parked_file = site ? site->file : NULL;
	out->parked_line = site ? site->line : 0;
	out->idle = !(st & (TASK_RUNNING | TASK_NOTIFIED | TASK_COMPLETE |
			    TASK_CANCELLED));
	out->queued = (st & (TASK_RUNNING | TASK_NOTIFIED | TASK_COMPLETE |
			     TASK_CANCELLED)) == TASK_NOTIFIED;
	out->no_waker = out->idle &&
			task_refs(st) == 1 + !!(st & TASK_JOIN_INTEREST);
}

uint64_t weft__owned_count(owned_t *o)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < OWNED_SHARDS; i++) {
		owned_shard_t *s = &o->shards[i];

		weft__lock(&s->lock);
		n += s->count;
		weft__unlock(&s->lock);
	}
	return n;
}

/* Tasks a walk copies under the shard's lock before letting it go. */
#define WALK_PART 64u

/* Pauses the walk waits, at most, for a woken waiter to take the lock. */
#define WALK_LET_IN_SPINS 256u

/*
 * The walk lets @s's lock go between two parts, and lets in whoever
 * sleeps on it: a bare unlock and lock again would take it back before
 * a woken waiter ran, and a spawn on this shard would wait out the whole
 * walk, asleep (an audit's dispatcher spawning 1,000 tasks a poll, with
 * 300,000 live: 20-85 ms polls, blamed on it as "asleep in the kernel",
 * at every pass that read the list).  When the unlock woke someone, the
 * walker spins a few microseconds for it to take the lock (it runs on
 * another CPU) and then goes on whatever happened: it never yields, as
 * one yield on a loaded CPU can cost a whole time slice a part, and the
 * collector holds the probe's lock through its pass (a review measured
 * 0.2-1.8 s walks of 2,000 tasks with a loop of yields here).  A waiter
 * that misses its turn sleeps again and is woken at the next part.
 */
static void walk_let_in(owned_shard_t *s)
{
	bool woke = weft__unlock_woke(&s->lock);

	if (weft__owned_walk_hook)
		weft__owned_walk_hook(s);
	/*
	 * Relaxed: only whether another took it since; the lock below
	 * orders the rest.  A waiter that took it and let it go already is
	 * missed: a few microseconds spun for nothing.
	 */
	for (unsigned i = 0;
	     woke && i < WALK_LET_IN_SPINS && !load_relaxed(&s->lock.state);
	     i++)
		cpu_relax();
	weft__lock(&s->lock);
}

/*
 * Copies what the probe shows of shard @shard's tasks into @out (at most
 * @cap of them) and returns how many, or, when the shard holds more than
 * @cap, how many it holds (nothing copied: the caller grows its buffer
 * and asks again).
 *
 * A walk of the list under the lock, letting it go every WALK_PART tasks
 * (walk_let_in()), so that a spawn or a completion on this shard waits
 * tens of microseconds at most, whatever the shard holds: a listener's
 * first pass, not the runtime, pays.  While the lock is free, s->walk_at
 * holds the next task to copy, and an unlink of it moves it on
 * (unlink_locked()); inserts go to the head, behind the walk.  One walk
 * at a time (o->walk_lock, a mutex: held across the parts' hand-offs).  So the
 * walk copies every task on the list when it began and still on it when
 * the walk came to it, each once, and no task inserted since: at most
 * the count it began with, which is at most @cap.  The callers' argument
 * (collector_reconcile.c) needs just that: a task on the list when the
 * walk began and not copied has left the list (completed).
 */
static void info_of(weft_task_t *t, weft__task_info_t *out)
{
	out->id = t->id;
	out->name = t->rec->name;
	out->file = t->rec->file;
	out->line = t->rec->line;
	out->state_size = t->rec->state_size;
	out->kind = t->rec->kind;
	describe_parked(t, out);
}

/*
 * Calls @visit on each task of @s's list in turn, in parts, until it
 * returns true; returns whether it did.  With o->walk_lock and @s's lock
 * held, as it returns.
 */
static bool walk_parts(owned_shard_t *s, bool (*visit)(weft_task_t *, void *),
		       void *arg)
{
	size_t n = 0;

	for (weft_task_t *t = s->head; t; t = t->owned_next, n++) {
		if (n && n % WALK_PART == 0) {
			s->walk_at = t;
			walk_let_in(s);
			t = s->walk_at;
			s->walk_at = NULL;
			if (!t)
				break;
		}
		if (visit(t, arg))
			return true;
	}
	return false;
}

struct copy {
	weft__task_info_t *out;
	size_t n, cap;
};

static bool copy_one(weft_task_t *t, void *arg)
{
	struct copy *c = arg;

	/* Never more than the count the walk began with (above): cap. */
	if (c->n == c->cap)
		return true;
	info_of(t, &c->out[c->n++]);
	return false;
}

size_t weft__owned_shard_info(owned_t *o, unsigned shard,
			      weft__task_info_t *out, size_t cap)
{
	owned_shard_t *s = &o->shards[shard % OWNED_SHARDS];
	struct copy c = { out, 0, cap };

	pthread_mutex_lock(&o->walk_lock);
	weft__lock(&s->lock);
	if (s->count > cap)
		c.n = s->count;
	else
		walk_parts(s, copy_one, &c);
	weft__unlock(&s->lock);
	pthread_mutex_unlock(&o->walk_lock);
	return c.n;
}

struct find {
	const weft_task_t *t;
	weft__task_info_t *out;
};

static bool find_one(weft_task_t *t, void *arg)
{
	struct find *f = arg;

	if (t != f->t)
		return false;
	info_of(t, f->out);
	return true;
}

/*
 * What @t is, if it is still on the list: a pointer that may be freed any
 * moment (a poll that ends completes it) is compared, never dereferenced,
 * until found under the shard's lock, where the list's reference keeps
 * it (completion takes it off under the same lock).  Every shard walked
 * in parts, as the probe's walks are (the runtime monitor asks this of a
 * long poll, in a process of any number of tasks).  Memory freed and
 * reused by a task spawned meanwhile onto a shard not walked yet can be
 * found for it: the monitor checks that the poll is still the same;
 * destroy asks after weft__owned_close(), when no task joins the list.
 */
bool weft__owned_describe(owned_t *o, const weft_task_t *t,
			  weft__task_info_t *out)
{
	struct find f = { t, out };
	bool found = false;

	/* The walk's mutex a shard at a time: the monitor, at nice 19, may
	 * be preempted in here, and the collector waits for it. */
	for (unsigned i = 0; i < OWNED_SHARDS && !found; i++) {
		owned_shard_t *s = &o->shards[i];

		pthread_mutex_lock(&o->walk_lock);
		weft__lock(&s->lock);
		found = walk_parts(s, find_one, &f);
		weft__unlock(&s->lock);
		pthread_mutex_unlock(&o->walk_lock);
	}
	return found;
}

size_t weft__runtime_tasks(weft_runtime_t *rt, unsigned shard,
			   weft__task_info_t *out, size_t cap)
{
	return weft__owned_shard_info(&rt->owned, shard, out, cap);
}
