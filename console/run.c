/* SPDX-License-Identifier: MIT */
/*
 * weft-console's two sessions, as main.c parsed them: a live process
 * (live.c) or a trace file (replay.c), each either printed once as text
 * (--once) or shown in the interactive UI (tty.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <unistd.h>

#include "console.h"
#include "replay_internal.h" /* the seek bench: marks used */

#include "weft/trace_reader.h"
#include "weft/trace_stream.h"

/* No target: the only live weft process, or the list of them (exit 2). */
static const char *find_target(char *buf, size_t len)
{
	int err = con_live_discover(buf, len, stderr);

	if (err == -E2BIG)
		con_die("several live weft processes (above): name one");
	if (err == -ENOENT)
		con_die("no live weft process found; name a TARGET or use "
			"--replay FILE (--help)");
	if (err)
		con_die("the socket directory: %s", strerror(-err));
	return buf;
}

/*
 * Above 4,096 tasks the server streams its full update: the first record
 * has the stats and the tasks of lowest id, the others follow over the
 * next passes (seconds at 1,000,000 tasks), with no mark at the end.
 * --once waits, after its fixed wait, until the live tasks it holds are
 * as many as the process says it has (the latest stats), at most
 * ONCE_STREAM_MS, and says so on stderr if it stops short.  @slack: the
 * tasks spawned over the last read, which the collector may not have
 * seen yet (the runtime counts them at once).
 */
#define ONCE_STREAM_MS 15000u

static bool once_all_tasks(const con_model_t *m, uint64_t slack)
{
	uint64_t live = m->ntasks - m->nfinished;

	/* No stats yet: what came was a task's details, not the update. */
	return m->have_stats && live + slack >= m->stats.live_tasks;
}

/* --once live: attach, read for @after_ns (retrying a refused connection
 * every second meanwhile), then until every task came (once_all_tasks),
 * print the view.  2 if nothing ever came. */
static int once_live(con_session_t *s, con_live_t *l, uint64_t after_ns,
		     int width)
{
	uint64_t until = con_live_now_ms() +
			 (after_ns ? after_ns / 1000000u : 1000u);
	int status = 0;

	uint64_t now, next_try = 0;

	/* task:ID: its events from the start, and its details asked for. */
	if (s->view == CON_VIEW_DETAIL && s->detail_task)
		con_model_watch(s->model, s->detail_task);
	while ((now = con_live_now_ms()) < until) {
		if (!l->connected) {
			if (now < next_try) {
				usleep(10000);
				continue;
			}
			next_try = now + 1000;
			if (con_live_connect(l))
				continue;
			if (s->model->watch_task)
				(void)con_live_request_task(
					l, s->model->watch_task);
		}
		(void)con_live_pump(l, s->model, until);
	}
	/* Connected but no update yet (the server's first can lag a fresh
	 * subscriber): wait a little for one rather than print nothing. */
	until = con_live_now_ms() + 5000;
	while (l->connected && !s->model->updates &&
	       con_live_now_ms() < until)
		(void)con_live_pump(l, s->model,
				    con_live_now_ms() + 50 < until ?
					    con_live_now_ms() + 50 :
					    until);
	if (l->connected && s->model->updates) {
		uint64_t spawned = s->model->stats.spawned_tasks, slack = 0;
		bool had = s->model->have_stats;

		until = con_live_now_ms() + ONCE_STREAM_MS;
		while (l->connected && !once_all_tasks(s->model, slack) &&
		       (now = con_live_now_ms()) < until) {
			(void)con_live_pump(l, s->model,
					    now + 100 < until ? now + 100 :
								until);
			/* Spawned since the last stats we had (none before
			 * the first: their count is not a spawn rate). */
			slack = had ? s->model->stats.spawned_tasks - spawned :
				      0;
			spawned = s->model->stats.spawned_tasks;
			had = s->model->have_stats;
		}
		if (!once_all_tasks(s->model, slack))
			fprintf(stderr,
				"weft-console: %s: the task list may be "
				"partial: %zu of %llu live tasks came within "
				"%u s\n",
				l->target,
				s->model->ntasks - s->model->nfinished,
				(unsigned long long)s->model->stats.live_tasks,
				ONCE_STREAM_MS / 1000);
	}
	if (!l->frames) {
		fprintf(stderr, "weft-console: %s: %s\n", l->target,
			l->error[0] ? l->error : "nothing received");
		return 2;
	}
	if (!l->connected && l->error[0])
		fprintf(stderr, "weft-console: %s: %s\n", l->target, l->error);
	con_session_resort(s);
	con_session_watch(s);
	con_once_print(s, width, stdout);
	if (s->view == CON_VIEW_DETAIL && s->detail_task &&
	    !con_model_task(s->model, s->detail_task))
		status = 1;
	return status;
}

