// Lightning's names, understood: an experiment file written with a Lightning user's habits
// (`accelerator: gpu`, `precision: 16`, `devices: auto`, `strategy: deepspeed_stage_2`,
// `train.lr`) means what it would mean there, or is refused with the exact name to write. One
// table for all of it, applied to each run's merged tree before it is validated. Internal to
// runner/config.
#pragma once

#include <string>
#include <vector>

#include "trainyard/config_tree.h"
#include "trainyard/diagnostics.h"
#include "trainyard/registry.h"

namespace trainyard {

// Rewrites the values Lightning spells otherwise (accelerator gpu -> cuda; precision 16, bf16, 32
// -> 16-mixed, bf16-mixed, 32-true; devices auto or -1 -> every device of the accelerator on this
// machine) and refuses, at its place, each key another tool puts elsewhere (train.lr ->
// train.optimizer.lr), removing it so that it is said once. What Lightning says of a legacy name
// goes to `notes` ("file:3:5: note: ...").
void translate_lightning_names(ConfigTree& tree, std::vector<std::string>& notes,
                               Diagnostics& diagnostics);

// For a component name another tool uses ("deepspeed_stage_2"): the name to write here and why
// ("'zero2'? (DeepSpeed stage 2: ...)"); "" when there is none.
std::string lightning_component_hint(ComponentKind kind, const std::string& name);

// GPUs this machine shows a process: CUDA_VISIBLE_DEVICES's entries when it is set, otherwise the
// NVIDIA driver's (/proc/driver/nvidia/gpus). Without loading CUDA: validation runs anywhere.
int visible_gpu_count();

}  // namespace trainyard
