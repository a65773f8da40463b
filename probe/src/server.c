/* SPDX-License-Identifier: MIT */
/*
 * The probe's server (server_internal.h has the protocol and the flow):
 * its life, the loop's thread and timers, the listeners, and the default
 * server.  The streams are server_stream.c, the clients server_client.c.
 *
 * Threads.  Everything about sockets and clients belongs to the server
 * thread (libevent's loop).  The probe's collector thread runs
 * srv_on_update() / srv_on_events() (server_stream.c): they encode, then
 * append to the queue under qlock and wake the loop with event_active()
 * (libevent is set up for threads: evthread_use_pthreads() before the
 * base exists).
 * The server thread subscribes and unsubscribes (which take probe.lock
 * and wait for a pass) holding no lock of ours; the callbacks run with
 * probe.lock held and take qlock.  Lock order: probe.lock, then qlock,
 * then libevent's base lock (event_active); stat_lock is a leaf.
 *
 * Memory.  Per client: at most client_buf_max bytes queued for output (a
 * record is added only if it fits; a full update larger than the bound
 * goes in while at most half of it is queued), the decoder's one record (room
 * for the bytes that came of it, at most twice; a request is at most
 * REQUEST_MAX, refused before allocation when larger).  The
 * queue from the collector holds at most queue_max_bytes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>

#include "weft/time.h"

#include "bind.h"
#include "knob.h"
#include "collector.h"
#include "probe_internal.h"
#include "server_state_internal.h"

#define CLIENT_BUF_DEFAULT (8u << 20)
#define SLOW_KICK_DEFAULT_MS 5000u
#define QUEUE_DEFAULT (32u << 20)
#define TOTAL_BUF_DEFAULT (64u << 20)
#define HANDSHAKE_DEFAULT_MS 5000u
#define PARTIAL_DEFAULT_MS 10000u
#define STALL_DEFAULT_MS 5000u
#define TICK_MS 100
/* A client that skipped updates gets a full one again, at most this often;
 * while the subscription's own full update is still to come, only after
 * this long (it may have been lost in a way nobody counted). */
#define RESYNC_EVERY_NS 1000000000ull
#define RESYNC_PENDING_NS 10000000000ull

void weft__server_log(const char *fmt, ...)
{
	char line[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "weft: console: %s\n", line);
}

static void srv_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	weft__server_deliver(arg);
}

static void srv_stop_cb(evutil_socket_t fd, short what, void *arg)
{
	weft_server_t *s = arg;

	(void)fd;
	(void)what;
	event_base_loopbreak(s->base);
}

