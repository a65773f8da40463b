/* SPDX-License-Identifier: MIT */
/*
 * The replay's side index (console/replay_side.c, issue 21) on real
 * traces written by weft-bench-gentrace (its path is argv[1]; 12 MB
 * each): written by a first open and reused by the second (which reads
 * far less than the trace: /proc/self/io's rchar), gone on from when a
 * pass was cut short, rebuilt when the
 * trace is replaced, extended when it grew, ignored where it is corrupt
 * (bytes flipped, cut short) with no crash and no wrong screen, and
 * written to $XDG_CACHE_HOME/weft/ when the trace's folder is not
 * writable.  "Right" is always: the model after a seek equals the one a
 * replay with no side index (WEFT_CONSOLE_INDEX=0) makes, compared by a
 * digest of its tasks, workers, warnings, resources and counters.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "console.h"
#include "replay_internal.h"

static const char *gentrace;
static char dir[256], trace[320], idx[340], part[350], cache[300];

static void ref_forget(void);

static void gen(const char *path, const char *bytes, unsigned seed)
{
	char cmd[1024];

	ref_forget();
	snprintf(cmd, sizeof(cmd),
		 "'%s' '%s' --bytes %s --seed %u --quiet >/dev/null", gentrace,
		 path, bytes, seed);
	assert_int_equal(system(cmd), 0);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = mix(h, (uint8_t)*s);
	return h;
}

/* What the screens show of @m, as one number. */
static uint64_t digest(const con_model_t *m)
{
	uint64_t h = mix(0, m->ntasks);

	h = mix(h, m->now_ns);
	h = mix(h, m->updates);
	h = mix(h, m->batches);
	h = mix(h, m->events);
	h = mix(h, m->nwarnings);
	h = mix(h, m->nres);
	h = mix(h, m->tl_last);
	h = mix(h, m->nrecent);
	h = mix(h, m->nworkers);
	h = mix(h, m->stats.live_tasks);
	h = mix_str(h, m->process);
	for (size_t i = 0; i < m->ntasks; i++) {
		const con_task_t *t = m->tasks[i];

		h = mix(h, t->id);
		h = mix(h, t->polls);
		h = mix(h, t->busy_ns);
		h = mix(h, t->state);
		h = mix(h, t->finished_ns);
		h = mix_str(h, t->name);
	}
	for (uint32_t i = 0; i < m->nworkers; i++) {
		h = mix(h, m->workers[i].counters.polls);
		h = mix(h, m->workers[i].series ?
				   m->workers[i].series->tl_poll_ns[3] :
				   0);
	}
	for (size_t i = 0; i < m->nwarnings; i++) {
		h = mix(h, m->warnings[i].seq);
		h = mix_str(h, m->warnings[i].detail);
	}
	for (size_t i = 0; i < m->nres; i++)
		h = mix(h, m->res[i]->id ^ m->res[i]->acquires);
	if (m->recent && m->nrecent)
		h = mix(h, m->recent[(m->nrecent - 1) % m->recent_cap].ts);
	return h;
}

