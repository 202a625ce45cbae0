"""Reads what `trainyard export --mlflow` and `runtime.loggers: [mlflow]` sent to an MLflow tracking
server with MLflow's own client, and compares every value with the database (sqlite3, read
directly): one MLflow run per trained run (found by its tag trainyard.uid), its params, tags,
status and end time (a study's trial its schedule paused: FINISHED, trainyard.status "paused"),
every metric point once at its step, and the report as an artifact. Prints
what it checked; exits 1 naming every difference.

    python check_mlflow.py DB TRACKING_URI
"""
import math
import os
import sqlite3
import sys
import tempfile
from datetime import datetime, timezone

from mlflow.tracking import MlflowClient

from database_figures import expected_figures

db_path, uri = sys.argv[1:3]
db = sqlite3.connect(db_path)
client = MlflowClient(tracking_uri=uri)
problems = []
checked = {"runs": 0, "params": 0, "tags": 0, "metric points": 0, "reports": 0}
STATUS = {"completed": "FINISHED", "failed": "FAILED", "interrupted": "KILLED",
          "running": "RUNNING"}


def millis(timestamp):
    return round(datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ")
                 .replace(tzinfo=timezone.utc).timestamp() * 1000)


runs = db.execute(
    "SELECT runs.id, experiments.name, runs.variant, runs.uid, runs.status, runs.config_hash, "
    "runs.git_revision, runs.device_name, runs.ended_at, runs.error FROM runs JOIN experiments "
    "ON experiments.id = runs.experiment_id WHERE runs.status NOT IN ('queued', 'skipped')"
).fetchall()
if not runs:
    problems.append("the database has no trained runs")
for run_id, experiment, variant, uid, status, config_hash, git, device, ended_at, error in runs:
    paused = status == "interrupted" and error.startswith("paused after epoch")
    name = f"{experiment}/{variant}-run{run_id}"
    found = client.get_experiment_by_name(experiment)
    if found is None:
        problems.append(f"{name}: no MLflow experiment '{experiment}'")
        continue
    held = client.search_runs([found.experiment_id], f"tags.`trainyard.uid` = '{uid}'")
    if len(held) != 1:
        problems.append(f"{name}: {len(held)} MLflow runs with its uid, not 1")
        if not held:
            continue
    mlflow_run = held[0]
    checked["runs"] += 1
    if mlflow_run.info.run_name != f"{variant}-run{run_id}":
        problems.append(f"{name}: named '{mlflow_run.info.run_name}'")
    if mlflow_run.info.status != ("FINISHED" if paused else STATUS[status]):
        problems.append(f"{name}: status {mlflow_run.info.status}, the database {status}")
    if ended_at and mlflow_run.info.end_time != millis(ended_at):
        problems.append(f"{name}: end time {mlflow_run.info.end_time}, the database "
                        f"{millis(ended_at)} ({ended_at})")

    params = dict(db.execute("SELECT key, value FROM run_params WHERE run_id = ?", (run_id,)))
    if mlflow_run.data.params != params:
        differ = sorted(set(params.items()) ^ set(mlflow_run.data.params.items()))[:5]
        problems.append(f"{name}: params differ: {differ}")
    checked["params"] += len(params)

    tags = mlflow_run.data.tags
    want = {"trainyard.uid": uid, "trainyard.variant": variant,
            "trainyard.status": "paused" if paused else status,
            "trainyard.config_hash": config_hash, "trainyard.run": str(run_id)}
    if git:
        want["mlflow.source.git.commit"] = git
    if device:
        want["trainyard.device"] = device
    for key, value in want.items():
        if tags.get(key) != value:
            problems.append(f"{name}: tag {key} is {tags.get(key)!r}, not {value!r}")
        checked["tags"] += 1

    figures, _ = expected_figures(db, run_id, status)
    want_keys = {f"{scope}/{key}" for scope, key in figures}
    got_keys = set(mlflow_run.data.metrics)
    if got_keys != want_keys:
        problems.append(f"{name}: metrics {sorted(got_keys ^ want_keys)} are only on one side")
    for (scope, key), steps in sorted(figures.items()):
        history = client.get_metric_history(mlflow_run.info.run_id, f"{scope}/{key}")
        got = {}
        for point in history:
            if point.step in got:
                problems.append(f"{name}: {scope}/{key} twice at step {point.step}")
            got[point.step] = point.value
        for step, value in steps.items():
            if step not in got:
                problems.append(f"{name}: {scope}/{key} has no point at step {step}")
            elif not (got[step] == value or (math.isnan(value) and math.isnan(got[step]))):
                problems.append(f"{name}: {scope}/{key} at step {step} is {got[step]!r}, the "
                                f"database {value!r}")
            checked["metric points"] += 1
        if set(got) - set(steps):
            problems.append(f"{name}: {scope}/{key} at steps the database lacks: "
                            f"{sorted(set(got) - set(steps))}")

    with tempfile.TemporaryDirectory() as folder:
        try:
            report = client.download_artifacts(mlflow_run.info.run_id, "report.html", folder)
            with open(report, encoding="utf-8") as f:
                html = f.read()
            if variant not in html or "<html" not in html.lower():
                problems.append(f"{name}: report.html does not show variant {variant}")
            checked["reports"] += 1
        except Exception as e:  # noqa: BLE001 — said, whatever MLflow raises
            problems.append(f"{name}: no report.html artifact ({e})")

print("checked:", ", ".join(f"{count} {what}" for what, count in checked.items()))
if problems:
    print("\n".join(problems[:40]))
    sys.exit(1)
