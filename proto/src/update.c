/* SPDX-License-Identifier: MIT */
/*
 * Update records: a collector pass's model (stats, tasks, workers,
 * warnings, resources), encoded by hand and split into several records
 * when too large (weft/wire.h has the model); update_parts.c has the
 * resources, workers, warnings and stats, update_site.c the sites and the
 * recount for one subscriber.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "update_private.h"

/* ------------------------------------------------------------ updates */

/*
 * Update records are encoded by hand, from the probe's own structures:
 * protobuf-c's packer walks the descriptors field by field, sizes the whole
 * message once (get_packed_size) and then every submessage again at each
 * level it nests at (an Update's Task's Histogram thrice), and needed the
 * task copied into its message first.  With a task per request in every
 * update of every stream, protobuf-c (these and the event batches) was
 * half the collector's time (perf).
 *
 * The bytes are the ones protobuf-c 1.4 writes for the same message (the
 * decoders stay protobuf-c's, and a file stays the same file): fields in
 * number order, proto3 zeros, empty strings and empty lists left out,
 * repeated scalars packed, a submessage written whenever it is set, even
 * empty.  test_wire packs varied updates both ways and compares the bytes.
 *
 * Sizes come first, once per task: a length-delimited field needs its
 * length before its bytes.  They are kept in a per-thread scratch array
 * from one update to the next (calloc'ed and freed per Update, the message
 * arrays of before were megabytes faulted in again each time).
 */

/* Task */

static size_t task_wait_len(const weft_probe_task_wait_t *w)
{
	return uint_len(1, w->res) + uint_len(2, w->total_ns) +
	       uint_len(3, w->waits);
}

static size_t task_len(const weft_probe_task_t *t, struct task_size *s)
{
	size_t n;

	s->name = s->strip ? 0 : cstr_len(t->name);
	s->file = s->strip ? 0 : cstr_len(t->file);
	s->parked = cstr_len(t->parked_file);
	n = uint_len(1, t->id) + uint_len(2, t->parent) + str_len(3, s->name) +
	    str_len(4, s->file) + uint_len(5, s->strip ? 0 : t->line) +
	    uint_len(6, s->strip ? 0 : t->state_size) + uint_len(7, t->kind) +
	    uint_len(8, t->state) + uint_len(9, t->last_worker) +
	    uint_len(10, zigzag32(t->status)) + uint_len(11, t->spawned_ns) +
	    uint_len(12, t->finished_ns) + uint_len(13, t->polls) +
	    uint_len(14, t->busy_ns) + uint_len(15, t->scheduled_ns) +
	    uint_len(16, t->idle_ns) + uint_len(17, t->wakes) +
	    uint_len(18, t->self_wakes) + uint_len(19, t->waker_clones) +
	    uint_len(20, t->waker_drops) + uint_len(21, t->max_poll_ns) +
	    uint_len(22, t->warnings) + uint_len(23, t->locks_held) +
	    str_len(26, s->parked) + uint_len(27, t->parked_line) +
	    uint_len(28, t->idle_since_ns) + uint_len(29, t->waiting_on) +
	    uint_len(30, t->waiting_since_ns) + uint_len(31, t->waiting_op) +
	    uint_len(33, t->site) + uint_len(34, t->spawn_unseen);
	if (t->poll_hist) {
		s->hist[0] = hist_len(t->poll_hist);
		n += sub_len(24, s->hist[0]);
	}
	if (t->sched_hist) {
		s->hist[1] = hist_len(t->sched_hist);
		n += sub_len(25, s->hist[1]);
	}
	for (unsigned i = 0; i < t->nwaited && i < WEFT_TASK_WAITED; i++) {
		s->waited[i] = task_wait_len(&t->waited[i]);
		n += sub_len(32, s->waited[i]);
	}
	return s->body = n;
}

/*
 * What put_task_body() needs of *@s but the body's size (strings,
 * histograms, waits: task_len() less the sum of the fields), and
 * returns: the most it writes (each field at most a 2-byte tag and a
 * 10-byte varint, the submessages' lengths as long).  For a body
 * written before its size is known (the memo's).
 */
