#!/bin/sh
# The scratch folder (scratch/README.md) as a learner uses it, in a folder of
# its own: a new .cpp builds and runs, an unchanged one is not rebuilt, an
# edited one is, and one that does not compile fails the build with the
# compiler's message while the others still build.
#   scratch.sh <scratch/build.py> <libember> <source root> -- <compiler> [flags...]
set -eu
build_py=$1 library=$2 root=$3
shift 4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $1" >&2; exit 1; }
build() { python3 "$build_py" "$dir/src" "$dir/out" "$dir/stamp" "$library" "$root" -- "$@"; }

mkdir "$dir/src"
cat > "$dir/src/first.cpp" <<'CPP'
#include "ember.h"
#include <iostream>
int main() { std::cout << ember::ones({2, 3}).sum().item<float>() << "\n"; }
CPP
cat > "$dir/src/second.cpp" <<'CPP'
#include "ember.h"
#include <iostream>
using namespace ember;
int main() { std::cout << arange(4).sizes() << "\n"; }
CPP
out=$(build "$@") || fail "the first build failed"
echo "$out"
[ "$("$dir/out/first")" = 6 ] || fail "first printed $("$dir/out/first"), not 6"
[ "$("$dir/out/second")" = "[4]" ] || fail "second printed $("$dir/out/second"), not [4]"

out=$(build "$@") || fail "the second build failed"
[ -z "$out" ] || fail "nothing changed, yet it printed: $out"

sleep 1 # file times have a resolution of a second on some file systems
sed -i 's/ones({2, 3})/ones({2, 4})/' "$dir/src/first.cpp"
out=$(build "$@") || fail "the build after an edit failed"
echo "$out"
case $out in *first*) ;; *) fail "the edited first.cpp was not rebuilt" ;; esac
case $out in *second*) fail "the unchanged second.cpp was rebuilt" ;; esac
[ "$("$dir/out/first")" = 8 ] || fail "first printed $("$dir/out/first") after the edit, not 8"

echo 'int main() { return undefined_name; }' > "$dir/src/broken.cpp"
if out=$(build "$@" 2>&1); then fail "a program that does not compile did not fail the build"; fi
case $out in *"broken.cpp did not compile"*) ;; *) fail "no message naming broken.cpp: $out" ;; esac
case $out in *undefined_name*) ;; *) fail "the compiler's error was not shown: $out" ;; esac
[ ! -e "$dir/out/broken" ] || fail "a failed build left a program behind"
echo "scratch: all checks passed"
