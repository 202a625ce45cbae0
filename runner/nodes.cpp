#include "runner/nodes.h"

#include <cstdlib>

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

}  // namespace trainyard
