/* SPDX-License-Identifier: MIT */
/*
 * The replay's checkpoints in memory (and in its spill file), and what a
 * model restored from one keeps of the session's (replay.c seeks with
 * them; the side index's own are in replay_side.c).
 *
 * Updates carry only changes, so the state at a time is known only by
 * feeding every record before it.  Checkpoints bound that: packed copies
 * of a model (con_model_pack(), model_pack.c: about 30 bytes a task
 * against a deep copy's 290, so about 4 MB for the 115,000 tasks of the
 * big-trace model against 34) every ckpt_every bytes of file
 * (CON_CKPT_EVERY, 8 MiB, at first).  Their packed tasks go to a spill
 * file (unlinked, in $TMPDIR, /var/tmp or /tmp, not a tmpfs:
 * spill_budget bytes of them at most, CON_CKPT_DISK_BUDGET and a quarter
 * of the trace by default, WEFT_CONSOLE_CHECKPOINT_DISK_MB), the rest of
 * each (120-300 KB: the timeline's top polls, the workers' series, the
 * warnings) stays in memory; without that file they all stay in
 * memory.  Their
 * bytes in memory (con_packed_bytes(), less what was spilled) are at most
 * ckpt_budget (CON_CKPT_BUDGET, 128 MiB; WEFT_CONSOLE_CHECKPOINT_MB):
 * before a new one would pass either budget, every other one goes and
 * the spacing doubles, so a file of any size keeps a bounded number,
 * spread over what was read.  They are taken by the index pass, which
 * feeds a model of its own (im) every record it indexes, so that a seek
 * forward into what was never replayed finds one too; and while the
 * replay reads forward (a part replayed again after thinning fills in
 * where the spacing allows).  A seek restores the nearest checkpoint at
 * or before the time wanted, when the model is past it or behind that
 * checkpoint, and reads on from its record; with none there (or one
 * that does not read back), from the first record.  Either way the
 * model keeps the session's title, sort, filter, mode and retention.  A
 * model bigger than the whole budget is not copied.  The price: the
 * index pass runs at the model's speed (about 55 MB/s against 200 for
 * the index alone; the first screen does not wait for it, and a seek
 * past what is indexed waits for the index to get there), and it holds
 * a second model.  A seek reads at most the spacing's worth of file: 16
 * MB at 1 GB (50 checkpoints, 200 MB spilled), 32 MB from 2 to 16 GB
 * (2 GiB spilled at most), 64 MB beyond (tools/bench/README.md, "Big
 * traces").  With a side index, its checkpoints are 32 MiB of file
 * apart at most instead, on disk only.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "replay_internal.h"

/* The checkpoints' budget: CON_CKPT_BUDGET, or
 * WEFT_CONSOLE_CHECKPOINT_MB MiB (0: no checkpoints). */
static uint64_t env_mb(const char *name, uint64_t dflt)
{
	const char *e = getenv(name);
	char *end;
	unsigned long long mb;

	if (!e || !*e)
		return dflt;
	errno = 0;
	mb = strtoull(e, &end, 10);
	if (errno || *end || mb >= (SIZE_MAX >> 20))
		return dflt;
	return (uint64_t)mb << 20;
}

/*
 * A file for the checkpoints' packed tasks: unlinked from the start (it
 * goes with the process), in $TMPDIR, /var/tmp or /tmp, the first that
 * is not a tmpfs (there the "disk" is memory, and RSS would not show
 * it); -1 when none will do (they stay in memory, under its budget).
 */
