/* SPDX-License-Identifier: MIT */
/*
 * WEFT_TRACE=path: a recording started from the environment, once per
 * process (weft_runtime_create() calls weft__trace_env_start()), and
 * stopped at exit.  The recorder itself is recorder.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "knob.h"
#include "recorder_internal.h"
#include "weft/trace.h"

/* ------------------------------------------------------------ WEFT_TRACE */

/* A size in MB (up to 1 TiB), in bytes; 0 when unset. */
static uint64_t env_mb(const char *name)
{
	const weft__knob_t k = {
		.name = name,
		.kind = WEFT__KNOB_SIZE,
		.unit = "MB",
		.def = 0,
		.min = 0,
		.max = 1u << 20,
	};

	return weft__knob(&k);
}

/* Seconds (up to a day), in ms; 0 when unset. */
static unsigned env_seconds_ms(const char *name)
{
	const weft__knob_t k = {
		.name = name,
		.kind = WEFT__KNOB_TIME,
		.unit = "s",
		.def = 0,
		.min = 0,
		.max = 24 * 3600,
	};

	return (unsigned)(weft__knob(&k) / 1000000u);
}

/* WEFT_TRACE's path (the environment's string: it stays). */
static const char *env_path;
/* The recording process: a forked child's exit is not its stop. */
static pid_t env_pid;

/* At exit, an error no line said yet (memory, close(2)) is said too:
 * nobody else would hear of it. */
static void stop_at_exit(void)
{
	bool said = false;
	int err;

	/*
	 * Not in a forked child that exits: the recording (its file, its
	 * collector thread) is the parent's, and the child's flush would
	 * wait for a collector that is not there (review).
	 */
	if (getpid() != env_pid)
		return;
	err = weft__trace_stop_said(&said);

	if (err && err != -ENOENT && !said)
		fprintf(stderr, "weft: WEFT_TRACE=%s: %s; records were lost\n",
			env_path, strerror(-err));
}

static void env_start(void)
{
	const char *path = getenv("WEFT_TRACE");
	weft_trace_opts_t o = { 0 };
	int err;

	if (!path || !*path)
		return;
	o.max_file_bytes = env_mb("WEFT_TRACE_MAX_MB");
	o.flight_bytes = env_mb("WEFT_TRACE_FLIGHT_MB");
	o.flight_ms = env_seconds_ms("WEFT_TRACE_FLIGHT_S");
	env_path = path;
	err = weft_trace_start(path, &o);
	if (err) {
		fprintf(stderr, "weft: WEFT_TRACE=%s: cannot record: %s\n",
			path, strerror(-err));
		return;
	}
	/* Stops (and writes out the buffer) at exit; a crash keeps what
	 * was flushed. */
	env_pid = getpid();
	atexit(stop_at_exit);
}

void weft__trace_env_start(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, env_start);
}
