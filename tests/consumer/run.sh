#!/bin/sh
# Proves that an outside project can use ember in each supported way, building
# and running tests/consumer/main.cpp each time: (1) pkg-config's flags and
# (2) CMake's find_package(ember), both against `meson install` into a scratch
# root, and (3) a fresh Meson project with ember as its subproject. It also
# compiles every installed header on its own, so none includes a private one.
#   run.sh <meson build dir> <this folder> <ember's source root>
set -eu
build=$1
here=$(cd "$2" && pwd)
source_root=$(cd "$3" && pwd)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

start=$(date +%s)
way() { echo; echo "=== $1 (at $(($(date +%s) - start))s)"; }
fail() { echo "FAILED: $1" >&2; exit 1; }

# main.cpp prints its gradient and exits non-zero when it is wrong.
#   run_consumer <way> <command...>
run_consumer() {
    what=$1
    shift
    out=$("$@") || fail "$what: the consumer exited with status $?"
    echo "$out"
    case $out in
        "consumer: dx[0] = "*) ;;
        *) fail "$what: the consumer did not print its gradient" ;;
    esac
}

way "install: meson install into a scratch root"
meson install -C "$build" --destdir "$root/install" --no-rebuild --quiet || fail "meson install"
pc=$(find "$root/install" -name ember.pc | head -n 1)
[ -n "$pc" ] || fail "no ember.pc installed"
# The .pc file names the real prefix; point it into the scratch root.
prefix=$(sed -n 's/^prefix=//p' "$pc")
staged=$root/install$prefix
pkgconf() { PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --define-variable=prefix="$staged" "$@" ember; }
cflags=$(pkgconf --cflags)
libdir=$(pkgconf --variable=libdir)
includedir=$(pkgconf --variable=includedir)

way "pkg-config: c++ main.cpp \$(pkg-config --cflags --libs ember)"
flags="$cflags $(pkgconf --libs)"
echo "flags: $flags"
# shellcheck disable=SC2086
c++ -std=c++20 "$here/main.cpp" -o "$root/pkg-config-consumer" $flags || fail "compiling with pkg-config's flags"
run_consumer pkg-config env LD_LIBRARY_PATH="$libdir" "$root/pkg-config-consumer"

way "headers: each installed header compiles on its own"
headers=$(cd "$includedir/ember" && find . -name '*.h' | sed 's|^\./||' | sort)
[ -n "$headers" ] || fail "no headers installed"
# Two at a time (xargs -P): one after the other they took half a minute.
# shellcheck disable=SC2086
echo "$headers" | CFLAGS_EMBER="$cflags" xargs -P 2 -I HEADER sh -c \
    'printf "#include <%s>\n" "$1" | c++ -std=c++20 -fsyntax-only $CFLAGS_EMBER -x c++ - ||
     { echo "FAILED: installed header $1 does not compile on its own" >&2; exit 255; }' sh HEADER ||
    fail "an installed header does not compile on its own (above)"
echo "$(echo "$headers" | wc -l) headers compile"

way "cmake: find_package(ember) and ember::ember"
cmake -S "$here" -B "$root/cmake-build" -DCMAKE_PREFIX_PATH="$staged" >"$root/cmake.log" 2>&1 ||
    { cat "$root/cmake.log"; fail "cmake could not configure against the install"; }
grep 'ember_DIR: ' "$root/cmake.log" || true
# find_package must have taken the scratch install, not one on this machine.
grep -q "ember_DIR: $staged/" "$root/cmake.log" || fail "find_package(ember) found another ember"
cmake --build "$root/cmake-build" >"$root/cmake-build.log" 2>&1 ||
    { cat "$root/cmake-build.log"; fail "cmake could not build main.cpp"; }
# No LD_LIBRARY_PATH: CMake's build RPATH must reach the imported libember.
run_consumer cmake "$root/cmake-build/consumer"

way "subproject: a Meson project with subprojects/ember and dependency('ember')"
parent=$root/parent
mkdir -p "$parent/subprojects"
cp "$here/meson.build" "$here/main.cpp" "$parent/"
ln -s "$source_root" "$parent/subprojects/ember"
# Unoptimised, and as a unity build of the subproject (-Dunity=subprojects:
# its files four to a file, as CI's variant builds): this way tests the
# build, not the speed. On 2 cores (Zen 5) the library built in 70 s one
# file at a time, in 35 s this way.
meson setup "$root/parent-build" "$parent" --force-fallback-for=ember -Dbuildtype=plain -Dunity=subprojects \
    >"$root/parent-setup.log" 2>&1 || { cat "$root/parent-setup.log"; fail "meson setup of the parent project"; }
meson compile -C "$root/parent-build" >"$root/parent-build.log" 2>&1 ||
    { cat "$root/parent-build.log"; fail "building the parent project"; }
# ember's examples, benchmarks and tests stay out of a parent's build
# (phony entries are only source files that meson watches).
if ninja -C "$root/parent-build" -t targets all | grep -v ': phony$' |
    grep -Eq 'subprojects/ember/(examples|bench|tests)/'; then
    fail "the parent project builds ember's examples, benchmarks or tests"
fi
run_consumer subproject "$root/parent-build/consumer"
meson install -C "$root/parent-build" --destdir "$root/parent-install" --no-rebuild --quiet ||
    fail "meson install of the parent project"
[ -n "$(find "$root/parent-install" -path '*/ember/ember.h')" ] || fail "the parent project did not install ember.h"

echo
echo "all ways work ($(($(date +%s) - start))s)"
