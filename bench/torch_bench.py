#!/usr/bin/python3
"""The PyTorch peer of ember_bench, for bench/compare.py.

The same entry names, shapes, models and JSON lines as bench/ember_bench.cpp:
products through torch.matmul, attention forward and backward through the
same ops as ember's BatchedMultiHeadAttention, the exact GELU (F.gelu), and
a training step of the lecture's GPT (tests/fixtures/torch_models.py, the
model ember's tests match) with AdamW on random tokens. Each train entry
runs in a fresh process so that its peak memory is its own (that peak
includes importing torch, as any PyTorch training script pays).

    /usr/bin/python3 bench/torch_bench.py [--only NAME_OR_PREFIX] [--threads N] [--repeat N]

Needs Debian's python3-torch.
"""
import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time


def _threads_from_argv():
    """--threads N from the command line, read before torch is imported."""
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return None


# Debian's torch does its products in OpenBLAS (libblas.so.3), whose own
# thread pool ignores torch.set_num_threads: without this, a "1 thread"
# PyTorch run multiplies on every core. The variable must be set before the
# library loads.
if _threads_from_argv():
    os.environ["OPENBLAS_NUM_THREADS"] = _threads_from_argv()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from fast_gpt_model import GPT, GPT2_LAYOUT, LECTURE_LAYOUT  # noqa: E402
from torch_models import GPTLanguageModel, generate  # noqa: E402

# Keep in step with bench/ember_bench.cpp.
PRODUCTS = [  # name, m, k, n, b transposed (x @ W^T)
    ("mm_256", 256, 256, 256, False),
    ("mm_512", 512, 512, 512, False),
    ("mm_1024", 1024, 1024, 1024, False),
    ("mm_2048", 2048, 2048, 2048, False),
    ("mm_tiny_ffwd", 256, 32, 128, True),
    ("mm_small_ffwd", 512, 64, 256, True),
    ("mm_small_lm_head", 512, 64, 65, True),
    ("mm_lecture_qkv", 16384, 384, 1152, True),
    ("mm_lecture_ffwd1", 16384, 384, 1536, True),
    ("mm_lecture_ffwd2", 16384, 1536, 384, True),
    ("mm_lecture_lm_head", 16384, 384, 65, True),
]
ATTENTION = [  # name, batch, heads, T, hs
    ("small", 16, 4, 32, 16),
    ("t64", 16, 4, 64, 16),
    ("macbook", 12, 4, 64, 32),
    ("t128", 8, 4, 128, 32),
    ("lecture", 64, 6, 256, 64),
]
# gpt.py's GPT in nanoGPT's layout (ember's fast model; here its twin, the
# attention written out), or, for *_list, gpt.py's own classes (a list of Heads).
TRAIN = [  # name, batch, block, n_embd, n_head, n_layer, dropout, gpt.py's classes, default steps
    ("train_tiny", 32, 8, 32, 4, 3, 0.0, False, 200),
    ("train_tiny_list", 32, 8, 32, 4, 3, 0.0, True, 200),
    ("train_small", 16, 32, 64, 4, 4, 0.0, False, 100),
    ("train_lecture", 64, 256, 384, 6, 6, 0.2, False, 3),
    ("train_lecture_list", 64, 256, 384, 6, 6, 0.2, True, 3),
    # GPT-2 124M (nanoGPT's model.py in GPT-2's layout, block 1024, 50,257
    # tokens): llm.c's CPU quick start (B=4, T=64), and a longer context
    ("train_gpt2_124m_t64", 4, 64, 768, 12, 12, 0.0, False, 3),
    ("train_gpt2_124m_t256", 4, 256, 768, 12, 12, 0.0, False, 3),
]


GPT2_124M = dict(vocab_size=50257, block_size=1024, n_embd=768, n_head=12, n_layer=12, dropout=0.0, **GPT2_LAYOUT)


def is_gpt2(name):
    return "_gpt2_" in name


def make_gpt(block, n_embd, n_head, n_layer, dropout, lecture, gpt2=False):
    if gpt2:
        return GPT(GPT2_124M)
    if lecture:
        return GPTLanguageModel(65, block, n_embd, n_head, n_layer, dropout)
    return GPT(dict(vocab_size=65, block_size=block, n_embd=n_embd, n_head=n_head, n_layer=n_layer, dropout=dropout,
                    **LECTURE_LAYOUT))