/* Bytes this process has read (rchar: every read(2), cached or not). */
static uint64_t rchar(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	unsigned long long v = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "rchar: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

static const double at[] = { 0.1, 0.5, 0.9, 1.0, 0.3 };
#define NAT (sizeof(at) / sizeof(at[0]))

/* The digests after seeks to at[] of @path's time; the replay's side
 * index state in *@loaded, its side restores in *@restored. */
static void seeks(const char *path, bool side, uint64_t *d, int *loaded,
		  uint64_t *restored)
{
	con_replay_t r;
	con_model_t m;

	if (side)
		unsetenv("WEFT_CONSOLE_INDEX");
	else
		setenv("WEFT_CONSOLE_INDEX", "0", 1);
	assert_int_equal(con_replay_open_lazy(&r, path, 0), 0);
	if (loaded)
		*loaded = r.side_loaded;
	con_replay_index(&r, UINT64_MAX);
	con_model_init(&m, "t");
	m.mode = CON_MODE_REPLAY;
	for (size_t i = 0; i < NAT; i++) {
		con_replay_seek(
			&r, &m,
			r.first_ns + (uint64_t)(at[i] * (double)(r.last_ns -
								 r.first_ns)));
		d[i] = digest(&m);
	}
	/* The records' bits too: the next warning, a task's events read
	 * back from the batches before the position. */
	d[NAT - 1] = mix(d[NAT - 1], con_replay_next_warning(&r));
	if (m.ntasks) {
		weft_event_t ev[16];
		size_t n = con_replay_task_events(&r, m.tasks[m.ntasks / 2]->id,
						  ev, 16);

		d[NAT - 1] = mix(d[NAT - 1], n);
		for (size_t i = 0; i < n; i++)
			d[NAT - 1] = mix(d[NAT - 1], ev[i].ts);
	}
	if (restored)
		*restored = r.side_restored;
	con_model_fini(&m);
	con_replay_close(&r);
	unsetenv("WEFT_CONSOLE_INDEX");
}

/*
 * The screens with no index, kept for the trace they were made of: the
 * tests corrupt the index, not the trace, many times over (a replay of
 * 12 MB takes seconds under ASan).  Another file, or the same rewritten,
 * has another inode, size or time.
 */
static struct {
	char path[400];
	struct stat st;
	uint64_t d[NAT];
} ref_kept;

static void ref_forget(void)
{
	ref_kept.path[0] = '\0';
}

static void reference(const char *path, uint64_t *d)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	if (strcmp(ref_kept.path, path) || st.st_ino != ref_kept.st.st_ino ||
	    st.st_dev != ref_kept.st.st_dev ||
	    st.st_size != ref_kept.st.st_size ||
	    st.st_mtim.tv_sec != ref_kept.st.st_mtim.tv_sec ||
	    st.st_mtim.tv_nsec != ref_kept.st.st_mtim.tv_nsec) {
		seeks(path, false, ref_kept.d, NULL, NULL);
		snprintf(ref_kept.path, sizeof(ref_kept.path), "%s", path);
		ref_kept.st = st;
	}
	memcpy(d, ref_kept.d, sizeof(ref_kept.d));
}

static void assert_right(const char *path, int want_loaded)
{
	uint64_t ref[NAT], got[NAT], restored;
	int loaded;

	reference(path, ref);
	seeks(path, true, got, &loaded, &restored);
	if (want_loaded >= 0)
		assert_int_equal(loaded, want_loaded);
	for (size_t i = 0; i < NAT; i++)
		assert_true(got[i] == ref[i]);
}

static mode_t current_umask(void)
{
	mode_t m = umask(0);

	umask(m);
	return m;
}

static bool exists(const char *p)
{
	return access(p, F_OK) == 0;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "%s/weft-side-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(dir));
	snprintf(trace, sizeof(trace), "%s/t.weft", dir);
	snprintf(idx, sizeof(idx), "%s.weftidx", trace);
	snprintf(part, sizeof(part), "%s.part", idx);
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	setenv("XDG_CACHE_HOME", cache, 1);
	return 0;
}

