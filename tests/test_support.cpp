#include "tests/test_support.h"

#include <fstream>
#include <random>

#include "common/files.h"

namespace trainyard::testing {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::random_device random;
  path_ = fs::temp_directory_path() /
          ("trainyard-test-" + std::to_string(random()) + std::to_string(random()));
  fs::create_directories(path_);
}

TempDir::~TempDir() { remove_tree(path_.string()); }  // not fs::remove_all: common/files.h

std::string TempDir::write(const std::string& name, const std::string& text) const {
  fs::path file = path_ / name;
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
  return file.string();
}

std::string llmc_token_file(const std::vector<uint32_t>& tokens, bool wide, int64_t count,
                            int32_t magic, int32_t version) {
  std::vector<int32_t> header(256, 0);  // (this machine is little-endian, as the format)
  header[0] = magic != -1 ? magic : wide ? 20240801 : 20240520;
  header[1] = version != -1 ? version : wide ? 7 : 1;
  header[2] = static_cast<int32_t>(count >= 0 ? count : static_cast<int64_t>(tokens.size()));
  std::string bytes(reinterpret_cast<const char*>(header.data()), header.size() * 4);
  for (uint32_t t : tokens) {
    if (wide) {
      bytes.append(reinterpret_cast<const char*>(&t), 4);
    } else {
      const auto t16 = static_cast<uint16_t>(t);
      bytes.append(reinterpret_cast<const char*>(&t16), 2);
    }
  }
  return bytes;
}

namespace {
struct ToyModel {
  int64_t width = 8;
  std::string act = "relu";
};
struct ToyData {
  std::string root;
};
struct Lr {
  double lr = 0.1;
};
struct AdamW {
  double lr = 0.1;
  double weight_decay = 0.01;
};
struct Nothing {};
}  // namespace

Registry fake_registry() {
  Registry r;
  OptionSet<ToyModel> model;
  model.add("width", &ToyModel::width, "width", at_least(1))
      .add("act", &ToyModel::act, "activation", one_of({"relu", "gelu"}));
  r.add<int(int)>(ComponentKind::model, "toy", "a toy model", model,
                  [](const ToyModel& o, int x) { return static_cast<int>(o.width) + x; });
  OptionSet<ToyData> data;
  data.add("root", &ToyData::root, "folder", required());
  r.add<int()>(ComponentKind::dataset, "toy-data", "toy data", data,
               [](const ToyData&) { return 1; });
  OptionSet<Lr> lr;
  lr.add("lr", &Lr::lr, "learning rate", greater_than(0));
  r.add<int()>(
      ComponentKind::optimizer, "adam", "adam", lr, [](const Lr&) { return 2; },
      [](const Lr&) { return OptimizerCapabilities{.steps_on_device = true}; });
  OptionSet<AdamW> adamw;
  adamw.add("lr", &AdamW::lr, "learning rate", greater_than(0))
      .add("weight_decay", &AdamW::weight_decay, "decoupled weight decay", at_least(0));
  r.add<int()>(ComponentKind::optimizer, "adamw", "adamw", adamw, [](const AdamW&) { return 6; });
  r.add<int()>(ComponentKind::optimizer, "sgd", "sgd", lr, [](const Lr&) { return 3; });
  r.add<int()>(ComponentKind::scheduler, "none", "none", OptionSet<Nothing>(),
               [](const Nothing&) { return 4; });
  r.add<int()>(ComponentKind::precision, "32-true", "fp32", OptionSet<Nothing>(),
               [](const Nothing&) { return 5; });
  r.add<int()>(ComponentKind::precision, "bf16-mixed", "bf16", OptionSet<Nothing>(),
               [](const Nothing&) { return 6; });
  r.add<int()>(
      ComponentKind::precision, "16-mixed", "fp16", OptionSet<Nothing>(),
      [](const Nothing&) { return 8; },
      [](const Nothing&) { return PrecisionCapabilities{.loss_scaling = true}; });
  r.add<int()>(ComponentKind::strategy, "single", "one device", OptionSet<Nothing>(),
               [](const Nothing&) { return 7; });
  r.add<int()>(
      ComponentKind::strategy, "ddp", "one process per device", OptionSet<Nothing>(),
      [](const Nothing&) { return 9; },
      [](const Nothing&) {
        return StrategyCapabilities{.multi_process = true, .agrees_on_micro_batch = true};
      });
  r.add<int()>(
      ComponentKind::strategy, "fsdp", "one process per device, sharded", OptionSet<Nothing>(),
      [](const Nothing&) { return 10; },
      [](const Nothing&) {
        return StrategyCapabilities{
            .multi_process = true, .shards_gradients = true, .shards_parameters = true};
      });
  return r;
}

}  // namespace trainyard::testing
