// runtime.sync_debug: LibTorch's sync-debug mode held over the parts of the training loop that
// must not make the host wait for the GPU.
#pragma once

#include <string>

#include <c10/cuda/CUDAFunctions.h>
#include <torch/types.h>

#include "runner/config/run_spec.h"

namespace trainyard {

// What LibTorch's check says when it refuses a synchronising operation
// (c10::cuda::warn_or_error_on_sync).
inline constexpr const char* kSyncDebugMessage = "synchronizing CUDA operation";

// runtime.sync_debug: while a guard lives, LibTorch warns about or refuses every operation that
// makes the host wait for the GPU (as torch.cuda.set_sync_debug_mode). The trainer holds one over
// each training step and drops it for the reads it means to make: logging, the epoch's sums.
class SyncDebugGuard {
 public:
  explicit SyncDebugGuard(c10::cuda::SyncDebugMode mode)
      : previous_(c10::cuda::warning_state().get_sync_debug_mode()) {
    c10::cuda::warning_state().set_sync_debug_mode(mode);
  }
  ~SyncDebugGuard() { c10::cuda::warning_state().set_sync_debug_mode(previous_); }
  SyncDebugGuard(const SyncDebugGuard&) = delete;
  SyncDebugGuard& operator=(const SyncDebugGuard&) = delete;

  static c10::cuda::SyncDebugMode mode(SyncDebug option, const torch::Device& device) {
    if (!device.is_cuda() || option == SyncDebug::off) return c10::cuda::SyncDebugMode::L_DISABLED;
    return option == SyncDebug::warn ? c10::cuda::SyncDebugMode::L_WARN
                                     : c10::cuda::SyncDebugMode::L_ERROR;
  }

 private:
  c10::cuda::SyncDebugMode previous_;
};

}  // namespace trainyard
