/* SPDX-License-Identifier: MIT */
/*
 * The replay's side index (issue 21): what the index pass learns of a
 * trace (its records' places, times and bits; checkpoints of its model)
 * kept in a file next to it, FILE.weftidx, so that the next open of the
 * same trace reads that instead of the whole trace.  Where the trace's
 * folder is not writable, in $XDG_CACHE_HOME/weft/ (~/.cache/weft/),
 * named by the trace's base name and a hash of its real path.
 *
 * The file: a header (magic, format version, the model's save layout,
 * the trace's device, inode and a hash of its first 4 KiB), then chunks
 * appended as the index pass goes, each with its type, length, its
 * payload's hash and its own header's hash:
 *
 *   RECS  records [first, first + count): offset, time, bits
 *   CKPT  a model (con_model_save()) with records [0, next) fed
 *   MARK  the records so far and the CKPT before it: next, the trace's
 *         bytes indexed (covered), bytes skipped, a hash of the trace's
 *         4 KiB before covered, where the CKPT is and its hash
 *   END   after a last CKPT and MARK: the trace's size and mtime then,
 *         truncated, skipped, the error that ended reading
 *   PATH  first of all: the trace's real path (the cache's trim looks
 *         whether the trace is still there, replay_cache.c)
 *   TOC   after the END: all of it that an open reads (the records
 *         again, the checkpoints' places, the last MARK, the END), then
 *         a trailer, the file's last 24 bytes, that says where the TOC
 *         is.
 *
 * An open of a whole index reads its header, its trailer and its TOC:
 * four reads whatever the trace's size, where walking the chunks takes
 * about five a checkpoint (some 1,500 at 10 GB, most of them small and
 * far apart: slow on a cold cache, a disk or a network file system).
 * A TOC or trailer that does not check, or none (an index written
 * before them), and the chunks are walked as before; a build that does
 * not know the TOC stops at the END and never reads it.
 *
 * It is written as FILE.weftidx.part, renamed to FILE.weftidx at the
 * END: a pass cut short (the console quit) leaves the part, and the
 * next open goes on from its last MARK.  Reading stops at the first
 * chunk that does not check (a torn or flipped one): what is before its
 * last good MARK is used, the rest rebuilt.  A CKPT's payload is checked
 * only when it is restored (reading them all at open would read a
 * tenth of the trace): one that does not check is dropped, the seek
 * uses the one before.  The index is used when the trace is the same
 * file (device, inode, first 4 KiB) and the bytes before its last mark
 * are still the same; a whole one when the trace has not changed since
 * (size, mtime), else (a trace being recorded: it grew) it is extended
 * from its END's mark, not rebuilt.  Anything else: rebuilt.
 *
 * Checkpoints go every CON_CKPT_EVERY bytes of trace at least, and
 * CON_SIDE_RATIO times their own size apart up to CON_SIDE_EVERY_MAX:
 * the file is about 1/CON_SIDE_RATIO of the trace's size where the
 * model is small beside 2 MiB, more where it is not (a seek reads 32
 * MiB at most): 11% for a model of 115,000 tasks (tools/bench/README.md,
 * "Big traces"), its records 17 bytes each besides.  Only one console writes a trace's index at a time
 * (it holds flock on the trace, and on the part while it writes it:
 * the cache's trim leaves a locked file); another just reads a whole
 * one, or keeps none.  Indexes in the cache are trimmed when one is
 * written there (replay_cache.c: by their trace, age and total size),
 * and one read from there has its mtime set (used, for the trim's
 * least recently used).  WEFT_CONSOLE_INDEX=0: no side index.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "replay_internal.h"
#include "replay_side_format.h"

/* ------------------------------------------------------------- names */

static char *str_cat(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = con_xmalloc(la + lb + 1);

	memcpy(s, a, la);
	memcpy(s + la, b, lb + 1);
	return s;
}

/* ------------------------------------------------------------ reading */

/* What a side file holds, as far as it checks. */
typedef struct side_read_s {
	/* the records up to the last mark */
	uint64_t *off, *at;
	uint8_t *flags;
	size_t n, cap;  /* read, marked or not */
	size_t nmarked; /* up to the last mark */
	con_side_ckpt_t *ck;
	size_t nck, ck_cap;
	mark_t mark; /* the last one (mark.next = nmarked) */
	bool have_mark;
	uint64_t good_end; /* the file's bytes up to the last mark */
	bool complete;     /* an END after the last mark */
	end_t end;
	char *error;
} side_read_t;

static void side_read_free(side_read_t *sr)
{
	free(sr->off);
	free(sr->at);
	free(sr->flags);
	free(sr->ck);
	free(sr->error);
	memset(sr, 0, sizeof(*sr));
}

