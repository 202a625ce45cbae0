// The registry: every component that YAML names — models, datasets, optimizers, schedulers,
// precisions, strategies — is registered here once, by name, with its options declared once.
// The registry itself needs no LibTorch: the config layer validates against it, and the
// components (which do need LibTorch) register their factories into it at start-up
// (components/builtin.cpp). Duplicate names fail at registration; unknown names list the known.
#pragma once

#include <any>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "config/options.h"

namespace trainyard {

enum class ComponentKind { model, dataset, optimizer, scheduler, precision, strategy };

const char* to_string(ComponentKind kind);
const std::vector<ComponentKind>& all_component_kinds();

// What the rest of the run needs to know about a component without building it: the validator,
// the controller and the engine ask these instead of comparing names. Each component declares its
// own when it registers (a function of its decoded options); what does not apply to a kind stays 0.
struct Capabilities {
  // strategy: one process per device (the launcher starts ranks)
  bool multi_process = false;
  // strategy (multi-process): its ranks can run micro-batches apart and then synchronise the
  // gradients, so they can agree on train.micro_batch_size: auto's halvings
  bool agrees_on_micro_batch = false;
  // optimizer: its step and learning rate stay on the device (what CUDA graphs need)
  bool steps_on_device = false;
  int64_t image_size = 0;     // model: the input resolution images are resized to; 0: no images
  int64_t max_positions = 0;  // model: the longest sequence it reads; 0: no sequences
  int64_t num_classes = 0;    // model: classes of its head; dataset: of its labels; 0: unknown
  int64_t vocab_size = 0;     // model: token embeddings; dataset: its tokenizer's; 0: none/unknown
  int64_t max_length = 0;     // dataset: the longest sequence it yields; 0: no sequences
  // dataset: batches of varying shape (dynamic padding); CUDA graphs capture one shape
  bool varying_shapes = false;
  // model: why runtime.compile: cuda-graphs cannot capture its forward, with the fix; empty when
  // it can (validation refuses the combination with this reason).
  std::string cuda_graphs_refusal{};
  // What is wrong with the files the options name, found without building the component (a
  // missing root, a folder without its expected files): option key -> the problem and its fix.
  std::vector<std::pair<std::string, std::string>> problems{};
  // What validation should say about them that is not wrong (a class without validation images):
  // printed as notes by validate, run and submit.
  std::vector<std::string> notes{};
  // model: what it is trained for — "" (classification: logits per sample against class
  // indices) or "causal-lm" (logits per position against the next tokens); dataset: the batches
  // it yields, the same words. Validation refuses a model and a dataset of different tasks.
  std::string task{};
};

// A component chosen by name, with its resolved options (every option, defaults included) and
// what those options make it capable of.
struct ComponentChoice {
  std::string name{};
  ConfigTree options{};
  Capabilities capabilities{};
};

struct ComponentEntry {
  ComponentKind kind = ComponentKind::model;
  std::string name{};
  std::string help{};
  std::vector<OptionInfo> options{};
  // The component's capabilities under resolved options (those `resolve` returns).
  std::function<Capabilities(const ConfigTree& resolved)> capabilities{};
  // Validates a config section ("model.*" without the prefix) and returns every option with its
  // value, defaults included. "name" and the `reserved` keys belong to the caller.
  std::function<ConfigTree(const ConfigTree& section, const std::string& prefix,
                           const Origin& section_origin, const std::vector<std::string>& reserved,
                           Diagnostics&)>
      resolve{};
  std::any factory{};  // std::function<Product(const ConfigTree& resolved, Args...)>
  // The plugin library that registered it (components/plugins.h); empty for a built-in one.
  std::string library{};
};

class Registry {
  // Factory<Product(Context...)>::Function builds a Product from resolved options and context.
  template <class Signature>
  struct Factory;
  template <class Product, class... Context>
  struct Factory<Product(Context...)> {
    using Function = std::function<Product(const ConfigTree&, Context...)>;
    template <class Opts, class Build>
    static Function make(const OptionSet<Opts>& options, Build build, const std::string& where) {
      return [options, build = std::move(build), where](const ConfigTree& resolved,
                                                        Context... context) {
        Diagnostics diagnostics;
        Opts opts = options.decode(resolved, "", where, {}, diagnostics, {"name"});
        diagnostics.throw_if_any();
        return Product(build(opts, context...));
      };
    }
  };

