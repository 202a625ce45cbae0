// runtime.sync_debug arms LibTorch's own check. Without a GPU nothing synchronises, but the check
// itself runs anywhere: this proves the guard reaches the copy of the mode that LibTorch reads
// (a static inside an inline function, shared between this binary and libc10_cuda).
#include <gtest/gtest.h>

#include "runner/engine/sync_debug.h"

namespace trainyard {
namespace {

TEST(SyncDebugTest, TheGuardArmsLibTorchsCheckAndDisarmsItAfter) {
  EXPECT_NO_THROW(c10::cuda::warn_or_error_on_sync());
  {
    SyncDebugGuard guard(c10::cuda::SyncDebugMode::L_ERROR);
    try {
      c10::cuda::warn_or_error_on_sync();  // what every synchronising LibTorch operation calls
      FAIL() << "the check did not fire";
    } catch (const c10::Error& e) {
      // The trainer recognises the refusal by this text, to add where it happened.
      EXPECT_NE(std::string(e.what_without_backtrace()).find(kSyncDebugMessage), std::string::npos)
          << e.what_without_backtrace();
    }
  }
  EXPECT_NO_THROW(c10::cuda::warn_or_error_on_sync());
}

TEST(SyncDebugTest, OnlyCudaRunsAreChecked) {
  EXPECT_EQ(SyncDebugGuard::mode(SyncDebug::error, torch::kCPU),
            c10::cuda::SyncDebugMode::L_DISABLED);
  EXPECT_EQ(SyncDebugGuard::mode(SyncDebug::error, torch::Device(torch::kCUDA, 0)),
            c10::cuda::SyncDebugMode::L_ERROR);
  EXPECT_EQ(SyncDebugGuard::mode(SyncDebug::warn, torch::Device(torch::kCUDA, 0)),
            c10::cuda::SyncDebugMode::L_WARN);
  EXPECT_EQ(SyncDebugGuard::mode(SyncDebug::off, torch::Device(torch::kCUDA, 0)),
            c10::cuda::SyncDebugMode::L_DISABLED);
}

}  // namespace
}  // namespace trainyard