static int spill_in(const char *dir)
{
	char path[4096];
	struct statfs fs;
	int fd = -1;

#ifdef O_TMPFILE
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
	if (fd < 0) {
		if ((size_t)snprintf(path, sizeof(path),
				     "%s/weft-console-XXXXXX",
				     dir) >= sizeof(path))
			return -1;
		fd = mkstemp(path);
		if (fd >= 0)
			unlink(path);
	}
	if (fd >= 0 && (fstatfs(fd, &fs) || fs.f_type == TMPFS_MAGIC)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int spill_open(void)
{
	const char *dirs[] = { getenv("TMPDIR"), "/var/tmp", "/tmp" };
	int fd = -1;

	for (size_t i = 0; i < 3 && fd < 0; i++)
		if (dirs[i] && *dirs[i])
			fd = spill_in(dirs[i]);
	return fd;
}

/* The checkpoints' budgets: CON_CKPT_BUDGET in memory, or
 * WEFT_CONSOLE_CHECKPOINT_MB MiB (0: no checkpoints); on disk
 * WEFT_CONSOLE_CHECKPOINT_DISK_MB (0: none, the file not made), or by
 * default CON_CKPT_DISK_BUDGET and at most a quarter of the trace. */
void con_replay_ckpt_config(con_replay_t *r)
{
	r->ckpt_budget =
		(size_t)env_mb("WEFT_CONSOLE_CHECKPOINT_MB", CON_CKPT_BUDGET);
	r->ckpt_every = r->ckpt_budget ? CON_CKPT_EVERY : UINT64_MAX;
	r->spill_budget = env_mb("WEFT_CONSOLE_CHECKPOINT_DISK_MB", UINT64_MAX);
	if (r->spill_budget == UINT64_MAX)
		r->spill_budget = r->size / 4 < CON_CKPT_DISK_BUDGET ?
					  r->size / 4 :
					  CON_CKPT_DISK_BUDGET;
	r->spill_fd = -1;
	if (r->ckpt_budget && r->spill_budget)
		r->spill_fd = spill_open();
}

/* What a model keeps over a reset or a restore: the session's
 * settings (sort, filter, mode, retention). */
typedef struct model_settings_s {
	con_task_col_t col;
	bool inv;
	char filter[sizeof(((con_model_t *)0)->filter)];
	con_mode_t mode;
	uint64_t retain;
	size_t retain_max;
} model_settings_t;

static void settings_get(const con_model_t *m, model_settings_t *st)
{
	st->col = m->sort_col;
	st->inv = m->sort_invert;
	memcpy(st->filter, m->filter, sizeof(st->filter));
	st->mode = m->mode;
	st->retain = m->retain_ns;
	st->retain_max = m->retain_max;
}

static void settings_put(con_model_t *m, const model_settings_t *st)
{
	con_model_set_sort(m, st->col, st->inv);
	con_model_set_filter(m, st->filter);
	m->mode = st->mode;
	m->retain_ns = st->retain;
	m->retain_max = st->retain_max;
}

void con_replay_model_reset(con_model_t *m)
{
	char *target = con_xstrdup(m->target);
	model_settings_t st;

	settings_get(m, &st);
	con_model_fini(m);
	con_model_init(m, target);
	free(target);
	settings_put(m, &st);
}

/* ------------------------------------------------------- checkpoints */

/* @c's memory freed, its blocks in the spill file given back (the
 * file's length stays; where punching fails they stay until the file
 * goes: the budget counts what is live). */
static void ckpt_release(con_replay_t *r, con_replay_ckpt_t *c)
{
	if (c->spilled)
		(void)fallocate(r->spill_fd,
				FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)c->spill_off, (off_t)c->pk.len);
	con_packed_free(&c->pk);
}

void con_replay_ckpt_drop(con_replay_t *r, size_t i)
{
	con_replay_ckpt_t *c = &r->ckpt[i];

	r->ckpt_bytes -= c->bytes;
	if (c->spilled)
		r->spill_bytes -= c->pk.len;
	ckpt_release(r, c);
}

void con_replay_ckpt_free_all(con_replay_t *r)
{
	for (size_t i = 0; i < r->nckpt; i++)
		con_replay_ckpt_drop(r, i);
	free(r->ckpt);
	r->ckpt = NULL;
	r->nckpt = r->ckpt_cap = 0;
}

/*
 * Room for @extra more bytes in the budget: every other checkpoint goes
 * (the first stays) and the spacing doubles, as often as needed (the
 * last one too, when it and @extra do not fit together).
 */
static void ckpt_thin(con_replay_t *r, size_t extra, uint64_t extra_disk)
{
	while (r->nckpt && (r->ckpt_bytes + extra > r->ckpt_budget ||
			    r->spill_bytes + extra_disk > r->spill_budget)) {
		size_t k = 0;

		for (size_t i = 0; i < r->nckpt; i++) {
			if (i % 2 || r->nckpt == 1) {
				con_replay_ckpt_drop(r, i);
				r->ckpt_thinned++;
			} else {
				r->ckpt[k++] = r->ckpt[i];
			}
		}
		r->nckpt = k;
		r->ckpt_every = r->ckpt_every > UINT64_MAX / 2 ?
					UINT64_MAX - 1 :
					2 * r->ckpt_every;
	}
}

void con_replay_checkpoints(con_replay_t *r, size_t budget)
{
	r->ckpt_budget = budget;
	ckpt_thin(r, 0, 0);
	if (!budget) {
		r->ckpt_every = UINT64_MAX;
		/* While a side index is written, the index pass's model
		 * stays: its checkpoints go there, not to memory. */
		if (!con_replay_side_writing(r))
			con_replay_im_free(r);
	} else if (r->ckpt_every == UINT64_MAX) {
		r->ckpt_every = CON_CKPT_EVERY;
	}
}

size_t con_replay_ckpt_before(const void *ckpts, size_t n, size_t size,
			      size_t next)
{
	const char *a = ckpts;
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		size_t at;

		memcpy(&at, a + mid * size, sizeof(at));
		if (at <= next)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : n;
}

/* The last checkpoint at or before record count @next (nckpt: none). */
size_t con_replay_ckpt_find(const con_replay_t *r, size_t next)
{
	static_assert(offsetof(con_replay_ckpt_t, next) == 0,
		      "con_replay_ckpt_before() reads next first");
	return con_replay_ckpt_before(r->ckpt, r->nckpt, sizeof(*r->ckpt),
				      next);
}

/* The file's offset of record count @next (0 for the start). */
static uint64_t ckpt_off(const con_replay_t *r, size_t next)
{
	return next ? r->rec[next - 1].off : 0;
}

/*
 * A checkpoint due at r->next: the nearest ones either side are at least
 * ckpt_every bytes of file away (a part replayed again after a seek back
 * fills in what thinning left out only where the spacing allows); *@at
 * is where it goes in the array.
 */
static bool ckpt_due(const con_replay_t *r, size_t next, size_t *at)
{
	size_t i = con_replay_ckpt_find(r, next);
	uint64_t off = ckpt_off(r, next);

	if (off - (i < r->nckpt ? ckpt_off(r, r->ckpt[i].next) : 0) <
	    r->ckpt_every)
		return false;
	if (i < r->nckpt && r->ckpt[i].next == next)
		return false;
	*at = i < r->nckpt ? i + 1 : 0;
	return *at >= r->nckpt ||
	       ckpt_off(r, r->ckpt[*at].next) - off >= r->ckpt_every;
}

/*
 * After record @next - 1 was fed to @m (the session's model, or the
 * index pass's): a checkpoint of @m when one is due, the budget thinned
 * first to make room (the spacing doubles, so it may no longer be due).
 * The checkpoints' bytes never pass the budget; a model bigger than the
 * whole budget stops them (those kept stay).
 */
void con_replay_ckpt_maybe(con_replay_t *r, const con_model_t *m, size_t next)
{
	con_replay_ckpt_t c = { .next = next };
	size_t at;
	uint64_t disk = 0;

	if (r->ckpt_every == UINT64_MAX || !ckpt_due(r, next, &at))
		return;
	/* Room made first, by the last one's size (a pack costs a pass
	 * over the tasks: not one made to be thrown away), then checked
	 * again by its own. */
	if (r->ckpt_bytes + r->ckpt_last_mem > r->ckpt_budget ||
	    r->spill_bytes + r->ckpt_last_disk > r->spill_budget) {
		ckpt_thin(r, r->ckpt_last_mem, r->ckpt_last_disk);
		if (!ckpt_due(r, next, &at))
			return;
	}
	con_model_pack(&c.pk, m);
	c.bytes = con_packed_bytes(&c.pk);
	/* Its blob to the spill file when there is room (it was not made,
	 * or a write fails: in memory). */
	if (r->spill_fd >= 0 && c.pk.len <= r->spill_budget &&
	    pwrite(r->spill_fd, c.pk.blob, c.pk.len, (off_t)r->spill_end) ==
		    (ssize_t)c.pk.len) {
		c.spilled = true;
		c.spill_off = r->spill_end;
		r->spill_end += c.pk.len;
		c.bytes -= c.pk.len;
		disk = c.pk.len;
		free(c.pk.blob);
		c.pk.blob = NULL;
	}
	if (c.bytes > r->ckpt_budget) {
		r->ckpt_every = UINT64_MAX; /* those kept stay */
		ckpt_release(r, &c);
		return;
	}
	if (r->ckpt_bytes + c.bytes > r->ckpt_budget ||
	    r->spill_bytes + disk > r->spill_budget) {
		ckpt_thin(r, c.bytes, disk);
		if (!ckpt_due(r, next, &at)) {
			ckpt_release(r, &c);
			return;
		}
	}
	if (r->nckpt == r->ckpt_cap) {
		r->ckpt_cap = r->ckpt_cap ? 2 * r->ckpt_cap : 16;
		r->ckpt = con_xreallocarray(r->ckpt, r->ckpt_cap,
					    sizeof(*r->ckpt));
	}
	memmove(r->ckpt + at + 1, r->ckpt + at,
		(r->nckpt - at) * sizeof(*r->ckpt));
	r->ckpt[at] = c;
	r->nckpt++;
	r->ckpt_bytes += c.bytes;
	r->spill_bytes += disk;
	r->ckpt_last_mem = c.bytes;
	r->ckpt_last_disk = disk;
	r->ckpt_taken++;
	if (r->ckpt_bytes > r->ckpt_peak)
		r->ckpt_peak = r->ckpt_bytes;
}

/* @m becomes @got (a checkpoint's model, taken), keeping its own
 * settings and title. */
void con_replay_model_adopt(con_model_t *m, con_model_t *got)
{
	model_settings_t st;

	settings_get(m, &st);
	/* The session's title, not the one the copy was taken with (the
	 * index pass's model). */
	free(got->target);
	got->target = m->target;
	m->target = NULL;
	con_model_fini(m);
	*m = *got;
	settings_put(m, &st);
	/* The watched task: none, as after a reset (the session watches
	 * again and fills it from the file). */
	m->watch_task = 0;
	m->nwatch = 0;
}

/* @m becomes checkpoint @i's model, keeping its own settings. */
bool con_replay_ckpt_restore(con_replay_t *r, con_model_t *m, size_t i)
{
	con_replay_ckpt_t *c = &r->ckpt[i];
	con_model_t got;
	bool ok;

	if (c->spilled) {
		/* Its blob read back for the while. */
		c->pk.blob = con_xmalloc(c->pk.len ? c->pk.len : 1);
		ok = pread(r->spill_fd, c->pk.blob, c->pk.len,
			   (off_t)c->spill_off) == (ssize_t)c->pk.len &&
		     con_model_unpack(&got, &c->pk);
		free(c->pk.blob);
		c->pk.blob = NULL;
	} else {
		ok = con_model_unpack(&got, &c->pk);
	}
	if (!ok)
		return false;
	con_replay_model_adopt(m, &got);
	r->next = r->ckpt[i].next;
	r->hello_fed = true;
	r->ckpt_restored++;
	return true;
}