static void srv_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	weft_server_t *s = arg;
	uint64_t now = weft_now_ns();
	bool resync = false;
	struct client *c, *next;

	(void)fd;
	(void)what;
	weft__server_sweep(s);
	weft__server_replan_due(s);
	for (c = s->clients; c; c = next) {
		size_t have =
			evbuffer_get_length(bufferevent_get_output(c->bev));
		bool drained = !have || have < c->tick_have + c->added;

		next = c->next;
		/*
		 * Its pace, over a tick its output never ran empty in (what
		 * it read then is what it can read): for events_behind().
		 */
		if (c->tick_at && now > c->tick_at &&
		    c->emptied_at < c->tick_at && c->tick_have && have &&
		    c->tick_have + c->added >= have) {
			uint64_t bps =
				(uint64_t)(c->tick_have + c->added - have) *
				1000000000u / (now - c->tick_at);

			c->drain_bps = c->drain_bps ? (c->drain_bps + bps) / 2 :
						      bps;
			if (!c->drain_bps)
				c->drain_bps = 1; /* it read nothing: known */
		}
		c->tick_at = now;
		c->tick_have = have;
		c->added = 0;
		if (!c->spoke && now - c->accepted_ns > s->handshake_ns) {
			pthread_mutex_lock(&s->stat_lock);
			s->st.handshake_closed++;
			pthread_mutex_unlock(&s->stat_lock);
			weft__server_client_close(
				c,
				c->tcp ? "sent no token in time" :
					 "said nothing since it connected",
				false);
			continue;
		}
		if (c->partial_since &&
		    now - c->partial_since > s->partial_ns) {
			pthread_mutex_lock(&s->stat_lock);
			s->st.partial_closed++;
			pthread_mutex_unlock(&s->stat_lock);
			weft__server_client_close(
				c, "left a record unfinished for too long",
				true);
			continue;
		}
		/*
		 * Not reading at all: output waits and not a byte of it
		 * went since stall_since.  A slow reader drains some and is
		 * judged by behind_since instead.
		 */
		if (drained) {
			c->stall_since = 0;
		} else if (!c->stall_since) {
			c->stall_since = now;
		} else if (now - c->stall_since > s->stall_ns) {
			pthread_mutex_lock(&s->stat_lock);
			s->st.kicked++;
			s->st.stalled++;
			pthread_mutex_unlock(&s->stat_lock);
			weft__server_client_close(
				c, "not reading: its output has not drained",
				false);
			continue;
		}
		if (c->behind_since && have <= s->buf_max / 2)
			c->behind_since = 0;
		if (c->behind_since && now - c->behind_since > s->kick_ns) {
			pthread_mutex_lock(&s->stat_lock);
			s->st.kicked++;
			pthread_mutex_unlock(&s->stat_lock);
			weft__server_client_close(
				c, "too slow: behind for too long", false);
			continue;
		}
		if (c->subscribed && c->want_updates && c->need_full &&
		    have <= s->buf_max / 2)
			resync = true;
	}
	if (resync &&
	    now - s->last_resync >=
		    (s->full_pending ? RESYNC_PENDING_NS : RESYNC_EVERY_NS) &&
	    weft__server_resync(s, NULL)) {
		pthread_mutex_lock(&s->stat_lock);
		s->st.resyncs++;
		pthread_mutex_unlock(&s->stat_lock);
	}
	weft__server_stream_have(s); /* what drained since */
}
/*
 * The server stops (its runtime's destroy, which has just had the
 * collector's last pass said: weft__probe_runtime_detach()): what is
 * queued for the clients goes to them, as far as each one's socket takes
 * it now.  Without, a console attached when its process's runtime went
 * never heard what the last pass said (a long poll that ended just
 * before: a service whose fault comes at its end).  No waiting: a write
 * that would block is the last for that client (one not reading loses
 * the rest, as it would have); the output is bounded per client and in
 * all, so this is too.  A TCP peer's unread requests are read first and
 * its side shut for writing, so that the close sends no reset that could
 * drop what is in flight.
 */
static void flush_at_stop(weft_server_t *s)
{
	char junk[4096];

	weft__server_deliver(s);
	weft__server_sweep(s);
	for (struct client *c = s->clients; c; c = c->next) {
		struct evbuffer *out = bufferevent_get_output(c->bev);
		evutil_socket_t fd = bufferevent_getfd(c->bev);

		if (fd < 0)
			continue;
		/*
		 * A socket bufferevent keeps its output's start frozen but
		 * in its own write callback (libevent's bufferevent_sock.c):
		 * thawed for these writes, frozen again after.
		 */
		evbuffer_unfreeze(out, 1);
		while (evbuffer_get_length(out) && evbuffer_write(out, fd) > 0)
			;
		evbuffer_freeze(out, 1);
		if (!c->tcp)
			continue;
		for (int k = 0;
		     k < 16 && recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0;
		     k++)
			;
		shutdown(fd, SHUT_WR);
	}
}

static void *server_main(void *arg)
{
	weft_server_t *s = arg;

	pthread_setname_np(pthread_self(), "weft-console");
	event_base_dispatch(s->base);
	flush_at_stop(s);
	while (s->clients)
		weft__server_client_close(s->clients, NULL, false);
	if (s->sub)
		weft__server_sub_drop(s);
	return NULL;
}

/* ------------------------------------------------------------ endpoints */

#define ACCEPT_PAUSE_MS 50

/*
 * accept(2) failed: EMFILE, ENFILE, ENOBUFS, ENOMEM.  libevent would try
 * again at once, for ever (a core spinning, a log line each time), while
 * the pending connection keeps the listener readable.  Pause both
 * listeners; resume after ACCEPT_PAUSE_MS, when descriptors may be back.
 * 50 ms: twenty tries a second cost nothing measurable (a failing
 * accept(2) each), and a console waiting in the backlog is taken within
 * a twentieth of a second of a descriptor coming back, which nobody
 * notices; 10 ms would gain nothing a person sees, and 100 ms begins to.
 */
