// What the optimizers' states share (include/trainyard/optimizers.h): their size in bytes, and the
// check that a state being loaded has the entries an optimizer needs. Apart from optimizers.cpp,
// which builds FusedAdam, so that fused_adam.cpp can use them without depending on it.
#include <fmt/format.h>

#include "trainyard/error.h"
#include "trainyard/optimizers.h"

namespace trainyard {

double tensor_bytes(const std::vector<torch::Tensor>& tensors) {
  double bytes = 0;
  for (const auto& t : tensors)
    if (t.defined()) bytes += static_cast<double>(t.numel() * t.element_size());
  return bytes;
}

void require_state(const ParameterState& state, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (!state.count(name))
      throw UserError(fmt::format("optimizer state without '{}' for this optimizer", name));
}

}  // namespace trainyard
