#include "runner/engine/device_feed.h"

#include <c10/cuda/CUDAGuard.h>

namespace trainyard {

DeviceFeed::DeviceFeed(const torch::Device& device) {
  // High priority: the pool's high-priority streams are handed out apart from the low-priority ones
  // (CudaGraphStep's, NCCL's), so the feed never shares a stream with the step it should overlap;
  // and the next batch's small kernels go first.
  if (device.is_cuda())
    stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device.index());
}

Batch DeviceFeed::next(const std::function<Batch()>& prepare) {
  if (!stream_) return prepare();
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(stream_->device_index());
  Batch batch;
  {
    c10::cuda::CUDAStreamGuard on_feed_stream(*stream_);
    batch = prepare();
    ready_.record(*stream_);
  }
  ready_.block(compute);
  // The batch's memory belongs to the feed's stream; once freed, the allocator would give it to the
  // next batch there at once, while the compute stream (or a graph's stream, which the compute
  // stream waits on) may still read it. Marked used on the compute stream, it waits for that.
  for (const torch::Tensor* tensor : {&batch.inputs, &batch.targets, &batch.attention_mask})
    if (tensor->defined() && tensor->is_cuda()) tensor->record_stream(compute);
  return batch;
}

}  // namespace trainyard
