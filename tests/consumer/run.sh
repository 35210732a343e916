#!/bin/sh
# Installs ember from a build directory into a scratch root, then compiles
# and runs tests/consumer/main.cpp against it with only pkg-config's flags:
# proof that `meson install` gives an outside project all it needs.
#   run.sh <meson build dir> <this folder>
set -eu
build=$1
src=$2
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

meson install -C "$build" --destdir "$root" --no-rebuild --quiet
pc=$(find "$root" -name ember.pc | head -n 1)
[ -n "$pc" ] || { echo "no ember.pc installed"; exit 1; }
# The .pc file names the real prefix; point it into the scratch root.
prefix=$(sed -n 's/^prefix=//p' "$pc")
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --define-variable=prefix="$root$prefix" --cflags --libs ember)
echo "pkg-config: $flags"
# shellcheck disable=SC2086
c++ -std=c++20 "$src/main.cpp" -o "$root/consumer" $flags
libdir=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --define-variable=prefix="$root$prefix" --variable=libdir ember)
LD_LIBRARY_PATH="$libdir" "$root/consumer"
