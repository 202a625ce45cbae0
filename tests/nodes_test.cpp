#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "runner/nodes.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

// getenv over `env`, which the test goes on changing.
std::function<const char*(const char*)> lookup_in(const std::map<std::string, std::string>& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

TEST(SlurmNodes, FirstHostOfANodeList) {
  EXPECT_EQ(first_slurm_host("gpu[07-09,12],cpu1"), "gpu07");
  EXPECT_EQ(first_slurm_host("node[3,5]"), "node3");
  EXPECT_EQ(first_slurm_host("a100-1,a100-2"), "a100-1");
  EXPECT_EQ(first_slurm_host("solo"), "solo");
}

TEST(SlurmNodes, LayoutFromTheEnvironment) {
  std::map<std::string, std::string> env = {{"SLURM_NNODES", "4"},
                                            {"SLURM_NODEID", "2"},
                                            {"SLURM_JOB_NODELIST", "gpu[10-13]"},
                                            {"SLURM_JOB_ID", "123456"}};
  const auto getenv = lookup_in(env);
  auto node = node_spec_from_slurm(getenv);
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->nnodes, 4);
  EXPECT_EQ(node->node_rank, 2);
  EXPECT_EQ(node->master_addr, "gpu10");
  EXPECT_EQ(node->master_port, 15456);
  EXPECT_EQ(node->port_for_run(3), 15459);
  env["MASTER_ADDR"] = "10.0.0.1";
  env["MASTER_PORT"] = "29500";
  EXPECT_EQ(node_spec_from_slurm(getenv)->master_addr, "10.0.0.1");
  EXPECT_EQ(node_spec_from_slurm(getenv)->master_port, 29500);
  env["SLURM_NNODES"] = "1";  // one node: the usual single-node launch
  EXPECT_FALSE(node_spec_from_slurm(getenv).has_value());
}

// What Kubeflow's training operator (1.7 or later) sets in each pod of a PyTorchJob with a Master
// replica (torchrun's PET_* contract).
TEST(PodNodes, LayoutFromAPyTorchJobsVariables) {
  std::map<std::string, std::string> env = {{"PET_NNODES", "2"},
                                            {"PET_NODE_RANK", "1"},
                                            {"PET_NPROC_PER_NODE", "8"},
                                            {"MASTER_ADDR", "job-master-0"},
                                            {"MASTER_PORT", "23456"},
                                            {"WORLD_SIZE", "16"},
                                            {"RANK", "1"}};
  const auto getenv = lookup_in(env);
  auto node = node_spec_from_torchrun(getenv);
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->nnodes, 2);
  EXPECT_EQ(node->node_rank, 1);
  EXPECT_EQ(node->master_addr, "job-master-0");
  EXPECT_EQ(node->master_port, 23456);
  env["PET_NNODES"] = "3:3";  // an elastic range that is not a range
  env["PET_NODE_RANK"] = "2";
  EXPECT_EQ(node_spec_from_torchrun(getenv)->nnodes, 3);
  EXPECT_EQ(node_spec_from_torchrun(getenv)->node_rank, 2);

  auto refusal = [&] {
    try {
      node_spec_from_torchrun(getenv);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  env["PET_NNODES"] = "1:4";
  EXPECT_NE(refusal().find("PET_NNODES='1:4' is an elastic range"), std::string::npos) << refusal();
  env["PET_NNODES"] = "two";
  EXPECT_NE(refusal().find("PET_NNODES='two' is not a whole number"), std::string::npos);
  env["PET_NNODES"] = "2";
  EXPECT_NE(refusal().find("PET_NODE_RANK='2' is not a whole number in 0..1"), std::string::npos)
      << refusal();
  env["PET_NODE_RANK"] = "0";
  env.erase("MASTER_PORT");
  EXPECT_NE(refusal().find("neither MASTER_PORT nor PET_MASTER_PORT is set"), std::string::npos)
      << refusal();
  env["PET_MASTER_PORT"] = "29400";
  EXPECT_EQ(node_spec_from_torchrun(getenv)->master_port, 29400);
  env.erase("PET_NODE_RANK");  // RANK stands in, and an error names the variable it read
  env["RANK"] = "7";
  EXPECT_NE(refusal().find("RANK='7' is not a whole number in 0..1"), std::string::npos)
      << refusal();
  EXPECT_EQ(refusal().find("PET_NODE_RANK"), std::string::npos) << refusal();
  env["RANK"] = "1";
  EXPECT_EQ(node_spec_from_torchrun(getenv)->node_rank, 1);

  env["PET_NNODES"] = "1";  // one pod: the usual single-node launch
  EXPECT_FALSE(node_spec_from_torchrun(getenv).has_value());
  // An operator before 1.7 sets no PET_NNODES: the pods would each train alone, so it is refused.
  env.erase("PET_NNODES");
  EXPECT_NE(refusal().find("WORLD_SIZE=16, RANK and MASTER_ADDR are set but PET_NNODES is not"),
            std::string::npos)
      << refusal();
  env["WORLD_SIZE"] = "1";
  EXPECT_FALSE(node_spec_from_torchrun(getenv).has_value());
  env.erase("WORLD_SIZE");
  EXPECT_FALSE(node_spec_from_torchrun(getenv).has_value());
}

// A study's slots on GPUs: each its own, among those this process sees; none beyond them.
TEST(SlotDevices, EachSlotItsOwnGpuAmongTheVisibleOnes) {
  EXPECT_EQ(slot_cuda_device(0, nullptr, 2), "0");
  EXPECT_EQ(slot_cuda_device(1, "", 2), "1");
  EXPECT_EQ(slot_cuda_device(2, nullptr, 2), "");
  EXPECT_EQ(slot_cuda_device(0, "3,5", 2), "3");
  EXPECT_EQ(slot_cuda_device(1, "3, 5", 2), "5");
  EXPECT_EQ(slot_cuda_device(1, "GPU-8f2a,GPU-11b0", 2), "GPU-11b0");
  EXPECT_EQ(slot_cuda_device(1, "4,7,9", 1), "");  // CUDA saw one of them: the first
  EXPECT_EQ(slot_cuda_device(-1, nullptr, 4), "");
}

}  // namespace
}  // namespace trainyard
