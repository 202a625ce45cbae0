"""Optuna's multi-objective samplers — TPESampler (MOTPE, its defaults) and NSGAIISampler — on
pareto_quality.cpp's two functions, with the same parameters, budget, seeds and reference points:
one JSON line per (function, sampler, seed), as pareto_quality prints.
Usage: python optuna_pareto.py [TRIALS] [SEEDS]"""
import json
import math
import sys

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
TRIALS = int(sys.argv[1]) if len(sys.argv) > 1 else 60
SEEDS = int(sys.argv[2]) if len(sys.argv) > 2 else 20


def zdt1(trial):
    a = trial.suggest_float("a", 0.0, 1.0)
    b = trial.suggest_float("b", 0.0, 1.0)
    c = trial.suggest_float("c", 0.0, 1.0)
    g = 1 + 9 * (b + c) / 2
    return a, g * (1 - math.sqrt(a / g))


def loss_and_time(trial):
    lr = trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    width = trial.suggest_int("width", 16, 512)
    name = trial.suggest_categorical("name", ["sgd", "adamw", "adam"])
    a, w = math.log10(lr) + 3.0, width / 512.0
    loss = a * a / 4 + (0.0 if name == "adamw" else 0.3) + 1 / (1 + 8 * w)
    return loss, 0.1 + w + (0.0 if name == "sgd" else 0.05)


def hypervolume(points, reference):
    front = [p for p in points
             if not any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in points)]
    area, above = 0.0, reference[1]
    for x, y in sorted(set(front)):
        if x >= reference[0] or y >= above:
            continue
        area += (reference[0] - x) * (above - y)
        above = y
    return area


for name, objective, reference in [("zdt1", zdt1, (1.1, 11.0)),
                                   ("loss-and-time", loss_and_time, (5.0, 1.5))]:
    for label, make in [("tpe", lambda s: optuna.samplers.TPESampler(seed=s)),
                        ("nsga2", lambda s: optuna.samplers.NSGAIISampler(seed=s))]:
        for seed in range(SEEDS):
            study = optuna.create_study(directions=["minimize", "minimize"], sampler=make(seed))
            study.optimize(objective, n_trials=TRIALS)
            points = [tuple(t.values) for t in study.trials if t.values is not None]
            print(json.dumps({"problem": name, "sampler": f"optuna-{optuna.__version__}-{label}",
                              "seed": seed, "hv": hypervolume(points, reference)}))
