// Batches onto the training device without waiting for the training step: on CUDA the copy from
// the loader's pinned memory and the batch's device-side work (the image transform, dtype casts)
// run on a stream of their own, so the next batch's copy and transform overlap the step queued
// before it — on the compute stream (and with a CUDA graph, whose replay the compute stream waits
// on) they would queue behind it. The usual prefetching recipe (Apex's data_prefetcher): the
// compute stream waits on an event recorded after the batch's work, and every tensor of the batch
// is marked used on the compute stream (record_stream), so the caching allocator does not hand its
// memory to a later batch on the feed's stream before the compute stream is done with it. On the
// CPU the batch is prepared where it stands.
#pragma once

#include <functional>
#include <optional>

#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

#include "trainyard/batch.h"

namespace trainyard {

class DeviceFeed {
 public:
  explicit DeviceFeed(const torch::Device& device);

  // Runs `prepare` (the copy to the device and the batch's device-side work) on the feed's stream
  // and returns its batch, ready for the current stream: work queued there from now on runs after
  // the batch's. The host does not wait for the device. Drop the batch only after the work that
  // reads it is queued (on the current stream, or on one it waits for): its memory is reused after
  // what the current stream holds at that moment.
  Batch next(const std::function<Batch()>& prepare);

  // The feed's stream (CUDA only): tests check that it runs ahead of the compute stream.
  const std::optional<c10::cuda::CUDAStream>& stream() const { return stream_; }

 private:
  std::optional<c10::cuda::CUDAStream> stream_;
  c10::cuda::CUDAEvent ready_;  // recorded after each batch's work on the feed's stream
};

}  // namespace trainyard
