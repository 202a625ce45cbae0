"""Reads the studies (sweep.search) that `trainyard export --mlflow` and `runtime.loggers: [mlflow]`
sent to an MLflow tracking server with MLflow's own client, and compares them with the database
(sqlite3, read directly): each study one parent run, found by its tag trainyard.uid, with its
trials and decisions counted, its last decision and best trial as tags, and every decision in its
artifact decisions.json; each trial's run a child of it (mlflow.parentRunId) tagged with its study,
trial and the rung it reached; the confirmation runs no one's children. A study that ended with no
best trial (every one failed or diverged) is FAILED, with no best tags. Exits 1 naming every
difference.

    python check_mlflow_study.py DB TRACKING_URI
"""
import json
import sys
import tempfile

from mlflow.tracking import MlflowClient

db_path, uri = sys.argv[1:3]
import sqlite3  # noqa: E402

db = sqlite3.connect(db_path)
client = MlflowClient(tracking_uri=uri)
problems = []
checked = {"studies": 0, "trials": 0, "decisions": 0}

studies = db.execute("SELECT DISTINCT experiment, study, study_hash FROM study_trials").fetchall()
if not studies:
    problems.append("the database has no studies")
for experiment, study, study_hash in studies:
    name = f"{experiment}/{study}"
    found = client.get_experiment_by_name(experiment)
    if found is None:
        problems.append(f"{name}: no MLflow experiment '{experiment}'")
        continue
    uid = f"study/{experiment}/{study}/{study_hash}"
    parents = client.search_runs([found.experiment_id], f"tags.`trainyard.uid` = '{uid}'")
    if len(parents) != 1:
        problems.append(f"{name}: {len(parents)} MLflow runs with the study's uid, not 1")
        continue
    parent = parents[0]
    checked["studies"] += 1
    tags = parent.data.tags
    trials = db.execute("SELECT trial, run_id, epochs FROM study_trials WHERE experiment = ? AND "
                        "study = ? AND study_hash = ? ORDER BY trial",
                        (experiment, study, study_hash)).fetchall()
    decisions = db.execute("SELECT decision, trial, rung, epochs, evidence, promoted FROM "
                           "study_decisions WHERE experiment = ? AND study = ? AND study_hash = ? "
                           "ORDER BY decision", (experiment, study, study_hash)).fetchall()
    outcome = db.execute("SELECT best_trial, settings FROM study_outcomes WHERE experiment = ? AND "
                         "study = ? AND study_hash = ?", (experiment, study, study_hash)).fetchone()
    want = {"trainyard.kind": "study", "trainyard.study": study,
            "trainyard.trials": str(len(trials)), "trainyard.decisions": str(len(decisions)),
            "trainyard.status": "searching"}
    ended_with_best = outcome is not None and outcome[0] is not None
    if ended_with_best:
        want["trainyard.status"] = "ended"
        want["trainyard.best_trial"] = str(outcome[0])
        want["trainyard.best_settings"] = outcome[1]
    elif outcome:
        want["trainyard.status"] = "ended with no best trial"
        for key in ("trainyard.best_trial", "trainyard.best_settings", "trainyard.best_figure"):
            if key in tags:
                problems.append(f"{name}: no best trial, yet the parent has tag {key}")
    for key, value in want.items():
        if tags.get(key) != value:
            problems.append(f"{name}: parent tag {key} is {tags.get(key)!r}, not {value!r}")
    if parent.info.run_name != f"{study} study":
        problems.append(f"{name}: the parent is named {parent.info.run_name!r}")
    status = "FINISHED" if ended_with_best else "FAILED" if outcome else "RUNNING"
    if parent.info.status != status:
        problems.append(f"{name}: the parent is {parent.info.status}, not {status}")
    with tempfile.TemporaryDirectory() as folder:
        try:
            path = client.download_artifacts(parent.info.run_id, "decisions.json", folder)
            with open(path, encoding="utf-8") as f:
                sent = json.load(f)
            for row, got in zip(decisions, sent):
                decision, trial, rung, epochs, evidence, promoted = row
                if (got["decision"], got["trial"], got["rung"], got["epochs"]) != (
                        decision, trial, rung, epochs) or got["evidence"] != json.loads(
                        evidence) or got["promoted"] != json.loads(promoted):
                    problems.append(f"{name}: decision {decision} sent as {got}")
                checked["decisions"] += 1
            if len(sent) != len(decisions):
                problems.append(f"{name}: {len(sent)} decisions sent, the database {len(decisions)}")
        except Exception as e:  # noqa: BLE001 — said, whatever MLflow raises
            problems.append(f"{name}: no decisions.json artifact ({e})")

    decision_epochs = sorted({row[3] for row in decisions})
    for trial, run_id, epochs in trials:
        uid = db.execute("SELECT uid FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        held = client.search_runs([found.experiment_id], f"tags.`trainyard.uid` = '{uid}'")
        if len(held) != 1:
            problems.append(f"{name} trial {trial}: {len(held)} MLflow runs, not 1")
            continue
        child = held[0].data.tags
        rung = sum(1 for e in decision_epochs if e < epochs)
        for key, value in {"mlflow.parentRunId": parent.info.run_id, "trainyard.study": study,
                           "trainyard.trial": str(trial), "trainyard.rung": str(rung)}.items():
            if child.get(key) != value:
                problems.append(f"{name} trial {trial}: tag {key} is {child.get(key)!r}, not "
                                f"{value!r}")
        if held[0].info.status == "KILLED":
            problems.append(f"{name} trial {trial}: KILLED (a paused trial is not killed)")
        checked["trials"] += 1

    # The confirmation runs (named as the variant) are no study's children.
    for (uid,) in db.execute("SELECT runs.uid FROM runs JOIN experiments ON experiments.id = "
                             "runs.experiment_id WHERE experiments.name = ? AND runs.variant = ? "
                             "AND runs.status = 'completed'", (experiment, study)):
        for run in client.search_runs([found.experiment_id], f"tags.`trainyard.uid` = '{uid}'"):
            if "mlflow.parentRunId" in run.data.tags or "trainyard.trial" in run.data.tags:
                problems.append(f"{name}: confirmation run {uid} is tagged as a trial")

print("checked:", ", ".join(f"{count} {what}" for what, count in checked.items()))
if problems:
    print("\n".join(problems[:40]))
    sys.exit(1)
