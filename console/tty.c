/* SPDX-License-Identifier: MIT */
/*
 * The interactive console: ncursesw draws, libevent drives.  Three
 * events: the keyboard (fd 0), SIGWINCH, and a redraw timer (10 Hz, or
 * --fps) that also moves the replay clock.  A pass is: keys -> actions (flags) ->
 * seek / resort the model -> draw the grid -> blit.  The blit writes
 * every cell into stdscr and lets curses send only what changed
 * (wnoutrefresh + doupdate), so nothing flickers; a resize reallocates
 * the grid and redraws everything.
 *
 * Live (s->live): a bufferevent on the socket feeds the stream to the
 * model (con_live_feed) as it arrives; the tick draws.  A lost or bad
 * connection is dropped (the model, so the screen, keeps its last state)
 * and the tick tries again once a second.
 */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif
#include <curses.h>

#include "console.h"

#define RETRY_MS 1000

struct tty {
	con_session_t *s;
	struct event_base *base;
	con_grid_t grid;
	bool grid_ok;
	uint64_t last_tick_ns;
	struct event *ev_tick;
	uint64_t tick_ns;      /* the redraw period */
	uint64_t next_tick_ns; /* the next tick's deadline */
	int status;
	struct bufferevent *bev; /* live: the connection's, or NULL */
	uint64_t next_try_ms;    /* live: when to connect again */
	/* For --stats (what the console benchmark reads). */
	uint64_t start_ns;
	uint64_t redraws, draw_ns, draw_max_ns;
	uint64_t feed_ns, bytes_in;
};

/* The palette: a role's attributes (and colour pair when colour is on). */
static attr_t role_attr(const con_session_t *s, con_role_t r, short *pair)
{
	static const struct {
		short fg;
		attr_t attr;
	} pal[CON_ROLE_MAX] = {
		[CON_ROLE_NORMAL] = { -1, A_NORMAL },
		[CON_ROLE_HEADER] = { -1, A_REVERSE },
		[CON_ROLE_TITLE] = { -1, A_BOLD },
		[CON_ROLE_COLUMN] = { -1, A_BOLD | A_UNDERLINE },
		[CON_ROLE_SELECTED] = { -1, A_REVERSE | A_BOLD },
		[CON_ROLE_DIM] = { -1, A_DIM },
		[CON_ROLE_GOOD] = { COLOR_GREEN, A_NORMAL },
		[CON_ROLE_WARN] = { COLOR_YELLOW, A_BOLD },
		[CON_ROLE_BAD] = { COLOR_RED, A_BOLD },
		[CON_ROLE_SPARK] = { COLOR_CYAN, A_NORMAL },
		[CON_ROLE_MODE] = { COLOR_MAGENTA, A_REVERSE | A_BOLD },
	};

	*pair = 0;
	if (r >= CON_ROLE_MAX)
		r = CON_ROLE_NORMAL;
	if (s->color && pal[r].fg >= 0)
		*pair = (short)(r + 1);
	return pal[r].attr;
}

static void palette_init(con_session_t *s)
{
	if (!s->color || !has_colors()) {
		s->color = false;
		return;
	}
	start_color();
	use_default_colors();
	init_pair(CON_ROLE_GOOD + 1, COLOR_GREEN, -1);
	init_pair(CON_ROLE_WARN + 1, COLOR_YELLOW, -1);
	init_pair(CON_ROLE_BAD + 1, COLOR_RED, -1);
	init_pair(CON_ROLE_SPARK + 1, COLOR_CYAN, -1);
	init_pair(CON_ROLE_MODE + 1, COLOR_MAGENTA, -1);
}

static void blit(struct tty *t)
{
	con_grid_t *g = &t->grid;

	for (int y = 0; y < g->h; y++)
		for (int x = 0; x < g->w; x++) {
			const con_cell_t *c = &g->cells[y * g->w + x];
			wchar_t wc[2] = { c->ch, 0 };
			cchar_t cc;
			short pair;
			attr_t a = role_attr(t->s, c->role, &pair);

			setcchar(&cc, wc, a, pair, NULL);
			/* The bottom-right cell returns ERR (the cursor
			 * cannot move past it) but is written. */
			(void)mvwadd_wch(stdscr, y, x, &cc);
		}
	wnoutrefresh(stdscr);
	doupdate();
}

static void draw(struct tty *t)
{
	con_session_t *s = t->s;
	uint64_t t0 = weft_wire_now_ns(), dt;

	if (!t->grid_ok || t->grid.w != COLS || t->grid.h != LINES) {
		if (t->grid_ok)
			con_grid_fini(&t->grid);
		con_grid_init(&t->grid, COLS, LINES, s->ascii);
		t->grid_ok = true;
	}
	con_session_resort(s);
	con_session_clamp(s, LINES);
	con_session_watch(s);
	con_screen_draw(s, &t->grid);
	blit(t);
	dt = weft_wire_now_ns() - t0;
	t->redraws++;
	t->draw_ns += dt;
	if (dt > t->draw_max_ns)
		t->draw_max_ns = dt;
}

