// Precision owns the numeric formats of a run: the parameters' dtype, autocast for the forward
// pass and loss, and (with 16-mixed, later) loss scaling. It composes with any strategy and means
// the same thing under every one. Names are Lightning's: 32-true, bf16-mixed, ...
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "trainyard/registry.h"

namespace trainyard {

class Precision {
 public:
  // `autocast_dtype`: the compute dtype of autocast regions; nullopt runs everything in
  // `param_dtype`. `loss_scaling`: fp16 gradients need a dynamic loss scale (LossScaler).
  Precision(std::string name, c10::ScalarType param_dtype,
            std::optional<c10::ScalarType> autocast_dtype, bool loss_scaling)
      : name_(std::move(name)),
        param_dtype_(param_dtype),
        autocast_dtype_(autocast_dtype),
        loss_scaling_(loss_scaling) {}

  const std::string& name() const { return name_; }
  c10::ScalarType param_dtype() const { return param_dtype_; }
  c10::ScalarType compute_dtype() const { return autocast_dtype_.value_or(param_dtype_); }
  c10::ScalarType grad_dtype() const { return param_dtype_; }
  // Gradients are reduced across ranks in float32 unless the strategy is told otherwise.
  c10::ScalarType reduce_dtype() const { return c10::ScalarType::Float; }
  bool autocast() const { return autocast_dtype_.has_value(); }
  bool loss_scaling() const { return loss_scaling_; }

  // Autocast on `device` for as long as the scope lives (forward pass and loss), restoring the
  // previous state after; does nothing for precisions without autocast. Not thread-safe: autocast
  // state is per thread.
  class AutocastScope {
   public:
    AutocastScope(const Precision& precision, c10::DeviceType device);
    ~AutocastScope();
    AutocastScope(const AutocastScope&) = delete;
    AutocastScope& operator=(const AutocastScope&) = delete;

   private:
    c10::DeviceType device_;
    bool active_ = false;
    bool previous_enabled_ = false;
    c10::ScalarType previous_dtype_ = c10::ScalarType::Float;
  };

  // "params Float, compute BFloat16, grads Float, loss scaling none": logged (the strategy logs its
  // reduce dtype).
  std::string describe() const;
  // The same, as key/value pairs stored with the run (param_dtype, compute_dtype, ...).
  std::map<std::string, std::string> attributes() const;

 private:
  std::string name_;
  c10::ScalarType param_dtype_;
  std::optional<c10::ScalarType> autocast_dtype_;
  bool loss_scaling_;
};

using PrecisionPtr = std::shared_ptr<const Precision>;

struct PrecisionContext {
  c10::DeviceType device = c10::DeviceType::CPU;
};

inline PrecisionPtr build_precision(const Registry& registry, const std::string& name,
                                    const PrecisionContext& context) {
  return registry.build<PrecisionPtr(const PrecisionContext&)>(ComponentKind::precision, name, {},
                                                               context);
}

void register_precisions(Registry& registry);

}  // namespace trainyard
