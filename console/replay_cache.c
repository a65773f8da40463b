/* SPDX-License-Identifier: MIT */
/*
 * The side indexes kept in the cache ($XDG_CACHE_HOME/weft/, where a
 * trace's folder is not writable: replay_side.c) are trimmed, so the
 * cache does not grow without bound as traces come and go.  Whenever a
 * console starts writing an index there, and again when it is whole,
 * the folder's *.weftidx and *.weftidx.part files are looked at (a
 * readdir, and per file an fstat, its header and PATH chunk, and the
 * trace's stat and first 4 KiB: milliseconds for hundreds) and removed:
 *
 *   - those whose trace is gone, or is another file now (another
 *     device or inode at its path, or its first bytes changed): the
 *     next open of that path would rebuild them anyway;
 *   - those not used for CON_CACHE_DAYS days (WEFT_CONSOLE_INDEX_CACHE_DAYS);
 *   - then the least recently used first, until what is left is at most
 *     CON_CACHE_MB MiB (WEFT_CONSOLE_INDEX_CACHE_MB).
 *
 * "Used" is the file's mtime: the index pass writes it, and an open
 * that reads a whole one from the cache sets it to now.  The index just
 * written stays, whatever its size; so does any file another console
 * holds a lock on (flock: a writer locks its part from open to close,
 * replay_side.c, part_open()), tested with the file open, then
 * removed only while this side holds that lock, so a writer that opened
 * it in between sees its path gone and opens a new one.  Files this
 * build does not read (another version or layout) are not judged by
 * their trace, only by age and size.  Nothing outside those two names,
 * nor in a subfolder (the fuzzers' corpus lives in ~/.cache/weft/fuzz),
 * is touched.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "replay_internal.h"
#include "replay_side_format.h"

typedef struct ent_s {
	char *path;
	uint64_t size;
	time_t used;
	bool keep, gone;
} ent_t;

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n > t && !strcmp(s + n - t, tail);
}

/*
 * @e removed, when no one holds a lock on it; @stale_only: only when it
 * is an index whose trace is gone or is another file now.  True when it
 * was removed.
 */
static bool ent_remove(ent_t *e, bool stale_only)
{
	struct stat a, b;
	bool rm = !stale_only;
	int fd = open(e->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		return false;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		close(fd); /* being written */
		return false;
	}
	if (stale_only) {
		con_side_peek_t pk;

		if (con_side_peek(fd, &pk) == 1)
			rm = !con_side_head_matches(pk.trace, &pk);
		free(pk.trace);
	}
	/* Still the file looked at (not one put in its place since). */
	if (rm && (fstat(fd, &a) || lstat(e->path, &b) ||
		   a.st_dev != b.st_dev || a.st_ino != b.st_ino))
		rm = false;
	if (rm && unlink(e->path))
		rm = false;
	close(fd); /* the lock goes with it */
	e->gone = rm;
	return rm;
}

static int by_used(const void *pa, const void *pb)
{
	const ent_t *a = pa, *b = pb;

	return a->used < b->used ? -1 : a->used > b->used;
}

size_t con_replay_cache_evict(const char *dir, const char *keep,
			      uint64_t budget, uint64_t max_age, time_t now)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat ks;
	bool have_keep = keep && !stat(keep, &ks);
	ent_t *ents = NULL;
	size_t n = 0, cap = 0, removed = 0;
	uint64_t total = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		struct stat st;
		ent_t e;
		size_t len;

		if (!ends_with(de->d_name, ".weftidx") &&
		    !ends_with(de->d_name, ".weftidx.part"))
			continue;
		len = strlen(dir) + strlen(de->d_name) + 2;
		e.path = con_xmalloc(len);
		snprintf(e.path, len, "%s/%s", dir, de->d_name);
		if (lstat(e.path, &st) || !S_ISREG(st.st_mode)) {
			free(e.path);
			continue;
		}
		e.size = (uint64_t)st.st_size;
		e.used = st.st_mtime;
		e.keep = have_keep && st.st_dev == ks.st_dev &&
			 st.st_ino == ks.st_ino;
		e.gone = false;
		if (n == cap) {
			cap = cap ? 2 * cap : 32;
			ents = con_xreallocarray(ents, cap, sizeof(*ents));
		}
		ents[n++] = e;
		total += e.size;
	}
	closedir(d);

	/* Those of a trace gone or replaced, and those unused too long. */
	for (size_t i = 0; i < n; i++) {
		ent_t *e = &ents[i];
		bool old = now > e->used && (uint64_t)(now - e->used) > max_age;

		if (!e->keep && ent_remove(e, !old)) {
			total -= e->size;
			removed++;
		}
	}
	/* Then the least recently used, until the rest fits. */
	qsort(ents, n, sizeof(*ents), by_used);
	for (size_t i = 0; i < n && total > budget; i++) {
		ent_t *e = &ents[i];

		if (!e->keep && !e->gone && ent_remove(e, false)) {
			total -= e->size;
			removed++;
		}
	}
	for (size_t i = 0; i < n; i++)
		free(ents[i].path);
	free(ents);
	return removed;
}

/* WEFT_CONSOLE_INDEX_CACHE_@name as a number, or @dflt. */
static uint64_t env_num(const char *name, uint64_t dflt)
{
	const char *e = getenv(name);
	char *end;
	unsigned long long v;

	if (!e || !*e)
		return dflt;
	errno = 0;
	v = strtoull(e, &end, 10);
	return errno || *end ? dflt : (uint64_t)v;
}

void con_replay_cache_trim(const char *keep)
{
	uint64_t mb = env_num("WEFT_CONSOLE_INDEX_CACHE_MB", CON_CACHE_MB),
		 days = env_num("WEFT_CONSOLE_INDEX_CACHE_DAYS",
				CON_CACHE_DAYS);
	const char *slash = strrchr(keep, '/');
	char *dir;

	if (!slash || slash == keep)
		return;
	dir = con_xstrdup(keep);
	dir[slash - keep] = '\0';
	con_replay_cache_evict(
		dir, keep, mb > (UINT64_MAX >> 20) ? UINT64_MAX : mb << 20,
		days > UINT64_MAX / 86400 ? UINT64_MAX : days * 86400,
		time(NULL));
	free(dir);
}

/* The cache's name for @trace's index (NULL: no cache folder). */
char *con_side_cache_path(const char *trace)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char dir[4096], *real, *out;
	const char *base = strrchr(trace, '/');
	uint64_t h;
	size_t n;

	if (xdg && *xdg)
		n = (size_t)snprintf(dir, sizeof(dir), "%s/weft", xdg);
	else if (home && *home)
		n = (size_t)snprintf(dir, sizeof(dir), "%s/.cache/weft", home);
	else
		return NULL;
	if (n >= sizeof(dir))
		return NULL;
	real = realpath(trace, NULL);
	h = hash64(HASH0, real ? real : trace, strlen(real ? real : trace));
	free(real);
	base = base ? base + 1 : trace;
	out = con_xmalloc(n + strlen(base) + 64);
	sprintf(out, "%s/%s-%016llx.weftidx", dir, base, (unsigned long long)h);
	return out;
}

/* mkdir -p of @path's folder. */
void con_side_make_dirs(const char *path)
{
	char *d = con_xstrdup(path);

	for (char *p = d + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		(void)mkdir(d, 0700);
		*p = '/';
	}
	free(d);
}
