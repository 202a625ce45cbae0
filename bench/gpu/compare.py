#!/usr/bin/env python3
"""Trainyard's warmed-up samples/s (epoch 2 of bench/gpu/*_throughput.yaml, from the database) next to
PyTorch eager and Lightning Fabric (baselines.json), with Trainyard's ratio to each, as Markdown.

    python3 bench/gpu/compare.py gpu.db baselines.json
"""
import json
import sqlite3
import sys

MODELS = {"gpu_vit_b16": "vit_b16", "gpu_distilbert": "distilbert"}


def trainyard_rows(db_path):
    db = sqlite3.connect(db_path)
    rows = db.execute(
        """SELECT e.name, r.variant, r.precision, r.config_yaml,
                  (SELECT value FROM epoch_metrics m WHERE m.run_id = r.id AND m.key = 'epoch_samples_per_s'
                   ORDER BY epoch DESC LIMIT 1),
                  (SELECT value FROM final_metrics f WHERE f.run_id = r.id AND f.key = 'mfu'),
                  (SELECT value FROM final_metrics f WHERE f.run_id = r.id AND f.key = 'peak_memory_bytes'),
                  r.status, r.error
           FROM runs r JOIN experiments e ON e.id = r.experiment_id ORDER BY r.id""").fetchall()
    out = {}
    for experiment, variant, precision, config, samples, mfu, peak, status, error in rows:
        batch = int(variant.split("batch_size=")[1].split("/")[0])
        graphs = "compile=cuda-graphs" in variant
        out[(MODELS.get(experiment, experiment), batch, precision, graphs)] = (samples, mfu, peak, status, error)
    return out


def main():
    ours = trainyard_rows(sys.argv[1])
    baselines = {}
    for r in json.load(open(sys.argv[2])) if len(sys.argv) > 2 else []:
        baselines[(r["framework"], r["model"], r["batch"], r["precision"])] = r["samples_per_s"]
    print("| model | batch | precision | CUDA graphs | Trainyard samples/s | MFU | peak memory | eager | Fabric | vs eager | vs Fabric |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (model, batch, precision, graphs), (samples, mfu, peak, status, error) in sorted(ours.items()):
        graphs_text = "yes" if graphs else "no"
        if status != "completed":
            print(f"| {model} | {batch} | {precision} | {graphs_text} | {status}: {error} | | | | | | |")
            continue
        eager = baselines.get(("eager", model, batch, precision))
        fabric = baselines.get(("fabric", model, batch, precision))
        cell = lambda v: f"{v:.1f}" if v else "—"
        ratio = lambda v: f"{samples / v:.2f}x" if v else "—"
        mfu_text = f"{100 * mfu:.1f}%" if mfu else "—"
        peak_text = f"{peak / 2**30:.1f} GiB" if peak else "—"
        print(f"| {model} | {batch} | {precision} | {graphs_text} | {samples:.1f} | {mfu_text} | {peak_text} | {cell(eager)} | "
              f"{cell(fabric)} | {ratio(eager)} | {ratio(fabric)} |")


if __name__ == "__main__":
    main()
