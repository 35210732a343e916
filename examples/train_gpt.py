#!/usr/bin/python3
"""PyTorch twin of train_gpt: the same corpus, models, batches and loop.

With the same seed it draws the same weights and batches as ember's
train_gpt, so the two print the same losses (tests/test_train_gpt.cpp
compares ember's first 10 training losses with this script's, stored as
fixtures by tests/fixtures/fx_train.py). Run it to compare speed or losses,
here on tiny Shakespeare (data/tinyshakespeare.txt, docs/training.md):

    /usr/bin/python3 examples/train_gpt.py --preset blocks --data data/tinyshakespeare.txt

Needs Debian's python3-torch. The models are the lecture's stages
(examples/train/model.h) and tests/fixtures/torch_models.py's
GPTLanguageModel (gpt.py), which ember's train_gpt runs in its fast model
by default: the same function, so the same losses to rounding.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from torch_models import Block, GPTLanguageModel, Head, MultiHeadAttention  # noqa: E402

# ---- the generated play (examples/train/corpus.cpp, draw for draw) ----------------------

MASK = (1 << 64) - 1


class SplitMix:
    def __init__(self, seed):
        self.state = seed

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n

    def pick(self, words):
        return words[self.below(len(words))]


NAMES = ["ROMILDA", "BERNARDO", "CAMILLA", "DUNSTAN", "ELINOR", "FABIAN", "GERTRUDE", "HORATIO", "IMOGEN", "JAQUES",
         "LAVINIA", "MALVOLIO", "NERISSA", "OSWALD", "PERDITA", "SILVIUS"]
NOUNS = ["king", "queen", "crown", "sword", "rose", "river", "moon", "star", "heart", "letter", "ring", "castle",
         "garden", "storm", "fool", "ghost", "horse", "night", "morning", "song", "tower", "field", "gate", "shadow",
         "candle", "mirror", "bell"]
ADJECTIVES = ["gentle", "bitter", "golden", "silent", "noble", "wicked", "bright", "cold", "sweet", "proud", "weary",
              "hidden", "ancient", "faithful", "strange", "pale"]
VERBS = ["love", "fear", "seek", "keep", "break", "praise", "follow", "remember", "guard", "forsake"]
VERBS_S = ["loves", "fears", "seeks", "keeps", "breaks", "praises", "follows", "remembers", "guards", "forsakes"]
PLACES = ["court", "forest", "chapel", "harbour", "market", "hall", "orchard", "battlement"]
ADVERBS = ["truly", "softly", "gladly", "boldly", "dearly", "swiftly", "never", "ever"]
GREETINGS = ["Good", "Sweet", "Gentle", "Noble", "Dear"]
OATHS = ["By my troth", "Upon my honour", "Alas", "O heavens", "Marry", "In faith"]


def sentence(r, addressee):
    v = r.below(len(VERBS))
    kind = r.below(9)
    name = addressee.capitalize()
    d = lambda *lists: [r.pick(words) for words in lists]  # noqa: E731  (drawn left to right)
    if kind == 0:
        a, n1, n2 = d(ADJECTIVES, NOUNS, NOUNS)
        return f"The {a} {n1} {VERBS_S[v]} the {n2}."
    if kind == 1:
        (adv,) = d(ADVERBS)
        return f"I {adv} {VERBS[v]} thee, {name}."
    if kind == 2:
        g, a, n = d(GREETINGS, ADJECTIVES, NOUNS)
        return f"{g} {name}, {VERBS[v]} the {a} {n}!"
    if kind == 3:
        (n,) = d(NOUNS)
        return f"Why dost thou {VERBS[v]} the {n}, {name}?"
    if kind == 4:
        n1, a1, n2, a2 = d(NOUNS, ADJECTIVES, NOUNS, ADJECTIVES)
        return f"My {n1} is {a1}, and thy {n2} is {a2}."
    if kind == 5:
        n, p = d(NOUNS, PLACES)
        return f"Where is the {n}? It lies in the {p}."
    if kind == 6:
        o, n1, n2 = d(OATHS, NOUNS, NOUNS)
        return f"{o}, the {n1} {VERBS_S[v]} no {n2}."
    if kind == 7:
        n, p = d(NOUNS, PLACES)
        return f"Come, let us {VERBS[v]} the {n} of the {p}."
    adv, a, n = d(ADVERBS, ADJECTIVES, NOUNS)
    return f"{adv.capitalize()} shall I {VERBS[v]} the {a} {n}."


def roman(n):
    out = ""
    for value, text in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
                        (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= value:
            out += text
            n -= value
    return out


def default_corpus(target_chars=250000):
    r = SplitMix(1337)
    text = []
    size = 0
    act = 1
    while size < target_chars:
        text.append(f"ACT {roman(act)}.\n\n")
        size += len(text[-1])
        scene = 1
        while scene <= 4 and size < target_chars:
            text.append(f"SCENE {roman(scene)}. The {r.pick(PLACES)}.\n\n")
            cast_size = 2 + r.below(2)
            cast = []
            while len(cast) < cast_size:
                who = r.pick(NAMES)
                if who not in cast:
                    cast.append(who)
            previous = cast[-1]
            turns = 4 + r.below(8)
            for turn in range(turns):
                speaker = cast[turn % len(cast)]
                text.append(speaker + ":\n")
                lines = 1 + r.below(3)
                for _ in range(lines):
                    text.append(sentence(r, previous) + "\n")
                text.append("\n")
                previous = speaker
            size = sum(len(t) for t in text)
            scene += 1
        act += 1
    return "".join(text)


# ---- the lecture's stage models (examples/train/model.cpp) ------------------------------

class HeadsOnly(nn.Module):
    def __init__(self, num_heads, head_size, n_embd, block_size):
        super().__init__()
        self.heads = nn.ModuleList([Head(n_embd, head_size, block_size, 0.0) for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([h(x) for h in self.heads], dim=-1)


class FirstFeedForward(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_embd, n_embd), nn.ReLU())

    def forward(self, x):
        return self.net(x)


class FeedForward(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.ReLU(), nn.Linear(4 * n_embd, n_embd),
                                 nn.Dropout(0.0))

    def forward(self, x):
        return self.net(x)


class ResidualBlock(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.sa = MultiHeadAttention(n_head, n_embd // n_head, n_embd, block_size, 0.0)
        self.ffwd = FeedForward(n_embd)

    def forward(self, x):
        x = x + self.sa(x)
        return x + self.ffwd(x)


class Bigram(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx):
        return self.token_embedding_table(idx)


class StageModel(nn.Module):
    def __init__(self, stage, vocab_size, block_size, n_embd, n_head, n_layer):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
        self.position_embedding_table = nn.Embedding(block_size, n_embd)
        self.ffwd = None
        self.middle = None
        if stage == "head":
            self.sa_head = Head(n_embd, n_embd, block_size, 0.0)
            self.middle = self.sa_head
        elif stage in ("multihead", "ffwd"):
            self.sa_heads = HeadsOnly(n_head, n_embd // n_head, n_embd, block_size)
            self.middle = self.sa_heads
            if stage == "ffwd":
                self.ffwd = FirstFeedForward(n_embd)
        elif stage == "blocks":
            self.blocks = nn.Sequential(*[ResidualBlock(n_embd, n_head, block_size) for _ in range(n_layer)])
            self.middle = self.blocks
        elif stage == "layernorm":
            self.blocks = nn.Sequential(*[Block(n_embd, n_head, block_size, 0.0) for _ in range(n_layer)])
            self.middle = self.blocks
        self.ln_f = nn.LayerNorm(n_embd) if stage == "layernorm" else None
        self.lm_head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding_table(idx) + self.position_embedding_table(torch.arange(T))
        if self.middle is not None:
            x = self.middle(x)
        if self.ffwd is not None:
            x = self.ffwd(x)
        if self.ln_f is not None:
            x = self.ln_f(x)
        return self.lm_head(x)


class LogitsOnly(nn.Module):
    """torch_models.GPTLanguageModel, returning only the logits, as ember's forward(idx)."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, idx):
        return self.gpt(idx)[0]


