/* SPDX-License-Identifier: MIT */
/*
 * The collector's warnings: the ring of the last WARN_KEEP raised (taken
 * by publish(), collector.c) and the lost-waker check of idle tasks.  The
 * warnings an event or a worker's sample raises are raised where it is
 * folded in (collector_events.c, collector_workers.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "collector_internal.h"

void weft__collector_warn(struct probe *p, uint8_t kind, const task_rec_t *t,
			  uint16_t worker, uint64_t at, uint64_t value,
			  const char *fmt, ...)
{
	weft_probe_warning_t *w = &p->warnings[p->warn_seq % WARN_KEEP];
	va_list ap;

	memset(w, 0, sizeof(*w));
	w->seq = ++p->warn_seq;
	w->kind = kind;
	w->worker = worker;
	w->at_ns = at;
	w->value_ns = value;
	if (t) {
		w->task = t->pub.id;
		w->task_name = t->pub.name;
		w->file = t->pub.file;
		w->line = t->pub.line;
	}
	va_start(ap, fmt);
	vsnprintf(w->detail, sizeof(w->detail), fmt, ap);
	va_end(ap);
}

void weft__probe_monitor_long_poll(const weft__task_info_t *t,
				   uint16_t worker, uint64_t start_ns,
				   uint64_t dur_ns, bool ended)
{
	struct probe *p = &weft__probe;
	weft_probe_warning_t *w;

	pthread_mutex_lock(&p->lock);
	weft__collector_warn(p,
			     ended ? WEFT_WARN_LONG_POLL
				   : WEFT_WARN_NEVER_YIELDED,
			     NULL, worker, start_ns, dur_ns,
			     ended ? "one poll ran at least %.1f ms and "
				     "blocked worker %u (seen by the runtime "
				     "monitor)"
				   : "still in one poll after at least %.1f ms: "
				     "worker %u is blocked (seen by the runtime "
				     "monitor)",
			     (double)dur_ns / 1e6, worker);
	w = &p->warnings[(p->warn_seq - 1) % WARN_KEEP];
	w->task = t->id;
	w->task_name = t->name;
	w->file = t->file;
	w->line = t->line > 0 ? (uint32_t)t->line : 0;
	pthread_mutex_unlock(&p->lock);
}

void weft__collector_warn_task(struct probe *p, uint8_t kind, task_rec_t *t,
			       uint16_t worker, uint64_t at, uint64_t value,
			       const char *detail)
{
	t->pub.warnings |= 1u << kind;
	weft__collector_task_changed(p, t);
	weft__collector_warn(p, kind, t, worker, at, value, "%s", detail);
}

/* Finished tasks are never idle: only the live list needs a look. */
void weft__collector_check_idle_tasks(struct probe *p, uint64_t now)
{
	for (task_rec_t *t = p->live; t; t = t->lnext) {
		if (t->pub.state != WEFT_TASK_IDLE || !t->seen_spawn ||
		    t->outstanding > 0 || t->pub.polls == 0 ||
		    (t->once & (1u << WEFT_WARN_LOST_WAKER)))
			continue;
		if (!t->lost_check_at) {
			t->lost_check_at = now;
			continue;
		}
		if (now - t->lost_check_at < 1000000000u)
			continue;
		if (weft__collector_across_drops(p, t->pub.spawned_ns, now)) {
			/* A waker's clone may be what was dropped. */
			t->once |= 1u << WEFT_WARN_LOST_WAKER;
			p->drops_suppressed++;
			continue;
		}
		t->once |= 1u << WEFT_WARN_LOST_WAKER;
		weft__collector_warn_task(
			p, WEFT_WARN_LOST_WAKER, t, t->pub.last_worker, now,
			now - t->idle_since,
			"pending with no waker left: it will never be "
			"polled again");
	}
}
