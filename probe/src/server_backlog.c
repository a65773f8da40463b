/* SPDX-License-Identifier: MIT */
/*
 * A streamed full update's backlog (server_stream.c's top comment has
 * the model): the ids a full pass left out of its first record, sorted,
 * and their records made over the next passes at the stream's clients'
 * pace, or stopped when none of them takes it any more (the server
 * thread says so under qlock: stream_have() in server_stream.c).
 * Collector thread, probe.lock held, but for
 * weft__server_backlog_free() on a context no longer subscribed.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "collector.h"
#include "server_state_internal.h"

/* ------------------------------------------------- streamed full updates */

void weft__server_backlog_free(struct stream *st)
{
	free(st->backlog);
	free(st->fin_ns);
	st->backlog = st->fin_ns = NULL;
	st->nbacklog = st->nfin = st->backlog_at = 0;
	atomic_store_explicit(&st->backlog_busy, false, memory_order_relaxed);
}

/* Collector: whether @st's clients all left (plan_fits()); its backlog
 * freed then.  Relaxed: a hint never taken back; a pass that misses it
 * makes records the delivery frees (no client is mapped to it). */
bool weft__server_stream_gone(struct stream *st)
{
	if (!atomic_load_explicit(&st->gone, memory_order_relaxed))
		return false;
	if (st->backlog)
		weft__server_backlog_free(st);
	return true;
}

/*
 * @a ascending, in place (@tmp as long), @pay (if not NULL; @ptmp as
 * long) moved along: an LSD radix sort by 16 bits,
 * a pass skipped when every id has the same digit (ids are dense and
 * small: two passes for a million), linear where a comparison sort is
 * n log n in the collector's pass.  With the page's lookups, 70-117 ms
 * for 1,000,000 ids on the loaded 2-vCPU guest.  Returns false without
 * memory.
 */
static bool ids_sort(uint64_t *a, uint64_t *tmp, uint64_t *pay, uint64_t *ptmp,
		     size_t n)
{
	size_t *count = malloc(65536 * sizeof(*count));

	if (!count)
		return false;
	for (unsigned shift = 0; shift < 64; shift += 16) {
		size_t sum = 0;
		bool one = true;

		memset(count, 0, 65536 * sizeof(*count));
		for (size_t i = 0; i < n; i++)
			count[(a[i] >> shift) & 0xffff]++;
		for (size_t d = 0; d < 65536 && one; d++)
			one = !count[d] || count[d] == n;
		if (one)
			continue;
		for (size_t d = 0; d < 65536; d++) {
			size_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++) {
			size_t at = count[(a[i] >> shift) & 0xffff]++;

			tmp[at] = a[i];
			if (pay)
				ptmp[at] = pay[i];
		}
		memcpy(a, tmp, n * sizeof(*a));
		if (pay)
			memcpy(pay, ptmp, n * sizeof(*pay));
	}
	free(count);
	return true;
}

/*
 * A full pass for @st, streamed: the ids of its tasks, the finished and
 * the live ones each sorted; the STREAM_FIRST of lowest id in the full
 * record will carry (*@page, as many as *@npage), the others kept as
 * the backlog, finished first (see the top of the file).  Returns false
 * (nothing kept) without memory: the update then goes whole.
 */
