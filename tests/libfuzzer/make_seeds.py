#!/usr/bin/env python3
"""Writes the hand-made seeds of the fuzzers' corpus (README.md here).

Standard library only: the safetensors files are built byte by byte from
the format (8 bytes little-endian header length, the JSON header, the
data), valid ones and each way a file can be broken. The text seeds start
with the byte that picks --block-size (fuzz_text_data.cpp). Run from the
repository's top folder:

    python3 tests/libfuzzer/make_seeds.py

The fuzzer adds its own finds beside these (named by their SHA-1); this
script rewrites only the files it names.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def safetensors(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, raw bytes). Returns the file's bytes."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def raw_header(text, data=b""):
    text = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(text)) + text + data


F32 = struct.pack("<6f", 1.0, -2.5, 0.0, 3.25, float("inf"), float("nan"))
F64 = struct.pack("<2d", 0.1, -1e300)
I64 = struct.pack("<3q", 0, -1, 2**62)
BOOL = bytes([1, 0, 1])
VALID = safetensors([("w", "F32", [2, 3], F32)])
ALL = safetensors(
    [("a.weight", "F32", [2, 3], F32), ("b", "F64", [2], F64), ("c", "I64", [3], I64), ("mask", "BOOL", [3], BOOL)],
    metadata={"format": "pt", "note": "caf\u00e9 \U0001F600"},
)

# What train_gpt --resume reads first (read_run): the settings in the
# metadata, the vocabulary, the loss histories; a real checkpoint also holds
# "model.*", "optim.*" and the generator's 5056 bytes in "rng_state".
RUN_SETTINGS = {
    "format": "ember.train_gpt.v1", "preset": "bigram", "stage": "bigram", "block_size": "8", "n_embd": "32",
    "n_head": "4", "n_layer": "3", "dropout": "0.000000", "gpt_init": "0", "batch_size": "4", "lr": "0.01",
    "max_grad_norm": "inf", "max_iters": "4", "eval_interval": "2", "eval_iters": "1", "seed": "1337",
    "next_step": "2", "data": "(generated play)", "data_fingerprint": "12345678901234567890",
}
VOCAB = b" !,.:?ABC"
RUN = safetensors(
    [("eval_steps", "I64", [1], struct.pack("<q", 0)), ("eval_train", "F64", [1], struct.pack("<d", 2.3)),
     ("eval_val", "F64", [1], struct.pack("<d", 2.4)), ("model.token_embedding_table.weight", "F32", [1, 1], F32[:4]),
     ("rng_state", "I64", [4], I64 + I64[:8]), ("step_losses", "F64", [2], struct.pack("<2d", 2.2, 2.1)),
     ("vocab", "I64", [len(VOCAB)], struct.pack(f"<{len(VOCAB)}q", *VOCAB))],
    metadata=RUN_SETTINGS,
)

SAFETENSORS = {
    "train_gpt_run.safetensors": RUN,
    "valid_f32.safetensors": VALID,
    "valid_all_dtypes.safetensors": ALL,
    "valid_empty.safetensors": safetensors([]),
    "valid_zero_size.safetensors": safetensors([("z", "F32", [0, 3], b""), ("s", "I64", [], I64[:8])]),
    "valid_unpadded.safetensors": safetensors([("w", "F32", [2, 3], F32)], pad=False),
    "valid_escapes.safetensors": raw_header('{"__metadata__":{"k\\u00e9\\ud83d\\ude00":"a\\n\\t\\"\\\\\\/b"},'
                                            '"x":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}}', b"\x01"),
    "short_length.safetensors": b"\x08\x00\x00",
    "truncated_data.safetensors": ALL[:-5],
    "truncated_header.safetensors": VALID[:20],
    "length_past_end.safetensors": struct.pack("<Q", 2**63) + VALID[8:],
    "not_an_object.safetensors": raw_header("[1,2,3]"),
    "bad_json.safetensors": raw_header('{"w":{"dtype":"F32","shape":[2,3],'),
    "bad_number.safetensors": raw_header('{"w":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}}', b"\0" * 4),
    "fraction.safetensors": raw_header('{"w":{"dtype":"F32","shape":[1.5e3],"data_offsets":[0,4]}}', b"\0" * 4),
    "duplicate_key.safetensors": raw_header('{"w":{"dtype":"F32","shape":[],"data_offsets":[0,4]},'
                                            '"w":{"dtype":"F32","shape":[],"data_offsets":[4,8]}}', b"\0" * 8),
    "deep.safetensors": raw_header("{\"a\":" + "[" * 40 + "]" * 40 + "}"),
    "bad_dtype.safetensors": safetensors([("w", "F16", [3], b"\0" * 6)]),
    "negative_size.safetensors": raw_header('{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', b"\0" * 4),
    "huge_shape.safetensors": raw_header('{"w":{"dtype":"F32","shape":[4294967296,4294967296],'
                                         '"data_offsets":[0,4]}}', b"\0" * 4),
    "overlap.safetensors": raw_header('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                      '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', b"\0" * 12),
    "gap.safetensors": raw_header('{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', b"\0" * 8),
    "trailing_data.safetensors": VALID + b"\0" * 8,
    "bool_not_0_or_1.safetensors": safetensors([("m", "BOOL", [2], b"\x01\x02")]),
    "wrong_span.safetensors": raw_header('{"w":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}}', b"\0" * 8),
    "metadata_not_string.safetensors": raw_header('{"__metadata__":{"n":1}}'),
    "lone_surrogate.safetensors": raw_header('{"__metadata__":{"k":"\\ud83d"}}'),
}

# The first byte picks --block-size: 1 + byte % 16.
PLAY = (b"ACT I.\n\nSCENE I. The court.\n\nROMILDA:\nGood Bernardo, keep the golden crown!\n\n"
        b"BERNARDO:\nWhy dost thou fear the moon, Romilda?\n\n")
TEXT = {
    "play_block8.txt": b"\x07" + PLAY,
    "play_block16.txt": b"\x0f" + PLAY * 2,
    "utf8_block4.txt": b"\x03" + "caf\u00e9 na\u00efve \u03bb\u2192\U0001F600 ".encode() * 4,
    "one_char_block1.txt": b"\x00" + b"a" * 40,
    "too_short_block16.txt": b"\x0f" + b"hello world",
    "empty.txt": b"\x05",
    "nul_byte.txt": b"\x05" + b"text\0more text here, long enough",
    "stray_continuation.txt": b"\x05" + b"abc\x80def ghi jkl mno pqr",
    "overlong.txt": b"\x05" + b"abc\xc0\xafdef ghi jkl mno pqr",
    "surrogate.txt": b"\x05" + b"abc\xed\xa0\x80def ghi jkl mno",
    "past_10ffff.txt": b"\x05" + b"abc\xf4\x90\x80\x80def ghi jkl",
    "cut_sequence.txt": b"\x05" + b"abcdefghijklmnopqrstuvwxyz\xe2\x82",
    "latin1.txt": b"\x05" + "caf\u00e9 cr\u00e8me br\u00fbl\u00e9e".encode("latin-1"),
    "all_ascii.txt": b"\x02" + bytes(range(1, 128)),
}

# The tokenizer seeds (fuzz_tokenizer.cpp): an even first byte, a .model
# file; an odd one, a text.
GPT2 = rb"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
TOKENIZER = {
    "model_basic": b"\x00minbpe v1\n\n0\n97 97\n256 97\n257 98\n",
    "model_regex": b"\x00minbpe v1\n" + GPT2 + b"\n1\n<|endoftext|> 300\n97 97\n32 256\n",
    "model_crlf": b"\x00minbpe v1\r\n\r\n0\r\n97 97\r\n",
    "model_bad_merge": b"\x00minbpe v1\n\n0\n97 300\n",
    "model_bad_count": b"\x00minbpe v1\n\n99999999999999999999\n",
    "model_special_no_id": b"\x00minbpe v1\n" + GPT2 + b"\n1\n<|eot|>\n",
    "text_english": b"\x01Hello world! I'm here, you're there; it's 2024.\n\n  Done.  ",
    "text_scripts": b"\x01" + "Caf\u00e9 \u039a\u03b1\u03bb\u03b7 \u041f\u0440\u0438 \u4f60\u597d "
                    "\U0001F44D\U0001F3FD \u0645\u0631\u062d\u0628\u0627 \u00a0\u3000x".encode("utf-8"),
    "text_invalid": b"\x01ok \xff \xc3( \xed\xa0\x80 \xf0\x9f\x98",
    "text_spaces": b"\x01 \t\r\n  \n\n   x   ",
}


def write(folder, files):
    os.makedirs(folder, exist_ok=True)
    for name, content in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(content)


# A file written by the PyTorch-side writer of the tests (tests/fixtures/torch_models.py).
with open(os.path.join(HERE, "..", "fixtures", "canonical.safetensors"), "rb") as f:
    SAFETENSORS["pytorch_canonical.safetensors"] = f.read()

write(os.path.join(HERE, "corpus", "safetensors"), SAFETENSORS)
write(os.path.join(HERE, "corpus", "text_data"), TEXT)
write(os.path.join(HERE, "corpus", "tokenizer"), TOKENIZER)
print(f"wrote {len(SAFETENSORS)} safetensors seeds, {len(TEXT)} text seeds and {len(TOKENIZER)} tokenizer seeds")
