/* SPDX-License-Identifier: MIT */
/*
 * The metrics endpoint's HTTP side: a listener, its connections and its
 * thread (weft/metrics_endpoint.h says what it serves and its bounds).
 *
 * Its own libevent base and thread ("weft-metrics"), not the console
 * server's: the endpoint runs with WEFT_CONSOLE=off too, a burst of
 * scrapes then delays no console's stream (and a console's backlog no
 * scrape), and a fleet's scraper and an engineer's console are bounded
 * apart.  It costs one thread asleep in epoll_wait.
 *
 * A plain HTTP/1.x reader on bufferevents, not evhttp: evhttp's timeouts
 * are per read, so a client that sends a byte a second keeps its
 * connection for ever, and evhttp has no bound on connections.  Here a
 * connection has one deadline from accept to its answer's last byte,
 * the input buffer stops at header_max (the read high-water mark: a
 * megabyte of headers is never read into memory), and a connection over
 * max_conns is closed on accept.  Every answer closes its connection
 * (Connection: close; Prometheus reconnects each scrape).
 *
 * CPU: a scrape renders the counters of every worker; one rendered less
 * than RENDER_REUSE_NS ago is served again, so a burst of scrapes costs
 * at most ten renders a second a format, whatever its size.
 *
 * Threads: everything but create/destroy runs on the endpoint's thread.
 * destroy wakes it with event_active() (libevent set up for threads).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>

#include "weft/metrics_endpoint.h"
#include "weft/time.h"

#include "abi_internal.h"
#include "bind.h"
#include "knob.h"
#include "metrics_internal.h"
#include "probe_internal.h"
#include "runtime_internal.h"

#define MAX_CONNS_DEFAULT 16u
#define HEADER_MAX_DEFAULT (8u << 10)
#define TIMEOUT_MS_DEFAULT 5000u
#define RENDER_REUSE_NS 100000000ull /* 100 ms */
#define TALLY_MS 1000                /* warnings by kind: probe.c */
#define ACCEPT_PAUSE_MS 100          /* after accept(2) failed (EMFILE) */

struct conn {
	weft_metrics_endpoint_t *e;
	struct bufferevent *bev;
	struct event *deadline;
	struct conn *prev, *next;
};

struct weft_metrics_endpoint_s {
	struct event_base *base;
	struct evconnlistener *l;
	struct event *stop_ev, *tally_ev, *resume_ev;
	pthread_t thread;
	int port;
	unsigned max_conns;
	size_t header_max;
	unsigned timeout_ms;
	bool hists;
	struct conn *conns;
	unsigned nconns;
	weft__ratelimit_t accept_rl; /* accept(2)'s errors: a line a second */
	/* The last render of each format (RENDER_REUSE_NS). */
	struct {
		char *p;
		size_t len;
		uint64_t at;
	} cache[2];
};

static void log_line(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void log_line(const char *fmt, ...)
{
	char line[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "weft: metrics: %s\n", line);
}

/* ------------------------------------------------------------ connections */

static void conn_close(struct conn *c)
{
	weft_metrics_endpoint_t *e = c->e;

	if (c->prev)
		c->prev->next = c->next;
	else
		e->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	e->nconns--;
	event_free(c->deadline);
	bufferevent_free(c->bev);
	free(c);
}

static void metrics_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_close(arg);
}

static void metrics_written_cb(struct bufferevent *bev, void *arg)
{
	/* The write low-water mark is 0: called once all is sent. */
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		conn_close(arg);
}

static void metrics_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	/* EOF or an error, before the answer was sent: nothing to say. */
	conn_close(arg);
}

static void respond(struct conn *c, int code, const char *reason,
		    const char *type, const char *body, size_t len)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);

	evbuffer_add_printf(out,
			    "HTTP/1.1 %d %s\r\n"
			    "Content-Type: %s\r\n"
			    "Content-Length: %zu\r\n"
			    "Connection: close\r\n\r\n",
			    code, reason, type, len);
	evbuffer_add(out, body, len);
	/* Nothing more is read; the connection ends with the answer. */
	bufferevent_disable(c->bev, EV_READ);
	bufferevent_setcb(c->bev, NULL, metrics_written_cb, metrics_event_cb,
			  c);
	bufferevent_enable(c->bev, EV_WRITE);
}

