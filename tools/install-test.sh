#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tools/install-test.sh BUILD_DIR
#
# Checks that an installed weft is usable from outside the source tree, the
# way a user's project consumes it.  Installs BUILD_DIR (an already built,
# non-sanitizer build) into a temporary prefix, then builds
# tests/install/hello.c four ways and runs each binary, which must print
# exactly "ok":
#   pkg-config, shared   cc $(pkg-config --cflags --libs weft), run with
#                        LD_LIBRARY_PATH, must load the installed libweft.so
#   pkg-config, static   pkg-config --static, libweft.a linked explicitly,
#                        -DWEFT_STATIC; must not need libweft.so at all
#   find_package, shared tests/install/CMakeLists.txt with weft::weft
#   find_package, static the same with weft::weft_static
# and tests/install/hello_cxx.cpp with C++ (pkg-config, shared; where a
# C++ compiler is installed): the headers parse and link from C++;
# and tests/install/wire_client.c against libweft-wire alone (pkg-config
# weft-wire), which must neither need libweft nor carry the runtime.
# Registered with ctest as install_out_of_tree (tests/install/register.cmake).
set -euo pipefail

say()
{
	printf 'install-test: %s\n' "$*"
}

fail()
{
	say "FAIL: $*" >&2
	exit 1
}

