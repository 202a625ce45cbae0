#include "components/precision/precision.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>

namespace trainyard {

Precision::AutocastScope::AutocastScope(const Precision& precision, c10::DeviceType device)
    : device_(device) {
  if (!precision.autocast_dtype_) return;
  active_ = true;
  previous_enabled_ = at::autocast::is_autocast_enabled(device);
  previous_dtype_ = at::autocast::get_autocast_dtype(device);
  at::autocast::set_autocast_enabled(device, true);
  at::autocast::set_autocast_dtype(device, *precision.autocast_dtype_);
  at::autocast::increment_nesting();
}

Precision::AutocastScope::~AutocastScope() {
  if (!active_) return;
  // Leaving the outermost region frees the cached low-precision copies of the weights.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_, previous_dtype_);
}

std::map<std::string, std::string> Precision::attributes() const {
  return {{"param_dtype", c10::toString(param_dtype_)},
          {"compute_dtype", c10::toString(compute_dtype())},
          {"grad_dtype", c10::toString(grad_dtype())},
          {"reduce_dtype", c10::toString(reduce_dtype())},
          {"loss_scaling", loss_scaling_ ? "dynamic" : "none"}};
}

std::string Precision::describe() const {
  return fmt::format("params {}, compute {}, grads {}, loss scaling {}",
                     c10::toString(param_dtype_), c10::toString(compute_dtype()),
                     c10::toString(grad_dtype()), loss_scaling_ ? "dynamic" : "none");
}

namespace {
struct NoOptions {};
}  // namespace

void register_precisions(Registry& registry) {
  auto add = [&](const char* name, const char* help, c10::ScalarType param_dtype,
                 std::optional<c10::ScalarType> autocast_dtype, bool loss_scaling) {
    registry.add<PrecisionPtr(const PrecisionContext&)>(
        ComponentKind::precision, name, help, OptionSet<NoOptions>(),
        [=](const NoOptions&, const PrecisionContext&) {
          return std::make_shared<const Precision>(name, param_dtype, autocast_dtype, loss_scaling);
        },
        [=](const NoOptions&) {
          return PrecisionCapabilities{.loss_scaling = loss_scaling,
                                       .float16_state = param_dtype == c10::ScalarType::Half};
        });
  };
  using c10::ScalarType;
  add("32-true", "float32 everywhere", ScalarType::Float, std::nullopt, false);
  add("bf16-mixed", "float32 parameters, bfloat16 autocast for the forward pass and loss",
      ScalarType::Float, ScalarType::BFloat16, false);
  add("16-mixed", "float32 parameters, float16 autocast, dynamic loss scaling", ScalarType::Float,
      ScalarType::Half, true);
  add("bf16-true", "bfloat16 parameters, gradients and optimizer state; no autocast",
      ScalarType::BFloat16, std::nullopt, false);
  add("16-true", "float16 parameters, gradients and optimizer state; no autocast, no loss scaling",
      ScalarType::Half, std::nullopt, false);
}

}  // namespace trainyard
