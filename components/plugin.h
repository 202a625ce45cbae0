// What a plugin includes: every seam a component built outside this tree needs, and
// TRAINYARD_PLUGIN, which declares the plugin's one entry point. docs/plugins.md walks through a
// plugin from an empty folder; examples/plugins/ holds two.
//
//   #include "components/plugin.h"
//   void register_mynet(trainyard::Registry& registry) { registry.add<...>(...); }
//   TRAINYARD_PLUGIN(register_mynet)
//
// Trainyard loads the library (`plugins:` in an experiment, or --plugin), checks the stamp
// TRAINYARD_PLUGIN writes into it against its own before loading anything of it, then calls the
// entry point once, with a registry of its own: what the function registers joins the built-in
// components only when every name is free (components/plugin_loader.h).
#pragma once

#include <string>  // defines _GLIBCXX_USE_CXX11_ABI, which the stamp records

#include <torch/headeronly/version.h>

#include "components/data/dataset.h"
#include "components/models/model.h"
#include "components/optim/optimizers.h"
#include "components/optim/schedulers.h"
#include "components/registry.h"

// The plugin API's version: raised whenever a public header (ARCHITECTURE.md, "Public API")
// changes in a way a plugin built against the old one would misread (2: OptionInfo and Rule gained
// names_data; 4: Capabilities gained agrees_on_micro_batch; 5: Capabilities gained task, DataSplits
// train_in_order, DataContext vocab_size).
#define TRAINYARD_PLUGIN_API_VERSION 5

#define TRAINYARD_PLUGIN_STRING_(x) #x
#define TRAINYARD_PLUGIN_STRING(x) TRAINYARD_PLUGIN_STRING_(x)

// What the library was built with: the plugin API, the LibTorch version and the C++ standard
// library's string ABI. A plugin and the trainyard that loads it must agree on all three: the
// public headers hand std::string, std::function and torch::Tensor across the boundary.
#define TRAINYARD_PLUGIN_STAMP \
  "trainyard-plugin api=" TRAINYARD_PLUGIN_STRING(TRAINYARD_PLUGIN_API_VERSION)        \
  " torch=" TRAINYARD_PLUGIN_STRING(TORCH_VERSION_MAJOR) "." TRAINYARD_PLUGIN_STRING(  \
      TORCH_VERSION_MINOR) "." TRAINYARD_PLUGIN_STRING(TORCH_VERSION_PATCH)            \
  " cxx11-abi=" TRAINYARD_PLUGIN_STRING(_GLIBCXX_USE_CXX11_ABI)

// Declares the plugin's entry point, which calls `register_function(trainyard::Registry&)`. The
// stamp lies in a section of its own (.trainyard_plugin), which Trainyard reads from the file
// before loading it: a library built against another LibTorch is refused before any of its code
// runs. Write it once, in one source file of the library.
#define TRAINYARD_PLUGIN(register_function)                                             \
  extern "C" __attribute__((visibility("default"), used, section(".trainyard_plugin"))) \
  const char trainyard_plugin_stamp[] = TRAINYARD_PLUGIN_STAMP;                         \
  extern "C" __attribute__((visibility("default"))) void trainyard_plugin_v1(           \
      ::trainyard::Registry& registry) {                                                \
    register_function(registry);                                                        \
  }
