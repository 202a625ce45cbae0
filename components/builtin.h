// Registers every built-in component. Adding a component is one file plus one line in builtin.cpp.
#pragma once

#include "components/registry.h"

namespace trainyard {

void register_builtin_components(Registry& registry);

// The registry with every built-in component, built once.
const Registry& builtin_registry();

}  // namespace trainyard