# ---- presets (examples/train/options.cpp) -----------------------------------------------

PRESETS = {
    "default": dict(stage="gpt", block_size=64, n_embd=64, n_head=4, n_layer=3, dropout=0.0,
                    batch_size=32, lr=2e-3, max_iters=1000, eval_interval=100, eval_iters=20),
    "bigram": dict(stage="bigram", block_size=8, n_embd=32, n_head=4, n_layer=3, dropout=0.0,
                   batch_size=32, lr=1e-2, max_iters=3000, eval_interval=300, eval_iters=200),
    "lecture": dict(stage="gpt", block_size=256, n_embd=384, n_head=6, n_layer=6, dropout=0.2,
                    batch_size=64, lr=3e-4, max_iters=5000, eval_interval=500, eval_iters=200),
}
PRESETS["embed"] = dict(PRESETS["bigram"], stage="embed")
for _stage in ("head", "multihead", "ffwd", "blocks", "layernorm"):
    PRESETS[_stage] = dict(stage=_stage, block_size=8, n_embd=32, n_head=1 if _stage == "head" else 4, n_layer=3,
                           dropout=0.0, batch_size=32, lr=1e-3, max_iters=5000, eval_interval=500,
                           eval_iters=200)


def make_model(cfg, vocab_size):
    stage = cfg["stage"]
    if stage == "bigram":
        return Bigram(vocab_size)
    if stage == "gpt":
        return LogitsOnly(GPTLanguageModel(vocab_size, cfg["block_size"], cfg["n_embd"], cfg["n_head"],
                                           cfg["n_layer"], cfg["dropout"]))
    return StageModel(stage, vocab_size, cfg["block_size"], cfg["n_embd"], cfg["n_head"], cfg["n_layer"])


