// The registry: every component that YAML names — models, datasets, optimizers, schedulers,
// precisions, strategies — is registered here once, by name, with its options declared once.
// The registry itself needs no LibTorch: the config layer validates against it, and the
// components (which do need LibTorch) register their factories into it at start-up
// (components/builtin.cpp). Duplicate names fail at registration; unknown names list the known.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/options.h"
#include "trainyard/task.h"

// Exported by trainyard-engine to the plugins it loads (the rest of trainyard is hidden).
#pragma GCC visibility push(default)

namespace trainyard {

enum class ComponentKind { model, dataset, optimizer, scheduler, precision, strategy };

const char* to_string(ComponentKind kind);
const std::vector<ComponentKind>& all_component_kinds();

// What the rest of the run needs to know about a component without building it: the validator,
// the controller and the engine ask these instead of comparing names. Each kind has its own, which
// each component declares when it registers (a function of its decoded options).

// What validation should say about the files a model's or a dataset's options name, found without
// building it.
struct FileChecks {
  // What is wrong (a missing root, a folder without its expected files): option key -> the problem
  // and its fix. Validation refuses the run with each.
  std::vector<std::pair<std::string, std::string>> problems{};
  // What is worth saying that is not wrong (a class without validation images): printed as notes
  // by validate, run and submit.
  std::vector<std::string> notes{};
};

struct ModelCapabilities {
  int64_t image_size = 0;            // the input resolution images are resized to; 0: no images
  int64_t max_positions = 0;         // the longest sequence it reads; 0: no sequences
  int64_t num_classes = 0;           // classes of its head; 0: unknown
  int64_t vocab_size = 0;            // token embeddings; 0: none or unknown
  Task task = Task::classification;  // what it is trained for (trainyard/task.h)
  // Why runtime.compile: cuda-graphs cannot capture its forward, with the fix; empty when it can
  // (validation refuses the combination with this reason).
  std::string cuda_graphs_refusal{};
  FileChecks files{};
};

struct DatasetCapabilities {
  int64_t num_classes = 0;  // of its labels; 0: unknown
  int64_t vocab_size = 0;   // its tokenizer's; 0: none or unknown
  int64_t max_length = 0;   // the longest sequence it yields; 0: no sequences
  // Batches of varying shape (dynamic padding); CUDA graphs capture one shape.
  bool varying_shapes = false;
  Task task = Task::classification;  // what its batches are for; the model's must be the same
  FileChecks files{};
};

// The rule a sequence dataset and its model share: a sample of `length` tokens (the dataset's
// option `key`, "dataset.max_length") fits a model that reads `max_positions` (0: any length).
// The message when it does not fit, "" when it does: validation and the datasets both ask here.
inline std::string sequence_beyond_model(const std::string& key, int64_t length,
                                         int64_t max_positions) {
  if (max_positions <= 0 || length <= max_positions) return "";
  return key + " " + std::to_string(length) + " is longer than the model's max_positions " +
         std::to_string(max_positions) + "; lower " + key + " or raise model.max_positions";
}

struct OptimizerCapabilities {
  bool steps_on_device = false;  // its step and learning rate stay on the device (CUDA graphs)
};

struct SchedulerCapabilities {};

struct PrecisionCapabilities {
  // A dynamic loss scale (16-mixed), whose overflow flag an optimizer that does not step on the
  // device reads on the host to skip a step.
  bool loss_scaling = false;
  // Parameters and optimizer state in float16 (16-true), where an eps under 6e-8 rounds to 0.
  bool float16_state = false;
};

struct StrategyCapabilities {
  bool multi_process = false;  // one process per device (the launcher starts ranks)
  // Its ranks can run micro-batches apart and then synchronise the gradients, so they can agree on
  // train.micro_batch_size: auto's halvings.
  bool agrees_on_micro_batch = false;
  // Each rank holds 1/N of the gradients and optimizer state (zero2, fsdp), and of the parameters
  // (fsdp): what the memory forecast divides.
  bool shards_gradients = false;
  bool shards_parameters = false;
};

// A kind's capabilities, as the registry keeps them: the one of the entry's kind.
using AnyCapabilities =
    std::variant<ModelCapabilities, DatasetCapabilities, OptimizerCapabilities,
                 SchedulerCapabilities, PrecisionCapabilities, StrategyCapabilities>;

// The kind whose capabilities `Caps` are.
template <class Caps>
constexpr ComponentKind kind_of_capabilities() {
  if constexpr (std::is_same_v<Caps, ModelCapabilities>)
    return ComponentKind::model;
  else if constexpr (std::is_same_v<Caps, DatasetCapabilities>)
    return ComponentKind::dataset;
  else if constexpr (std::is_same_v<Caps, OptimizerCapabilities>)
    return ComponentKind::optimizer;
  else if constexpr (std::is_same_v<Caps, SchedulerCapabilities>)
    return ComponentKind::scheduler;
  else if constexpr (std::is_same_v<Caps, PrecisionCapabilities>)
    return ComponentKind::precision;
  else if constexpr (std::is_same_v<Caps, StrategyCapabilities>)
    return ComponentKind::strategy;
  else
    static_assert(sizeof(Caps) == 0, "describe must return a kind's capabilities");
}

// A kind's capabilities when its component declares none.
AnyCapabilities default_capabilities(ComponentKind kind);

// A component chosen by name, with its resolved options (every option, defaults included).
struct ComponentChoice {
  std::string name{};
  ConfigTree options{};
};

// ... with what those options make it capable of (a run's components: runner/config/run_spec.h).
template <class Caps>
struct Chosen : ComponentChoice {
  Caps capabilities{};
};

struct ComponentEntry {
  ComponentKind kind = ComponentKind::model;
  std::string name{};
  std::string help{};
  std::vector<OptionInfo> options{};
  // The component's capabilities under resolved options (those `resolve` returns): the type of
  // its kind's.
  std::function<AnyCapabilities(const ConfigTree& resolved)> capabilities{};
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
  // e.g. ModelPtr(const ModelContext&). `describe` (e.g. ModelCapabilities(const Opts&)) says
  // what the component can do, in its kind's capabilities; without it, nothing. Throws
  // std::logic_error on a duplicate name, or capabilities of another kind.
  template <class Signature, class Opts, class Build>
  void add(ComponentKind kind, std::string name, std::string help, OptionSet<Opts> options,
           Build build) {
    add_entry<Signature>(kind, std::move(name), std::move(help), std::move(options),
                         std::move(build),
                         [kind](const Opts&) { return default_capabilities(kind); });
  }
  template <class Signature, class Opts, class Build, class Describe>
  void add(ComponentKind kind, std::string name, std::string help, OptionSet<Opts> options,
           Build build, Describe describe) {
    using Caps = std::invoke_result_t<Describe, const Opts&>;
    if (kind_of_capabilities<Caps>() != kind)
      throw std::logic_error(std::string(to_string(kind)) + " '" + name +
                             "' describes itself with another kind's capabilities");
    add_entry<Signature>(kind, std::move(name), std::move(help), std::move(options),
                         std::move(build), [describe = std::move(describe)](const Opts& opts) {
                           return AnyCapabilities(describe(opts));
                         });
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
  template <class Signature, class Opts, class Build, class Describe>
  void add_entry(ComponentKind kind, std::string name, std::string help, OptionSet<Opts> options,
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

  void insert(ComponentEntry entry);

  std::vector<ComponentEntry> entries_;
};

// Checks that `name` is a registered component of `kind`. On failure adds a diagnostic at `origin`:
// "unknown" with the known names and a "did you mean". Returns the entry or nullptr.
const ComponentEntry* lookup_component(const Registry& registry, ComponentKind kind,
                                       const std::string& name, const std::string& key,
                                       const Origin& origin, Diagnostics& diagnostics);

}  // namespace trainyard
#pragma GCC visibility pop
