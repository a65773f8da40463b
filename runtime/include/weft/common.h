/* SPDX-License-Identifier: MIT */
/*
 * Definitions shared by every public weft header: the export macro, the
 * error convention and the version.
 *
 * Error convention: every function that can fail returns an int, 0 on
 * success or a negative errno value; each function documents the values it
 * can return.  Functions named *_try_* return bool.  A call that fails never
 * fires its callback or waker.
 *
 * ABI that can grow.  A struct's size and the offsets of its fields are
 * part of libweft.so's ABI as much as its functions are: a program built
 * against these headers allocates the struct, or walks an array of it,
 * with the sizes it was built with.  So every public struct is one of
 * four kinds, and says which:
 *
 * - Caller-filled, may grow (weft_config_t, weft_spawn_t,
 *   weft_blocking_spec_t, weft_fiber_opts_t, weft_probe_sub_opts_t,
 *   weft_trace_opts_t, weft_metrics_endpoint_opts_t): ends with
 *   `uint64_t reserved_[N]`, which must be zero.  Designated initialisers
 *   (`&(weft_config_t){ .workers = 2 }`), `= { 0 }` and memset() zero it;
 *   the spawn macros do too.  Every call that reads such a struct checks,
 *   and returns -EINVAL for a reserved word that is not zero: a program
 *   built against newer headers, that sets a field this library does not
 *   know, is refused rather than silently given the old behaviour.
 * - Library-filled, may grow (weft_runtime_metrics_t,
 *   weft_worker_metrics_t, weft_probe_config_t and the probe's model,
 *   weft_probe_task_t, _worker_t, _resource_t, _warning_t, _stats_t,
 *   _update_t): ends with `uint64_t reserved_[N]`, which the library
 *   writes as zero (where it writes the struct at all) and callers do not
 *   read.  The model's structs come in arrays, so their size cannot
 *   change without breaking every subscriber.
 * - Fixed for good: values and records whose layout is their meaning
 *   (weft_waker_t and its vtable, weft_site_t, weft_fd_ready_t,
 *   weft_branch_t, weft_event_t, weft_hist_t, weft_probe_task_wait_t).
 *   No reserved room: what they cannot hold takes a new type.
 * - Private layout in the caller's memory (the futures, weft_mutex_t, the
 *   sync_async.h primitives, weft_resource_t, ...: "all fields private"):
 *   the size and alignment are ABI, the layout is not.  A new version may
 *   rearrange the fields or use padding holes, within the same size;
 *   needing more room is a new major version.
 *
 * Why reserved words rather than a size field the caller sets: the spawn
 * macros fill weft_spawn_t in the caller's code on every spawn, and
 * designated initialisers already zero what they do not name, so zero
 * reserved words cost callers nothing to get right; the library-filled
 * structs are handed out in arrays, where only a fixed size works.  The
 * cost is a few words per struct.
 *
 * How a struct grows: a field is only ever added at the end, taking words
 * from reserved_ (which shrinks by as much, so that the size and every
 * other offset stay), and its zero must mean "as before", so that what an
 * older caller left zero keeps the older behaviour.  Never a padding
 * hole: an initialiser need not zero padding.  Once reserved_ is used up
 * the struct can only grow with a new major version (the soname).  The
 * fields in place now keep their order (weft_probe_config_t's retain_max
 * came in mid-struct before there was a released ABI; not again).
 *
 * tests/test_abi.c pins the size, alignment and field offsets of every
 * installed struct on LP64 (x86_64, aarch64): a change to a public struct
 * must change that test, on purpose.  libweft-wire (weft/wire.h,
 * trace_reader.h, trace_stream.h) is a static library, compiled into the
 * program that uses it with the headers it was built with: the test pins
 * its structs too, but they need no reserved room.
 */
#ifndef WEFT_COMMON_H
#define WEFT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#if defined(WEFT_STATIC)
#define WEFT_EXTERN
#elif defined(__GNUC__)
#define WEFT_EXTERN __attribute__((visibility("default")))
#else
#define WEFT_EXTERN
#endif

#include "weft/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * weft_version_string() - the library's version, e.g. "0.1.0".
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: a static string.
 */
WEFT_EXTERN const char *weft_version_string(void);

/**
 * weft_version() - the library's version, as WEFT_VERSION_HEX is the
 * headers': (major << 16) | (minor << 8) | patch.  A program can check
 * that the library it runs with is the one it was built for, or newer.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: (major << 16) | (minor << 8) | patch of the library running.
 */
WEFT_EXTERN unsigned weft_version(void);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMMON_H */
