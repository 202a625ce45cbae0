"""Reads `trainyard export`'s output with the ecosystem's own readers and compares every value with
the database (sqlite3, read directly): TensorBoard's EventAccumulator for the scalars, the hparams
plugin's protocol buffers for each run's settings and ending, Python's csv module for Lightning's
layout. Prints what it checked; exits 1 naming every difference.

    python check_exports.py DB TENSORBOARD_DIR CSV_DIR   (CSV_DIR "-": no CSV to check)
"""
import csv
import math
import os
import sqlite3
import struct
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from database_figures import expected_figures

db_path, tensorboard_dir, csv_dir = sys.argv[1:4]
db = sqlite3.connect(db_path)
problems = []
checked = {"runs": 0, "scalars": 0, "hparams": 0, "csv values": 0}


def as_float32(value):  # what a scalar's simple_value holds
    return struct.unpack("f", struct.pack("f", value))[0]


def check_tensorboard(run_id, name, figures, status):
    folder = os.path.join(tensorboard_dir, name)
    files = [f for f in os.listdir(folder) if f.startswith("events.out.tfevents.")]
    if len(files) != 1:
        problems.append(f"{folder}: {len(files)} event files, not 1")
    events = EventAccumulator(folder, size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    got = {}
    for tag in events.Tags()["scalars"]:
        scalars = events.Scalars(tag)
        got[tag] = {s.step: s.value for s in scalars}
        if len(scalars) != len(got[tag]):
            problems.append(f"{name} {tag}: a step written twice")
    want = {f"{scope}/{key}": steps for (scope, key), steps in figures.items()}
    if set(got) != set(want):
        problems.append(f"{name}: tags {sorted(set(got) ^ set(want))} differ")
    for tag in set(got) & set(want):
        expected = {step: as_float32(value) for step, value in want[tag].items()}
        if got[tag] != expected:
            problems.append(f"{name} {tag}: {got[tag]} != {expected}")
        checked["scalars"] += len(got[tag])

    content = events.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(
        content["_hparams_/session_start_info"]).session_start_info
    params = dict(db.execute("SELECT key, value FROM run_params WHERE run_id = ?", (run_id,)))
    if set(start.hparams) != set(params):
        problems.append(f"{name}: hparams {sorted(set(start.hparams) ^ set(params))} differ")
    for key, value in start.hparams.items():
        kind = value.WhichOneof("kind")
        text = params.get(key)
        ok = (kind == "number_value" and text is not None and float(text) == value.number_value) or \
             (kind == "bool_value" and text == ("true" if value.bool_value else "false")) or \
             (kind == "string_value" and text == value.string_value)
        if not ok:
            problems.append(f"{name}: hparam {key} is {value} in the file, {text!r} in the database")
        checked["hparams"] += 1
    end = plugin_data_pb2.HParamsPluginData.FromString(
        content["_hparams_/session_end_info"]).session_end_info
    want_status = {"completed": 1, "failed": 2}.get(status, 0)
    if end.status != want_status:
        problems.append(f"{name}: session ended with status {end.status}, the run is {status}")


def check_csv(run_id, experiment, figures, epoch_steps, config_yaml):
    folder = os.path.join(csv_dir, experiment, f"version_{run_id}")
    with open(os.path.join(folder, "metrics.csv"), newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        rows = list(reader)
    if header != sorted(header):
        problems.append(f"{folder}: the header is not sorted, as Lightning's is: {header}")
    both = {key for scope, key in figures if scope == "step"} & \
           {key for scope, key in figures if scope == "epoch"}
    want = {}
    for (scope, key), steps in figures.items():
        column = f"{key}_{scope}" if scope != "final" and key in both else key
        for step, value in steps.items():
            want[(column, step)] = value
    got = {}
    for row in rows:
        step = int(row["step"])
        for column, text in row.items():
            if column in ("step", "epoch") or text == "":
                continue
            if (column, step) in got:
                problems.append(f"{folder}: {column} at step {step} twice")
            got[(column, step)] = float(text)
    if got.keys() != want.keys():
        problems.append(f"{folder}: values {sorted(set(got) ^ set(want))[:5]} differ")
    for place in got.keys() & want.keys():
        if got[place] != want[place] and not (math.isnan(got[place]) and math.isnan(want[place])):
            problems.append(f"{folder}: {place} is {got[place]}, the database {want[place]}")
        checked["csv values"] += 1
    epochs = {int(row["epoch"]) for row in rows if row["epoch"] != ""}
    if epochs != {epoch - 1 for epoch in epoch_steps}:
        problems.append(f"{folder}: epochs {sorted(epochs)}, the database {sorted(epoch_steps)}")
    with open(os.path.join(folder, "hparams.yaml")) as f:
        if f.read() != config_yaml:
            problems.append(f"{folder}/hparams.yaml is not the run's configuration")


for run_id, experiment, variant, status, config_yaml in db.execute(
        "SELECT r.id, e.name, r.variant, r.status, r.config_yaml FROM runs r "
        "JOIN experiments e ON e.id = r.experiment_id WHERE r.status NOT IN ('queued', 'skipped')"):
    figures, epoch_steps = expected_figures(db, run_id, status)
    # A study's trial is in its study's folder (the first study naming the run, as the product
    # picks it).
    trial = db.execute("SELECT study, trial FROM study_trials WHERE run_id = ? ORDER BY "
                       "experiment, study, study_hash, trial LIMIT 1", (run_id,)).fetchone()
    folder = f"{trial[0]}-study/trial{trial[1]}-run{run_id}" if trial else f"{variant}-run{run_id}"
    check_tensorboard(run_id, os.path.join(experiment, folder), figures, status)
    if csv_dir != "-":
        check_csv(run_id, experiment, figures, epoch_steps, config_yaml)
    checked["runs"] += 1

print("checked: " + ", ".join(f"{count} {what}" for what, count in checked.items()))
for problem in problems:
    print("problem: " + problem)
sys.exit(1 if problems or checked["runs"] == 0 else 0)