static bool read_full(int fd, void *p, size_t len, uint64_t off)
{
	return pread(fd, p, len, (off_t)off) == (ssize_t)len;
}

/* The payload of a chunk, read and checked (NULL: it does not). */
static uint8_t *chunk_payload(int fd, const chunk_hdr_t *h, uint64_t off)
{
	uint8_t *p;

	if (h->len > (64u << 20))
		return NULL;
	p = con_xmalloc(h->len ? h->len : 1);
	if (!read_full(fd, p, h->len, off) ||
	    hash64(HASH0, p, h->len) != h->hash) {
		free(p);
		return NULL;
	}
	return p;
}

static void recs_room(side_read_t *sr, size_t more)
{
	if (sr->n + more <= sr->cap)
		return;
	while (sr->n + more > sr->cap)
		sr->cap = sr->cap ? 2 * sr->cap : 4096;
	sr->off = con_xreallocarray(sr->off, sr->cap, sizeof(*sr->off));
	sr->at = con_xreallocarray(sr->at, sr->cap, sizeof(*sr->at));
	sr->flags = con_xreallocarray(sr->flags, sr->cap, 1);
}

/* @count records (17 bytes each at @q) after @sr's; false when they do
 * not go forward in file and time. */
static bool recs_add(side_read_t *sr, const uint8_t *q, uint64_t count)
{
	recs_room(sr, (size_t)count);
	for (uint64_t i = 0; i < count; i++, q += 17) {
		memcpy(&sr->off[sr->n], q, 8);
		memcpy(&sr->at[sr->n], q + 8, 8);
		sr->flags[sr->n] = q[16];
		if (sr->n && (sr->off[sr->n] <= sr->off[sr->n - 1] ||
			      sr->at[sr->n] < sr->at[sr->n - 1]))
			return false;
		sr->n++;
	}
	return true;
}

/*
 * The TOC of the whole side file @fd (@size bytes) into @sr: what the
 * walk of its chunks would find, in three reads (the trailer, the TOC's
 * header, its payload; the file's header is read first).  Everything is checked as the walk checks it
 * (the checkpoints' payloads are not read: a restore checks them); false
 * (@sr left empty) when anything does not, or there is no TOC: the
 * caller walks the chunks.
 */
static bool toc_read(int fd, uint64_t size, side_read_t *sr)
{
	toc_tail_t tl;
	chunk_hdr_t h;
	toc_t t;
	uint8_t *p = NULL;
	const uint8_t *q;
	uint64_t body, elen, prev_next = 0;

	if (size < sizeof(side_hdr_t) + sizeof(h) + sizeof(tl) ||
	    !read_full(fd, &tl, sizeof(tl), size - sizeof(tl)) ||
	    memcmp(tl.magic, TOC_MAGIC, 8) ||
	    tl.self != hash64(HASH0, &tl, offsetof(toc_tail_t, self)) ||
	    tl.off < sizeof(side_hdr_t) ||
	    tl.off > size - sizeof(tl) - sizeof(h) ||
	    !read_full(fd, &h, sizeof(h), tl.off) ||
	    h.self != hash64(HASH0, &h, offsetof(chunk_hdr_t, self)) ||
	    h.type != CH_TOC)
		return false;
	body = tl.off + sizeof(h);
	if (h.len != size - sizeof(tl) - body || h.len < sizeof(t) + 1)
		return false;
	p = chunk_payload(fd, &h, body);
	if (!p)
		return false;
	memcpy(&t, p, sizeof(t));
	/* Its parts fill it exactly, the error last, NUL-ended. */
	if (t.nrec > (h.len - sizeof(t)) / 17 ||
	    t.nck > (h.len - sizeof(t) - 17 * t.nrec) / 32 || !t.nck)
		goto out_bad;
	elen = h.len - sizeof(t) - 17 * t.nrec - 32 * t.nck;
	q = p + sizeof(t) + 17 * t.nrec + 32 * t.nck;
	if (!elen || q[elen - 1] != '\0' || strlen((const char *)q) + 1 != elen)
		goto out_bad;
	if (!recs_add(sr, p + sizeof(t), t.nrec))
		goto out_bad;
	sr->error = con_xstrdup((const char *)q);
	/* The checkpoints: in the file before the END, by their records. */
	sr->ck = con_xcalloc((size_t)t.nck, sizeof(*sr->ck));
	sr->ck_cap = (size_t)t.nck;
	q = p + sizeof(t) + 17 * t.nrec;
	for (uint64_t i = 0; i < t.nck; i++, q += 32) {
		con_side_ckpt_t *c = &sr->ck[i];
		uint64_t next;

		memcpy(&next, q, 8);
		memcpy(&c->off, q + 8, 8);
		memcpy(&c->len, q + 16, 8);
		memcpy(&c->hash, q + 24, 8);
		if (next > t.nrec || next < prev_next ||
		    c->off < sizeof(side_hdr_t) + sizeof(h) ||
		    c->len > t.good_end || c->off > t.good_end - c->len)
			goto out_bad;
		c->next = (size_t)next;
		prev_next = next;
	}
	sr->nck = (size_t)t.nck;
	/* The last mark: the last checkpoint's, at the last record; the
	 * END's; where the good part of the file ends (before the END). */
	if (t.mark.next != t.nrec || sr->ck[t.nck - 1].next != t.nrec ||
	    t.mark.ck_off != sr->ck[t.nck - 1].off ||
	    t.mark.ck_len != sr->ck[t.nck - 1].len ||
	    t.mark.ck_hash != sr->ck[t.nck - 1].hash ||
	    (t.nrec && t.mark.covered <= sr->off[t.nrec - 1]) ||
	    t.end.covered != t.mark.covered ||
	    t.good_end < sizeof(side_hdr_t) || t.good_end > tl.off)
		goto out_bad;
	sr->mark = t.mark;
	sr->have_mark = true;
	sr->nmarked = sr->n;
	sr->good_end = t.good_end;
	sr->complete = true;
	sr->end = t.end;
	free(p);
	return true;
out_bad:
	free(p);
	side_read_free(sr);
	return false;
}

