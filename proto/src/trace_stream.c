/* SPDX-License-Identifier: MIT */
/*
 * A trace file in one pass (weft/trace_stream.h has the model): the
 * reader's frames handed on as read; each EventBatch decoded into a run,
 * put in time order if its thread's stamps were not (a SPAWN stamped at
 * its poll's start stands after that poll's earlier events), and merged
 * with the runs held by a heap over their heads, O(log runs) an event.
 *
 * For speed (issue 21): a stream opened lean has its reader decode
 * batches straight from their bytes (weft_trace_reader_lean()), not
 * through protobuf-c; and weft_trace_stream_next_events() hands out the
 * events in blocks, as many as go out in a row from the earliest run,
 * rather than one call and one copy each.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "weft/trace_stream.h"

#define DEFAULT_WINDOW_NS (250ull * 1000 * 1000)
#define DEFAULT_MAX_PENDING ((size_t)2 << 20)
/* Events in a merged block at most (emit_merged()): 128 KiB. */
#define STAGE 4096

struct run {
	weft_event_t *ev;
	size_t n, pos, cap;
	struct run *next_spare;
	uint64_t seq; /* place in the file: ties go to the earlier run */
};

/*
 * A run in the merge's heap, keyed by its head event's stamp and its
 * place in the file: a comparison reads the heap's own array, where it
 * followed a pointer to the run and another to its head event (two
 * dependent loads, each a miss as often as not: the heap was a tenth
 * of a read in time order).  @ts is kept equal to r->ev[r->pos].ts by
 * whoever moves r->pos of the root.
 */
struct hent {
	uint64_t ts;
	uint64_t seq;
	struct run *r;
};

struct weft_trace_stream_s {
	weft_trace_reader_t rd;
	uint64_t window_ns;
	size_t max_pending;
	bool file_order;
	bool lean; /* batches read without protobuf-c (weft_trace_reader_lean()) */
	bool lean_updates; /* and Updates' tasks (weft_trace_reader_lean_updates()) */
	uint64_t total; /* the file's size; 0: unknown */
	Weft__V1__Frame *frame; /* handed out last; freed on the next call */
	struct hent *heap;
	size_t nheap, heap_cap;
	size_t pending; /* events held in the runs */
	/* Runs done, kept for the next batches: a run's malloc and free
	 * cost page faults each (glibc gives the heap's top back). */
	struct run *spare;
	unsigned nspare;
	weft_event_t *tmp; /* for sorting a run */
	size_t tmp_cap;
	uint64_t seq;
	uint64_t newest;  /* the latest stamp read */
	uint64_t emitted; /* the stamp of the last event out */
	bool any_out;
	uint64_t late;
	uint64_t whole; /* bytes of whole records read */
	uint64_t error_offset;
	int error;
	bool eof;
	/* A run whose last events went out as a block: the caller reads
	 * them until the next call, which puts it back. */
	struct run *lent;
	/* In time order, blocks of events merged from the runs
	 * (emit_merged()); NULL: not allocated, blocks from one run. */
	weft_event_t *stage;
};

uint64_t weft_trace_frame_time(const Weft__V1__Frame *f)
{
	switch (f->body_case) {
	case WEFT__V1__FRAME__BODY_UPDATE:
		return f->update->stats ? f->update->stats->now_ns : 0;
	case WEFT__V1__FRAME__BODY_EVENTS:
		return f->events->base_ts;
	case WEFT__V1__FRAME__BODY_CHECKPOINT:
		return f->checkpoint->time_ns;
	default:
		return 0;
	}
}

static inline bool hent_less(const struct hent *a, const struct hent *b)
{
	return a->ts != b->ts ? a->ts < b->ts : a->seq < b->seq;
}

static void heap_up(struct hent *h, size_t j)
{
	struct hent x = h[j];

	while (j) {
		size_t p = (j - 1) / 2;

		if (!hent_less(&x, &h[p]))
			break;
		h[j] = h[p];
		j = p;
	}
	h[j] = x;
}

/* h[j] put in its place below (moved down, the lesser child up). */
static void heap_down(struct hent *h, size_t n, size_t j)
{
	struct hent x = h[j];

	for (;;) {
		size_t l = 2 * j + 1, m;

		if (l >= n)
			break;
		m = l + 1 < n && hent_less(&h[l + 1], &h[l]) ? l + 1 : l;
		if (!hent_less(&h[m], &x))
			break;
		h[j] = h[m];
		j = m;
	}
	h[j] = x;
}

