#!/usr/bin/python3
"""Draws the pictures of docs/images with the commands the docs give, and
checks (or updates) the committed ones.

    python3 docs/images/make_images.py build            # check: exit 1 if a picture differs
    python3 docs/images/make_images.py build --update   # redraw them into docs/images

The pictures, each with the page that shows it and the command that page
documents (run here in a folder of its own):

    autograd_graph.svg       docs/autograd.md   build/examples/autograd_demo FOLDER
    train_gpt_loss.svg       docs/training.md   build/examples/train_gpt (the default run: out/loss.svg)
    train_gpt_attention.svg  docs/training.md   build/examples/train_gpt --sample-only out/train_gpt.safetensors
                                                --attention-map attention.svg --prompt $'CAMILLA:\\nWhy dost thou'

The default run takes about a minute on 2 cores. A picture matches when its
text is the same and every number in it is within 0.05 of the committed
one: the SVGs place points from losses and weights, whose last bits may
differ between CPUs (AVX2 or AVX-512 kernels), never by a visible amount.
docs/images/gemm_blocking.svg is drawn by hand and not checked here.
Only the Python standard library is used.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOLERANCE = 0.05
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def draw(build, folder):
    """Runs the documented commands in `folder`; returns {picture name: path drawn}."""
    examples = os.path.join(build, "examples")
    run = lambda *cmd: subprocess.run(cmd, cwd=folder, check=True, stdout=subprocess.DEVNULL)  # noqa: E731
    run(os.path.join(examples, "autograd_demo"), folder)
    run(os.path.join(examples, "train_gpt"))
    run(os.path.join(examples, "train_gpt"), "--sample-only", "out/train_gpt.safetensors",
        "--attention-map", "attention.svg", "--prompt", "CAMILLA:\nWhy dost thou")
    return {
        "autograd_graph.svg": os.path.join(folder, "autograd_graph.svg"),
        "train_gpt_loss.svg": os.path.join(folder, "out", "loss.svg"),
        "train_gpt_attention.svg": os.path.join(folder, "attention.svg"),
    }


def difference(drawn, committed):
    """None if the two SVG texts match (see above), else what differs."""
    if drawn == committed:
        return None
    a_text, b_text = NUMBER.split(drawn), NUMBER.split(committed)
    if a_text != b_text:
        for i, (x, y) in enumerate(zip(a_text, b_text)):
            if x != y:
                return f"the text differs: drawn {x[:80]!r}, committed {y[:80]!r}"
        return f"the drawn picture has {len(a_text)} pieces of text, the committed one {len(b_text)}"
    worst = max(abs(float(x) - float(y)) for x, y in zip(NUMBER.findall(drawn), NUMBER.findall(committed)))
    if worst > TOLERANCE:
        return f"a number differs by {worst:g} (more than {TOLERANCE})"
    return None


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    update = "--update" in sys.argv[2:]
    failed = 0
    with tempfile.TemporaryDirectory() as folder:
        for name, path in draw(build, folder).items():
            target = os.path.join(HERE, name)
            if update:
                shutil.copyfile(path, target)
                print(f"updated docs/images/{name}")
                continue
            with open(path, encoding="utf-8") as f, open(target, encoding="utf-8") as g:
                problem = difference(f.read(), g.read())
            if problem:
                failed += 1
                print(f"FAILED docs/images/{name} is not what its command draws today: {problem}\n"
                      f"       (python3 docs/images/make_images.py BUILD --update redraws it)")
            else:
                print(f"ok     docs/images/{name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
