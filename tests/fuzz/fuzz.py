#!/usr/bin/python3
"""Differential fuzzing of ember against PyTorch (tests/fuzz/README.md).

    /usr/bin/python3 tests/fuzz/fuzz.py write                  # rewrite ci.txt (CI's programs + PyTorch's results)
    /usr/bin/python3 tests/fuzz/fuzz.py long --seeds 1000:3000  # new programs, checked live against PyTorch
    /usr/bin/python3 tests/fuzz/fuzz.py run FILE                # programs written by hand, against PyTorch
    /usr/bin/python3 tests/fuzz/fuzz.py show 17 [--kind medium]  # print one program
    /usr/bin/python3 tests/fuzz/fuzz.py regress NAME 17 [--kind K] [--keep t0,t3,...]
                                                     # add program 17 to regressions.txt as NAME
    /usr/bin/python3 tests/fuzz/fuzz.py regress NAME --file FILE   # or a program written by hand

Needs Debian's python3-torch (1.13). `long` and `regress` run ember through
build/tests/fuzz_check (or --runner PATH).
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from generate import generate  # noqa: E402
from program import Program, all_finite, float32_slack, read_programs, result_line, run_torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# The programs CI runs: seeds 0..n-1 of each kind.
CI_PROGRAMS = {"small": 300, "medium": 40, "large": 16}


REGRESSIONS_HEADER = (
    "# ember differential fuzzing: regressions, one named program per mismatch found.\n"
    "# Appended by tests/fuzz/fuzz.py regress (tests/fuzz/README.md); PyTorch's float64 results.\n"
)


def expectations(program, full_limit):
    results = run_torch(program)
    if not all_finite(results):
        raise FloatingPointError(f"{program.name}: PyTorch's results are not all finite")
    results32 = run_torch(program, torch.float32)
    return [
        result_line(program.name, key, t, float32_slack(t, results32[key]), full_limit) for key, t in results.items()
    ]


def block(program, full_limit=64):
    return program.text() + "\n".join(expectations(program, full_limit)) + "\n"


def seeds(spec):
    a, b = spec.split(":")
    return range(int(a), int(b))


def header(what):
    return (
        f"# ember differential fuzzing: {what}.\n"
        f"# Written by tests/fuzz/fuzz.py with torch {torch.__version__}; do not edit by hand.\n"
        "# Each program is followed by PyTorch's float64 results (tests/fuzz/README.md).\n"
    )


def cmd_write(args):
    counts = ", ".join(f"{n} {kind}" for kind, n in CI_PROGRAMS.items())
    chunks = [header(f"{counts} programs, checked by tests/test_fuzz.cpp")]
    for kind, count in CI_PROGRAMS.items():
        for seed in range(count):
            chunks.append(block(generate(seed, kind)))
    with open(os.path.join(HERE, "ci.txt"), "w") as f:
        f.write("".join(chunks))
    print(f"ci.txt: {counts} programs")
    # regressions.txt: the same programs (and their notes), PyTorch's results again
    path = os.path.join(HERE, "regressions.txt")
    notes, pending = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("# ") and not line.startswith(REGRESSIONS_HEADER[:30]) and "fuzz.py regress" not in line:
                pending.append(line)
            elif line.startswith("program "):
                notes.append("".join(pending))
                pending = []
    programs = read_programs(path)
    with open(path, "w") as f:
        f.write(REGRESSIONS_HEADER + "".join(note + block(p) for note, p in zip(notes, programs)))
    print(f"regressions.txt: {len(programs)} programs")


def run_ember(runner, path):
    proc = subprocess.run([runner, "--stats", path], capture_output=True, text=True)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc.returncode


def cmd_long(args):
    chunks = [header(f"seeds {args.seeds}")]
    failures = 0
    for seed in seeds(args.seeds):
        kind = "large" if seed % args.large_every == 0 else "medium" if seed % args.medium_every == 0 else "small"
        program = generate(seed, kind)
        try:
            chunks.append(block(program, full_limit=4096))
        except Exception as e:  # a program PyTorch rejects is a generator bug
            failures += 1
            print(f"{program.name}: PyTorch failed: {e}")
            print(program.text())
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("".join(chunks))
        path = f.name
    print(f"{len(chunks) - 1} programs in {path}; running {args.runner}")
    status = run_ember(args.runner, path)
    if status == 0 and failures == 0:
        os.unlink(path)
    return 1 if status or failures else 0


def cmd_run(args):
    """Programs written by hand (no expect lines): PyTorch's results, then ember."""
    chunks = [header(f"programs of {args.file}")]
    for program in read_programs(args.file):
        chunks.append(block(program, full_limit=4096))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("".join(chunks))
        path = f.name
    status = run_ember(args.runner, path)
    os.unlink(path)
    return status


