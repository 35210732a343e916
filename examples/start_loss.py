#!/usr/bin/python3
"""Why each stage of the lecture starts at the loss it does (docs/gpt.md).

For V logits drawn independently with variance s2, the expected
cross-entropy is about ln V + s2/2. This script checks that rule on random
logits, then builds each stage's model as train_gpt does (the PyTorch twins
in examples/train_gpt.py, seed 1337), measures the variance of its logits
over 1000 windows of tiny Shakespeare's validation text (8 for the
10.8 M-parameter lecture model), and prints the rule's
prediction beside the loss the model actually starts at.

    /usr/bin/python3 examples/start_loss.py

Needs Debian's python3-torch; about half a minute.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_gpt  # noqa: E402


def main():
    torch.set_num_threads(1)
    with open(os.path.join(HERE, "..", "data", "tinyshakespeare.txt")) as f:
        text = f.read()
    chars = sorted(set(text))
    V = len(chars)
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text])
    val = data[int(0.9 * len(data)):]
    print(f"ln V = ln {V} = {math.log(V):.4f}")

    print("\nrandom logits, s2 = variance: ln V + s2/2 against the mean loss of 200000 draws")
    g = torch.Generator().manual_seed(0)
    for s2 in (1.0, 65 / 96, 33 / 96, 384 * 0.02 ** 2, 32 * 0.02 ** 2):
        z = torch.randn(200000, V, dtype=torch.float64, generator=g) * math.sqrt(s2)
        loss = (torch.logsumexp(z, -1) - z[:, 0]).mean().item()
        print(f"  s2 {s2:.4f}: ln V + s2/2 = {math.log(V) + s2 / 2:.4f}, measured {loss:.4f}")

    print("\neach stage at initialisation (seed 1337): variance of its logits, the rule, the loss")
    for preset in ("bigram", "embed", "head", "multihead", "ffwd", "blocks", "layernorm", "lecture"):
        cfg = train_gpt.PRESETS[preset]
        torch.manual_seed(1337)
        model = train_gpt.make_model(cfg, V)
        model.eval()
        T = cfg["block_size"]
        ix = torch.randint(len(val) - T, (8 if preset == "lecture" else 1000,), generator=g)
        x = torch.stack([val[i:i + T] for i in ix])
        y = torch.stack([val[i + 1:i + T + 1] for i in ix])
        with torch.no_grad():
            logits = model(x)
        s2 = logits.var(-1, unbiased=False).mean().item()
        loss = F.cross_entropy(logits.view(-1, V), y.view(-1)).item()
        print(f"  {preset:10s} s2 {s2:.4f}  ln V + s2/2 = {math.log(V) + s2 / 2:.4f}  loss {loss:.4f}")


if __name__ == "__main__":
    main()
