/* SPDX-License-Identifier: MIT */
/*
 * The text grid views draw into: w x h cells, each a wide character and
 * a semantic role.  curses blits it (tty.c); --once prints it as UTF-8.
 * Every cell goes through cell(), which drops what falls outside the
 * grid or the rows the clip leaves open (con_grid_clip: the frame gives
 * each view its rows), so no view can draw outside the screen or over
 * the header and status lines, whatever its own arithmetic says: a
 * 1x1 terminal gets the same calls as a 200x60 one.  Wide
 * (double-column) characters are not used: every glyph here is one
 * column, which keeps clipping exact.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"

void con_grid_init(con_grid_t *g, int w, int h, bool ascii)
{
	if (w < 1)
		w = 1;
	if (h < 1)
		h = 1;
	g->w = w;
	g->h = h;
	g->ascii = ascii;
	g->cells = con_xcalloc((size_t)w * (size_t)h, sizeof(*g->cells));
	con_grid_unclip(g);
	con_grid_clear(g);
}

void con_grid_fini(con_grid_t *g)
{
	free(g->cells);
	g->cells = NULL;
}

void con_grid_clear(con_grid_t *g)
{
	size_t w = (size_t)g->w;

	/* One row by hand, the others copied from it (a redraw clears the
	 * whole screen: memcpy is the fast way, checked or not). */
	for (size_t x = 0; x < w; x++)
		g->cells[x] = (con_cell_t){ L' ', CON_ROLE_NORMAL };
	for (size_t y = 1; y < (size_t)g->h; y++)
		memcpy(&g->cells[y * w], g->cells, w * sizeof(*g->cells));
}

void con_grid_clip(con_grid_t *g, int top, int rows)
{
	long long end = (long long)top + (rows > 0 ? rows : 0);

	if (end > g->h)
		end = g->h;
	g->clip_top = top < 0 ? 0 : top > g->h ? g->h : top;
	g->clip_end = end < g->clip_top ? g->clip_top : (int)end;
}

void con_grid_unclip(con_grid_t *g)
{
	g->clip_top = 0;
	g->clip_end = g->h;
}

/* Inlined even at -O1 (the fuzzer's build): a call a character. */
static inline __attribute__((always_inline)) con_cell_t *
cell(con_grid_t *g, int x, int y)
{
	/* clip_top >= 0 and clip_end <= h (con_grid_clip). */
	if (x < 0 || x >= g->w || y < g->clip_top || y >= g->clip_end)
		return NULL;
	return &g->cells[(size_t)y * (size_t)g->w + (size_t)x];
}

con_cell_t *con_grid_cell(con_grid_t *g, int x, int y)
{
	return cell(g, x, y);
}

int con_grid_row_end(const con_grid_t *g, int y)
{
	int end = 0;

	if (y < 0 || y >= g->h)
		return 0;
	for (int x = 0; x < g->w; x++)
		if (g->cells[(size_t)y * (size_t)g->w + (size_t)x].ch != L' ')
			end = x + 1;
	return end;
}

int con_grid_put(con_grid_t *g, int x, int y, con_role_t role, const char *s)
{
	mbstate_t st;
	size_t left = strlen(s);

	memset(&st, 0, sizeof(st));
	while (left) {
		wchar_t wc;
		size_t n;
		con_cell_t *c;

		/* ASCII, most of what is drawn, needs no conversion (and
		 * is one byte in any locale the console runs in). */
		if ((unsigned char)*s < 0x80) {
			wc = (wchar_t)*s;
			n = 1;
		} else {
			n = mbrtowc(&wc, s, left, &st);
		}
		if (n == (size_t)-1 || n == (size_t)-2) {
			/* Not UTF-8 (or no UTF-8 locale): one byte each. */
			wc = (unsigned char)*s < 0x80 ? (wchar_t)*s : L'?';
			n = 1;
			memset(&st, 0, sizeof(st));
		} else if (n == 0) {
			break;
		}
		if (wc < 0x20 || wc == 0x7f)
			wc = L'?';
		c = cell(g, x, y);
		if (c)
			*c = (con_cell_t){ wc, (uint8_t)role };
		x++;
		s += n;
		left -= n;
	}
	return x;
}

int con_grid_printf(con_grid_t *g, int x, int y, con_role_t role,
		    const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return con_grid_put(g, x, y, role, buf);
}

void con_grid_fill_row(con_grid_t *g, int y, con_role_t role)
{
	con_cell_t *row = cell(g, 0, y);

	if (!row)
		return; /* clipped (or a grid 0 wide) */
	for (int x = 0; x < g->w; x++)
		row[x].role = (uint8_t)role;
}

