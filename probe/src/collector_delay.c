/* SPDX-License-Identifier: MIT */
/*
 * A task's scheduling delay (woken, then waiting for a worker), said:
 * behind the long poll that held the worker, if one covered half of the
 * wait; not at all when the OS held the polling worker, or the one whose
 * queue the task waited in, off its CPU (a PREEMPTED warning names no
 * task); else as the task's wait.  Runs on the collector thread,
 * probe.lock held.
 */
#include <stdio.h>

#include "collector_internal.h"

/*
 * What a task woken at @from and first polled at @to waited behind: the
 * long poll (ended, on any worker, *@wi) that covered most of the wait,
 * if one covered half of it; else NULL.
 */
static const struct worker_long_s *delay_long(const struct probe *p,
					      uint64_t from, uint64_t to,
					      unsigned *wi)
{
	const struct worker_long_s *best = NULL;
	uint64_t best_cover = 0;

	for (unsigned i = 0; i < p->nworker_slots; i++) {
		const struct worker_long_s *l = &p->wk[i].lng;
		uint64_t a = l->start > from ? l->start : from;
		uint64_t b = l->end < to ? l->end : to;

		if (!l->end || b <= a || b - a <= best_cover)
			continue;
		best = l;
		best_cover = b - a;
		*wi = i;
	}
	return best && best_cover * 2 >= to - from ? best : NULL;
}

/* Appends to @d what delay_long() found: ": worker N was in a M ms poll
 * of task ID (name)", or that the OS held the worker. */
static void delay_cause(const struct worker_long_s *best, unsigned wi,
			char *d, size_t len)
{
	size_t n = strlen(d);

	if (!best)
		return;
	if (best->by_rt)
		snprintf(d + n, len - n,
			 ": worker %u was in the runtime's blocking-pool "
			 "submission (a %.1f ms poll)",
			 wi, (double)(best->end - best->start) / 1e6);
	else if (best->by_os)
		snprintf(d + n, len - n,
			 ": the OS held worker %u off its CPU (a %.1f ms poll)",
			 wi, (double)(best->end - best->start) / 1e6);
	else
		snprintf(d + n, len - n,
			 ": worker %u was in a %.1f ms poll of task %llu (%s)",
			 wi, (double)(best->end - best->start) / 1e6,
			 (unsigned long long)best->task,
			 best->name[0] ? best->name : "unnamed");
}

void weft__collector_warn_sched_delay(struct probe *p, task_rec_t *t,
				      uint16_t worker, uint64_t start,
				      uint64_t delay)
{
	uint64_t woken_at = start - delay;
	const struct worker_long_s *lng;
	unsigned wi = 0;
	char d[160];

	if (weft__collector_across_drops(p, woken_at, start)) {
		/* A poll in between may be what was dropped. */
		p->drops_suppressed++;
		return;
	}
	/*
	 * Behind no long poll (none covered half the wait), on a worker
	 * the OS held off its CPU most of it: the OS's to answer for, said
	 * as such, and the task's own warning kept for a wait of its own
	 * later.  A task spawned while a loaded host (16 spinners on two
	 * CPUs) held its worker off for 300 ms was warned at its first
	 * poll, and never again: behind a blocking task 400 ms later, it
	 * went unsaid.  Behind a long poll, the poll held the worker,
	 * however the OS slowed it: the warning names it.
	 */
	lng = delay_long(p, woken_at, start, &wi);
	if (!lng && weft__collector_delay_by_os(p, worker, woken_at, delay))
		return;
	/*
	 * Nor when it waited in the queue of a worker the OS held off its
	 * CPU, until another stole it: the polling worker was not the one
	 * held (an outside tester's fixed twin under load: a task sat in
	 * worker 1's queue while worker 1 went 55 ms without a CPU, then
	 * worker 0 stole it, and the task was said to have waited).
	 */
	if (!lng && t->woken_on != worker &&
	    t->woken_on != WEFT_EVENT_NO_WORKER &&
	    weft__collector_delay_by_os(p, t->woken_on, woken_at, delay))
		return;
	t->delay_said_us = delay / 1000 < UINT32_MAX ?
				   (uint32_t)(delay / 1000) :
				   UINT32_MAX;
	/* Folded (most of a wave's): no words needed. */
	if (!weft__collector_warn_task_row(p, WEFT_WARN_SCHEDULING_DELAY, t,
					   worker, start, delay))
		return;
	snprintf(d, sizeof(d), "woken, then waited %.1f ms for a worker",
		 (double)delay / 1e6);
	delay_cause(lng, wi, d, sizeof(d));
	weft__collector_warn(p, WEFT_WARN_SCHEDULING_DELAY, t, worker, start,
			     delay, "%s", d);
}