static size_t task_parts(const weft_probe_task_t *t, struct task_size *s)
{
	size_t n = 34 * 12; /* 33 fields, their tags and varints */

	s->name = s->strip ? 0 : cstr_len(t->name);
	s->file = s->strip ? 0 : cstr_len(t->file);
	s->parked = cstr_len(t->parked_file);
	n += s->name + s->file + s->parked;
	if (t->poll_hist) {
		s->hist[0] = hist_len(t->poll_hist);
		n += 12 + s->hist[0];
	}
	if (t->sched_hist) {
		s->hist[1] = hist_len(t->sched_hist);
		n += 12 + s->hist[1];
	}
	for (unsigned i = 0; i < t->nwaited && i < WEFT_TASK_WAITED; i++) {
		s->waited[i] = task_wait_len(&t->waited[i]);
		n += 12 + s->waited[i];
	}
	return n;
}

/* The Task message's fields (s->body bytes). */
static uint8_t *put_task_body(uint8_t *p, const weft_probe_task_t *t,
			      const struct task_size *s)
{
	p = put_uint(p, 1, t->id);
	p = put_uint(p, 2, t->parent);
	p = put_str(p, 3, t->name, s->name);
	p = put_str(p, 4, t->file, s->file);
	p = put_uint(p, 5, s->strip ? 0 : t->line);
	p = put_uint(p, 6, s->strip ? 0 : t->state_size);
	p = put_uint(p, 7, t->kind);
	p = put_uint(p, 8, t->state);
	p = put_uint(p, 9, t->last_worker);
	p = put_uint(p, 10, zigzag32(t->status));
	p = put_uint(p, 11, t->spawned_ns);
	p = put_uint(p, 12, t->finished_ns);
	p = put_uint(p, 13, t->polls);
	p = put_uint(p, 14, t->busy_ns);
	p = put_uint(p, 15, t->scheduled_ns);
	p = put_uint(p, 16, t->idle_ns);
	p = put_uint(p, 17, t->wakes);
	p = put_uint(p, 18, t->self_wakes);
	p = put_uint(p, 19, t->waker_clones);
	p = put_uint(p, 20, t->waker_drops);
	p = put_uint(p, 21, t->max_poll_ns);
	p = put_uint(p, 22, t->warnings);
	p = put_uint(p, 23, t->locks_held);
	if (t->poll_hist) {
		p = put_sub(p, 24, s->hist[0]);
		p = put_hist(p, t->poll_hist);
	}
	if (t->sched_hist) {
		p = put_sub(p, 25, s->hist[1]);
		p = put_hist(p, t->sched_hist);
	}
	p = put_str(p, 26, t->parked_file, s->parked);
	p = put_uint(p, 27, t->parked_line);
	p = put_uint(p, 28, t->idle_since_ns);
	p = put_uint(p, 29, t->waiting_on);
	p = put_uint(p, 30, t->waiting_since_ns);
	p = put_uint(p, 31, t->waiting_op);
	for (unsigned i = 0; i < t->nwaited && i < WEFT_TASK_WAITED; i++) {
		p = put_sub(p, 32, s->waited[i]);
		p = put_uint(p, 1, t->waited[i].res);
		p = put_uint(p, 2, t->waited[i].total_ns);
		p = put_uint(p, 3, t->waited[i].waits);
	}
	p = put_uint(p, 33, t->site);
	return put_uint(p, 34, t->spawn_unseen);
}

/* Update.tasks: one task, from @m's bytes when s->memo. */
static uint8_t *put_task(uint8_t *p, const weft_probe_task_t *t,
			 const struct task_size *s,
			 const weft_wire_task_memo_t *m)
{
	p = put_sub(p, 2, s->body);
	if (s->memo) {
		memcpy(p, m->bytes + s->memo_off, s->body);
		return p + s->body;
	}
	return put_task_body(p, t, s);
}

