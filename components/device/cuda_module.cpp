// libtrainyard_cuda.so: the engine's calls into libtorch_cuda (components/device/cuda_module.h). It
// holds no state of its own and links nothing of trainyard but this file: LibTorch's CUDA side is
// what it brings into the process.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#ifdef TRAINYARD_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <stdexcept>

#include "components/device/cuda_module.h"

namespace trainyard {

namespace {

class LibTorchCudaGraph : public CudaGraph {
 public:
  // Thread-local mode: the loader's threads may allocate pinned memory meanwhile; autograd's
  // device thread still launches onto this stream, so backward is captured.
  void begin() override { graph_.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal); }
  void end() override { graph_.capture_end(); }
  void replay() override { graph_.replay(); }

 private:
  at::cuda::CUDAGraph graph_;
};

class LibTorchCuda : public CudaModule {
 public:
  std::string device_name(int index) const override {
    return at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index))->name;
  }
  std::unique_ptr<CudaGraph> new_graph() const override {
    return std::make_unique<LibTorchCudaGraph>();
  }
#ifdef TRAINYARD_NCCL
  bool has_nccl() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> nccl_group(const c10::intrusive_ptr<c10d::Store>& store,
                                               int rank, int world_size, int device,
                                               std::chrono::milliseconds timeout) const override {
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
  }
#else
  bool has_nccl() const override { return false; }
  c10::intrusive_ptr<c10d::Backend> nccl_group(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                               int, std::chrono::milliseconds) const override {
    throw std::logic_error("nccl_group: this module was built without NCCL");
  }
#endif
};

}  // namespace

}  // namespace trainyard

// The module's one entry point, looked up by name (components/device/cuda_loader.cpp).
extern "C" const trainyard::CudaModule* trainyard_cuda_module() {
  static const trainyard::LibTorchCuda module;
  return &module;
}
