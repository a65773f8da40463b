/* SPDX-License-Identifier: MIT */
/*
 * An Update's parts other than its tasks, encoded by hand as update.c
 * encodes the tasks (its top comment says how and why): resources,
 * workers, warnings, stats.  Each once per update, not per task: kept
 * apart from the per-task path.
 */
#include "update_private.h"

/* Resource */

/* Entries of a holders or waiters list that go out: at most the list's. */
static size_t res_list_n(uint32_t n)
{
	return n < WEFT_RES_LIST ? n : WEFT_RES_LIST;
}

/* Payload bytes of a packed list of @n ids. */
static size_t ids_payload(const uint64_t *ids, size_t n)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++)
		len += varint_len(ids[i]);
	return len;
}

static size_t packed_len(unsigned field, const uint64_t *ids, size_t n)
{
	return n ? sub_len(field, ids_payload(ids, n)) : 0;
}

static uint8_t *put_packed(uint8_t *p, unsigned field, const uint64_t *ids,
			   size_t n)
{
	if (!n)
		return p;
	p = put_sub(p, field, ids_payload(ids, n));
	for (size_t i = 0; i < n; i++)
		p = put_varint(p, ids[i]);
	return p;
}

/* A resource's sizes (struct task_size: name and file, the two
 * histograms: wait, hold). */
size_t weft__upd_resource_len(const weft_probe_resource_t *r,
			      struct task_size *s)
{
	size_t n;

	s->name = cstr_len(r->name);
	s->file = cstr_len(r->file);
	s->is_new = s->is_finished = false;
	n = uint_len(1, r->id) + uint_len(2, r->kind) + str_len(3, s->name) +
	    str_len(4, s->file) + uint_len(5, r->line) +
	    uint_len(6, r->created_ns) + uint_len(7, r->dropped_ns) +
	    uint_len(8, r->nholders) + uint_len(9, r->nwaiters) +
	    packed_len(10, r->holders, res_list_n(r->nholders)) +
	    packed_len(11, r->waiters, res_list_n(r->nwaiters)) +
	    uint_len(12, r->owner) + uint_len(13, r->acquires) +
	    uint_len(14, r->waits) + double_len(15, r->acquires_per_s) +
	    uint_len(16, r->oldest_wait_ns) + uint_len(17, r->longest_holder) +
	    uint_len(18, r->longest_hold_ns);
	if (r->wait_hist) {
		s->hist[0] = hist_len(r->wait_hist);
		n += sub_len(19, s->hist[0]);
	}
	if (r->hold_hist) {
		s->hist[1] = hist_len(r->hold_hist);
		n += sub_len(20, s->hist[1]);
	}
	return s->body = n;
}

uint8_t *weft__upd_put_resource(uint8_t *p, const weft_probe_resource_t *r,
				const struct task_size *s)
{
	p = put_sub(p, 10, s->body); /* Update.resources */
	p = put_uint(p, 1, r->id);
	p = put_uint(p, 2, r->kind);
	p = put_str(p, 3, r->name, s->name);
	p = put_str(p, 4, r->file, s->file);
	p = put_uint(p, 5, r->line);
	p = put_uint(p, 6, r->created_ns);
	p = put_uint(p, 7, r->dropped_ns);
	p = put_uint(p, 8, r->nholders);
	p = put_uint(p, 9, r->nwaiters);
	p = put_packed(p, 10, r->holders, res_list_n(r->nholders));
	p = put_packed(p, 11, r->waiters, res_list_n(r->nwaiters));
	p = put_uint(p, 12, r->owner);
	p = put_uint(p, 13, r->acquires);
	p = put_uint(p, 14, r->waits);
	p = put_double(p, 15, r->acquires_per_s);
	p = put_uint(p, 16, r->oldest_wait_ns);
	p = put_uint(p, 17, r->longest_holder);
	p = put_uint(p, 18, r->longest_hold_ns);
	if (r->wait_hist) {
		p = put_sub(p, 19, s->hist[0]);
		p = put_hist(p, r->wait_hist);
	}
	if (r->hold_hist) {
		p = put_sub(p, 20, s->hist[1]);
		p = put_hist(p, r->hold_hist);
	}
	return p;
}

/* Worker, WorkerCounters */

