// The launcher, end to end: one worker process per rank, supervised — a killed or hanging rank
// fails its run and the batch goes on; two nodes on loopback train as one node of as many ranks.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::exit_code_of;
using testing::KillOnExit;
using testing::Result;
using testing::start_run;
using testing::trainyard;

class LauncherTest : public testing::CliTest {};

using testing::rank_one_once_training;

TEST_F(LauncherTest, AKilledRankFailsItsRunAndTheBatchGoesOn) {
  std::string file = dir.write("kill.yaml", R"(
name: kill
model: {name: vit, image_size: 32, patch_size: 8, depth: 2, width: 64, heads: 4, mlp_dim: 128, num_classes: 10}
dataset: {name: synthetic-images, train_size: 100000, val_size: 32, test_size: 32}
train: {epochs: 5, batch_size: 16}
runtime: {accelerator: cpu, threads: 1, strategy: fsdp, devices: 2}
sweep:
  variants:
    - name: victim
    - name: next
      set: {dataset.train_size: 64}
)");
  pid_t controller = start_run(file, db());
  KillOnExit guard{controller};
  const pid_t rank1 = rank_one_once_training(controller);
  ASSERT_GT(rank1, 0);
  auto killed_at = std::chrono::steady_clock::now();
  kill(rank1, SIGKILL);
  EXPECT_EQ(exit_code_of(controller), 1);  // a run failed
  Store store(db());
  auto runs = store.runs("kill");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, RunStatus::failed);
  EXPECT_NE(runs[0].error.find("rank 1 was killed by signal 9"), std::string::npos)
      << runs[0].error;
  EXPECT_NE(runs[0].error.find("-rank1.log"), std::string::npos) << runs[0].error;  // where to look
  EXPECT_EQ(runs[1].status, RunStatus::completed);
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(30));
}

// A rank that stops answering (SIGSTOP: alive, silent) leaves the others waiting in a collective;
// after runtime.timeout_s they give up, the run fails naming the rank and the timeout, the stopped
// rank is killed, and the batch goes on.
TEST_F(LauncherTest, AHangingCollectiveFailsTheRunAfterTheTimeout) {
  std::string file = dir.write("hang.yaml", R"(
name: hang
model: {name: vit, image_size: 16, patch_size: 4, depth: 1, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 100000, val_size: 32, test_size: 32, num_classes: 4}
train: {epochs: 5, batch_size: 8}
runtime: {accelerator: cpu, threads: 1, strategy: ddp, devices: 2, timeout_s: 5}
sweep:
  variants:
    - name: stalled
    - name: next
      set: {dataset.train_size: 64}
)");
  pid_t controller = start_run(file, db());
  KillOnExit guard{controller};
  const pid_t rank1 = rank_one_once_training(controller);
  ASSERT_GT(rank1, 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  kill(rank1, SIGSTOP);
  EXPECT_EQ(exit_code_of(controller), 1);  // a run failed
  EXPECT_LT(std::chrono::steady_clock::now() - stopped_at, std::chrono::seconds(60));
  Store store(db());
  auto runs = store.runs("hang");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, RunStatus::failed);
  EXPECT_NE(runs[0].error.find("rank 0 exited with code"), std::string::npos) << runs[0].error;
  EXPECT_NE(runs[0].error.find("imed out"), std::string::npos)
      << runs[0].error;  // Gloo: "Timed out ..."
  EXPECT_EQ(runs[1].status, RunStatus::completed) << runs[1].error;
  EXPECT_NE(kill(rank1, 0), 0);  // no orphan
}

