#include "components/data/imagefolder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "common/text.h"
#include "components/data/image_batch.h"
#include "components/data/image_decode.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

struct Sample {
  std::string path;
  int64_t label;
};

// uint8 [3, H, W], as the transforms take images.
torch::Tensor image_tensor(DecodedImage image) {
  return torch::from_blob(image.rgb.data(), {image.height, image.width, 3}, torch::kUInt8)
      .permute({2, 0, 1})
      .contiguous();  // a copy: the pixels' vector ends here
}

class ImageFiles : public Dataset {
 public:
  ImageFiles(std::vector<Sample> samples, int64_t size)
      : samples_(std::move(samples)), size_(size) {}
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  Batch get_batch(const std::vector<int64_t>& indices) const override {
    std::vector<torch::Tensor> images;
    std::vector<int64_t> labels;
    for (int64_t i : indices) {
      const Sample& sample = samples_.at(static_cast<size_t>(i));
      torch::Tensor image = image_tensor(decode_image(sample.path));
      if (image.size(1) != size_ || image.size(2) != size_) {
        // Per image, before batching: images of any size become one batch tensor.
        auto resized =
            at::upsample_bilinear2d(image.unsqueeze(0).to(torch::kFloat), {size_, size_}, false);
        image = resized.squeeze(0).round().clamp(0, 255).to(torch::kUInt8);
      }
      images.push_back(image);
      labels.push_back(sample.label);
    }
    return {torch::stack(images), torch::tensor(labels, torch::kLong), {}};
  }

 private:
  std::vector<Sample> samples_;
  int64_t size_;
};

std::vector<std::string> sorted_subfolders(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<Sample> list_split(const fs::path& dir, const std::vector<std::string>& classes,
                               const std::string& root) {
  std::vector<Sample> samples;
  for (const auto& name : sorted_subfolders(dir)) {
    auto it = std::find(classes.begin(), classes.end(), name);
    if (it == classes.end())
      throw UserError(
          fmt::format("imagefolder: {} is a class folder that train/ lacks; classes: {}",
                      (dir / name).string(), join(classes)));
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir / name))
      if (entry.is_regular_file() && is_image_file(entry.path().string()))
        files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    for (auto& file : files) samples.push_back({std::move(file), it - classes.begin()});
  }
  if (samples.empty())
    throw UserError(fmt::format(
        "imagefolder: no images (.jpg, .jpeg, .png) under {}; dataset.root ('{}') must hold "
        "train/<class>/ and val/<class>/ folders of images",
        dir.string(), root));
  return samples;
}

// What is wrong with root's folders for these options, each with its fix; empty when nothing is.
std::vector<std::string> folder_problems(const ImageFolderOptions& o) {
  const fs::path root(o.root);
  std::error_code ec;
  const std::string layout = o.val_fraction > 0
                                 ? "a train/<class>/ folder of images"
                                 : "train/<class>/ and val/<class>/ folders of images (or set "
                                   "dataset.val_fraction to hold validation images out of train/)";
  if (!fs::is_directory(root, ec))  // one problem, not one per split
    return {fmt::format("imagefolder: no such folder {}; dataset.root must hold {}", root.string(),
                        layout)};
  std::vector<std::string> problems;
  for (const char* split : {"train", "val"}) {
    const bool wanted = split == std::string("train") || o.val_fraction == 0;
    if (wanted && !fs::is_directory(root / split, ec))
      problems.push_back(fmt::format("imagefolder: missing folder {}; dataset.root must hold {}",
                                     (root / split).string(), layout));
  }
  if (o.val_fraction > 0 && fs::is_directory(root / "val", ec))
    problems.push_back(fmt::format(
        "imagefolder: dataset.val_fraction holds validation images out of train/, but {} has "
        "val/ already; remove val_fraction to validate on val/, or the val/ folder",
        root.string()));
  return problems;
}

}  // namespace

std::vector<bool> held_out_for_validation(const std::vector<int64_t>& labels, double fraction,
                                          int64_t seed) {
  std::map<int64_t, std::vector<size_t>> by_class;
  for (size_t i = 0; i < labels.size(); ++i) by_class[labels[i]].push_back(i);
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<bool> held_out(labels.size(), false);
  for (auto& [label, indices] : by_class) {
    for (size_t i = indices.size(); i > 1; --i)  // Fisher-Yates, by the generator's own numbers
      std::swap(indices[i - 1], indices[rng() % i]);
    const auto count = static_cast<size_t>(std::llround(fraction * indices.size()));
    const size_t kept = std::min(std::max<size_t>(count, 1), indices.size() - 1);
    for (size_t i = 0; i < kept; ++i) held_out[indices[i]] = true;
  }
  return held_out;
}

