// A CIFAR-10 binary file: its size against the record size, each record's label.
#include "components/data/cifar10_file.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using trainyard::Cifar10Records;
  const std::string& path = trainyard::fuzz::write_input(data, size, ".bin");
  trainyard::fuzz::expect_clean([&] {
    const Cifar10Records records = trainyard::read_cifar10_records(path);
    // What the dataset indexes with: every label a class, every image whole.
    if (records.labels.size() != static_cast<size_t>(records.count) ||
        records.images.size() != static_cast<size_t>(records.count * Cifar10Records::kImageBytes))
      std::abort();
    for (int64_t label : records.labels)
      if (label < 0 || label >= Cifar10Records::kClasses) std::abort();
  });
  return 0;
}
