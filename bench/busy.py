#!/usr/bin/python3
"""Busy machine: how train_gpt runs beside another program that holds a core.

    python3 bench/busy.py                                 # both runs, idle and busy, 3 rounds
    python3 bench/busy.py --rounds 1 --runs layernorm     # a quick look
    python3 bench/busy.py --program OTHER/examples/train_gpt --label before

A learner's laptop is never idle: a browser or an editor holds a core. This
script times train_gpt's first steps as a learner starts them (the default
model, and --preset layernorm), each at the default thread count and at
--threads 1, first on the idle machine and then beside a busy process it
starts itself (a shell loop that spins on one core) and stops at the end.
Rounds alternate the settings, so that drifts of a shared machine fall on
all of them alike. It prints one JSON line per run and then a table of
medians: for each run, busy/idle and default/--threads 1. The peer is the
same program at --threads 1 in the same session: compare ratios, never raw
seconds across sessions. Note [Threads on a busy machine] in
core/loops/parallel.h says what ember does about it; docs/performance.md
has the table. Only the Python standard library is used.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Each run: train_gpt's flags, and steps enough for a few seconds idle.
RUNS = {
    "default": ["--max-iters", "200"],
    "layernorm": ["--preset", "layernorm", "--max-iters", "500"],
}


def time_run(program, run, threads, out_dir):
    cmd = [program, "--data", os.path.join(ROOT, "data", "tinyshakespeare.txt")] + RUNS[run]
    cmd += ["--eval-interval", "100000", "--eval-iters", "1", "--sample-tokens", "1"]
    cmd += ["--out", out_dir, "--overwrite"]
    if threads:
        cmd += ["--threads", str(threads)]
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--program", default=os.path.join(ROOT, "build", "examples", "train_gpt"))
    parser.add_argument("--label", default="ember", help="a name for --program in the output")
    parser.add_argument("--runs", default="default,layernorm", help="comma-separated: " + ",".join(RUNS))
    parser.add_argument("--machines", default="idle,busy", help="comma-separated: idle, busy")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="also append the JSON lines to this file")
    args = parser.parse_args()
    runs = args.runs.split(",")
    for run in runs:
        if run not in RUNS:
            sys.exit(f"busy.py: unknown run {run!r} (known: {', '.join(RUNS)})")
    if not os.access(args.program, os.X_OK):
        sys.exit(f"busy.py: {args.program} is not built (ninja -C build)")

    results = {}
    sink = open(args.json, "a") if args.json else None
    with tempfile.TemporaryDirectory() as out_dir:
        for machine in args.machines.split(","):
            spinner = None
            if machine == "busy":
                spinner = subprocess.Popen(["sh", "-c", "while :; do :; done"])
                time.sleep(0.5)
            try:
                for round_ in range(args.rounds):
                    for run in runs:
                        for threads in (0, 1):
                            seconds = time_run(args.program, run, threads, out_dir)
                            line = {"program": args.label, "run": run, "machine": machine,
                                    "threads": threads or "default", "round": round_, "seconds": round(seconds, 3)}
                            print(json.dumps(line), flush=True)
                            if sink:
                                print(json.dumps(line), file=sink, flush=True)
                            results.setdefault((run, machine, threads), []).append(seconds)
            finally:
                if spinner:
                    spinner.kill()
                    spinner.wait()

    print()
    print(f"| {args.label}: run | idle, default | idle, --threads 1 | busy, default | busy, --threads 1 "
          "| busy: default / --threads 1 | default: busy / idle |")
    print("|---|---|---|---|---|---|---|")
    for run in runs:
        m = {key: statistics.median(results.get((run,) + key, [float("nan")])) for key in
             [("idle", 0), ("idle", 1), ("busy", 0), ("busy", 1)]}
        print(f"| {run} | {m[('idle', 0)]:.2f} s | {m[('idle', 1)]:.2f} s | {m[('busy', 0)]:.2f} s "
              f"| {m[('busy', 1)]:.2f} s | {m[('busy', 0)] / m[('busy', 1)]:.2f}x "
              f"| {m[('busy', 0)] / m[('idle', 0)]:.2f}x |")


if __name__ == "__main__":
    main()