/* The per-thread scratch: one task_size per task and per resource of the
 * update. */
struct update_scratch {
	struct task_size *sizes;
	size_t cap;
	/* An update's task bodies when no memo is shared: written once
	 * each (memo_keep(), unindexed), then copied into the record. */
	weft_wire_task_memo_t own;
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static _Thread_local struct update_scratch scratch_tls;

static void scratch_free(void *arg)
{
	struct update_scratch *s = arg;

	free(s->sizes);
	weft_wire_task_memo_fini(&s->own);
	memset(s, 0, sizeof(*s));
}

static void scratch_key_create(void)
{
	(void)pthread_key_create(&scratch_key, scratch_free);
}

/* Return: room for @n task sizes (freed when the thread exits), or NULL. */
static struct task_size *scratch_sizes(size_t n)
{
	struct update_scratch *s = &scratch_tls;

	pthread_once(&scratch_once, scratch_key_create);
	if (!pthread_getspecific(scratch_key) &&
	    pthread_setspecific(scratch_key, s))
		return NULL;
	/* Grown as needed; shrunk when far larger (a full update of every
	 * task kept, then thousands of times less each pass). */
	if (n + 1 > s->cap || (s->cap > 65536 && s->cap / 8 > n + 1)) {
		size_t cap = n + 1 + n / 2;
		struct task_size *z = realloc(s->sizes, cap * sizeof(*z));

		if (!z && n + 1 > s->cap)
			return NULL;
		if (z) {
			s->sizes = z;
			s->cap = cap;
		}
	}
	return s->sizes;
}

/*
 * The thread's own memo, emptied for an update: bodies only, no index
 * (nobody else reads them).  Its bytes given back when far more than the
 * last updates used (a burst's), as weft_wire_task_memo_begin() does.
 */
static weft_wire_task_memo_t *scratch_own(void)
{
	weft_wire_task_memo_t *m = &scratch_tls.own;

	if (m->len > m->peak)
		m->peak = m->len;
	if (m->bytes_cap > (1u << 20) && m->bytes_cap > 16 * m->peak) {
		free(m->bytes);
		m->bytes = NULL;
		m->bytes_cap = 0;
		m->peak = 0;
	}
	m->peak = m->peak / 2;
	m->len = 0;
	return m;
}

/*
 * An update being encoded: what update_part() needs besides the range.
 * A part holds a range of the update's items: its resources first
 * (items [0, nres)), then its tasks (items [nres, nres + ntasks)), so a
 * split update's first record carries the resources that fit in it.
 */
struct update_enc {
	const weft_probe_update_t *u;
	const weft_wire_task_memo_t *memo; /* where sz[i].memo bytes are */
	const struct task_size *sz;        /* per task */
	const struct task_size *rsz;       /* per resource */
	size_t base; /* stats, workers, warnings, full, sites: the first's */
	const weft_wire_site_t *sites;
	size_t nsites;
};

static size_t items_of(const struct update_enc *e)
{
	return e->u->nresources + e->u->ntasks;
}

/* Item @j's bytes in an Update (its tag and length included). */
static size_t item_len(const struct update_enc *e, size_t j)
{
	size_t nr = e->u->nresources;

	return j < nr ? sub_len(10, e->rsz[j].body) :
			sub_len(2, e->sz[j - nr].body);
}

/* The tasks [*@ti, *@tk) and resources [*@ri, *@rk) of items [@i, @k). */
static void item_ranges(const struct update_enc *e, size_t i, size_t k,
			size_t *ti, size_t *tk, size_t *ri, size_t *rk)
{
	size_t nr = e->u->nresources;

	*ri = i < nr ? i : nr;
	*rk = k < nr ? k : nr;
	*ti = i > nr ? i - nr : 0;
	*tk = k > nr ? k - nr : 0;
}

/* Update.new_tasks or finished_tasks over tasks [@i, @k): payload bytes. */
static size_t ids_len(const struct update_enc *e, size_t i, size_t k,
		      bool finished)
{
	size_t n = 0;

	for (; i < k; i++)
		if (finished ? e->sz[i].is_finished : e->sz[i].is_new)
			n += varint_len(e->u->tasks[i]->id);
	return n;
}

/* Writes what ids_len() sized (@n payload bytes). */
static uint8_t *put_ids(uint8_t *p, const struct update_enc *e, size_t i,
			size_t k, bool finished, size_t n)
{
	if (!n)
		return p;
	p = put_sub(p, finished ? 7 : 6, n);
	for (; i < k; i++)
		if (finished ? e->sz[i].is_finished : e->sz[i].is_new)
			p = put_varint(p, e->u->tasks[i]->id);
	return p;
}

/*
 * Appends one Update record holding items [@i, @k) (and, when @first,
 * the stats, workers, warnings and full flag).  Fields in number order,
 * as protobuf-c writes them: the resources (10) after the ids (6, 7).
 * Return: 0; -ENOMEM; -EMSGSIZE (the Frame would exceed @max); @b
 * unchanged on error.
 */
static int update_part(weft_wire_buf_t *b, const struct update_enc *e, size_t i,
		       size_t k, bool first, size_t max)
{
	const weft_probe_update_t *u = e->u;
	size_t ti, tk, ri, rk, nnew, nfin;
	size_t ulen = first ? e->base : 0, flen;
	uint8_t *p, *start;
	int err;

	item_ranges(e, i, k, &ti, &tk, &ri, &rk);
	nnew = ids_len(e, ti, tk, false);
	nfin = ids_len(e, ti, tk, true);
	for (size_t j = i; j < k; j++)
		ulen += item_len(e, j);
	if (nnew)
		ulen += sub_len(6, nnew);
	if (nfin)
		ulen += sub_len(7, nfin);
	flen = sub_len(4, ulen); /* Frame.update */
	if (flen > max)
		return -EMSGSIZE;
	err = weft_wire_buf_reserve(b, 1 + varint_len(flen) + flen);
	if (err)
		return err;
	p = start = b->data + b->len;
	*p++ = WEFT_WIRE_RECORD_TAG;
	p = put_varint(p, flen);
	p = put_sub(p, 4, ulen);
	if (first && u->stats)
		p = weft__upd_put_stats(p, u->stats);
	for (size_t j = ti; j < tk; j++)
		p = put_task(p, u->tasks[j], &e->sz[j], e->memo);
	if (first) {
		for (size_t j = 0; j < u->nworkers; j++)
			p = weft__upd_put_worker(p, &u->workers[j]);
		for (size_t j = 0; j < u->nwarnings; j++)
			p = weft__upd_put_warning(p, &u->warnings[j]);
		p = put_uint(p, 5, u->full);
	}
	p = put_ids(p, e, ti, tk, false, nnew);
	p = put_ids(p, e, ti, tk, true, nfin);
	for (size_t j = ri; j < rk; j++)
		p = weft__upd_put_resource(p, u->resources[j], &e->rsz[j]);
	for (size_t j = 0; first && j < e->nsites; j++)
		p = weft__wire_site_put(p, &e->sites[j]);
	check_written("Update", start, p, 1 + varint_len(flen) + flen);
	b->len += (size_t)(p - start);
	return 0;
}

/* Room kept free in each part for weft_wire_update_recount()'s two
 * varint fields and the frame's own tag and length. */
#define PART_SLACK 64u

/*
 * Splits an update (whose resources and tasks make it larger than
 * @max_record) into several records: the first carries everything but
 * the items that do not fit (full stays as it was), resources first;
 * the others only more items, with full unset.
 */
static int update_split(weft_wire_buf_t *b, const struct update_enc *e,
			size_t max_record)
{
	size_t nt = items_of(e), nr = e->u->nresources, start = b->len, i = 0;
	bool first = true;
	int err = 0;

	if (max_record <= 2 * PART_SLACK)
		return -EMSGSIZE;
	while (!err && (first || i < nt)) {
		size_t used = (first ? e->base : 0) + PART_SLACK, k = i;

		while (k < nt) {
			size_t cost = item_len(e, k);

			/* A task's id in new_tasks / finished_tasks, if any. */
			if (k >= nr && e->sz[k - nr].is_new)
				cost += 11;
			if (k >= nr && e->sz[k - nr].is_finished)
				cost += 11;
			if (used + cost > max_record)
				break;
			used += cost;
			k++;
		}
		if (k == i && !first) {
			err = -EMSGSIZE; /* one item alone is too big */
			break;
		}
		if (first && e->base + PART_SLACK > max_record) {
			err = -EMSGSIZE; /* too big without any item */
			break;
		}
		err = update_part(b, e, i, k, first, max_record);
		i = k;
		first = false;
	}
	if (err)
		b->len = start;
	return err;
}

/*
 * weft_wire_update_append() - one collector pass as an Update record.
 * @prev_now_ns: the previous update's time: tasks spawned after it are
 * listed as new (0: none are).
 *
 * Return: 0; -ENOMEM; -EMSGSIZE (@b unchanged on error).
 */
int weft_wire_update_append(weft_wire_buf_t *b, const weft_probe_update_t *u,
			     uint64_t prev_now_ns)
{
	return weft_wire_update_append_split(b, u, prev_now_ns, 0);
}

/* Whether @u's warnings take at most half a record (the rest beside). */
static bool sz_fits_warnings(const weft_probe_update_t *u, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < u->nwarnings; i++)
		n += sub_len(4, weft__upd_warning_len(&u->warnings[i]));
	return n <= max / 2;
}

