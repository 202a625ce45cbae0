// The subcommands of `trainyard`, as a table: name, one-line summary, handler. `trainyard help`
// and the usage text are generated from it. Each handler parses its own options and returns the
// process exit code; errors it cannot handle propagate to main().
//
// Two executables share the table. `trainyard` holds the commands that build no component (runs,
// status, rm, collect, cancel) and starts without LibTorch; for the others it links
// engine_forward.cpp, whose handlers exec `trainyard-engine` beside it with the same arguments.
// `trainyard-engine` links every handler, the components and LibTorch.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/store.h"
#include "runner/slurm.h"

namespace trainyard {

struct Command {
  std::string name;
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> handler;
};

const std::vector<Command>& commands();

// The executable that runs the commands resolving components, beside `trainyard`.
inline constexpr const char* kEngineExecutable = "trainyard-engine";

int run_command(const std::vector<std::string>& args);
// When a batch ends: each experiment's answer and each variant's verdict against its baseline, as
// the report gives them, over every run of the configurations the batch ran (component_commands).
struct Experiment;
void print_verdicts(Store& store, const std::vector<Experiment>& experiments);
int validate_command(const std::vector<std::string>& args);
// What run and submit start from (run_command.cpp), writing nothing: the --plugin libraries
// loaded, the batch's files validated (load_batch), their notes printed, the selection applied and
// each run's model checked against its weights and data (check_models_fit, its notes printed).
// Throws ConfigError or
// UserError for the first file that fails.
struct RunSelection;
std::vector<Experiment> load_checked_batch(const std::vector<std::string>& files,
                                           const std::vector<std::string>& overrides,
                                           const std::vector<std::string>& plugins,
                                           int64_t max_runs, const RunSelection& selection);
// `run --dry-run` and `validate --memory` (component_commands.cpp): what a variant will hold in
// memory per rank (forecast_memory); with `device_bytes`, whether it fits and what would.
struct RunSpec;
void print_memory_forecast(const RunSpec& run, std::optional<double> device_bytes);
int list_command(const std::vector<std::string>& args);
int runs_command(const std::vector<std::string>& args);
int status_command(const std::vector<std::string>& args);
int report_command(const std::vector<std::string>& args);
int rm_command(const std::vector<std::string>& args);
int worker_command(const std::vector<std::string>& args);
int submit_command(const std::vector<std::string>& args);
int collect_command(const std::vector<std::string>& args);
int export_command(const std::vector<std::string>& args);
int tokenize_command(const std::vector<std::string>& args);
int sample_command(const std::vector<std::string>& args);
int cancel_command(const std::vector<std::string>& args);
int slurm_task_command(const std::vector<std::string>& args);
int slurm_study_command(const std::vector<std::string>& args);

}  // namespace trainyard
