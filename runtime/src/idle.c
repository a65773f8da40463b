/* SPDX-License-Identifier: MIT */
/*
 * Idle bookkeeping: which workers are parked and how many are searching
 * for work (Tokio's scheme).
 *
 * state packs num_searching (low 16 bits) and num_unparked (high 16 bits).
 * At most half the workers search at once.  A producer that makes work
 * visible (queue push) then calls weft__notify_parked(), which wakes a
 * sleeper only if nobody is searching and someone sleeps: a searching
 * worker will find the work.  When the last searcher stops searching it
 * either found work (and wakes another searcher, since there may be more)
 * or goes to park and then re-checks every queue (notify_if_work_pending).
 *
 * No lost wake-up: the producer's push and the parker's decrement of
 * state are both followed by a seq_cst fence before reading the other's
 * side (store-buffer pattern), so either the producer sees the worker still
 * searching/unparked (and the worker, as last searcher, sees the work on
 * its re-check), or the producer sees it parked and wakes a sleeper.
 */
#include <errno.h>

#include "runtime_internal.h"

#define UNPARK_SHIFT 16
#define UNPARK_ONE ((uint32_t)1 << UNPARK_SHIFT)
#define SEARCH_MASK (UNPARK_ONE - 1)

static inline uint32_t num_searching(uint32_t s)
{
	return s & SEARCH_MASK;
}

static inline uint32_t num_unparked(uint32_t s)
{
	return s >> UNPARK_SHIFT;
}

int weft__idle_init(idle_t *idle, unsigned nworkers)
{
	idle->sleepers = calloc(nworkers, sizeof(*idle->sleepers));
	if (!idle->sleepers)
		return -ENOMEM;
	weft__lock_init(&idle->lock);
	idle->nsleepers = 0;
	idle->nworkers = nworkers;
	store_relaxed(&idle->state, nworkers << UNPARK_SHIFT);
	return 0;
}

void weft__idle_fini(idle_t *idle)
{
	free(idle->sleepers);
}

bool weft__idle_to_searching(idle_t *idle)
{
	/*
	 * Relaxed bound check (an estimate, as in Tokio: a race may let one
	 * extra searcher in, which is harmless).
	 */
	uint32_t s = load_relaxed(&idle->state);

	if (2 * num_searching(s) >= idle->nworkers)
		return false;
	/* seq_cst: part of the total order the lost-wake-up argument uses. */
	fetch_add_seqcst(&idle->state, 1);
	return true;
}

bool weft__idle_from_searching(idle_t *idle)
{
	/* seq_cst: as above.  Returns true for the last searcher. */
	uint32_t prev = fetch_sub_seqcst(&idle->state, 1);

	return num_searching(prev) == 1;
}

bool weft__idle_to_parked(idle_t *idle, unsigned index, bool searching)
{
	uint32_t dec = UNPARK_ONE + (searching ? 1 : 0);
	uint32_t prev;

	weft__lock(&idle->lock);
	/* seq_cst: the parker's side of the store-buffer pattern. */
	prev = fetch_sub_seqcst(&idle->state, dec);
	idle->sleepers[idle->nsleepers++] = index;
	weft__unlock(&idle->lock);
	return searching && num_searching(prev) == 1;
}

bool weft__idle_is_parked(idle_t *idle, unsigned index)
{
	bool parked = false;

	weft__lock(&idle->lock);
	for (unsigned i = 0; i < idle->nsleepers; i++) {
		if (idle->sleepers[i] == index) {
			parked = true;
			break;
		}
	}
	weft__unlock(&idle->lock);
	return parked;
}

bool weft__idle_all_parked(idle_t *idle)
{
	/* seq_cst: the monitor's side of weft__monitor_kick()'s pattern. */
	return num_unparked(load_seqcst(&idle->state)) == 0;
}

bool weft__idle_unpark_worker_by_id(idle_t *idle, unsigned index)
{
	bool found = false;

	/*
	 * A worker woken by the driver (not by a notifier) takes itself off
	 * the sleepers list; it is unparked but not searching.
	 */
	weft__lock(&idle->lock);
	for (unsigned i = 0; i < idle->nsleepers; i++) {
		if (idle->sleepers[i] == index) {
			idle->sleepers[i] = idle->sleepers[--idle->nsleepers];
			/* seq_cst: as in weft__idle_worker_to_notify(). */
			fetch_add_seqcst(&idle->state, UNPARK_ONE);
			found = true;
			break;
		}
	}
	weft__unlock(&idle->lock);
	return found;
}

static bool should_wake(const idle_t *idle, uint32_t s)
{
	return num_searching(s) == 0 && num_unparked(s) < idle->nworkers;
}

int weft__idle_worker_to_notify(idle_t *idle, weft_runtime_t *rt)
{
	uint32_t s;
	unsigned pick;
	int index;

	/*
	 * seq_cst fence: orders the caller's queue push before this load;
	 * pairs with the fence after the parker's decrement (see top).
	 */
	fence_seqcst();
	s = load_seqcst(&idle->state);
	if (!should_wake(idle, s))
		return -1;

	weft__lock(&idle->lock);
	s = load_relaxed(&idle->state);
	if (!should_wake(idle, s) || idle->nsleepers == 0) {
		weft__unlock(&idle->lock);
		return -1;
	}
	/* The woken worker starts out searching and unparked. */
	fetch_add_seqcst(&idle->state, UNPARK_ONE + 1);
	/*
	 * Prefer the most recent sleeper on a futex: the one parked in the
	 * driver goes on watching I/O and timers, and waking it (an eventfd
	 * write, then epoll_wait's return) is the slower wake-up.
	 */
	pick = idle->nsleepers - 1;
	for (unsigned i = idle->nsleepers; i-- > 0;) {
		if (!weft__parker_in_driver(
			    &rt->workers[idle->sleepers[i]].parker)) {
			pick = i;
			break;
		}
	}
	index = (int)idle->sleepers[pick];
	idle->sleepers[pick] = idle->sleepers[--idle->nsleepers];
	weft__unlock(&idle->lock);
	return index;
}
