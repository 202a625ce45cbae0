// What a plugin includes: every seam a component built outside this tree needs, and
// TRAINYARD_PLUGIN, which declares the plugin's one entry point. docs/plugins.md walks through a
// plugin from an empty folder; examples/plugins/ holds two.
//
//   #include <trainyard/plugin.h>
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

#include "trainyard/dataset.h"
#include "trainyard/model.h"
#include "trainyard/optimizers.h"
#include "trainyard/registry.h"
#include "trainyard/schedulers.h"

// The plugin API's version: raised whenever a public header (ARCHITECTURE.md, "Public API")
// changes in a way a plugin built against the old one would misread (2: OptionInfo and Rule gained
// names_data; 4: Capabilities gained agrees_on_micro_batch; 5: Capabilities gained task, DataSplits
// train_in_order, DataContext vocab_size; 6: each kind its own capabilities (ModelCapabilities,
// DatasetCapabilities, ...), the task an enum (trainyard/task.h), enum options (OptionWords), the
// headers under <trainyard/...>, and only what they declare exported).
#define TRAINYARD_PLUGIN_API_VERSION 6

// The yaml-cpp the plugin was compiled against: its types (YAML::Node) cross the boundary in the
// option API, so it must be the engine's. The SDK's CMake package sets it from the yaml-cpp it
// finds (find_package(Trainyard)).
#ifndef TRAINYARD_YAML_CPP_VERSION
#error \
    "TRAINYARD_YAML_CPP_VERSION is not set: build the plugin with the SDK's CMake package (find_package(Trainyard) and trainyard_add_plugin, docs/plugins.md)"
#endif

#define TRAINYARD_PLUGIN_STRING_(x) #x
#define TRAINYARD_PLUGIN_STRING(x) TRAINYARD_PLUGIN_STRING_(x)

// What the library was built with: the plugin API, the LibTorch version, the C++ standard
// library's string ABI and yaml-cpp's version. A plugin and the trainyard that loads it must agree
// on all four: the public headers hand std::string, std::function, torch::Tensor and YAML::Node
// across the boundary.
#define TRAINYARD_PLUGIN_STAMP \
  "trainyard-plugin api=" TRAINYARD_PLUGIN_STRING(TRAINYARD_PLUGIN_API_VERSION)        \
  " torch=" TRAINYARD_PLUGIN_STRING(TORCH_VERSION_MAJOR) "." TRAINYARD_PLUGIN_STRING(  \
      TORCH_VERSION_MINOR) "." TRAINYARD_PLUGIN_STRING(TORCH_VERSION_PATCH)            \
  " cxx11-abi=" TRAINYARD_PLUGIN_STRING(_GLIBCXX_USE_CXX11_ABI)                        \
  " yaml-cpp=" TRAINYARD_YAML_CPP_VERSION

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