bool weft__server_stream_start(struct stream *st, const weft_probe_update_t *u,
			       const weft_probe_task_t ***page, size_t *npage)
{
	uint64_t *ids, *tmp, *fin_ns = NULL, *ptmp = NULL, *live, *fin;
	size_t n = u->ntasks, nfin = 0, nlive, li = 0, fi = 0, k = 0, left;

	weft__server_backlog_free(st);
	if (!st->chunk) {
		st->chunk = malloc(STREAM_CHUNK * sizeof(*st->chunk));
		if (!st->chunk)
			return false;
	}
	if (!st->chunk_end) {
		st->chunk_end = malloc(STREAM_CHUNK * sizeof(*st->chunk_end));
		if (!st->chunk_end)
			return false;
	}
	for (size_t i = 0; i < n; i++)
		nfin += u->tasks[i]->finished_ns != 0;
	nlive = n - nfin;
	ids = malloc(n * sizeof(*ids));
	tmp = malloc(n * sizeof(*tmp));
	if (nfin) {
		fin_ns = malloc(nfin * sizeof(*fin_ns));
		ptmp = malloc(nfin * sizeof(*ptmp));
	}
	if (!ids || !tmp || (nfin && (!fin_ns || !ptmp)))
		goto out_free;
	live = ids;
	fin = ids + nlive;
	for (size_t i = 0; i < n; i++) {
		const weft_probe_task_t *t = u->tasks[i];

		if (t->finished_ns) {
			fin_ns[fi] = t->finished_ns;
			fin[fi++] = t->id;
		} else {
			live[li++] = t->id;
		}
	}
	if (!ids_sort(live, tmp, NULL, NULL, nlive) ||
	    !ids_sort(fin, tmp, fin_ns, ptmp, nfin))
		goto out_free;
	free(ptmp);
	/*
	 * The first page: the lowest ids of both, records of this pass
	 * looked up by id.  Exactly the ids taken are left out of the
	 * backlog: one that finds no record (none should: a task retired
	 * in this pass is freed only after it) lets the page take the
	 * next, which is then not sent twice.
	 */
	li = fi = 0;
	while (k < STREAM_FIRST && (li < nlive || fi < nfin)) {
		const weft_probe_task_t *t;

		if (fi == nfin || (li < nlive && live[li] < fin[fi]))
			t = weft__server_lookup(live[li++]);
		else
			t = weft__server_lookup(fin[fi++]);
		if (t)
			st->chunk[k++] = t;
	}
	*page = st->chunk;
	*npage = k;
	/* The backlog, in @tmp: the finished left, then the live left. */
	left = nfin - fi;
	memcpy(tmp, fin + fi, left * sizeof(*tmp));
	memcpy(tmp + left, live + li, (nlive - li) * sizeof(*tmp));
	if (left) {
		memmove(fin_ns, fin_ns + fi, left * sizeof(*fin_ns));
	} else {
		free(fin_ns);
		fin_ns = NULL;
	}
	free(ids);
	st->backlog = tmp;
	st->fin_ns = fin_ns;
	st->nfin = left;
	st->nbacklog = left + nlive - li;
	st->backlog_at = 0;
	atomic_store_explicit(&st->backlog_busy, true, memory_order_relaxed);
	return true;

out_free:
	free(ids);
	free(tmp);
	free(fin_ns);
	free(ptmp);
	return false;
}

/*
 * Slot @i of @st's tombstones, for task @id, forgotten since the full
 * pass, where it had finished at @finished_ns: what a reader needs to
 * take it for finished (a record with a name it already has keeps it).
 * NULL without memory.
 */
static const weft_probe_task_t *tombstone(struct stream *st, size_t i,
					  uint64_t id, uint64_t finished_ns)
{
	weft_probe_task_t *t;

	if (!st->tomb) {
		st->tomb = malloc(STREAM_CHUNK * sizeof(*st->tomb));
		if (!st->tomb)
			return NULL;
	}
	t = &st->tomb[i];
	memset(t, 0, sizeof(*t));
	t->id = id;
	t->state = WEFT_TASK_DONE;
	t->finished_ns = finished_ns;
	return t;
}

/* Under qlock: whether a client of @x's stream @k is owed a full
 * update, as the server thread last said (stream_have()); a context no
 * longer active is asked nothing (true: as before it was said). */
bool weft__server_owed(const struct sub_ctx *x, unsigned k)
{
	return x->srv->active != x || x->srv->owed[k];
}

/*
 * @x's stream @k's backlog is over (sent, or stopped as nobody's): a
 * resync put off while it ran (resync_take()) goes on now, if a client
 * of the stream is still owed a full update; else it is nobody's
 * (cleared).
 */
static void backlog_end(struct sub_ctx *x, unsigned k)
{
	struct stream *st = &x->st[k];
	weft_server_t *s = x->srv;
	bool want;

	weft__server_backlog_free(st);
	pthread_mutex_lock(&s->qlock);
	if (!weft__server_owed(x, k))
		st->resync_want = false;
	want = st->resync_want;
	pthread_mutex_unlock(&s->qlock);
	if (want && weft__sub_current())
		weft__sub_want_full(weft__sub_current());
}

/*
 * More of @x's stream @k's backlog, as far as its pace allows (see the
 * top of the file): records of at most STREAM_CHUNK tasks, each task as the
 * collector knows it now.  Collector thread, probe.lock held.
 */