static int attach_bench(con_session_t *s, con_live_t *l, const con_opts_t *o);

int con_run_live(con_session_t *s, const con_opts_t *o)
{
	const char *target = o->target;
	char found[32];
	con_model_t m;
	con_live_t l;
	int status;

	if (!target)
		target = find_target(found, sizeof(found));
	if (con_live_init(&l, target))
		con_die("bad target '%s' (a pid, unix:PATH or "
			"tcp://HOST:PORT)",
			target);
	con_model_init(&m, target);
	m.mode = CON_MODE_LIVE;
	con_model_set_sort(&m, o->col, o->invert);
	if (o->filter)
		con_model_set_filter(&m, o->filter);
	s->model = &m;
	s->live = &l;
	if (o->attach_bench) {
		status = attach_bench(s, &l, o);
	} else if (o->once) {
		s->once = true;
		status = once_live(s, &l, o->have_after ? o->after_ns : 0,
				   o->width);
	} else {
		/* A first attempt now: a wrong target shows at once. */
		(void)con_live_connect(&l);
		status = con_tty_run(s);
	}
	con_live_fini(&l);
	con_model_fini(&m);
	if (fflush(stdout))
		status = 1;
	return status;
}

/* Peak RSS so far, in MiB. */
static double peak_rss_mb(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (double)ru.ru_maxrss / 1024.0;
}

/* The screen as the UI would draw it (not printed). */
static void bench_screen(con_session_t *s)
{
	con_grid_t g;

	con_session_resort(s);
	con_session_watch(s);
	con_grid_init(&g, 120, 40, s->ascii);
	con_screen_draw(s, &g);
	con_grid_fini(&g);
}

static double secs_since(uint64_t t0)
{
	return (double)(weft_wire_now_ns() - t0) / 1e9;
}

/* Resident bytes now (/proc/self/statm), 0 when not known. */
static uint64_t rss_now(void)
{
	unsigned long long size, res;
	FILE *f = fopen("/proc/self/statm", "re");
	int got;

	if (!f)
		return 0;
	got = fscanf(f, "%llu %llu", &size, &res);
	fclose(f);
	return got == 2 ? res * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* The first screen is up: the header's figures came (the stats), and
 * the view's first page (the Tasks view's 40 rows, or all if fewer). */
static bool first_screen_ready(const con_model_t *m)
{
	uint64_t want = m->stats.live_tasks < 40 ? m->stats.live_tasks : 40;

	return m->have_stats && m->ntasks >= want;
}

/*
 * --attach-bench: a live attach as the UI makes it, timed, one line each
 * on stdout: connected; the first update (what the process took to send
 * anything); the first screen (the header's figures and a
 * page of the view, drawn into a 120x40 grid); every task (as many in
 * the model as the process has live), or --after (default 60 s) given
 * up; the --once text of the Tasks view, to /dev/null.  Each with the
 * peak RSS so far; then bytes a task: the peak RSS over the tasks (all
 * of it, the program's own few MiB included), and the model's own
 * (con_model_bytes).
 */