static void accept_error_cb(struct evconnlistener *l, void *arg)
{
	weft_server_t *s = arg;
	struct timeval tv = { 0, ACCEPT_PAUSE_MS * 1000 };
	int err = EVUTIL_SOCKET_ERROR();
	unsigned more;

	(void)l;
	if (weft__ratelimit(&s->accept_rl, &more))
		weft__server_log("accept: %s (%u more since the last line); "
				 "pausing the listeners %d ms",
				 evutil_socket_error_to_string(err), more,
				 ACCEPT_PAUSE_MS);
	/* No timer, no pause: listeners left off would never come back. */
	if (evtimer_add(s->accept_resume_ev, &tv))
		return;
	if (s->unix_l)
		evconnlistener_disable(s->unix_l);
	if (s->tcp_l)
		evconnlistener_disable(s->tcp_l);
}

static void accept_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	weft_server_t *s = arg;

	(void)fd;
	(void)what;
	if (s->unix_l)
		evconnlistener_enable(s->unix_l);
	if (s->tcp_l)
		evconnlistener_enable(s->tcp_l);
}

static int listen_unix(weft_server_t *s, const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, path);
	/* A socket named for our pid is a dead process's: ours now. */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	s->unix_l = evconnlistener_new_bind(
		s->base, weft__server_accept_cb, s,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 16,
		(struct sockaddr *)&sun, (int)sizeof(sun));
	if (!s->unix_l)
		return errno ? -errno : -EADDRINUSE;
	evconnlistener_set_error_cb(s->unix_l, accept_error_cb);
	(void)chmod(path, 0600);
	snprintf(s->unix_path, sizeof(s->unix_path), "%s", path);
	/* Bound a moment ago: what is there is ours, unless another of
	 * our servers bound there since, which is then never unlinked. */
	if (!weft__file_id_of(path, &s->unix_id))
		s->unix_id = (weft__file_id_t){ 0 };
	return 0;
}

