// A study (sweep.search) as the store keeps it: its identity, its trials' records, and what
// follows from its outcome — the confirmation runs, which the controller trains and the report
// compares as the variant's runs. Running one is the StudyRunner's (runner/study_runner.h);
// the rules it follows are here and in samplers.h and halving.h, each a pure function of the
// study's settings and the figures stored.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "db/store.h"
#include "reports/report.h"
#include "runner/config/experiment.h"

namespace trainyard {

// The study's key in the store: the experiment, the variant, and a hash of the search settings
// and of the variant's configuration (its first edge, resolved): edit either and it is a new study.
StudyKey study_key(const Experiment& experiment, const Study& study);

// A trial's run, resolved: the variant with the trial's values, named "<variant> trial <i>".
RunSpec trial_run(const Study& study, int64_t trial, const TrialValues& values);
std::string trial_name(const Study& study, int64_t trial);

// The best settings run again: confirm_repeats runs named as the variant, on seeds the file's
// train.seed + 1, + 2, ... (never the seed the trials were chosen on, so their figures are not the
// lucky draw the search picked).
std::vector<RunSpec> confirmation_runs(const Study& study, const TrialValues& best);

// The experiment with each study's confirmation runs added (those whose study has an outcome in
// `store`): the runs the report compares. Studies still running add none.
void add_confirmations(Experiment& experiment, Store& store);

// Each study's first edge (every parameter at its lower end), resolved: what validation builds to
// check the model and data of a variant that has no runs before its study.
std::vector<RunSpec> study_edge_runs(const Experiment& experiment);

// "2 studies of 24 tpe trials (successive halving), then 3 runs of each best": for validate.
std::string describe_studies(const Experiment& experiment);

// The experiment's studies as the report reads them (reports/study.cpp).
std::vector<CurrentStudy> current_studies(const Experiment& experiment);

// A trial's values as stored (a JSON list of numbers), and back.
std::string values_json(const TrialValues& values);
TrialValues parse_values(const std::string& json);

// The figure a trial stands on at a rung of `epochs`: the metric of that epoch's validation — at
// the last rung, the run's end, of the epoch whose weights it kept and tested (kept_figure), the
// figure its own row states — NaN when the run has none (it failed before, or never ran).
double trial_figure(Store& store, int64_t run_id, int64_t epochs, bool last_rung,
                    const std::string& metric);

}  // namespace trainyard
