/* SPDX-License-Identifier: MIT */
/*
 * weft-trace dump FILE: every event, one a line, in time order:
 *   TIME(s, from the first event)  WORKER  KIND  TASK  FIELDS
 * Fields are named per kind from the X-macro lists (weft/probe_events.h);
 * a resource's events (RES_*) name it by id, op and, once the updates
 * named it, its kind and name or file:line.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace_tool.h"
#include "weft/trace_stream.h"

static const char usage[] =
	"usage: weft-trace dump [--abs] FILE\n"
	"One event a line: time (s since the first event; --abs: monotonic\n"
	"ns), worker (- for other threads), kind, task (name), fields.\n";

#define WAKE_LABEL(name, value, label) [value] = label,
static const char *const wake_sources[] = { WEFT_WAKE_SOURCES(WAKE_LABEL) };
#undef WAKE_LABEL
#define SCHED_LABEL(name, value, label) [value] = label,
static const char *const sched_wheres[] = { WEFT_SCHED_WHERES(SCHED_LABEL) };
#undef SCHED_LABEL

/* " (mutex cache)": resource @id as the updates named it; "" when not. */
static const char *res_name(const tt_trace_t *t, uint64_t id, char *buf,
			    size_t len)
{
	const tt_resource_t *x = tt_res_find(&t->res, id);
	char label[320];

	if (!x || (!x->name[0] && !x->file[0]))
		buf[0] = '\0';
	else
		snprintf(buf, len, " (%s)", tt_res_label(x, label,
							 sizeof(label)));
	return buf;
}

/*
 * The await sites met so far (AWAIT_SITE), by id: their lines (0: not
 * met).  Their files are addresses in the process; a POLL naming one
 * prints the file from its task's records, as a PARKED_AT does.
 */
static uint32_t *await_lines;
static size_t nawait_lines;

static void await_note(const weft_event_t *e)
{
	size_t n = nawait_lines ? nawait_lines : 64;

	/* No runtime numbers 2^20 sites: a bound on a damaged file. */
	if (e->task == 0 || e->task > WEFT_WIRE_AWAIT_SITE_MAX)
		return;
	if (e->task >= nawait_lines) {
		while (n <= e->task)
			n *= 2;
		await_lines =
			tt_xrealloc(await_lines, n * sizeof(*await_lines));
		memset(await_lines + nawait_lines, 0,
		       (n - nawait_lines) * sizeof(*await_lines));
		nawait_lines = n;
	}
	await_lines[e->task] = e->a2;
}

/*
 * " at=FILE:LINE" for a POLL naming await site @id, as PARKED_AT's text:
 * the file when the task's records say it parks on that line, the line
 * alone when not; " site=unknown" for a site not met (its announcement
 * dropped, or before the file began).
 */
static void await_text(const tt_trace_t *t, const weft_event_t *e, uint32_t id,
		       char *buf, size_t len)
{
	uint32_t line = id < nawait_lines ? await_lines[id] : 0;
	const tt_task_t *k = tt_task(t, e->task);
	const weft_wire_site_t *s;

	/* Not announced in this file (it began late, a segment after the
	 * first, a snapshot) or dropped: the Updates' table says it, file
	 * and line (weft/wire.h: WEFT_WIRE_AWAIT_SITE_BASE). */
	if (!line && (s = weft_wire_sites_await(
			      &weft_trace_stream_reader(t->stream)->sites, id)))
		snprintf(buf, len, " at=%s:%u", s->file, s->line);
	else if (!line)
		snprintf(buf, len, " site=unknown");
	else if (k && k->parked_file && k->parked_line == line)
		snprintf(buf, len, " at=%s:%u", k->parked_file, line);
	else
		snprintf(buf, len, " line=%u", line);
}