/*
 * An update whose warnings would not fit beside the rest (a subscriber's
 * history: up to 1,024 of them, against a client's small record cap):
 * the warnings first, in records of their own holding as many as take
 * half a record, then the update without them.  A reader applies them in
 * order, as one update.  Return as weft_wire_update_append_split(); @b
 * unchanged on error.
 */
static int update_append(weft_wire_buf_t *b, const weft_probe_update_t *u,
			 uint64_t prev_now_ns, size_t max_record,
			 weft_wire_task_memo_t *m, const weft_wire_site_t *st,
			 ptrdiff_t nst);

static int warnings_first(weft_wire_buf_t *b, const weft_probe_update_t *u,
			  uint64_t prev_now_ns, size_t max,
			  weft_wire_task_memo_t *m, const weft_wire_site_t *st,
			  ptrdiff_t nst)
{
	weft_probe_update_t rest = *u;
	size_t len0 = b->len, i = 0;
	int err = 0;

	while (!err && i < u->nwarnings) {
		weft_probe_update_t w = { .warnings = &u->warnings[i] };
		size_t n = 0;

		while (i + w.nwarnings < u->nwarnings &&
		       (w.nwarnings == 0 ||
			n + sub_len(4,
				    weft__upd_warning_len(
					    &u->warnings[i + w.nwarnings])) <=
				max / 2)) {
			n += sub_len(4, weft__upd_warning_len(
						&u->warnings[i + w.nwarnings]));
			w.nwarnings++;
		}
		err = update_append(b, &w, prev_now_ns, max, m, NULL, -1);
		i += w.nwarnings;
	}
	rest.warnings = NULL;
	rest.nwarnings = 0;
	if (!err)
		err = update_append(b, &rest, prev_now_ns, max, m, st, nst);
	if (err)
		b->len = len0;
	return err;
}