static int teardown(void **state)
{
	char cmd[600];

	(void)state;
	chmod(dir, 0700);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

/* Written by the first open, whole; the second reads it, not the trace,
 * and its seeks restore its checkpoints to the same screens. */
static void test_console_side_written_reused(void **state)
{
	uint64_t ref[NAT], got[NAT], restored, before, read;
	con_replay_t r;
	struct stat st;
	int loaded;

	(void)state;
	gen(trace, "12M", 1);
	seeks(trace, false, ref, NULL, NULL);
	assert_false(exists(idx));
	seeks(trace, true, got, &loaded, NULL);
	assert_int_equal(loaded, 0);
	assert_true(exists(idx));
	assert_false(exists(part));
	for (size_t i = 0; i < NAT; i++)
		assert_true(got[i] == ref[i]);
	/* A small part of the trace's size, as readable as the trace. */
	assert_int_equal(stat(idx, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644 & ~current_umask());
	{
		struct stat ts;

		assert_int_equal(stat(trace, &ts), 0);
		assert_true(st.st_size < ts.st_size / 2);
	}

	/* The second open: the whole index at once, reading a fraction of
	 * the trace's bytes (its header, the index's records). */
	before = rchar();
	assert_int_equal(con_replay_open_lazy(&r, trace, 0), 0);
	read = rchar() - before;
	assert_int_equal(r.side_loaded, 1);
	assert_true(r.indexed);
	assert_true(read < 2u << 20);
	con_replay_close(&r);

	seeks(trace, true, got, &loaded, &restored);
	assert_int_equal(loaded, 1);
	assert_true(restored > 0);
	for (size_t i = 0; i < NAT; i++)
		assert_true(got[i] == ref[i]);
}

/* An index pass cut short (the console quit) keeps what it wrote: the
 * next open goes on from its last checkpoint, and ends it whole. */
static void test_console_side_cut_short(void **state)
{
	con_replay_t r;
	struct stat st;

	(void)state;
	gen(trace, "12M", 6);
	/* A private trace: its index private too. */
	assert_int_equal(chmod(trace, 0600), 0);
	assert_int_equal(con_replay_open_lazy(&r, trace, 0), 0);
	while (!r.indexed && r.indexed_bytes < (10u << 20))
		con_replay_index(&r, 1);
	assert_false(r.indexed);
	con_replay_close(&r);
	assert_true(exists(part));
	assert_false(exists(idx));
	assert_int_equal(stat(part, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_right(trace, 2);
	assert_true(exists(idx));
	assert_false(exists(part));
}

/* A trace replaced (another file by rename; the same file rewritten)
 * is indexed anew, not read through the old index. */
static void test_console_side_stale_replaced(void **state)
{
	char tmp[400];

	(void)state;
	gen(trace, "12M", 1);
	assert_right(trace, 0);
	snprintf(tmp, sizeof(tmp), "%s/other.weft", dir);
	gen(tmp, "12M", 7);
	assert_int_equal(rename(tmp, trace), 0);
	assert_right(trace, 0);
	/* Rewritten in place (same inode), another seed, same size. */
	gen(trace, "12M", 3);
	assert_right(trace, 0);
}

/* Copies @len bytes of @from into @to from @off (appending). */
static void copy_range(const char *from, const char *to, off_t off, size_t len,
		       bool append)
{
	int in = open(from, O_RDONLY), out;
	char *buf = malloc(len);

	assert_true(in >= 0 && buf);
	out = open(to, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC),
		   0644);
	assert_true(out >= 0);
	assert_int_equal(pread(in, buf, len, off), (ssize_t)len);
	assert_int_equal(write(out, buf, len), (ssize_t)len);
	close(in);
	close(out);
	free(buf);
}

/* A trace that grew (being recorded): its index is extended from its
 * end's mark, not rebuilt, and ends whole again. */
static void test_console_side_grown(void **state)
{
	char full[400];
	con_replay_t r;
	struct stat st;
	uint64_t cut;

	(void)state;
	snprintf(full, sizeof(full), "%s/full.weft", dir);
	gen(full, "12M", 5);
	setenv("WEFT_CONSOLE_INDEX", "0", 1);
	assert_int_equal(con_replay_open(&r, full), 0);
	cut = r.rec[r.n * 6 / 10].off;
	con_replay_close(&r);
	unsetenv("WEFT_CONSOLE_INDEX");
	assert_int_equal(stat(full, &st), 0);

	copy_range(full, trace, 0, (size_t)cut, false);
	assert_right(trace, 0);
	assert_true(exists(idx));
	copy_range(full, trace, (off_t)cut,
		   (size_t)((uint64_t)st.st_size - cut), true);
	assert_right(trace, 2);
	assert_true(exists(idx));
	assert_false(exists(part));
	assert_right(trace, 1);
}

static void flip(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, off), 1);
	b ^= 0x5a;
	assert_int_equal(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

/* Bytes flipped anywhere in the index, or the index cut short: no
 * crash, the same screens as with no index (a checkpoint that does not
 * check is not restored; a chunk that does not check ends what is
 * used), and the index made whole again. */
static void test_console_side_corrupt(void **state)
{
	struct stat st;

	(void)state;
	gen(trace, "12M", 2);
	assert_right(trace, 0);
	assert_int_equal(stat(idx, &st), 0);
	/* In every eighth of it: headers, records, checkpoints. */
	for (int k = 1; k < 8; k++) {
		flip(idx, st.st_size * k / 8);
		assert_right(trace, -1);
		if (exists(idx))
			flip(idx, st.st_size * k / 8);
	}
	/* Its checkpoints' bytes, the rest good: they do not read back
	 * (checked at restore). */
	assert_right(trace, -1);
	assert_int_equal(stat(idx, &st), 0);
	for (int k = 1; k < 64; k++)
		flip(idx, st.st_size * k / 64 + 17);
	assert_right(trace, -1);
	/* Cut short, at a few places, and to nothing. */
	for (int k = 3; k >= 0; k--) {
		assert_right(trace, -1);
		assert_int_equal(stat(idx, &st), 0);
		assert_int_equal(truncate(idx, st.st_size * k / 4), 0);
		assert_right(trace, -1);
	}
	assert_true(exists(idx));
}

/* A whole index is read from its TOC (replay_side.c: the records again
 * and the checkpoints' places, at its end, a trailer pointing at it):
 * its first chunk after the PATH broken, which stops a walk of the
 * chunks, it still opens whole and right.  A TOC that does not check,
 * or a trailer cut off: the chunks are walked (whole, right); both: the
 * index is rebuilt, still right. */
static void test_console_side_toc(void **state)
{
	char tail[8], *real;
	struct stat st;
	off_t first;
	int fd;

	(void)state;
	gen(trace, "12M", 8);
	assert_right(trace, 0);
	assert_int_equal(stat(idx, &st), 0);
	fd = open(idx, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, tail, 8, st.st_size - 24), 8);
	close(fd);
	assert_memory_equal(tail, "WEFTTOC", 8);
	/* The header (64 bytes), the PATH chunk (32 and the real path):
	 * the first RECS chunk's header, its type. */
	real = realpath(trace, NULL);
	assert_non_null(real);
	first = 64 + 32 + (off_t)strlen(real) + 1;
	free(real);
	flip(idx, first);
	assert_right(trace, 1);

	flip(idx, first);
	flip(idx, st.st_size - 24 - 8);
	assert_right(trace, 1);
	flip(idx, st.st_size - 24 - 8);
	assert_int_equal(truncate(idx, st.st_size - 24), 0);
	assert_right(trace, 1);

	flip(idx, first);
	assert_right(trace, -1);
	assert_right(trace, 1);
}

/* A saved model's bytes flipped or cut (past the checksum: as if it
 * matched) read back as false or as some model, never past the bytes
 * (ASan) nor into a crash. */
static void test_console_side_load_bad(void **state)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	con_replay_t r;
	con_model_t m, got;
	con_saved_t sv;
	uint8_t *p;
	int ok = 0, rounds = 300;

	(void)state;
	gen(trace, "3M", 8);
	setenv("WEFT_CONSOLE_INDEX", "0", 1);
	assert_int_equal(con_replay_open(&r, trace), 0);
	con_model_init(&m, "t");
	con_replay_seek(&r, &m, r.last_ns);
	con_replay_close(&r);
	unsetenv("WEFT_CONSOLE_INDEX");
	con_model_save(&sv, &m);
	assert_true(con_model_load(&got, sv.p, sv.len));
	assert_true(digest(&got) == digest(&m));
	con_model_fini(&got);
	p = malloc(sv.len);
	assert_non_null(p);
	/* WEFT_TEST_SIDE_ROUNDS=N: more rounds, X: another seed. */
	if (getenv("WEFT_TEST_SIDE_ROUNDS"))
		rounds = atoi(getenv("WEFT_TEST_SIDE_ROUNDS"));
	if (getenv("WEFT_TEST_SIDE_SEED"))
		x += strtoull(getenv("WEFT_TEST_SIDE_SEED"), NULL, 10);
	for (int i = 0; i < rounds; i++) {
		size_t len = sv.len;

		memcpy(p, sv.p, sv.len);
		for (int k = 0; k < 1 + i % 4; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* Most of them in the rest's first 64 KiB (counts,
			 * lengths, flags), the others anywhere. */
			p[(i % 3 ? x % (sv.len < 65536 ? sv.len : 65536) :
				   x % sv.len)] ^= (uint8_t)(1u << (x >> 61));
		}
		if (i % 5 == 4)
			len = (size_t)(x % sv.len);
		if (con_model_load(&got, p, len)) {
			ok++;
			con_model_fini(&got);
		}
	}
	free(p);
	con_saved_free(&sv);
	con_model_fini(&m);
	(void)ok;
}

