#include "runner/config/lightning_names.h"

#include <cstdlib>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "common/text.h"

namespace trainyard {

namespace {

// Keys another tool (Lightning's Trainer, a training script's argparse) puts where this one does
// not, with where they are here.
const std::map<std::string, std::string> kMovedKeys = {
    {"train.lr", "train.optimizer.lr"},
    {"train.learning_rate", "train.optimizer.lr"},
    {"train.weight_decay", "train.optimizer.weight_decay"},
    {"train.max_epochs", "train.epochs"},
    {"train.accumulate_grad_batches", "train.grad_accum"},
    {"train.gradient_clip_val", "train.clip_grad_norm"},
    {"train.log_every_n_steps", "train.log_every"},
    {"train.warmup_steps", "train.scheduler.warmup_steps"},
    {"train.precision", "runtime.precision"},
    {"train.devices", "runtime.devices"},
    {"train.accelerator", "runtime.accelerator"},
    {"train.strategy", "runtime.strategy"},
    {"runtime.num_workers", "runtime.data_workers"},
    {"runtime.num_nodes", "the command line: trainyard run --nnodes N"},
};

// Lightning's precision aliases (lightning.fabric.connector: _PRECISION_INPUT_STR_ALIAS), what
// they mean there, and whether Lightning warns about them.
struct PrecisionAlias {
  const char* name;
  const char* meaning;
  bool legacy;
};
const PrecisionAlias kPrecisionAliases[] = {
    {"16", "16-mixed", true}, {"bf16", "bf16-mixed", true}, {"32", "32-true", false}};

std::string note_at(const Origin& origin, const std::string& message) {
  return fmt::format("{}: note: {}", to_string(origin), message);
}

void translate_precision(ConfigTree& tree, std::vector<std::string>& notes,
                         Diagnostics& diagnostics) {
  const ConfigValue* value = tree.find("runtime.precision");
  if (!value || !value->node.IsScalar()) return;
  const std::string written = value->node.Scalar();
  if (written == "64" || written == "64-true" || written == "transformer-engine") {
    diagnostics.error(value->origin,
                      fmt::format("'runtime.precision': {} is not offered here; write one of "
                                  "32-true, bf16-mixed, 16-mixed, bf16-true, 16-true",
                                  written));
    tree.erase("runtime.precision");  // said once: not again as an unknown precision
    return;
  }
  for (const auto& alias : kPrecisionAliases) {
    if (written != alias.name) continue;
    ConfigValue translated = *value;
    translated.node = YAML::Node(alias.meaning);
    // Lightning's own words for the legacy names.
    if (alias.legacy)
      notes.push_back(note_at(value->origin,
                              fmt::format("`precision={}` is supported for historical reasons but "
                                          "its usage is discouraged. Please set your precision to "
                                          "{} instead! (Lightning's words; it is trained as {})",
                                          alias.name, alias.meaning, alias.meaning)));
    tree.set("runtime.precision", translated);
    return;
  }
}

// devices: auto or -1 — every device of the accelerator, counted here and recorded as a number,
// so that the run's identity says how many it trained on.
void translate_devices(ConfigTree& tree, std::vector<std::string>& notes,
                       Diagnostics& diagnostics) {
  const ConfigValue* value = tree.find("runtime.devices");
  if (!value || !value->node.IsScalar()) return;
  const std::string written = value->node.Scalar();
  if (written != "auto" && written != "-1") return;
  const ConfigValue* accelerator_value = tree.find("runtime.accelerator");
  const std::string accelerator = accelerator_value && accelerator_value->node.IsScalar()
                                      ? accelerator_value->node.Scalar()
                                      : "auto";
  int count = 1;
  if (accelerator != "cpu") {
    count = visible_gpu_count();
    if (count == 0 && accelerator == "cuda") {
      diagnostics.error(value->origin,
                        fmt::format("'runtime.devices': {} means every GPU of this machine, and "
                                    "it shows none; write how many (runtime.devices: 4), as a "
                                    "submission from a machine without the GPUs must",
                                    written));
      tree.erase("runtime.devices");  // said once
      return;
    }
    if (count == 0) count = 1;  // accelerator auto on a machine without GPUs: the CPU
  }
  ConfigValue translated = *value;
  translated.node = YAML::Node(count);
  notes.push_back(note_at(value->origin, fmt::format("runtime.devices: {} is {} on this machine "
                                                     "(every device of the accelerator)",
                                                     written, count)));
  tree.set("runtime.devices", translated);
}

}  // namespace

void translate_lightning_names(ConfigTree& tree, std::vector<std::string>& notes,
                               Diagnostics& diagnostics) {
  for (const auto& [key, here] : kMovedKeys) {
    const ConfigValue* value = tree.find(key);
    if (!value)  // train.strategy: {name: ddp} flattens to train.strategy.name
      for (const auto& [k, v] : tree.entries())
        if (k.starts_with(key + ".")) {
          value = &v;
          break;
        }
    if (!value) continue;
    diagnostics.error(value->key_origin,
                      fmt::format("unknown key '{}' (did you mean '{}'?)", key, here));
    tree.erase(key);
  }
  if (const ConfigValue* value = tree.find("runtime.accelerator");
      value && value->node.IsScalar() && value->node.Scalar() == "gpu") {
    ConfigValue translated = *value;  // Lightning's gpu is CUDA on NVIDIA's GPUs
    translated.node = YAML::Node("cuda");
    tree.set("runtime.accelerator", translated);
  }
  translate_precision(tree, notes, diagnostics);
  translate_devices(tree, notes, diagnostics);
}

std::string lightning_component_hint(ComponentKind kind, const std::string& name) {
  if (kind != ComponentKind::strategy) return "";
  struct Hint {
    const char* ours;
    const char* why;
  };
  static const std::map<std::string, Hint> kStrategies = {
      {"deepspeed", {"zero2", "DeepSpeed's ZeRO stage 2"}},
      {"deepspeed_stage_1", {"zero2", "stage 2; stage 1, optimizer state only, is not offered"}},
      {"deepspeed_stage_2", {"zero2", "DeepSpeed stage 2: optimizer state and gradients sharded"}},
      {"deepspeed_stage_2_offload", {"zero2", "stage 2; offloading to the CPU is not offered"}},
      {"deepspeed_stage_3", {"fsdp", "full sharding, as ZeRO stage 3"}},
      {"deepspeed_stage_3_offload",
       {"fsdp", "full sharding; offloading to the CPU is not offered"}},
      {"fsdp_cpu_offload", {"fsdp", "offloading to the CPU is not offered"}},
      {"fsdp_native", {"fsdp", "PyTorch's FSDP"}},
      {"fsdp_full_shard", {"fsdp", "it shards fully"}},
      {"full_shard", {"fsdp", "it shards fully"}},
      {"fsdp2", {"fsdp", "PyTorch's FSDP"}},
      {"ddp_spawn", {"ddp", "every rank is a process of its own"}},
      {"ddp_fork", {"ddp", "every rank is a process of its own"}},
      {"ddp_notebook", {"ddp", "every rank is a process of its own"}},
      {"ddp_find_unused_parameters_true", {"ddp", "PyTorch's DDP"}},
      {"ddp_find_unused_parameters_false", {"ddp", "PyTorch's DDP"}},
      {"dp", {"ddp", "DataParallel is not offered; ddp does its work"}},
      {"auto", {"single", "one device; ddp for several"}},
  };
  const auto it = kStrategies.find(name);
  return it == kStrategies.end() ? "" : fmt::format("'{}'? ({})", it->second.ours, it->second.why);
}
int visible_gpu_count() {
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    int count = 0;
    for (const auto& entry : split(visible, ',')) {
      const std::string id = strip(entry);
      if (id.empty() || id.starts_with("-")) break;  // CUDA stops at the first invalid entry
      ++count;
    }
    return count;
  }
  std::error_code ec;
  int count = 0;
  for (std::filesystem::directory_iterator it("/proc/driver/nvidia/gpus", ec), end;
       !ec && it != end; it.increment(ec))
    ++count;
  return count;
}

}  // namespace trainyard