if (($# != 1)); then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
[[ -f "$1/CMakeCache.txt" ]] || fail "$1 is not a configured CMake build directory"
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cc=${CC:-cc}

sanitize=$(sed -n 's/^WEFT_SANITIZE:[A-Z]*=//p' "$build/CMakeCache.txt")
[[ -z "$sanitize" ]] ||
	fail "$build is a WEFT_SANITIZE=$sanitize build; use a plain one"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tmp=$(cd "$tmp" && pwd -P) # ldd and RPATHs show resolved paths
prefix=$tmp/prefix

# Runs a hello binary (with any VAR=value words first) and checks its output.
run_hello()
{
	local what=$1 out
	shift

	if ! out=$(env "$@" 2>&1); then
		printf '%s\n' "$out" >&2
		fail "$what: hello exited with an error"
	fi
	[[ "$out" == ok ]] || fail "$what: hello printed '$out', expected 'ok'"
	say "$what: ok"
}

# Fails unless binary $2 loads libweft.so from $3 (with env $4...).
check_loads_from()
{
	local what=$1 bin=$2 dir=$3 line
	shift 3

	line=$(env "$@" ldd "$bin" | grep 'libweft\.so') ||
		fail "$what: $bin does not link libweft.so"
	[[ "$line" == *"=> $dir/libweft.so"* ]] ||
		fail "$what: libweft.so resolves outside $dir: $line"
}

say "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || {
	cat "$tmp/install.log" >&2
	fail "cmake --install failed"
}

# CMAKE_INSTALL_LIBDIR may be lib, lib64 or lib/<multiarch>.
pcfile=$(find "$prefix" -path '*/pkgconfig/weft.pc' -print -quit)
[[ -n "$pcfile" ]] || fail "no pkgconfig/weft.pc under $prefix"
export PKG_CONFIG_PATH=${pcfile%/weft.pc}

# (a) pkg-config
libdir=$(pkg-config --variable=libdir weft)
# A relocatable weft.pc gives ${pcfiledir}/../../lib: resolve it.
libdir=$(cd "$libdir" 2>/dev/null && pwd -P) ||
	fail "weft.pc's libdir $(pkg-config --variable=libdir weft) does not exist"
[[ "$libdir" == "$prefix"/* ]] ||
	fail "weft.pc points at $libdir, not into the install prefix $prefix"
[[ -f "$libdir/libweft.a" ]] || fail "no $libdir/libweft.a"

read -ra cflags <<<"$(pkg-config --cflags weft)"
read -ra libs <<<"$(pkg-config --libs weft)"
say "pkg-config shared: $cc ${cflags[*]} hello.c ${libs[*]}"
"$cc" "${cflags[@]}" "$root/tests/install/hello.c" -o "$tmp/hello-pc-shared" \
	"${libs[@]}"
check_loads_from "pkg-config shared" "$tmp/hello-pc-shared" "$libdir" \
	LD_LIBRARY_PATH="$libdir"
run_hello "pkg-config shared" LD_LIBRARY_PATH="$libdir" "$tmp/hello-pc-shared"

# The headers from C++: they parse, and what they declare links unmangled.
if command -v "${CXX:-c++}" >/dev/null 2>&1; then
	say "pkg-config C++: ${CXX:-c++} ${cflags[*]} hello_cxx.cpp ${libs[*]}"
	"${CXX:-c++}" -Wall -Wextra -Werror "${cflags[@]}" \
		"$root/tests/install/hello_cxx.cpp" -o "$tmp/hello-cxx" \
		"${libs[@]}" || fail "pkg-config C++: build failed"
	run_hello "pkg-config C++" LD_LIBRARY_PATH="$libdir" "$tmp/hello-cxx"
else
	say "pkg-config C++: no C++ compiler (${CXX:-c++}): skipped"
fi

# The archive is named explicitly: -lweft would pick the .so next to it.
read -ra slibs <<<"$(pkg-config --static --libs weft)"
for i in "${!slibs[@]}"; do
	[[ "${slibs[$i]}" != -lweft ]] || slibs[i]=$libdir/libweft.a
done
say "pkg-config static: $cc -DWEFT_STATIC ${cflags[*]} hello.c ${slibs[*]} -pthread"
"$cc" -DWEFT_STATIC "${cflags[@]}" "$root/tests/install/hello.c" \
	-o "$tmp/hello-pc-static" "${slibs[@]}" -pthread
if readelf -d "$tmp/hello-pc-static" | grep -q 'NEEDED.*libweft'; then
	fail "pkg-config static: the binary still needs libweft.so"
fi
run_hello "pkg-config static" "$tmp/hello-pc-static"

# (b) find_package(weft)
for kind in shared static; do
	dir=$tmp/cmake-$kind
	static=OFF
	if [[ $kind == static ]]; then static=ON; fi
	say "find_package $kind: cmake -S tests/install -DHELLO_STATIC=$static"
	if ! cmake -S "$root/tests/install" -B "$dir" \
		-DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
		-DHELLO_STATIC="$static" >"$dir.log" 2>&1 ||
		! cmake --build "$dir" >>"$dir.log" 2>&1; then
		cat "$dir.log" >&2
		fail "find_package $kind: configure or build failed"
	fi
	found=$(sed -n 's/^weft_DIR:[A-Z]*=//p' "$dir/CMakeCache.txt")
	[[ "$found" == "$prefix"/* ]] ||
		fail "find_package $kind: found weft in $found, not in $prefix"
	if [[ $kind == shared ]]; then
		# No LD_LIBRARY_PATH: the build RPATH must find the library.
		check_loads_from "find_package shared" "$dir/hello" "$libdir"
	elif readelf -d "$dir/hello" | grep -q 'NEEDED.*libweft'; then
		fail "find_package static: the binary still needs libweft.so"
	fi
	run_hello "find_package $kind" "$dir/hello"
done

# (c) a protocol client against libweft-wire alone
read -ra wflags <<<"$(pkg-config --cflags --libs weft-wire)"
say "pkg-config weft-wire: $cc wire_client.c ${wflags[*]}"
"$cc" "$root/tests/install/wire_client.c" -o "$tmp/wire-client" "${wflags[@]}" ||
	fail "weft-wire: the client does not build"
if readelf -d "$tmp/wire-client" | grep -q 'NEEDED.*libweft'; then
	fail "weft-wire: the client needs libweft"
fi
if nm "$tmp/wire-client" | grep -qE ' T (weft_runtime_create|weft_spawn_with)$'; then
	fail "weft-wire: the client carries the runtime"
fi
run_hello "weft-wire client" "$tmp/wire-client"

say "5 of 5 builds print ok"
