// `trainyard sample RUN`: what a language-model run writes, from a prompt
// (runner/engine/sampling.h), and the report's samples (runner/cli/samples.h).
#include "runner/cli/samples.h"

#include <filesystem>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "components/builtin.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "runner/config/experiment.h"
#include "trainyard/error.h"

namespace trainyard {

namespace po = boost::program_options;

std::vector<std::string> sample_run(Store& store, const RunRecord& run, const std::string& prompt,
                                    const std::string& tokenizer_path, const SampleOptions& options,
                                    PluginLoader& plugins) {
  const RunSpec spec = parse_resolved_run(run.config_yaml, run.variant, plugins);
  if (spec.model.capabilities.task != Task::causal_lm)
    throw UserError(fmt::format("sample: run {} ({}/{}) trains {}, not a language model", run.id,
                                run.experiment, run.variant, spec.model.name));
  const auto attributes = store.attributes(run.id);
  const auto weights = attributes.find("weights_path");
  if (weights == attributes.end() || !std::filesystem::exists(weights->second))
    throw UserError(fmt::format(
        "sample: run {} ({}/{}) {}; set train.save_weights: true and run it again (its tested "
        "weights are then written beside its log)",
        run.id, run.experiment, run.variant,
        weights == attributes.end() ? "kept no weights"
                                    : "kept its weights at " + weights->second + ", gone now"));
  std::string tokenizer = tokenizer_path;
  if (tokenizer.empty())
    if (const ConfigValue* value = spec.dataset.options.find("tokenizer"))
      tokenizer = value->node.as<std::string>("");
  if (tokenizer.empty())
    throw UserError(fmt::format(
        "sample: run {} ({}/{}) names no tokenizer; give --tokenizer tokenizer.json, or set "
        "dataset.tokenizer to the one its token files were written with",
        run.id, run.experiment, run.variant));
  return sample_texts(spec, weights->second, ByteBpeTokenizer::from_tokenizer_json(tokenizer),
                      prompt, options, plugins.registry());
}

void add_report_samples(Report& report, Store& store, PluginLoader& plugins) {
  for (ExperimentReport& section : report.experiments) {
    if (section.task != Task::causal_lm) continue;
    for (const VariantRow& row : section.rows) {
      std::string why_not = "no completed run";
      for (int64_t id : row.run_ids) {
        const std::optional<RunRecord> run = store.run(id);
        if (!run || run->status != RunStatus::completed) continue;
        try {
          section.samples.push_back(
              {.variant = row.variant,
               .run_id = id,
               .texts = sample_run(store, *run, "", "", SampleOptions{.tokens = 48, .texts = 2},
                                   plugins)});
          why_not.clear();
          break;
        } catch (const UserError& e) {
          why_not = e.what();
        }
      }
      if (!why_not.empty())
        section.sample_notes.push_back(fmt::format("{}: {}", row.variant, why_not));
    }
  }
}

int sample_command(const std::vector<std::string>& args) {
  po::options_description options = command_options(
      "trainyard sample RUN [--prompt TEXT] [--tokens 100 --temperature 0.8 --top-k 40 --seed 1]\n"
      "  text from a language-model run's tested weights (train.save_weights), decoded with its "
      "dataset.tokenizer");
  std::string db_path, prompt, tokenizer;
  int64_t run_id = 0;
  SampleOptions o;
  add_database_option(options, db_path);
  options.add_options()("prompt", po::value(&prompt),
                        "the text to go on from (default: a document's start)")(
      "tokens", po::value(&o.tokens)->default_value(o.tokens), "tokens to draw")(
      "temperature",
      po::value(&o.temperature)->default_value(o.temperature, fmt::format("{:g}", o.temperature)),
      "divides the logits: lower is more predictable; 0 takes the most likely token")(
      "top-k", po::value(&o.top_k)->default_value(o.top_k),
      "draw from the k most likely tokens only; 0: from all")(
      "seed", po::value(&o.seed)->default_value(o.seed), "the same seed, the same text")(
      "tokenizer", po::value(&tokenizer),
      "a tokenizer.json, instead of the run's dataset.tokenizer");
  po::options_description arguments;
  arguments.add_options()("run", po::value(&run_id), "run id");
  po::positional_options_description positional;
  positional.add("run", 1);
  po::variables_map vm;
  if (!parse_command_line(args, options, positional, vm, arguments)) return kExitOk;
  if (run_id <= 0) throw UserError("sample: name a run by its id (`trainyard runs` lists them)");
  if (o.tokens < 1) throw UserError("sample: --tokens must be at least 1");
  if (o.temperature < 0) throw UserError("sample: --temperature must not be negative");
  if (o.top_k < 0) throw UserError("sample: --top-k must not be negative");
  const StoreToRead open = open_store_to_read(db_path);
  const std::optional<RunRecord> run = open.store->run(run_id);
  if (!run) throw UserError(fmt::format("sample: no run {} in {}", run_id, db_path));
  for (const std::string& text :
       sample_run(*open.store, *run, prompt, tokenizer, o, plugin_loader()))
    fmt::print("{}{}\n", prompt, text);
  return kExitOk;
}

}  // namespace trainyard
