#!/usr/bin/python3
"""Soak: does a long train_gpt run hold its memory steady?

    nice -n 10 python3 bench/soak.py                        # 20,000 steps of the default model
    python3 bench/soak.py --steps 500                       # a short run, to estimate the time
    python3 bench/soak.py --program build/examples/train_gpt --args "--preset bigram"

Runs train_gpt as a user would (the default model, every default setting
but --max-iters, so it also evaluates, saves its checkpoint every 100
steps and samples at the end), with its output going to a pipe: train_gpt
then prints a progress line every 20 steps, and at each one this script
reads the process's resident memory (VmRSS) and its peak (VmHWM) from
/proc/PID/status. The first tenth of the steps is the warm-up (the buffer
cache fills, the allocator finds its working set). After it, the run passes
if the largest RSS sampled is within 10% of the smallest: a leak of a few
bytes per step, or a cache that grows with the run, would fail it. It
prints one line per 1,000 steps, then the verdict, and exits with status 1
if RSS grew. A benchmark, not a test: it takes minutes (docs/testing.md
gives the numbers of a run). Only the Python standard library is used.
"""
import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def memory_kb(pid):
    """VmRSS and VmHWM of process `pid`, in kB."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--program", default=os.path.join(HERE, "..", "build", "examples", "train_gpt"))
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--args", default="", help="more train_gpt flags, e.g. \"--threads 1\"")
    parser.add_argument("--warmup", type=float, default=0.1, help="the share of the steps that is warm-up")
    parser.add_argument("--tolerance", type=float, default=0.10, help="the allowed growth of RSS after warm-up")
    parser.add_argument("--csv", help="also write every sample to this file: step,rss_kb,hwm_kb,seconds")
    o = parser.parse_args()

    out = tempfile.mkdtemp(prefix="ember_soak_")
    command = [o.program, "--max-iters", str(o.steps), "--out", out] + shlex.split(o.args)
    print("command:", " ".join(shlex.quote(c) for c in command), flush=True)
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    samples = []  # (step, rss_kb, hwm_kb)
    csv = open(o.csv, "w", buffering=1) if o.csv else None
    if csv:
        csv.write("step,rss_kb,hwm_kb,seconds\n")
    for line in process.stdout:
        if not line.startswith("step ") or "/" not in line.split()[1]:
            continue
        step = int(line.split()[1].split("/")[0])
        try:
            rss, hwm = memory_kb(process.pid)
        except (OSError, KeyError):
            break  # the process has ended
        samples.append((step, rss, hwm))
        if csv:
            csv.write(f"{step},{rss},{hwm},{time.monotonic() - start:.1f}\n")
        if step % 1000 == 0:
            print(f"step {step:6d}: RSS {rss / 1024:7.1f} MiB, peak {hwm / 1024:7.1f} MiB, "
                  f"{time.monotonic() - start:6.0f} s", flush=True)
    status = process.wait()
    seconds = time.monotonic() - start
    subprocess.run(["rm", "-rf", out])
    if status != 0:
        print(f"train_gpt exited with status {status}")
        return 2
    after = [s for s in samples if s[0] > o.warmup * o.steps]
    if not after:
        print("no samples after the warm-up")
        return 2
    low = min(s[1] for s in after)
    high = max(s[1] for s in after)
    growth = high / low - 1
    print(f"{o.steps} steps in {seconds:.0f} s ({1000 * seconds / o.steps:.1f} ms a step, evaluations included); "
          f"{len(samples)} samples")
    print(f"after the warm-up ({int(o.warmup * o.steps)} steps): RSS from {low / 1024:.1f} to {high / 1024:.1f} MiB "
          f"(+{100 * growth:.1f}%), peak (VmHWM) {samples[-1][2] / 1024:.1f} MiB; "
          f"first sample {samples[0][1] / 1024:.1f} MiB at step {samples[0][0]}")
    ok = growth <= o.tolerance
    print(f"soak: {'passed' if ok else 'FAILED'}: RSS after warm-up within {100 * o.tolerance:.0f}%")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
