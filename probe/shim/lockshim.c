/* SPDX-License-Identifier: MIT */
/*
 * libweft-lockshim.so: catches raw pthread mutexes held across an await,
 * with no change to the application:
 *
 *	LD_PRELOAD=libweft-lockshim.so ./service
 *
 * It interposes pthread_mutex_lock/trylock/unlock.  A lock taken while a
 * task is being polled (weft_probe_current_task() != 0) is remembered in
 * the taking thread's table with the task, the caller's address and the
 * time; when the worker finishes a poll that returned PENDING it calls
 * our hook, which reports every mutex that task still holds in the
 * thread's table (the probe raises "lock held across await", as for
 * weft_mutex_t).  libweft's own locks pass through too but are never held
 * when a poll returns, so they are never reported.
 *
 * An unlock forgets the hold wherever it was remembered: the task that
 * holds a lock across an await is often polled next on another worker and
 * unlocks there.  A hold left behind in the first worker's table would be
 * blamed on the next task there that takes the same lock (its own unlock
 * would forget the stale hold, not its own), and reported as held for
 * ever.  So the tables are global (one claimed per thread that takes a
 * lock in a task), and a task's unlock that does not find its hold in
 * its own thread's table looks in the others' for the hold of the same
 * task.  Only the same task's: an unlock the shim did not see the lock of
 * (pthread_cond_wait() relocks inside glibc; a thread outside any task)
 * or one that fails (EPERM: an error-checking mutex unlocked by another
 * thread) must not forget another task's hold.  Threads outside tasks
 * never look further than their own table.
 *
 * Names and sites are interned once ("pthread_mutex_t 0x5581...",
 * "handler+0x2c (demo)") in bounded tables that live as long as the
 * process, because the probe's records point at them.
 *
 * Cost: every pthread mutex operation in the process goes through a few
 * more instructions, and while a task holds a lock, a task's unlock of
 * one not in its own thread's table reads the others' (16 slots a worker
 * that took a lock); use it while hunting, not by default.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lockshim_hooks.h"
#include "weft/probe.h"
#include "weft/time.h"

#define HELD_MAX 16
#define TABLES_MAX 256
#define INTERN_MAX 4096

/*
 * A thread's holds.  Only the owning thread writes a slot, and only it
 * reads caller and at_ns; any thread may read m and task, and forget a
 * hold by swapping its m for NULL (its task's unlock elsewhere, see
 * above).  Relaxed, both: a hold taken on one thread and released on
 * another was handed over by the runtime's queues (a release there, an
 * acquire here), which orders the owner's stores before the other's
 * look.  A slot once NULL stays NULL until its owner fills it, and the
 * unlocking task holds the mutex while it looks: no new hold of it can
 * be filled in meanwhile (one the shim did not see end may be there: its
 * task differs, and it is left alone).
 */
struct held {
	_Atomic(pthread_mutex_t *) m;
	_Atomic uint64_t task;
	const void *caller;
	uint64_t at_ns;
};

struct table {
	_Atomic bool claimed;
	struct held slot[HELD_MAX];
};

static struct table tables[TABLES_MAX];
/* Tables claimed at least once (the ones an unlock looks in), and holds
 * remembered in all (0: an unlock of a lock not in its own table looks no
 * further).  Relaxed: hints whose staleness the argument above covers. */
static _Atomic unsigned tables_hw;
static _Atomic unsigned holds;
static pthread_key_t table_key;
static bool key_ok;

static int (*real_lock)(pthread_mutex_t *);
static int (*real_trylock)(pthread_mutex_t *);
static int (*real_unlock)(pthread_mutex_t *);

static _Thread_local struct table *mine;
static _Thread_local int busy; /* re-entry from our own calls */

/* ------------------------------------------------------------ interning */

