/* SPDX-License-Identifier: MIT */
/*
 * The spawn and await sites as the rings announce them (SITE, SITE_LOC,
 * AWAIT_SITE: collector_events.c hands them here), kept by id for the
 * SPAWNs and POLLs that name them (collector_events.c's spawn_site() and
 * poll_parked()).  Out of the per-event file: an announcement comes once
 * a site a ring and listening period.
 */
#include <stdlib.h>
#include <string.h>

#include "collector_internal.h"
#include "weft/wire.h"

void weft__collector_sites_free(struct probe *p)
{
	free(p->sites);
	p->sites = NULL;
	p->nsites = 0;
	p->sites_unknown = 0;
	free(p->awaits);
	p->awaits = NULL;
	p->nawaits = 0;
	p->awaits_known = 0;
	p->awaits_unknown = 0;
}

/*
 * AWAIT_SITE: an await site met, as its ring announced it before its
 * first POLL naming it there.  Again (another ring, a new listening
 * period): the same values, ids being never reused.  Grown as the spawn
 * sites' table is (site_slot()), to the same bound.
 */
/* Every id a ring announces is one a reader keeps (weft/wire.h). */
_Static_assert(WEFT_RING_AWAITS <= WEFT_WIRE_AWAIT_SITE_MAX,
	       "await site ids within readers' bound");

void weft__collector_on_await_site(struct probe *p, const weft_event_t *ev)
{
	size_t n = p->nawaits ? p->nawaits : 64;
	struct await_site *s;

	if (ev->task == 0 || ev->task > WEFT_RING_AWAITS || !ev->a1)
		return;
	if (ev->task >= p->nawaits) {
		while (n <= ev->task)
			n *= 2;
		s = realloc(p->awaits, n * sizeof(*s));
		if (!s)
			return;
		memset(s + p->nawaits, 0, (n - p->nawaits) * sizeof(*s));
		p->awaits = s;
		p->nawaits = n;
	}
	p->awaits_known += !p->awaits[ev->task].file;
	p->awaits[ev->task].file = (const char *)(uintptr_t)ev->a1;
	p->awaits[ev->task].line = ev->a2;
}

/* Site @id's slot, grown to it (NULL: past the bound or no memory). */
__attribute__((noinline)) static struct spawn_site *site_slot(struct probe *p,
							      uint64_t id)
{
	size_t n = p->nsites ? p->nsites : 64;
	struct spawn_site *s;

	if (id == 0 || id > WEFT_RING_SITES)
		return NULL;
	if (id < p->nsites)
		return &p->sites[id];
	while (n <= id)
		n *= 2;
	s = realloc(p->sites, n * sizeof(*s));
	if (!s)
		return NULL;
	memset(s + p->nsites, 0, (n - p->nsites) * sizeof(*s));
	p->sites = s;
	p->nsites = n;
	return &s[id];
}

/*
 * SITE or SITE_LOC: a site met, as its ring announced it before its
 * first SPAWN there.  Again (another ring, a new listening period): the
 * same values, ids being never reused.
 */
void weft__collector_on_site(struct probe *p, const weft_event_t *ev)
{
	struct spawn_site *s = site_slot(p, ev->task);

	if (!s)
		return;
	if (ev->kind == WEFT_EV_SITE) {
		s->name = (const char *)(uintptr_t)ev->a1;
		s->state_size = ev->a2;
		s->have |= SITE_HAVE_NAME;
	} else {
		s->file = (const char *)(uintptr_t)ev->a1;
		s->line = ev->a2;
		s->have |= SITE_HAVE_LOC;
	}
}
