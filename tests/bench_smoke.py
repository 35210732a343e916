#!/usr/bin/env python3
"""Smoke test of bench/ember_bench: it runs, and every line it prints is a
JSON object with the fields bench/compare.py reads. Never a timing check:
on a shared machine timings are noise (docs/performance.md).

    bench_smoke.py BUILD/bench/ember_bench
"""
import json
import math
import subprocess
import sys

bench = sys.argv[1]
names = subprocess.run([bench, "--list"], check=True, stdout=subprocess.PIPE, text=True).stdout.split()
# The lecture step needs 4 GB and a minute, generating from the lecture's
# model half a minute, and GPT-2 124M's entries 10 s or more each; their
# code paths are the small config's.
skipped = ("train_lecture", "generate_lecture", "train_gpt2", "generate_gpt2")  # prefixes
run = subprocess.run([bench, "--repeat", "1", "--threads", "2", "--skip", ",".join(skipped)], check=True,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
lines = [json.loads(line) for line in run.stdout.splitlines()]
seen = [line["name"] for line in lines]
expected = [n for n in names if not n.startswith(skipped)]
# sum_continued_macbook needs two threads: a build without OpenMP says it skipped it.
if "sum_continued_macbook: needs two threads; skipped" in run.stderr:
    expected.remove("sum_continued_macbook")
if sorted(seen) != sorted(expected):
    sys.exit(f"entries printed {seen}, expected {expected}")
for line in lines:
    keys = {"train": ("tokens_per_s", "peak_rss_mb", "ms_per_step"),
            "generate": ("tokens_per_s", "seconds"),
            "elementwise": ("gelements", "ms"),
            "two_threads": ("local_us", "remote_us", "remote_over_local")}.get(line["kind"], ("gflops", "ms"))
    for key in keys:
        value = line.get(key)
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            sys.exit(f"{line['name']}: {key} is {value!r}")
# Bad flags are refused with status 2.
for bad in (["--only", "no_such_entry"], ["--repeat", "0"], ["--frobnicate"]):
    status = subprocess.run([bench] + bad, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    if status != 2:
        sys.exit(f"ember_bench {' '.join(bad)} exited {status}, expected 2")
print(f"{len(lines)} entries, all valid JSON")