static int attach_bench(con_session_t *s, con_live_t *l, const con_opts_t *o)
{
	uint64_t t0 = weft_wire_now_ns(), give_up, first = 0;
	con_model_t *m = s->model;
	uint64_t rss0 = rss_now();
	bool got_update = false;
	FILE *null;

	give_up = con_live_now_ms() + (o->have_after ? o->after_ns / 1000000u :
						       60000u);
	while (con_live_connect(l)) {
		if (con_live_now_ms() >= give_up) {
			fprintf(stderr, "weft-console: %s: %s\n", l->target,
				l->error);
			return 2;
		}
		usleep(10000);
	}
	printf("%-12s %8.3f s  peak RSS %7.1f MiB\n", "connected",
	       secs_since(t0), peak_rss_mb());
	fflush(stdout);
	while (l->connected && con_live_now_ms() < give_up) {
		(void)con_live_pump(l, m, con_live_now_ms() + 5);
		if (!got_update && m->updates) {
			/* What the process took: the rest is ours. */
			got_update = true;
			printf("%-12s %8.3f s  peak RSS %7.1f MiB  (%zu tasks "
			       "in it)\n",
			       "first-update", secs_since(t0), peak_rss_mb(),
			       m->ntasks);
			fflush(stdout);
		}
		if (!first && first_screen_ready(m)) {
			bench_screen(s);
			first = weft_wire_now_ns();
			printf("%-12s %8.3f s  peak RSS %7.1f MiB  (live tasks "
			       "%llu, %zu in the model)\n",
			       "first-screen", secs_since(t0), peak_rss_mb(),
			       (unsigned long long)m->stats.live_tasks,
			       m->ntasks);
			fflush(stdout);
		}
		if (first && m->ntasks >= m->stats.live_tasks)
			break;
	}
	/* Not read while the text is made: the server would drop it. */
	con_live_close(l, NULL);
	con_session_resort(s);
	bench_screen(s);
	printf("%-12s %8.3f s  peak RSS %7.1f MiB  (%zu tasks of %llu live%s)"
	       "\n",
	       "all-tasks", secs_since(t0), peak_rss_mb(), m->ntasks,
	       (unsigned long long)m->stats.live_tasks,
	       m->ntasks >= m->stats.live_tasks && first ? "" :
							   ": given up");
	fflush(stdout);
	null = fopen("/dev/null", "we");
	if (null) {
		con_session_t once = *s;
		uint64_t t1 = weft_wire_now_ns();

		once.view = CON_VIEW_TASKS;
		once.once = true;
		con_once_print(&once, o->width, null);
		fclose(null);
		printf("%-12s %8.3f s  peak RSS %7.1f MiB  (--once --view tasks,"
		       " %zu rows)\n",
		       "once-text", secs_since(t1), peak_rss_mb(), m->nlist);
	}
	if (m->ntasks)
		printf("%-12s %.0f bytes a task at peak RSS (%.0f over the "
		       "start's %.1f MiB); model %.0f bytes a task "
		       "(con_model_bytes)\n",
		       "per-task", peak_rss_mb() * 1048576.0 / (double)m->ntasks,
		       (peak_rss_mb() * 1048576.0 - (double)rss0) /
			       (double)m->ntasks,
		       (double)rss0 / 1048576.0,
		       (double)con_model_bytes(m) / (double)m->ntasks);
	return first && m->ntasks >= m->stats.live_tasks ? 0 : 1;
}

/*
 * --seek-bench: what the UI does on a file, timed, one line each on
 * stdout: the open to the first screen drawn (a 120x40 grid, not
 * printed), the rest of the index (the UI does it between frames),
 * then seeks to 10%, 50%, 90%, the end and 5% of the file's time and
 * back to 50% and 10%, each with its screen; the side index's state
 * and size at the end; peak RSS so far after each, and
 * the checkpoints kept.
 */
/* The last record's time in the trace at @path (read whole, lean). */
static uint64_t scan_end(const char *path)
{
	weft_trace_reader_t rd;
	Weft__V1__Frame *f;
	uint64_t t = 0;

	if (weft_trace_reader_open(&rd, path))
		return 0;
	if (!weft_trace_reader_lean(&rd))
		while (weft_trace_reader_next(&rd, &f) == 1) {
			uint64_t at = weft_trace_frame_time(f);

			if (at > t)
				t = at;
			weft_trace_reader_frame_free(&rd, f);
		}
	weft_trace_reader_close(&rd);
	return t;
}

