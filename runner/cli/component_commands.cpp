// `trainyard validate`, `list` and `report`: the reading commands that resolve components against
// the registry (experiment files, the options of every component), so they run in
// trainyard-engine, which holds the components and LibTorch (ARCHITECTURE.md, "Executables");
// and what `run` prints from them too: the memory forecast (also `run --dry-run`'s) and, when a
// batch ends, the verdicts.
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "common/files.h"
#include "common/metrics.h"
#include "common/text.h"
#include "components/builtin.h"
#include "reports/report.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/cli/samples.h"
#include "runner/config/experiment.h"
#include "runner/config/option_defaults.h"
#include "runner/config/sweep.h"
#include "runner/console.h"
#include "runner/engine/engine.h"
#include "runner/search/study.h"
#include "runner/slurm.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int validate_command(const std::vector<std::string>& args) {
  po::options_description options = command_options("trainyard validate FILE... [options]");
  std::vector<std::string> files, overrides, plugins;
  std::string device_memory;
  int64_t max_runs;
  add_max_runs_option(options, max_runs);
  options.add_options()("memory",
                        "also forecast each variant's memory per rank (as run --dry-run does)")(
      "device-memory", po::value(&device_memory),
      "with --memory: the memory of a device (80GiB, 24GB): which variants will not fit, and "
      "what would (default for a CUDA run: this machine's GPU)");
  add_override_option(options, overrides);
  add_plugin_option(options, plugins);
  po::options_description arguments;
  arguments.add_options()("file", po::value(&files), "experiment files");
  po::positional_options_description positional;
  positional.add("file", -1);
  po::variables_map vm;
  if (!parse_command_line(args, options, positional, vm, arguments)) return kExitOk;
  if (files.empty()) throw UserError("validate: name at least one experiment file");
  if (!device_memory.empty() && !vm.count("memory"))
    throw UserError("validate: --device-memory goes with --memory (it checks the forecast)");
  const std::optional<double> device_bytes = device_memory_option("validate", device_memory);
  for (const auto& plugin : plugins) plugin_loader().add_command_line_plugin(plugin);
  int failures = 0;
  std::map<std::string, std::string> file_of_name;  // as `run` refuses a name two files give
  for (const auto& file : files) {
    try {
      Experiment experiment = load_experiment(file, overrides, plugin_loader(), max_runs);
      std::vector<RunSpec> checked = experiment.runs;
      for (RunSpec& run : study_edge_runs(experiment)) checked.push_back(std::move(run));
      for (std::string& note : check_models_fit(checked, plugin_loader().registry()))
        experiment.notes.push_back(std::move(note));
      if (auto [it, fresh] = file_of_name.emplace(experiment.name, file); !fresh) {
        fmt::print(stderr,
                   "error: {}: experiment name '{}' is also {}'s; their runs would mix in one "
                   "report: give one of them another `name:`\n",
                   file, experiment.name, it->second);
        ++failures;
        continue;
      }
      print_notes({experiment});
      if (experiment.studies.empty())
        fmt::print("{}: ok — experiment '{}', {} run{}\n", file, experiment.name,
                   experiment.runs.size(), experiment.runs.size() == 1 ? "" : "s");
      else
        fmt::print("{}: ok — experiment '{}', {}\n", file, experiment.name,
                   describe_studies(experiment));
      if (vm.count("memory"))
        for (const auto& run : experiment.runs)
          if (run.repeat == 0) {
            fmt::print("variant {}:\n", run.variant);
            print_memory_forecast(run, device_bytes);
          }
    } catch (const ConfigError& e) {
      fmt::print(stderr, "{}\n", e.what());
      ++failures;
    }
  }
  return failures ? kExitUserError : kExitOk;
}

