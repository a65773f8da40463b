/* SPDX-License-Identifier: MIT */
/*
 * A window of a trace, for the verbs that cut one (slice, export
 * --from/--to): the TIMEs of the command line, and which events fall in
 * it.  A TIME counts from the trace's first event, as weft-trace dump
 * prints times (12.5, 12.5s, 800ms, 40us, 2m, 1h); the window holds the
 * events stamped from --from to --to, both ends included.  The verbs
 * read in time order, so once the events are past --to by
 * TT_WINDOW_SLACK_NS no more of the window can come but late ones (the
 * stream's reorder window is 250 ms), and reading stops there.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace_tool.h"

bool tt_window_time(const char *s, uint64_t *ns)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || !(v >= 0) || v > 1e9)
		return false;
	if (!*end || !strcmp(end, "s"))
		*ns = (uint64_t)(v * 1e9);
	else if (!strcmp(end, "ms"))
		*ns = (uint64_t)(v * 1e6);
	else if (!strcmp(end, "us"))
		*ns = (uint64_t)(v * 1e3);
	else if (!strcmp(end, "m"))
		*ns = (uint64_t)(v * 6e10);
	else if (!strcmp(end, "h"))
		*ns = (uint64_t)(v * 3.6e12);
	else
		return false;
	return true;
}

void tt_window_init(tt_window_t *w)
{
	memset(w, 0, sizeof(*w));
	w->to_rel = UINT64_MAX;
}

bool tt_window_opt(tt_window_t *w, const char *verb, int argc, char **argv,
		   int *i)
{
	const char *opt = argv[*i];
	uint64_t *dst;

	if (!strcmp(opt, "--from"))
		dst = &w->from_rel;
	else if (!strcmp(opt, "--to"))
		dst = &w->to_rel;
	else
		return false;
	if (*i + 1 >= argc)
		tt_die("%s: %s needs a TIME (seconds from the trace's first "
		       "event: 2.5, 2.5s, 1500ms)",
		       verb, opt);
	if (!tt_window_time(argv[++*i], dst))
		tt_die("%s: bad %s '%s' (seconds from the trace's first "
		       "event: 2.5, 2.5s, 1500ms, 2m)",
		       verb, opt, argv[*i]);
	w->set = true;
	return true;
}

void tt_window_check(const tt_window_t *w, const char *verb)
{
	if (w->from_rel > w->to_rel)
		tt_die("%s: --from %.6f s is after --to %.6f s", verb,
		       (double)w->from_rel / 1e9, (double)w->to_rel / 1e9);
}

void tt_window_start(tt_window_t *w, uint64_t first_ts)
{
	w->base = first_ts;
	w->from = first_ts + w->from_rel;
	if (w->from < first_ts)
		w->from = UINT64_MAX;
	w->to = w->to_rel == UINT64_MAX ? UINT64_MAX : first_ts + w->to_rel;
	if (w->to < first_ts)
		w->to = UINT64_MAX;
}

bool tt_window_past(const tt_window_t *w, uint64_t ts)
{
	return w->to < UINT64_MAX - TT_WINDOW_SLACK_NS &&
	       ts > w->to + TT_WINDOW_SLACK_NS;
}

bool tt_window_clip(const tt_window_t *w, weft_event_t *e)
{
	uint64_t start, end;

	if (e->kind != WEFT_EV_POLL)
		return e->ts >= w->from && e->ts <= w->to;
	/* A poll is stamped at its end, a1 its length: kept if it overlaps
	 * the window, cut to it. */
	start = e->a1 < e->ts ? e->ts - e->a1 : 0;
	if (e->ts < w->from || start > w->to)
		return false;
	end = e->ts < w->to ? e->ts : w->to;
	if (start < w->from)
		start = w->from;
	e->ts = end;
	e->a1 = end - start;
	return true;
}

void tt_window_stop(tt_trace_t *t)
{
	/* What trace_model.c's progress() does at the end of the file. */
	if (t->progress_shown)
		fputs("\r\033[K", stderr);
	t->progress_shown = false;
}

const char *tt_window_label(const tt_window_t *w, char *buf, size_t len)
{
	if (w->to_rel == UINT64_MAX)
		snprintf(buf, len, "%.6f s to the end",
			 (double)w->from_rel / 1e9);
	else
		snprintf(buf, len, "%.6f s to %.6f s",
			 (double)w->from_rel / 1e9, (double)w->to_rel / 1e9);
	return buf;
}