static int seek_bench(con_session_t *s, const con_opts_t *o)
{
	static const double at[] = { 0.10, 0.50, 0.90, 1.0, 0.05, 0.50, 0.10 };
	uint64_t t0 = weft_wire_now_ns(), end;
	const char *env = getenv("WEFT_CONSOLE_SEEK_AHEAD");
	bool ahead = env && !strcmp(env, "1");
	char title[4096];
	con_replay_t rp;
	con_model_t m;

	if (con_replay_open_lazy(&rp, o->replay, CON_INDEX_OPEN_NS))
		return 2;
	con_replay_progress_off(&rp);
	snprintf(title, sizeof(title), "replay %s", o->replay);
	con_model_init(&m, title);
	m.mode = CON_MODE_REPLAY;
	s->model = &m;
	s->rp = &rp;
	s->replay = true;
	s->once = true;
	con_replay_seek(&rp, &m, rp.first_ns);
	bench_screen(s);
	printf("%-12s %8.3f s  peak RSS %6.1f MiB  (%zu records, %.0f MB "
	       "indexed; side index %s)\n",
	       "first-screen", secs_since(t0), peak_rss_mb(), rp.n,
	       (double)rp.indexed_bytes / 1e6, con_replay_side_state(&rp));
	fflush(stdout);
	t0 = weft_wire_now_ns();
	/* WEFT_CONSOLE_SEEK_AHEAD=1: the seeks before the index pass, to
	 * the end the trace's marks tell (replay_ahead.c). */
	if (ahead) {
		con_replay_ahead(&rp, &end, &end);
		/* No marks (an older file): the end read off the file, not
		 * timed; its seeks wait for the index pass. */
		if (!end)
			end = scan_end(o->replay);
		if (end < rp.last_ns)
			end = rp.last_ns;
	} else {
		con_replay_index(&rp, UINT64_MAX);
		end = rp.last_ns;
	}
	printf("%-12s %8.3f s  peak RSS %6.1f MiB  (%zu records, %.3f s of "
	       "trace%s)\n",
	       ahead ? "trace-end" : "index-rest", secs_since(t0),
	       peak_rss_mb(), rp.n, (double)(end - rp.first_ns) / 1e9,
	       ahead ? "; not indexed on: the seeks go ahead of it" : "");
	fflush(stdout);
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		uint64_t pos = rp.first_ns +
			       (uint64_t)(at[i] * (double)(end - rp.first_ns));
		uint64_t restored = rp.ckpt_restored;
		uint64_t seeks = rp.ahead ? rp.ahead->seeks : 0;
		size_t from = rp.next;
		char name[32];

		t0 = weft_wire_now_ns();
		con_replay_seek(&rp, &m, pos);
		bench_screen(s);
		snprintf(name, sizeof(name), "seek %.0f%%", at[i] * 100);
		printf("%-12s %8.3f s  peak RSS %6.1f MiB  (%s; %zu "
		       "checkpoints, %.1f MiB in memory, %.0f MB on disk, "
		       "every %.0f MB; %zu in the side index)\n",
		       name, secs_since(t0), peak_rss_mb(),
		       rp.ahead && rp.ahead->seeks > seeks ?
			       "from a mark in the trace" :
		       rp.ckpt_restored > restored ? "from a checkpoint" :
		       rp.next >= from             ? "read on" :
						     "from the start",
		       rp.nckpt, (double)rp.ckpt_bytes / 1048576.0,
		       (double)rp.spill_bytes / 1e6,
		       rp.ckpt_every == UINT64_MAX ?
			       0.0 :
			       (double)rp.ckpt_every / 1e6,
		       con_replay_side_ckpts(&rp));
		fflush(stdout);
	}
	printf("%-12s %zu tasks, %.1f MiB (con_model_bytes); %llu "
	       "checkpoints taken, %llu thinned, %llu restored (%llu from "
	       "the side index)\n",
	       "model", m.ntasks, (double)con_model_bytes(&m) / 1048576.0,
	       (unsigned long long)rp.ckpt_taken,
	       (unsigned long long)rp.ckpt_thinned,
	       (unsigned long long)rp.ckpt_restored,
	       (unsigned long long)rp.side_restored);
	printf("%-12s %s: %.1f MB, %.2f%% of the trace\n", "side-index",
	       con_replay_side_state(&rp),
	       (double)con_replay_side_bytes(&rp) / 1e6,
	       rp.size ? 100.0 * (double)con_replay_side_bytes(&rp) /
				 (double)rp.size :
			 0.0);
	if (rp.error)
		fprintf(stderr, "weft-console: %s: %s\n", o->replay, rp.error);
	con_model_fini(&m);
	con_replay_close(&rp);
	return 0;
}