/* ------------------------------------------------------------ the memo */

struct weft_wire_memo_entry {
	uint64_t epoch;  /* empty unless the memo's (begin() clears none) */
	uint64_t id;     /* a task without an id is not kept */
	uint32_t fields; /* memo_fields() */
	uint32_t len;
	size_t off; /* in bytes */
};

/* Which of the fields a thinned copy may leave out @t's record has. */
static uint32_t memo_fields(const weft_probe_task_t *t, bool strip)
{
	return (uint32_t)(!strip && t->name) |
	       (uint32_t)(!strip && t->file) << 1 |
	       (uint32_t)(!strip && t->line) << 2 |
	       (uint32_t)(t->poll_hist != NULL) << 3 |
	       (uint32_t)(t->sched_hist != NULL) << 4 |
	       (uint32_t)(!strip && t->state_size) << 5;
}

static size_t memo_hash(uint64_t id, uint32_t fields, size_t cap)
{
	return (size_t)(((id ^ (uint64_t)fields << 58) *
			 0x9E3779B97F4A7C15ull) >>
			17) &
	       (cap - 1);
}

void weft_wire_task_memo_fini(weft_wire_task_memo_t *m)
{
	free(m->slot);
	free(m->bytes);
	memset(m, 0, sizeof(*m));
}

