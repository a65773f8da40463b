#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# check-api-docs.sh - every public function says from which threads it
# may be called and what it returns (issue 20).
#
# Scans the installed headers (runtime/, probe/ and proto/include/weft/*.h,
# or the files given as arguments) for the functions declared at file
# scope: WEFT_EXTERN ones, public static inline ones, and libweft-wire's
# plain prototypes.  Names with a double underscore (weft__*) are internal
# and skipped, as are macros.  A function's comment is the one that ends
# on the line just above it; a declaration that follows another with no
# blank line between shares that one's comment if the comment names it
# ("name()").  The comment must hold a "Context:" line, and a "Return:"
# line unless the function returns void.
#
# Prints one line per offender (file:line name: missing Context/Return)
# and exits 1; exits 0 when every function is documented.
#
# Usage: tools/check-api-docs.sh [header...]

set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 0 ]; then
	set -- "$root"/runtime/include/weft/*.h "$root"/probe/include/weft/*.h \
		"$root"/proto/include/weft/*.h
fi

exec python3 - "$@" <<'EOF'
import re
import sys

ATTR = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\($")


def functions(lines):
    """Yield (line index of the declaration's start, name, return type)."""
    depth = 0
    in_comment = in_macro = False
    stmt, start = "", None
    for i, raw in enumerate(lines):
        line = raw.rstrip("\n")
        if in_macro:
            in_macro = line.endswith("\\")
            continue
        # Strip comments, keeping track of block comments across lines.
        code, j = "", 0
        while j < len(line):
            if in_comment:
                k = line.find("*/", j)
                if k < 0:
                    j = len(line)
                else:
                    in_comment, j = False, k + 2
            elif line.startswith("/*", j):
                in_comment, j = True, j + 2
            elif line.startswith("//", j):
                break
            else:
                code += line[j]
                j += 1
        s = code.strip()
        if not stmt and s.startswith("#"):
            in_macro = line.endswith("\\")
            continue
        if not s:
            continue
        if s.startswith('extern "C"') or (depth == 0 and s == "}"
                                          and not stmt):
            continue
        if depth > 0:
            depth += s.count("{") - s.count("}")
            continue
        if not stmt:
            start = i
        stmt += " " + s
        if ";" not in stmt and "{" not in stmt:
            continue
        # A statement at file scope is complete (a body opens a brace).
        end = min(p for p in (stmt.find(";"), stmt.find("{")) if p >= 0)
        head = ATTR.sub("", stmt[:end]).strip()
        if "{" in stmt:
            depth = stmt.count("{") - stmt.count("}")
        stmt = ""
        words = head.split()
        if not words or words[0] in ("typedef", "struct", "enum", "union",
                                     "_Static_assert", "static_assert"):
            continue
        if "extern" in words:  # a variable: WEFT_EXTERN extern ...
            continue
        p = head.find("(")
        if p < 0:
            continue
        m = NAME.search(head[:p + 1])
        if not m:
            continue  # a function pointer, not a function
        name = m.group(1)
        ret = head[:m.start()]
        for w in ("WEFT_EXTERN", "static", "inline"):
            ret = re.sub(r"\b%s\b" % w, "", ret)
        yield start, name, " ".join(ret.split())


def comment_before(lines, i):
    """The comment block ending on line i - 1, or None."""
    j = i - 1
    if j < 0 or not lines[j].rstrip().endswith("*/"):
        return None
    k = j
    while k >= 0 and "/*" not in lines[k]:
        k -= 1
    return "".join(lines[k:j + 1]) if k >= 0 else None


def main(paths):
    bad = 0
    total = 0
    for path in paths:
        with open(path) as f:
            lines = f.readlines()
        prev_end, prev_comment = None, None
        for start, name, ret in functions(lines):
            if name.startswith("weft__") or not name.startswith("weft_"):
                continue
            total += 1
            text = comment_before(lines, start)
            if text is None and prev_end is not None and \
                    start == prev_end and prev_comment and \
                    re.search(r"\b%s\(\)" % re.escape(name), prev_comment):
                text = prev_comment
            # The end of this declaration: its statement's last line.
            k = start
            while ";" not in lines[k] and "{" not in lines[k]:
                k += 1
            if "{" in lines[k]:
                d = 0
                while True:
                    d += lines[k].count("{") - lines[k].count("}")
                    if d == 0 and "}" in lines[k]:
                        break
                    k += 1
            prev_end, prev_comment = k + 1, text
            missing = []
            body = text or ""
            if not re.search(r"^\s*\*?\s*Context:", body, re.M):
                missing.append("Context")
            if ret != "void" and \
                    not re.search(r"^\s*(/\*\*?|\*)?\s*Return:", body,
                                  re.M) and \
                    not re.search(r"^\s*/\*\*?\s.*\bReturn:", body, re.M):
                missing.append("Return")
            if missing:
                bad += 1
                print("%s:%d %s: missing %s" % (path, start + 1, name,
                                                "/".join(missing)))
    if bad:
        print("check-api-docs: %d of %d public functions undocumented"
              % (bad, total), file=sys.stderr)
        return 1
    print("check-api-docs: %d public functions, each with Context%s"
          % (total, " and Return where not void"))
    return 0


sys.exit(main(sys.argv[1:]))
EOF