/*
 * Read the side file @fd of a trace @st: its chunks as far as they check.
 * false when its header is not this trace's (another file, format,
 * build), or the trace's first bytes changed.
 */
static bool side_read(int fd, int trace_fd, const struct stat *st,
		      side_read_t *sr)
{
	side_hdr_t hd;
	uint64_t pos = sizeof(hd), size, hh;
	struct stat fs;
	size_t pend_ck = SIZE_MAX; /* the CKPT read since the last mark */

	memset(sr, 0, sizeof(*sr));
	if (fstat(fd, &fs) || !read_full(fd, &hd, sizeof(hd), 0) ||
	    memcmp(hd.magic, SIDE_MAGIC, 8) || hd.version != SIDE_VERSION ||
	    hd.hash != hash64(HASH0, &hd, offsetof(side_hdr_t, hash)) ||
	    hd.layout != con_model_save_layout() ||
	    hd.dev != (uint64_t)st->st_dev || hd.ino != (uint64_t)st->st_ino ||
	    hd.head_len > SIDE_HEAD || hd.head_len > (uint64_t)st->st_size ||
	    !trace_hash(trace_fd, 0, (size_t)hd.head_len, &hh) ||
	    hh != hd.head_hash)
		return false;
	size = (uint64_t)fs.st_size;
	if (toc_read(fd, size, sr))
		return true;
	sr->good_end = pos;
	while (pos + sizeof(chunk_hdr_t) <= size) {
		chunk_hdr_t h;
		uint8_t *p = NULL;
		uint64_t body = pos + sizeof(h);

		if (!read_full(fd, &h, sizeof(h), pos) ||
		    h.self != hash64(HASH0, &h, offsetof(chunk_hdr_t, self)) ||
		    h.len > size - body)
			break;
		if (h.type != CH_CKPT) {
			p = chunk_payload(fd, &h, body);
			if (!p)
				break;
		}
		if (h.type == CH_PATH) {
			/* The trace's path, for the cache's trim only. */
			if (pos != sizeof(hd) || !h.len || p[h.len - 1] != '\0')
				goto bad;
		} else if (h.type == CH_RECS) {
			uint64_t first, count;

			if (h.len < 16)
				goto bad;
			memcpy(&first, p, 8);
			memcpy(&count, p + 8, 8);
			if (first != sr->n || count > (h.len - 16) / 17 ||
			    16 + 17 * count != h.len)
				goto bad;
			if (!recs_add(sr, p + 16, count))
				goto bad;
		} else if (h.type == CH_CKPT) {
			if (sr->nck == sr->ck_cap) {
				sr->ck_cap = sr->ck_cap ? 2 * sr->ck_cap : 64;
				sr->ck = con_xreallocarray(sr->ck, sr->ck_cap,
							   sizeof(*sr->ck));
			}
			sr->ck[sr->nck] = (con_side_ckpt_t){ .off = body,
							     .len = h.len,
							     .hash = h.hash };
			pend_ck = sr->nck;
		} else if (h.type == CH_MARK) {
			mark_t mk;

			if (h.len != sizeof(mk))
				goto bad;
			memcpy(&mk, p, sizeof(mk));
			if (pend_ck == SIZE_MAX || mk.next != sr->n ||
			    mk.ck_off != sr->ck[pend_ck].off ||
			    mk.ck_len != sr->ck[pend_ck].len ||
			    mk.ck_hash != sr->ck[pend_ck].hash ||
			    (sr->have_mark && mk.covered < sr->mark.covered) ||
			    (sr->n && mk.covered <= sr->off[sr->n - 1]))
				goto bad;
			sr->ck[pend_ck].next = (size_t)mk.next;
			sr->nck = pend_ck + 1;
			pend_ck = SIZE_MAX;
			sr->mark = mk;
			sr->have_mark = true;
			sr->nmarked = sr->n;
			sr->good_end = body + h.len;
		} else if (h.type == CH_END) {
			if (h.len < sizeof(end_t) + 1 || p[h.len - 1] != '\0' ||
			    !sr->have_mark || pend_ck != SIZE_MAX ||
			    sr->n != sr->nmarked)
				goto bad;
			memcpy(&sr->end, p, sizeof(sr->end));
			if (sr->end.covered != sr->mark.covered)
				goto bad;
			sr->error =
				con_xstrdup((const char *)p + sizeof(end_t));
			sr->complete = true;
			free(p);
			break;
		} else {
			goto bad;
		}
		free(p);
		pos = body + h.len;
		continue;
bad:
		free(p);
		break;
	}
	/* What follows the last mark is not used. */
	sr->n = sr->nmarked;
	if (pend_ck != SIZE_MAX)
		sr->nck = pend_ck;
	return true;
}