/* "host:port", "[v6]:port", ":port" or "port" (loopback). */
static int listen_tcp(weft_server_t *s, const char *bind)
{
	struct addrinfo *res = NULL;
	struct sockaddr_storage ss = { 0 };
	socklen_t sl = sizeof(ss);
	int err;

	if (weft__bind_resolve(bind, 0, &res))
		return -EINVAL;
	s->tcp_l = evconnlistener_new_bind(
		s->base, weft__server_accept_cb, s,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
			LEV_OPT_REUSEABLE,
		16, res->ai_addr, (int)res->ai_addrlen);
	err = s->tcp_l ? 0 : (errno ? -errno : -EADDRINUSE);
	freeaddrinfo(res);
	if (err)
		return err;
	evconnlistener_set_error_cb(s->tcp_l, accept_error_cb);
	if (getsockname(evconnlistener_get_fd(s->tcp_l), (void *)&ss, &sl) ==
	    0) {
		if (ss.ss_family == AF_INET)
			s->tcp_port =
				ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			s->tcp_port =
				ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	/* Said after the bind, so that the line has the port (":0"). */
	if (!weft__bind_is_loopback((struct sockaddr *)&ss))
		weft__server_log(
			"WARNING: listening on %s (port %d), which is not "
			"loopback: anyone who can reach it can try the token, "
			"and the stream is not encrypted",
			bind, s->tcp_port);
	else
		weft__server_log("WARNING: listening on %s (port %d): every "
				 "local user can reach it (a token is "
				 "required)",
				 bind, s->tcp_port);
	return 0;
}

/* ------------------------------------------------------------ life */

static void threads_once(void)
{
	evthread_use_pthreads();
}

static int header_build(weft_server_t *s, uint32_t workers)
{
	weft_wire_hello_t h;
	char clock[96];
	int err;

	weft__probe_clock_text(clock, sizeof(clock));
	err = weft_wire_hello_init(&h, workers, clock, weft_now_ns());
	if (!err)
		err = weft_wire_header_append(&s->header, &h.msg, 0);
	weft_wire_hello_fini(&h);
	return err;
}

static void server_free(weft_server_t *s)
{
	/*
	 * The socket's name first, while our listener is still open and
	 * holds its inode: closed first, the inode could be freed (another
	 * server of ours unlinking the name to bind its own) and its number
	 * given to that server's socket, which the check would then take
	 * for ours.
	 */
	weft__unlink_if_same(s->unix_path, &s->unix_id);
	if (s->unix_l)
		evconnlistener_free(s->unix_l);
	if (s->tcp_l)
		evconnlistener_free(s->tcp_l);
	if (s->wake_ev)
		event_free(s->wake_ev);
	if (s->stop_ev)
		event_free(s->stop_ev);
	if (s->tick_ev)
		event_free(s->tick_ev);
	if (s->accept_resume_ev)
		event_free(s->accept_resume_ev);
	if (s->base)
		event_base_free(s->base);
	weft__server_token_unlink(s->token_path, s->token);
	while (s->qhead) {
		struct item *it = s->qhead;

		s->qhead = it->next;
		weft__server_item_free(it);
	}
	weft_wire_buf_fini(&s->header);
	pthread_mutex_destroy(&s->qlock);
	pthread_mutex_destroy(&s->stat_lock);
	free(s);
}

/*
 * The TCP clients' token: @given, or one made and written to
 * <socket dir>/<pid>.token (its path said on stderr once).
 */
static int token_setup(weft_server_t *s, const char *given)
{
	char dir[sizeof(s->unix_path)];
	int err;

	if (given) {
		if (!given[0] || strlen(given) > WEFT_WIRE_TOKEN_MAX)
			return -EINVAL;
		memcpy(s->token, given, strlen(given));
		return 0;
	}
	err = weft__server_token_make(s->token, sizeof(s->token));
	if (!err)
		err = weft_wire_socket_dir(dir, sizeof(dir), 1);
	if (err)
		return err;
	snprintf(s->token_path, sizeof(s->token_path), "%s/%d.token", dir,
		 (int)getpid());
	err = weft__server_token_write(s->token_path, s->token);
	if (err) {
		s->token_path[0] = '\0';
		return err;
	}
	weft__server_log("TCP clients need the token in %s (weft-console "
			 "tcp://HOST:PORT --token-file %s)",
			 s->token_path, s->token_path);
	return 0;
}

/**
 * weft__server_create() - start a server thread.
 * @opts: where to listen and the bounds; copied.
 *
 * Return: 0; -ENOMEM; -EINVAL (a bad tcp_bind, an empty or too long
 * token); -EPERM (the socket directory is someone else's or open to
 * others); -ENAMETOOLONG; -EIO (no randomness for a token); a negative
 * errno from bind(2), listen(2) or writing the token file; -EAGAIN (the
 * thread).
 */
int weft__server_create(const weft_server_opts_t *opts, weft_server_t **out)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct timeval tick = { 0, TICK_MS * 1000 };
	sigset_t all, old;
	weft_server_t *s;
	char dir[sizeof(s->unix_path)], path[sizeof(s->unix_path) + 32];
	int err;

	pthread_once(&once, threads_once);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->qlock, NULL);
	pthread_mutex_init(&s->stat_lock, NULL);
	s->tcp_port = -1;
	s->buf_max = opts->client_buf_max ? opts->client_buf_max :
					    CLIENT_BUF_DEFAULT;
	s->kick_ns = (uint64_t)(opts->slow_kick_ms ? opts->slow_kick_ms :
						     SLOW_KICK_DEFAULT_MS) *
		     1000000u;
	s->queue_max = opts->queue_max_bytes ? opts->queue_max_bytes :
					       QUEUE_DEFAULT;
	s->total_max = opts->total_buf_max ? opts->total_buf_max :
					     TOTAL_BUF_DEFAULT;
	s->handshake_ns = (uint64_t)(opts->handshake_ms ?
					     opts->handshake_ms :
					     HANDSHAKE_DEFAULT_MS) *
			  1000000u;
	s->partial_ns = (uint64_t)(opts->partial_ms ? opts->partial_ms :
						      PARTIAL_DEFAULT_MS) *
			1000000u;
	s->stall_ns =
		(uint64_t)(opts->stall_ms ? opts->stall_ms : STALL_DEFAULT_MS) *
		1000000u;
	s->max_record = opts->max_record;
	s->st.client_buf_max = s->buf_max;
	err = header_build(s, opts->workers);
	if (err)
		goto out_free;
	s->base = event_base_new();
	if (!s->base) {
		err = -ENOMEM;
		goto out_free;
	}
	s->wake_ev = event_new(s->base, -1, 0, srv_wake_cb, s);
	s->stop_ev = event_new(s->base, -1, 0, srv_stop_cb, s);
	s->tick_ev = event_new(s->base, -1, EV_PERSIST, srv_tick_cb, s);
	s->accept_resume_ev = evtimer_new(s->base, accept_resume_cb, s);
	if (!s->wake_ev || !s->stop_ev || !s->tick_ev || !s->accept_resume_ev ||
	    event_add(s->tick_ev, &tick)) {
		err = -ENOMEM;
		goto out_free;
	}
	if (!opts->unix_path) {
		err = weft_wire_socket_dir(dir, sizeof(dir), 1);
		if (err)
			goto out_free;
		snprintf(path, sizeof(path), "%s/%d.sock", dir, (int)getpid());
		err = listen_unix(s, path);
	} else if (opts->unix_path[0]) {
		err = listen_unix(s, opts->unix_path);
	}
	if (err)
		goto out_free;
	if (opts->tcp_bind && opts->tcp_bind[0]) {
		err = listen_tcp(s, opts->tcp_bind);
		if (!err)
			err = token_setup(s, opts->token);
		if (err)
			goto out_free;
	}
	/*
	 * The thread starts with every signal blocked: the application's
	 * handlers run elsewhere, and a write to a client that has gone
	 * fails with EPIPE instead of killing the process with SIGPIPE
	 * (which, blocked, stays pending on this thread alone).
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&s->thread, NULL, server_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		err = -EAGAIN;
		goto out_free;
	}
	*out = s;
	return 0;

out_free:
	server_free(s);
	return err;
}

/**
 * weft__server_destroy() - close every connection, drop the probe
 * subscription, stop the thread, remove the socket.
 */
