/* SPDX-License-Identifier: MIT */
/*
 * Workers view: one row per worker (state, local queue depth now and as
 * a sparkline of the last updates, polls/s, steals in and out, steal
 * rate, parks, busy %, poll %, off-CPU %, mean and max poll, overflows),
 * then the global queue and the blocking pool.  The row is wider than
 * 80 columns and a narrow terminal cuts it from the right: OFF% is 4
 * wide so that MAX still fits in 120 (--once's default width).
 *
 * BUSY% is the time not parked (the runtime's counter, as Tokio counts
 * it), POLL% the time in polls (from the POLL events, "-" while none
 * stream).  A worker spinning on a task that wakes itself is all busy
 * and little in polls; one whose polls are long is both.  OFF% is
 * the time its thread was runnable but the OS ran something else (its
 * schedstat run_delay, over the collector's window; "-" where the probe
 * could not read it, or a file from before it did): busy time in which
 * the worker did not run at all, on a host short of CPUs.
 */
#include "console.h"

#define SPARK_W 16

static size_t workers_count(const con_session_t *s)
{
	return s->model->nworkers;
}

static void workers_draw(const con_session_t *s, con_grid_t *g, int top,
			 int rows)
{
	const con_model_t *m = s->model;
	size_t first = s->scroll[CON_VIEW_WORKERS];
	int y = top, iw = 3;
	char a[16], b[16], c[16];

	/* As wide as the last worker's index (the runtime allows 4,096). */
	for (size_t n = m->nworkers ? m->nworkers - 1 : 0; n >= 1000; n /= 10)
		iw++;
	con_grid_fill_row(g, y, CON_ROLE_COLUMN);
	con_grid_printf(g, 0, y++, CON_ROLE_COLUMN,
			" %-*s %-9s %5s %9s %-*s %7s %9s %10s %6s %5s %5s "
			"%5s %4s %6s %6s %5s",
			iw, "W", "STATE", "QUEUE", "POLLS", SPARK_W, "QUEUE-HIST",
			"POLLS/S", "STEALS-IN", "STEALS-OUT", "STEAL%", "PARKS",
			"BUSY%", "POLL%", "OFF%", "MEAN", "MAX", "OVFL");
	for (size_t i = first; i < m->nworkers && y < top + rows - 2; i++) {
		const con_worker_t *w = &m->workers[i];
		double hist[SPARK_W];
		double poll = con_model_poll_ratio(m, (uint32_t)i);
		char pct[16], off[16];
		bool sel = !s->once && i == s->sel[CON_VIEW_WORKERS];
		con_role_t r = sel ? CON_ROLE_SELECTED : CON_ROLE_NORMAL;
		int x;

		for (int k = 0; k < SPARK_W; k++)
			hist[k] = con_worker_depth_at(m, w,
						      (unsigned)(SPARK_W - 1 -
								 k));
		if (sel)
			con_grid_fill_row(g, y, CON_ROLE_SELECTED);
		x = con_grid_printf(g, 0, y, r, " %-*zu ", iw, i);
		x = con_grid_printf(g, x, y,
				    sel ? r :
				    w->state == 0 ? CON_ROLE_GOOD :
						    CON_ROLE_DIM,
				    "%-9s", w->seen ?
						    con_worker_state_name(
							    w->state) :
						    "-");
		x = con_grid_printf(g, x, y, r, " %5u %9llu ", w->queue_depth,
				    (unsigned long long)w->counters.polls);
		x = con_grid_spark(g, x, y, hist, SPARK_W, 0);
		if (poll < 0)
			snprintf(pct, sizeof(pct), "-");
		else
			snprintf(pct, sizeof(pct), "%.0f%%", poll * 100.0);
		/* 0: not read (a thread that ran waited for a CPU at least
		 * once, at its start). */
		if (!w->off_cpu_ns)
			snprintf(off, sizeof(off), "-");
		else
			snprintf(off, sizeof(off), "%.0f%%",
				 w->off_cpu_ratio * 100.0);
		con_grid_printf(g, x, y, r,
				" %7s %9llu %10llu %5.1f%% %5llu %4.0f%% %5s "
				"%4s %6s %6s %5llu",
				con_fmt_count(a, sizeof(a), w->polls_per_s),
				(unsigned long long)w->counters.steals,
				(unsigned long long)w->stolen_by_others,
				/* A task stolen twice counts twice:
				 * shown as at most every poll. */
				(w->steal_rate > 1 ? 1 : w->steal_rate) * 100.0,
				(unsigned long long)w->counters.parks,
				w->busy_ratio * 100.0, pct, off,
				con_fmt_ns(b, sizeof(b), w->mean_poll_ns),
				con_fmt_ns(c, sizeof(c), w->max_poll_ns),
				(unsigned long long)w->counters.overflows);
		y++;
	}
	y++;
	if (y < top + rows) {
		/*
		 * The pool's own counts when the stats carry them: jobs that
		 * began before anyone listened have no start event, so the
		 * events undercount what runs (a trace from before them
		 * carries none: the events then).
		 */
		uint64_t running = m->blocking_started > m->blocking_ended ?
					   m->blocking_started -
						   m->blocking_ended :
					   0,
			 jobs = m->blocking_started, queued = 0;

		if (m->stats.blocking_jobs || m->stats.blocking_busy ||
		    m->stats.blocking_queued) {
			running = m->stats.blocking_busy;
			jobs = m->stats.blocking_jobs;
			queued = m->stats.blocking_queued;
		}
		con_grid_printf(
			g, 0, y++, CON_ROLE_TITLE,
			" global queue %llu   blocking pool: %llu "
			"running, %llu queued (%llu jobs)   spawned %llu",
			(unsigned long long)m->stats.global_queue_depth,
			(unsigned long long)running, (unsigned long long)queued,
			(unsigned long long)jobs,
			(unsigned long long)m->stats.spawned_tasks);
	}
}

const con_view_t con_view_workers = {
	.name = "workers",
	.letter = 'w',
	.title = "Workers",
	.draw = workers_draw,
	.count = workers_count,
};
