#include <gtest/gtest.h>

#include <map>

#include "runner/nodes.h"

namespace trainyard {
namespace {

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
  auto getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
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

}  // namespace
}  // namespace trainyard
