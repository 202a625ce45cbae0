// check_models_fit (engine.h): validation's look at each run's model through the model itself —
// against its weights file (the header alone) and against one sample of its data.
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/text.h"
#include "components/weights/load_weights.h"
#include "runner/engine/engine.h"
#include "trainyard/dataset.h"
#include "trainyard/diagnostics.h"
#include "trainyard/error.h"
#include "trainyard/model.h"

namespace trainyard {

namespace {

// One training sample as the model receives it, with what the data says of its labels.
struct Sample {
  Batch batch{};
  int64_t num_classes = 0;  // 0: unknown
  int64_t vocab_size = 0;
};

// A sequence dataset's sample is what its capabilities promise — token ids [1, max_length], a
// full sample, so unpadded and without a mask — so that no file is tokenised to check a shape.
// Any other dataset's is read: the training split's first example through its training
// transform, as the run's first batch is made.
Sample sample_of(const RunSpec& run, const Registry& registry) {
  const DatasetCapabilities& data = run.dataset.capabilities;
  const ModelCapabilities& model = run.model.capabilities;
  if (data.max_length > 0) {
    Sample sample{.num_classes = data.num_classes, .vocab_size = data.vocab_size};
    sample.batch.inputs = torch::zeros({1, data.max_length}, torch::kLong);
    sample.batch.targets = data.task == Task::causal_lm
                               ? torch::zeros({1, data.max_length}, torch::kLong)
                               : torch::zeros({1}, torch::kLong);
    return sample;
  }
  const DataContext context{.image_size = model.image_size,
                            .max_positions = model.max_positions,
                            .vocab_size = model.vocab_size,
                            .log = [](const std::string&) {}};
  const DataSplits splits = build_dataset(registry, run.dataset, context);
  if (splits.train->size() == 0)
    throw UserError(fmt::format("dataset '{}' has no training samples", run.dataset.name));
  Sample sample{.batch = splits.train->get_batch({0}),
                .num_classes = splits.num_classes,
                .vocab_size = splits.vocab_size};
  if (splits.train_transform) sample.batch = splits.train_transform(sample.batch, 0);
  return sample;
}

std::string describe(const torch::Tensor& tensor) {
  if (!tensor.defined()) return "no tensor";
  return fmt::format("{} [{}]", c10::toString(tensor.scalar_type()),
                     fmt::join(tensor.sizes(), ", "));
}

// What is wrong with the model's output for one sample, "" when nothing.
std::string wrong_output(const torch::Tensor& logits, const Sample& sample, Task task) {
  if (task == Task::causal_lm) {
    const int64_t tokens = sample.batch.inputs.size(1);
    if (logits.dim() != 3 || logits.size(0) != 1 || logits.size(1) != tokens)
      return fmt::format(
          "it returned {} for a sample of {} tokens; a language model returns "
          "logits [batch, tokens, vocabulary]",
          describe(logits), tokens);
    if (sample.vocab_size > logits.size(2))
      return fmt::format("it returns logits over {} tokens but the dataset's vocabulary has {}",
                         logits.size(2), sample.vocab_size);
    return "";
  }
  if (logits.dim() != 2 || logits.size(0) != 1)
    return fmt::format(
        "it returned {} for one sample; a classifier returns logits [batch, classes]",
        describe(logits));
  if (sample.num_classes > 0 && logits.size(1) != sample.num_classes)
    return fmt::format(
        "it returns {} logits per sample but the dataset has {} classes; give the "
        "model a head of {} outputs",
        logits.size(1), sample.num_classes, sample.num_classes);
  return "";
}

// The options of a model or dataset that decide the shape of what one gives the other, where set:
// what a user changes to make them agree ("model.image_size: 32, dataset.image_size: 16"). The
// classes are not among them: a head of the wrong size is said in those terms.
std::string shape_settings(const RunSpec& run) {
  static const char* const kShapeKeys[] = {"input",      "image_size", "source_size",  "patch_size",
                                           "max_length", "seq_len",    "max_positions"};
  std::vector<std::string> settings;
  auto collect = [&](const char* section, const ComponentChoice& choice) {
    for (const char* key : kShapeKeys)
      if (const ConfigValue* value = choice.options.find(key);
          value && value->node.IsScalar() && value->node.Scalar() != "0")
        settings.push_back(fmt::format("{}.{}: {}", section, key, value->node.Scalar()));
  };
  collect("model", run.model);
  collect("dataset", run.dataset);
  return settings.empty() ? "" : fmt::format(" (set by {})", join(settings));
}

// Why `model` cannot read `run`'s data, "" when it can: one sample through its forward, in
// evaluation mode (a batch of one is no batch for batch norm's training statistics).
std::string sample_problem(Model& model, const RunSpec& run, const Sample& sample) {
  std::string problem;
  try {
    torch::NoGradGuard no_grad;
    model.eval();
    Batch batch = sample.batch;
    // As the trainer feeds it without autocast: floating inputs in the parameters' float32.
    if (batch.inputs.is_floating_point()) batch.inputs = batch.inputs.to(torch::kFloat);
    problem = wrong_output(model.forward(batch), sample, run.model.capabilities.task);
  } catch (const std::exception& e) {
    if (says_out_of_memory(e.what())) throw;  // this machine's limit, not the model's fault
    problem = fmt::format("its forward failed: {}", error_summary(e.what()));
  }
  if (problem.empty()) return "";
  return fmt::format(
      "model '{}' cannot read dataset '{}': on a sample of {}, {}{}; make them agree",
      run.model.name, run.dataset.name, describe(sample.batch.inputs), problem,
      shape_settings(run));
}

// A model this machine has not the memory to check (a login node's, say) is the run's to build.
std::string out_of_memory_note(const RunSpec& run, const std::exception& e) {
  return fmt::format(
      "{}: note: model '{}' was not checked against its weights and data here: out of memory "
      "({}); the run builds it",
      to_string(run.dataset_origin), run.model.name, error_summary(e.what()));
}

}  // namespace

std::vector<std::string> check_models_fit(const std::vector<RunSpec>& runs,
                                          const Registry& registry) {
  Diagnostics diagnostics;
  std::vector<std::string> notes;
  // What was checked: a sweep over the learning rate builds one model and reads one sample.
  std::set<std::pair<std::string, std::string>> weights_checked, data_checked;
  std::map<std::string, std::optional<Sample>> samples;  // by dataset and the model's figures
  for (const RunSpec& run : runs) {
    const std::string model = run.model.name + "\n" + run.model.options.to_yaml_text();
    const std::string data = run.dataset.name + "\n" + run.dataset.options.to_yaml_text();
    const bool check_weights_file = run.weights.strict && !run.weights.weights.empty() &&
                                    weights_checked.insert({model, run.weights.weights}).second;
    const bool check_data = data_checked.insert({model, data}).second;
    if (!check_weights_file && !check_data) continue;

    const ModelCapabilities& own = run.model.capabilities;
    const std::string sample_key =
        fmt::format("{}\n{} {} {}", data, own.image_size, own.max_positions, own.vocab_size);
    auto [at, fresh] = samples.try_emplace(sample_key);
    // Data that cannot be read here (a truncated file, a dataset that needs what the run has) is
    // the run's to report, where it reads it, as before this check: said as a note.
    if (fresh) try {
        at->second = sample_of(run, registry);
      } catch (const std::exception& e) {
        notes.push_back(fmt::format(
            "{}: note: dataset '{}' could not be read to check model '{}' against a sample ({}); "
            "the run reads it",
            to_string(run.dataset_origin), run.dataset.name, run.model.name,
            error_summary(e.what())));
      }
    const std::optional<Sample>& sample = at->second;
    if (!check_weights_file && !sample) continue;  // nothing to check the model against here
    // The dataset's figures as the run will know them; what a dataset cannot say before it is
    // read (a plugin's classes) is taken as the model's own.
    const DatasetCapabilities& caps = run.dataset.capabilities;
    const int64_t vocab_size = sample && sample->vocab_size > 0 ? sample->vocab_size
                               : caps.vocab_size > 0            ? caps.vocab_size
                                                                : own.vocab_size;
    const int64_t num_classes = sample && sample->num_classes > 0 ? sample->num_classes
                                : caps.num_classes > 0            ? caps.num_classes
                                                                  : own.num_classes;
    ModelPtr built;
    try {
      torch::NoGradGuard no_grad;
      built = build_model(registry, run.model,
                          ModelContext{.num_classes = num_classes, .vocab_size = vocab_size});
    } catch (const std::exception& e) {
      if (says_out_of_memory(e.what())) {  // too large for this machine, not for the run's
        notes.push_back(out_of_memory_note(run, e));
        continue;
      }
      // A UserError says what is wrong in the user's terms; anything else is LibTorch's c10::Error.
      diagnostics.error(run.dataset_origin,
                        dynamic_cast<const UserError*>(&e)
                            ? std::string(e.what())
                            : fmt::format("cannot build model '{}': {}", run.model.name,
                                          error_summary(e.what())));
      continue;
    }
    if (check_weights_file) try {
        check_weights(*built, run.weights.weights, /*strict=*/true);
      } catch (const std::exception& e) {
        diagnostics.error(run.weights_origin, fmt::format("model.weights: {}", e.what()));
      }
    if (check_data && sample) try {
        if (const std::string problem = sample_problem(*built, run, *sample); !problem.empty())
          diagnostics.error(run.dataset_origin, problem);
      } catch (const std::exception& e) {  // out of memory (sample_problem says the rest)
        notes.push_back(out_of_memory_note(run, e));
      }
  }
  diagnostics.throw_if_any();
  return notes;
}

}  // namespace trainyard