static size_t counters_len(const weft_worker_metrics_t *k)
{
	return uint_len(1, k->polls) + uint_len(2, k->steals) +
	       uint_len(3, k->steal_ops) + uint_len(4, k->parks) +
	       uint_len(5, k->unparks) + uint_len(6, k->noop_wakes) +
	       uint_len(7, k->local_schedules) +
	       uint_len(8, k->lifo_schedules) +
	       uint_len(9, k->global_schedules) +
	       uint_len(10, k->remote_schedules) + uint_len(11, k->overflows) +
	       uint_len(12, k->spawned) + uint_len(13, k->completed) +
	       uint_len(14, k->busy_ns) + uint_len(15, k->forced_yields) +
	       uint_len(16, k->local_queue_depth);
}

/*
 * Worker.stolen: the top victims with their indices, at any worker count
 * (the old dense stolen_from, field 13, is no longer written).
 */
static size_t steal_len(const weft_probe_steal_t *s)
{
	return uint_len(1, s->victim) + uint_len(2, s->tasks);
}

static size_t nstolen_of(const weft_probe_worker_t *w)
{
	return w->nstolen < WEFT_WORKER_STOLEN ? w->nstolen :
						 WEFT_WORKER_STOLEN;
}

size_t weft__upd_worker_len(const weft_probe_worker_t *w)
{
	size_t n =
		uint_len(1, w->index) + uint_len(2, w->state) +
		uint_len(3, w->current_task) + uint_len(4, w->poll_started_ns) +
		sub_len(5, counters_len(&w->counters)) +
		double_len(6, w->polls_per_s) + double_len(7, w->steals_per_s) +
		double_len(8, w->steal_rate) + double_len(9, w->busy_ratio) +
		uint_len(10, w->mean_poll_ns) + uint_len(11, w->max_poll_ns) +
		uint_len(12, w->queue_depth);

	n += uint_len(14, w->events_dropped) + uint_len(15, w->off_cpu_ns) +
	     double_len(16, w->off_cpu_ratio);
	for (size_t i = 0; i < nstolen_of(w); i++)
		n += sub_len(17, steal_len(&w->stolen[i]));
	return n + uint_len(18, w->stolen_out);
}

uint8_t *weft__upd_put_worker(uint8_t *p, const weft_probe_worker_t *w)
{
	const weft_worker_metrics_t *k = &w->counters;

	p = put_sub(p, 3, weft__upd_worker_len(w)); /* Update.workers */
	p = put_uint(p, 1, w->index);
	p = put_uint(p, 2, w->state);
	p = put_uint(p, 3, w->current_task);
	p = put_uint(p, 4, w->poll_started_ns);
	p = put_sub(p, 5, counters_len(k));
	p = put_uint(p, 1, k->polls);
	p = put_uint(p, 2, k->steals);
	p = put_uint(p, 3, k->steal_ops);
	p = put_uint(p, 4, k->parks);
	p = put_uint(p, 5, k->unparks);
	p = put_uint(p, 6, k->noop_wakes);
	p = put_uint(p, 7, k->local_schedules);
	p = put_uint(p, 8, k->lifo_schedules);
	p = put_uint(p, 9, k->global_schedules);
	p = put_uint(p, 10, k->remote_schedules);
	p = put_uint(p, 11, k->overflows);
	p = put_uint(p, 12, k->spawned);
	p = put_uint(p, 13, k->completed);
	p = put_uint(p, 14, k->busy_ns);
	p = put_uint(p, 15, k->forced_yields);
	p = put_uint(p, 16, k->local_queue_depth);
	p = put_double(p, 6, w->polls_per_s);
	p = put_double(p, 7, w->steals_per_s);
	p = put_double(p, 8, w->steal_rate);
	p = put_double(p, 9, w->busy_ratio);
	p = put_uint(p, 10, w->mean_poll_ns);
	p = put_uint(p, 11, w->max_poll_ns);
	p = put_uint(p, 12, w->queue_depth);
	p = put_uint(p, 14, w->events_dropped);
	p = put_uint(p, 15, w->off_cpu_ns);
	p = put_double(p, 16, w->off_cpu_ratio);
	for (size_t i = 0; i < nstolen_of(w); i++) {
		p = put_sub(p, 17, steal_len(&w->stolen[i]));
		p = put_uint(p, 1, w->stolen[i].victim);
		p = put_uint(p, 2, w->stolen[i].tasks);
	}
	return put_uint(p, 18, w->stolen_out);
}