static void apply(struct tty *t, unsigned flags)
{
	con_session_t *s = t->s;

	if (flags & CON_QUIT) {
		event_base_loopbreak(t->base);
		return;
	}
	if ((flags & CON_SEEK) && s->rp) {
		con_replay_seek(s->rp, s->model, s->seek_ns);
		s->at_end = s->rp->indexed && s->rp->pos_ns >= s->rp->last_ns;
	}
	if (flags & (CON_RESORT | CON_SEEK))
		con_session_resort(s);
	if (flags & (CON_REDRAW | CON_RESORT | CON_SEEK))
		draw(t);
}

static void resize(struct tty *t)
{
	struct winsize ws;

	if (ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
		resizeterm(ws.ws_row, ws.ws_col);
	clearok(curscr, TRUE);
	draw(t);
}

static void tty_input_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tty *t = arg;
	unsigned flags = 0;
	int key;

	(void)fd;
	(void)what;
	while ((key = getch()) != ERR) {
		if (key == KEY_RESIZE) {
			/* resizeterm() (tty_winch_cb) queues this: only
			 * redraw, or each resize would queue another. */
			flags |= CON_REDRAW;
			continue;
		}
		flags |= con_keys_handle(t->s, key);
		if (flags & CON_QUIT)
			break;
		/* Seeks apply in order (n twice goes two warnings on). */
		if (flags & CON_SEEK) {
			apply(t, flags);
			flags = 0;
		}
	}
	apply(t, flags);
}

static void tty_winch_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	resize(arg);
}

static void live_drop(struct tty *t, const char *why)
{
	if (t->bev)
		bufferevent_free(t->bev);
	t->bev = NULL;
	con_live_close(t->s->live, why);
	t->next_try_ms = con_live_now_ms() + RETRY_MS;
}

static void live_read_cb(struct bufferevent *bev, void *arg)
{
	struct tty *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t buf[65536];
	uint64_t t0 = weft_wire_now_ns();
	int n;

	while ((n = evbuffer_remove(in, buf, sizeof(buf))) > 0) {
		t->bytes_in += (uint64_t)n;
		if (con_live_feed(t->s->live, t->s->model, buf, (size_t)n)) {
			live_drop(t, NULL); /* the reason is in error */
			break;
		}
	}
	t->feed_ns += weft_wire_now_ns() - t0;
}

static void live_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct tty *t = arg;
	char why[200];

	(void)bev;
	if (what & BEV_EVENT_EOF)
		snprintf(why, sizeof(why),
			 "connection lost: closed by the process");
	else
		snprintf(why, sizeof(why), "connection lost: %s",
			 evutil_socket_error_to_string(
				 evutil_socket_geterror(-1)));
	live_drop(t, why);
}

/* Hand a fresh connection's socket to a bufferevent. */
static void live_attach(struct tty *t)
{
	con_live_t *l = t->s->live;

	if (evutil_make_socket_nonblocking(l->fd) ||
	    !(t->bev = bufferevent_socket_new(t->base, l->fd, 0))) {
		live_drop(t, "libevent: cannot watch the socket");
		return;
	}
	bufferevent_setcb(t->bev, live_read_cb, NULL, live_event_cb, t);
	t->s->asked_task = 0; /* a new connection: ask again */
	bufferevent_enable(t->bev, EV_READ);
}

static void live_tick(struct tty *t)
{
	con_live_t *l = t->s->live;
	uint64_t now = con_live_now_ms();

	if (l->connected || now < t->next_try_ms)
		return;
	t->next_try_ms = now + RETRY_MS;
	if (con_live_connect(l) == 0)
		live_attach(t);
}

/*
 * The next tick on a fixed grid of deadlines (start + k * period), not
 * "period after this one": a tick that runs late (a busy machine) does
 * not push every later one back, so the rate stays at --fps unless a
 * redraw takes longer than a period (then the missed ticks are skipped).
 */
static void arm_tick(struct tty *t, uint64_t now)
{
	uint64_t wait;
	struct timeval tv;

	t->next_tick_ns += t->tick_ns;
	if (t->next_tick_ns <= now)
		t->next_tick_ns +=
			((now - t->next_tick_ns) / t->tick_ns + 1) * t->tick_ns;
	wait = t->next_tick_ns - now;
	tv.tv_sec = (time_t)(wait / 1000000000u);
	tv.tv_usec = (suseconds_t)(wait % 1000000000u / 1000u);
	evtimer_add(t->ev_tick, &tv);
}