int con_table_head(con_grid_t *g, int y, const int *wid,
		   const char *const *label, int n, int sort_col, bool invert)
{
	int x = 0;

	con_grid_fill_row(g, y, CON_ROLE_COLUMN);
	for (int c = 0; c < n; c++) {
		char text[48];
		int w = wid[c] < 0 ? -wid[c] : wid[c];
		int len;

		len = snprintf(text, sizeof(text), "%s%s", label[c],
			       c != sort_col ? "" :
			       invert        ? (g->ascii ? "v" : "▼") :
					       (g->ascii ? "^" : "▲"));
		/* The arrow is one column but three bytes: pad by hand. */
		if (c == sort_col && !g->ascii)
			len -= 2;
		x++;
		if (wid[c] > 0 && len < w)
			x += w - len;
		x = con_grid_put(g, x, y, CON_ROLE_COLUMN, text);
		if (wid[c] < 0 && len < w)
			x += w - len;
	}
	return x;
}

int con_table_cell(con_grid_t *g, int x, int y, con_role_t role, int wid,
		   const char *s)
{
	char cut[512];

	return con_grid_printf(g, x, y, role, " %*s", wid,
			       con_fit_end(s, wid < 0 ? -wid : wid, cut,
					   sizeof(cut)));
}

const char *con_fit_end(const char *s, int width, char *buf, size_t len)
{
	size_t n = strlen(s);

	if (width <= 0 || n <= (size_t)width)
		return s;
	snprintf(buf, len, "~%s", s + n - (size_t)width + 1);
	return buf;
}

static void put_wc(con_grid_t *g, int x, int y, wchar_t wc, con_role_t role)
{
	con_cell_t *c = cell(g, x, y);

	if (c)
		*c = (con_cell_t){ wc, (uint8_t)role };
}

int con_grid_spark(con_grid_t *g, int x, int y, const double *v, int n,
		   double max)
{
	static const wchar_t uni[] = L"▁▂▃▄▅▆▇█";
	static const wchar_t asc[] = L"_.-~=+*#";

	if (max <= 0)
		for (int i = 0; i < n; i++)
			if (v[i] > max)
				max = v[i];
	for (int i = 0; i < n; i++) {
		int level = 0;

		if (max > 0 && v[i] > 0) {
			/* Clamped before the conversion: a value over an
			 * explicit @max (or a NaN) is no undefined cast. */
			double f = v[i] / max;

			level = f >= 1 ? 7 : (int)(f * 7.0 + 0.5);
		}
		if (v[i] <= 0)
			put_wc(g, x + i, y, g->ascii ? L' ' : uni[0],
			       CON_ROLE_DIM);
		else
			put_wc(g, x + i, y, g->ascii ? asc[level] : uni[level],
			       CON_ROLE_SPARK);
	}
	return x + n;
}

int con_grid_bar(con_grid_t *g, int x, int y, int width, double frac,
		 con_role_t role)
{
	static const wchar_t eighths[] = L" ▏▎▍▌▋▊▉█";
	long long units;

	if (!(frac > 0)) /* a NaN too */
		frac = 0;
	if (frac > 1)
		frac = 1;
	if (width < 0)
		width = 0;
	units = (long long)(frac * width * 8 + 0.5);
	/* Only what can show is visited (a huge @width costs nothing). */
	for (int i = x < 0 ? -x : 0; i < width && i < g->w - x; i++) {
		long long u = units - (long long)i * 8;
		wchar_t wc;

		if (u <= 0)
			wc = g->ascii ? L'.' : L'·';
		else if (u >= 8)
			wc = g->ascii ? L'#' : eighths[8];
		else
			wc = g->ascii ? (u >= 4 ? L'#' : L'.') : eighths[u];
		put_wc(g, x + i, y, wc, u > 0 ? role : CON_ROLE_DIM);
	}
	return x + width;
}

void con_grid_print(const con_grid_t *g, FILE *out)
{
	con_grid_print_from(g, 0, out);
}

void con_grid_print_from(const con_grid_t *g, int from, FILE *out)
{
	int last = -1;

	for (int y = 0; y < g->h; y++)
		for (int x = 0; x < g->w; x++)
			if (g->cells[y * g->w + x].ch != L' ')
				last = y;
	for (int y = from < 0 ? 0 : from; y <= last; y++) {
		int end = g->w;

		while (end > 0 && g->cells[y * g->w + end - 1].ch == L' ')
			end--;
		for (int x = 0; x < end; x++) {
			char mb[MB_LEN_MAX];
			mbstate_t st;
			size_t n;

			memset(&st, 0, sizeof(st));
			n = wcrtomb(mb, g->cells[y * g->w + x].ch, &st);
			if (n == (size_t)-1)
				fputc('?', out);
			else
				fwrite(mb, 1, n, out);
		}
		fputc('\n', out);
	}
}
