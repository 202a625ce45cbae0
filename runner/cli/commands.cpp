#include "runner/cli/commands.h"

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "common/metrics.h"
#include "common/text.h"
#include "runner/cli/options.h"
#include "runner/slurm.h"
#include "trainyard/error.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"run", "validate an experiment file and train its runs into the database", run_command},
      {"validate", "check experiment files and report every problem at once", validate_command},
      {"list", "list the registered components and their options", list_command},
      {"runs", "list the runs in the database", runs_command},
      {"status", "what a batch is doing now (from another terminal)", status_command},
      {"report", "write the results as an HTML, Markdown or CSV report", report_command},
      {"rm", "remove runs (by id, experiment, variant or status) with their files", rm_command},
      {"submit", "submit the runs to a Slurm cluster as job arrays, then exit", submit_command},
      {"collect", "take the records of Slurm runs into the database", collect_command},
      {"export",
       "send the runs to an MLflow server, or write them as TensorBoard event files or "
       "Lightning's CSV layout",
       export_command},
      {"cancel", "cancel a Slurm submission", cancel_command},
      {"tokenize", "text files to the token files a language model trains on", tokenize_command},
      {"sample", "text a language-model run writes, from a prompt", sample_command},
      {"worker", "one rank of a run (internal: started by `trainyard run`)", worker_command},
      {"slurm-task", "one run of a Slurm array (internal: started by a submission's script)",
       slurm_task_command},
      {"slurm-study", "one study of a Slurm submission (internal: started by its script)",
       slurm_study_command},
  };
  return table;
}

int runs_command(const std::vector<std::string>& args) {
  po::options_description options = command_options("trainyard runs [options]");
  std::string db_path, experiment;
  add_database_option(options, db_path);
  add_experiment_option(options, experiment);
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  const StoreToRead open = open_store_to_read(db_path);  // Slurm runs' records collected first
  Store& store = *open.store;
  if (!experiment.empty()) store.experiment_named(experiment);  // UserError as `report -e` gives
  auto runs = store.runs(experiment);
  if (runs.empty()) {
    fmt::print("no runs{}\n", experiment.empty() ? "" : " for experiment '" + experiment + "'");
    return kExitOk;
  }
  fmt::print("{:>5}  {:<20} {:<24} {:<11} {:<10} {:>10} {:>9}  {}\n", "id", "experiment", "variant",
             "status", "precision", "train time", "test", "ended");
  for (const auto& run : runs) {
    auto metrics = store.final_metrics(run.id);
    auto value = [&](const char* key, const std::string& fallback) {
      auto it = metrics.find(key);
      return it == metrics.end() ? fallback : format_metric(*find_metric(key), it->second);
    };
    std::string status = to_string(run.status);
    if (store.is_lost(run))  // as `trainyard status` shows it
      status = to_string(RunStatus::interrupted);
    if (run.failure != FailureClass::none && run.failure != FailureClass::interrupted)
      status = run.failure == FailureClass::not_started ? "not started" : to_string(run.failure);
    fmt::print("{:>5}  {:<20} {:<24} {:<11} {:<10} {:>10} {:>9}  {}\n", run.id, run.experiment,
               run.variant, status, run.precision, value(metric::kTrainSeconds, "-"),
               // A classifier's accuracy, or a language model's perplexity.
               metrics.count(metric::kTestPerplexity) ? "ppl " + value(metric::kTestPerplexity, "-")
                                                      : value(metric::kTestAcc, "-"),
               run.ended_at);
    if (!run.error.empty()) fmt::print("       {}\n", split(run.error, '\n').front());
  }
  return kExitOk;
}

}  // namespace trainyard
