/* SPDX-License-Identifier: MIT */
/*
 * One thread's CPU time, found by its name (the probe's threads name
 * themselves: "weft-console", "weft-metrics"): what a listener out of
 * descriptors costs (test_server_limits.c, test_metrics.c).
 */
#ifndef WEFT_TEST_THREAD_CPU_H
#define WEFT_TEST_THREAD_CPU_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_helpers.h"

/*
 * /proc/self/task/TID/schedstat of the thread named @comm, open; -1 if
 * there is none (yet: a thread names itself once it runs).
 */
static inline int thread_cpu_open(const char *comm)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int fd = -1;

	assert_non_null(d);
	while (fd < 0 && (e = readdir(d))) {
		char path[300], name[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f) &&
		    !strncmp(name, comm, strlen(comm))) {
			snprintf(path, sizeof(path),
				 "/proc/self/task/%s/schedstat", e->d_name);
			fd = open(path, O_RDONLY | O_CLOEXEC);
		}
		fclose(f);
	}
	closedir(d);
	return fd;
}

/* thread_cpu_open()'s, waiting up to 1 s for the thread to name itself. */
static inline int thread_cpu_wait(const char *comm)
{
	int fd = -1;

	for (int tries = 0; tries < 1000 && fd < 0; tries++) {
		fd = thread_cpu_open(comm);
		if (fd < 0)
			usleep(1000);
	}
	assert_true(fd >= 0);
	return fd;
}

/* Its CPU time so far in ns (schedstat's first field: time on a CPU). */
static inline unsigned long long thread_cpu_ns_of(int fd)
{
	char buf[128];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	assert_true(n > 0);
	buf[n] = '\0';
	return strtoull(buf, NULL, 10);
}

#endif /* WEFT_TEST_THREAD_CPU_H */
