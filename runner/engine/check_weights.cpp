// check_weights_fit (engine.h): validation's look at model.weights through the model itself.
#include <set>
#include <utility>

#include <fmt/format.h>

#include "components/weights/load_weights.h"
#include "runner/engine/engine.h"
#include "trainyard/diagnostics.h"
#include "trainyard/model.h"

namespace trainyard {

void check_weights_fit(const std::vector<RunSpec>& runs, const Registry& registry) {
  Diagnostics diagnostics;
  std::set<std::pair<std::string, std::string>> checked;  // model and its options, weights file
  for (const RunSpec& run : runs) {
    if (run.weights.weights.empty() || !run.weights.strict) continue;
    // Once per model and file: a sweep over the learning rate builds one model.
    const std::string model = run.model.name + "\n" + run.model.options.to_yaml_text();
    if (!checked.insert({model, run.weights.weights}).second) continue;
    // The dataset's figures as the run will know them; what a dataset cannot say before it is
    // read (imdb's vocabulary, a plugin's classes) is taken as the model's own.
    const DatasetCapabilities& data = run.dataset.capabilities;
    const ModelCapabilities& own = run.model.capabilities;
    const int64_t vocab_size = data.vocab_size > 0 ? data.vocab_size : own.vocab_size;
    const int64_t num_classes = data.num_classes > 0 ? data.num_classes : own.num_classes;
    try {
      torch::NoGradGuard no_grad;
      ModelPtr built = build_model(
          registry, run.model, ModelContext{.num_classes = num_classes, .vocab_size = vocab_size});
      check_weights(*built, run.weights.weights, /*strict=*/true);
    } catch (const UserError& e) {
      diagnostics.error(run.weights_origin, fmt::format("model.weights: {}", e.what()));
    } catch (const std::exception& e) {  // the model could not be built (LibTorch's c10::Error)
      diagnostics.error(run.weights_origin,
                        fmt::format("model.weights: cannot check against model '{}': {}",
                                    run.model.name, e.what()));
    }
  }
  diagnostics.throw_if_any();
}

}  // namespace trainyard
