/* SPDX-License-Identifier: MIT */
/*
 * The model's spawn sites (con_model_t.sites: every Update's sites, kept
 * for the records that name a site instead of carrying its name, file,
 * line and state_size): copied with a model (con_model_clone()) and
 * saved with it (model_save.c: a checkpoint restored mid-trace must name
 * the tasks of sites announced before it).  Saved as the Update message
 * that would carry them, so the bytes' checks are protobuf-c's.  The
 * await sites an Update carries too (weft/wire.h:
 * WEFT_WIRE_AWAIT_SITE_BASE), for the POLLs that name where a task parks:
 * a checkpoint restored after their announcements knows them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"

/*
 * As weft_wire_sites_resolve() names a record, without copying the record
 * (300 bytes a task, issue 21: 3% of a live console's time at 60,000
 * tasks a second): the four values it would change, read out.
 */
void con_sites_name(con_model_t *m, const Weft__V1__Task *x,
		    con_task_names_t *out)
{
	const weft_wire_site_t *e;

	out->name = x->name;
	out->file = x->file;
	out->line = x->line;
	out->state_size = x->state_size;
	out->from_site = false;
	if (!x->site || (x->name && x->name[0]) || (x->file && x->file[0]))
		return;
	e = weft_wire_sites_get(&m->sites, x->site);
	if (!e) {
		m->sites.unknown++;
		return;
	}
	out->name = e->name;
	out->file = e->file;
	out->line = e->line;
	out->state_size = e->state_size;
	out->from_site = true;
}

/* Entry @i of @s's spawn sites, then of its await sites (NULL: past). */
static const weft_wire_site_t *nth(const weft_wire_sites_t *s, size_t i)
{
	if (i < s->cap)
		return &s->v[i];
	i -= s->cap;
	return i < s->await_cap ? &s->await[i] : NULL;
}

void con_sites_copy(weft_wire_sites_t *dst, const weft_wire_sites_t *src)
{
	const weft_wire_site_t *e;

	con_sites_changed();
	memset(dst, 0, sizeof(*dst));
	for (size_t i = 0; (e = nth(src, i)); i++) {
		Weft__V1__Site m = WEFT__V1__SITE__INIT;

		if (!e->file)
			continue;
		m.id = e->id;
		m.line = e->line;
		m.state_size = e->state_size;
		m.name = (char *)e->name;
		m.file = (char *)e->file;
		if (weft_wire_sites_add(dst, &m) == -ENOMEM)
			con_die("out of memory");
	}
	dst->unknown = src->unknown;
}

uint8_t *con_sites_save(const weft_wire_sites_t *s, size_t *len)
{
	Weft__V1__Update u = WEFT__V1__UPDATE__INIT;
	size_t k = s->cap + s->await_cap;
	Weft__V1__Site *v = con_xcalloc(k + 1, sizeof(*v));
	Weft__V1__Site **pv = con_xcalloc(k + 1, sizeof(*pv));
	const weft_wire_site_t *e;
	uint8_t *out;

	for (size_t i = 0; (e = nth(s, i)); i++) {
		Weft__V1__Site *m = &v[u.n_sites];

		if (!e->file)
			continue;
		weft__v1__site__init(m);
		m->id = e->id;
		m->line = e->line;
		m->state_size = e->state_size;
		m->name = (char *)e->name;
		m->file = (char *)e->file;
		pv[u.n_sites++] = m;
	}
	u.sites = pv;
	*len = weft__v1__update__get_packed_size(&u);
	out = con_xmalloc(*len + 1);
	weft__v1__update__pack(&u, out);
	free(v);
	free(pv);
	return out;
}

bool con_sites_load(weft_wire_sites_t *s, const uint8_t *p, size_t len)
{
	Weft__V1__Update *u = weft__v1__update__unpack(NULL, len, p);
	bool ok;

	con_sites_changed();
	ok = u && weft_wire_sites_add_update(s, u) == 0;

	if (u)
		weft__v1__update__free_unpacked(u, NULL);
	return ok;
}
