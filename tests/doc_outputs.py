#!/usr/bin/python3
"""The output quoted in the docs is what the programs print today.

    doc_outputs.py SOURCE_ROOT BUILD_DIR [FILE.md ...]

Finds every fenced block marked `console` in README.md, docs/*.md,
scratch/README.md and examples/README.md (or the files given), runs each
command in it from the source root, and checks that the program prints the
lines that follow it. A block reads as a terminal does:

    ```console
    $ build/examples/custom_layer
    ...
    parameters: 29601 (the LayerNorm GPT has 160 more)
    initial loss: 4.1604 (ln 65 = 4.1744)
    ```

* `$ ` starts a command, run by sh in a scratch folder that links to every
  top-level entry of the source tree (so `data/...` and `docs/...` work),
  with `build` linking to the build folder under test; files the command
  writes (`out/...`) land in the scratch folder, never in the tree. The
  lines after it, up to the next command, are its output.
* The quoted lines must be the output's lines in order. A line `...` stands
  for any number of lines (at the start: the quote begins mid-output; at
  the end: more follows); without it the lines must be consecutive.
* Text must match exactly, except trailing spaces. Numbers must too, unless
  they are times, which differ on every machine: a number followed by s,
  ms, us, min or tokens/s matches any number. The info string may state a
  tolerance for the other numbers, `console tolerance=0.01` (absolute), for
  output that depends on the CPU's rounding (docs/testing.md says which).
* The command must exit with status 0, unless the block says `status=N`.
  The quoted lines are its standard output; `stderr=yes` adds its error
  output after it (for a program's error messages).

It prints each block it checked, and for a mismatch the quoted line, the
output around where it was expected, and the file and line of the block.
Exit status 1 if any block failed. Only the Python standard library is used.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

NUMBER = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
TIME_UNIT = r"(?:\s?(?:s|ms|us|µs|min|tokens/s))(?![A-Za-z])"
TOKEN = re.compile(rf"({NUMBER}){TIME_UNIT}|({NUMBER})")


def blocks(path):
    """(line number, options, [(command, [quoted lines])]) for each console block of `path`."""
    found = []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```console(.*)$", lines[i])
        if not m:
            i += 1
            continue
        options = dict(kv.split("=", 1) for kv in m.group(1).split() if "=" in kv)
        start = i + 1
        i += 1
        runs = []
        while i < len(lines) and lines[i] != "```":
            if lines[i].startswith("$ "):
                runs.append((lines[i][2:], []))
            elif runs:
                runs[-1][1].append(lines[i])
            else:
                raise SystemExit(f"{path}:{i + 1}: a console block must start with a '$ ' command")
            i += 1
        found.append((start, options, runs))
        i += 1
    return found


def line_matches(quoted, printed, tolerance):
    """Whether a printed line matches a quoted one (see the module's doc)."""
    quoted, printed = quoted.rstrip(), printed.rstrip()
    if quoted == printed:
        return True
    q_parts, p_parts = TOKEN.split(quoted), TOKEN.split(printed)
    # split() with two groups gives: text, time, number, text, time, number, ..., text
    if len(q_parts) != len(p_parts):
        return False
    for k in range(0, len(q_parts), 3):
        if q_parts[k] != p_parts[k]:
            return False
        if k + 2 >= len(q_parts):
            break
        q_time, q_num, p_time, p_num = q_parts[k + 1], q_parts[k + 2], p_parts[k + 1], p_parts[k + 2]
        if (q_time is None) != (p_time is None):
            return False
        if q_time is not None:
            continue  # a time: any value
        if q_num == p_num:
            continue
        if tolerance is None or abs(float(q_num) - float(p_num)) > tolerance:
            return False
    return True


def check(quoted, printed, tolerance):
    """None if `printed` (lines) shows `quoted` (lines, with '...'), else a message."""
    # Groups of consecutive quoted lines, and whether a gap may precede each.
    groups, gap = [], False
    for line in quoted:
        if line.strip() == "...":
            gap = True
            continue
        if gap or not groups:
            groups.append((gap, []))
            gap = False
        groups[-1][1].append(line)
    trailing_gap = gap
    while quoted and quoted[-1] == "":
        quoted = quoted[:-1]
    at = 0
    for may_skip, group in groups:
        starts = range(at, len(printed) - len(group) + 1) if may_skip else [at]
        for s in starts:
            if all(line_matches(q, printed[s + j], tolerance) for j, q in enumerate(group)):
                at = s + len(group)
                break
        else:
            near = printed[at:at + len(group) + 3]
            return ("expected\n    " + "\n    ".join(group) + "\n" +
                    ("somewhere after" if may_skip else "at") + f" line {at + 1} of the output, which there reads\n    " +
                    "\n    ".join(near))
    rest = [line for line in printed[at:] if line.strip()]
    if rest and not trailing_gap:
        return "the program printed more after the quoted lines (end the quote with '...'):\n    " + "\n    ".join(rest[:3])
    return None


def self_test():
    """The matcher's rules on made-up output: each must be able to fail."""
    out = ["step 0: train loss 4.1744, val loss 4.1745", "took 1.25 s, 18,100 tokens/s", "done", ""]
    cases = [
        (["step 0: train loss 4.1744, val loss 4.1745", "took 9.9 s, 18,100 tokens/s", "done"], None, True),
        (["step 0: train loss 4.1744, val loss 4.1746", "..."], None, False),   # a digit differs
        (["step 0: train loss 4.1744, val loss 4.1746", "..."], 1e-3, True),    # within the tolerance
        (["step 0: train loss 4.1744, val loss 4.1765", "..."], 1e-3, False),   # outside it
        (["...", "done"], None, True),
        (["done"], None, False),                                                # not the first line
        (["step 0: train loss 4.1744, val loss 4.1745"], None, False),          # more was printed
        (["step 0: train loss 4.1744, val loss 4.1745", "done"], None, False),  # a line skipped without '...'
        (["step 0: train loss 4.1744, val loss 4.1745", "...", "done"], None, True),
        (["...", "took 1.25 s, 18,100 tokens/s", "..."], None, True),
        (["...", "took 1.25 h, 18,100 tokens/s", "..."], None, False),          # 'h' is not a time unit here
        (["...", "took 1.25 s, 18,100 token", "..."], None, False),
    ]
    bad = 0
    for quoted, tolerance, expected in cases:
        got = check(quoted, out, tolerance) is None
        if got != expected:
            bad += 1
            print(f"self-test: {quoted} with tolerance {tolerance}: matched {got}, expected {expected}")
    print(f"self-test: {len(cases) - bad} of {len(cases)} cases right")
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    files = sys.argv[3:] or (["README.md"] + sorted(glob.glob("docs/*.md", root_dir=root)) +
                             ["scratch/README.md", "examples/README.md"])
    failed = checked = 0
    work = tempfile.mkdtemp(prefix="doc_outputs.")
    for entry in os.listdir(root):
        if entry not in ("build", "out") and not entry.startswith("."):
            os.symlink(os.path.join(root, entry), os.path.join(work, entry))
    os.symlink(build, os.path.join(work, "build"))
    for name in files:
        path = os.path.join(root, name)
        for start, options, runs in blocks(path):
            tolerance = float(options["tolerance"]) if "tolerance" in options else None
            status = int(options.get("status", 0))
            for command, quoted in runs:
                checked += 1
                r = subprocess.run(["sh", "-c", command], cwd=work, capture_output=True, text=True)
                printed = (r.stdout + r.stderr if options.get("stderr") == "yes" else r.stdout).split("\n")
                problem = None
                if r.returncode != status:
                    problem = f"exit status {r.returncode}, expected {status}; stderr:\n    " + r.stderr[-2000:]
                else:
                    problem = check(quoted, printed, tolerance)
                where = f"{name}:{start}"
                if problem:
                    failed += 1
                    print(f"FAILED {where}: $ {command}\n  {problem}\n")
                else:
                    print(f"ok     {where}: $ {command}")
    shutil.rmtree(work)
    print(f"{checked} quoted commands checked, {failed} failed")
    if checked == 0:
        print("no console blocks found: the docs lost their quoted output?")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
