/* SPDX-License-Identifier: MIT */
/*
 * weft-bench: micro-benchmarks of the weft runtime, shape for shape the
 * same as the Tokio and Go anchor benchmarks, so the three can be compared
 * side by side (tools/bench/README.md, compare.sh).
 *
 * One process runs the selected shapes in table order on one runtime (2
 * workers unless --workers says otherwise).  Each shape runs its warm-up
 * iterations, then its timed ones, and prints one line on stdout in the
 * anchors' format:
 *
 *	shape=<name> runtime=weft median_ns_per_op=<x> p10=<x> p90=<x> ...
 *
 * Percentiles interpolate linearly between closest ranks (numpy's default,
 * the anchors' pct()).  Progress goes to stderr, only when it is a tty.
 *
 * Exit status: 0; 1 when a weft call fails; 2 for a usage error or a failed
 * result check.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tool_util.h"

#define DEFAULT_WORKERS 2
#define DEFAULT_ITERS 20
#define DEFAULT_WARMUP 3
#define MAX_ITERS 1000000
#define MAX_WORKERS 1024

/* Every shape, in the order they run (the anchors' order). */
static const struct bench_shape *const shapes[] = {
	&shape_spawn_many_local,
	&shape_spawn_many_remote,
	&shape_yield_many,
	&shape_ping_pong,
	&shape_chained_spawn,
	&shape_channel_throughput,
	&shape_mutex_contended,
	&shape_timers,
	&shape_timers_1k,
	&shape_yield_many_fiber,
	&shape_ping_pong_fiber,
	&shape_probe_event,
	&shape_probe_event_thread,
	&shape_record_throughput,
};

#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

struct options {
	bool want[NSHAPES];
	unsigned long iters;
	unsigned long warmup;
	unsigned long workers;
	bool progress;
	bool probe_events;
};

/* ------------------------------------------------------------ helpers */

/* malloc(n * size) that rejects zero sizes and overflow, and never fails. */
void *bench_xmallocarray(size_t n, size_t size)
{
	void *p;

	if (n == 0 || size == 0 || n > SIZE_MAX / size) {
		fprintf(stderr, "weft-bench: bad allocation size %zu x %zu\n",
			n, size);
		abort();
	}
	p = malloc(n * size);
	if (!p) {
		fprintf(stderr, "weft-bench: out of memory\n");
		abort();
	}
	return p;
}

/*
 * A latch of @count for one iteration.  The task that releases main may
 * still be inside weft_countdown_done() when main's wait returns, so a
 * latch is never reused or freed while the runtime runs: bench_fini()
 * releases them all after weft_runtime_destroy() has joined the workers.
 */
weft_countdown_t *bench_latch(struct bench *b, unsigned count)
{
	weft_countdown_t *cd;

	if (b->nlatches == b->caplatches) {
		size_t cap = b->caplatches ? 2 * b->caplatches : 64;
		weft_countdown_t **v = bench_xmallocarray(cap, sizeof(*v));

		if (b->nlatches)
			memcpy(v, b->latches, b->nlatches * sizeof(*v));
		free(b->latches);
		b->latches = v;
		b->caplatches = cap;
	}
	cd = bench_xmallocarray(1, sizeof(*cd));
	weft_countdown_init(cd, count);
	b->latches[b->nlatches++] = cd;
	return cd;
}

void bench_die(const char *what, int err)
{
	fprintf(stderr, "weft-bench: %s: %s\n", what, strerror(-err));
	exit(1);
}

