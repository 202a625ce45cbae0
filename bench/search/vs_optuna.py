"""The study bench/search/vs_optuna.sh runs in Trainyard, written for Optuna as its users write it:
a tiny ViT trained in PyTorch on the same CIFAR-10-format files, TPESampler with the same space,
SuccessiveHalvingPruner at the same rungs (min_resource 1, reduction 3), val_acc reported every
epoch; then the best settings trained again on CONFIRM fresh seeds. Prints one JSON line: wall
seconds (from before `import torch` to the end), best trial's val_acc, the confirmations' median
val_acc.
Usage: python vs_optuna.py DATA_DIR SEED TRIALS EPOCHS CONFIRM THREADS"""
import time

START = time.perf_counter()

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import optuna  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

DATA, SEED, TRIALS, EPOCHS, CONFIRM, THREADS = (Path(sys.argv[1]), *map(int, sys.argv[2:7]))
VAL_SIZE, BATCH = 200, 64
torch.set_num_threads(THREADS)
optuna.logging.set_verbosity(optuna.logging.WARNING)


def read(name):
    records = np.fromfile(DATA / name, dtype=np.uint8).reshape(-1, 3073)
    images = torch.from_numpy(records[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32) / 255)
    return images, torch.from_numpy(records[:, 0].astype(np.int64))


parts = [read(f"data_batch_{i}.bin") for i in range(1, 6)]
train_x, train_y = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
val_x, val_y = train_x[-VAL_SIZE:], train_y[-VAL_SIZE:]  # the last training images, as cifar10's
train_x, train_y = train_x[:-VAL_SIZE], train_y[:-VAL_SIZE]


class Block(nn.Module):
    def __init__(self, width, heads, mlp):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width, eps=1e-6), nn.LayerNorm(width, eps=1e-6)
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, mlp), nn.GELU(), nn.Linear(mlp, width))

    def forward(self, x):
        y = self.norm1(x)
        x = x + self.attention(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):  # Trainyard's vit (torchvision's ViT): class token, learned positions
    def __init__(self, patch=8, width=32, depth=2, heads=2, mlp=64, classes=10):
        super().__init__()
        self.patches = nn.Conv2d(3, width, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.positions = nn.Parameter(torch.randn(1, (32 // patch) ** 2 + 1, width) * 0.02)
        self.blocks = nn.Sequential(*[Block(width, heads, mlp) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(width, eps=1e-6), nn.Linear(width, classes)
        # torchvision's initialisation, as Trainyard's vit has it.
        nn.init.trunc_normal_(self.patches.weight, std=(1 / (3 * patch * patch)) ** 0.5)
        nn.init.zeros_(self.patches.bias)
        for block in self.blocks:
            for layer in (block.mlp[0], block.mlp[2]):
                nn.init.xavier_uniform_(layer.weight)
                nn.init.normal_(layer.bias, std=1e-6)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, x):
        x = self.patches(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(len(x), -1, -1), x], 1) + self.positions
        return self.head(self.norm(self.blocks(x))[:, 0])


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        correct = sum((model(x[i:i + 256]).argmax(1) == y[i:i + 256]).sum().item()
                      for i in range(0, len(x), 256))
    model.train()
    return correct / len(x)


def train(lr, weight_decay, seed, trial=None):
    torch.manual_seed(seed)
    model = ViT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    val_acc = 0.0
    for epoch in range(EPOCHS):
        order = torch.randperm(len(train_x), generator=generator)
        for i in range(0, len(order) - BATCH + 1, BATCH):
            batch = order[i:i + BATCH]
            loss = nn.functional.cross_entropy(model(train_x[batch]), train_y[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        val_acc = accuracy(model, val_x, val_y)
        if trial is not None:
            trial.report(val_acc, epoch + 1)
            if trial.should_prune():
                raise optuna.TrialPruned()
    return val_acc


def objective(trial):
    return train(trial.suggest_float("lr", 1e-4, 1e-2, log=True),
                 trial.suggest_float("weight_decay", 0.0, 0.1), SEED, trial)


study = optuna.create_study(
    direction="maximize", sampler=optuna.samplers.TPESampler(seed=SEED),
    pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3))
study.optimize(objective, n_trials=TRIALS)
best = study.best_trial
confirmations = [train(best.params["lr"], best.params["weight_decay"], SEED + 1000 + i)
                 for i in range(CONFIRM)]
print(json.dumps({"tool": f"optuna {optuna.__version__}", "seed": SEED, "seconds": time.perf_counter() - START,
                  "best": best.value, "confirmed": statistics.median(confirmations)}))
