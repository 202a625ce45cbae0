// An experiment file, read, validated and expanded into the runs it describes.
//
// Layering, lowest first: option defaults < files named by `extends:` (in order) < the file <
// the sweep variant's `set:` < `--set key=value` on the command line. Validation happens before
// anything runs and reports every problem at once (ConfigError); nothing is written on failure.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "components/plugin_loader.h"
#include "reports/report_options.h"
#include "runner/config/run_spec.h"
#include "runner/config/search_space.h"
#include "trainyard/registry.h"

namespace trainyard {

// A variant's study (sweep.search, docs/search.md): its trials are the variant with each trial's
// values set; its confirmations, the best trial's settings on fresh seeds. The controller runs it
// (runner/search/study.h); the runs it will train cannot be listed before it has.
struct Study {
  std::string variant;
  SearchSettings search;
  // The variant with `values` set, as run `name`'s repeat `repeat`, trained with `seed` when given
  // (else the file's): resolved as the file's own variants are. Problems go to `found`.
  std::function<RunSpec(const TrialValues& values, const std::string& name, int64_t repeat,
                        std::optional<int64_t> seed, Diagnostics& found,
                        std::vector<std::string>& notes)>
      resolve;
};

struct Experiment {
  std::string name;
  std::string description;
  std::string file;
  ReportOptions report;
  std::vector<RunSpec> runs;  // by variant, then repeat: a variant's place in the file
  // sweep.search: one study per variant, whose variants then have no runs here until their
  // studies have chosen their settings (runner/search/study.h adds the confirmations).
  std::vector<Study> studies{};
  // sweep.order: interleaved (the default) runs the repeats in rounds — every variant once, then
  // again — so that a machine's drift through the night falls on every variant alike and the
  // report can compare them round by round; grouped runs each variant's repeats back to back.
  bool interleaved = true;
  // The order the batch trains `runs` in: indices into `runs`. Interleaved, round r runs every
  // variant's repeat r, starting one variant further each round (0 1 2, 1 2 0, 2 0 1, ...).
  std::vector<size_t> run_order() const;
  // "file:5:24: note: ...": what validation translated and thinks the user should know (a
  // Lightning name's note); each once. The commands print them.
  std::vector<std::string> notes{};
};

// At most this many runs per experiment (and per batch) unless `--max-runs` says otherwise: a
// generated grid that multiplies out to millions is a mistake to catch before anything is queued.
inline constexpr int64_t kDefaultMaxRuns = 5000;

// Reads `file` (following `extends:`), applies `overrides` ("train.epochs=1"), loads the plugins
// it names (`plugins:`, and the loader's command-line ones) into `plugins`, validates against
// their registry and expands the sweep. Throws ConfigError listing every problem. With a bare
// `registry`, an experiment that names a plugin is an error.
Experiment load_experiment(const std::string& file, const std::vector<std::string>& overrides,
                           PluginLoader& plugins, int64_t max_runs = kDefaultMaxRuns);
Experiment load_experiment(const std::string& file, const std::vector<std::string>& overrides,
                           const Registry& registry, int64_t max_runs = kDefaultMaxRuns);

// The experiment files of a batch (`trainyard run a.yaml b.yaml ...`), every one validated before
// anything runs. Throws one UserError listing every problem of every file (and a name or file given
// twice), each labelled with its file.
std::vector<Experiment> load_batch(const std::vector<std::string>& files,
                                   const std::vector<std::string>& overrides, PluginLoader& plugins,
                                   int64_t max_runs = kDefaultMaxRuns);
std::vector<Experiment> load_batch(const std::vector<std::string>& files,
                                   const std::vector<std::string>& overrides,
                                   const Registry& registry, int64_t max_runs = kDefaultMaxRuns);

// Re-reads the resolved config of one run (RunSpec::config_yaml), as a worker process would,
// loading the plugins it records. A plugin whose bytes are no longer those the run was configured
// with (rebuilt under a running batch) is a UserError naming it: its components would not be the
// configuration's.
RunSpec parse_resolved_run(const std::string& config_yaml, const std::string& variant,
                           PluginLoader& plugins);
RunSpec parse_resolved_run(const std::string& config_yaml, const std::string& variant,
                           const Registry& registry);

}  // namespace trainyard
