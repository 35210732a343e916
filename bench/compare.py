#!/usr/bin/python3
"""Run ember_bench beside its peers and print how they compare.

    /usr/bin/python3 bench/compare.py                      # everything but train_lecture
    /usr/bin/python3 bench/compare.py --only train_        # the training steps
    /usr/bin/python3 bench/compare.py --only train_lecture --rounds 1
    /usr/bin/python3 bench/compare.py --threads 1,2 --rounds 3 --json results.jsonl

For every entry (see bench/ember_bench.cpp) and every round, each peer runs
in its own process, one after another, so that a slow moment of a shared
machine falls on all of them alike:

  ember      build/bench/ember_bench, at each --threads count
  OpenBLAS   build/bench/openblas_bench (products only; built when Debian's
             libopenblas-dev is installed), at the same thread counts
  PyTorch    bench/torch_bench.py under /usr/bin/python3 (when it imports
             torch and has the entry), at 1 and 2 threads; the table uses
             its better count

OpenBLAS picks its kernels for the CPU unless OPENBLAS_CORETYPE names
others (the table then says so); run with `env -u OPENBLAS_CORETYPE` to let
it choose. --json appends raw results to a file, and --table prints the
table of such a file, so a long comparison can run in parts.

A number is the median over rounds of each run's median. The table gives
GFLOP/s for products and attention, billions of elements/s for GELU,
tokens/s and peak resident memory (MB) for training steps, and the ratios
ember/peer (above 1: ember is faster; for memory, ember's share of the
peer's).

Only the Python standard library is used.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_lines(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(HERE, "..", "build"), help="ember's build directory")
    parser.add_argument("--only", default="", help="entries whose name starts with this (default: all but train_lecture*)")
    parser.add_argument("--threads", default="1,2", help="ember's and OpenBLAS's thread counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs of each peer per entry")
    parser.add_argument("--repeat", type=int, default=0, help="passed to every peer (0: each entry's default)")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    parser.add_argument("--json", help="also append every raw result to this file, one JSON object per line")
    parser.add_argument("--table", metavar="FILE", help="run nothing: print the table of the raw results in FILE "
                        "(written by --json, perhaps over several runs)")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    if args.table:
        results, names = {}, []
        for line in open(args.table):
            run = json.loads(line)
            results.setdefault((run["name"], run["peer"], run["threads"]), []).append(run)
            if run["name"] not in names:
                names.append(run["name"])
        rounds = max((run["round"] for runs in results.values() for run in runs), default=0) + 1
        print_table(results, names, threads, any(k[1] == "PyTorch" for k in results), rounds)
        return

    ember = os.path.join(args.build, "bench", "ember_bench")
    if not os.path.exists(ember):
        sys.exit(f"compare.py: {ember} not found; build ember first (ninja -C build)")
    openblas = os.path.join(args.build, "bench", "openblas_bench")
    have_openblas = os.path.exists(openblas)
    python = "/usr/bin/python3"
    have_torch = not args.no_torch and shutil.which(python) and subprocess.run(
        [python, "-c", "import torch"], stderr=subprocess.DEVNULL).returncode == 0
    if not have_openblas:
        print("OpenBLAS peer not built (apt-get install libopenblas-dev, then reconfigure); skipped", file=sys.stderr)
    if not have_torch:
        print("PyTorch peer skipped (/usr/bin/python3 cannot import torch)", file=sys.stderr)

    names = subprocess.run([ember, "--list"], check=True, stdout=subprocess.PIPE, text=True).stdout.split()
    # sum_continued_macbook compares ember with itself (a sum continued on
    # the same core or the other one) and has no peer: run it alone.
    names = [n for n in names if not n.startswith("sum_continued_")]
    if args.only:
        names = [n for n in names if n == args.only] or [n for n in names if n.startswith(args.only)]
    else:
        names = [n for n in names if not n.startswith("train_lecture")]
    if not names:
        sys.exit(f"compare.py: no entry matches --only {args.only}")
    extra = ["--repeat", str(args.repeat)] if args.repeat else []
    torch_script = os.path.join(HERE, "torch_bench.py")
    if have_torch:
        # Debian's torch multiplies through whatever libblas.so.3 the system
        # links: with the reference BLAS it runs at a few GFLOP/s, and every
        # ratio would lie. Refuse to compare against that.
        blas = subprocess.run([python, torch_script, "--blas"], check=True, stdout=subprocess.PIPE,
                              text=True).stdout.split()
        if not any("openblas" in path for path in blas):
            sys.exit("compare.py: PyTorch multiplies through " + (", ".join(blas) or "no BLAS library found") +
                     ", not OpenBLAS: its numbers would be a few GFLOP/s. apt-get install libopenblas0-pthread "
                     "(or run with --no-torch)")
        print("PyTorch multiplies through " + ", ".join(blas), file=sys.stderr)
    torch_names = set(subprocess.run([python, torch_script, "--list"], check=True, stdout=subprocess.PIPE,
                                     text=True).stdout.split()) if have_torch else set()

    results = {}  # (name, peer, threads) -> list of result dicts
    raw = open(args.json, "a") if args.json else None
    for name in names:
        peers = [("ember", t, [ember]) for t in threads]
        if have_openblas and (name.startswith("mm_") or name.startswith("bmm_")):
            peers += [("OpenBLAS", t, [openblas]) for t in threads]
        if name in torch_names:
            peers += [("PyTorch", t, [python, torch_script]) for t in (1, 2)]
        for r in range(args.rounds):
            for peer, t, cmd in peers:
                for line in run_lines(cmd + ["--only", name, "--threads", str(t)] + extra):
                    line["peer"], line["round"] = peer, r
                    line["openblas_coretype"] = os.environ.get("OPENBLAS_CORETYPE")
                    results.setdefault((name, peer, t), []).append(line)
                    if raw:
                        raw.write(json.dumps(line) + "\n")
            print(f"  {name}: round {r + 1}/{args.rounds} done", file=sys.stderr)
    if raw:
        raw.close()
    print_table(results, names, threads, have_torch, args.rounds)


def print_table(results, names, threads, have_torch, rounds):
    """The markdown table of results[(name, peer, threads)] = [runs]."""

    def metric(name, peer, t, key):
        runs = results.get((name, peer, t))
        return statistics.median(run[key] for run in runs) if runs else None

    def fmt(x, digits=1):
        return "-" if x is None else f"{x:,.{digits}f}"

    def ratio(a, b):
        return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"

    print("| entry | threads | ember | OpenBLAS | ember/OpenBLAS | PyTorch (threads) | ember/PyTorch "
          "| ember MB | PyTorch MB | memory ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        train = name.startswith("train_")
        per_token = train or name.startswith("generate_")
        elementwise = name.startswith("gelu_")
        key = "tokens_per_s" if per_token else "gelements" if elementwise else "gflops"
        torch_best = None
        if have_torch:
            options = [(metric(name, "PyTorch", t, key), t) for t in (1, 2)]
            torch_best = max(options, key=lambda o: o[0] or 0)
        for t in threads:
            e = metric(name, "ember", t, key)
            b = metric(name, "OpenBLAS", t, key)
            p = torch_best[0] if torch_best else None
            digits = 0 if train else 2 if elementwise else 1
            p_text = f"{fmt(p, digits)} ({torch_best[1]})" if p is not None else "-"
            row = [name, str(t), fmt(e, digits), fmt(b), ratio(e, b), p_text, ratio(e, p)]
            if train:
                em = metric(name, "ember", t, "peak_rss_mb")
                pm = metric(name, "PyTorch", torch_best[1], "peak_rss_mb") if torch_best else None
                row += [fmt(em, 0), fmt(pm, 0), ratio(em, pm)]
            else:
                row += ["", "", ""]
            print("| " + " | ".join(row) + " |")
    coretypes = {run.get("openblas_coretype") for runs in results.values() for run in runs} - {None}
    for coretype in sorted(coretypes):  # OpenBLAS (and PyTorch through it) held to one CPU's kernels
        print(f"\nOPENBLAS_CORETYPE={coretype} was set: the peers ran OpenBLAS's {coretype} kernels, not those it "
              "would pick for this CPU.")
    print(f"\nUnits: GFLOP/s for products and attention, billions of elements/s for gelu_*, tokens/s for train_* "
          f"and generate_*; medians of {rounds} "
          "interleaved rounds. Memory ratio: ember's peak RSS as a share of PyTorch's.")


if __name__ == "__main__":
    main()