static void fields(const tt_trace_t *t, const weft_event_t *e, char *buf,
		   size_t len)
{
	unsigned long long a1 = e->a1;
	unsigned a2 = e->a2;
	char nm[336];

	switch (e->kind) {
	case WEFT_EV_POLL: {
		/* Clones of its own waker in the poll (no waker-clone each). */
		unsigned cl = (a2 >> WEFT_POLL_CLONES_SHIFT) &
			      WEFT_POLL_CLONES_MAX;
		char c[24] = "", at[320] = "";

		if (cl)
			snprintf(c, sizeof(c), " clones=%u", cl);
		/* Where it parks now (a PARKED_AT's, folded in). */
		if (a2 >> WEFT_POLL_SITE_SHIFT)
			await_text(t, e, a2 >> WEFT_POLL_SITE_SHIFT, at,
				   sizeof(at));
		snprintf(buf, len, "dur=%lluns %s%s%s%s", a1,
			 a2 & WEFT_POLL_READY ? "ready" : "pending",
			 a2 & WEFT_POLL_YIELDED ? " yielded" : "", c, at);
		break;
	}
	case WEFT_EV_WAKE: {
		unsigned src = a2 & 0xff;

		snprintf(buf, len, "by=%llu source=%s%s", a1,
			 src < sizeof(wake_sources) / sizeof(*wake_sources) ?
				 wake_sources[src] :
				 "?",
			 a2 & WEFT_WAKE_BY_VAL ? " by-value" : "");
		break;
	}
	case WEFT_EV_SCHEDULE:
		snprintf(buf, len, "where=%s",
			 a2 < sizeof(sched_wheres) / sizeof(*sched_wheres) ?
				 sched_wheres[a2] :
				 "?");
		break;
	case WEFT_EV_SPAWN:
		/* a2: the kind, and above it the site (0: none, a trace from
		 * before sites; SPAWN_INFO and SPAWN_LOC follow). */
		if (a2 >> WEFT_SPAWN_SITE_SHIFT)
			snprintf(buf, len, "parent=%llu kind=%s site=%u", a1,
				 a2 & WEFT_SPAWN_KIND_MASK ? "fiber" : "future",
				 a2 >> WEFT_SPAWN_SITE_SHIFT);
		else
			snprintf(buf, len, "parent=%llu kind=%s", a1,
				 a2 & WEFT_SPAWN_KIND_MASK ? "fiber" :
							     "future");
		break;
	case WEFT_EV_SITE:
		/* Its task field is the site's id; a1 a string's address in
		 * the process: the name is in its tasks' records. */
		snprintf(buf, len, "site=%llu size=%u",
			 (unsigned long long)e->task, a2);
		break;
	case WEFT_EV_SITE_LOC:
		snprintf(buf, len, "site=%llu line=%u",
			 (unsigned long long)e->task, a2);
		break;
	case WEFT_EV_AWAIT_SITE:
		/* Its task field is the site's id; a1 the file's address in
		 * the process: the file is in its tasks' records. */
		snprintf(buf, len, "site=%llu line=%u",
			 (unsigned long long)e->task, a2);
		break;
	case WEFT_EV_STEAL:
		snprintf(buf, len, "victim=%llu count=%u", a1, a2);
		break;
	case WEFT_EV_COMPLETE:
		/* a2 is the task's status, an int: -ECANCELED when cancelled. */
		snprintf(buf, len, "status=%d%s", (int32_t)a2,
			 (int32_t)a2 == -ECANCELED ? " cancelled" : "");
		break;
	case WEFT_EV_BLOCKING_END:
		snprintf(buf, len, "dur=%lluns", a1);
		break;
	case WEFT_EV_PARKED_AT: {
		/*
		 * a1 is the file's address in the process: the name comes
		 * from the task's records (the update after the event says
		 * where it is parked); the line alone when they do not.
		 */
		const tt_task_t *k = tt_task(t, e->task);

		if (!a1)
			snprintf(buf, len, "site=unknown");
		else if (k && k->parked_file && k->parked_line == a2)
			snprintf(buf, len, "at=%s:%u", k->parked_file, a2);
		else
			snprintf(buf, len, "line=%u", a2);
		break;
	}
	case WEFT_EV_RES_NEW:
		snprintf(buf, len, "res=%llu kind=%s%s", a1,
			 weft_resource_kind_name(a2), res_name(t, a1, nm, sizeof(nm)));
		break;
	case WEFT_EV_RES_NAME: {
		/*
		 * Its task field is the resource's id; a1 is a string's
		 * address in the process: the name or file comes from the
		 * resource's records, when they have it.
		 */
		uint64_t id = e->task;

		if (a2)
			snprintf(buf, len, "res=%llu line=%u%s",
				 (unsigned long long)id, a2,
				 res_name(t, id, nm, sizeof(nm)));
		else
			snprintf(buf, len, "res=%llu named%s",
				 (unsigned long long)id,
				 res_name(t, id, nm, sizeof(nm)));
		break;
	}
	case WEFT_EV_RES_SITE:
		snprintf(buf, len, "line=%u", a2);
		break;
	case WEFT_EV_RES_LABEL:
		snprintf(buf, len, "labelled");
		break;
	case WEFT_EV_RES_WAIT:
		snprintf(buf, len, "res=%llu op=%s%s", a1,
			 weft_resource_op_name(a2),
			 res_name(t, a1, nm, sizeof(nm)));
		break;
	case WEFT_EV_RES_WAIT_END:
		snprintf(buf, len, "res=%llu op=%s%s%s%s%s", a1,
			 weft_resource_op_name(a2),
			 a2 & WEFT_RES_CANCELLED ? " cancelled" : "",
			 a2 & WEFT_RES_CLOSED ? " closed" : "",
			 a2 & WEFT_RES_ACQUIRED ? " acquired" : "",
			 res_name(t, a1, nm, sizeof(nm)));
		break;
	case WEFT_EV_RES_ACQUIRE:
	case WEFT_EV_RES_RELEASE:
		snprintf(buf, len, "res=%llu count=%u%s", a1, a2,
			 res_name(t, a1, nm, sizeof(nm)));
		break;
	case WEFT_EV_RES_OWNER:
	case WEFT_EV_RES_DROP:
		snprintf(buf, len, "res=%llu%s", a1,
			 res_name(t, a1, nm, sizeof(nm)));
		break;
	case WEFT_EV_LOCK_ACQUIRE:
		snprintf(buf, len, "a1=%#llx waited_us=%u", a1, a2);
		break;
	case WEFT_EV_LOCK_RELEASE:
	case WEFT_EV_LOCK_HELD_PENDING:
		snprintf(buf, len, "a1=%#llx ns=%u", a1, a2);
		break;
	default:
		if (a1 || a2)
			snprintf(buf, len, "a1=%llu a2=%u", a1, a2);
		else
			buf[0] = '\0';
		break;
	}
}