/* A file of @len bytes of @c at @path, last used @ago seconds ago. */
static void put_file(const char *path, size_t len, int c, time_t ago)
{
	char buf[4096];
	struct timespec ts[2];
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	memset(buf, c, sizeof(buf));
	for (size_t n = 0; n < len; n += sizeof(buf))
		assert_int_equal(fwrite(buf, 1,
					len - n < sizeof(buf) ? len - n :
								sizeof(buf),
					f),
				 len - n < sizeof(buf) ? len - n : sizeof(buf));
	assert_int_equal(fclose(f), 0);
	ts[0].tv_sec = ts[1].tv_sec = time(NULL) - ago;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static void set_used(const char *path, time_t ago)
{
	struct timespec ts[2];

	ts[0].tv_sec = ts[1].tv_sec = time(NULL) - ago;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* @trace's whole index (written next to it) moved to @to. */
static void index_into(const char *tr, const char *to)
{
	char ix[400];
	uint64_t d[NAT];
	int loaded;

	snprintf(ix, sizeof(ix), "%s.weftidx", tr);
	seeks(tr, true, d, &loaded, NULL);
	assert_int_equal(loaded, 0);
	assert_int_equal(rename(ix, to), 0);
}

/*
 * The cache's trim (replay_cache.c) on real indexes and others: those
 * whose trace is gone or was replaced go, then those unused too long,
 * then the least recently used down to the budget; the one just written,
 * a locked one, files of other names and subfolders stay.
 */
static void test_console_side_cache_evict(void **state)
{
	char cdir[320], ta[320], tb[320], tc[320], ea[400], eb[400], ec[400],
		junk[400], part2[400], notes[400], sub[400], subf[400];
	time_t now = time(NULL);
	int fd;

	(void)state;
	snprintf(cdir, sizeof(cdir), "%s/weft", cache);
	assert_int_equal(mkdir(cache, 0700), 0);
	assert_int_equal(mkdir(cdir, 0700), 0);
	snprintf(ta, sizeof(ta), "%s/a.weft", dir);
	snprintf(tb, sizeof(tb), "%s/b.weft", dir);
	snprintf(tc, sizeof(tc), "%s/c.weft", dir);
	snprintf(ea, sizeof(ea), "%s/a.weft-00000000000000aa.weftidx", cdir);
	snprintf(eb, sizeof(eb), "%s/b.weft-00000000000000bb.weftidx", cdir);
	snprintf(ec, sizeof(ec), "%s/c.weft-00000000000000cc.weftidx", cdir);
	snprintf(junk, sizeof(junk), "%s/junk.weftidx", cdir);
	snprintf(part2, sizeof(part2),
		 "%s/d.weft-00000000000000dd.weftidx.part", cdir);
	snprintf(notes, sizeof(notes), "%s/notes.txt", cdir);
	snprintf(sub, sizeof(sub), "%s/fuzz", cdir);
	snprintf(subf, sizeof(subf), "%s/fuzz/x.weftidx", cdir);
	gen(ta, "4M", 11);
	gen(tb, "4M", 12);
	gen(tc, "4M", 13);
	index_into(ta, ea);
	index_into(tb, eb);
	index_into(tc, ec);
	put_file(junk, 1000, 'j', 10);
	put_file(part2, 1000, 'p', 10);
	put_file(notes, 1000, 'n', 100 * 86400);
	assert_int_equal(mkdir(sub, 0700), 0);
	put_file(subf, 1000, 'x', 100 * 86400);

	/* Nothing stale, nothing old, all fit: nothing goes. */
	assert_int_equal(con_replay_cache_evict(cdir, NULL, UINT64_MAX,
						30 * 86400, now),
			 0);
	/* a's trace gone, b's another file at its path (the same path
	 * written anew: its first bytes differ): both go; c, whose trace
	 * is there, and the files this build does not read, stay. */
	assert_int_equal(unlink(ta), 0);
	gen(tb, "4M", 14);
	assert_int_equal(con_replay_cache_evict(cdir, NULL, UINT64_MAX,
						30 * 86400, now),
			 2);
	assert_false(exists(ea));
	assert_false(exists(eb));
	assert_true(exists(ec));
	assert_true(exists(junk));
	assert_true(exists(part2));

	/* Unused for 31 days: goes, unless locked (being written). */
	set_used(junk, 31 * 86400);
	set_used(part2, 31 * 86400);
	fd = open(part2, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	assert_int_equal(con_replay_cache_evict(cdir, NULL, UINT64_MAX,
						30 * 86400, now),
			 1);
	assert_false(exists(junk));
	assert_true(exists(part2));

	/* Over the budget: the least recently used first, never the one
	 * kept nor the locked one.  c (1 h ago) and e (2 h ago) and f (3 h
	 * ago), 1000 bytes each besides c's size; room for c and one. */
	{
		char ee[400], ef[400];
		struct stat cs;

		snprintf(ee, sizeof(ee), "%s/e.weftidx", cdir);
		snprintf(ef, sizeof(ef), "%s/f.weftidx.part", cdir);
		put_file(ee, 1000, 'e', 2 * 3600);
		put_file(ef, 1000, 'f', 3 * 3600);
		set_used(ec, 3600);
		assert_int_equal(stat(ec, &cs), 0);
		/* The budget counts the locked part's 1000 too. */
		assert_int_equal(
			con_replay_cache_evict(cdir, NULL,
					       (uint64_t)cs.st_size + 2000,
					       30 * 86400, now),
			1);
		assert_false(exists(ef));
		assert_true(exists(ee));
		assert_true(exists(ec));
		/* Kept: e is the one just written; c goes instead (older
		 * than e by its time now). */
		set_used(ec, 4 * 3600);
		assert_int_equal(con_replay_cache_evict(cdir, ee, 1000,
							30 * 86400, now),
				 1);
		assert_false(exists(ec));
		assert_true(exists(ee));
		assert_true(exists(part2));
	}
	close(fd);
	/* The lock gone: the old part goes too. */
	assert_int_equal(con_replay_cache_evict(cdir, NULL, UINT64_MAX,
						30 * 86400, now),
			 1);
	assert_false(exists(part2));
	/* Other names and subfolders never. */
	assert_true(exists(notes));
	assert_true(exists(subf));
}

/* A console writing an index holds a lock on its part: a trim of its
 * folder leaves it (and its pass ends whole), while an unlocked old
 * part beside it goes. */
static void test_console_side_cache_writer_locked(void **state)
{
	char other[400];
	con_replay_t r;

	(void)state;
	gen(trace, "12M", 15);
	snprintf(other, sizeof(other), "%s/o.weft.weftidx.part", dir);
	put_file(other, 1000, 'o', 10);
	assert_int_equal(con_replay_open_lazy(&r, trace, 0), 0);
	assert_false(r.indexed);
	assert_true(exists(part));
	assert_int_equal(con_replay_cache_evict(dir, NULL, 0, 0, time(NULL)),
			 1);
	assert_false(exists(other));
	assert_true(exists(part));
	con_replay_index(&r, UINT64_MAX);
	assert_true(r.side->done);
	con_replay_close(&r);
	assert_true(exists(idx));
	assert_right(trace, 1);
}

/* The trace's folder not writable: the index goes to the cache (as
 * another user when root, whom permissions do not stop), and the cache
 * is trimmed as it is written. */
static void test_console_side_readonly(void **state)
{
	char cdir[400], old[500], recent[500];
	pid_t pid;
	int status;

	(void)state;
	gen(trace, "12M", 4);
	assert_int_equal(mkdir(cache, 0777), 0);
	assert_int_equal(chmod(cache, 0777), 0);
	/* The cache holds an index unused for 40 days and a recent one:
	 * the index written there trims the first (replay_cache.c). */
	snprintf(cdir, sizeof(cdir), "%s/weft", cache);
	snprintf(old, sizeof(old), "%s/old.weft-0123456789abcdef.weftidx",
		 cdir);
	snprintf(recent, sizeof(recent), "%s/new.weft-0123456789abcdef.weftidx",
		 cdir);
	assert_int_equal(mkdir(cdir, 0700), 0);
	put_file(old, 1000, 'o', 40 * 86400);
	put_file(recent, 1000, 'n', 60);
	if (geteuid() == 0)
		assert_int_equal(chown(cdir, 65534, 65534) ||
					 chown(old, 65534, 65534) ||
					 chown(recent, 65534, 65534),
				 0);
	assert_int_equal(chmod(dir, 0555), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		uint64_t d[NAT];
		int loaded = -1;

		if (geteuid() == 0 && (setgid(65534) || setuid(65534)))
			_exit(3);
		seeks(trace, true, d, &loaded, NULL);
		if (loaded != 0)
			_exit(4);
		seeks(trace, true, d, &loaded, NULL);
		_exit(loaded == 1 ? 0 : 5);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(chmod(dir, 0700), 0);
	assert_false(exists(idx));
	assert_false(exists(old));
	assert_true(exists(recent));
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd),
			 "ls '%s' | grep -q '^t.weft-[0-9a-f]*\\.weftidx$'",
			 cdir);
		assert_int_equal(system(cmd), 0);
	}
	/* And it is right (read from the cache, as the owner). */
	assert_right(trace, 1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_console_side_written_reused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_console_side_cut_short,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_console_side_stale_replaced, setup, teardown),
		cmocka_unit_test_setup_teardown(test_console_side_grown, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_console_side_corrupt,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_console_side_toc, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_console_side_load_bad,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_console_side_readonly,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_console_side_cache_evict,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_console_side_cache_writer_locked, setup, teardown),
	};

	if (argc < 2) {
		fprintf(stderr,
			"usage: test_console_side WEFT_BENCH_GENTRACE\n");
		return 2;
	}
	gentrace = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