static struct {
	const void *key;
	char *str;
} intern_tab[INTERN_MAX];
static unsigned nintern;
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *intern(const void *key, int is_site)
{
	const char *s = NULL;
	char buf[192];

	busy++;
	real_lock(&intern_lock);
	for (unsigned i = 0; i < nintern; i++) {
		if (intern_tab[i].key == key) {
			s = intern_tab[i].str;
			break;
		}
	}
	if (!s && nintern < INTERN_MAX) {
		if (is_site) {
			Dl_info di;

			const char *base;

			if (!dladdr(key, &di)) {
				snprintf(buf, sizeof(buf), "%p", key);
			} else if (di.dli_sname) {
				snprintf(buf, sizeof(buf), "%s+0x%lx",
					 di.dli_sname,
					 (unsigned long)((uintptr_t)key -
							 (uintptr_t)di.dli_saddr));
			} else {
				/* A static function: file+offset, for addr2line. */
				base = di.dli_fname ? strrchr(di.dli_fname, '/')
						    : NULL;
				snprintf(buf, sizeof(buf), "%s+0x%lx",
					 base ? base + 1
					      : di.dli_fname ? di.dli_fname : "?",
					 (unsigned long)((uintptr_t)key -
							 (uintptr_t)di.dli_fbase));
			}
		} else {
			snprintf(buf, sizeof(buf), "pthread_mutex_t %p", key);
		}
		intern_tab[nintern].key = key;
		intern_tab[nintern].str = strdup(buf);
		s = intern_tab[nintern].str;
		if (s)
			nintern++;
	}
	real_unlock(&intern_lock);
	busy--;
	return s ? s : (is_site ? "(unknown site)" : "pthread_mutex_t");
}

/* -------------------------------------------------------------- tables */

