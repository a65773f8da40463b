/* SPDX-License-Identifier: MIT */
/*
 * The select (first of N) and join (all of N) combinators over futures
 * given as (poll, state) branches.
 *
 * Both poll their branches in index order with the caller's context, so
 * every pending branch has registered the caller's waker and any of them
 * can wake it.  Nothing here is shared between threads: the branches'
 * states belong to the polling task, and each branch synchronises with
 * whatever it waits on by itself.  Neither combinator drops anything:
 * weft_branches_drop() does, so that a select's losers (and a join
 * abandoned half-way) hand back what they were assigned, as their own
 * _fini does.
 */
#include "sync_internal.h"

weft_poll_t weft_select_poll(weft_branch_t *br, size_t n, weft_cx_t *cx,
			     size_t *index)
{
	for (size_t i = 0; i < n; i++) {
		if (br[i].poll(br[i].state, cx) == WEFT_READY) {
			br[i].done = true;
			if (index)
				*index = i;
			return WEFT_READY;
		}
	}
	return WEFT_PENDING;
}

weft_poll_t weft_join_branches_poll(weft_branch_t *br, size_t n, weft_cx_t *cx)
{
	bool all = true;

	for (size_t i = 0; i < n; i++) {
		if (br[i].done)
			continue;
		if (br[i].poll(br[i].state, cx) == WEFT_READY)
			br[i].done = true;
		else
			all = false;
	}
	return all ? WEFT_READY : WEFT_PENDING;
}

void weft_branches_drop(weft_branch_t *br, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		weft_drop_cb drop = br[i].drop;

		br[i].drop = NULL;
		if (drop)
			drop(br[i].state);
	}
}
