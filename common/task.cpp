#include "trainyard/task.h"

#include "common/metrics.h"

namespace trainyard {

namespace {

const TaskTraits kTraits[] = {
    {"classification", "a classifier", true, metric::kTrainAcc, metric::kValAcc, metric::kTestAcc,
     /*quality_higher_is_better=*/true, "sample"},
    {"causal-lm", "a causal language model", false, metric::kTrainPerplexity,
     metric::kValPerplexity, metric::kTestPerplexity, /*quality_higher_is_better=*/false, "token"},
};

}  // namespace

const TaskTraits& traits(Task task) { return kTraits[static_cast<int>(task)]; }

std::optional<Task> parse_task(const std::string& name) {
  for (Task task : {Task::classification, Task::causal_lm})
    if (name == traits(task).name) return task;
  return std::nullopt;
}

}  // namespace trainyard
