/* SPDX-License-Identifier: MIT */
/*
 * The model's figures for the views: the header's, the workers' series,
 * and the names of states, columns and modes (model.c has the model,
 * how frames change it, and its consistency check).
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "model_internal.h"

#include "weft/wire.h"

/* ------------------------------------------------------------ figures */

void con_model_header(const con_model_t *m, con_header_t *h)
{
	memset(h, 0, sizeof(*h));
	h->target = m->target;
	h->workers = m->nworkers;
	h->mode = m->mode;
	/* Warnings, not rows: a fold's row stands for the N it says. */
	h->warnings = m->warnings_said;
	if (h->warnings < m->nwarnings + m->warnings_discarded)
		h->warnings = m->nwarnings + m->warnings_discarded;
	if (!m->have_stats)
		return;
	if (m->now_ns > m->start_ns && m->start_ns)
		h->uptime_ns = m->now_ns - m->start_ns;
	h->live_tasks = m->stats.live_tasks;
	h->polls_per_s = m->stats.polls_per_s;
	h->steals_per_s = m->stats.steals_per_s;
	h->steal_rate = m->stats.polls_per_s > 0 ?
				m->stats.steals_per_s / m->stats.polls_per_s :
				0;
	h->events_per_s = m->stats.events_per_s;
	h->dropped = m->stats.events_dropped;
	h->collector_cpu = m->stats.collector_cpu;
	if (m->stats.warnings > h->warnings)
		h->warnings = m->stats.warnings;
}

uint32_t con_worker_depth_at(const con_model_t *m, const con_worker_t *w,
			     unsigned back)
{
	if (back >= CON_HISTORY || back >= m->hist_next || !w->series)
		return 0;
	return w->series->depth_hist[(m->hist_next - 1 - back) % CON_HISTORY];
}

con_worker_series_t *con_worker_series(con_worker_t *w)
{
	if (!w->series)
		w->series = con_xcalloc(1, sizeof(*w->series));
	return w->series;
}

const char *con_task_state_name(unsigned state)
{
	static const char *const names[] = { "idle", "scheduled", "running",
					     "done" };

	return state < 4 ? names[state] : "?";
}

const con_worker_t *con_task_polled_by(const con_model_t *m,
				       const con_task_t *t)
{
	if (t->state == WEFT_TASK_DONE)
		return NULL;
	for (size_t i = 0; i < m->nworkers; i++)
		if (m->workers[i].seen && m->workers[i].state == 0 &&
		    m->workers[i].current_task == t->id)
			return &m->workers[i];
	return NULL;
}

const char *con_task_status_name(const con_model_t *m, const con_task_t *t)
{
	if (con_task_polled_by(m, t))
		return "running";
	/*
	 * The COMPLETE event carries the task's status, and the collector
	 * and the updates pass it on: a cancelled task is done too, but
	 * reading "done" it looks like one that ran to its end.
	 */
	if (t->state == WEFT_TASK_DONE && t->status == -ECANCELED)
		return "cancelled";
	return con_task_state_name(t->state);
}

const char *con_fmt_worker(char *buf, size_t len, uint32_t worker)
{
	if (worker == WEFT_EVENT_NO_WORKER)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%u", worker);
	return buf;
}

const char *con_worker_state_name(unsigned state)
{
	static const char *const names[] = { "polling", "searching", "parked" };

	return state < 3 ? names[state] : "?";
}

/*
 * A task shown running (a worker is in a poll of it) is not idle, whatever
 * its own record says: its stretch ended when that poll began (not known:
 * none counted), and stays so while the poll goes on.
 */
uint64_t con_task_idle_ns(const con_model_t *m, const con_task_t *t)
{
	const con_worker_t *w;
	uint64_t end = m->now_ns;

	if (t->state != WEFT_TASK_IDLE || !t->idle_since_ns)
		return t->idle_ns;
	if ((w = con_task_polled_by(m, t)))
		end = w->poll_started_ns;
	if (end <= t->idle_since_ns)
		return t->idle_ns;
	return t->idle_ns + (end - t->idle_since_ns);
}

bool con_task_idle_unknown(const con_model_t *m, const con_task_t *t)
{
	return t->spawn_unseen && t->state == WEFT_TASK_IDLE &&
	       !t->idle_since_ns && !t->idle_ns && !con_task_polled_by(m, t);
}

unsigned con_task_shown_state(const con_model_t *m, const con_task_t *t)
{
	if (con_task_polled_by(m, t))
		return WEFT_TASK_RUNNING;
	if (t->state == WEFT_TASK_DONE && t->status == -ECANCELED)
		return WEFT_TASK_DONE + 1; /* "cancelled", after done */
	return t->state;
}

uint32_t con_task_shown_worker(const con_model_t *m, const con_task_t *t)
{
	const con_worker_t *w = con_task_polled_by(m, t);

	return w ? w->index : t->last_worker;
}

const char *con_task_col_label(con_task_col_t col)
{
	static const char *const labels[] = {
#define CON_X(name, label) label,
		CON_TASK_COLUMNS(CON_X)
#undef CON_X
	};

	return col < CON_COL_MAX ? labels[col] : "?";
}

const char *con_task_waiting_text(const con_model_t *m, const con_task_t *t,
				  char *buf, size_t len)
{
	const con_resource_t *r;
	char label[CON_RES_STR_MAX + 16];

	if (!t->waiting_on || t->state == WEFT_TASK_DONE) {
		snprintf(buf, len, "-");
		return buf;
	}
	r = con_model_resource(m, t->waiting_on);
	if (!r)
		snprintf(buf, len, "resource %llu",
			 (unsigned long long)t->waiting_on);
	else
		snprintf(buf, len, "%s %s", weft_resource_kind_name(r->kind),
			 con_res_label(r, label, sizeof(label)));
	return buf;
}

const char *con_mode_name(con_mode_t mode)
{
	switch (mode) {
	case CON_MODE_LIVE:
		return "LIVE";
	case CON_MODE_PAUSED:
		return "PAUSED";
	case CON_MODE_REPLAY:
		return "REPLAY";
	}
	return "?";
}
