#!/usr/bin/env python3
"""The same training steps as bench/gpu/*_throughput.yaml in plain PyTorch eager and in Lightning
Fabric, on the same GPU, for Trainyard's ratios (bench/gpu.sh). Prints and writes samples/s.

Each step: forward, cross-entropy, backward, Adam(5e-5) step, on a batch already on the device
(Trainyard's figures include its input pipeline, so the comparison favours the baselines). Like for
like with Trainyard's defaults: Adam on the fused kernel (on CUDA), DistilBERT without an attention
mask (the batches have no padding; Trainyard then passes none, and transformers would check an
all-ones mask on the host every step), float32 products in full precision. Both baselines are eager:
no torch.compile, no CUDA graphs. Each configuration runs in both frameworks one after the other, so
a call cut short keeps pairs.

    python3 bench/gpu/baselines.py --out baselines.json          # on the GPU machine
    python3 bench/gpu/baselines.py --device cpu --quick          # a smoke test anywhere
"""
import argparse
import gc
import json
import os
import time

import torch

PRECISIONS = ["32-true", "bf16-mixed", "16-mixed"]


def make_model(name, quick):
    if name == "vit_b16":
        from torchvision.models.vision_transformer import VisionTransformer
        if quick:
            return VisionTransformer(image_size=32, patch_size=8, num_layers=1, num_heads=2, hidden_dim=32,
                                     mlp_dim=64, num_classes=10)
        return VisionTransformer(image_size=224, patch_size=16, num_layers=12, num_heads=12, hidden_dim=768,
                                 mlp_dim=3072, num_classes=10)
    from transformers import DistilBertConfig, DistilBertForSequenceClassification
    config = DistilBertConfig(num_labels=2, attn_implementation="sdpa")
    if quick:
        config = DistilBertConfig(vocab_size=100, max_position_embeddings=64, dim=32, n_layers=1, n_heads=2,
                                  hidden_dim=64, num_labels=2, attn_implementation="sdpa")
    return DistilBertForSequenceClassification(config)


def make_batch(name, batch, device, quick):
    if name == "vit_b16":
        size = 32 if quick else 224
        return {"x": torch.rand(batch, 3, size, size, device=device)}, torch.randint(0, 10, (batch,), device=device)
    length, vocab = (32, 100) if quick else (512, 30522)
    ids = torch.randint(0, vocab, (batch, length), device=device)
    return {"input_ids": ids}, torch.randint(0, 2, (batch,), device=device)


def logits_of(model, inputs):
    if "x" in inputs:
        return model(inputs["x"])
    return model(**inputs).logits


def make_optimizer(model, device_type):
    return torch.optim.Adam(model.parameters(), lr=5e-5, fused=device_type == "cuda")


def run_eager(name, batch, precision, args):
    device = torch.device(args.device)
    model = make_model(name, args.quick).to(device)
    optimizer = make_optimizer(model, device.type)
    inputs, targets = make_batch(name, batch, device, args.quick)
    dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "16-mixed")

    def step():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = torch.nn.functional.cross_entropy(logits_of(model, inputs).float(), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    return timed(step, batch, args)


def run_fabric(name, batch, precision, args):
    try:
        from lightning import Fabric
    except ImportError:  # the standalone package
        from lightning_fabric import Fabric
    fabric = Fabric(accelerator=args.device, devices=1, precision=precision)
    model = make_model(name, args.quick)
    # Fabric moves the model in setup; a fused optimizer made before then follows its parameters.
    optimizer = make_optimizer(model, args.device)
    model, optimizer = fabric.setup(model, optimizer)
    inputs, targets = make_batch(name, batch, fabric.device, args.quick)

    def step():
        loss = torch.nn.functional.cross_entropy(logits_of(model, inputs).float(), targets)
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return timed(step, batch, args)


def timed(step, batch, args):
    cuda = args.device == "cuda"
    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_reserved() if cuda else 0
    return {"samples_per_s": batch * args.steps / seconds, "peak_reserved_bytes": peak}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny models: a smoke test of this script")
    parser.add_argument("--out", default="")
    parser.add_argument("--frameworks", default="eager,fabric")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.warmup = 2, 1
    configs = [("vit_b16", b) for b in (16, 256)] + [("distilbert", b) for b in (12, 64)]
    if args.quick:
        configs = [("vit_b16", 4), ("distilbert", 4)]
    precisions = PRECISIONS if args.device == "cuda" else ["32-true", "bf16-mixed"]
    results = []

    def save():
        # After every configuration: a call cut short, or one that fails, keeps what finished.
        if args.out:
            with open(args.out + ".tmp", "w") as f:
                json.dump(results, f, indent=1)
            os.replace(args.out + ".tmp", args.out)

    for name, batch in configs:
        for precision in precisions:
            for framework in args.frameworks.split(","):
                run = run_eager if framework == "eager" else run_fabric
                torch.manual_seed(0)
                entry = dict(framework=framework, model=name, batch=batch, precision=precision)
                try:
                    entry.update(run(name, batch, precision, args))
                    print(f"{framework:7s} {name:11s} batch {batch:4d} {precision:10s} "
                          f"{entry['samples_per_s']:10.1f} samples/s", flush=True)
                except Exception as error:  # one configuration's failure (OOM, a missing package)
                    entry["error"] = f"{type(error).__name__}: {error}"
                    print(f"{framework:7s} {name:11s} batch {batch:4d} {precision:10s} "
                          f"failed: {entry['error']}", flush=True)
                results.append(entry)
                save()
                gc.collect()  # the configuration's model and optimizer, before the cache is emptied
                if args.device == "cuda":
                    torch.cuda.empty_cache()
    save()


if __name__ == "__main__":
    main()
