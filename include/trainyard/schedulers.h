// Learning-rate schedules by name: none, step, exponential, cosine — each with linear warmup.
// A schedule maps an optimizer step to a multiplier of the base learning rate; the engine sets
// every parameter group's rate before each step.
#pragma once

#include <functional>
#include <memory>

#include "trainyard/registry.h"

// Exported by trainyard-engine to the plugins it loads (the rest of trainyard is hidden).
#pragma GCC visibility push(default)

namespace trainyard {

// Multiplier of the base learning rate at optimizer step `step` (0-based).
using LrSchedule = std::function<double(int64_t step)>;

struct ScheduleContext {
  int64_t total_steps = 0;  // optimizer steps in the whole run
};

inline LrSchedule build_schedule(const Registry& registry, const ComponentChoice& choice,
                                 const ScheduleContext& context) {
  return registry.build<LrSchedule(const ScheduleContext&)>(ComponentKind::scheduler, choice.name,
                                                            choice.options, context);
}

void register_schedulers(Registry& registry);

}  // namespace trainyard
#pragma GCC visibility pop
