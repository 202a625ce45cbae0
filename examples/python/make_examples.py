#!/usr/bin/env python3
"""Makes the data and the scripted model of the two Python examples:

    experiments/torchscript_cnn.yaml      a ResNet-ish CNN written in Python (below), scripted,
                                          on an imagefolder of drawn shapes, fp32 against bf16
    experiments/distilbert_textfile.yaml  a small DistilBERT on a CSV file of short reviews,
                                          fp32 against bf16

    python3 examples/python/make_examples.py [OUT]     # OUT: examples/data (the files' default)

Writes, under OUT:
    resnetish.pt                 torch.jit.save(torch.jit.script(ResNetish(num_classes=4)))
                                 (needs torch: python -m pip install torch; skipped without it)
    shapes/{train,val,test}/{circle,cross,square,triangle}/*.png   32x32 RGB PNGs
    reviews.csv                  text,label: 1,200 short reviews, labels negative/neutral/positive
    vocab.txt                    a WordPiece vocabulary of the reviews' words (BERT's layout)

Everything but the model needs only the standard library; every file is the same on every run.
"""
import csv
import os
import random
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = ["circle", "cross", "square", "triangle"]


def script_model(out):
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError:
        print("torch is not installed: resnetish.pt not written (python -m pip install torch)")
        return

    class Block(nn.Module):
        def __init__(self, channels_in: int, channels: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)
            self.shortcut = nn.Sequential()
            if stride != 1 or channels_in != channels:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(channels_in, channels, 1, stride, bias=False), nn.BatchNorm2d(channels))

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))

    class ResNetish(nn.Module):
        """A small ResNet for 32x32 images: a 3x3 stem, three stages of residual blocks."""

        def __init__(self, num_classes: int = 4, width: int = 32):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False),
                                      nn.BatchNorm2d(width), nn.ReLU())
            self.layers = nn.Sequential(Block(width, width, 1), Block(width, 2 * width, 2),
                                        Block(2 * width, 4 * width, 2))
            self.dropout = nn.Dropout(0.1)
            self.head = nn.Linear(4 * width, num_classes)

        def forward(self, images):
            x = self.layers(self.stem(images))
            return self.head(self.dropout(x.mean(dim=(2, 3))))

    torch.manual_seed(0)
    model = ResNetish(num_classes=len(SHAPES))
    torch.jit.save(torch.jit.script(model), os.path.join(out, "resnetish.pt"))
    print("wrote", os.path.join(out, "resnetish.pt"))


def png(path, pixels, size):
    """An RGB PNG of size x size from a flat list of (r, g, b)."""
    rows = b"".join(b"\x00" + bytes(v for p in pixels[y * size:(y + 1) * size] for v in p)
                    for y in range(size))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


def draw(shape, rng, size=32):
    cx, cy = rng.uniform(11, 21), rng.uniform(11, 21)
    r = rng.uniform(6, 10)
    ink = tuple(rng.randrange(120, 256) for _ in range(3))
    paper = tuple(rng.randrange(0, 90) for _ in range(3))
    pixels = []
    for y in range(size):
        for x in range(size):
            dx, dy = x - cx, y - cy
            if shape == "circle":
                inside = dx * dx + dy * dy <= r * r
            elif shape == "square":
                inside = abs(dx) <= r * 0.8 and abs(dy) <= r * 0.8
            elif shape == "cross":
                inside = (abs(dx) <= r * 0.3 and abs(dy) <= r) or (abs(dy) <= r * 0.3 and abs(dx) <= r)
            else:  # triangle, apex up
                inside = -r <= dy <= r and abs(dx) <= (dy + r) / 2
            base = ink if inside else paper
            pixels.append(tuple(max(0, min(255, c + rng.randrange(-30, 31))) for c in base))
    return pixels


def write_shapes(out, rng):
    for split, count in (("train", 160), ("val", 40), ("test", 40)):
        for shape in SHAPES:
            folder = os.path.join(out, "shapes", split, shape)
            os.makedirs(folder, exist_ok=True)
            for i in range(count):
                png(os.path.join(folder, f"{i:04d}.png"), draw(shape, rng), 32)
    print("wrote", os.path.join(out, "shapes"), "(4 classes: 160 train, 40 val, 40 test each)")


WORDS = {
    "positive": ["great", "wonderful", "moving", "brilliant", "funny", "charming", "superb"],
    "negative": ["dull", "awful", "boring", "clumsy", "tedious", "painful", "weak"],
    "neutral": ["long", "french", "quiet", "black", "short", "recent", "local"],
}
SUBJECTS = ["the film", "this movie", "the plot", "the cast", "the ending", "the score", "it"]
FILLER = ["was", "felt", "seemed", "is", "turned out", "really was", "looked"]


def write_reviews(out, rng):
    rows = []
    for i in range(1200):
        label = ["negative", "neutral", "positive"][i % 3]
        words = [rng.choice(WORDS[label]) for _ in range(rng.randint(1, 2))]
        text = f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(FILLER)} {' and '.join(words)}."
        if rng.random() < 0.3:
            text += f" {rng.choice(SUBJECTS).capitalize()} {rng.choice(FILLER)} {rng.choice(WORDS['neutral'])}, \"honestly\"."
        rows.append({"text": text, "label": label})
    with open(os.path.join(out, "reviews.csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["text", "label"])
        writer.writeheader()
        writer.writerows(rows)
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(3)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += list("!\"',.")
    words = set()
    for row in rows:
        for word in row["text"].lower().replace(".", " ").replace(",", " ").replace('"', " ").split():
            words.add(word)
    vocab += sorted(words)
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    print("wrote", os.path.join(out, "reviews.csv"), "(1200 reviews) and vocab.txt",
          f"({len(vocab)} tokens)")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "data")
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    rng = random.Random(0)
    write_shapes(out, rng)
    write_reviews(out, rng)
    script_model(out)


if __name__ == "__main__":
    main()