void register_imagefolder(Registry& registry) {
  OptionSet<ImageFolderOptions> options;
  options
      .add("root", &ImageFolderOptions::root,
           "folder with train/, val/ and optionally test/, one subfolder per class",
           names_data(required()))
      .add("image_size", &ImageFolderOptions::image_size,
           "resize images to this size; 0 = the model's image_size", at_least(0))
      .add("normalize", &ImageFolderOptions::normalize,
           "imagenet: ImageNet mean/std (pretrained models); none: [0, 1]",
           one_of({"none", "imagenet"}))
      .add("augment", &ImageFolderOptions::augment, "training augmentation: none, flip, crop-flip",
           one_of({"none", "flip", "crop-flip"}))
      .add("val_fraction", &ImageFolderOptions::val_fraction,
           "without val/: hold out this share of each class of train/ for validation; 0 = off "
           "(val/ is needed)",
           between(0, 0.9))
      .add("seed", &ImageFolderOptions::seed,
           "seed of the val_fraction split (the same split for every run and repeat)", at_least(0));
  registry.add<DataSplits(const DataContext&)>(
      ComponentKind::dataset, "imagefolder",
      "your JPEG/PNG images, one folder per class (train/, val/, test/)", options,
      [](const ImageFolderOptions& o, const DataContext& context) {
        const fs::path root(o.root);
        std::error_code ec;
        if (const auto problems = folder_problems(o); !problems.empty())
          throw UserError(problems.front());
        const int64_t size = o.image_size > 0 ? o.image_size : context.image_size;
        if (size <= 0)
          throw UserError("imagefolder: set dataset.image_size (the model has no image_size)");
        std::vector<std::string> classes = sorted_subfolders(root / "train");
        if (classes.size() < 2)
          throw UserError(fmt::format("imagefolder: {} must hold at least two class folders",
                                      (root / "train").string()));
        DataSplits splits;
        std::vector<Sample> train = list_split(root / "train", classes, o.root), validation;
        if (o.val_fraction > 0) {
          std::vector<int64_t> labels;
          for (const Sample& sample : train) labels.push_back(sample.label);
          const std::vector<bool> held_out =
              held_out_for_validation(labels, o.val_fraction, o.seed);
          std::vector<Sample> kept;
          for (size_t i = 0; i < train.size(); ++i)
            (held_out[i] ? validation : kept).push_back(std::move(train[i]));
          train = std::move(kept);
          if (validation.empty())
            throw UserError(fmt::format(
                "imagefolder: dataset.val_fraction {} holds no image out of {}: every class has a "
                "single image (one is always left to train on); add images, or a val/ folder",
                o.val_fraction, (root / "train").string()));
          if (context.log)
            context.log(
                fmt::format("imagefolder: {} of train/'s images held out for validation "
                            "(val_fraction {}, seed {})",
                            validation.size(), o.val_fraction, o.seed));
        } else {
          validation = list_split(root / "val", classes, o.root);
        }
        splits.train = std::make_shared<ImageFiles>(std::move(train), size);
        splits.validation = std::make_shared<ImageFiles>(std::move(validation), size);
        if (fs::is_directory(root / "test", ec)) {
          splits.test =
              std::make_shared<ImageFiles>(list_split(root / "test", classes, o.root), size);
        } else {
          splits.test = splits.validation;
          if (context.log)
            context.log(
                "imagefolder: no test/ folder; the test metrics are the validation split's");
        }
        splits.num_classes = static_cast<int64_t>(classes.size());
        std::vector<std::string> mapping;  // the folders' names, as textfile lists its labels
        for (size_t i = 0; i < classes.size(); ++i)
          mapping.push_back(fmt::format("{}={}", classes[i], i));
        splits.details = {{"dataset_classes", join(mapping)}};
        const ImageOptions image{.size = size, .normalize = o.normalize, .augment = o.augment};
        splits.train_transform = image_transform(image, true);
        splits.eval_transform = image_transform(image, false);
        return splits;
      },
      [](const ImageFolderOptions& o) {
        // Validation's view: the train/ and val/ folders, and as many classes as train/ has
        // folders.
        const fs::path root(o.root);
        std::error_code ec;
        DatasetCapabilities capabilities;
        for (const std::string& problem : folder_problems(o))
          capabilities.files.problems.emplace_back(
              o.val_fraction > 0 && fs::is_directory(root / "val", ec) ? "val_fraction" : "root",
              problem);
        if (!capabilities.files.problems.empty()) return capabilities;
        for (const auto& entry : fs::directory_iterator(root / "train", ec)) {
          if (!entry.is_directory()) continue;
          ++capabilities.num_classes;
          // A class validation never sees: its accuracy goes unmeasured, and "best" ignores it.
          const fs::path val = root / "val" / entry.path().filename();
          if (o.val_fraction == 0 && (!fs::is_directory(val, ec) ||
                                      fs::directory_iterator(val, ec) == fs::directory_iterator()))
            capabilities.files.notes.push_back(fmt::format(
                "imagefolder: class '{}' has no images in {}: the validation figures do not "
                "measure it (add some there, or remove val/ and set dataset.val_fraction)",
                entry.path().filename().string(), (root / "val").string()));
        }
        return capabilities;
      });
}

}  // namespace trainyard
