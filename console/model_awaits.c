/* SPDX-License-Identifier: MIT */
/*
 * Await sites (AWAIT_SITE events): their lines by id, for the POLLs that
 * name the site their task parks at (WEFT_POLL_SITE_SHIFT) in the task
 * detail's events.  Only the line: the file is an address in the process
 * (the task's record names it).
 *
 * One table for the console, not one a model: a site's id means the same
 * await for as long as its process runs (ids are never reused), so the
 * table is right for every model of that process, the clones a replay
 * keeps and the checkpoints it restores (which a table in the model would
 * have to copy and save, and which, restored after the file's
 * announcements, would know none).  It is the process's, tagged with the
 * hello's pid and start: a model of another process (a console attached
 * again to a restarted one) starts it again, and never reads the other's.
 * The console is one thread: no lock.  The same sites come in Updates
 * too (weft/wire.h: WEFT_WIRE_AWAIT_SITE_BASE), kept in the model's
 * sites: con_awaits_line() reads those for a site the events did not
 * announce to this console.
 */
#include <stdlib.h>
#include <string.h>

#include "console.h"

/* No runtime numbers more await sites (weft/wire.h): a bound on what a
 * damaged or hostile stream makes it hold. */
#define AWAITS_MAX (WEFT_WIRE_AWAIT_SITE_MAX + 1)

static struct {
	uint32_t pid;
	uint64_t start_ns;
	uint32_t *lines; /* by id, 0: not met */
	size_t n;
} awaits;

static bool ours(const con_model_t *m)
{
	return awaits.pid == m->pid && awaits.start_ns == m->start_ns;
}

void con_awaits_note(con_model_t *m, const weft_event_t *e)
{
	size_t n;

	if (e->task == 0 || e->task >= AWAITS_MAX)
		return;
	if (!ours(m)) {
		free(awaits.lines);
		awaits.lines = NULL;
		awaits.n = 0;
		awaits.pid = m->pid;
		awaits.start_ns = m->start_ns;
	}
	if (e->task >= awaits.n) {
		n = awaits.n ? awaits.n : 64;
		while (n <= e->task)
			n *= 2;
		awaits.lines = con_xreallocarray(awaits.lines, n,
						 sizeof(*awaits.lines));
		memset(awaits.lines + awaits.n, 0,
		       (n - awaits.n) * sizeof(*awaits.lines));
		awaits.n = n;
	}
	awaits.lines[e->task] = e->a2;
}

uint32_t con_awaits_line(const con_model_t *m, uint32_t id)
{
	const weft_wire_site_t *s;

	if (ours(m) && id < awaits.n && awaits.lines[id])
		return awaits.lines[id];
	/* Not announced to this console (it came late, the event was
	 * dropped, a checkpoint restored after it): the Updates' table,
	 * which the model keeps, copies and saves as its spawn sites. */
	s = weft_wire_sites_await(&m->sites, id);
	return s ? s->line : 0;
}