void bench_check_failed(const char *fmt, ...)
{
	va_list ap;

	fputs("weft-bench: CHECK FAILED: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void bench_fini(struct bench *b)
{
	size_t i;

	bench_probe_stop(b);
	weft_runtime_destroy(b->rt);
	for (i = 0; i < b->nlatches; i++) {
		weft_countdown_fini(b->latches[i]);
		free(b->latches[i]);
	}
	free(b->latches);
}

/* ------------------------------------------------------------ stats */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Percentile @p of @n sorted values, linear interpolation (numpy default). */
static double pct(const double *sorted, size_t n, double p)
{
	double pos = p / 100.0 * (double)(n - 1);
	size_t lo = (size_t)pos;
	size_t hi = (double)lo < pos ? lo + 1 : lo;

	return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - (double)lo);
}

double bench_pct(const double *sorted, size_t n, double p)
{
	return pct(sorted, n, p);
}

/* ------------------------------------------------------------ driver */

static void progress(const struct options *o, const char *name,
		     const char *phase, unsigned long i, unsigned long n)
{
	if (o->progress)
		fprintf(stderr, "\rweft-bench: %s %s%lu/%lu\033[K", name, phase,
			i, n);
}

static void progress_clear(const struct options *o)
{
	if (o->progress)
		fputs("\r\033[K", stderr);
}

static void run_shape(struct bench *b, const struct options *o,
		      const struct bench_shape *s)
{
	double *v;
	unsigned long i;

	if (s->run_all) {
		s->run_all(b, s, o->iters, o->warmup);
		return;
	}
	v = bench_xmallocarray(o->iters, sizeof(*v));
	for (i = 0; i < o->warmup; i++) {
		progress(o, s->name, "warmup ", i + 1, o->warmup);
		s->run(b);
	}
	for (i = 0; i < o->iters; i++) {
		progress(o, s->name, "", i + 1, o->iters);
		v[i] = (double)s->run(b) / (double)s->ops;
	}
	progress_clear(o);

	qsort(v, o->iters, sizeof(*v), cmp_double);
	printf("shape=%s runtime=weft median_ns_per_op=%.1f p10=%.1f p90=%.1f "
	       "min=%.1f max=%.1f iters=%lu ops_per_iter=%zu workers=%u "
	       "probe=%s\n",
	       s->name, pct(v, o->iters, 50), pct(v, o->iters, 10),
	       pct(v, o->iters, 90), v[0], v[o->iters - 1], o->iters, s->ops,
	       weft_runtime_workers(b->rt), bench_probe_mode(b));
	/* Lines reach a pipe (compare.sh) as each shape finishes. */
	fflush(stdout);
	free(v);
}

/* ------------------------------------------------------------ options */

static void usage(FILE *f)
{
	size_t i;

	fprintf(f,
		"usage: weft-bench [--shapes a,b,...] [--iters N] [--warmup N] [--workers N]\n"
		"       weft-bench --list\n"
		"       weft-bench --help\n"
		"       weft-bench echo-server|http-server PORT [--workers N]\n"
		"       weft-bench idle-tasks [N]\n"
		"\n"
		"Runs the selected shapes (default: all, in the order below) on one\n"
		"weft runtime and prints one line per shape on stdout:\n"
		"  shape=<name> runtime=weft median_ns_per_op=<x> p10=<x> p90=<x> ...\n"
		"\n"
		"  --shapes LIST  comma-separated shape names\n"
		"  --iters N      timed iterations per shape (default %d)\n"
		"  --warmup N     untimed iterations before them (default %d)\n"
		"  --workers N    worker threads (default %d)\n"
		"  --probe=MODE   counters (default: events off, counters on) or\n"
		"                 events (a subscriber drains every event); a build\n"
		"                 with WEFT_PROBE=OFF reports probe=compiled-out\n"
		"  --list         print the shape names and exit\n"
		"\n"
		"shapes (ops per iteration, what one op is):\n",
		DEFAULT_ITERS, DEFAULT_WARMUP, DEFAULT_WORKERS);
	for (i = 0; i < NSHAPES; i++)
		fprintf(f, "  %-18s %7zu  %s\n", shapes[i]->name,
			shapes[i]->ops, shapes[i]->unit);
	fprintf(f, "\nexit status: 0; 1 when a weft call fails; 2 for a usage "
		   "error or a failed result check\n");
}

#define usage_error(...) tool_die(2, "weft-bench", __VA_ARGS__)

static unsigned long parse_count(const char *opt, const char *s,
				 unsigned long min, unsigned long max)
{
	unsigned long v;

	if (!tool_parse_ulong(s, min, max, &v))
		usage_error("bad number for %s: '%s' (want %lu..%lu)", opt, s,
			    min, max);
	return v;
}

static void parse_shapes(struct options *o, const char *list)
{
	const char *p = list;

	memset(o->want, 0, sizeof(o->want));
	for (;;) {
		size_t len = strcspn(p, ",");
		size_t i;

		for (i = 0; i < NSHAPES; i++)
			if (strlen(shapes[i]->name) == len &&
			    memcmp(shapes[i]->name, p, len) == 0)
				break;
		if (i == NSHAPES)
			usage_error("unknown shape '%.*s' (see --list)",
				    (int)len, p);
		o->want[i] = true;
		if (p[len] == '\0')
			break;
		p += len + 1;
	}
}

/*
 * Takes an option's value, either "--opt=value" or "--opt value".
 * Return: the value, or NULL when @arg is not @name.
 */
static const char *opt_value(const char *name, int argc, char **argv, int *i)
{
	const char *arg = argv[*i];
	size_t len = strlen(name);

	if (strncmp(arg, name, len) != 0)
		return NULL;
	if (arg[len] == '=')
		return arg + len + 1;
	if (arg[len] != '\0')
		return NULL;
	if (*i + 1 >= argc)
		usage_error("%s needs a value", name);
	return argv[++*i];
}

static void parse_args(struct options *o, int argc, char **argv)
{
	const char *val;
	size_t k;
	int i;

	for (k = 0; k < NSHAPES; k++)
		o->want[k] = true;
	o->iters = DEFAULT_ITERS;
	o->warmup = DEFAULT_WARMUP;
	o->workers = DEFAULT_WORKERS;
	o->progress = isatty(STDERR_FILENO);
	o->probe_events = false; /* counters, as --help says */

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(argv[i], "--list")) {
			for (k = 0; k < NSHAPES; k++)
				puts(shapes[k]->name);
			exit(0);
		} else if ((val = opt_value("--shapes", argc, argv, &i))) {
			parse_shapes(o, val);
		} else if ((val = opt_value("--iters", argc, argv, &i))) {
			o->iters = parse_count("--iters", val, 1, MAX_ITERS);
		} else if ((val = opt_value("--warmup", argc, argv, &i))) {
			o->warmup = parse_count("--warmup", val, 0, MAX_ITERS);
		} else if (!strcmp(argv[i], "--probe=events")) {
			o->probe_events = true;
		} else if (!strcmp(argv[i], "--probe=counters")) {
			o->probe_events = false;
		} else if (!strncmp(argv[i], "--probe", 7)) {
			usage_error("--probe takes =counters or =events");
		} else if ((val = opt_value("--workers", argc, argv, &i))) {
			o->workers = parse_count("--workers", val, 1,
						 MAX_WORKERS);
		} else {
			usage_error("unknown argument '%s' (see --help)",
				    argv[i]);
		}
	}
}