// Two controllers of two ranks each, on loopback as two nodes, train as four ranks on one node do:
// told by flags, and told as two pods of a Kubernetes training job are.
TEST_F(LauncherTest, TwoNodesOfTwoRanksTrainAsFourRanksOnOneNode) {
  std::string file = dir.write("nodes.yaml", R"(
name: nodes
model: {name: vit, image_size: 16, patch_size: 4, depth: 2, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 128, val_size: 32, test_size: 32, num_classes: 4, noise: 0.3}
train: {epochs: 1, batch_size: 4, optimizer: {name: adam, lr: 3.0e-3}}
runtime: {accelerator: cpu, threads: 1, strategy: ddp, devices: 2}
sweep:
  variants:
    - name: default
    - name: one-device  # node 0 alone trains it; node 1 skips it
      set: {runtime.strategy: single, runtime.devices: 1, train.batch_size: 16}
)");
  const std::string one_node_db = (dir.path() / "one" / "t.db").string();
  Result one_node = trainyard("run " + file + " --db " + one_node_db +
                              " --set runtime.devices=4 --set runtime.strategy=ddp");
  ASSERT_EQ(one_node.exit_code, 0) << one_node.output;

  const std::string port = std::to_string(20000 + getpid() % 20000);
  auto node = [&](int rank, const std::string& db_path) {
    return start_run(file, db_path,
                     {"--nnodes", "2", "--node-rank", std::to_string(rank), "--master-addr",
                      "127.0.0.1", "--master-port", port});
  };
  pid_t node1 = node(1, (dir.path() / "node1" / "t.db").string());
  KillOnExit guard1{node1};
  pid_t node0 = node(0, db());
  KillOnExit guard0{node0};
  EXPECT_EQ(exit_code_of(node0), 0);
  EXPECT_EQ(exit_code_of(node1), 0);
  Store store(db());
  auto runs = store.runs("nodes");
  ASSERT_EQ(runs.size(), 2u);
  ASSERT_EQ(runs[0].status, RunStatus::completed) << runs[0].error;
  EXPECT_EQ(runs[1].status, RunStatus::completed) << runs[1].error;
  Store reference(one_node_db);
  const double four_ranks = reference.final_metrics(reference.runs("nodes")[0].id).at("test_loss");
  EXPECT_NEAR(store.final_metrics(runs[0].id).at("test_loss"), four_ranks, 1e-5);
  EXPECT_FALSE(fs::exists(dir.path() / "node1" / "t.db"));  // only node 0 records
  // Node 1 keeps rank 3's log under its own name: run-<id>-<variant>-<uid>-node1-rank3.log.
  bool rank3_log = false;
  for (const auto& entry : fs::directory_iterator(dir.path() / "node1" / "logs" / "nodes")) {
    const std::string name = entry.path().filename().string();
    rank3_log =
        rank3_log || (name.starts_with("run-1-default-") && name.ends_with("-node1-rank3.log"));
  }
  EXPECT_TRUE(rank3_log);

  // The same two nodes as two pods of a Kubeflow PyTorchJob: no flags, the variables its operator
  // (1.7 or later) sets in each pod (torchrun's contract; there WORLD_SIZE counts every process,
  // pods × nprocPerNode, and RANK is the pod's index).
  const std::string pod_port = std::to_string(20000 + (getpid() + 5000) % 20000);
  auto pod = [&](int rank, const std::string& db_path) {
    return start_run(file, db_path, {},
                     {{"PET_NNODES", "2"},
                      {"PET_NODE_RANK", std::to_string(rank)},
                      {"PET_NPROC_PER_NODE", "2"},
                      {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", pod_port},
                      {"WORLD_SIZE", "4"},
                      {"RANK", std::to_string(rank)}});
  };
  const std::string pods_db = (dir.path() / "pods" / "t.db").string();
  pid_t pod1 = pod(1, (dir.path() / "pod1" / "t.db").string());
  KillOnExit pod_guard1{pod1};
  pid_t pod0 = pod(0, pods_db);
  KillOnExit pod_guard0{pod0};
  EXPECT_EQ(exit_code_of(pod0), 0);
  EXPECT_EQ(exit_code_of(pod1), 0);
  Store pods(pods_db);
  auto pod_runs = pods.runs("nodes");
  ASSERT_EQ(pod_runs.size(), 2u);
  ASSERT_EQ(pod_runs[0].status, RunStatus::completed) << pod_runs[0].error;
  EXPECT_NEAR(pods.final_metrics(pod_runs[0].id).at("test_loss"), four_ranks, 1e-5);
  EXPECT_FALSE(fs::exists(dir.path() / "pod1" / "t.db"));  // only rank 0's pod records

  // Flags that cannot describe a node are refused before anything runs.
  EXPECT_EQ(
      trainyard("run " + file + " --db " + db() + " --nnodes 2 --node-rank 2 --master-port 1234")
          .exit_code,
      2);
  EXPECT_EQ(trainyard("run " + file + " --db " + db() + " --nnodes 2 --node-rank 1").exit_code,
            2);  // no port
}

}  // namespace
}  // namespace trainyard
