/* SPDX-License-Identifier: MIT */
/*
 * Resources: what tasks wait on.  Every async mutex, semaphore, notify,
 * channel, oneshot and countdown carries a weft_resource_t, and the probe
 * sees who holds it and who waits for it (the console's Resources view,
 * the contention and channel-full warnings, the task dump's WAITING ON).
 *
 * A resource is named by where it was initialised (the _init macros pass
 * __FILE__ and __LINE__) unless it is given a name, a static string, with
 * its primitive's _name() call (weft_async_mutex_name(), ...).  Nothing is
 * emitted while nobody listens: a resource costs its 40 bytes and one
 * atomic increment at init, and each operation one predicted branch.
 */
#ifndef WEFT_RESOURCE_H
#define WEFT_RESOURCE_H

#include <stdint.h>

#include "weft/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Embedded in each primitive.  All fields private. */
typedef struct weft_resource_s {
	uint64_t id;      /* one process-wide counter, never reused; 0: none */
	const char *name; /* static string, or NULL */
	const char *file; /* where initialised, or NULL */
	uint32_t line;
	uint8_t kind;     /* weft_resource_kind_t (weft/probe_events.h) */
	uint8_t reserved_[3];
	/* The probe's listening generation it was last announced in. */
	uint32_t gen;
	uint32_t reserved2_;
} weft_resource_t;

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RESOURCE_H */