def time_it(repeat, fn):
    fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    runs.sort()
    return runs[len(runs) // 2], runs[0]


def emit(**fields):
    print(json.dumps(fields, separators=(",", ":")), flush=True)


def product_line(name, kind, batch, m, k, n, flops, median, best):
    emit(name=name, kind=kind, batch=batch, m=m, k=k, n=n, threads=torch.get_num_threads(),
         ms=round(median * 1e3, 4), ms_best=round(best * 1e3, 4),
         gflops=round(flops / median * 1e-9, 2), gflops_best=round(flops / best * 1e-9, 2))


def bench_product(args, name, m, k, n, transposed):
    a = torch.randn(m, k)
    b = torch.randn(n, k).t() if transposed else torch.randn(k, n)
    flops = 2.0 * m * k * n
    repeat = args.repeat or min(max(int(2e10 / flops), 5), 200)
    with torch.no_grad():
        median, best = time_it(repeat, lambda: torch.matmul(a, b))
    product_line(name, "matmul", 1, m, k, n, flops, median, best)


def bench_batched(args, name, batch, heads, T, hs):
    bh = batch * heads
    q, k, w = torch.randn(bh, T, hs), torch.randn(bh, T, hs), torch.randn(bh, T, T)
    flops = 2.0 * 2.0 * bh * T * T * hs
    repeat = args.repeat or min(max(int(2e10 / flops), 5), 200)

    def run():
        torch.matmul(q, k.transpose(-2, -1))
        torch.matmul(w, k)

    with torch.no_grad():
        median, best = time_it(repeat, run)
    product_line("bmm_" + name, "bmm", bh, T, hs, T, flops, median, best)


def attention(q, k, v, mask):
    scores = torch.matmul(q, k.transpose(-2, -1)).masked_fill(mask, -math.inf)
    weights = F.softmax(scores / math.sqrt(q.size(-1)), dim=-1)
    return torch.matmul(weights, v)


def bench_attention(args, name, batch, heads, T, hs, forward, backward):
    q, k, v = (torch.randn(batch, heads, T, hs, requires_grad=True) for _ in range(3))
    mask = torch.triu(torch.ones(T, T), 1).bool()
    grad = torch.randn(batch, heads, T, hs)
    flops = 2.0 * 2.0 * batch * heads * T * T * hs
    repeat = args.repeat or min(max(int(1e10 / flops), 5), 100)
    if forward:
        with torch.no_grad():
            median, best = time_it(repeat, lambda: attention(q, k, v, mask))
        product_line("attn_fwd_" + name, "attention", batch * heads, T, hs, T, flops, median, best)
    if not backward:
        return
    runs = []
    for i in range(repeat + 1):
        q.grad = k.grad = v.grad = None
        out = attention(q, k, v, mask)
        t0 = time.perf_counter()
        out.backward(grad)
        if i > 0:
            runs.append(time.perf_counter() - t0)
    runs.sort()
    product_line("attn_bwd_" + name, "attention_backward", batch * heads, T, hs, T, 2 * flops,
                 runs[len(runs) // 2], runs[0])


def bench_gelu(args, forward, backward):
    x = (torch.randn(12, 64, 512) * 2).requires_grad_()
    dout = torch.randn(12, 64, 512)
    n = x.numel()
    repeat = args.repeat or 200

    def line(name, median, best):
        emit(name=name, kind="elementwise", elements=n, threads=torch.get_num_threads(),
             ms=round(median * 1e3, 4), ms_best=round(best * 1e3, 4),
             gelements=round(n / median * 1e-9, 3), gelements_best=round(n / best * 1e-9, 3))

    if forward:
        with torch.no_grad():
            line("gelu_fwd_macbook", *time_it(repeat, lambda: F.gelu(x)))
    if backward:
        def step():
            x.grad = None
            F.gelu(x).backward(dout)
        line("gelu_bwd_macbook", *time_it(repeat, step))


def bench_train(args, name, batch, block, n_embd, n_head, n_layer, dropout, lecture, steps):
    torch.manual_seed(1337)
    model = make_gpt(block, n_embd, n_head, n_layer, dropout, lecture, is_gpt2(name))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    vocab = 50257 if is_gpt2(name) else 65
    x, y = torch.randint(0, vocab, (batch, block)), torch.randint(0, vocab, (batch, block))
    steps = args.repeat or steps

    def step():
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    median, best = time_it(steps, step)
    tokens = batch * block
    emit(name=name, kind="train", batch=batch, block=block, n_embd=n_embd, n_head=n_head, n_layer=n_layer,
         dropout=dropout, model="lecture" if lecture else "fast", threads=torch.get_num_threads(), steps=steps,
         ms_per_step=round(median * 1e3, 3), tokens_per_s=round(tokens / median), tokens_per_s_best=round(tokens / best),
         peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))


# Sampling from an untrained GPT of each size, batch 1, from one token, as
# nanoGPT's generate does it (no key/value cache: each token runs the whole
# context, cropped to block_size). Both names of each size (ember's cached
# and _nocache entries) run this same loop: PyTorch's peer for both.
GENERATE = [  # name, block, n_embd, n_head, n_layer, new tokens
    ("generate_small", 32, 64, 4, 4, 500),
    ("generate_small_nocache", 32, 64, 4, 4, 500),
    ("generate_lecture", 256, 384, 6, 6, 255),
    ("generate_lecture_nocache", 256, 384, 6, 6, 255),
    ("generate_lecture_500", 256, 384, 6, 6, 500),
    ("generate_lecture_500_nocache", 256, 384, 6, 6, 500),
    ("generate_gpt2_124m", 1024, 768, 12, 12, 64),
    ("generate_gpt2_124m_nocache", 1024, 768, 12, 12, 64),
]


def bench_generate(args, name, block, n_embd, n_head, n_layer, new_tokens):
    torch.manual_seed(1337)
    model = make_gpt(block, n_embd, n_head, n_layer, 0.2, lecture=False, gpt2=is_gpt2(name))
    model.eval()

    def run():
        torch.manual_seed(42)
        generate(model, block, torch.zeros((1, 1), dtype=torch.long), new_tokens)

    median, best = time_it(args.repeat or 3, run)
    emit(name=name, kind="generate", block=block, n_embd=n_embd, n_head=n_head, n_layer=n_layer,
         new_tokens=new_tokens, cache=False, threads=torch.get_num_threads(), seconds=round(median, 4),
         tokens_per_s=round(new_tokens / median, 1), tokens_per_s_best=round(new_tokens / best, 1))


def blas_libraries():
    """The BLAS libraries this process has loaded (torch's products go through them)."""
    torch.ones(2, 2) @ torch.ones(2, 2)
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/" in line and "blas" in line.lower()}
    return sorted({os.path.realpath(p) for p in paths})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--list", action="store_true", help="print every entry's name and exit")
    parser.add_argument("--blas", action="store_true", help="print the BLAS libraries torch multiplies with and exit")
    args = parser.parse_args()
    if args.blas:
        print("\n".join(blas_libraries()))
        return
    names = [p[0] for p in PRODUCTS] + ["bmm_" + a[0] for a in ATTENTION]
    names += [f"attn_{d}_{a[0]}" for a in ATTENTION for d in ("fwd", "bwd")] + [t[0] for t in TRAIN]
    names += ["gelu_fwd_macbook", "gelu_bwd_macbook"] + [g[0] for g in GENERATE]
    if args.list:
        print("\n".join(names))
        return
    exact = args.only in names

    def selected(name):
        return not args.only or (name == args.only if exact else name.startswith(args.only))

    if not any(selected(n) for n in names):
        sys.exit(f"torch_bench: no entry matches --only {args.only}")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for p in PRODUCTS:
        if selected(p[0]):
            bench_product(args, *p)
    for a in ATTENTION:
        if selected("bmm_" + a[0]):
            bench_batched(args, *a)
    for a in ATTENTION:
        fwd, bwd = selected("attn_fwd_" + a[0]), selected("attn_bwd_" + a[0])
        if fwd or bwd:
            bench_attention(args, *a, fwd, bwd)
    if selected("gelu_fwd_macbook") or selected("gelu_bwd_macbook"):
        bench_gelu(args, selected("gelu_fwd_macbook"), selected("gelu_bwd_macbook"))
    for g in GENERATE:
        if selected(g[0]) and not args.child:
            bench_generate(args, *g)
    for t in TRAIN:
        if not selected(t[0]):
            continue
        if args.child:
            bench_train(args, *t)
        else:
            cmd = [sys.executable, os.path.abspath(__file__), "--child", "--only", t[0]]
            cmd += ["--threads", str(args.threads)] if args.threads else []
            cmd += ["--repeat", str(args.repeat)] if args.repeat else []
            sys.stdout.flush()
            subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
