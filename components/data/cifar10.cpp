#include "components/data/cifar10.h"

#include <filesystem>

#include <fmt/format.h>

#include "common/text.h"
#include "components/data/cifar10_file.h"
#include "components/data/image_batch.h"

namespace trainyard {

namespace {

constexpr int64_t kClasses = Cifar10Records::kClasses;

// Images and labels held in memory as read from the files (170 MB for all of CIFAR-10).
// uint8 images as stored; image_transform() makes them model input.
class Cifar10Images : public Dataset {
 public:
  Cifar10Images(torch::Tensor images, torch::Tensor labels)
      : images_(std::move(images)), labels_(std::move(labels)) {}
  int64_t size() const override { return images_.size(0); }
  Batch get_batch(const std::vector<int64_t>& indices) const override {
    return {gather_rows(images_, indices), gather_rows(labels_, indices), {}};
  }

 private:
  torch::Tensor images_, labels_;
};

std::string data_hint(const std::string& root) {
  return fmt::format(
      "dataset.root ('{}') must be the folder 'cifar-10-batches-bin' of the CIFAR-10 binary "
      "version (cifar-10-binary.tar.gz), holding data_batch_1.bin ... data_batch_5.bin and "
      "test_batch.bin",
      root);
}

// What validation can know of a CIFAR-10 root without reading it: its ten classes, and whether
// the folder and its six files are there.
DatasetCapabilities describe_cifar10(const Cifar10Options& o) {
  namespace fs = std::filesystem;
  DatasetCapabilities capabilities{.num_classes = kClasses};
  std::error_code ec;
  if (!fs::is_directory(o.root, ec)) {
    capabilities.files.problems.emplace_back(
        "root", fmt::format("cifar10: no such folder '{}'; {}", o.root, data_hint(o.root)));
    return capabilities;
  }
  std::vector<std::string> missing;
  for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                           "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"})
    if (!fs::exists(fs::path(o.root) / name, ec)) missing.push_back(name);
  if (!missing.empty())
    capabilities.files.problems.emplace_back(
        "root",
        fmt::format("cifar10: '{}' lacks {}; {}", o.root, join(missing), data_hint(o.root)));
  return capabilities;
}

}  // namespace

void read_cifar10_file(const std::string& path, torch::Tensor& images, torch::Tensor& labels) {
  // The tensors share the records' memory (no copy of 30 MB a file); the last to go frees it.
  auto records = std::make_shared<Cifar10Records>(read_cifar10_records(path));
  constexpr int64_t side = Cifar10Records::kSide;
  images = torch::from_blob(
      records->images.data(), {records->count, 3, side, side}, [records](void*) {}, torch::kUInt8);
  labels = torch::from_blob(
      records->labels.data(), {records->count}, [records](void*) {}, torch::kLong);
}

void register_cifar10(Registry& registry) {
  OptionSet<Cifar10Options> options;
  options
      .add("root", &Cifar10Options::root, "folder with the CIFAR-10 binary files",
           names_data(required()))
      .add("val_size", &Cifar10Options::val_size,
           "last training images held out for validation (the studies: 5000)", at_least(1))
      .add("image_size", &Cifar10Options::image_size,
           "resize images to this size (bilinear); 0 = the model's image_size", at_least(0))
      .add("normalize", &Cifar10Options::normalize,
           "none: pixels in [0, 1], as the studies; imagenet: ImageNet mean/std",
           one_of({"none", "imagenet"}))
      .add("augment", &Cifar10Options::augment,
           "training augmentation: none (the studies), flip, crop-flip",
           one_of({"none", "flip", "crop-flip"}));
  registry.add<DataSplits(const DataContext&)>(
      ComponentKind::dataset, "cifar10", "CIFAR-10, binary version; the reference studies' split",
      options,
      [](const Cifar10Options& o, const DataContext& context) {
        namespace fs = std::filesystem;
        std::error_code ec;
        if (!fs::is_directory(o.root, ec))
          throw UserError(
              fmt::format("cifar10: no such folder '{}'; {}", o.root, data_hint(o.root)));
        std::vector<torch::Tensor> images, labels;
        for (int i = 1; i <= 5; ++i) {
          std::string path = (fs::path(o.root) / fmt::format("data_batch_{}.bin", i)).string();
          if (!fs::exists(path, ec))
            throw UserError(fmt::format("cifar10: missing {}; {}", path, data_hint(o.root)));
          torch::Tensor x, y;
          read_cifar10_file(path, x, y);
          images.push_back(x);
          labels.push_back(y);
        }
        std::string test_path = (fs::path(o.root) / "test_batch.bin").string();
        if (!fs::exists(test_path, ec))
          throw UserError(fmt::format("cifar10: missing {}; {}", test_path, data_hint(o.root)));
        torch::Tensor test_images, test_labels;
        read_cifar10_file(test_path, test_images, test_labels);

        auto train_all = std::make_shared<Cifar10Images>(torch::cat(images), torch::cat(labels));
        const int64_t n = train_all->size();
        if (o.val_size >= n)
          throw UserError(
              fmt::format("cifar10: val_size {} leaves no training images: the training "
                          "files in '{}' hold {} images",
                          o.val_size, o.root, n));
        DataSplits splits;
        splits.train = std::make_shared<Subset>(train_all, index_range(0, n - o.val_size));
        splits.validation = std::make_shared<Subset>(train_all, index_range(n - o.val_size, n));
        splits.test = std::make_shared<Cifar10Images>(test_images, test_labels);
        splits.num_classes = kClasses;
        splits.details = {{"dataset_classes",
                           "airplane=0, automobile=1, bird=2, cat=3, deer=4, dog=5, frog=6, "
                           "horse=7, ship=8, truck=9"}};  // the names of batches.meta
        const ImageOptions image{.size = o.image_size > 0 ? o.image_size : context.image_size,
                                 .normalize = o.normalize,
                                 .augment = o.augment};
        splits.train_transform = image_transform(image, /*training=*/true);
        splits.eval_transform = image_transform(image, /*training=*/false);
        return splits;
      },
      describe_cifar10);
}

}  // namespace trainyard
