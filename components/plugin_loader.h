// Plugins: shared libraries built outside this tree (against the installed SDK, docs/plugins.md)
// that register components into the registry through one entry point (trainyard/plugin.h).
//
// Loading one is a sequence of checks, each failing with a UserError (exit 2) that names the file
// and the fix, before the next step can crash: the file exists; it is an ELF shared library for
// this machine; it carries a plugin stamp; the stamp's plugin API, LibTorch version and C++ ABI are
// this binary's (read from the file, before any of the library's code runs); it loads (dlopen:
// every symbol it needs is there); it has the entry point; the entry point returns; every name it
// registered is free. Only then do its components join the registry. A library is loaded once per
// process, and never unloaded: the registry holds functions that live in it.
//
// No LibTorch here: the stamp this binary compares against is given by the one that links it
// (components/builtin.h, plugin_loader()).
#pragma once

#include <string>
#include <vector>

#include "trainyard/registry.h"

namespace trainyard {

// A plugin as a run's resolved config records it: where it was loaded from and what its bytes were.
struct PluginRef {
  std::string path;    // absolute
  std::string sha256;  // of the library file, in hex
};

struct LoadedPlugin {
  PluginRef ref;
  std::vector<std::string> components;  // "model 'mlp'", kind by kind
};

class PluginLoader {
 public:
  // `registry`: the components before any plugin (the built-in ones). `host_stamp`: this binary's
  // TRAINYARD_PLUGIN_STAMP.
  PluginLoader(Registry registry, std::string host_stamp);

  // Loads the library at `path` (made absolute, symbolic links resolved) and registers its
  // components, or returns it when it is loaded already. With `expected_sha256`, a file of other
  // bytes is refused before any of its code runs. Throws UserError naming the library and the fix.
  const LoadedPlugin& load(const std::string& path, const std::string& expected_sha256 = "");

  const Registry& registry() const { return registry_; }
  const std::vector<LoadedPlugin>& loaded() const { return loaded_; }

  // Plugins named on the command line (--plugin): every experiment this process reads gets them.
  void add_command_line_plugin(const std::string& path);
  const std::vector<std::string>& command_line_plugins() const { return command_line_; }

 private:
  Registry registry_;
  std::string host_stamp_;
  std::vector<LoadedPlugin> loaded_;
  std::vector<std::string> command_line_;
};

// "plugin PATH changed after this run was configured (sha256 was WAS, is now IS)..."
std::string changed_plugin_message(const std::string& path, const std::string& was,
                                   const std::string& is);

// The stamp TRAINYARD_PLUGIN wrote into the ELF shared library `path` (its .trainyard_plugin
// section); "" when it has none. Throws UserError when the file is not a readable ELF shared
// library for this machine.
std::string read_plugin_stamp(const std::string& path);

}  // namespace trainyard
