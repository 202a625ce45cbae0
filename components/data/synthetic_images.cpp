#include "components/data/synthetic_images.h"

#include "components/data/image_batch.h"

namespace trainyard {

namespace {

class SyntheticImages : public Dataset {
 public:
  SyntheticImages(const torch::Tensor& patterns, int64_t size, double noise, uint64_t seed) {
    torch::Generator generator = at::detail::createCPUGenerator(seed);
    const int64_t classes = patterns.size(0);
    labels_ = torch::randint(classes, {size}, generator, torch::kLong);
    auto noisy = patterns.index_select(0, labels_) +
                 noise * torch::randn({size, patterns.size(1), patterns.size(2), patterns.size(3)},
                                      generator);
    images_ = noisy.clamp(0, 1).mul(255).round().to(torch::kUInt8);
  }
  int64_t size() const override { return images_.size(0); }
  Batch get_batch(const std::vector<int64_t>& indices) const override {
    return {gather_rows(images_, indices), gather_rows(labels_, indices), {}};
  }

 private:
  torch::Tensor images_, labels_;
};

}  // namespace

void register_synthetic_images(Registry& registry) {
  OptionSet<SyntheticImagesOptions> options;
  options.add("train_size", &SyntheticImagesOptions::train_size, "training images", at_least(1))
      .add("val_size", &SyntheticImagesOptions::val_size, "validation images", at_least(1))
      .add("test_size", &SyntheticImagesOptions::test_size, "test images", at_least(1))
      .add("num_classes", &SyntheticImagesOptions::num_classes, "classes", at_least(2))
      .add("image_size", &SyntheticImagesOptions::image_size,
           "side of the square RGB images; 0 = the model's image_size", at_least(0))
      .add("source_size", &SyntheticImagesOptions::source_size,
           "generate images this size and resize each batch to image_size (as CIFAR-10's 32 -> "
           "224); 0 = image_size",
           at_least(0))
      .add("noise", &SyntheticImagesOptions::noise, "per-pixel noise (std); higher is harder",
           at_least(0))
      .add("seed", &SyntheticImagesOptions::seed, "seed of the data (fixed across runs)",
           at_least(0));
  registry.add<DataSplits(const DataContext&)>(
      ComponentKind::dataset, "synthetic-images",
      "deterministic class-pattern images generated in memory, for quick runs and tests", options,
      [](const SyntheticImagesOptions& o, const DataContext& context) {
        const int64_t side = o.image_size > 0 ? o.image_size : context.image_size;
        if (side <= 0)
          throw UserError(
              "dataset 'synthetic-images': set dataset.image_size (the model has no image_size)");
        torch::Generator generator = at::detail::createCPUGenerator(static_cast<uint64_t>(o.seed));
        // Smooth patterns: random 4x4 colour grids upsampled, so classes differ in layout and
        // colour.
        const int64_t stored = o.source_size > 0 ? o.source_size : side;
        auto coarse = torch::rand({o.num_classes, 3, 4, 4}, generator);
        auto patterns = at::upsample_bilinear2d(coarse, {stored, stored}, false);
        const auto seed = static_cast<uint64_t>(o.seed);
        DataSplits splits;
        splits.train =
            std::make_shared<SyntheticImages>(patterns, o.train_size, o.noise, seed * 3 + 1);
        splits.validation =
            std::make_shared<SyntheticImages>(patterns, o.val_size, o.noise, seed * 3 + 2);
        splits.test =
            std::make_shared<SyntheticImages>(patterns, o.test_size, o.noise, seed * 3 + 3);
        splits.num_classes = o.num_classes;
        splits.train_transform = splits.eval_transform =
            image_transform({side, "none", "none"}, false);
        return splits;
      },
      [](const SyntheticImagesOptions& o) {
        return DatasetCapabilities{.num_classes = o.num_classes};
      });
}

}  // namespace trainyard
