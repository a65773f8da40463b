# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# Sourced by run.sh and console.sh: where a fuzz target's corpus is kept
# between runs, and the ASan options they run with.
#
# fuzz_corpus TARGET OUT_DIR prints the directory libFuzzer is to write
# TARGET's new inputs to, made if need be: $WEFT_FUZZ_CORPUS/TARGET when
# that is set, else ${XDG_CACHE_HOME:-~/.cache}/weft/fuzz/TARGET, outside
# the build and the source tree, so a new build directory (CI's, ctest's
# short runs) or a fresh checkout starts from what earlier runs found;
# OUT_DIR/corpus-TARGET when neither can be made.  The seeds, committed
# (tests/fuzz/corpus*) and generated, stay apart in OUT_DIR/seeds-TARGET,
# a second corpus directory libFuzzer reads and never writes.
#
# fuzz_corpus_trim BINARY DIR keeps DIR under 2,000 inputs: above that,
# libFuzzer's -merge=1 keeps only the inputs that bring new coverage
# (what each run reads first stays a few seconds' work).
#
# ASan's quarantine (freed memory held back to catch a use after free) is
# 8 MiB in these runs, not its 256 MiB.  No target keeps state from one
# input to the next, so a use after free reads memory freed by the same
# input, and an input frees far less than 8 MiB (fuzz_trace_file about
# 200 KiB over its readings, the console model's largest Hello under
# 1 MiB).  A large quarantine only makes every allocation land on memory
# out of the cache, or not yet faulted in: the allocator's two loads of a
# new chunk's shadow and header took 27% of fuzz_trace_file's time, and
# 2,000 inputs of its kept corpus 5.4 s of CPU (2.6 s with this).  A
# caller's ASAN_OPTIONS wins.
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=8}
fuzz_corpus()
{
	local t=$1 out=$2 base
	base=${WEFT_FUZZ_CORPUS:-${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/weft/fuzz}
	if mkdir -p "$base/$t" 2>/dev/null && [[ -w "$base/$t" ]]; then
		echo "$base/$t"
	else
		mkdir -p "$out/corpus-$t"
		echo "$out/corpus-$t"
	fi
}

fuzz_corpus_trim()
{
	local bin=$1 dir=$2 n
	n=$(find "$dir" -maxdepth 1 -type f | wc -l)
	((n > 2000)) || return 0
	rm -rf "$dir.merge"
	mkdir "$dir.merge"
	# Swapped by renames: a run still writing to the old directory (two
	# campaigns on one corpus) writes into DIR.old, never into a half
	# removed DIR (rm -rf beside a writer failed and lost the merge).
	if "$bin" -merge=1 -rss_limit_mb=2048 "$dir.merge" "$dir" >"$dir.merge.log" 2>&1; then
		rm -rf "$dir.old"
		mv "$dir" "$dir.old"
		mv "$dir.merge" "$dir"
		rm -rf "$dir.old" 2>/dev/null || true
		echo "fuzz: $(basename "$dir"): corpus of $n inputs merged to $(find "$dir" -maxdepth 1 -type f | wc -l)"
	else
		rm -rf "$dir.merge"
	fi
	rm -f "$dir.merge.log"
}