namespace {

void print_options(const std::vector<OptionInfo>& options) {
  // The keys' column as wide as the longest key; a long default runs over into the help.
  size_t key_width = 20;
  const size_t default_width = 11;
  for (const auto& option : options) key_width = std::max(key_width, option.key.size());
  for (const auto& option : options)
    fmt::print("      {:<{}} {:<7} {:<{}} {}{}\n", option.key, key_width, option.type,
               option.default_value.empty() ? "-" : option.default_value, default_width,
               option.help, option.rule.empty() ? "" : " [" + option.rule + "]");
}

// The sections of an experiment file that are not components: their options, declared once.
struct Section {
  const char* name;
  const char* help;
  std::vector<OptionInfo> options;
};

std::vector<Section> sections() {
  return {
      {"train", "how a run trains; train.optimizer and train.scheduler name components",
       train_option_set().describe()},
      {"runtime", "where and how a run executes; runtime.strategy names a component",
       runtime_option_set().describe()},
      {"report", "how the experiment's section of a report looks", describe_report_options()},
      {"sweep", "the variants to compare, or a search per variant (sweep.search)",
       describe_sweep_options()},
  };
}

void print_metrics() {
  fmt::print("metrics (the keys of the database, the console and the reports)\n");
  for (const auto& metric : metric_vocabulary())
    fmt::print("  {:<32} {:<18} {:<7} {}\n", metric.key, describe_unit(metric.unit),
               metric.scope == MetricScope::epoch   ? "epoch"
               : metric.scope == MetricScope::step  ? "step"
               : metric.scope == MetricScope::final ? "final"
                                                    : "derived",
               metric.help);
}

}  // namespace

int list_command(const std::vector<std::string>& args) {
  po::options_description options = command_options(
      "trainyard list [WHAT] [options]\n  WHAT: a component kind (model, dataset, optimizer, "
      "scheduler, precision, strategy), a section (train, runtime, report, sweep) or metrics");
  std::string filter;
  std::vector<std::string> plugins;
  add_plugin_option(options, plugins);
  po::options_description arguments;
  arguments.add_options()("what", po::value(&filter), "what to list");
  po::positional_options_description positional;
  positional.add("what", 1);
  po::variables_map vm;
  if (!parse_command_line(args, options, positional, vm, arguments)) return kExitOk;

  for (const auto& plugin : plugins) plugin_loader().add_command_line_plugin(plugin);
  const Registry& registry = plugin_loader().registry();
  std::vector<std::string> names;
  for (auto kind : all_component_kinds()) names.push_back(to_string(kind));
  // The plural names the same kind: `list models`, `list strategies`.
  for (const auto& name : names)
    if (filter == name + "s" ||
        (name.back() == 'y' && filter == name.substr(0, name.size() - 1) + "ies"))
      filter = name;
  for (const auto& section : sections()) names.push_back(section.name);
  names.push_back("metrics");
  if (!filter.empty() && std::find(names.begin(), names.end(), filter) == names.end()) {
    std::string guess = closest_match(filter, names);
    throw UserError(fmt::format("list: unknown kind '{}'{}; kinds: {}", filter,
                                guess.empty() ? "" : " (did you mean '" + guess + "'?)",
                                join(names)));
  }
  auto wanted = [&](const std::string& name) { return filter.empty() || filter == name; };
  for (auto kind : all_component_kinds()) {
    if (!wanted(to_string(kind))) continue;
    std::string heading = to_string(kind);
    heading = heading.back() == 'y' ? heading.substr(0, heading.size() - 1) + "ies" : heading + "s";
    fmt::print("{}\n", heading);
    for (const auto* entry : registry.entries(kind)) {
      fmt::print("  {:<18} {}{}\n", entry->name, entry->help,
                 entry->library.empty() ? "" : " [plugin " + entry->library + "]");
      print_options(entry->options);
    }
    if (kind == ComponentKind::model) {
      fmt::print("  every model also takes:\n");
      print_options(weights_option_set().describe());
    }
    fmt::print("\n");
  }
  for (const auto& section : sections()) {
    if (!wanted(section.name)) continue;
    fmt::print("section {}: {}\n", section.name, section.help);
    print_options(section.options);
    fmt::print("\n");
  }
  if (wanted("metrics")) print_metrics();
  return kExitOk;
}