/* Warning (detail is a char array: bounded by it, not trusted to end). */

size_t weft__upd_warning_len(const weft_probe_warning_t *w)
{
	return uint_len(1, w->seq) + uint_len(2, w->kind) +
	       uint_len(3, w->worker) + uint_len(4, w->task) +
	       str_len(5, cstr_len(w->task_name)) +
	       str_len(6, cstr_len(w->file)) + uint_len(7, w->line) +
	       uint_len(8, w->at_ns) + uint_len(9, w->value_ns) +
	       str_len(10, strnlen(w->detail, sizeof(w->detail))) +
	       uint_len(11, w->history) + uint_len(12, w->count);
}

uint8_t *weft__upd_put_warning(uint8_t *p, const weft_probe_warning_t *w)
{
	p = put_sub(p, 4, weft__upd_warning_len(w)); /* Update.warnings */
	p = put_uint(p, 1, w->seq);
	p = put_uint(p, 2, w->kind);
	p = put_uint(p, 3, w->worker);
	p = put_uint(p, 4, w->task);
	p = put_str(p, 5, w->task_name, cstr_len(w->task_name));
	p = put_str(p, 6, w->file, cstr_len(w->file));
	p = put_uint(p, 7, w->line);
	p = put_uint(p, 8, w->at_ns);
	p = put_uint(p, 9, w->value_ns);
	p = put_str(p, 10, w->detail, strnlen(w->detail, sizeof(w->detail)));
	p = put_uint(p, 11, w->history);
	return put_uint(p, 12, w->count);
}

/* Stats */

size_t weft__upd_stats_len(const weft_probe_stats_t *s)
{
	return uint_len(1, s->now_ns) + uint_len(2, s->start_ns) +
	       uint_len(3, s->workers) + uint_len(4, s->live_tasks) +
	       uint_len(5, s->spawned_tasks) +
	       uint_len(6, s->global_queue_depth) + uint_len(7, s->events) +
	       uint_len(8, s->events_dropped) + uint_len(9, s->warnings) +
	       double_len(10, s->events_per_s) +
	       double_len(11, s->polls_per_s) +
	       double_len(12, s->steals_per_s) +
	       str_len(13, cstr_len(s->clock)) +
	       uint_len(14, s->collector_cpu_ns) +
	       double_len(15, s->collector_cpu) +
	       uint_len(16, s->blocking_busy) +
	       uint_len(17, s->blocking_queued) +
	       uint_len(18, s->blocking_jobs) +
	       uint_len(19, s->tasks_end_unseen);
}

uint8_t *weft__upd_put_stats(uint8_t *p, const weft_probe_stats_t *s)
{
	p = put_sub(p, 1, weft__upd_stats_len(s)); /* Update.stats */
	p = put_uint(p, 1, s->now_ns);
	p = put_uint(p, 2, s->start_ns);
	p = put_uint(p, 3, s->workers);
	p = put_uint(p, 4, s->live_tasks);
	p = put_uint(p, 5, s->spawned_tasks);
	p = put_uint(p, 6, s->global_queue_depth);
	p = put_uint(p, 7, s->events);
	p = put_uint(p, 8, s->events_dropped);
	p = put_uint(p, 9, s->warnings);
	p = put_double(p, 10, s->events_per_s);
	p = put_double(p, 11, s->polls_per_s);
	p = put_double(p, 12, s->steals_per_s);
	p = put_str(p, 13, s->clock, cstr_len(s->clock));
	p = put_uint(p, 14, s->collector_cpu_ns);
	p = put_double(p, 15, s->collector_cpu);
	p = put_uint(p, 16, s->blocking_busy);
	p = put_uint(p, 17, s->blocking_queued);
	p = put_uint(p, 18, s->blocking_jobs);
	return put_uint(p, 19, s->tasks_end_unseen);
}

void weft_wire_hist_get(weft_hist_t *h, const Weft__V1__Histogram *m)
{
	size_t n = m->n_buckets < WEFT_HIST_BUCKETS ? m->n_buckets :
						      WEFT_HIST_BUCKETS;

	memset(h, 0, sizeof(*h));
	if (m->buckets)
		memcpy(h->buckets, m->buckets, n * sizeof(h->buckets[0]));
	h->count = m->count;
	h->sum_ns = m->sum_ns;
	h->max_ns = m->max_ns;
	h->outliers = m->outliers;
}