int con_side_peek(int fd, con_side_peek_t *pk)
{
	side_hdr_t hd;
	chunk_hdr_t h;
	uint8_t *p;

	memset(pk, 0, sizeof(*pk));
	if (!read_full(fd, &hd, sizeof(hd), 0) ||
	    memcmp(hd.magic, SIDE_MAGIC, 8) ||
	    hd.hash != hash64(HASH0, &hd, offsetof(side_hdr_t, hash)))
		return -1;
	if (hd.version != SIDE_VERSION || hd.layout != con_model_save_layout())
		return 0;
	pk->dev = hd.dev;
	pk->ino = hd.ino;
	pk->head_len = hd.head_len;
	pk->head_hash = hd.head_hash;
	if (!read_full(fd, &h, sizeof(h), sizeof(hd)) ||
	    h.self != hash64(HASH0, &h, offsetof(chunk_hdr_t, self)) ||
	    h.type != CH_PATH || !h.len || h.len > 4096)
		return 0;
	p = chunk_payload(fd, &h, sizeof(hd) + sizeof(h));
	if (!p)
		return 0;
	if (p[h.len - 1] != '\0') {
		free(p);
		return 0;
	}
	pk->trace = (char *)p;
	return 1;
}

bool con_side_head_matches(const char *trace, const con_side_peek_t *pk)
{
	struct stat st;
	uint64_t h;
	int fd = open(trace, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	bool ok;

	if (fd < 0)
		return false;
	ok = !fstat(fd, &st) && S_ISREG(st.st_mode) &&
	     (uint64_t)st.st_dev == pk->dev && (uint64_t)st.st_ino == pk->ino &&
	     pk->head_len <= SIDE_HEAD &&
	     pk->head_len <= (uint64_t)st.st_size &&
	     trace_hash(fd, 0, (size_t)pk->head_len, &h) && h == pk->head_hash;
	close(fd);
	return ok;
}

/* ------------------------------------------------------------ writing */

static bool side_write(con_side_t *s, const void *p, size_t len)
{
	if (pwrite(s->fd, p, len, (off_t)s->end) != (ssize_t)len)
		return false;
	s->end += len;
	return true;
}

/* A chunk; false when it did not all go (the index then stops being
 * written: what is before it stays good). */
static bool chunk_write(con_side_t *s, uint32_t type, const void *p, size_t len,
			uint64_t *hash)
{
	chunk_hdr_t h = { .type = type, .len = len };

	h.hash = hash64(HASH0, p, len);
	h.self = hash64(HASH0, &h, offsetof(chunk_hdr_t, self));
	if (hash)
		*hash = h.hash;
	if (side_write(s, &h, sizeof(h)) && side_write(s, p, len))
		return true;
	s->writing = false;
	return false;
}

/* Stop writing: what is in the part stays for the next open. */
static void stop_writing(con_side_t *s)
{
	s->writing = false;
}

/* The records not yet written, as one chunk. */
static bool recs_write(con_replay_t *r)
{
	con_side_t *s = r->side;
	size_t count = r->n - s->recs_out;
	uint8_t *p = con_xmalloc(16 + 17 * count);
	uint64_t first = s->recs_out, c = count;
	bool ok;

	memcpy(p, &first, 8);
	memcpy(p + 8, &c, 8);
	for (size_t i = 0; i < count; i++) {
		size_t k = s->recs_out + i;
		uint8_t *q = p + 16 + 17 * i;
		uint8_t fl = (uint8_t)((r->warn_bits[k / 64] >> (k % 64) & 1 ?
						CON_REC_WARN :
						0) |
				       (r->batch_bits[k / 64] >> (k % 64) & 1 ?
						CON_REC_BATCH :
						0));

		memcpy(q, &r->rec[k].off, 8);
		memcpy(q + 8, &r->rec[k].at, 8);
		q[16] = fl;
	}
	ok = chunk_write(r->side, CH_RECS, p, 16 + 17 * count, NULL);
	free(p);
	if (ok)
		s->recs_out = r->n;
	return ok;
}

static void ck_push(con_side_t *s, con_side_ckpt_t c)
{
	if (s->nck == s->ck_cap) {
		s->ck_cap = s->ck_cap ? 2 * s->ck_cap : 64;
		s->ck = con_xreallocarray(s->ck, s->ck_cap, sizeof(*s->ck));
	}
	s->ck[s->nck++] = c;
}

/* Records so far, a checkpoint of @m and its mark. */
static bool mark_write(con_replay_t *r, const con_model_t *m, uint64_t covered,
		       uint64_t skipped)
{
	con_side_t *s = r->side;
	con_saved_t sv;
	con_side_ckpt_t c = { .next = r->n };
	mark_t mk = { .next = r->n, .covered = covered, .skipped = skipped };
	bool ok;

	if (!s->writing || !tail_hash(s->trace_fd, covered, &mk.tail_hash) ||
	    !recs_write(r))
		goto out_stop;
	con_model_save(&sv, m);
	c.off = s->end + sizeof(chunk_hdr_t);
	c.len = sv.len;
	ok = chunk_write(s, CH_CKPT, sv.p, sv.len, &c.hash);
	con_saved_free(&sv);
	if (!ok)
		goto out_stop;
	mk.ck_off = c.off;
	mk.ck_len = c.len;
	mk.ck_hash = c.hash;
	if (!chunk_write(s, CH_MARK, &mk, sizeof(mk), NULL))
		goto out_stop;
	ck_push(s, c);
	s->covered = covered;
	s->mark_skipped = skipped;
	s->mark_tail = mk.tail_hash;
	/* The next one CON_SIDE_RATIO times this one's size on, within
	 * [CON_CKPT_EVERY, CON_SIDE_EVERY_MAX]. */
	s->due = covered + (c.len * CON_SIDE_RATIO < CON_CKPT_EVERY ?
				    CON_CKPT_EVERY :
			    c.len * CON_SIDE_RATIO > CON_SIDE_EVERY_MAX ?
				    CON_SIDE_EVERY_MAX :
				    c.len * CON_SIDE_RATIO);
	return true;
out_stop:
	stop_writing(s);
	return false;
}

void con_side_step(con_replay_t *r, const con_model_t *m, uint64_t covered,
		   uint64_t skipped)
{
	con_side_t *s = r->side;

	if (s && s->writing && m && covered >= s->due)
		mark_write(r, m, covered, skipped);
}

/*
 * After the END at @good_end (@e, @err): the TOC and its trailer.  One
 * that does not all go is cut off again (false only when that fails
 * too: the file is then not to be kept); the walk of the chunks reads
 * the index without it.
 */
static bool toc_write(con_replay_t *r, uint64_t good_end, const end_t *e,
		      const char *err)
{
	con_side_t *s = r->side;
	const con_side_ckpt_t *last = &s->ck[s->nck - 1];
	size_t elen = strlen(err) + 1, len;
	uint64_t at = s->end;
	toc_t t = { .nrec = r->n, .nck = s->nck, .good_end = good_end };
	toc_tail_t tl = { .magic = TOC_MAGIC, .off = at };
	chunk_hdr_t h = { .type = CH_TOC };
	uint8_t *p, *q;
	bool ok;

	t.mark = (mark_t){ .next = r->n,
			   .covered = s->covered,
			   .skipped = s->mark_skipped,
			   .tail_hash = s->mark_tail,
			   .ck_off = last->off,
			   .ck_len = last->len,
			   .ck_hash = last->hash };
	t.end = *e;
	len = sizeof(t) + 17 * r->n + 32 * s->nck + elen;
	/* Past what an open reads back (chunk_payload()): none. */
	if (len > (64u << 20))
		return true;
	p = con_xmalloc(len);
	memcpy(p, &t, sizeof(t));
	q = p + sizeof(t);
	for (size_t k = 0; k < r->n; k++, q += 17) {
		memcpy(q, &r->rec[k].off, 8);
		memcpy(q + 8, &r->rec[k].at, 8);
		q[16] = (uint8_t)((r->warn_bits[k / 64] >> (k % 64) & 1 ?
					   CON_REC_WARN :
					   0) |
				  (r->batch_bits[k / 64] >> (k % 64) & 1 ?
					   CON_REC_BATCH :
					   0));
	}
	for (size_t i = 0; i < s->nck; i++, q += 32) {
		uint64_t next = s->ck[i].next;

		memcpy(q, &next, 8);
		memcpy(q + 8, &s->ck[i].off, 8);
		memcpy(q + 16, &s->ck[i].len, 8);
		memcpy(q + 24, &s->ck[i].hash, 8);
	}
	memcpy(q, err, elen);
	h.len = len;
	h.hash = hash64(HASH0, p, len);
	h.self = hash64(HASH0, &h, offsetof(chunk_hdr_t, self));
	tl.self = hash64(HASH0, &tl, offsetof(toc_tail_t, self));
	ok = side_write(s, &h, sizeof(h)) && side_write(s, p, len) &&
	     side_write(s, &tl, sizeof(tl));
	free(p);
	if (ok)
		return true;
	s->end = at;
	return !ftruncate(s->fd, (off_t)at);
}

void con_side_end(con_replay_t *r, const con_model_t *m, uint64_t covered)
{
	con_side_t *s = r->side;
	struct stat st;
	size_t elen = r->error ? strlen(r->error) + 1 : 1;
	uint8_t *p;
	uint64_t good_end;
	end_t e = { .covered = covered,
		    .truncated = r->truncated,
		    .skipped = r->skipped };

	if (!s || !s->writing)
		return;
	/* The last checkpoint at the end (a seek to the end restores it),
	 * unless one was just taken there. */
	if (!m || fstat(s->trace_fd, &st) ||
	    ((s->covered != covered || !s->nck ||
	      s->ck[s->nck - 1].next != r->n) &&
	     !mark_write(r, m, covered, r->skipped))) {
		stop_writing(s);
		return;
	}
	e.size = (uint64_t)st.st_size;
	e.mtime_s = (uint64_t)st.st_mtim.tv_sec;
	e.mtime_ns = (uint64_t)st.st_mtim.tv_nsec;
	p = con_xmalloc(sizeof(e) + elen);
	memcpy(p, &e, sizeof(e));
	memcpy(p + sizeof(e), r->error ? r->error : "", elen);
	good_end = s->end;
	if (chunk_write(s, CH_END, p, sizeof(e) + elen, NULL) &&
	    toc_write(r, good_end, &e, r->error ? r->error : "") &&
	    !rename(s->part, s->path)) {
		s->writing = false;
		s->done = true;
		if (s->in_cache)
			con_replay_cache_trim(s->path);
	} else
		stop_writing(s);
	free(p);
}

/* ------------------------------------------------------------ opening */

/* A new side file at @s->part: its header. */
static bool side_start(con_side_t *s, const struct stat *st)
{
	side_hdr_t hd;

	memset(&hd, 0, sizeof(hd));
	memcpy(hd.magic, SIDE_MAGIC, 8);
	hd.version = SIDE_VERSION;
	hd.layout = con_model_save_layout();
	hd.dev = (uint64_t)st->st_dev;
	hd.ino = (uint64_t)st->st_ino;
	hd.head_len = (uint64_t)st->st_size < SIDE_HEAD ?
			      (uint64_t)st->st_size :
			      SIDE_HEAD;
	if (!trace_hash(s->trace_fd, 0, (size_t)hd.head_len, &hd.head_hash))
		return false;
	hd.hash = hash64(HASH0, &hd, offsetof(side_hdr_t, hash));
	s->end = 0;
	if (ftruncate(s->fd, 0) || !side_write(s, &hd, sizeof(hd)) ||
	    !chunk_write(s, CH_PATH, s->trace_real, strlen(s->trace_real) + 1,
			 NULL))
		return false;
	s->nck = 0;
	s->recs_out = 0;
	s->covered = 0;
	s->due = CON_CKPT_EVERY;
	return true;
}

/* @sr's records and checkpoints into @r and its side index. */
static void side_take(con_replay_t *r, side_read_t *sr)
{
	con_side_t *s = r->side;

	for (size_t i = 0; i < sr->n; i++)
		con_replay_rec_push(r, sr->off[i], sr->at[i], sr->flags[i]);
	free(s->ck);
	s->ck = sr->ck;
	s->nck = sr->nck;
	s->ck_cap = sr->ck_cap;
	sr->ck = NULL;
	s->recs_out = sr->n;
	s->covered = sr->mark.covered;
	s->mark_skipped = sr->mark.skipped;
	s->mark_tail = sr->mark.tail_hash;
	s->end = sr->good_end;
	s->due = sr->mark.covered + CON_CKPT_EVERY;
}

/* @sr (read from a file) fits the trace as it is now: the bytes before
 * its last mark unchanged. */
static bool side_fits(const con_side_t *s, const side_read_t *sr,
		      const struct stat *st)
{
	uint64_t h;

	return sr->have_mark && sr->mark.covered <= (uint64_t)st->st_size &&
	       tail_hash(s->trace_fd, sr->mark.covered, &h) &&
	       h == sr->mark.tail_hash;
}

static bool side_unchanged(const side_read_t *sr, const struct stat *st)
{
	return sr->complete && sr->end.size == (uint64_t)st->st_size &&
	       sr->end.mtime_s == (uint64_t)st->st_mtim.tv_sec &&
	       sr->end.mtime_ns == (uint64_t)st->st_mtim.tv_nsec;
}

/* Try the whole index at @path: 1 used (r filled), 0 not. */
static int try_whole(con_replay_t *r, const char *path, const struct stat *st)
{
	con_side_t *s = r->side;
	side_read_t sr;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (!side_read(fd, s->trace_fd, st, &sr) || !side_unchanged(&sr, st) ||
	    !side_fits(s, &sr, st)) {
		side_read_free(&sr);
		close(fd);
		return 0;
	}
	s->fd = fd;
	/* Used now: the cache's trim goes by this time, least recently
	 * used first. */
	if (s->in_cache)
		(void)futimens(fd, NULL);
	side_take(r, &sr);
	r->truncated = sr.end.truncated;
	r->skipped = sr.end.skipped;
	if (sr.error && *sr.error)
		r->error = con_xstrdup(sr.error);
	side_read_free(&sr);
	return 1;
}

/*
 * The part at @path opened for writing (O_RDWR | @flags) and locked
 * (flock, held while it is written: the cache's trim never removes a
 * locked file), or -1.  A part the trim removed between the open and
 * the lock is opened again, once.
 */
static int part_open(const char *path, int flags, mode_t mode)
{
	for (int tries = 0; tries < 2; tries++) {
		int fd = open(path, O_RDWR | O_CLOEXEC | flags, mode);
		struct stat a, b;

		if (fd < 0)
			return -1;
		if (!flock(fd, LOCK_EX | LOCK_NB) && !fstat(fd, &a) &&
		    !stat(path, &b) && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino)
			return fd;
		close(fd);
	}
	return -1;
}

/*
 * Write the index at @path (through its part): go on from the part, or
 * from a whole index of a trace that grew, or start anew.  2 with a
 * prefix taken (r filled up to its mark), 0 started anew, -1 when the
 * part cannot be made there.
 */
static int try_write(con_replay_t *r, const char *path, const struct stat *st,
		     uint64_t *covered, uint64_t *skipped)
{
	con_side_t *s = r->side;
	char *part = str_cat(path, ".part");
	side_read_t sr;
	int fd;

	/* As readable as the trace, no more (it tells what the trace
	 * does); the cache's folders the user's own. */
	con_side_make_dirs(path);
	fd = part_open(part, O_CREAT, st->st_mode & 0666);
	if (fd < 0) {
		free(part);
		return -1;
	}
	s->fd = fd;
	s->path = con_xstrdup(path);
	s->part = part;
	s->writing = true;
	/* The part as far as it checks and fits; else a whole index of a
	 * trace that grew since (moved to the part: extended). */
	for (int pass = 0; pass < 2; pass++) {
		if (side_read(fd, s->trace_fd, st, &sr) &&
		    side_fits(s, &sr, st) && sr.nck &&
		    sr.ck[sr.nck - 1].next == sr.mark.next) {
			if (ftruncate(fd, (off_t)sr.good_end)) {
				side_read_free(&sr);
				break;
			}
			*covered = sr.mark.covered;
			*skipped = sr.mark.skipped;
			side_take(r, &sr);
			side_read_free(&sr);
			return 2;
		}
		side_read_free(&sr);
		if (pass || rename(path, part))
			break;
		close(fd);
		fd = s->fd = part_open(part, 0, 0);
		if (fd < 0)
			break;
	}
	if (fd < 0 || !side_start(s, st)) {
		s->writing = false;
		return -1;
	}
	return 0;
}

int con_side_open(con_replay_t *r, const struct stat *st, uint64_t *covered,
		  uint64_t *skipped)
{
	const char *e = getenv("WEFT_CONSOLE_INDEX");
	char *paths[2];
	con_side_t *s;
	int got = 0;

	if (e && !strcmp(e, "0"))
		return 0;
	s = con_xcalloc(1, sizeof(*s));
	s->fd = -1;
	s->trace_fd = open(r->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (s->trace_fd < 0) {
		free(s);
		return 0;
	}
	r->side = s;
	s->trace_real = realpath(r->path, NULL);
	if (!s->trace_real)
		s->trace_real = con_xstrdup(r->path);
	paths[0] = str_cat(r->path, ".weftidx");
	paths[1] = con_side_cache_path(r->path);
	/* A whole index, next to the trace or in the cache. */
	for (int i = 0; i < 2 && !got; i++) {
		s->in_cache = i == 1;
		if (paths[i])
			got = try_whole(r, paths[i], st);
	}
	/* Else one written (and only by one console at a time): next to
	 * the trace, or in the cache where that folder is not writable. */
	if (!got && !flock(s->trace_fd, LOCK_EX | LOCK_NB)) {
		for (int i = 0; i < 2 && !got && paths[i]; i++) {
			int rc;

			s->in_cache = i == 1;
			rc = try_write(r, paths[i], st, covered, skipped);
			if (rc >= 0) {
				got = rc;
				/* The cache grows by one: trimmed now (and
				 * again when this one is whole). */
				if (s->in_cache)
					con_replay_cache_trim(s->part);
				break;
			}
			if (s->fd >= 0)
				close(s->fd);
			s->fd = -1;
			free(s->path);
			free(s->part);
			s->path = s->part = NULL;
		}
	}
	free(paths[0]);
	free(paths[1]);
	if (s->fd < 0) {
		con_side_close(s);
		free(s);
		r->side = NULL;
	}
	return got;
}

bool con_side_anew(con_side_t *s, const struct stat *st)
{
	if (!s->writing || !side_start(s, st)) {
		s->writing = false;
		return false;
	}
	return true;
}

size_t con_side_before(const con_side_t *s, size_t next)
{
	static_assert(offsetof(con_side_ckpt_t, next) == 0,
		      "con_replay_ckpt_before() reads next first");
	return s ? con_replay_ckpt_before(s->ck, s->nck, sizeof(*s->ck), next) :
		   0;
}

bool con_side_restore(con_side_t *s, size_t i, con_model_t *m)
{
	const con_side_ckpt_t *c = &s->ck[i];
	uint8_t *p;
	bool ok = false;

	memset(m, 0, sizeof(*m));
	if (c->len <= (1ull << 32)) {
		p = con_xmalloc(c->len ? c->len : 1);
		ok = read_full(s->fd, p, c->len, c->off) &&
		     hash64(HASH0, p, c->len) == c->hash &&
		     con_model_load(m, p, c->len);
		free(p);
	}
	if (!ok) {
		/* Never again: the seek takes the one before. */
		memmove(s->ck + i, s->ck + i + 1,
			(s->nck - i - 1) * sizeof(*s->ck));
		s->nck--;
		s->bad++;
	}
	return ok;
}

void con_side_close(con_side_t *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	if (s->trace_fd >= 0)
		close(s->trace_fd); /* the lock goes with it */
	free(s->ck);
	free(s->path);
	free(s->part);
	free(s->trace_real);
	memset(s, 0, sizeof(*s));
	s->fd = s->trace_fd = -1;
}

const char *con_replay_side_state(const con_replay_t *r)
{
	static const char *const names[3][2] = {
		{ "written", "written, whole" },
		{ "whole", "whole" },
		{ "part", "part, now whole" },
	};
	bool whole;

	if (!r->side || r->side_loaded < 0 || r->side_loaded > 2)
		return "none";
	whole = r->side->done;
	return names[r->side_loaded][r->side_loaded == 1 || whole];
}

uint64_t con_replay_side_bytes(const con_replay_t *r)
{
	struct stat st;

	if (!r->side || r->side->fd < 0 || fstat(r->side->fd, &st))
		return 0;
	return (uint64_t)st.st_size;
}

size_t con_replay_side_ckpts(const con_replay_t *r)
{
	return r->side ? r->side->nck : 0;
}

bool con_replay_side_writing(const con_replay_t *r)
{
	return r->side && r->side->writing;
}