namespace {

// The runs an experiment resolves to, as a report takes them.
CurrentExperiment current_variants(const Experiment& experiment) {
  CurrentExperiment current{.report = experiment.report,
                            .option_default = registry_option_defaults(plugin_loader().registry())};
  for (const auto& run : experiment.runs)
    current.variants.push_back({.variant = run.variant,
                                .config_hash = run.config_hash,
                                .config_yaml = run.config_yaml,
                                .repeat = run.repeat,
                                .legacy_config_hash = run.legacy_config_hash});
  current.studies = current_studies(experiment);
  return current;
}

// What an experiment's file resolves to now, with the report's --set overrides (those a batch ran
// it with, when its data lies elsewhere here): the report's rows are those runs.
CurrentExperiment current_experiment(Store& store, const ExperimentRecord& record,
                                     const std::vector<std::string>& overrides) {
  CurrentExperiment current{.option_default = registry_option_defaults(plugin_loader().registry())};
  if (!fs::exists(record.file)) {
    current.problem = "the experiment file is gone";
    return current;
  }
  try {
    Experiment experiment = load_experiment(record.file, overrides, plugin_loader());
    add_confirmations(experiment, store);  // a study's variant: its best settings' runs
    if (experiment.name != record.name) {
      current.problem = fmt::format("the file now names experiment '{}'", experiment.name);
      return current;
    }
    current = current_variants(experiment);
  } catch (const UserError& e) {
    current.problem = "the file no longer validates (trainyard validate shows why)";
  }
  return current;
}

}  // namespace

// What a variant will hold in memory (forecast_memory), and with --device-memory (or, for a CUDA
// run, this machine's GPU) whether it fits and what would: a smaller micro-batch, or its state
// shared out by zero2 or fsdp.
void print_memory_forecast(const RunSpec& run, std::optional<double> device_bytes) {
  MemoryForecast f;
  try {
    f = forecast_memory(run, plugin_loader().registry());
  } catch (const std::exception& e) {  // its data are elsewhere, it needs a GPU to build, ...
    fmt::print("  memory: not forecast here: {}\n", first_line(e.what()));
    return;
  }
  if (!f.problem.empty()) {
    fmt::print("  memory: not forecast here: {}\n", f.problem);
    return;
  }
  const DeviceInfo device = resolve_device(run.runtime);
  const bool cuda = device.type == "cuda";  // auto: with a GPU here
  fmt::print(
      "  memory per rank (forecast; activations measured on this CPU at micro-batches {} and "
      "{}):\n"
      "    parameters {} · gradients {} · optimizer state {} · activations {} a sample\n",
      f.measured_at.first, f.measured_at.second, format_bytes(f.parameters),
      format_bytes(f.gradients), format_bytes(f.optimizer_state), format_bytes(f.per_sample));
  // On a GPU what counts is the state and the step's tensors; on the CPU the whole process.
  const double need = cuda ? f.state() + f.fixed + f.per_sample * static_cast<double>(f.micro_batch)
                           : f.peak_at(f.micro_batch);
  fmt::print("    a step at micro-batch {}: {} {}\n", f.micro_batch, format_bytes(need),
             cuda ? "of device memory (state and the step's tensors)"
                  : fmt::format("resident ({} before the step)", format_bytes(f.baseline)));
  // Without --device-memory a CUDA run is checked against this machine's GPU (the smallest one).
  std::string whose;
  if (!device_bytes && cuda && device.memory_bytes > 0) {
    device_bytes = device.memory_bytes;
    whose = fmt::format(" ({}'s; --device-memory sets another size)", device.name);
  }
  if (!device_bytes) return;
  if (need <= *device_bytes) {
    fmt::print("    fits in {}{}\n", format_bytes(*device_bytes), whose);
    return;
  }
  const double other = cuda ? f.state() + f.fixed : f.baseline + f.fixed;
  const int64_t micro =
      f.per_sample > 0 ? static_cast<int64_t>((*device_bytes - other) / f.per_sample) : 0;
  if (micro >= 1) {
    fmt::print(
        "    does not fit in {}{}: it would at micro-batch {} (train.micro_batch_size: {}, "
        "or auto)\n",
        format_bytes(*device_bytes), whose, std::min(micro, f.micro_batch),
        std::min(micro, f.micro_batch));
    return;
  }
  if (!cuda && f.baseline + f.fixed + f.per_sample > *device_bytes) {
    fmt::print("    does not fit in {} even at one sample: this process holds {} before a step\n",
               format_bytes(*device_bytes), format_bytes(f.baseline));
    return;
  }
  // What zero2 and fsdp would keep per rank, from the state one process keeps whole.
  const double devices = static_cast<double>(std::max<int64_t>(run.runtime.devices, 4));
  const double whole = f.whole_parameters + f.whole_gradients_and_state;
  fmt::print(
      "    does not fit in {}{} even at one sample: its state ({}) must be shared out — on "
      "{:.0f} devices zero2 keeps {} a rank, fsdp {}\n",
      format_bytes(*device_bytes), whose, format_bytes(whole), devices,
      format_bytes(f.whole_parameters + f.whole_gradients_and_state / devices),
      format_bytes(whole / devices));
}

