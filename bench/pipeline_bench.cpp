// The input pipeline alone, no model: how many images/s and sequences/s the loaders deliver as
// model input on this machine, so a slow training run can be told apart from a starved one.
//
//   build/bench/pipeline_bench [--quick]
//
// Data are generated in the real formats in a temporary folder: CIFAR-10 binary files, JPEGs for
// imagefolder, an aclImdb tree of reviews (tokenised with the test vocabulary, so tokeniser speed
// is indicative only: a 30,522-token vocabulary makes longer pieces, not slower lookups).
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/version.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "common/files.h"
#include "components/builtin.h"
#include "components/data/loader.h"
#include "runner/engine/engine.h"
#include "trainyard/dataset.h"

using namespace trainyard;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

DataSplits load(const std::string& name, const std::string& yaml, DataContext context = {}) {
  ComponentChoice choice{.name = name};
  flatten_into(choice.options, YAML::Load(yaml), "bench");
  return build_dataset(builtin_registry(), choice, context);
}

// Samples/s of `batches` training batches as model input, with the transform in the workers
// (how CPU runs use it).
double throughput(const DataSplits& splits, int64_t batch, int64_t workers, int64_t batches) {
  DataLoader loader(splits.train, batch, 1,
                    {.shuffle = true,
                     .drop_last = true,
                     .workers = workers,
                     .prefetch = 4,
                     .transform = splits.train_transform});
  batches = std::min(batches, loader.num_batches());
  loader.start_epoch(0, batches);
  loader.next();  // warm-up: the first batch pays for thread start-up
  auto start = Clock::now();
  int64_t samples = 0;
  for (int64_t b = 1; b < batches; ++b) samples += loader.next().size();
  return static_cast<double>(samples) / since(start);
}

void write_cifar(const fs::path& dir, int per_file) {
  std::mt19937 random(7);
  std::vector<char> record(3073);
  for (int f = 1; f <= 6; ++f) {
    std::ofstream out(dir / (f <= 5 ? fmt::format("data_batch_{}.bin", f) : "test_batch.bin"),
                      std::ios::binary);
    for (int r = 0; r < per_file; ++r) {
      for (auto& c : record) c = static_cast<char>(random());
      record[0] = static_cast<char>(r % 10);
      out.write(record.data(), 3073);
    }
  }
}

void write_jpegs(const fs::path& dir, int count, int width, int height) {
  std::mt19937 random(3);
  std::vector<uint8_t> pixels(static_cast<size_t>(width * height * 3));
  tjhandle handle = tjInitCompress();
  for (int i = 0; i < count; ++i) {
    for (auto& p : pixels) p = static_cast<uint8_t>(random() % 64 + (i % 2) * 128);
    unsigned char* jpeg = nullptr;
    unsigned long size = 0;
    tjCompress2(handle, pixels.data(), width, 0, height, TJPF_RGB, &jpeg, &size, TJSAMP_420, 90, 0);
    for (const char* split : {"train", "val"}) {
      fs::path file = dir / split / (i % 2 ? "b" : "a") / fmt::format("{:05}.jpg", i);
      fs::create_directories(file.parent_path());
      std::ofstream(file, std::ios::binary)
          .write(reinterpret_cast<char*>(jpeg), static_cast<std::streamsize>(size));
    }
    tjFree(jpeg);
  }
  tjDestroy(handle);
}

void write_reviews(const fs::path& root, int count, int words) {
  const std::vector<std::string> vocabulary = {
      "the",         "movie",  "was",  "great", "acting", "plot", "ending", "loved",
      "predictable", "superb", "film", "and",   "but",    "i",    "didn't", "like"};
  std::mt19937 random(5);
  for (int i = 0; i < count; ++i) {
    const char* split = i % 2 ? "train" : "test";
    const char* label = (i / 2) % 2 ? "pos" : "neg";
    fs::path file = root / split / label / fmt::format("{}_{}.txt", i, i % 10);
    fs::create_directories(file.parent_path());
    std::ofstream out(file);
    for (int w = 0; w < words; ++w)
      out << vocabulary[random() % vocabulary.size()] << (w % 17 == 16 ? ". " : " ");
  }
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  fs::path tmp = fs::temp_directory_path() / fmt::format("trainyard-bench-{}", getpid());
  fs::create_directories(tmp / "cifar");
  fmt::print("# Trainyard input pipeline benchmark\n");
  fmt::print("CPU: {} ({} hardware threads, {} intra-op threads); LibTorch {}\n\n", cpu_name(),
             std::thread::hardware_concurrency(), at::get_num_threads(), TORCH_VERSION);

  fmt::print(
      "## Images (model input: float [B, 3, 224, 224])\n\n| pipeline | batch | workers | images/s "
      "|\n|---|---:|---:|---:|\n");
  write_cifar(tmp / "cifar", quick ? 400 : 2000);
  DataSplits cifar = load(
      "cifar10", fmt::format("{{root: '{}', val_size: 100}}", (tmp / "cifar").string()), {224});
  write_jpegs(tmp / "jpegs", quick ? 64 : 256, 500, 375);
  DataSplits folder =
      load("imagefolder", fmt::format("{{root: '{}'}}", (tmp / "jpegs").string()), {224});
  for (int64_t workers : {0, 1, 2}) {
    fmt::print("| cifar10: uint8 32x32 -> resize 224, scale | 16 | {} | {:.0f} |\n", workers,
               throughput(cifar, 16, workers, quick ? 30 : 200));
    fmt::print(
        "| imagefolder: JPEG 500x375 decode -> 224, ImageNet normalise | 16 | {} | {:.0f} |\n",
        workers, throughput(folder, 16, workers, quick ? 4 : 16));
  }

  fmt::print("\n## Text (model input: int64 ids and mask [B, T])\n\n");
  const int reviews = quick ? 400 : 4000;
  write_reviews(tmp / "aclImdb", reviews, 230);
  const std::string vocab = std::string(TRAINYARD_SOURCE_DIR) + "/tests/fixtures/vocab.txt";
  auto imdb_yaml = [&](const char* padding) {
    return fmt::format(
        "{{root: '{}', vocab: '{}', max_length: 512, padding: {}, train_size: {}, val_size: {}}}",
        (tmp / "aclImdb").string(), vocab, padding, reviews * 7 / 10, reviews / 10);
  };
  auto start = Clock::now();
  DataSplits imdb = load("imdb", imdb_yaml("max_length"));
  double first = since(start);
  start = Clock::now();
  DataSplits cached = load("imdb", imdb_yaml("dynamic"));
  double second = since(start);
  fmt::print("| stage | sequences/s | time |\n|---|---:|---:|\n");
  fmt::print(
      "| tokenise {} reviews of ~230 words (all cores), write the cache | {:.0f} | {:.2f}s |\n",
      reviews, reviews / first, first);
  fmt::print("| load the token cache | {:.0f} | {:.3f}s |\n", reviews / second, second);
  fmt::print("\n| collate | batch | workers | sequences/s |\n|---|---:|---:|---:|\n");
  for (int64_t workers : {0, 2}) {
    fmt::print("| padding max_length (512) | 12 | {} | {:.0f} |\n", workers,
               throughput(imdb, 12, workers, 100));
    fmt::print("| padding dynamic | 12 | {} | {:.0f} |\n", workers,
               throughput(cached, 12, workers, 100));
  }
  remove_tree(tmp.string());  // not fs::remove_all: common/files.h
  return 0;
}
