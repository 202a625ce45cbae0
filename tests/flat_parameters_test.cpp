// FlatParameters, the layout under zero2 and fsdp: parameters live in one padded flat buffer whose
// memory can be released and gathered back while autograd's saved tensors still see it.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "components/strategy/flat_parameters.h"

namespace trainyard {
namespace {

TEST(FlatParameters, ParametersLiveInOnePaddedBufferSplitIntoEqualChunks) {
  torch::manual_seed(0);
  torch::Tensor a = torch::randn({3, 2}, torch::requires_grad()),
                b = torch::randn({5}, torch::requires_grad());
  const torch::Tensor a0 = a.detach().clone(), b0 = b.detach().clone();
  FlatParameters flat({a, b}, /*rank=*/1, /*world_size=*/4);
  EXPECT_EQ(flat.flat().numel(), 12);  // 11 elements padded to a multiple of 4
  EXPECT_EQ(flat.chunk_numel(), 3);
  EXPECT_TRUE(torch::equal(a, a0));                               // values kept
  EXPECT_EQ(a.data_ptr<float>(), flat.flat().data_ptr<float>());  // and now inside the buffer
  EXPECT_TRUE(torch::equal(flat.chunk(flat.flat()), flat.flat().narrow(0, 3, 3)));
  std::vector<torch::Tensor> parts = flat.split(flat.flat());
  EXPECT_TRUE(torch::equal(parts[1], b0));
  EXPECT_TRUE(torch::equal(flat.join(parts), flat.flat()));
  EXPECT_TRUE(a.is_leaf() && a.requires_grad());  // still the same autograd parameter
}

TEST(FlatParameters, ReleasedMemoryGatheredBackIsWhatBackwardReads) {
  torch::Tensor w = torch::full({2, 2}, 2.0, torch::requires_grad());
  FlatParameters flat({w}, 0, 1);
  torch::Tensor x = torch::ones({1, 2}, torch::requires_grad());
  torch::Tensor y = torch::mm(x, w).sum();  // saves w for x's gradient
  const torch::Tensor values = flat.flat().clone();
  flat.release();
  EXPECT_FALSE(flat.allocated());
  EXPECT_EQ(flat.flat().storage().nbytes(), 0u);
  EXPECT_EQ(w.sizes(), torch::IntArrayRef({2, 2}));  // the shape stays
  flat.allocate();
  {
    torch::NoGradGuard no_grad;
    flat.flat().copy_(values * 3);  // "gathered": now 6 everywhere
  }
  y.backward();
  EXPECT_TRUE(
      torch::allclose(x.grad(), torch::full({1, 2}, 12.0)));  // d/dx of x·W uses the gathered W
  EXPECT_TRUE(torch::allclose(w.grad(), torch::ones({2, 2})));
  torch::Tensor gradients = flat.take_gradients(torch::kFloat);
  EXPECT_FALSE(w.grad().defined());  // handed over
  EXPECT_TRUE(torch::allclose(gradients, torch::ones({4})));
}

}  // namespace
}  // namespace trainyard