int con_run_replay(con_session_t *s, const con_opts_t *o)
{
	con_model_t m;
	con_replay_t rp;
	char title[4096];
	int status = 0;

	if (o->seek_bench)
		return seek_bench(s, o);

	/* The first record indexed, or a tenth of a second's worth: the
	 * first screen does not wait for the whole file's index (the rest
	 * is indexed between frames, or as far as --once needs). */
	if (con_replay_open_lazy(&rp, o->replay, CON_INDEX_OPEN_NS))
		return 2;
	snprintf(title, sizeof(title), "replay %s", o->replay);
	con_model_init(&m, title);
	m.mode = CON_MODE_REPLAY;
	con_model_set_sort(&m, o->col, o->invert);
	if (o->filter)
		con_model_set_filter(&m, o->filter);
	s->model = &m;
	s->rp = &rp;
	s->replay = true;

	if (o->once) {
		uint64_t pos;

		/* One pass forward: checkpoints in memory would only cost.
		 * Those of a side index being written are taken (the index
		 * pass feeds its own model), and the pass is finished, so
		 * the next open of the trace reads the index: without
		 * --after, the seek to the end then restores the last one
		 * instead of replaying the trace again. */
		con_replay_checkpoints(&rp, 0);
		/* The exact state at --after, never a model from a mark in
		 * the trace: the text must not depend on whether the open's
		 * tenth of a second indexed that far, nor on a side index. */
		con_replay_ahead_off(&rp, &m);
		if (!o->have_after)
			con_replay_index(&rp, UINT64_MAX);
		pos = o->have_after ? rp.first_ns + o->after_ns : rp.last_ns;
		s->once = true;
		con_replay_seek(&rp, &m, pos);
		con_session_resort(s);
		con_session_watch(s);
		if (rp.error)
			fprintf(stderr, "weft-console: %s: %s\n", o->replay,
				rp.error);
		if (rp.skipped)
			fprintf(stderr,
				"weft-console: %s: %llu bytes of torn records "
				"skipped\n",
				o->replay, (unsigned long long)rp.skipped);
		/* As weft-trace tasks --at says it: not silently its end. */
		if (o->have_after && rp.indexed && pos > rp.last_ns)
			fprintf(stderr,
				"weft-console: %s ends before --after (%.3f "
				"s); shown at its end\n",
				o->replay,
				(double)(rp.last_ns - rp.first_ns) / 1e9);
		con_once_print(s, o->width, stdout);
		if (s->view == CON_VIEW_DETAIL && s->detail_task &&
		    !con_model_task(&m, s->detail_task))
			status = 1;
		/* --after stopped the index pass where the seek needed it:
		 * on to the end for the side index, the text out first. */
		if (con_replay_side_writing(&rp)) {
			fflush(stdout);
			con_replay_index(&rp, UINT64_MAX);
		}
	} else {
		con_replay_seek(&rp, &m, rp.first_ns);
		con_replay_progress_off(&rp);
		status = con_tty_run(s);
	}
	con_model_fini(&m);
	con_replay_close(&rp);
	if (fflush(stdout))
		status = 1;
	return status;
}
