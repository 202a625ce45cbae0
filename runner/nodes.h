// Where this controller sits in a multi-node run: how many nodes, which one this is, and where
// rank 0's rendezvous (c10d's TCPStore) listens. From `trainyard run --nnodes N --node-rank K
// --master-addr HOST --master-port P`, under Slurm from its SLURM_* variables, or in a Kubernetes
// training job's pod from torchrun's PET_* variables.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace trainyard {

struct NodeSpec {
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port per run (one node only)

  bool multi_node() const { return nnodes > 1; }
  // Run number `ordinal` of a batch rendezvouses on master_port + ordinal, so consecutive runs
  // never meet the previous run's store; 0 lets the launcher pick a free port.
  int port_for_run(int ordinal) const { return master_port > 0 ? master_port + ordinal : 0; }
};

// The node layout Slurm describes (SLURM_NNODES, SLURM_NODEID, SLURM_JOB_NODELIST, SLURM_JOB_ID),
// or nothing outside a multi-node Slurm job. MASTER_ADDR and MASTER_PORT, when set, win; else the
// first host of the node list and a port derived from the job id (as Lightning does).
std::optional<NodeSpec> node_spec_from_slurm(const std::function<const char*(const char*)>& getenv);

// The node layout a Kubernetes training operator gives each pod — Kubeflow's PyTorchJob sets
// torchrun's variables: PET_NNODES (a count, or MIN:MAX with MIN = MAX), PET_NODE_RANK (the pod's
// index), MASTER_ADDR and MASTER_PORT (or PET_MASTER_ADDR, PET_MASTER_PORT) — or nothing when
// PET_NNODES is unset or 1. UserError, naming the variable, when they cannot describe a node, and
// when WORLD_SIZE > 1, RANK and MASTER_ADDR come without PET_NNODES (an operator before 1.7).
// PET_NPROC_PER_NODE is not read: each run's runtime.devices is how many ranks a node starts.
std::optional<NodeSpec> node_spec_from_torchrun(
    const std::function<const char*(const char*)>& getenv);

// The first host of a Slurm host list: "gpu[07-09,12],cpu1" -> "gpu07".
std::string first_slurm_host(const std::string& nodelist);

// The GPU of a study's slot `slot` (sweep.search.parallel) among the `count` GPUs this process
// sees: the slot-th entry of CUDA_VISIBLE_DEVICES (`visible`: an index or UUID each,
// comma-separated), or slot itself when unset (null or empty). What the slot's runs get as their
// CUDA_VISIBLE_DEVICES, so that each sees one GPU, as device 0. "" when there is no such GPU.
std::string slot_cuda_device(int slot, const char* visible, int64_t count);

}  // namespace trainyard