def cmd_show(args):
    sys.stdout.write(generate(args.seed, args.kind).text())


def cmd_regress(args):
    if args.file:
        program = read_programs(args.file)[0]
    elif args.seed is not None:
        program = generate(args.seed, args.kind)
    else:
        sys.exit("regress needs a seed or --file")
    if args.keep:
        program = shrink(program, args.keep.split(","))
    program.name = args.name
    path = os.path.join(HERE, "regressions.txt")
    existing = read_programs(path) if os.path.exists(path) else []
    if any(p.name == args.name for p in existing):
        sys.exit(f"regressions.txt already has a program named {args.name}")
    text = block(program)
    if args.note:
        text = f"# {args.note}\n" + text
    if not os.path.exists(path):
        text = REGRESSIONS_HEADER + text
    with open(path, "a") as f:
        f.write(text)
    print(text)


def shrink(program, keep):
    """The program cut down to the lines computing `keep` (and what they
    read), each kept tensor checked and summed into the loss."""
    needed, lines = set(keep), []
    for out, op, a in reversed(program.lines):
        if out in needed:
            lines.append((out, op, a))
            needed |= {x for x in a if x.startswith("t") and x[1:].isdigit()}
    lines.reverse()
    result = Program(program.name, lines, list(keep))
    acc = None
    for i, name in enumerate(keep):
        term = f"s{i}"
        result.lines.append((term, "sum", [name, "all"]))
        if acc is None:
            acc = term
        else:
            result.lines.append((f"a{i}", "add", [acc, term]))
            acc = f"a{i}"
    result.lines.append(("loss", "add_scalar", [acc, "0.0"]))
    result.checks.append("loss")
    return result


def main(argv):
    torch.set_num_threads(1)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("write")
    long = sub.add_parser("long")
    long.add_argument("--seeds", default="1000:2000", help="A:B, the seeds A..B-1")
    long.add_argument("--large-every", type=int, default=25, help="every Nth seed makes a large program")
    long.add_argument("--medium-every", type=int, default=5, help="every Nth other seed makes a medium one")
    long.add_argument("--runner", default=os.path.join(ROOT, "build", "tests", "fuzz_check"))
    run = sub.add_parser("run")
    run.add_argument("file")
    run.add_argument("--runner", default=os.path.join(ROOT, "build", "tests", "fuzz_check"))
    show = sub.add_parser("show")
    show.add_argument("seed", type=int)
    show.add_argument("--kind", default="small", choices=["small", "medium", "large"])
    reg = sub.add_parser("regress")
    reg.add_argument("name")
    reg.add_argument("seed", type=int, nargs="?")
    reg.add_argument("--file", help="take the (first) program of this file, say one cut down by hand")
    reg.add_argument("--kind", default="small", choices=["small", "medium", "large"])
    reg.add_argument("--note", help="a comment saying where it was found and what was wrong")
    reg.add_argument("--keep", help="comma-separated tensors to keep (shrinks the program)")
    args = p.parse_args(argv[1:])
    commands = {"write": cmd_write, "long": cmd_long, "run": cmd_run, "show": cmd_show, "regress": cmd_regress}
    return commands[args.cmd](args) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