void weft__server_destroy(weft_server_t *s)
{
	if (!s)
		return;
	/*
	 * The last pass to every client, due or not (their interval would
	 * have held it back, then the close dropped it): what the rings
	 * hold now, and, at a runtime's destroy, what its last polls said.
	 * Queued by the time the flush returns; the thread sends it on its
	 * way out (flush_at_stop()).
	 */
	atomic_store_explicit(&s->final, true, memory_order_release);
	weft_probe_flush();
	event_active(s->stop_ev, EV_READ, 0);
	pthread_join(s->thread, NULL);
	server_free(s);
}

const char *weft__server_unix_path(const weft_server_t *s)
{
	return s->unix_path;
}

int weft__server_tcp_port(const weft_server_t *s)
{
	return s->tcp_port;
}

const char *weft__server_token(const weft_server_t *s)
{
	return s->token;
}

const char *weft__server_token_path(const weft_server_t *s)
{
	return s->token_path;
}

void weft__server_stats(weft_server_t *s, weft_server_stats_t *out)
{
	pthread_mutex_lock(&s->stat_lock);
	*out = s->st;
	pthread_mutex_unlock(&s->stat_lock);
	/* The collector's, under qlock (stat_lock is a leaf). */
	pthread_mutex_lock(&s->qlock);
	out->backlog_records = s->backlog_records;
	out->backlogs_stopped = s->backlogs_stopped;
	out->resync_fulls = s->resync_fulls;
	pthread_mutex_unlock(&s->qlock);
}

/* ------------------------------------------------------------ the default */

static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_server_t *env_srv;
static struct weft_runtime_s *env_rt;
static char exit_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static char exit_token_path[sizeof(exit_path) + 32];
static char exit_token[WEFT_WIRE_TOKEN_MAX + 1];
static weft__file_id_t exit_id;
static pid_t exit_pid;

static void remove_at_exit(void)
{
	weft_server_t *s = NULL;

	pthread_mutex_lock(&env_lock);
	/* Not in a forked child: the socket is its parent's. */
	if (getpid() == exit_pid) {
		weft__unlink_if_same(exit_path, &exit_id);
		weft__server_token_unlink(exit_token_path, exit_token);
		/*
		 * A process that exits with its runtime still up (main
		 * returns): its consoles get what the last pass said, then
		 * the close, as at a destroy.  Not from the collector (the
		 * flush would return at once and the server's unsubscribe
		 * would join it) nor from the server's own thread.
		 */
		if (env_srv && !weft__in_collector &&
		    !pthread_equal(pthread_self(), env_srv->thread)) {
			s = env_srv;
			env_srv = NULL;
			env_rt = NULL;
		}
	}
	exit_path[0] = '\0';
	exit_token_path[0] = '\0';
	pthread_mutex_unlock(&env_lock);
	weft__server_destroy(s);
}