void weft_wire_task_memo_begin(weft_wire_task_memo_t *m, uint64_t gen)
{
	if (m->gen == gen)
		return;
	m->gen = gen;
	if (m->n > m->peak)
		m->peak = m->n;
	/* After a burst, the table and the bytes back to about the last
	 * snapshots' size: every later begin would clear the burst's. */
	if (m->cap > 1024 && m->cap > 16 * m->peak) {
		free(m->slot);
		free(m->bytes);
		m->slot = NULL;
		m->bytes = NULL;
		m->cap = m->bytes_cap = 0;
		m->peak = 0;
	}
	/* Every entry empty: none is of the new epoch. */
	m->epoch++;
	m->peak = m->peak / 2; /* decays: a burst is forgotten */
	m->n = 0;
	m->len = 0;
}

static struct weft_wire_memo_entry *memo_find(const weft_wire_task_memo_t *m,
					      uint64_t id, uint32_t fields)
{
	if (!m->n)
		return NULL;
	for (size_t i = memo_hash(id, fields, m->cap);;
	     i = (i + 1) & (m->cap - 1)) {
		struct weft_wire_memo_entry *e = &m->slot[i];

		if (e->epoch != m->epoch)
			return NULL;
		if (e->id == id && e->fields == fields)
			return e;
	}
}

/* How many tasks ahead update_append() fetches memo slots. */
#define MEMO_AHEAD 4

/*
 * Fetches the slot where memo_find() and memo_keep() start for @t.
 * Always inlined: a call to it, having no effect GCC can see, was deemed
 * pure and dropped, prefetch and all.
 */
static inline __attribute__((always_inline)) void
memo_ahead(const weft_wire_task_memo_t *m, const weft_probe_task_t *t,
	   bool strip)
{
	__builtin_prefetch(
		&m->slot[memo_hash(t->id, memo_fields(t, strip), m->cap)]);
}

/* Fetches every line of task @t (out of cache in a pass of thousands). */
static inline __attribute__((always_inline)) void
task_ahead(const weft_probe_task_t *t)
{
	for (size_t o = 0; o < sizeof(*t); o += 64)
		__builtin_prefetch((const char *)t + o);
}

static bool memo_grow(weft_wire_task_memo_t *m)
{
	size_t ncap = m->cap ? 2 * m->cap : 256;
	struct weft_wire_memo_entry *ns = calloc(ncap, sizeof(*ns));

	if (!ns)
		return false;
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (m->slot[i].epoch != m->epoch)
			continue;
		for (j = memo_hash(m->slot[i].id, m->slot[i].fields, ncap);
		     ns[j].epoch == m->epoch; j = (j + 1) & (ncap - 1))
			;
		ns[j] = m->slot[i];
	}
	free(m->slot);
	m->slot = ns;
	m->cap = ncap;
	return true;
}

/*
 * Task @t's body into @m, in one sweep (its size known once written:
 * task_parts()), *@s its sizes and marked as there.  Return: false (@m
 * full, or no memory; *@s has only task_parts()'s): the caller sizes it
 * (task_len()) and encodes it in place.
 */