/*
 * WEFT_BENCH_START_FILE=PATH: the shapes start once PATH exists (a
 * minute at most), the runtime and its probe server up meanwhile: so
 * that a script attaches a console first (collector-instr.sh CONSOLE=1).
 */
static void wait_start_file(void)
{
	const char *path = getenv("WEFT_BENCH_START_FILE");

	for (int i = 0; path && *path && i < 6000; i++) {
		if (!access(path, F_OK))
			return;
		usleep(10000);
	}
}

int main(int argc, char **argv)
{
	weft_config_t config = { 0 };
	struct options o = { 0 };
	struct bench b = { 0 };
	size_t i;
	int rc;

	if (argc > 1 && (!strcmp(argv[1], "echo-server") ||
			 !strcmp(argv[1], "http-server")))
		return bench_server_main(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "idle-tasks"))
		return bench_idle_main(argc - 1, argv + 1);
	parse_args(&o, argc, argv);

	config.workers = (unsigned)o.workers;
	rc = weft_runtime_create(&config, &b.rt);
	if (rc)
		bench_die("weft_runtime_create", rc);
	bench_probe_start(&b, o.probe_events);
	wait_start_file();
	for (i = 0; i < NSHAPES; i++)
		if (o.want[i])
			run_shape(&b, &o, shapes[i]);
	bench_fini(&b);
	return 0;
}
