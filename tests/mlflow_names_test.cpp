// What Trainyard names things in MLflow (trackers/mlflow.h): every key a name MLflow's validation
// takes (its characters, no part of a path that resolves elsewhere, 250 bytes), a run found again
// by a uid even when it was recorded before runs had one, and a tracking address that is a server.
// The end-to-end test against a real server is tests/trackers/mlflow_test.sh.
#include "trackers/mlflow.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <regex>
#include <vector>

#include "trainyard/error.h"

namespace trainyard {
namespace {

// MLflow 3.17's rule (mlflow/utils/validation.py: validate_param_and_metric_name, path_not_unique),
// written again here: the characters, and posixpath.normpath(name) == name.
bool mlflow_takes(const std::string& name) {
  if (name.empty() || name.size() > 250) return false;
  if (!std::regex_match(name, std::regex(R"([/\w.\- :]*)"))) return false;
  if (name.front() == '/' || name.back() == '/') return false;
  size_t start = 0;
  for (;;) {
    const size_t end = std::min(name.find('/', start), name.size());
    const std::string part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (end == name.size()) return true;
    start = end + 1;
  }
}

TEST(MlflowNames, EveryKeyIsANameMlflowTakesAndCleanKeysStayAsTheyAre) {
  for (const std::string& clean : {"train.optimizer.lr", "step/train_loss", "epoch/val_acc",
                                   "final/samples_per_s", "runtime.strategy.name"}) {
    EXPECT_EQ(mlflow_key(clean), clean);
    EXPECT_TRUE(mlflow_takes(mlflow_key(clean))) << clean;
  }
  EXPECT_EQ(mlflow_key("data.transforms[0]"), "data.transforms_0_");
  EXPECT_EQ(mlflow_key("a//b"), "a/_/b");
  EXPECT_EQ(mlflow_key("step/../x"), "step/___/x");
  for (const std::string& odd :
       std::vector<std::string>{"/lead", "trail/", "a//b", "./x", "x/.", "..", "a/../b", "é/ü",
                                "tab\tkey", "a[b]{c}", std::string(300, 'k'), "/"})
    EXPECT_TRUE(mlflow_takes(mlflow_key(odd))) << odd << " -> " << mlflow_key(odd);
}

TEST(MlflowNames, ARunWithoutAUidIsFoundByItsIdAndQueueTime) {
  RunRecord run;
  run.id = 7;
  run.queued_at = "2025-01-02T03:04:05Z";
  EXPECT_EQ(mlflow_uid(run), "run7-2025-01-02T03:04:05Z");
  run.uid = "3f2a";
  EXPECT_EQ(mlflow_uid(run), "3f2a");
}

TEST(MlflowNames, OnlyAServersAddressIsTakenAndItsTokenSignsIn) {
  for (const std::string& wrong : {"file:///tmp/mlruns", "sqlite:///mlflow.db", "databricks", ""})
    EXPECT_THROW(mlflow_server(wrong), UserError) << wrong;
  unsetenv("MLFLOW_TRACKING_USERNAME");
  setenv("MLFLOW_TRACKING_TOKEN", "secret", 1);
  const MlflowServer server = mlflow_server("http://127.0.0.1:5000//");
  unsetenv("MLFLOW_TRACKING_TOKEN");
  EXPECT_EQ(server.uri, "http://127.0.0.1:5000");
  EXPECT_EQ(server.http.headers, std::vector<std::string>{"Authorization: Bearer secret"});
  setenv("MLFLOW_TRACKING_USERNAME", "ana", 1);
  setenv("MLFLOW_TRACKING_PASSWORD", "pw", 1);
  EXPECT_EQ(mlflow_server("https://mlflow.example.org").http.basic_auth, "ana:pw");
  unsetenv("MLFLOW_TRACKING_USERNAME");
  unsetenv("MLFLOW_TRACKING_PASSWORD");
}

}  // namespace
}  // namespace trainyard