static void respond_text(struct conn *c, int code, const char *reason,
			 const char *msg)
{
	respond(c, code, reason, "text/plain; charset=utf-8", msg, strlen(msg));
}

/* The scrape's body, rendered or reused. */
static void serve(struct conn *c, bool om)
{
	weft_metrics_endpoint_t *e = c->e;
	uint64_t now = weft_now_ns();
	weft__mbuf_t b = { 0 };

	if (!e->cache[om].p || now - e->cache[om].at >= RENDER_REUSE_NS) {
		weft__metrics_render(&b, om);
		if (b.oom) {
			free(b.p);
			respond_text(c, 503, "Service Unavailable",
				     "out of memory\n");
			return;
		}
		free(e->cache[om].p);
		e->cache[om].p = b.p;
		e->cache[om].len = b.len;
		e->cache[om].at = now;
	}
	respond(c, 200, "OK",
		om ? "application/openmetrics-text; version=1.0.0; "
		     "charset=utf-8" :
		     "text/plain; version=0.0.4; charset=utf-8",
		e->cache[om].p, e->cache[om].len);
}

/* A request's head, whole in @in: answers it. */
static void request(struct conn *c, struct evbuffer *in)
{
	char *line, *sp1, *sp2, *target;
	size_t n;
	bool om = false;

	line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF);
	if (!line) {
		respond_text(c, 400, "Bad Request", "bad request\n");
		return;
	}
	sp1 = strchr(line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7)) {
		free(line);
		respond_text(c, 400, "Bad Request", "bad request line\n");
		return;
	}
	*sp1 = *sp2 = '\0';
	target = sp1 + 1;
	if (strcmp(line, "GET")) {
		free(line);
		respond_text(c, 405, "Method Not Allowed", "GET only\n");
		return;
	}
	if (strcmp(target, "/metrics") && strncmp(target, "/metrics?", 9)) {
		free(line);
		respond_text(c, 404, "Not Found",
			     "not found: the metrics are at /metrics\n");
		return;
	}
	free(line);
	/* The headers: only Accept matters. */
	while ((line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF)) != NULL) {
		bool end = n == 0;

		if (!strncasecmp(line, "accept:", 7) &&
		    strstr(line + 7, "application/openmetrics-text"))
			om = true;
		free(line);
		if (end)
			break;
	}
	serve(c, om);
}

static void metrics_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);

	if (end.pos < 0) {
		/* At the high-water mark with no end in sight: too big. */
		if (evbuffer_get_length(in) >= c->e->header_max)
			respond_text(c, 431, "Request Header Fields Too Large",
				     "request head too large\n");
		return;
	}
	if ((size_t)end.pos + 4 > c->e->header_max) {
		respond_text(c, 431, "Request Header Fields Too Large",
			     "request head too large\n");
		return;
	}
	request(c, in);
}

static void metrics_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
			      struct sockaddr *sa, int salen, void *arg)
{
	weft_metrics_endpoint_t *e = arg;
	struct timeval tv = { e->timeout_ms / 1000,
			      (e->timeout_ms % 1000) * 1000 };
	struct conn *c;

