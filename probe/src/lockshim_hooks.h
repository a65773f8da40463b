/* SPDX-License-Identifier: MIT */
/*
 * What libweft exports for its raw-mutex shim (probe/shim/lockshim.c,
 * libweft-lockshim.so, preloaded) and nothing else: not in the public
 * headers, as applications do not call these.  They stay exported
 * (WEFT_EXTERN): the shim is a library of its own, which reaches them
 * through the dynamic linker.
 *
 * The shim installs a hook that the worker calls when a poll returns
 * PENDING while the thread holds a mutex the shim saw this task take;
 * the hook reports each one with weft_probe_report_lock_held().
 */
#ifndef WEFT_LOCKSHIM_HOOKS_H
#define WEFT_LOCKSHIM_HOOKS_H

#include <stdint.h>

#include "weft/common.h"

typedef void (*weft_probe_raw_lock_hook)(uint64_t task);
/* Any thread; @hook runs on a worker, after the poll, in no lock. */
WEFT_EXTERN void weft_probe_set_raw_lock_hook(weft_probe_raw_lock_hook hook);
/* The task this thread polls now, or 0. */
WEFT_EXTERN uint64_t weft_probe_current_task(void);
/* @name and @site must stay valid for the life of the process. */
WEFT_EXTERN void weft_probe_report_lock_held(uint64_t task, const char *name,
					     const char *site,
					     uint64_t held_ns);

#endif /* WEFT_LOCKSHIM_HOOKS_H */
