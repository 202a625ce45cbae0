#!/usr/bin/env python3
"""Trainyard's warmed-up samples/s (epoch 2 of bench/gpu/*_throughput.yaml, from the database) next to
PyTorch eager and Lightning Fabric (baselines.json), with Trainyard's ratio to each, as Markdown; then
the host synchronisation check (bench/gpu/sync_check.yaml) run by run.

    python3 bench/gpu/compare.py gpu.db baselines.json
"""
import json
import os
import sqlite3
import sys

THROUGHPUT = {"gpu_vit_b16": "vit_b16", "gpu_distilbert": "distilbert"}
LANGUAGE_MODEL = "gpu_gpt2"
# llm.c's GPT-2 124M reproduction (discussion #481): 10B tokens in about 90 minutes on 8 x A100
# 80GB, so about 230k tokens/s a GPU — derived from the published time, not a measured baseline.
LLMC_TOKENS_PER_S_PER_A100 = 10e9 / (90 * 60) / 8
SYNC_CHECK = "gpu_sync_check"
SMOKE = "gpu_smoke"
MICRO_BATCH = "gpu_micro_batch"
# The studies' full runs on synthetic data of their sizes, and the study's own minutes (A100).
STUDIES = {"gpu_study_vit": ("ViT-B/16, CIFAR-10-sized, bf16-mixed", 6.4),
           "gpu_study_distilbert": ("DistilBERT, IMDB-sized, bf16-mixed", 8.8)}


def runs(db):
    """Every run of the database: experiment, variant, precision, status, error and its metrics."""
    rows = db.execute(
        """SELECT r.id, e.name, r.variant, r.precision, r.status, r.error
           FROM runs r JOIN experiments e ON e.id = r.experiment_id ORDER BY r.id""").fetchall()
    for run_id, experiment, variant, precision, status, error in rows:
        last_epoch = lambda key: (db.execute(
            "SELECT value FROM epoch_metrics WHERE run_id = ? AND key = ? ORDER BY epoch DESC LIMIT 1",
            (run_id, key)).fetchone() or [None])[0]
        final = dict(db.execute("SELECT key, value FROM final_metrics WHERE run_id = ?", (run_id,)).fetchall())
        attributes = dict(db.execute("SELECT key, value FROM run_attributes WHERE run_id = ?", (run_id,)).fetchall())
        yield {"experiment": experiment, "variant": variant, "precision": precision, "status": status,
               "error": error or "", "samples_per_s": last_epoch("epoch_samples_per_s"),
               "train_loss": last_epoch("train_loss"), "test_loss": final.get("test_loss"),
               "mfu": final.get("mfu"), "peak": final.get("peak_memory_bytes"),
               "train_seconds": final.get("train_seconds"), "run_samples_per_s": final.get("samples_per_s"),
               "cuda_graphs": attributes.get("cuda_graphs", ""),
               "micro_batch": attributes.get("micro_batch", "")}


def first_line(text):
    return text.strip().splitlines()[0] if text.strip() else ""


