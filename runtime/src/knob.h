/* SPDX-License-Identifier: MIT */
/*
 * The WEFT_* environment knobs, read one way: a value that is not what
 * the knob takes (garbage, a suffix it does not take, out of range) is
 * said in one line on stderr, naming the variable, the value, what it
 * takes and the value used instead, e.g.
 *
 *   weft: WEFT_PROBE_RING=16: out of range (64 to 64m events); using 256k
 *
 * and never silently ignored.  Unset or empty: the default, silently.
 * Used by the runtime and the probe (libweft's own files only).
 */
#ifndef WEFT_KNOB_H
#define WEFT_KNOB_H

#include <stdbool.h>
#include <stdint.h>

typedef enum weft__knob_kind_e {
	/* A count ("events", "workers"): a whole number, or with k (x1024)
	 * or m (x1048576). */
	WEFT__KNOB_COUNT,
	/* A duration: a whole number of the knob's unit ("ns", "us", "ms" or
	 * "s"), or with any of those suffixes.  Returned in ns. */
	WEFT__KNOB_TIME,
	/* A size: a whole number of MB, or with k, m or g (KiB, MiB, GiB).
	 * Returned in bytes. */
	WEFT__KNOB_SIZE,
} weft__knob_kind_t;

typedef struct weft__knob_s {
	const char *name;
	weft__knob_kind_t kind;
	const char *unit; /* a count's noun; a duration's unit; "MB" */
	/* In the unit: "ms" knob {10, 1, 3600000} is 10 ms, 1 ms to 1 h.
	 * A size's in MB; 0 as min for a size or a count means 0 allowed. */
	uint64_t def, min, max;
} weft__knob_t;

/* The knob's value (counts as they are, durations in ns, sizes in bytes);
 * its default when unset, empty or bad (bad: one line on stderr). */
uint64_t weft__knob(const weft__knob_t *k);

/*
 * An on/off knob: 1, on, true, yes or 0, off, false, no (any case);
 * @def when unset or empty, or when bad (one line on stderr).
 */
bool weft__knob_bool(const char *name, bool def);

/*
 * A knob taking one of @choices (NULL-terminated): its index, or @def when
 * unset or empty, or when bad (one line on stderr).
 */
int weft__knob_choice(const char *name, const char *const *choices, int def);

#endif