void print_verdicts(Store& store, const std::vector<Experiment>& experiments) {
  for (Experiment experiment : experiments) {
    add_confirmations(experiment, store);
    const CurrentExperiment now = current_variants(experiment);
    Report report;
    try {
      report = build_report(store, experiment.name, [&](const ExperimentRecord&) { return now; });
    } catch (const UserError&) {
      continue;  // nothing of it in the database
    }
    if (report.experiments.at(0).rows.size() < 2) continue;
    fmt::print(stderr, "{}", render_answers(report, terminal_width(stderr)));
  }
}

int report_command(const std::vector<std::string>& args) {
  po::options_description options = command_options(
      "trainyard report [-o FILE] [options]\n  FILE's extension picks the format: .html, .md or "
      ".csv; without -o the answer (each variant's verdict) is printed");
  std::string db_path, experiment, output;
  add_database_option(options, db_path);
  add_experiment_option(options, experiment);
  std::vector<std::string> overrides;
  options.add_options()("output,o", po::value(&output), "output file (.html, .md or .csv)")(
      "set", po::value(&overrides)->composing(),
      "read the experiment files as `trainyard run --set` did: --set dataset.root=/data/x "
      "(repeatable)");
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  std::string extension = fs::path(output).extension().string();
  if (!output.empty() && extension != ".html" && extension != ".htm" && extension != ".md" &&
      extension != ".csv")
    throw UserError(
        fmt::format("report: cannot tell the format of '{}'; use .html, .md or .csv", output));
  const StoreToRead open = open_store_to_read(db_path);  // Slurm runs' records collected first
  Store& store = *open.store;
  Report report = build_report(store, experiment, [&](const ExperimentRecord& record) {
    return current_experiment(store, record, overrides);
  });
  if (output.empty()) {  // the answer, in the terminal
    fmt::print("{}", render_answers(report, terminal_width(stdout)));
    if (report.experiments.empty()) fmt::print("no experiments yet: trainyard run FILE first\n");
    fmt::print("the whole report: trainyard report -o report.html\n");
    return kExitOk;
  }
  report.output_dir = fs::absolute(output).parent_path().string();
  add_report_samples(report, store, plugin_loader());
  std::string text = extension == ".md"    ? render_markdown(report)
                     : extension == ".csv" ? render_csv(report)
                                           : render_html(report);
  fs::path parent = fs::path(output).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  try {
    write_file_atomically(output, text);  // never a half-written report
  } catch (const std::runtime_error& e) {
    throw UserError(fmt::format("report: {}", e.what()));
  }
  fmt::print("report: {} ({} experiment{})\n", fs::absolute(output).string(),
             report.experiments.size(), report.experiments.size() == 1 ? "" : "s");
  return kExitOk;
}

}  // namespace trainyard
