/* SPDX-License-Identifier: MIT */
/*
 * Join handles: a weft_join_t is its task, seen through the handle's
 * reference (task.c says who holds which).  The handle owns the task's
 * join_waker field while JOIN_WAKER is clear; setting the bit (release)
 * hands it to the completer, which wakes it once it has published the
 * output and status with COMPLETE (task_complete(), task.c), and clearing
 * the bit before completion takes it back.
 */
#include "runtime_internal.h"

static weft_task_t *from_join(const weft_join_t *j)
{
	return (weft_task_t *)j;
}

/* Reads the result; the caller observed COMPLETE with acquire. */
static void join_read(weft_task_t *t, int *status, void **out)
{
	if (status)
		*status = t->status;
	if (out)
		*out = t->output;
}

/*
 * Sets JOIN_WAKER after writing the waker field (which we own while the
 * bit is clear).  Returns false if the task completed meanwhile.
 */
static bool join_set_waker_bit(weft_task_t *t)
{
	/* Acquire: if COMPLETE is seen here, the result is read next. */
	uint64_t cur = load_acquire(&t->state);

	do {
		if (cur & TASK_COMPLETE)
			return false;
		/*
		 * acq_rel: release publishes the waker field to the
		 * completer (pairs with its acq_rel CAS to COMPLETE).
		 */
	} while (!cas_acq_rel(&t->state, &cur, cur | TASK_JOIN_WAKER));
	return true;
}

/* Clears JOIN_WAKER to get the field back; false if completed. */
static bool join_unset_waker_bit(weft_task_t *t)
{
	/* Acquire: as in join_set_waker_bit(). */
	uint64_t cur = load_acquire(&t->state);

	do {
		if (cur & TASK_COMPLETE)
			return false;
		/* acq_rel: acquire our exclusive access to the field. */
	} while (!cas_acq_rel(&t->state, &cur, cur & ~TASK_JOIN_WAKER));
	return true;
}

weft_poll_t weft_join_poll(weft_join_t *join, weft_cx_t *cx, int *status,
			   void **out)
{
	weft_task_t *t = from_join(join);
	/* Acquire: pairs with the release in task_complete() (task.c). */
	uint64_t s = load_acquire(&t->state);
	const weft_waker_t *w = weft_cx_waker(cx);

	if (!weft__coop_poll(cx))
		return WEFT_PENDING;
	if (s & TASK_COMPLETE)
		goto ready;
	if (s & TASK_JOIN_WAKER) {
		if (weft_waker_will_wake(&t->join_waker, w))
			return WEFT_PENDING;
		if (!join_unset_waker_bit(t))
			goto ready;
	}
	/* JOIN_WAKER is clear: the field is ours. */
	weft_waker_drop(&t->join_waker);
	t->join_waker = weft_waker_clone(w);
	if (!join_set_waker_bit(t))
		goto ready;
	return WEFT_PENDING;

ready:
	/* COMPLETE was seen by an acquire load or a failed acq_rel CAS. */
	weft__coop_progress();
	join_read(t, status, out);
	return WEFT_READY;
}

struct join_wait_state {
	weft_join_t *join;
	int status;
	void *out;
};

static weft_poll_t join_wait_poll(void *arg, weft_cx_t *cx)
{
	struct join_wait_state *s = arg;

	return weft_join_poll(s->join, cx, &s->status, &s->out);
}

int weft_join_wait(weft_join_t *join, void **out)
{
	struct join_wait_state s = { .join = join };
	int err;

	err = weft_block_on(weft__task_rt(from_join(join)), join_wait_poll, &s,
			    NULL);
	if (err)
		return err;
	if (out)
		*out = s.out;
	return s.status;
}

bool weft_join_is_finished(const weft_join_t *join)
{
	/* Acquire: a caller that sees true may read the result next. */
	return load_acquire(&from_join(join)->state) & TASK_COMPLETE;
}

uint64_t weft_join_id(const weft_join_t *join)
{
	return from_join(join)->id;
}

void weft_join_abort(weft_join_t *join)
{
	weft_task_t *t = from_join(join);
	uint64_t cur = load_relaxed(&t->state), next;
	bool submit;

	do {
		if (cur & (TASK_COMPLETE | TASK_CANCELLED))
			return;
		submit = !(cur & (TASK_RUNNING | TASK_NOTIFIED));
		next = cur | TASK_CANCELLED | TASK_NOTIFIED;
		if (submit)
			next += TASK_REF_ONE;
		/* acq_rel: as in notify_by_ref() (task.c). */
	} while (!cas_acq_rel(&t->state, &cur, next));
	if (submit)
		weft__schedule(t, false);
}

void weft_join_drop(weft_join_t *join)
{
	weft_task_t *t = from_join(join);
	uint64_t cur, next;

	if (!join)
		return;
	cur = load_relaxed(&t->state);
	do {
		next = cur & ~TASK_JOIN_INTEREST;
		/*
		 * Before completion, clearing JOIN_WAKER too hands the field
		 * back to us (the completer checks both bits).  After it, the
		 * completer may still be reading the field: leave it to the
		 * final free.
		 */
		if (!(cur & TASK_COMPLETE))
			next &= ~TASK_JOIN_WAKER;
		/* acq_rel: acquire ownership of the field (see above). */
	} while (!cas_acq_rel(&t->state, &cur, next));
	if (!(cur & TASK_COMPLETE))
		weft_waker_drop(&t->join_waker);
	weft__task_ref_dec_n(t, 1);
}

weft_poll_t weft_join_all(weft_join_t **joins, size_t n, void **outs,
			  size_t *cursor, weft_cx_t *cx)
{
	while (*cursor < n) {
		size_t i = *cursor;

		if (joins[i]) {
			if (weft_join_poll(joins[i], cx, NULL,
					   outs ? &outs[i] : NULL) ==
			    WEFT_PENDING)
				return WEFT_PENDING;
			weft_join_drop(joins[i]);
			joins[i] = NULL;
		}
		(*cursor)++;
	}
	return WEFT_READY;
}
