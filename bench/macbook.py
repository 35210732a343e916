#!/usr/bin/python3
"""nanoGPT's "I only have a macbook" run, in ember and in PyTorch, back to back.

    /usr/bin/python3 bench/macbook.py                 # both, once each
    /usr/bin/python3 bench/macbook.py --pairs 5       # five pairs, alternating; the median ratio
    /usr/bin/python3 bench/macbook.py --only torch    # the PyTorch twin alone

nanoGPT's README trains a small character-level GPT on tiny Shakespeare on
a laptop CPU (train_shakespeare_char.py with block 64, batch 12, 4 layers of
4 heads and 128 channels, 2,000 iterations, dropout 0, and the config's lr
1e-3 warmed up over 100 steps and decayed along a cosine to 1e-4, beta2
0.99, weight decay 0.1 on the 2-d tensors, gradient clipping at 1, 20
evaluation batches every 250 steps) and reports a val loss of 1.88.
ember's run is `train_gpt --preset macbook`; the PyTorch twin here trains
the same model (tests/fixtures/fast_gpt_model.py's GPT in nanoGPT's layout:
GELU, no biases, lm_head tied to wte, nanoGPT's initialisation) with the
same schedule, optimiser, batches drawn as nanoGPT draws them, and
train_gpt's loop: 2,000 steps, evaluations at 0, 250, ..., 1,750 and after
the last step (nanoGPT itself takes a 2,001st step after its last
evaluation). Each runs as its user would start it: ember on every core;
PyTorch with its defaults (Debian's torch runs its own loops on one
thread, and OpenBLAS its products on every core; torch.set_num_threads(2)
made this run slower here, its threads and OpenBLAS's competing).
It prints each run's evaluations, wall time and tokens per second, and the
ratio. On a shared machine (a virtual machine, a laptop with a browser
open) one pair is a sample of the machine's load as much as of the two
programs: --pairs N runs N pairs, which of the two goes first alternating
from pair to pair, and prints every pair's ratio and their median. The
twin builds its modules in ember's order, so seed 1337 draws the same
weights and batches in both: the evaluations agree to the printed digit
(measured: val 1.8843 at step 2,000 in both).

On a virtual machine the host may also move the two virtual CPUs apart:
before each run this prints how long a cache line takes from CPU 0 to
CPU 1 and back (build/bench/core_round_trip; Linux). Tens of nanoseconds
is two cores that share a cache; hundreds is two far apart, where
ember's two threads, which hand data to each other at every parallel
loop, train slower (about a tenth on a 2-core Zen 4 host:
docs/performance.md).

PyTorch must multiply through OpenBLAS (Debian's libopenblas0-pthread):
with the reference BLAS it runs at a few GFLOP/s and the ratio lies; the
script checks which BLAS torch loaded and refuses the reference one.
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TEXT = os.path.join(ROOT, "data", "tinyshakespeare.txt")
CONFIG = dict(block_size=64, batch_size=12, n_layer=4, n_head=4, n_embd=128, max_iters=2000, dropout=0.0,
              lr=1e-3, warmup_iters=100, lr_decay_iters=2000, min_lr=1e-4, beta1=0.9, beta2=0.99,
              weight_decay=0.1, grad_clip=1.0, eval_interval=250, eval_iters=20, seed=1337)


def run_ember(program):
    import tempfile
    with tempfile.TemporaryDirectory() as out:
        start = time.monotonic()
        r = subprocess.run([program, "--data", TEXT, "--preset", "macbook", "--out", out, "--sample-tokens", "0"],
                           capture_output=True, text=True, check=True)
        seconds = time.monotonic() - start
    evals = [(int(m.group(1)), float(m.group(3))) for m in
             re.finditer(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)", r.stdout, re.M)]
    return evals, seconds


def round_trip(program):
    """A cache line's round trip between CPUs 0 and 1 in ns, by the
    core_round_trip beside the build's train_gpt (None where it is absent)."""
    probe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(program))), "bench", "core_round_trip")
    if not os.path.exists(probe):
        return None
    try:
        r = subprocess.run([probe], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None
    m = re.search(r'"ns":(\d+)', r.stdout)
    return int(m.group(1)) if r.returncode == 0 and m else None


def blas_of_torch():
    """The BLAS library torch multiplies through, from this process's mappings."""
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
    return sorted(libs)


def run_torch():
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
    from fast_gpt_model import GPT

    torch.ones(64, 64) @ torch.ones(64, 64)  # loads the BLAS
    libs = blas_of_torch()
    if not any("openblas" in lib for lib in libs):
        sys.exit("macbook.py: torch multiplies through " + (", ".join(libs) or "an unknown BLAS") +
                 ", not OpenBLAS: apt-get install libopenblas0-pthread (the reference BLAS makes every ratio lie)")
    c = CONFIG
    torch.manual_seed(c["seed"])
    text = open(TEXT, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train, val = data[:n], data[n:]

    def get_batch(split):
        d = train if split == "train" else val
        ix = torch.randint(len(d) - c["block_size"], (c["batch_size"],))
        x = torch.stack([d[i:i + c["block_size"]] for i in ix])
        y = torch.stack([d[i + 1:i + 1 + c["block_size"]] for i in ix])
        return x, y

    model = GPT(dict(vocab_size=len(chars), block_size=c["block_size"], n_embd=c["n_embd"], n_head=c["n_head"],
                     n_layer=c["n_layer"], dropout=c["dropout"], bias=False, qkv_bias=False, lm_head_bias=False,
                     tie_weights=True, embedding_dropout=True, activation="gelu"))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": c["weight_decay"]},
                                   {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                                  lr=c["lr"], betas=(c["beta1"], c["beta2"]))

    def get_lr(it):  # nanoGPT's train.py
        if it < c["warmup_iters"]:
            return c["lr"] * (it + 1) / (c["warmup_iters"] + 1)
        if it > c["lr_decay_iters"]:
            return c["min_lr"]
        ratio = (it - c["warmup_iters"]) / (c["lr_decay_iters"] - c["warmup_iters"])
        return c["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (c["lr"] - c["min_lr"])

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        out = {}
        for split in ("train", "val"):
            out[split] = sum(model(*get_batch(split))[1].item() for _ in range(c["eval_iters"])) / c["eval_iters"]
        model.train()
        return out

    evals = []
    start = time.monotonic()
    for it in range(c["max_iters"] + 1):
        if it % c["eval_interval"] == 0 or it == c["max_iters"]:
            losses = estimate_loss()
            evals.append((it, losses["val"]))
            print(f"  torch step {it}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}", flush=True)
        if it == c["max_iters"]:
            break
        for group in optimizer.param_groups:
            group["lr"] = get_lr(it)
        x, y = get_batch("train")
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), c["grad_clip"])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return evals, time.monotonic() - start, libs, torch.get_num_threads()


def one_pair(args, ember_first):
    """Runs ember and the twin (or the one of --only), ember first or second; their (val, seconds) by name."""
    tokens = CONFIG["max_iters"] * CONFIG["batch_size"] * CONFIG["block_size"]
    results = {}
    order = ["ember", "torch"] if ember_first else ["torch", "ember"]
    for name in order:
        if args.only not in (None, name):
            continue
        ns = round_trip(args.program)
        if ns is not None:
            print(f"  CPUs 0 and 1: a cache line's round trip {ns} ns", flush=True)
            results[name + " round trip"] = ns
        if name == "ember":
            evals, seconds = run_ember(args.program)
            for step, v in evals:
                print(f"  ember step {step}: val loss {v:.4f}")
            results["ember"] = (evals[-1][1], seconds)
            print(f"ember: val {evals[-1][1]:.4f} in {seconds:.1f} s ({tokens / seconds:,.0f} tokens/s of training, "
                  "evaluations included)", flush=True)
        else:
            evals, seconds, libs, threads = run_torch()
            results["torch"] = (evals[-1][1], seconds)
            print(f"PyTorch {__import__('torch').__version__} ({threads} threads, {', '.join(libs)}): val "
                  f"{evals[-1][1]:.4f} in {seconds:.1f} s ({tokens / seconds:,.0f} tokens/s)", flush=True)
    if "ember" in results and "torch" in results:
        print(f"ember / PyTorch: {results['torch'][1] / results['ember'][1]:.2f}x the speed", flush=True)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--program", default=os.path.join(ROOT, "build", "examples", "train_gpt"))
    parser.add_argument("--only", choices=["ember", "torch"])
    parser.add_argument("--pairs", type=int, default=1, help="pairs to run, alternating which goes first")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    pairs = []
    for i in range(args.pairs):
        if args.pairs > 1:
            print(f"pair {i + 1} of {args.pairs}:", flush=True)
        pairs.append(one_pair(args, ember_first=i % 2 == 0))
    if args.pairs > 1 and args.only is None:
        rows = [(p["ember"][1], p["torch"][1], p["torch"][1] / p["ember"][1]) for p in pairs]
        for i, (e, t, r) in enumerate(rows):
            ns = pairs[i].get("ember round trip")
            print(f"pair {i + 1}: ember {e:.1f} s, PyTorch {t:.1f} s, {r:.2f}x" +
                  (f" (round trip before ember's run: {ns} ns)" if ns is not None else ""))
        ratios = sorted(r for _, _, r in rows)
        print(f"median of {len(ratios)} pairs: {statistics.median(ratios):.2f}x "
              f"(from {ratios[0]:.2f}x to {ratios[-1]:.2f}x); ember under 60 s in "
              f"{sum(e < 60 for e, _, _ in rows)} of {len(rows)}")


if __name__ == "__main__":
    main()