/*
 * All clients' output together, WEFT_CONSOLE_BUFFER_MB: 8 MiB to 64 GiB.
 * At least twice the largest record (WEFT_WIRE_MAX_RECORD): a budget a
 * full update alone could pass would drop one console for another's
 * update, in turns.
 */
static const weft__knob_t buffer_knob = {
	.name = "WEFT_CONSOLE_BUFFER_MB",
	.kind = WEFT__KNOB_SIZE,
	.unit = "MB",
	.def = TOTAL_BUF_DEFAULT >> 20,
	.min = 2 * (WEFT_WIRE_MAX_RECORD >> 20),
	.max = 64u << 10,
};

static bool console_off(void)
{
	return !weft__knob_bool("WEFT_CONSOLE", true);
}

/*
 * Why the console's server did not start, naming what is at fault: the
 * socket directory (someone else's, or open to others: refused, since
 * another user could then reach the process), the TCP address, or the
 * error alone.
 */
static void say_not_started(int err, const char *tcp_bind)
{
	char dir[256];
	struct stat st;

	if ((err == -EPERM || err == -ENOTDIR || err == -EACCES) &&
	    weft_wire_socket_dir(dir, sizeof(dir), 0) != -ENAMETOOLONG) {
		if (lstat(dir, &st) == 0 && S_ISDIR(st.st_mode))
			weft__server_log(
				"not started: the socket directory %s is owned "
				"by uid %u with mode %03o; it must be this "
				"user's (uid %u) and closed to others (0700): "
				"remove it, or set XDG_RUNTIME_DIR",
				dir, (unsigned)st.st_uid,
				(unsigned)(st.st_mode & 0777),
				(unsigned)geteuid());
		else
			weft__server_log("not started: the socket directory "
					 "%s: %s",
					 dir, strerror(-err));
		return;
	}
	if (tcp_bind && tcp_bind[0] && err == -EINVAL)
		weft__server_log("not started: WEFT_CONSOLE_BIND=%s is not "
				 "HOST:PORT, or WEFT_CONSOLE_TOKEN is longer "
				 "than %d bytes",
				 tcp_bind, WEFT_WIRE_TOKEN_MAX);
	else
		weft__server_log("not started: %s", strerror(-err));
}

void weft__server_env_start(struct weft_runtime_s *rt)
{
	static bool atexit_done;
	weft_server_opts_t o = { 0 };
	weft_server_t *s;
	int err;

	if (console_off())
		return;
	pthread_mutex_lock(&env_lock);
	if (env_srv)
		goto out_unlock;
	o.tcp_bind = getenv("WEFT_CONSOLE_BIND");
	o.token = getenv("WEFT_CONSOLE_TOKEN");
	if (o.token && !o.token[0])
		o.token = NULL; /* empty: as unset, one is made */
	o.total_buf_max = (size_t)weft__knob(&buffer_knob);
	o.workers = weft_runtime_workers(rt);
	err = weft__server_create(&o, &s);
	if (err) {
		say_not_started(err, o.tcp_bind);
		goto out_unlock;
	}
	env_srv = s;
	env_rt = rt;
	snprintf(exit_path, sizeof(exit_path), "%s", s->unix_path);
	snprintf(exit_token_path, sizeof(exit_token_path), "%s", s->token_path);
	exit_id = s->unix_id;
	memcpy(exit_token, s->token, sizeof(exit_token));
	exit_pid = getpid();
	if (!atexit_done) {
		atexit(remove_at_exit);
		atexit_done = true;
	}
out_unlock:
	pthread_mutex_unlock(&env_lock);
}

void weft__server_env_stop(struct weft_runtime_s *rt)
{
	weft_server_t *s = NULL;

	pthread_mutex_lock(&env_lock);
	if (env_rt == rt && env_srv) {
		s = env_srv;
		env_srv = NULL;
		env_rt = NULL;
		exit_path[0] = '\0';
		exit_token_path[0] = '\0';
	}
	pthread_mutex_unlock(&env_lock);
	/* Outside env_lock: the thread may be in the probe. */
	weft__server_destroy(s);
}

weft_server_t *weft__server_default(void)
{
	weft_server_t *s;

	pthread_mutex_lock(&env_lock);
	s = env_srv;
	pthread_mutex_unlock(&env_lock);
	return s;
}