	(void)l;
	(void)sa;
	(void)salen;
	if (e->nconns >= e->max_conns) {
		static const char busy[] =
			"HTTP/1.1 503 Service Unavailable\r\n"
			"Content-Length: 0\r\nConnection: close\r\n\r\n";

		/* Best effort, never waits: the socket is fresh and empty. */
		(void)!send(fd, busy, sizeof(busy) - 1,
			    MSG_DONTWAIT | MSG_NOSIGNAL);
		evutil_closesocket(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		goto out_close;
	c->e = e;
	c->bev = bufferevent_socket_new(e->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev)
		goto out_free;
	c->deadline = evtimer_new(e->base, metrics_deadline_cb, c);
	if (!c->deadline || evtimer_add(c->deadline, &tv))
		goto out_free_bev;
	/* Reading stops at header_max: the head must fit in it. */
	bufferevent_setwatermark(c->bev, EV_READ, 0, e->header_max);
	bufferevent_setcb(c->bev, metrics_read_cb, NULL, metrics_event_cb, c);
	bufferevent_enable(c->bev, EV_READ);
	c->next = e->conns;
	if (e->conns)
		e->conns->prev = c;
	e->conns = c;
	e->nconns++;
	return;

out_free_bev:
	if (c->deadline)
		event_free(c->deadline);
	bufferevent_free(c->bev);
	free(c);
	return;
out_free:
	free(c);
out_close:
	evutil_closesocket(fd);
}

/*
 * accept(2) failed (EMFILE, ENFILE, ENOBUFS, ENOMEM): pause rather than
 * spin, libevent retrying at once for ever while the pending connection
 * keeps the listener readable.  100 ms, the longest the issue allows: a
 * scraper waits seconds for an answer anyway, and the fewer tries the
 * less this thread costs a process already short of descriptors.
 */
static void metrics_accept_error_cb(struct evconnlistener *l, void *arg)
{
	weft_metrics_endpoint_t *e = arg;
	struct timeval tv = { 0, ACCEPT_PAUSE_MS * 1000 };
	int err = EVUTIL_SOCKET_ERROR();
	unsigned more;

	if (weft__ratelimit(&e->accept_rl, &more))
		log_line("accept: %s (%u more since the last line); pausing "
			 "the listener %d ms",
			 evutil_socket_error_to_string(err), more,
			 ACCEPT_PAUSE_MS);
	/* No timer, no pause: a listener left off would never come back. */
	if (evtimer_add(e->resume_ev, &tv) == 0)
		evconnlistener_disable(l);
}

static void metrics_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	weft_metrics_endpoint_t *e = arg;

	(void)fd;
	(void)what;
	evconnlistener_enable(e->l);
}

static void metrics_tally_cb(evutil_socket_t fd, short what, void *arg)
{
	weft__probe_metrics_t pm;

	(void)fd;
	(void)what;
	(void)arg;
	/* Tallies the warnings by kind before the ring forgets them. */
	weft__probe_metrics_read(&pm, NULL, NULL);
}

static void metrics_stop_cb(evutil_socket_t fd, short what, void *arg)
{
	weft_metrics_endpoint_t *e = arg;

	(void)fd;
	(void)what;
	event_base_loopbreak(e->base);
}

static void *metrics_main(void *arg)
{
	weft_metrics_endpoint_t *e = arg;

	pthread_setname_np(pthread_self(), "weft-metrics");
	event_base_dispatch(e->base);
	while (e->conns)
		conn_close(e->conns);
	return NULL;
}

/* ------------------------------------------------------------ the address */

/* ------------------------------------------------------------ life */

static void threads_once(void)
{
	evthread_use_pthreads();
}

static void endpoint_free(weft_metrics_endpoint_t *e)
{
	if (e->l)
		evconnlistener_free(e->l);
	if (e->stop_ev)
		event_free(e->stop_ev);
	if (e->tally_ev)
		event_free(e->tally_ev);
	if (e->resume_ev)
		event_free(e->resume_ev);
	if (e->base)
		event_base_free(e->base);
	free(e->cache[0].p);
	free(e->cache[1].p);
	if (e->hists)
		weft__metrics_hist_put();
	free(e);
}

int weft_metrics_endpoint_create(const weft_metrics_endpoint_opts_t *opts,
				 weft_metrics_endpoint_t **out)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct timeval tally = { TALLY_MS / 1000, (TALLY_MS % 1000) * 1000 };
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addrinfo *res = NULL;
	weft_metrics_endpoint_t *e;
	sigset_t all, old;
	int err;

