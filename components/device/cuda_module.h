// The part of LibTorch a CPU run never needs — libtorch_cuda with its kernels and CUDA hooks, and
// through it cuBLAS, cuDNN and NCCL (most of a second and 350 MB to load) — reached through a
// module of its own, libtrainyard_cuda.so beside the executables
// (components/device/cuda_module.cpp), which `trainyard-engine` loads only for a run on CUDA. The
// engine itself links libtorch_cpu, c10 and c10_cuda (streams, events, the caching allocator:
// small, and CUDA-runtime only).
//
// LibTorch looks its CUDA hooks up once per process, at the first CUDA question: a process that
// asked before the module was loaded has no CUDA for good. So the module is loaded first:
// resolve_device and the trainer's setup call load_cuda_if_wanted before anything else touches
// CUDA. A binary that links the module's code itself (the tests) uses it as it is.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace trainyard {

// A CUDA graph (at::cuda::CUDAGraph): the work issued on the current stream between begin() and
// end(), captured in thread-local mode into a private memory pool, and replayed whole.
class CudaGraph {
 public:
  virtual ~CudaGraph() = default;
  virtual void begin() = 0;
  virtual void end() = 0;
  virtual void replay() = 0;
};

// What the module provides. Its version is checked on load: a module from another build is
// refused rather than called through a different layout.
class CudaModule {
 public:
  static constexpr int kVersion = 1;
  virtual ~CudaModule() = default;
  virtual int version() const { return kVersion; }
  virtual std::string device_name(int index) const = 0;
  virtual std::unique_ptr<CudaGraph> new_graph() const = 0;
  // False when the module was built without NCCL (nccl.h was not found beside LibTorch).
  virtual bool has_nccl() const = 0;
  // An NCCL process group of `world_size` ranks over `store`, on `device` (made current first).
  virtual c10::intrusive_ptr<c10d::Backend> nccl_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                       int rank, int world_size, int device,
                                                       std::chrono::milliseconds timeout) const = 0;
};

// The module, loaded on the first call; nullptr when it cannot be, with why in `why`.
const CudaModule* cuda_module(std::string* why = nullptr);

// True when a CUDA driver answers with at least one device, asked through libcuda alone (cuInit,
// cuDeviceGetCount) without loading LibTorch's CUDA side: what `accelerator: auto` decides by.
bool cuda_driver_has_devices();

// The memory of the smallest CUDA device this process sees (CUDA_VISIBLE_DEVICES applies), in
// bytes, asked through libcuda alone (cuDeviceTotalMem) as cuda_driver_has_devices asks; nullopt
// without a driver or a device. What the memory forecast checks against when --device-memory is
// not given.
std::optional<double> cuda_device_memory_bytes();

// Whether a run with this runtime.accelerator trains on CUDA if it can: cuda, or auto on a machine
// whose driver has a device.
bool wants_cuda(const std::string& accelerator);

// Loads the module when wants_cuda(accelerator): before the first CUDA question (see above).
void load_cuda_if_wanted(const std::string& accelerator);

}  // namespace trainyard