/* Forgets slot @h's hold if it still is @m's; true if this call did. */
static bool forget(struct held *h, pthread_mutex_t *m)
{
	pthread_mutex_t *want = m;

	if (!__atomic_compare_exchange_n(&h->m, &want, NULL, false,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return false;
	__atomic_fetch_sub(&holds, 1, __ATOMIC_RELAXED);
	return true;
}

/* At the thread's exit: its holds forgotten, its table free again. */
static void table_release(void *arg)
{
	struct table *t = arg;

	for (unsigned i = 0; i < HELD_MAX; i++) {
		pthread_mutex_t *m =
			__atomic_load_n(&t->slot[i].m, __ATOMIC_RELAXED);

		if (m)
			forget(&t->slot[i], m);
	}
	mine = NULL;
	__atomic_store_n(&t->claimed, false, __ATOMIC_RELEASE);
}

/* This thread's table, claimed on first use; NULL when all are taken. */
static struct table *table(void)
{
	if (mine)
		return mine;
	for (unsigned i = 0; i < TABLES_MAX; i++) {
		bool no = false;
		unsigned hw;

		/* Acquire: the last owner's forgetting (table_release()).
		 * Looked at first: a full array is no write a lock. */
		if (__atomic_load_n(&tables[i].claimed, __ATOMIC_RELAXED) ||
		    !__atomic_compare_exchange_n(&tables[i].claimed, &no, true,
						 false, __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			continue;
		hw = __atomic_load_n(&tables_hw, __ATOMIC_RELAXED);
		while (hw < i + 1 &&
		       !__atomic_compare_exchange_n(&tables_hw, &hw, i + 1,
						    false, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED))
			;
		mine = &tables[i];
		busy++;
		/* Without the key it is never released: kept for good. */
		if (key_ok)
			(void)pthread_setspecific(table_key, mine);
		busy--;
		return mine;
	}
	return NULL;
}

/* ---------------------------------------------------------------- hook */

static void at_pending(uint64_t task)
{
	uint64_t now;

	if (!mine || !__atomic_load_n(&holds, __ATOMIC_RELAXED))
		return;
	now = weft_now_ns();
	for (unsigned i = 0; i < HELD_MAX; i++) {
		struct held *h = &mine->slot[i];
		pthread_mutex_t *m = __atomic_load_n(&h->m, __ATOMIC_RELAXED);

		if (!m || __atomic_load_n(&h->task, __ATOMIC_RELAXED) != task)
			continue;
		weft_probe_report_lock_held(task, intern(m, 0),
					    intern(h->caller, 1),
					    now - h->at_ns);
	}
}

__attribute__((constructor)) static void shim_init(void)
{
	real_lock = dlsym(RTLD_NEXT, "pthread_mutex_lock");
	real_trylock = dlsym(RTLD_NEXT, "pthread_mutex_trylock");
	real_unlock = dlsym(RTLD_NEXT, "pthread_mutex_unlock");
	key_ok = !pthread_key_create(&table_key, table_release);
	weft_probe_set_raw_lock_hook(at_pending);
}

static void taken(pthread_mutex_t *m, const void *caller)
{
	struct table *t;
	uint64_t task;

	if (busy)
		return;
	task = weft_probe_current_task();
	if (!task || !(t = table()))
		return;
	for (unsigned i = 0; i < HELD_MAX; i++) {
		struct held *h = &t->slot[i];

		if (__atomic_load_n(&h->m, __ATOMIC_RELAXED))
			continue;
		__atomic_store_n(&h->task, task, __ATOMIC_RELAXED);
		h->caller = caller;
		h->at_ns = weft_now_ns();
		/* Counted first: a look that sees the hold sees a count. */
		__atomic_fetch_add(&holds, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&h->m, m, __ATOMIC_RELAXED);
		return;
	}
}

/*
 * @m is about to be unlocked: its hold forgotten.  In this thread's table
 * the unlocking task's hold first, else any hold of @m there (a task
 * that unlocks another's on the same thread: a recursive mutex, a lock
 * handed over); then, for a task, its own hold in the other threads'
 * tables (see above).  Before the real unlock, so that a hold another
 * thread takes next is never the one forgotten.
 */
static void released(pthread_mutex_t *m)
{
	struct held *other = NULL;
	uint64_t task;
	unsigned hw;

	if (!__atomic_load_n(&holds, __ATOMIC_RELAXED))
		return;
	task = weft_probe_current_task();
	if (mine) {
		for (unsigned i = 0; i < HELD_MAX; i++) {
			struct held *h = &mine->slot[i];

			if (__atomic_load_n(&h->m, __ATOMIC_RELAXED) != m)
				continue;
			if (__atomic_load_n(&h->task, __ATOMIC_RELAXED) ==
				    task &&
			    forget(h, m))
				return;
			if (!other)
				other = h;
		}
		if (other && forget(other, m))
			return;
	}
	if (!task)
		return;
	hw = __atomic_load_n(&tables_hw, __ATOMIC_RELAXED);
	for (unsigned t = 0; t < hw; t++) {
		if (&tables[t] == mine)
			continue;
		for (unsigned i = 0; i < HELD_MAX; i++) {
			struct held *h = &tables[t].slot[i];

			if (__atomic_load_n(&h->m, __ATOMIC_RELAXED) == m &&
			    __atomic_load_n(&h->task, __ATOMIC_RELAXED) ==
				    task &&
			    forget(h, m))
				return;
		}
	}
}

__attribute__((visibility("default"))) int
pthread_mutex_lock(pthread_mutex_t *m)
{
	int rc;

	if (!real_lock)
		real_lock = dlsym(RTLD_NEXT, "pthread_mutex_lock");
	rc = real_lock(m);
	if (rc == 0)
		taken(m, __builtin_return_address(0));
	return rc;
}

__attribute__((visibility("default"))) int
pthread_mutex_trylock(pthread_mutex_t *m)
{
	int rc;

	if (!real_trylock)
		real_trylock = dlsym(RTLD_NEXT, "pthread_mutex_trylock");
	rc = real_trylock(m);
	if (rc == 0)
		taken(m, __builtin_return_address(0));
	return rc;
}

__attribute__((visibility("default"))) int
pthread_mutex_unlock(pthread_mutex_t *m)
{
	if (!real_unlock)
		real_unlock = dlsym(RTLD_NEXT, "pthread_mutex_unlock");
	released(m);
	return real_unlock(m);
}