 public:
  // Registers `name`: its options, declared once, and a function that builds the product from
  // the decoded options plus per-kind context. `Signature` is the kind's product and context,
  // e.g. ModelPtr(const ModelContext&). `describe` (Capabilities(const Opts&)) says what the
  // component can do; without it, nothing. Throws std::logic_error on a duplicate name.
  template <class Signature, class Opts, class Build>
  void add(ComponentKind kind, std::string name, std::string help, OptionSet<Opts> options,
           Build build) {
    add<Signature>(kind, std::move(name), std::move(help), std::move(options), std::move(build),
                   [](const Opts&) { return Capabilities{}; });
  }
  template <class Signature, class Opts, class Build, class Describe>
  void add(ComponentKind kind, std::string name, std::string help, OptionSet<Opts> options,
           Build build, Describe describe) {
    std::string where = std::string(to_string(kind)) + " '" + name + "'";
    ComponentEntry entry{
        .kind = kind, .name = name, .help = std::move(help), .options = options.describe()};
    entry.capabilities = [options, where,
                          describe = std::move(describe)](const ConfigTree& resolved) {
      Diagnostics diagnostics;
      Opts opts = options.decode(resolved, "", where, {}, diagnostics, {"name"});
      diagnostics.throw_if_any();
      return describe(opts);
    };
    entry.resolve = [options, where](const ConfigTree& section, const std::string& prefix,
                                     const Origin& origin, const std::vector<std::string>& reserved,
                                     Diagnostics& diagnostics) {
      std::vector<std::string> ignore = reserved;
      ignore.push_back("name");
      Opts opts = options.decode(section, prefix, where, origin, diagnostics, ignore);
      return options.encode(opts, "", origin);
    };
    entry.factory = Factory<Signature>::make(options, std::move(build), where);
    insert(std::move(entry));
  }

  const ComponentEntry* find(ComponentKind kind, const std::string& name) const;
  std::vector<const ComponentEntry*> entries(ComponentKind kind) const;
  std::vector<std::string> names(ComponentKind kind) const;  // registered ones, in order

  // Every entry of `staged` (what one plugin's entry point registered), each marked as registered
  // by `library`. The plugin loader checks for clashes first; a clash left here is a logic_error.
  void adopt(Registry staged, const std::string& library);

  // Builds component `name` of `kind` from its resolved options, with the `Signature` it was
  // registered with; each kind's header wraps this in a typed helper (build_model, ...).
  template <class Signature, class... Args>
  auto build(ComponentKind kind, const std::string& name, const ConfigTree& options,
             Args&&... args) const {
    const ComponentEntry* entry = find(kind, name);
    if (entry == nullptr)
      throw UserError(std::string("unknown ") + to_string(kind) + " '" + name + "'");
    const auto& factory =
        std::any_cast<const typename Factory<Signature>::Function&>(entry->factory);
    return factory(options, std::forward<Args>(args)...);
  }

 private:
  void insert(ComponentEntry entry);

  std::vector<ComponentEntry> entries_;
};

// Checks that `name` is a registered component of `kind`. On failure adds a diagnostic at `origin`:
// "unknown" with the known names and a "did you mean". Returns the entry or nullptr.
const ComponentEntry* lookup_component(const Registry& registry, ComponentKind kind,
                                       const std::string& name, const std::string& key,
                                       const Origin& origin, Diagnostics& diagnostics);

}  // namespace trainyard