int tt_verb_dump(int argc, char **argv)
{
	const char *path = NULL;
	bool abs_time = false;
	weft_event_t ev;
	tt_trace_t t;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--abs")) {
			abs_time = true;
			continue;
		}
		if (argv[i][0] == '-' || path)
			tt_die("dump: unexpected argument '%s'", argv[i]);
		path = argv[i];
	}
	if (!path)
		tt_die("dump: no FILE (weft-trace dump --help)");
	tt_open(&t, path, false);
	t.prefetch_tasks = true; /* each event's task name */
	while (tt_next(&t, &ev)) {
		const weft_event_t *e = &ev;
		char w[16], task[96], f[512], name[64];

		if (e->worker == WEFT_EVENT_NO_WORKER)
			snprintf(w, sizeof(w), "-");
		else
			snprintf(w, sizeof(w), "%u", e->worker);
		/* RES_NAME's task field is its resource's id, SITE's and
		 * SITE_LOC's a spawn site's, AWAIT_SITE's an await site's. */
		if (weft_event_task(e))
			snprintf(task, sizeof(task), "%llu(%s)",
				 (unsigned long long)e->task,
				 tt_task_label(&t, e->task, name,
					       sizeof(name)));
		else
			snprintf(task, sizeof(task), "-");
		if (e->kind == WEFT_EV_AWAIT_SITE)
			await_note(e);
		fields(&t, e, f, sizeof(f));
		if (abs_time)
			printf("%llu", (unsigned long long)e->ts);
		else
			printf("%.9f", (double)(int64_t)(e->ts - t.first_ts) / 1e9);
		printf(" %s %s %s%s%s\n", w, weft_event_kind_name(e->kind),
		       task, f[0] ? " " : "", f);
	}
	free(await_lines);
	await_lines = NULL;
	nawait_lines = 0;
	if (fflush(stdout) || ferror(stdout)) {
		tt_free(&t);
		return 1;
	}
	tt_free(&t);
	return 0;
}