void weft__server_backlog_pump(struct sub_ctx *x, unsigned k)
{
	struct stream *st = &x->st[k];
	weft_server_t *s = x->srv;
	size_t room, limit = s->buf_max / 2;
	uint64_t made = 0;
	bool nobody = false;

	if (!st->backlog)
		return;
	pthread_mutex_lock(&s->qlock);
	if (s->active != x) {
		room = 0;
	} else {
		size_t held = s->stream_have[k] + s->qbytes;

		room = held < limit ? limit - held : 0;
		/*
		 * No client takes it, nor will (the server thread's answer
		 * for this gen: stream_have() has the argument): stopped.  A
		 * client that took its full record after all is told by the
		 * next delivery (bl_stopped); one stop at a time is told,
		 * so the next waits until it was.
		 */
		nobody = s->bl_keep_gen[k] == st->backlog_gen &&
			 !s->bl_keep[k] && !s->bl_stopped[k];
		if (nobody) {
			s->bl_stopped[k] = true;
			s->bl_stopped_gen[k] = st->backlog_gen;
			s->backlogs_stopped++;
		}
	}
	pthread_mutex_unlock(&s->qlock);
	if (nobody) {
		backlog_end(x, k);
		return;
	}
	if (room > STREAM_PASS_MAX)
		room = STREAM_PASS_MAX;
	while (room && st->backlog_at < st->nbacklog) {
		weft_probe_update_t cu = { .tasks = st->chunk };
		size_t at = st->backlog_at, ntomb = 0, most = STREAM_CHUNK;
		struct item *it;
		int err;

		/*
		 * No more tasks than the room takes: a record of 2,048
		 * finished tasks is 600 KB and more (histograms), which a
		 * client with a small bound skipped whole, and then took a
		 * full update again, for ever.  As many as the last record's
		 * bytes a task say (at least STREAM_MIN_CHUNK), and fewer
		 * when the record made is over the room after all (finished
		 * tasks after live ones weigh four times as much): halved
		 * and made again, down to one task.
		 */
		if (st->task_bytes && room / st->task_bytes < most)
			most = room / st->task_bytes > STREAM_MIN_CHUNK ?
				       room / st->task_bytes :
				       STREAM_MIN_CHUNK;
		while (cu.ntasks < most && at < st->nbacklog) {
			uint64_t id = st->backlog[at];
			const weft_probe_task_t *t = weft__server_lookup(id);

			/* Forgotten: finished at the full pass, a tombstone;
			 * live then, its delta told (top of the file). */
			if (!t && at < st->nfin) {
				t = tombstone(st, ntomb++, id, st->fin_ns[at]);
				if (!t)
					goto out_count; /* again next pass */
			}
			at++;
			if (t) {
				st->chunk_end[cu.ntasks] = at;
				st->chunk[cu.ntasks++] = t;
			}
		}
		if (!cu.ntasks) {
			st->backlog_at = at;
			continue;
		}
		it = calloc(1, sizeof(*it));
		if (!it)
			goto out_count; /* again next pass */
		it->kind = ITEM_UPDATE;
		it->stream = k;
		it->gen = st->backlog_gen;
		for (;;) {
			err = weft_wire_update_append_split(
				&it->buf, &cu, 0, st->delta.max_record);
			if (err || it->buf.len <= room || cu.ntasks == 1)
				break;
			it->buf.len = 0;
			cu.ntasks /= 2;
			at = st->chunk_end[cu.ntasks - 1];
		}
		if (err == -ENOMEM) {
			weft__server_item_free(it);
			goto out_count; /* again next pass */
		}
		st->backlog_at = at;
		if (err) {
			/* A task too big for a record alone: its delta, or
			 * the next full update, tells. */
			weft__server_item_free(it);
			continue;
		}
		room = it->buf.len < room ? room - it->buf.len : 0;
		st->task_bytes = it->buf.len / cu.ntasks + 1;
		made += weft__server_push(x, it);
	}
	if (st->backlog_at >= st->nbacklog)
		backlog_end(x, k);
out_count:
	if (made) {
		pthread_mutex_lock(&s->qlock);
		s->backlog_records += made;
		pthread_mutex_unlock(&s->qlock);
	}
}
