// Registers every built-in component. Adding a component is one file plus one line in builtin.cpp.
#pragma once

#include "components/plugin_loader.h"
#include "trainyard/registry.h"

namespace trainyard {

void register_builtin_components(Registry& registry);

// The registry with every built-in component, built once.
const Registry& builtin_registry();

// What the commands build components from: the built-in ones and the plugins this process has
// loaded (`plugins:` in an experiment, --plugin), checked against this binary's plugin stamp.
PluginLoader& plugin_loader();

}  // namespace trainyard
