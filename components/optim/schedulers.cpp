#include "trainyard/schedulers.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace trainyard {

namespace {

struct NoScheduleOptions {
  int64_t warmup_steps = 0;
};
struct StepOptions {
  int64_t warmup_steps = 0;
  int64_t step_size = 1000;
  double gamma = 0.1;
};
struct ExponentialOptions {
  int64_t warmup_steps = 0;
  double gamma = 0.999;
};
struct CosineOptions {
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0.0;
};

// Linear warmup from 1/(warmup+1) to 1 over the first `warmup` steps, then `after(step - warmup)`.
LrSchedule with_warmup(int64_t warmup, std::function<double(int64_t)> after) {
  return [warmup, after = std::move(after)](int64_t step) {
    if (step < warmup) return static_cast<double>(step + 1) / static_cast<double>(warmup + 1);
    return after(step - warmup);
  };
}

template <class Opts>
OptionSet<Opts> with_warmup_option() {
  OptionSet<Opts> options;
  options.add("warmup_steps", &Opts::warmup_steps,
              "steps of linear warmup from ~0 to the base rate", at_least(0));
  return options;
}

}  // namespace

void register_schedulers(Registry& registry) {
  registry.add<LrSchedule(const ScheduleContext&)>(
      ComponentKind::scheduler, "none", "constant learning rate (after optional warmup)",
      with_warmup_option<NoScheduleOptions>(),
      [](const NoScheduleOptions& o, const ScheduleContext&) {
        return with_warmup(o.warmup_steps, [](int64_t) { return 1.0; });
      });

  auto step = with_warmup_option<StepOptions>();
  step.add("step_size", &StepOptions::step_size, "steps between decays", at_least(1))
      .add("gamma", &StepOptions::gamma, "multiplier at each decay", greater_than(0));
  registry.add<LrSchedule(const ScheduleContext&)>(
      ComponentKind::scheduler, "step", "multiply the rate by gamma every step_size steps", step,
      [](const StepOptions& o, const ScheduleContext&) {
        return with_warmup(o.warmup_steps, [o](int64_t s) {
          return std::pow(o.gamma, static_cast<double>(s / o.step_size));
        });
      });

  auto exponential = with_warmup_option<ExponentialOptions>();
  exponential.add("gamma", &ExponentialOptions::gamma, "multiplier per step", greater_than(0));
  registry.add<LrSchedule(const ScheduleContext&)>(
      ComponentKind::scheduler, "exponential", "multiply the rate by gamma every step", exponential,
      [](const ExponentialOptions& o, const ScheduleContext&) {
        return with_warmup(o.warmup_steps,
                           [o](int64_t s) { return std::pow(o.gamma, static_cast<double>(s)); });
      });

  auto cosine = with_warmup_option<CosineOptions>();
  cosine.add("min_lr_ratio", &CosineOptions::min_lr_ratio,
             "final rate as a fraction of the base rate", between(0, 1));
  registry.add<LrSchedule(const ScheduleContext&)>(
      ComponentKind::scheduler, "cosine", "cosine decay to min_lr_ratio over the run, after warmup",
      cosine, [](const CosineOptions& o, const ScheduleContext& context) {
        const int64_t decay_steps = std::max<int64_t>(1, context.total_steps - o.warmup_steps);
        return with_warmup(o.warmup_steps, [o, decay_steps](int64_t s) {
          double progress =
              std::min(1.0, static_cast<double>(s) / static_cast<double>(decay_steps));
          return o.min_lr_ratio +
                 (1 - o.min_lr_ratio) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
        });
      });
}

}  // namespace trainyard