	if (!opts || !opts->bind || !out ||
	    !weft__reserved_zero(opts->reserved_, sizeof(opts->reserved_)))
		return -EINVAL;
	err = weft__bind_resolve(opts->bind, AI_NUMERICHOST, &res);
	if (err)
		return err;
	pthread_once(&once, threads_once);
	e = calloc(1, sizeof(*e));
	if (!e) {
		err = -ENOMEM;
		goto out_res;
	}
	e->max_conns = opts->max_conns ? opts->max_conns : MAX_CONNS_DEFAULT;
	e->header_max = opts->header_max ? opts->header_max :
					   HEADER_MAX_DEFAULT;
	e->timeout_ms = opts->timeout_ms ? opts->timeout_ms :
					   TIMEOUT_MS_DEFAULT;
	if (opts->histograms) {
		err = weft__metrics_hist_get();
		if (err)
			goto out_free;
		e->hists = true;
	}
	e->base = event_base_new();
	if (!e->base) {
		err = -ENOMEM;
		goto out_free;
	}
	e->stop_ev = event_new(e->base, -1, 0, metrics_stop_cb, e);
	e->tally_ev = event_new(e->base, -1, EV_PERSIST, metrics_tally_cb, e);
	e->resume_ev = evtimer_new(e->base, metrics_resume_cb, e);
	if (!e->stop_ev || !e->tally_ev || !e->resume_ev ||
	    event_add(e->tally_ev, &tally)) {
		err = -ENOMEM;
		goto out_free;
	}
	if (!weft__bind_is_loopback(res->ai_addr))
		log_line("WARNING: listening on %s, which is not loopback: "
			 "anyone who can reach it can read this process's "
			 "metrics",
			 opts->bind);
	errno = 0;
	e->l = evconnlistener_new_bind(e->base, metrics_accept_cb, e,
				       LEV_OPT_CLOSE_ON_FREE |
					       LEV_OPT_CLOSE_ON_EXEC |
					       LEV_OPT_REUSEABLE,
				       64, res->ai_addr, (int)res->ai_addrlen);
	if (!e->l) {
		err = errno ? -errno : -EADDRINUSE;
		goto out_free;
	}
	evconnlistener_set_error_cb(e->l, metrics_accept_error_cb);
	e->port = -1;
	if (getsockname(evconnlistener_get_fd(e->l), (void *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET)
			e->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			e->port =
				ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	/* Every signal blocked on its thread: the application's handlers
	 * run elsewhere, and no SIGPIPE (sends use MSG_NOSIGNAL anyway). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&e->thread, NULL, metrics_main, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		err = -EAGAIN;
		goto out_free;
	}
	freeaddrinfo(res);
	*out = e;
	return 0;

out_free:
	endpoint_free(e);
out_res:
	freeaddrinfo(res);
	return err;
}

int weft_metrics_endpoint_port(const weft_metrics_endpoint_t *e)
{
	return e ? e->port : -1;
}

void weft_metrics_endpoint_destroy(weft_metrics_endpoint_t *e)
{
	if (!e)
		return;
	if (weft__in_collector)
		weft_panic("weft_metrics_endpoint_destroy() called from a "
			   "probe callback: its thread waits for the probe");
	event_active(e->stop_ev, EV_READ, 0);
	pthread_join(e->thread, NULL);
	endpoint_free(e);
}

/* ------------------------------------------------------------ the default */

static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_metrics_endpoint_t *env_ep;
static struct weft_runtime_s *env_rt;

void weft__metrics_env_start(struct weft_runtime_s *rt)
{
	weft_metrics_endpoint_opts_t o = { 0 };
	weft_metrics_endpoint_t *e;
	int err;

	o.bind = getenv("WEFT_METRICS_BIND");
	if (!o.bind || !o.bind[0])
		return;
	o.histograms = weft__knob_bool("WEFT_METRICS_HISTOGRAMS", false);
	pthread_mutex_lock(&env_lock);
	if (env_ep)
		goto out_unlock;
	err = weft_metrics_endpoint_create(&o, &e);
	if (err == -ENOTSUP && o.histograms) {
		log_line("WEFT_METRICS_HISTOGRAMS: no histograms in a build "
			 "without the probe");
		o.histograms = false;
		err = weft_metrics_endpoint_create(&o, &e);
	}
	if (err) {
		log_line("WEFT_METRICS_BIND=%s: not started: %s", o.bind,
			 err == -EINVAL ? "want HOST:PORT, numeric" :
					  strerror(-err));
		goto out_unlock;
	}
	/* Port 0 asked for any port: say which. */
	if (strlen(o.bind) >= 2 && !strcmp(o.bind + strlen(o.bind) - 2, ":0"))
		log_line("WEFT_METRICS_BIND=%s: serving GET /metrics on "
			 "port %d",
			 o.bind, e->port);
	env_ep = e;
	env_rt = rt;
out_unlock:
	pthread_mutex_unlock(&env_lock);
}

void weft__metrics_env_stop(struct weft_runtime_s *rt)
{
	weft_metrics_endpoint_t *e = NULL;

	pthread_mutex_lock(&env_lock);
	if (env_rt == rt && env_ep) {
		e = env_ep;
		env_ep = NULL;
		env_rt = NULL;
	}
	pthread_mutex_unlock(&env_lock);
	/* Outside env_lock: the thread may be in the probe. */
	weft_metrics_endpoint_destroy(e);
}