def throughput_table(all_runs, baselines):
    print("| model | batch | precision | CUDA graphs | Trainyard samples/s | MFU | peak memory | eager | Fabric "
          "| vs eager | vs Fabric |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for run in all_runs:
        if run["experiment"] not in THROUGHPUT:
            continue
        model = THROUGHPUT[run["experiment"]]
        batch = int(run["variant"].split("batch_size=")[1].split("/")[0])
        graphs = "compile=cuda-graphs" in run["variant"]
        rows.append(((model, batch, run["precision"], graphs), run))
    for (model, batch, precision, graphs), run in sorted(rows, key=lambda r: r[0]):
        graphs_text = ("yes: " + run["cuda_graphs"] if run["cuda_graphs"] else "yes") if graphs else "no"
        if run["status"] != "completed":
            print(f"| {model} | {batch} | {precision} | {graphs_text} | {run['status']}: {first_line(run['error'])} "
                  "| | | | | | |")
            continue
        samples = run["samples_per_s"]
        eager = baselines.get(("eager", model, batch, precision))
        fabric = baselines.get(("fabric", model, batch, precision))
        cell = lambda v: f"{v:.1f}" if v else "—"
        ratio = lambda v: f"{samples / v:.2f}x" if v else "—"
        mfu_text = f"{100 * run['mfu']:.1f}%" if run["mfu"] else "—"
        peak_text = f"{run['peak'] / 2**30:.1f} GiB" if run["peak"] else "—"
        print(f"| {model} | {batch} | {precision} | {graphs_text} | {samples:.1f} | {mfu_text} | {peak_text} "
              f"| {cell(eager)} | {cell(fabric)} | {ratio(eager)} | {ratio(fabric)} |")


def language_model_table(all_runs):
    measured = [run for run in all_runs if run["experiment"] == LANGUAGE_MODEL]
    if not measured:
        return
    print()
    print("GPT-2 124M, context 1024, bf16-mixed (bench/gpu/gpt2_throughput.yaml); llm.c's reference is "
          f"about {LLMC_TOKENS_PER_S_PER_A100 / 1e3:.0f}k tokens/s per A100 (derived from its 90-minute run)")
    print()
    print("| batch | CUDA graphs | tokens/s | MFU | peak memory | vs llm.c per A100 |")
    print("|---:|---|---:|---:|---:|---:|")
    for run in measured:
        batch = int(run["variant"].split("batch_size=")[1].split("/")[0])
        graphs = "yes" if "compile=cuda-graphs" in run["variant"] else "no"
        if run["status"] != "completed" or not run["samples_per_s"]:
            print(f"| {batch} | {graphs} | {run['status']}: {first_line(run['error'])} | | | |")
            continue
        tokens = run["samples_per_s"] * 1024
        mfu_text = f"{100 * run['mfu']:.1f}%" if run["mfu"] else "—"
        peak_text = f"{run['peak'] / 2**30:.1f} GiB" if run["peak"] else "—"
        print(f"| {batch} | {graphs} | {tokens:,.0f} | {mfu_text} | {peak_text} "
              f"| {tokens / LLMC_TOKENS_PER_S_PER_A100:.2f}x |")


def sync_check_table(all_runs):
    checked = [run for run in all_runs if run["experiment"] == SYNC_CHECK]
    if not checked:
        return
    print("\n## Host synchronisation inside training steps (runtime.sync_debug: error)\n")
    print("Each -graphs variant trains exactly as its -eager one: their losses should agree to a few digits.\n")
    print("| variant | host synchronisations | CUDA graphs | train loss | test loss |")
    print("|---|---|---|---:|---:|")
    for run in checked:
        if run["status"] == "completed":
            result = "none: the run completed"
        else:  # the error's first line names the check; the frames after it say where
            result = f"{run['status']}: " + run["error"].strip().replace("\n", "<br>")
        loss = lambda v: f"{v:.6f}" if v is not None else "—"
        print(f"| {run['variant']} | {result} | {run['cuda_graphs'] or '—'} | {loss(run['train_loss'])} "
              f"| {loss(run['test_loss'])} |")


def smoke_table(all_runs):
    smoke = [run for run in all_runs if run["experiment"] == SMOKE]
    if not smoke:
        return
    completed = sum(run["status"] == "completed" for run in smoke)
    print(f"## Smoke test: {completed} of {len(smoke)} runs completed "
          "(every precision, eager and CUDA graphs, sync_debug: error)\n")
    print("| variant | status | CUDA graphs | samples/s | test loss |")
    print("|---|---|---|---:|---:|")
    for run in smoke:
        status = run["status"] if run["status"] == "completed" else f"{run['status']}: {first_line(run['error'])}"
        samples = f"{run['samples_per_s']:.1f}" if run["samples_per_s"] else "—"
        loss = f"{run['test_loss']:.4f}" if run["test_loss"] is not None else "—"
        print(f"| {run['variant']} | {status} | {run['cuda_graphs'] or '—'} | {samples} | {loss} |")
    print()


def micro_batch_table(all_runs):
    checked = [run for run in all_runs if run["experiment"] == MICRO_BATCH]
    if not checked:
        return
    print("\n## Automatic micro-batching (bench/gpu/micro_batch.yaml: GPT-2, 2 blocks, batch 512)\n")
    print("A batch CUDA's allocator cannot hold whole is halved until it fits; with CUDA graphs the "
          "graph is captured at the size the eager warm-up steps settled on.\n")
    print("| variant | status | micro-batch | CUDA graphs | train loss | peak memory |")
    print("|---|---|---|---|---:|---:|")
    for run in checked:
        status = run["status"] if run["status"] == "completed" else f"{run['status']}: {first_line(run['error'])}"
        loss = f"{run['train_loss']:.4f}" if run["train_loss"] is not None else "—"
        peak = f"{run['peak'] / 2**30:.1f} GiB" if run["peak"] else "—"
        print(f"| {run['variant']} | {status} | {run['micro_batch'] or '—'} | {run['cuda_graphs'] or '—'} "
              f"| {loss} | {peak} |")
    print()


def study_table(all_runs):
    runs_of_studies = [run for run in all_runs if run["experiment"] in STUDIES]
    if not runs_of_studies:
        return
    print("\n## The studies' full runs (3 epochs, synthetic data of the datasets' sizes)\n")
    print("| run | training time | samples/s | MFU | peak memory | CUDA graphs | the study (A100) |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for run in runs_of_studies:
        title, study_minutes = STUDIES[run["experiment"]]
        if run["status"] != "completed":
            print(f"| {title} | {run['status']}: {first_line(run['error'])} | | | | | {study_minutes} min |")
            continue
        mfu_text = f"{100 * run['mfu']:.1f}%" if run["mfu"] else "—"
        peak_text = f"{run['peak'] / 2**30:.1f} GiB" if run["peak"] else "—"
        print(f"| {title} | {run['train_seconds'] / 60:.2f} min | {run['run_samples_per_s']:.1f} | {mfu_text} "
              f"| {peak_text} | {run['cuda_graphs'] or '—'} | {study_minutes} min |")


def main():
    db = sqlite3.connect(sys.argv[1])
    all_runs = list(runs(db))
    baselines = {}
    have_baselines = len(sys.argv) > 2 and os.path.exists(sys.argv[2])  # none if that stage did not run
    for r in json.load(open(sys.argv[2])) if have_baselines else []:
        baselines[(r["framework"], r["model"], r["batch"], r["precision"])] = r.get("samples_per_s")
    smoke_table(all_runs)
    micro_batch_table(all_runs)
    throughput_table(all_runs, baselines)
    language_model_table(all_runs)
    sync_check_table(all_runs)
    study_table(all_runs)


if __name__ == "__main__":
    main()
