"""Optuna's TPESampler (its defaults) on tpe_quality.cpp's three functions, with the same
parameters, budget and seeds: one JSON line per (function, seed), as tpe_quality prints.
Usage: python optuna_quality.py [TRIALS] [SEEDS]"""
import json
import math
import sys

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
TRIALS = int(sys.argv[1]) if len(sys.argv) > 1 else 50
SEEDS = int(sys.argv[2]) if len(sys.argv) > 2 else 30


def quadratic(trial):
    lr = trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    dropout = trial.suggest_float("dropout", 0.0, 0.5)
    name = trial.suggest_categorical("name", ["sgd", "adamw", "adam"])
    a, b = math.log10(lr) + 3.0, (dropout - 0.2) * 10
    return a * a + b * b + (0.0 if name == "adamw" else 1.0)


def branin(trial):
    x = trial.suggest_float("x", -5.0, 10.0)
    y = trial.suggest_float("y", 0.0, 15.0)
    b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    return (y - b * x * x + c * x - 6) ** 2 + 10 * (1 - t) * math.cos(x) + 10


def integers(trial):
    depth = trial.suggest_int("depth", 1, 12)
    width = trial.suggest_int("width", 16, 512)
    act = trial.suggest_categorical("act", ["relu", "gelu", "tanh", "silu"])
    d, w = depth - 6, (width - 384) / 64.0
    return d * d + w * w + (0.0 if act == "gelu" else 2.0)


for name, objective in [("quadratic-log-categorical", quadratic), ("branin", branin),
                        ("integers-and-choice", integers)]:
    for seed in range(SEEDS):
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
        study.optimize(objective, n_trials=TRIALS)
        print(json.dumps({"problem": name, "sampler": f"optuna-{optuna.__version__}-tpe",
                          "seed": seed, "best": study.best_value}))
