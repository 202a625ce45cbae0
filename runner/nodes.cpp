#include "runner/nodes.h"

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/text.h"
#include "trainyard/error.h"

namespace trainyard {

std::string first_slurm_host(const std::string& nodelist) {
  const size_t bracket = nodelist.find('['), comma = nodelist.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return nodelist.substr(0, comma);
  // "prefix[07-09,12]": the prefix and the first number of the range, zero padding kept.
  const size_t end = nodelist.find_first_of("-,]", bracket + 1);
  return nodelist.substr(0, bracket) + nodelist.substr(bracket + 1, end - bracket - 1);
}

std::optional<NodeSpec> node_spec_from_slurm(
    const std::function<const char*(const char*)>& getenv) {
  const char* nnodes = getenv("SLURM_NNODES");
  const char* node_id = getenv("SLURM_NODEID");
  const char* nodelist = getenv("SLURM_JOB_NODELIST");
  if (!nnodes || !node_id || !nodelist || std::atoi(nnodes) < 2) return std::nullopt;
  NodeSpec node;
  node.nnodes = std::atoi(nnodes);
  node.node_rank = std::atoi(node_id);
  const char* address = getenv("MASTER_ADDR");
  node.master_addr = address ? address : first_slurm_host(nodelist);
  const char* port = getenv("MASTER_PORT");
  const char* job = getenv("SLURM_JOB_ID");
  node.master_port = port ? std::atoi(port) : 15000 + (job ? std::atoi(job) % 1000 : 0);
  return node;
}

namespace {

// A whole number in 0..max from the variable `name`'s value, or UserError naming it.
int count_from(const char* name, const std::string& value, int max) {
  size_t used = 0;
  int number = -1;
  try {
    number = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || number < 0 || number > max)
    throw UserError(fmt::format("{}='{}' is not a whole number in 0..{}", name, value, max));
  return number;
}

}  // namespace

std::optional<NodeSpec> node_spec_from_torchrun(
    const std::function<const char*(const char*)>& getenv) {
  const char* nnodes_value = getenv("PET_NNODES");
  if (!nnodes_value) {
    // A pod of an operator before 1.7 (or a process torchrun started) is told RANK, WORLD_SIZE and
    // MASTER_ADDR alone: each pod would train the whole batch on its own, silently.
    const char* world = getenv("WORLD_SIZE");
    if (world && std::atoi(world) > 1 && getenv("RANK") && getenv("MASTER_ADDR"))
      throw UserError(fmt::format(
          "WORLD_SIZE={}, RANK and MASTER_ADDR are set but PET_NNODES is not: a multi-node job "
          "whose nodes trainyard cannot tell apart from its processes; set PET_NNODES and "
          "PET_NODE_RANK in each pod (Kubeflow's training operator 1.7 or later does), or start "
          "each node with --nnodes N --node-rank K --master-addr HOST --master-port P",
          world));
    return std::nullopt;
  }
  std::string nnodes = nnodes_value;
  if (const size_t colon = nnodes.find(':'); colon != std::string::npos) {
    // torchrun's elastic range MIN:MAX. Trainyard's runs rendezvous on a fixed number of nodes.
    if (nnodes.substr(0, colon) != nnodes.substr(colon + 1))
      throw UserError(fmt::format(
          "PET_NNODES='{}' is an elastic range; trainyard trains on a fixed number of nodes: give "
          "the job's elasticPolicy minReplicas = maxReplicas, or none",
          nnodes));
    nnodes = nnodes.substr(colon + 1);
  }
  NodeSpec node;
  node.nnodes = count_from("PET_NNODES", nnodes, 65535);
  if (node.nnodes < 2) return std::nullopt;
  // The variable `name`, else `fallback`: which of them was set and its value.
  auto required = [&](const char* name, const char* fallback) {
    for (const char* variable : {name, fallback})
      if (const char* value = getenv(variable); value && *value)
        return std::pair<std::string, std::string>(variable, value);
    throw UserError(fmt::format(
        "PET_NNODES={} asks for a {}-node run, but neither {} nor {} is set: Kubeflow's "
        "training operator (1.7 or later) sets both in every pod of a PyTorchJob with a Master "
        "replica; where you start the pods yourself, set {} in each",
        node.nnodes, node.nnodes, name, fallback, name));
  };
  const auto [rank_variable, rank] = required("PET_NODE_RANK", "RANK");
  node.node_rank = count_from(rank_variable.c_str(), rank, node.nnodes - 1);
  node.master_addr = required("MASTER_ADDR", "PET_MASTER_ADDR").second;
  const auto [port_variable, port] = required("MASTER_PORT", "PET_MASTER_PORT");
  node.master_port = count_from(port_variable.c_str(), port, 65535);
  if (node.master_port == 0)
    throw UserError(
        fmt::format("{}=0: a multi-node run needs the port rank 0 listens on", port_variable));
  return node;
}

std::string slot_cuda_device(int slot, const char* visible, int64_t count) {
  std::vector<std::string> devices;
  if (visible && *visible) {
    for (const std::string& device : split(visible, ','))
      if (!strip(device).empty()) devices.push_back(strip(device));
  } else {
    for (int64_t i = 0; i < count; ++i) devices.push_back(std::to_string(i));
  }
  // CUDA stops at the first entry it cannot use: only the first `count` are devices.
  if (static_cast<int64_t>(devices.size()) > count) devices.resize(static_cast<size_t>(count));
  return slot >= 0 && slot < static_cast<int>(devices.size()) ? devices[slot] : "";
}

}  // namespace trainyard