/*
 * The root's run moved on (r->pos): its key renewed, or the run out of
 * the heap when done (given to @done: put back or lent); then the heap
 * put right.
 */
static void root_moved(weft_trace_stream_t *s, struct run **done)
{
	struct run *r = s->heap[0].r;

	*done = NULL;
	if (r->pos == r->n) {
		s->heap[0] = s->heap[--s->nheap];
		*done = r;
	} else {
		s->heap[0].ts = r->ev[r->pos].ts;
	}
	if (s->nheap)
		heap_down(s->heap, s->nheap, 0);
}

/* The root's runner-up (the lesser of its children), or NULL. */
static inline const struct hent *runner_up(const weft_trace_stream_t *s)
{
	if (s->nheap < 2)
		return NULL;
	if (s->nheap > 2 && hent_less(&s->heap[2], &s->heap[1]))
		return &s->heap[2];
	return &s->heap[1];
}

/*
 * A run's events in stable time order (merge sort; @tmp holds @n).
 * A run is nearly in order as a rule (a SPAWN a few events late), so an
 * insertion sort goes first, which moves each late event back past the
 * few before it; past 8 moves an event on average (a run far from
 * order), the merge sort takes what it left.  Both keep equal stamps in
 * their order (an event moves back only past later stamps), so the
 * order is the same either way.
 */
static void sort_run(weft_event_t *ev, weft_event_t *tmp, size_t n)
{
	size_t budget = 8 * n;

	for (size_t i = 1; i < n; i++) {
		weft_event_t x;
		size_t j = i;

		if (ev[i].ts >= ev[i - 1].ts)
			continue;
		x = ev[i];
		while (j > 0 && x.ts < ev[j - 1].ts && budget) {
			ev[j] = ev[j - 1];
			j--;
			budget--;
		}
		ev[j] = x;
		if (!budget)
			break;
	}
	if (budget)
		return;
	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n;
			size_t hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				tmp[k++] = ev[j].ts < ev[i].ts ? ev[j++] : ev[i++];
			while (i < mid)
				tmp[k++] = ev[i++];
			while (j < hi)
				tmp[k++] = ev[j++];
		}
		memcpy(ev, tmp, n * sizeof(*ev));
	}
}

static int stream_init(weft_trace_stream_t **out,
		       const weft_trace_stream_opts_t *opts)
{
	weft_trace_stream_t *s = calloc(1, sizeof(*s));

	*out = s;
	if (!s)
		return -ENOMEM;
	s->window_ns = opts && opts->window_ns ? opts->window_ns :
						 DEFAULT_WINDOW_NS;
	s->max_pending = opts && opts->max_pending ? opts->max_pending :
						     DEFAULT_MAX_PENDING;
	s->file_order = opts && opts->file_order;
	s->lean = opts && opts->lean;
	s->lean_updates = opts && opts->lean_updates;
	/* Without it (no memory), blocks from one run, as before. */
	if (!s->file_order)
		s->stage = malloc(STAGE * sizeof(*s->stage));
	return 0;
}

int weft_trace_stream_open(weft_trace_stream_t **out, const char *path,
			   const weft_trace_stream_opts_t *opts)
{
	struct stat st;
	int rc = stream_init(out, opts);

	if (rc)
		return rc;
	rc = weft_trace_reader_open(&(*out)->rd, path);
	if (!rc && (*out)->lean_updates)
		rc = weft_trace_reader_lean_updates(&(*out)->rd);
	else if (!rc && (*out)->lean)
		rc = weft_trace_reader_lean(&(*out)->rd);
	if (rc) {
		weft_trace_reader_close(&(*out)->rd);
		free((*out)->stage);
		free(*out);
		*out = NULL;
		return rc;
	}
	if (!fstat(fileno((*out)->rd.fp), &st) && S_ISREG(st.st_mode))
		(*out)->total = (uint64_t)st.st_size;
	return 0;
}

