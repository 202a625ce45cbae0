"""A run's figures as the trackers must show them, read from the database with sqlite3 alone (no
Trainyard code): every figure at its optimizer step — "step" as recorded at steps, "epoch" at the
step the epoch ended (recorded with it as 'step'), "final" at the run's last step once completed."""


def expected_figures(db, run_id, status):
    """({(scope, key): {step: value}}, {epoch: step}) as the database holds them."""
    figures = {}
    for step, key, value in db.execute(
            "SELECT step, key, value FROM step_metrics WHERE run_id = ?", (run_id,)):
        figures.setdefault(("step", key), {})[step] = value
    epoch_steps = dict(db.execute(
        "SELECT epoch, CAST(value AS INTEGER) FROM epoch_metrics WHERE run_id = ? AND key = 'step'",
        (run_id,)))
    for epoch, key, value in db.execute(
            "SELECT epoch, key, value FROM epoch_metrics WHERE run_id = ? AND key != 'step'",
            (run_id,)):
        figures.setdefault(("epoch", key), {})[epoch_steps[epoch]] = value
    last = max((step for steps in figures.values() for step in steps), default=0)
    if status == "completed":
        for key, value in db.execute(
                "SELECT key, value FROM final_metrics WHERE run_id = ?", (run_id,)):
            figures[("final", key)] = {last: value}
    return figures, epoch_steps