def train(cfg, text, log=print, tokens=None):
    """The lecture's loop. Returns (losses of every step, [(step, train, val)]).
    tokens: (ids of the text, vocabulary size) from a BPE tokenizer, instead
    of the text's characters (train_gpt --tokenizer)."""
    torch.manual_seed(cfg["seed"])
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    if tokens is None:
        data, vocab_size = torch.tensor([stoi[c] for c in text], dtype=torch.long), len(chars)
    else:
        data, vocab_size = torch.tensor(tokens[0], dtype=torch.long), tokens[1]
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]
    B, T = cfg["batch_size"], cfg["block_size"]

    def get_batch(split):
        d = train_data if split == "train" else val_data
        ix = torch.randint(len(d) - T, (B,))
        return torch.stack([d[i:i + T] for i in ix]), torch.stack([d[i + 1:i + T + 1] for i in ix])

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        out = []
        for split in ("train", "val"):
            losses = torch.zeros(cfg["eval_iters"])
            for k in range(cfg["eval_iters"]):
                X, Y = get_batch(split)
                logits = model(X)
                losses[k] = F.cross_entropy(logits.view(-1, logits.shape[-1]), Y.view(-1)).item()
            out.append(losses.mean().item())
        model.train()
        return out

    model = make_model(cfg, vocab_size)
    log(f"{sum(p.numel() for p in model.parameters()) / 1e6:.6f} M parameters")
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
    step_losses, evals = [], []
    start = time.time()
    for it in range(cfg["max_iters"]):
        if it % cfg["eval_interval"] == 0:
            tr, va = estimate_loss()
            evals.append((it, tr, va))
            log(f"step {it}: train loss {tr:.4f}, val loss {va:.4f}")
        xb, yb = get_batch("train")
        logits = model(xb)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), yb.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.get("max_grad_norm"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["max_grad_norm"])
        optimizer.step()
        step_losses.append(loss.item())
    # As train_gpt: the final evaluation after the last step (see its header).
    tr, va = estimate_loss()
    evals.append((cfg["max_iters"], tr, va))
    log(f"step {cfg['max_iters']}: train loss {tr:.4f}, val loss {va:.4f}")
    elapsed = time.time() - start
    log(f"final: step={cfg['max_iters']} train_loss={evals[-1][1]:.4f} val_loss={evals[-1][2]:.4f} "
        f"tokens_per_s={cfg['max_iters'] * B * T / elapsed:.0f}")
    return step_losses, evals


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="default", choices=sorted(PRESETS))
    p.add_argument("--data")
    p.add_argument("--max-iters", type=int)
    p.add_argument("--max-grad-norm", type=float)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int)
    args = p.parse_args()
    cfg = dict(PRESETS[args.preset], seed=args.seed)
    if args.max_iters:
        cfg["max_iters"] = args.max_iters
    if args.max_grad_norm:
        cfg["max_grad_norm"] = args.max_grad_norm
    if args.threads:
        torch.set_num_threads(args.threads)
    text = open(args.data).read() if args.data else default_corpus()
    train(cfg, text)


if __name__ == "__main__":
    main()
