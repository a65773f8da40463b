/* SPDX-License-Identifier: MIT */
/*
 * The command-line helpers the tools share (weft-demo, weft-demo-load,
 * weft-bench's servers, weft-loadgen): the one-line fatal message, the
 * strict decimal number, the "--x V" / "--x=V" option value, the
 * monotonic clock.  Plain C and libc, no runtime: the load generators,
 * which do not link libweft, use them too.
 */
#ifndef WEFT_TOOLS_TOOL_UTIL_H
#define WEFT_TOOLS_TOOL_UTIL_H

#include <stdbool.h>
#include <stdint.h>

/**
 * tool_die() - print "@prog: MESSAGE" and a newline on stderr, then exit.
 * @status: the exit status.
 * @prog: the program's name, e.g. "weft-demo".
 * @fmt: printf format of the message.
 */
__attribute__((noreturn, format(printf, 3, 4))) void
tool_die(int status, const char *prog, const char *fmt, ...);

/**
 * tool_parse_ulong() - @s as a decimal number within @min..@max.
 * @s: the text: decimal digits only (no sign, no space, not empty).
 * @min: the smallest value accepted.
 * @max: the largest value accepted.
 * @out: receives the value; left alone on failure.
 *
 * Return: true; false when @s is not such a number or is out of range.
 */
bool tool_parse_ulong(const char *s, unsigned long min, unsigned long max,
		      unsigned long *out);

/**
 * tool_opt_value() - the value of option @name at argv[*i].
 * @argc: the argument count.
 * @argv: the arguments.
 * @i: the index of the argument looked at; moved to the value for the
 *     "--x V" form.
 * @name: the option, e.g. "--workers".
 * @val: receives the value ("V" of "--x V" or "--x=V").
 *
 * Return: 1 with *@val set; 0 when argv[*i] is not @name (*@val is NULL);
 * -1 when it is, but is the last argument and has no "=" (*@val is NULL).
 */
int tool_opt_value(int argc, char **argv, int *i, const char *name,
		   const char **val);

/** tool_now_ns() - CLOCK_MONOTONIC in nanoseconds. */
uint64_t tool_now_ns(void);

#endif
