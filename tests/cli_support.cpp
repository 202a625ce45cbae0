#include "tests/cli_support.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "components/weights/safetensors.h"
#include "db/store.h"

namespace trainyard::testing {

namespace fs = std::filesystem;

Result trainyard(const std::string& args) { return shell(std::string(TRAINYARD_EXE) + " " + args); }

Result shell(const std::string& command_line) {
  std::string command = command_line + " 2>&1";
  Result result;
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string write_foreign_weights(const TempDir& dir, const std::string& name) {
  const std::string header =
      R"({"not_in_the_model.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return dir.write(name, bytes + header + std::string(4, '\0'));
}

std::string failing_data_set(const TempDir& dir) {
  for (const auto& name : kCifar10Files)
    dir.write("truncated-cifar/" + name, std::string(100, 'x'));
  return "{dataset: {name: cifar10, root: '" + (dir.path() / "truncated-cifar").string() +
         "'}, model.num_classes: 10}";
}

std::string source(const std::string& relative) {
  return std::string(TRAINYARD_SOURCE_DIR) + "/" + relative;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

KillOnExit::~KillOnExit() {
  if (pid > 0 && kill(pid, 0) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

pid_t start_run(const std::string& file, const std::string& db, std::vector<std::string> extra,
                const std::vector<std::pair<std::string, std::string>>& environment) {
  std::vector<std::string> args = {TRAINYARD_EXE, "run", file, "--db", db};
  args.insert(args.end(), extra.begin(), extra.end());
  pid_t child = fork();
  if (child == 0) {
    for (const auto& [name, value] : environment) setenv(name.c_str(), value.c_str(), 1);
    freopen("/dev/null", "w", stderr);
    freopen("/dev/null", "w", stdout);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(TRAINYARD_EXE, argv.data());
    _exit(127);
  }
  return child;
}

int exit_code_of(pid_t child) {
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(std::stoi(name));
  }
  return out;
}

int rank_of(pid_t pid) {
  std::string environ = read_file(fmt::format("/proc/{}/environ", pid));
  for (size_t start = 0; start < environ.size();) {
    size_t end = environ.find('\0', start);
    std::string entry = environ.substr(start, end - start);
    if (entry.rfind("RANK=", 0) == 0) return std::stoi(entry.substr(5));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return -1;
}

Result status_showing(const std::string& db, const std::string& text) {
  Result status;
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!std::filesystem::exists(db)) continue;
    status = trainyard("status --db " + db);
    if (status.output.find(text) != std::string::npos) break;
  }
  return status;
}

std::vector<pid_t> wait_for_workers(pid_t controller, size_t count) {
  std::vector<pid_t> workers;
  for (int i = 0; i < 600 && workers.size() < count; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    workers = children_of(controller);
  }
  return workers;
}

pid_t rank_one_once_training(pid_t controller) {
  std::vector<pid_t> workers = wait_for_workers(controller, 2);
  if (workers.size() != 2) return -1;
  std::this_thread::sleep_for(std::chrono::seconds(3));
  return rank_of(workers[0]) == 1 ? workers[0] : workers[1];
}

bool is_wall_clock_figure(const std::string& key) {
  for (const char* timing :
       {"train_seconds", "test_seconds", "epoch_seconds", "samples_per_s", "epoch_samples_per_s",
        "tokens_per_s", "data_wait", "tflops", "mfu", "peak_rss_bytes", "peak_memory_bytes",
        "elapsed_seconds", "val_seconds"})
    if (key == timing) return true;
  return false;
}

std::map<std::string, double> training_figures(const std::string& db,
                                               std::map<std::string, int>* runs_per_config) {
  Store store(db);
  std::map<std::string, double> out;
  for (const RunRecord& run : store.runs()) {
    const std::string config = run.experiment + "/" + run.variant + "/" + run.config_hash;
    if (runs_per_config) ++(*runs_per_config)[config];
    if (run.status != RunStatus::completed) continue;
    for (const auto& [key, value] : store.final_metrics(run.id))
      if (!is_wall_clock_figure(key)) out[config + "/final/" + key] = value;
    for (const EpochRow& row : store.epoch_metrics(run.id))
      for (const auto& [key, value] : row.values)
        if (!is_wall_clock_figure(key))
          out[config + "/" + std::to_string(row.epoch) + "/" + key] = value;
  }
  return out;
}

std::map<std::string, std::string> tested_weights(const std::string& db) {
  Store store(db);
  std::map<std::string, std::string> out;
  for (const RunRecord& run : store.runs()) {
    if (run.status != RunStatus::completed) continue;
    const auto attributes = store.attributes(run.id);
    const auto path = attributes.find("weights_path");
    if (path == attributes.end()) continue;
    const SafetensorsFile weights(path->second);
    for (const SafetensorsEntry& tensor : weights.entries())
      out[run.experiment + "/" + run.variant + "/" + run.config_hash + "/" + tensor.name] =
          fmt::format("{} {} ", static_cast<int>(tensor.dtype), fmt::join(tensor.shape, "x")) +
          std::string(reinterpret_cast<const char*>(tensor.data), tensor.bytes);
  }
  return out;
}

void expect_same_training(const std::string& db, const std::string& reference_db) {
  const auto figures = training_figures(db);
  EXPECT_FALSE(figures.empty()) << db << " holds no completed run";
  EXPECT_EQ(figures, training_figures(reference_db));
  const auto weights = tested_weights(db), reference = tested_weights(reference_db);
  EXPECT_FALSE(weights.empty()) << db << ": no run saved its weights (train.save_weights)";
  EXPECT_EQ(weights.size(), reference.size());
  for (const auto& [name, bytes] : reference) {
    const auto ours = weights.find(name);
    if (ours == weights.end())
      ADD_FAILURE() << name << ": not in " << db;
    else
      EXPECT_TRUE(ours->second == bytes) << name << ": its dtype, shape or bytes differ";
  }
}

std::pair<int64_t, int64_t> checkpoint_position(const fs::path& logs) {
  std::error_code ec;
  if (!fs::exists(logs, ec)) return {-1, -1};
  for (const auto& entry : fs::recursive_directory_iterator(logs, ec)) {
    if (entry.path().filename() != "trainer_state.json") continue;
    if (entry.path().parent_path().extension() != ".state") continue;  // not a staged one
    std::ifstream in(entry.path());
    const auto json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (json.is_object())
      return {json.value("epoch", int64_t{-1}), json.value("batch", int64_t{-1})};
  }
  return {-1, -1};
}

void expect_a_kill_in_epoch_2_changes_nothing(const TempDir& dir, const std::string& file,
                                              const std::string& db) {
  const std::string undisturbed_db = (dir.path() / "undisturbed.db").string();
  const std::string save_weights = " --set train.save_weights=true";  // to compare them
  Result undisturbed = trainyard("run " + file + " --db " + undisturbed_db + save_weights);
  ASSERT_EQ(undisturbed.exit_code, 0) << undisturbed.output;

  pid_t controller = start_run(file, db, {"--set", "train.save_weights=true"});
  KillOnExit guard{controller};
  bool mid_epoch = false;
  for (int i = 0; i < 2400 && !mid_epoch; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    const auto [done, batch] =
        checkpoint_position(std::filesystem::path(db).parent_path() / "logs");
    mid_epoch = done == 1 && batch > 0;
  }
  ASSERT_TRUE(mid_epoch) << "no mid-epoch checkpoint in epoch 2";
  kill(controller, SIGKILL);
  EXPECT_EQ(exit_code_of(controller), 128 + SIGKILL);

  Result again = trainyard("run " + file + " --db " + db + save_weights);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("continues from its checkpoint at epoch 2"), std::string::npos)
      << again.output;
  expect_same_training(db, undisturbed_db);
}

}  // namespace trainyard::testing
