/* SPDX-License-Identifier: MIT */
/*
 * libweft-lockshim.so: catches raw pthread mutexes held across an await,
 * with no change to the application:
 *
 *	LD_PRELOAD=libweft-lockshim.so ./service
 *
 * It interposes pthread_mutex_lock/trylock/unlock.  A lock taken while a
 * task is being polled (weft_probe_current_task() != 0) is remembered in a
 * small per-thread table with the task, the caller's address and the time;
 * when the worker finishes a poll that returned PENDING it calls our hook,
 * which reports every mutex that task still holds (the probe raises "lock
 * held across await", as for weft_mutex_t).  libweft's own locks pass
 * through too but are never held when a poll returns, so they are never
 * reported.
 *
 * Names and sites are interned once ("pthread_mutex_t 0x5581...",
 * "handler+0x2c (demo)") in bounded tables that live as long as the
 * process, because the probe's records point at them.
 *
 * Cost: every pthread mutex operation in the process goes through a few
 * more instructions; use it while hunting, not by default.
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
#define INTERN_MAX 4096

struct held {
	pthread_mutex_t *m;
	uint64_t task;
	const void *caller;
	uint64_t at_ns;
};

static int (*real_lock)(pthread_mutex_t *);
static int (*real_trylock)(pthread_mutex_t *);
static int (*real_unlock)(pthread_mutex_t *);

static _Thread_local struct held held[HELD_MAX];
static _Thread_local unsigned nheld;
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

/* ---------------------------------------------------------------- hook */

static void at_pending(uint64_t task)
{
	uint64_t now = weft_now_ns();

	for (unsigned i = 0; i < nheld; i++) {
		if (held[i].task != task)
			continue;
		weft_probe_report_lock_held(task, intern(held[i].m, 0),
					    intern(held[i].caller, 1),
					    now - held[i].at_ns);
	}
}

__attribute__((constructor)) static void shim_init(void)
{
	real_lock = dlsym(RTLD_NEXT, "pthread_mutex_lock");
	real_trylock = dlsym(RTLD_NEXT, "pthread_mutex_trylock");
	real_unlock = dlsym(RTLD_NEXT, "pthread_mutex_unlock");
	weft_probe_set_raw_lock_hook(at_pending);
}

static void taken(pthread_mutex_t *m, const void *caller)
{
	uint64_t task;

	if (busy)
		return;
	task = weft_probe_current_task();
	if (!task || nheld == HELD_MAX)
		return;
	held[nheld++] = (struct held){ m, task, caller, weft_now_ns() };
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
	for (unsigned i = 0; i < nheld; i++) {
		if (held[i].m == m) {
			held[i] = held[--nheld];
			break;
		}
	}
	return real_unlock(m);
}