static void tty_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tty *t = arg;
	con_session_t *s = t->s;
	uint64_t now = weft_wire_now_ns(), dt = now - t->last_tick_ns;

	(void)fd;
	(void)what;
	t->last_tick_ns = now;
	arm_tick(t, now);
	if (s->exit_after_ns && now - t->start_ns >= s->exit_after_ns) {
		event_base_loopbreak(t->base);
		return;
	}
	/* The rest of the file's index, a step per frame. */
	if (s->replay && s->rp && !s->rp->indexed)
		con_replay_index(s->rp, CON_INDEX_STEP_NS);
	if (s->replay && s->rp && !s->paused && !s->at_end) {
		con_replay_t *r = s->rp;
		uint64_t pos = r->pos_ns + (uint64_t)((double)dt * s->speed);

		if (r->indexed && pos >= r->last_ns) {
			pos = r->last_ns;
			s->at_end = true;
		}
		con_replay_seek(r, s->model, pos);
	}
	if (s->live)
		live_tick(t);
	if (!s->paused)
		draw(t);
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* --stats FILE: one line of key=value figures about this run. */
static void write_stats(const struct tty *t)
{
	const con_session_t *s = t->s;
	const con_model_t *m = s->model;
	double secs = (double)(weft_wire_now_ns() - t->start_ns) / 1e9;
	struct rusage ru;
	FILE *f;

	if (!s->stats_path)
		return;
	f = fopen(s->stats_path, "w");
	if (!f) {
		fprintf(stderr, "weft-console: %s: %s\n", s->stats_path,
			strerror(errno));
		return;
	}
	getrusage(RUSAGE_SELF, &ru);
	fprintf(f,
		"seconds=%.3f redraws=%llu redraws_per_s=%.2f "
		"draw_ms_mean=%.3f draw_ms_max=%.3f feed_s=%.3f "
		"cpu_s=%.3f maxrss_kb=%ld bytes_in=%llu frames=%llu "
		"updates=%llu batches=%llu events=%llu bad_frames=%llu "
		"tasks=%zu target_events_per_s=%.0f target_live_tasks=%llu\n",
		secs, (unsigned long long)t->redraws,
		secs > 0 ? (double)t->redraws / secs : 0,
		t->redraws ? (double)t->draw_ns / (double)t->redraws / 1e6 : 0,
		(double)t->draw_max_ns / 1e6, (double)t->feed_ns / 1e9,
		tv_s(ru.ru_utime) + tv_s(ru.ru_stime), ru.ru_maxrss,
		(unsigned long long)t->bytes_in,
		(unsigned long long)(s->live ? s->live->frames : 0),
		(unsigned long long)m->updates, (unsigned long long)m->batches,
		(unsigned long long)m->events,
		(unsigned long long)m->bad_frames, m->ntasks,
		m->stats.events_per_s, (unsigned long long)m->stats.live_tasks);
	fclose(f);
}

int con_tty_run(con_session_t *s)
{
	struct tty t = { .s = s };
	struct event *ev_in, *ev_winch, *ev_tick;
	unsigned fps = s->fps ? s->fps : 10;

	if (!isatty(0) || !isatty(1)) {
		fprintf(stderr, "weft-console: not a terminal (use --once "
				"for scripts)\n");
		return 2;
	}
	t.base = event_base_new();
	if (!t.base)
		con_die("libevent: cannot create an event base");
	initscr();
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	set_escdelay(25);
	curs_set(0);
	palette_init(s);

	ev_in = event_new(t.base, 0, EV_READ | EV_PERSIST, tty_input_cb, &t);
	ev_winch = evsignal_new(t.base, SIGWINCH, tty_winch_cb, &t);
	ev_tick = evtimer_new(t.base, tty_tick_cb, &t);
	if (!ev_in || !ev_winch || !ev_tick)
		con_die("libevent: cannot create events");
	event_add(ev_in, NULL);
	event_add(ev_winch, NULL);
	t.ev_tick = ev_tick;
	t.tick_ns = 1000000000u / fps;
	t.last_tick_ns = t.start_ns = t.next_tick_ns = weft_wire_now_ns();
	arm_tick(&t, t.start_ns);
	if (s->live && s->live->connected)
		live_attach(&t);
	else if (s->live)
		t.next_try_ms = con_live_now_ms() + RETRY_MS;
	draw(&t);
	event_base_dispatch(t.base);
	write_stats(&t);

	if (t.bev)
		bufferevent_free(t.bev);

	event_free(ev_in);
	event_free(ev_winch);
	event_free(ev_tick);
	event_base_free(t.base);
	endwin();
	if (t.grid_ok)
		con_grid_fini(&t.grid);
	return t.status;
}
