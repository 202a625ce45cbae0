// Command-line parsing shared by the subcommands (Boost.Program_options).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "runner/config/experiment.h"
#include "runner/slurm.h"

namespace trainyard {

// Parses `args` into `vm`. Prints the help and returns false for --help; throws UserError
// (naming the bad option and how to get help) on anything it does not understand. `arguments`
// declares what `positional` names (the FILE... of `trainyard run`): parsed, but left out of the
// help, whose first line already shows them.
bool parse_command_line(const std::vector<std::string>& args,
                        const boost::program_options::options_description& options,
                        const boost::program_options::positional_options_description& positional,
                        boost::program_options::variables_map& vm,
                        const boost::program_options::options_description& arguments = {});

// A command's options, starting with --help: what every command's parser starts from. `usage` is
// the first line of its help.
boost::program_options::options_description command_options(const std::string& usage);

// The options several commands share, declared once (name, default and help text).
// --db FILE: the database. Sets `db_path` to the default (default_database_path()) first; `help`
// replaces the standard text where a command says more.
void add_database_option(boost::program_options::options_description& options, std::string& db_path,
                         const char* help = nullptr);
// --experiment/-e NAME: the runs of one experiment.
void add_experiment_option(boost::program_options::options_description& options,
                           std::string& experiment, const char* help = "only this experiment");
// --set KEY=VALUE (repeatable): an override applied to every experiment file.
void add_override_option(boost::program_options::options_description& options,
                         std::vector<std::string>& overrides);
// --plugin PATH (repeatable): a plugin library loaded before anything validates, as if every
// experiment file named it under `plugins:`.
void add_plugin_option(boost::program_options::options_description& options,
                       std::vector<std::string>& plugins);
// --max-runs N: the largest batch a command accepts (kDefaultMaxRuns unless given).
void add_max_runs_option(boost::program_options::options_description& options, int64_t& max_runs);
// Throws UserError when --max-runs is below 1; `command` names the command in the message.
void check_max_runs(const std::string& command, int64_t max_runs);

// A smoke test's selection of a batch's runs: `--only PATTERN` (variant names or globs, repeatable
// or comma-separated) and `--repeats N` (sweep.repeats for this invocation). The runs it leaves
// are the file's own configurations, so the report shows them as a subset, at fewer repeats.
struct RunSelection {
  std::vector<std::string> only;
  int64_t repeats = 0;           // 0: the files'; else at most their sweep.repeats
  std::string describe() const;  // "--only fp32 --repeats 1", "" for none
};
void add_selection_options(boost::program_options::options_description& options,
                           RunSelection& selection);
// Keeps the first --repeats repeats of each variant (the seeds the file's first repeats train
// with: the same configurations) and the runs whose variant (or experiment/variant) matches a
// --only pattern, dropping experiments left without any. UserError for --repeats beyond the
// file's sweep.repeats, and for a pattern that matches nothing (with the batch's variants).
void select_runs(std::vector<Experiment>& experiments, const RunSelection& selection);

// Prints each experiment's notes (Experiment::notes: what validation translated) to stderr.
void print_notes(const std::vector<Experiment>& experiments);

// The default database: $TRAINYARD_DB, else runs/trainyard.db under the current folder.
std::string default_database_path();

// The folder of the runs' logs and files for the database at `db_path`: logs/ beside it, absolute.
std::string log_dir_of(const std::string& db_path);

// --device-memory's bytes ("80GiB"); nullopt when not given; UserError naming `command` when the
// text is not a size.
std::optional<double> device_memory_option(const std::string& command, const std::string& text);

// The database a reading command (runs, status, report) opens, its Slurm runs' records collected
// first; one that cannot be written (a read-only file or file system: an archive of last month's
// results) is read as it is, uncollected, and stderr says so. UserError when there is none.
struct StoreToRead {
  std::unique_ptr<Store> store;
  CollectSummary collected;
};
StoreToRead open_store_to_read(const std::string& db_path);

}  // namespace trainyard
