/* SPDX-License-Identifier: MIT */
/*
 * The process's hello (read from /proc) and a trace file's header record
 * (weft/wire.h has the model).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft/wire.h"

/* ------------------------------------------------------------ hello, header */

static char *read_file_all(const char *path, size_t *len)
{
	size_t cap = 256, n = 0;
	char *buf = malloc(cap);
	FILE *fp = fopen(path, "rb");

	if (!buf || !fp) {
		free(buf);
		if (fp)
			fclose(fp);
		return NULL;
	}
	for (;;) {
		size_t got = fread(buf + n, 1, cap - n - 1, fp);

		n += got;
		if (n < cap - 1)
			break;
		if (cap >= (1u << 20))
			break;
		char *q = realloc(buf, cap * 2);

		if (!q)
			break;
		buf = q;
		cap *= 2;
	}
	fclose(fp);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/*
 * weft_wire_hello_init() - this process's hello.
 * Return: 0; -ENOMEM.
 */
int weft_wire_hello_init(weft_wire_hello_t *h, uint32_t workers,
			  const char *clock, uint64_t start_ns)
{
	struct timespec real;
	uint64_t mono_ns;
	size_t len = 0, argc = 0;
	char *comm;

	memset(h, 0, sizeof(*h));
	weft__v1__hello__init(&h->msg);
	comm = read_file_all("/proc/self/comm", &len);
	if (comm) {
		if (len && comm[len - 1] == '\n')
			comm[len - 1] = '\0';
		snprintf(h->name, sizeof(h->name), "%s", comm);
		free(comm);
	}
	if (gethostname(h->host, sizeof(h->host) - 1))
		h->host[0] = '\0';
	snprintf(h->clock, sizeof(h->clock), "%s", clock ? clock : "");
	h->cmdline = read_file_all("/proc/self/cmdline", &len);
	if (h->cmdline) {
		for (size_t i = 0; i < len; i++)
			argc += h->cmdline[i] == '\0';
		h->argv = calloc(argc + 1, sizeof(*h->argv));
		if (!h->argv) {
			free(h->cmdline);
			h->cmdline = NULL;
			return -ENOMEM;
		}
		for (size_t i = 0, a = 0; i < len && a < argc; a++) {
			h->argv[a] = h->cmdline + i;
			i += strlen(h->cmdline + i) + 1;
		}
		h->msg.n_argv = argc;
		h->msg.argv = h->argv;
	}
	mono_ns = weft_wire_now_ns();
	clock_gettime(CLOCK_REALTIME, &real);
	h->msg.protocol_version = WEFT_WIRE_PROTOCOL_VERSION;
	h->msg.pid = (uint32_t)getpid();
	h->msg.process_name = h->name;
	h->msg.workers = workers;
	h->msg.clock = h->clock;
	h->msg.start_ns = start_ns;
	/* The realtime instant of start_ns, from one pair of readings. */
	h->msg.start_realtime_ns = (uint64_t)real.tv_sec * 1000000000u +
				   (uint64_t)real.tv_nsec -
				   (mono_ns - start_ns);
	h->msg.hostname = h->host;
	return 0;
}

void weft_wire_hello_fini(weft_wire_hello_t *h)
{
	free(h->argv);
	free(h->cmdline);
	h->argv = NULL;
	h->cmdline = NULL;
}

static char *str_or_empty(const char *s)
{
	return (char *)(s ? s : "");
}

#define KIND_NAME(name, value, label, doc) [value] = label,
static const char *const event_kind_names[WEFT_EV_MAX] = { WEFT_EVENT_KINDS(
	KIND_NAME) };
#undef KIND_NAME
#define WARN_NAME(name, value, label) [value] = label,
static const char *const warning_kind_names[WEFT_WARN_MAX] = {
	WEFT_WARNING_KINDS(WARN_NAME)
};
#undef WARN_NAME

/*
 * weft_wire_header_append() - a trace file's first record.
 * Return: 0; -ENOMEM.
 */
int weft_wire_header_append(weft_wire_buf_t *b, const Weft__V1__Hello *hello,
			     uint32_t segment)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__FileHeader h = WEFT__V1__FILE_HEADER__INIT;
	char *ev[WEFT_EV_MAX], *wn[WEFT_WARN_MAX];

	for (unsigned i = 0; i < WEFT_EV_MAX; i++)
		ev[i] = str_or_empty(event_kind_names[i]);
	for (unsigned i = 0; i < WEFT_WARN_MAX; i++)
		wn[i] = str_or_empty(warning_kind_names[i]);
	h.magic = (char *)WEFT_TRACE_MAGIC;
	h.format_version = WEFT_TRACE_FORMAT_VERSION;
	h.hello = (Weft__V1__Hello *)hello;
	h.segment = segment;
	h.n_event_kinds = WEFT_EV_MAX;
	h.event_kinds = ev;
	h.n_warning_kinds = WEFT_WARN_MAX;
	h.warning_kinds = wn;
	f.body_case = WEFT__V1__FRAME__BODY_HEADER;
	f.header = &h;
	return weft_wire_record_append(b, &f);
}