int weft_trace_stream_open_mem(weft_trace_stream_t **out, const void *data,
			       size_t len, const weft_trace_stream_opts_t *opts)
{
	int rc = stream_init(out, opts);

	if (rc)
		return rc;
	weft_trace_reader_open_mem(&(*out)->rd, data, len);
	(*out)->total = len;
	if ((*out)->lean_updates ?
		    weft_trace_reader_lean_updates(&(*out)->rd) != 0 :
		    (*out)->lean && weft_trace_reader_lean(&(*out)->rd)) {
		weft_trace_reader_close(&(*out)->rd);
		free((*out)->stage);
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

static void run_free(struct run *r)
{
	free(r->ev);
	free(r);
}

/* A run done: kept for a later batch, up to 64 of them. */
static void run_put(weft_trace_stream_t *s, struct run *r)
{
	if (s->nspare == 64) {
		run_free(r);
		return;
	}
	r->next_spare = s->spare;
	s->spare = r;
	s->nspare++;
}

/* A run with room for @n events, or NULL. */
static struct run *run_get(weft_trace_stream_t *s, size_t n)
{
	struct run *r = s->spare;

	if (r) {
		s->spare = r->next_spare;
		s->nspare--;
	} else if (!(r = calloc(1, sizeof(*r)))) {
		return NULL;
	}
	if (r->cap < n) {
		weft_event_t *ev = realloc(r->ev, n * sizeof(*ev));

		if (!ev) {
			run_free(r);
			return NULL;
		}
		r->ev = ev;
		r->cap = n;
	}
	r->n = r->pos = 0;
	return r;
}

void weft_trace_stream_close(weft_trace_stream_t *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nheap; i++)
		run_free(s->heap[i].r);
	if (s->lent)
		run_free(s->lent);
	while (s->spare) {
		struct run *r = s->spare;

		s->spare = r->next_spare;
		run_free(r);
	}
	free(s->tmp);
	free(s->stage);
	free(s->heap);
	weft_trace_reader_frame_free(&s->rd, s->frame);
	weft_trace_reader_close(&s->rd);
	free(s);
}

const weft_trace_reader_t *weft_trace_stream_reader(
	const weft_trace_stream_t *s)
{
	return &s->rd;
}

void weft_trace_stream_tasks(weft_trace_stream_t *s, const Weft__V1__Frame *f,
			     weft_trace_tasks_t *it)
{
	weft_trace_reader_tasks(&s->rd, f, it);
}

uint64_t weft_trace_stream_error_offset(const weft_trace_stream_t *s)
{
	return s->error ? s->error_offset : s->rd.error_offset;
}

uint64_t weft_trace_stream_late(const weft_trace_stream_t *s)
{
	return s->late;
}

void weft_trace_stream_progress(const weft_trace_stream_t *s, uint64_t *done,
				uint64_t *total)
{
	*done = s->whole;
	*total = s->total;
}

/* Whether the earliest event held may go out now. */
static bool may_emit(const weft_trace_stream_t *s)
{
	if (!s->nheap)
		return false;
	if (s->eof || s->pending > s->max_pending || s->file_order)
		return true;
	/* No overflow: the earliest event held is never after the newest. */
	return s->newest - s->heap[0].ts >= s->window_ns;
}

static void emit(weft_trace_stream_t *s, weft_trace_item_t *it)
{
	struct run *r = s->heap[0].r, *done;

	it->kind = WEFT_TRACE_ITEM_EVENT;
	it->frame = NULL;
	it->ev = r->ev[r->pos++];
	s->pending--;
	if (s->any_out && it->ev.ts < s->emitted && !s->file_order)
		s->late++;
	else
		s->emitted = it->ev.ts;
	s->any_out = true;
	root_moved(s, &done);
	if (done)
		run_put(s, done);
}

/*
 * The events weft_trace_stream_next() would hand out next one after the
 * other, all from the earliest run (may_emit() holds for its first): up
 * to where the run's next event is no longer the earliest held (its
 * heap's runner-up, the lesser of the root's children, comes first) or
 * may not go out yet.  Out as one block, lent until the next call.
 */
static void emit_block(weft_trace_stream_t *s, weft_trace_item_t *it,
		       const weft_event_t **ev, size_t *n)
{
	struct run *r = s->heap[0].r;
	const struct hent *o = runner_up(s);
	bool always = s->eof || s->file_order;
	size_t i = r->pos, pend = s->pending;
	uint64_t rseq = s->heap[0].seq;

	for (; i < r->n; i++, pend--) {
		uint64_t ts = r->ev[i].ts;

		if (o && i > r->pos &&
		    (ts > o->ts || (ts == o->ts && rseq > o->seq)))
			break;
		if (!always && pend <= s->max_pending &&
		    s->newest - ts < s->window_ns)
			break;
		/* Late as emit() counts it. */
		if (s->any_out && ts < s->emitted && !s->file_order)
			s->late++;
		else
			s->emitted = ts;
		s->any_out = true;
	}
	it->kind = WEFT_TRACE_ITEM_EVENTS;
	it->frame = NULL;
	*ev = &r->ev[r->pos];
	*n = i - r->pos;
	s->pending -= *n;
	r->pos = i;
	root_moved(s, &s->lent);
}

/*
 * In time order, the runs of the threads interleave closely: a block of
 * emit_block()'s is 4.5 events on average, and a call for each (the
 * heap put right, the frame and the lent run looked at) cost more than
 * the events.  So the events that would go out in a row, block after
 * block, are merged into s->stage (up to STAGE of them) and go out as
 * one block: the same events in the same order, and no frame read
 * among them (next_item() reads one only when may_emit() fails, which
 * is where this stops).
 */
static void emit_merged(weft_trace_stream_t *s, weft_trace_item_t *it,
			const weft_event_t **ev, size_t *n)
{
	weft_event_t *stage = s->stage;
	size_t k = 0;

	do {
		struct run *r = s->heap[0].r, *done;
		const struct hent *o = runner_up(s);
		uint64_t rseq = s->heap[0].seq;
		uint64_t ots = o ? o->ts : 0, oseq = o ? o->seq : 0;
		/* In locals: a store to the stage may alias the stream's
		 * counters (64-bit integers both), which the loop reloaded
		 * an event each. */
		const weft_event_t *rev = r->ev;
		size_t i = r->pos, rn = r->n, pending = s->pending;
		uint64_t emitted = s->emitted, late = s->late;
		uint64_t newest = s->newest, window = s->window_ns;
		size_t max_pending = s->max_pending;
		bool any = s->any_out, eof = s->eof;

		for (; i < rn && k < STAGE; i++) {
			uint64_t ts = rev[i].ts;

			if (o && i > r->pos &&
			    (ts > ots || (ts == ots && rseq > oseq)))
				break;
			if (!eof && pending <= max_pending &&
			    newest - ts < window)
				break;
			/* Late as emit() counts it. */
			if (any && ts < emitted)
				late++;
			else
				emitted = ts;
			any = true;
			stage[k++] = rev[i];
			pending--;
		}
		s->pending = pending;
		s->emitted = emitted;
		s->late = late;
		s->any_out = any;
		r->pos = i;
		root_moved(s, &done);
		if (done)
			run_put(s, done);
	} while (k < STAGE && may_emit(s));
	it->kind = WEFT_TRACE_ITEM_EVENTS;
	it->frame = NULL;
	*ev = s->stage;
	*n = k;
}

/* The run's events in stable time order; then into the heap (which
 * has room for it: heap_room()). */
static int run_add(weft_trace_stream_t *s, struct run *r)
{
	bool sorted = true;

	/* In file order, a run goes out as it stands. */
	for (size_t i = 1; !s->file_order && i < r->n && sorted; i++)
		sorted = r->ev[i].ts >= r->ev[i - 1].ts;
	if (!sorted) {
		if (s->tmp_cap < r->n) {
			free(s->tmp);
			s->tmp = malloc(r->n * sizeof(*s->tmp));
			s->tmp_cap = s->tmp ? r->n : 0;
			if (!s->tmp) {
				run_put(s, r);
				return -ENOMEM;
			}
		}
		sort_run(r->ev, s->tmp, r->n);
	}
	if (r->ev[r->n - 1].ts > s->newest)
		s->newest = r->ev[r->n - 1].ts;
	r->seq = s->seq++;
	s->pending += r->n;
	s->heap[s->nheap] =
		(struct hent){ .ts = r->ev[0].ts, .seq = r->seq, .r = r };
	heap_up(s->heap, s->nheap++);
	return 0;
}

static int heap_room(weft_trace_stream_t *s)
{
	if (s->nheap == s->heap_cap) {
		size_t cap = s->heap_cap ? 2 * s->heap_cap : 64;
		struct hent *h = realloc(s->heap, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		s->heap = h;
		s->heap_cap = cap;
	}
	return 0;
}

/* A lean batch's events (the reader decoded them) into a run. */
static int add_lean_run(weft_trace_stream_t *s)
{
	size_t n = s->rd.lean_n;
	struct run *r;

	if (!n)
		return 0;
	if (heap_room(s))
		return -ENOMEM;
	if (s->file_order) {
		weft_event_t *ev;
		size_t cap;

		/* In file order the run goes out before the next batch is
		 * read (the heap holds it alone): it takes the reader's
		 * events as they are, and the reader the run's room for
		 * the next batch (grown there as a batch asks), where a
		 * copy of each batch (200 KiB) was a twentieth of info. */
		r = run_get(s, 1);
		if (!r)
			return -ENOMEM;
		ev = r->ev;
		cap = r->cap;
		r->ev = s->rd.lean_ev;
		r->cap = s->rd.lean_cap;
		s->rd.lean_ev = ev;
		s->rd.lean_cap = cap;
		r->n = n;
		return run_add(s, r);
	}
	r = run_get(s, n);
	if (!r)
		return -ENOMEM;
	memcpy(r->ev, s->rd.lean_ev, n * sizeof(*r->ev));
	r->n = n;
	return run_add(s, r);
}

/* An EventBatch's events into a run of their own.  Return: 0 or -errno. */
static int add_run(weft_trace_stream_t *s, const Weft__V1__EventBatch *m)
{
	size_t n = m->n_head; /* the decoder checks count against it */
	struct run *r;
	int got;

	if (!n) /* a count without columns fails the decoder's checks */
		return weft_wire_batch_decode(m, NULL, 0) < 0 ? -EBADMSG : 0;
	if (heap_room(s))
		return -ENOMEM;
	r = run_get(s, n);
	if (!r)
		return -ENOMEM;
	got = weft_wire_batch_decode(m, r->ev, n);
	if (got <= 0) {
		run_put(s, r);
		return got < 0 ? -EBADMSG : 0;
	}
	r->n = (size_t)got;
	return run_add(s, r);
}

/* weft_trace_stream_next(), or with @ev its blocks of events. */
static int next_item(weft_trace_stream_t *s, weft_trace_item_t *it,
		     const weft_event_t **ev, size_t *n)
{
	Weft__V1__Frame *f;
	int rc;

again:
	memset(it, 0, sizeof(*it));
	weft_trace_reader_frame_free(&s->rd, s->frame);
	s->frame = NULL;
	if (s->lent) {
		run_put(s, s->lent);
		s->lent = NULL;
	}
	if (s->error)
		return s->error;
	if (may_emit(s)) {
		if (ev && !s->file_order && s->stage)
			emit_merged(s, it, ev, n);
		else if (ev)
			emit_block(s, it, ev, n);
		else
			emit(s, it);
		return 1;
	}
	if (s->eof)
		return 0;
	rc = weft_trace_reader_next(&s->rd, &f);
	if (rc < 0) {
		s->error_offset = s->rd.error_offset;
		return s->error = rc;
	}
	if (!rc) {
		s->eof = true;
		return next_item(s, it, ev, n);
	}
	s->frame = f;
	it->kind = WEFT_TRACE_ITEM_FRAME;
	it->frame = f;
	it->offset = s->rd.dec.record_offset;
	it->size = s->rd.dec.offset - it->offset;
	s->whole = s->rd.dec.offset;
	if (f == &s->rd.lean_frame || f->body_case == WEFT__V1__FRAME__BODY_EVENTS) {
		rc = f == &s->rd.lean_frame ? add_lean_run(s) :
					      add_run(s, f->events);
		if (rc == -EBADMSG) {
			/*
			 * A record that reads whole but whose columns do not
			 * agree (a byte changed inside it): skipped and
			 * counted as a torn one is, and the rest read (one
			 * bad byte lost the whole file after it).  Its
			 * frame is freed at the top.
			 */
			if (!s->rd.skips)
				s->rd.first_skip = it->offset;
			s->rd.skips++;
			s->rd.skipped += it->size;
			goto again;
		}
		if (rc) {
			s->error_offset = it->offset;
			return s->error = rc;
		}
	}
	return 1;
}

int weft_trace_stream_next(weft_trace_stream_t *s, weft_trace_item_t *it)
{
	return next_item(s, it, NULL, NULL);
}

int weft_trace_stream_next_events(weft_trace_stream_t *s,
				  weft_trace_item_t *it,
				  const weft_event_t **ev, size_t *n)
{
	*ev = NULL;
	*n = 0;
	return next_item(s, it, ev, n);
}
