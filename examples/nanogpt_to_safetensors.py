#!/usr/bin/python3
"""Turns a nanoGPT checkpoint (out/ckpt.pt, a pickle PyTorch wrote) into the
directory ember reads: config.json (the checkpoint's model_args) and
model.safetensors (its state_dict, under nanoGPT's names).

    python3 examples/nanogpt_to_safetensors.py out/ckpt.pt DIR
    build/examples/gpt2 --model DIR --prompt "ROMEO:"

Needs PyTorch (the machine that ran nanoGPT has it); the safetensors file is
written here by hand (8 bytes of header length, the JSON header, the raw
little-endian float32 data), so the safetensors package is not needed. A
model trained with torch.compile has its names prefixed "_orig_mod.";
nanoGPT strips it when it resumes, and so does this script. Tied weights
(lm_head.weight is transformer.wte.weight) are written under both names,
as nanoGPT's state_dict holds them. docs/gpt2.md, "nanoGPT's checkpoints".
"""
import json
import os
import struct
import sys

MODEL_ARGS = ("n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size", "dropout")


def write_safetensors(tensors, path, metadata):
    """tensors: a list of (name, float32 tensor), written in this order."""
    header, chunks, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors:
        data = t.detach().to("cpu").contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)  # the data starts at a multiple of 8
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)


def convert(ckpt_path, out_dir):
    import torch

    ckpt = torch.load(ckpt_path, map_location="cpu")
    if not isinstance(ckpt, dict) or "model" not in ckpt or "model_args" not in ckpt:
        sys.exit(f"{ckpt_path}: not a nanoGPT checkpoint (a dict with 'model' and 'model_args')")
    args = ckpt["model_args"]
    missing = [k for k in MODEL_ARGS if k not in args]
    if missing:
        sys.exit(f"{ckpt_path}: model_args lacks {', '.join(missing)}")
    prefix = "_orig_mod."
    state = [(k[len(prefix):] if k.startswith(prefix) else k, v) for k, v in ckpt["model"].items()]
    state = [(k, v.float()) for k, v in state if not k.endswith(".attn.bias")]  # old nanoGPT kept the mask
    os.makedirs(out_dir, exist_ok=True)
    write_safetensors(state, os.path.join(out_dir, "model.safetensors"), {"format": "pt"})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump({k: args[k] for k in MODEL_ARGS}, f, indent=2)
        f.write("\n")
    print(f"{out_dir}: {len(state)} tensors, model_args {json.dumps({k: args[k] for k in MODEL_ARGS})}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    convert(sys.argv[1], sys.argv[2])
