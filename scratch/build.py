#!/usr/bin/python3
"""Builds every .cpp of scratch/ into the build folder: scratch/NAME.cpp
becomes build/scratch/NAME, linked against ember.

Meson cannot list a folder's files when `ninja` runs (its build files are
written once, by `meson setup`), so scratch/meson.build runs this script on
every `ninja -C build` instead. It compiles a program only when its source,
a header the source includes (the compiler's -MMD list), or libember is
newer than the program, and says so; otherwise it prints nothing.

    build.py SOURCE_DIR OUT_DIR STAMP LIBRARY INCLUDE_DIR -- COMPILER [FLAGS...]
"""
import glob
import os
import subprocess
import sys


def headers_of(depfile):
    """The files a Makefile-style depfile (c++ -MMD) lists, or None."""
    try:
        with open(depfile) as f:
            text = f.read().replace("\\\n", " ")
    except OSError:
        return None
    _, _, deps = text.partition(": ")
    return deps.split()


def stale(program, source, library):
    # MinGW's compiler (a Windows build) names the program NAME.exe when told -o NAME.
    built_file = program + ".exe" if os.path.exists(program + ".exe") else program
    if not os.path.exists(built_file):
        return True
    built = os.path.getmtime(built_file)
    deps = headers_of(program + ".d")
    if deps is None:
        return True
    for path in [source, library] + deps:
        if not os.path.exists(path) or os.path.getmtime(path) > built:
            return True
    return False


def main():
    args = sys.argv[1:]
    split = args.index("--")
    source_dir, out_dir, stamp, library, include_dir = args[:split]
    compiler = args[split + 1:]
    os.makedirs(out_dir, exist_ok=True)
    failed = []
    for source in sorted(glob.glob(os.path.join(source_dir, "*.cpp"))):
        name = os.path.splitext(os.path.basename(source))[0]
        program = os.path.join(out_dir, name)
        if not stale(program, source, library):
            continue
        cmd = compiler + ["-I", include_dir, source, "-o", program, "-MMD", "-MF", program + ".d",
                          library, "-Wl,-rpath," + os.path.dirname(library)]
        print(f"scratch: building {os.path.relpath(program)}", flush=True)
        if subprocess.run(cmd).returncode != 0:
            failed.append(os.path.basename(source))
            # A failed build leaves no program behind: the next ninja retries it.
            for path in (program, program + ".d"):
                if os.path.exists(path):
                    os.remove(path)
    if failed:
        sys.exit("scratch: " + ", ".join(failed) + " did not compile (the errors are above)")
    with open(stamp, "w") as f:
        f.write("")


if __name__ == "__main__":
    main()
