// What a model is trained for: the task its model declares (Capabilities::task) and its dataset's
// batches serve, and what each task's figures are. One table of traits that validation, the engine
// and the reports all ask, one parse and one print.
#pragma once

#include <optional>
#include <string>

// Exported by trainyard-engine to the plugins it loads (the rest of trainyard is hidden).
#pragma GCC visibility push(default)

namespace trainyard {

enum class Task {
  classification,  // logits per sample against class indices: a loss over samples, accuracy
  causal_lm,       // logits per position against the next tokens: a loss over tokens, perplexity
};

struct TaskTraits {
  const char* name;   // as files and messages write it: "classification", "causal-lm"
  const char* a_one;  // "a classifier", "a causal language model"
  // Whether it has an accuracy; a language model's quality is its perplexity (exp of its loss).
  bool has_accuracy;
  // Its quality figures (common/metrics.h keys) of an epoch's training, of validation and of the
  // test: accuracy, or perplexity; and which way they are better.
  const char* train_quality;
  const char* val_quality;
  const char* test_quality;
  bool quality_higher_is_better;
  const char* loss_unit;  // what its loss is a mean over: "sample", "token"
};

const TaskTraits& traits(Task task);
inline const char* to_string(Task task) { return traits(task).name; }
// The task a name means ("classification", "causal-lm"); nullopt for any other.
std::optional<Task> parse_task(const std::string& name);

}  // namespace trainyard
#pragma GCC visibility pop
