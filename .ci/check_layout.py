#!/usr/bin/env python3
"""Checks the rule of core/kernels/README.md: the fast kernels are optional.

    python3 .ci/check_layout.py [--root DIR] [--reference-build DIR]

(a) Outside core/kernels/, ember's own code (core/, nn/) includes nothing of
core/kernels/ but the one dispatch header, core/kernels/dispatch.h: the
switch, and the declarations of the fast entry points each op may call
under `if constexpr (kFastKernelsBuilt)`. So an op file (core/ops/) holds
only its definition, and what makes it fast stays behind named functions.
Tests and benchmarks may include kernel headers to test them.

(b) With --reference-build, the build directory of a reference build
(`meson setup DIR -Dkernels=reference`): its compile_commands.json compiles
no file of core/kernels/, so every op there runs its definition, and no
stand-in code makes it link.

Prints one line per problem, then a count; exits 1 if there is any problem.
Python 3 standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys

DISPATCH_HEADERS = {"core/kernels/dispatch.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')


def tracked_files(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(set(out.split()))


def include_problems(root):
    problems = []
    for path in tracked_files(root):
        if not (path.startswith("core/") or path.startswith("nn/")) or path.startswith("core/kernels/"):
            continue
        if not path.endswith((".h", ".cpp")) or not os.path.isfile(os.path.join(root, path)):
            continue
        with open(os.path.join(root, path), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if m and m.group(1).startswith("core/kernels/") and m.group(1) not in DISPATCH_HEADERS:
                    problems.append(f"{path}:{number}: includes {m.group(1)}; outside core/kernels/ only "
                                    f"{', '.join(sorted(DISPATCH_HEADERS))} may be included")
    return problems


def reference_build_problems(root, build):
    commands = os.path.join(build, "compile_commands.json")
    if not os.path.isfile(commands):
        return [f"{commands}: missing (set up the reference build first: meson setup {build} -Dkernels=reference)"]
    with open(commands, encoding="utf-8") as f:
        entries = json.load(f)
    kernels = os.path.realpath(os.path.join(root, "core", "kernels")) + os.sep
    problems = []
    for entry in entries:
        source = os.path.realpath(os.path.join(entry.get("directory", ""), entry["file"]))
        if source.startswith(kernels):
            problems.append(f"{os.path.relpath(source, root)}: compiled by the reference build {build}, "
                            "which must compile nothing of core/kernels/")
    if not entries:
        problems.append(f"{commands}: lists no compilation at all")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--reference-build", help="a -Dkernels=reference build directory to check")
    args = parser.parse_args()
    root = os.path.realpath(args.root)
    problems = include_problems(root)
    if args.reference_build:
        problems += reference_build_problems(root, os.path.realpath(args.reference_build))
    for p in problems:
        print(p)
    print(f"check_layout: {len(problems)} problem{'s' if len(problems) != 1 else ''}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
