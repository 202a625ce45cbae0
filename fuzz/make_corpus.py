#!/usr/bin/env python3
"""Dev-time: writes the seed corpora of the fuzz targets that read binary files (cifar10_fuzz,
image_fuzz, token_cache_fuzz, training_state_fuzz) under fuzz/corpus/. Needs numpy and Pillow;
the committed corpora are its output, so CI never runs it.

    python3 fuzz/make_corpus.py
"""
import io
import json
import os
import struct

import numpy as np
from PIL import Image

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
rng = np.random.default_rng(7)


def write(target, name, data):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    with open(os.path.join(ROOT, target, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata):
    """tensors: [(name, dtype, shape, bytes)] in order; the format as the reference writes it."""
    header, offset, data = {}, 0, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


# CIFAR-10: two records, and one cut short.
records = b"".join(bytes([label]) + rng.integers(0, 256, 3072, dtype=np.uint8).tobytes() for label in (3, 9))
write("cifar10_fuzz", "two_records.bin", records)
write("cifar10_fuzz", "cut.bin", records[:5000])

# Images: the first byte picks the format (even PNG, odd JPEG).
pixels = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
for mode, name in (("RGB", "rgb"), ("L", "grey"), ("P", "palette"), ("RGBA", "alpha")):
    image = Image.fromarray(pixels).convert(mode)
    out = io.BytesIO()
    image.save(out, format="PNG")
    write("image_fuzz", f"{name}.png.bin", b"\0" + out.getvalue())
for mode, name in (("RGB", "rgb"), ("L", "grey")):
    out = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(out, format="JPEG", quality=80)
    write("image_fuzz", f"{name}.jpg.bin", b"\1" + out.getvalue())
out = io.BytesIO()
Image.fromarray(pixels).save(out, format="JPEG", progressive=True)
write("image_fuzz", "progressive.jpg.bin", b"\1" + out.getvalue())

# The token cache: two texts, key "fuzz" (what the target reads with).
ids = np.array([101, 7, 8, 102, 101, 102], dtype="<i4")
offsets = np.array([0, 4, 6], dtype="<i8")
labels = np.array([1, 0], dtype="<i8")
write("token_cache_fuzz", "two_texts.safetensors", safetensors(
    [("ids", "I32", ids.shape, ids.tobytes()), ("offsets", "I64", offsets.shape, offsets.tobytes()),
     ("labels", "I64", labels.shape, labels.tobytes())], {"key": "fuzz"}))

# A training-state folder: its files one after another, split at "--8<-- <name>" lines.
state = {"epoch": 1, "batch": 2, "step": 6, "best_epoch": 1, "best_val_acc": 0.5, "strategy": "ddp",
         "world_size": 2, "batch_size": 8, "train_seconds": 3.5, "epoch_seconds": 0.5,
         "epochs_without_improvement": 0, "meter": {"samples": 32.0},
         "epochs": {"1": {"train_loss": "nan", "val_acc": 0.5}}}
mark = {"state": "1.2.6", "epoch": "1", "written_by": "trainyard"}
weight = np.array([1.0, 2.0], dtype="<f4").tobytes()
model = safetensors([("w", "F32", [2], weight)], mark)
optimizer = safetensors([("w/exp_avg", "F32", [2], weight)], mark)
ranks = safetensors([("rank0/loss_sum", "F64", [1], struct.pack("<d", 1.5)),
                     ("rank1/loss_sum", "F64", [1], struct.pack("<d", 2.5))], mark)
folder = json.dumps(state, indent=2).encode()
for name, data in (("model.safetensors", model), ("optimizer.safetensors", optimizer),
                   ("ranks.safetensors", ranks)):
    folder += b"\n--8<-- " + name.encode() + b"\n" + data
write("training_state_fuzz", "ddp_mid_epoch.state", folder)
old = dict(state)
for key in ("batch", "batch_size", "epochs", "meter"):
    old.pop(key)
write("training_state_fuzz", "epoch_end_old.state", json.dumps(old).encode() +
      b"\n--8<-- model.safetensors\n" + safetensors([("w", "F32", [2], weight)], {"epoch": "1"}) +
      b"\n--8<-- optimizer.safetensors\n" + safetensors([], {"epoch": "1"}))