static bool memo_keep(weft_wire_task_memo_t *m, const weft_probe_task_t *t,
		      uint32_t fields, struct task_size *s, bool index)
{
	size_t bound = task_parts(t, s), j;
	struct weft_wire_memo_entry *e;
	uint8_t *p;

	if (m->len + bound > WEFT_WIRE_TASK_MEMO_MAX || bound > UINT32_MAX)
		return false;
	if (index && 2 * (m->n + 1) > m->cap && !memo_grow(m))
		return false;
	if (m->len + bound > m->bytes_cap) {
		size_t cap = m->bytes_cap ? 2 * m->bytes_cap : 64u << 10;
		uint8_t *x;

		while (cap < m->len + bound)
			cap *= 2;
		x = realloc(m->bytes, cap);
		if (!x)
			return false;
		m->bytes = x;
		m->bytes_cap = cap;
	}
	p = put_task_body(m->bytes + m->len, t, s);
	s->body = (size_t)(p - (m->bytes + m->len));
	if (s->body > bound) {
		/* task_parts()'s bound is broken: it wrote past it. */
		check_written("Task (memo)", m->bytes + m->len, p, bound);
	}
	if (!index) {
		/* The update's own: found by nobody, so not indexed. */
		s->memo = true;
		s->memo_off = m->len;
		m->len += s->body;
		return true;
	}
	for (j = memo_hash(t->id, fields, m->cap); m->slot[j].epoch == m->epoch;
	     j = (j + 1) & (m->cap - 1))
		;
	e = &m->slot[j];
	e->epoch = m->epoch;
	e->id = t->id;
	e->fields = fields;
	e->len = (uint32_t)s->body;
	e->off = m->len;
	m->n++;
	m->len += s->body;
	s->memo = true;
	s->memo_off = e->off;
	return true;
}

/*
 * Task @t's sizes in *@s, its bytes from @m (or kept there) if any; with
 * no @m, its bytes written once into @own (the update's: no sizing pass).
 */
static void task_sized(weft_wire_task_memo_t *m, weft_wire_task_memo_t *own,
		       const weft_probe_task_t *t, struct task_size *s)
{
	struct weft_wire_memo_entry *e;
	uint32_t fields;

	s->memo = false; /* s->strip: the caller's */
	if (!m && own && memo_keep(own, t, 0, s, false))
		return;
	if (!m || !t->id || !m->epoch) {
		/* Not begun (epoch 0: calloc'ed entries would all match). */
		task_len(t, s);
		return;
	}
	fields = memo_fields(t, s->strip);
	e = memo_find(m, t->id, fields);
	if (e) {
		s->body = e->len;
		s->memo = true;
		s->memo_off = e->off;
		return;
	}
	if (!memo_keep(m, t, fields, s, true))
		task_len(t, s);
}

/*
 * weft_wire_update_append_split() - weft_wire_update_append() that
 * splits an update larger than @max_record (0: WEFT_WIRE_MAX_RECORD)
 * into several records, appended back to back: the first carries the
 * stats, workers, warnings, the full flag and the resources and tasks
 * that fit (resources first); each of the others only more of them
 * (full unset).  A reader applies them in order, as one update.
 *
 * Return: 0; -ENOMEM; -EMSGSIZE (one task or resource alone, or
 * everything but them, exceeds @max_record); @b unchanged on error.
 */
int weft_wire_update_append_split(weft_wire_buf_t *b,
				   const weft_probe_update_t *u,
				   uint64_t prev_now_ns, size_t max_record)
{
	return update_append(b, u, prev_now_ns, max_record, NULL, NULL, -1);
}

int weft_wire_update_append_memo(weft_wire_buf_t *b,
				 const weft_probe_update_t *u,
				 uint64_t prev_now_ns, size_t max_record,
				 weft_wire_task_memo_t *m)
{
	return update_append(b, u, prev_now_ns, max_record, m, NULL, -1);
}

