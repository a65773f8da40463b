# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# Sourced by console_tmux.sh (replay) and console_live.sh (live attach),
# after they define tm, capture, wait_for and fail, with the console in
# the tmux session "con" and its exit status going to $tmp/rc.
#
# every_size: the console through terminals of 1x1, 2x1, 40x1, 10x5, 3x2
# and 120x3, at each every view reached by its key (w t s r x d m, the
# sites' and the resources' Enter, a task's detail from the tasks and
# the warnings, the timeline's spike and a poll's task, the help) and
# back with Esc; then 90x24: the workers view is drawn again, every line
# fits, and the console is still running (under ASan, a cell read or
# written out of place ends it: the issue 19 heap overflow of a one-row
# terminal).  At 120x3 the header and the status line show.

# wait_resized W H: after a resize to WxH, wait (up to 10 s) for the
# console's redraw: H rows, the header on row 1, the status line on row
# H, no line wider than W.  tmux keeps the bottom rows of a shrunken
# pane, so the old status line lands on row H before the console has
# drawn anything: the header on row 1 is what tells the redraw apart.
# shellcheck disable=SC2154
wait_resized()
{
	local w=$1 h=$2 line ok
	for _ in $(seq 100); do
		capture
		ok=1
		[[ $(wc -l <"$tmp/screen.txt") -eq $h ]] || ok=0
		[[ "$(head -n 1 "$tmp/screen.txt")" == *"weft-console"* ]] || ok=0
		[[ "$(tail -n 1 "$tmp/screen.txt")" == *"q quit"* ]] || ok=0
		while IFS= read -r line; do # ${#line}: characters (UTF-8 locale)
			[[ ${#line} -le $w ]] || ok=0
		done <"$tmp/screen.txt"
		((ok)) && return 0
		sleep 0.1
	done
	cat "$tmp/screen.txt" >&2
	fail "after a resize to ${w}x$h: no header on row 1, status on row $h, lines within $w"
}

# $tmp: the caller's scratch directory.
# shellcheck disable=SC2154
every_size()
{
	local size group keys=(w 't Enter' 'Escape s Enter' 'Escape s r Enter Enter'
		'Escape Escape x Enter' 'Escape d m h Enter Enter'
		'Escape Escape ? Escape w')

	for size in 1x1 2x1 40x1 10x5 3x2 120x3; do
		tm resize-window -t con -x "${size%x*}" -y "${size#*x}"
		# A view and the keys on it at once: each group is drawn
		# (none starts with [ or O, which would extend an Escape).
		for group in "${keys[@]}"; do
			# shellcheck disable=SC2086 # split into keys
			tm send-keys -t con $group
			sleep 0.03
		done
		if [[ $size == 120x3 ]]; then
			wait_for "q quit" "the status line at 120x3"
			wait_for "weft-console" "the header at 120x3"
		fi
		[[ ! -s "$tmp/rc" ]] || fail "the console ended at $size (exit $(cat "$tmp/rc"))"
	done
	tm resize-window -t con -x 90 -y 24
	tm send-keys -t con w
	wait_for "STEALS-IN" "the workers view after the small sizes"
	[[ ! -s "$tmp/rc" ]] || fail "the console ended after the small sizes (exit $(cat "$tmp/rc"))"
	while IFS= read -r line; do # ${#line}: characters (UTF-8 locale)
		[[ ${#line} -le 90 ]] || fail "a line is wider than 90 after the small sizes"
	done <"$tmp/screen.txt"
}
