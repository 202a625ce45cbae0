#include "runner/cli/options.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "common/text.h"
#include "runner/config/experiment.h"
#include "trainyard/error.h"

namespace trainyard {

bool parse_command_line(const std::vector<std::string>& args,
                        const boost::program_options::options_description& options,
                        const boost::program_options::positional_options_description& positional,
                        boost::program_options::variables_map& vm,
                        const boost::program_options::options_description& arguments) {
  namespace po = boost::program_options;
  po::options_description everything;
  everything.add(options).add(arguments);
  try {
    po::store(po::command_line_parser(args).options(everything).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(fmt::format("{}\n{}", e.what(), [&] {
      std::ostringstream text;
      text << options;
      return text.str();
    }()));
  }
  if (vm.count("help")) {
    std::cout << options;
    return false;
  }
  return true;
}

namespace po = boost::program_options;

po::options_description command_options(const std::string& usage) {
  po::options_description options(usage);
  options.add_options()("help,h", "show this help");
  return options;
}

void add_database_option(po::options_description& options, std::string& db_path, const char* help) {
  db_path = default_database_path();
  options.add_options()(
      "db", po::value(&db_path),
      help ? help : "database file (default: $TRAINYARD_DB or runs/trainyard.db)");
}

void add_experiment_option(po::options_description& options, std::string& experiment,
                           const char* help) {
  options.add_options()("experiment,e", po::value(&experiment), help);
}

std::string RunSelection::describe() const {
  std::string out;
  for (const auto& pattern : only)
    out += (out.empty() ? "" : " ") + std::string("--only ") + pattern;
  if (repeats > 0) out += fmt::format("{}--repeats {}", out.empty() ? "" : " ", repeats);
  return out;
}

void add_selection_options(po::options_description& options, RunSelection& selection) {
  options.add_options()("only", po::value(&selection.only)->composing(),
                        "run only the variants named, or matching a glob: --only fp32 --only "
                        "'bf16*' (or --only fp32,bf16-mixed); the report shows them as part of "
                        "the file's experiment")(
      "repeats", po::value(&selection.repeats),
      "run each variant only N times (its first N seeds) for this invocation, N up to the file's "
      "sweep.repeats");
}

void select_runs(std::vector<Experiment>& experiments, const RunSelection& selection) {
  std::vector<std::string> patterns;
  for (const auto& text : selection.only)
    for (const auto& part : split(text, ','))
      if (!strip(part).empty()) patterns.push_back(strip(part));
  if (selection.repeats != 0) {
    for (auto& experiment : experiments) {
      if (!experiment.studies.empty())
        throw UserError(fmt::format(
            "--repeats {}: experiment '{}' searches (sweep.search): its best settings run "
            "sweep.search.confirm_repeats times; set that in {} instead",
            selection.repeats, experiment.name, experiment.file));
      int64_t file_repeats = 0;
      for (const auto& run : experiment.runs) file_repeats = std::max(file_repeats, run.repeat + 1);
      if (selection.repeats < 1 || selection.repeats > file_repeats)
        throw UserError(fmt::format(
            "--repeats {}: experiment '{}' runs each variant {} time{} (sweep.repeats); "
            "--repeats runs fewer, from 1 to {} — for more, raise sweep.repeats in {}",
            selection.repeats, experiment.name, file_repeats, file_repeats == 1 ? "" : "s",
            file_repeats, experiment.file));
      std::erase_if(experiment.runs,
                    [&](const RunSpec& run) { return run.repeat >= selection.repeats; });
    }
  }
  if (patterns.empty()) return;
  std::vector<bool> matched(patterns.size(), false);
  std::vector<std::string> variants;
  for (auto& experiment : experiments) {
    std::vector<RunSpec> kept;
    for (auto& run : experiment.runs) {
      if (variants.empty() || variants.back() != run.variant) variants.push_back(run.variant);
      const std::string full = experiment.name + "/" + run.variant;
      bool keep = false;
      for (size_t i = 0; i < patterns.size(); ++i)
        if (fnmatch(patterns[i].c_str(), run.variant.c_str(), 0) == 0 ||
            fnmatch(patterns[i].c_str(), full.c_str(), 0) == 0) {
          matched[i] = true;
          keep = true;
        }
      if (keep) kept.push_back(std::move(run));
    }
    experiment.runs = std::move(kept);
    // A searched variant is its study (its runs come once the study has chosen).
    std::erase_if(experiment.studies, [&](const Study& study) {
      variants.push_back(study.variant);
      const std::string full = experiment.name + "/" + study.variant;
      bool keep = false;
      for (size_t i = 0; i < patterns.size(); ++i)
        if (fnmatch(patterns[i].c_str(), study.variant.c_str(), 0) == 0 ||
            fnmatch(patterns[i].c_str(), full.c_str(), 0) == 0) {
          matched[i] = true;
          keep = true;
        }
      return !keep;
    });
  }
  for (size_t i = 0; i < patterns.size(); ++i)
    if (!matched[i])
      throw UserError(fmt::format("--only '{}' matches no variant; the batch's variants: {}",
                                  patterns[i], join(variants)));
  std::erase_if(experiments,
                [](const Experiment& e) { return e.runs.empty() && e.studies.empty(); });
}

void print_notes(const std::vector<Experiment>& experiments) {
  for (const auto& experiment : experiments)
    for (const auto& note : experiment.notes) fmt::print(stderr, "{}\n", note);
}

void add_override_option(po::options_description& options, std::vector<std::string>& overrides) {
  options.add_options()("set", po::value(&overrides)->composing(),
                        "override a key in every file: --set train.epochs=1 (repeatable)");
}

void add_plugin_option(po::options_description& options, std::vector<std::string>& plugins) {
  options.add_options()("plugin", po::value(&plugins)->composing(),
                        "load a plugin library (components built outside Trainyard, "
                        "docs/plugins.md), as `plugins:` in every file would (repeatable)");
}

void add_max_runs_option(po::options_description& options, int64_t& max_runs) {
  max_runs = kDefaultMaxRuns;
  options.add_options()(
      "max-runs", po::value(&max_runs),
      fmt::format("refuse a batch of more runs than this (default {}): a grid that multiplies out "
                  "to millions is a mistake",
                  kDefaultMaxRuns)
          .c_str());
}

void check_max_runs(const std::string& command, int64_t max_runs) {
  if (max_runs < 1) throw UserError(fmt::format("{}: --max-runs must be at least 1", command));
}

std::string default_database_path() {
  const char* env = std::getenv("TRAINYARD_DB");
  return env && *env ? env : "runs/trainyard.db";
}

std::string log_dir_of(const std::string& db_path) {
  const std::filesystem::path db(db_path);
  const std::filesystem::path logs = db.has_parent_path() ? db.parent_path() / "logs" : "logs";
  return std::filesystem::absolute(logs).string();
}

std::optional<double> device_memory_option(const std::string& command, const std::string& text) {
  if (text.empty()) return std::nullopt;
  const auto bytes = parse_bytes(text);
  if (!bytes)
    throw UserError(
        fmt::format("{}: --device-memory '{}' is not a size; write it as 80GiB, 24GB or 512MiB",
                    command, text));
  return bytes;
}

StoreToRead open_store_to_read(const std::string& db_path) {
  if (!std::filesystem::exists(db_path))
    throw UserError(fmt::format("no database at {}; run an experiment first", db_path));
  StoreToRead open;
  try {
    open.store = std::make_unique<Store>(db_path);
  } catch (const std::runtime_error& cannot_write) {
    const std::exception_ptr first = std::current_exception();
    try {
      open.store = std::make_unique<Store>(db_path, sql::Access::read_only);
    } catch (const std::runtime_error&) {
      std::rethrow_exception(first);  // not a matter of writing: what opening it for writing said
    }
    fmt::print(stderr,
               "trainyard: {} cannot be written ({}); reading it as it is, without collecting "
               "Slurm runs' records\n",
               db_path, first_line(cannot_write.what()));
    return open;
  }
  open.collected = collect_slurm(*open.store);
  return open;
}

}  // namespace trainyard