int weft_wire_update_append_sites(weft_wire_buf_t *b,
				  const weft_probe_update_t *u,
				  const weft_wire_site_t *sites, size_t n,
				  uint64_t prev_now_ns, size_t max_record,
				  weft_wire_task_memo_t *m)
{
	return update_append(b, u, prev_now_ns, max_record, m, sites,
			     (ptrdiff_t)n);
}

/* @nst < 0: no sites, tasks keep their strings; else @nst sites at
 * @st, and tasks that name a site go without the site's strings. */
static int update_append(weft_wire_buf_t *b, const weft_probe_update_t *u,
			 uint64_t prev_now_ns, size_t max_record,
			 weft_wire_task_memo_t *m, const weft_wire_site_t *st,
			 ptrdiff_t nst)
{
	struct update_enc e = { .u = u,
				.memo = m,
				.sites = st,
				.nsites = nst > 0 ? (size_t)nst : 0 };
	struct task_size *sz = scratch_sizes(u->ntasks + u->nresources);
	weft_wire_task_memo_t *own = NULL;
	size_t nt = u->ntasks;
	int err;

	if (!max_record || max_record > WEFT_WIRE_MAX_RECORD)
		max_record = WEFT_WIRE_MAX_RECORD;
	if (u->nwarnings > 1 && !sz_fits_warnings(u, max_record))
		return warnings_first(b, u, prev_now_ns, max_record, m, st,
				      nst);
	if (!sz)
		return -ENOMEM;
	if (!m && nt) {
		/* The bodies written once, into the thread's own memo: the
		 * sizing pass and the write cost as much as that and the
		 * copy (callgrind, spawn_many_local). */
		own = scratch_own();
		e.memo = own;
	}
	for (size_t i = 0; i < nt; i++) {
		const weft_probe_task_t *t = u->tasks[i];

		/*
		 * The memo slot of the task MEMO_AHEAD on, fetched now: the
		 * table is hashed, so each task's look at it missed the cache
		 * (perf, weft-demo /fast-task with a recorder and a console:
		 * a tenth of the collector's time on that one load); its
		 * record, fetched two steps further on (all of it: the
		 * fields read to find the slot span its lines), is read to
		 * find it.
		 */
		if (m && m->cap && i + 2 * MEMO_AHEAD < nt)
			task_ahead(u->tasks[i + 2 * MEMO_AHEAD]);
		if (m && m->cap && i + MEMO_AHEAD < nt)
			memo_ahead(m, u->tasks[i + MEMO_AHEAD],
				   nst >= 0 && u->tasks[i + MEMO_AHEAD]->site);
		sz[i].strip = nst >= 0 && t->site;
		task_sized(m, own, t, &sz[i]);
		sz[i].is_new = prev_now_ns && t->spawned_ns > prev_now_ns;
		sz[i].is_finished = t->finished_ns &&
				    t->finished_ns > prev_now_ns;
	}
	for (size_t i = 0; i < u->nresources; i++) {
		weft__upd_resource_len(u->resources[i], &sz[nt + i]);
		sz[nt + i].memo = false;
	}
	e.sz = sz;
	e.rsz = sz + nt;
	if (u->stats)
		e.base += sub_len(1, weft__upd_stats_len(u->stats));
	for (size_t i = 0; i < u->nworkers; i++)
		e.base += sub_len(3, weft__upd_worker_len(&u->workers[i]));
	for (size_t i = 0; i < u->nwarnings; i++)
		e.base += sub_len(4, weft__upd_warning_len(&u->warnings[i]));
	e.base += uint_len(5, u->full);
	for (size_t i = 0; i < e.nsites; i++)
		e.base += weft__wire_site_len(&st[i]);

	/*
	 * Whole, it keeps the parts' slack too: weft_wire_update_recount()
	 * may add to it, and readers hold every record to the cap.
	 */
	err = update_part(b, &e, 0, items_of(&e), true,
			  max_record > 2 * PART_SLACK ?
				  max_record - PART_SLACK :
				  max_record);
	if (err == -EMSGSIZE && items_of(&e))
		err = update_split(b, &e, max_record);
	return err;
}
