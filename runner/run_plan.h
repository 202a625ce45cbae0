// Which runs of a batch train, and how: the one rule `trainyard run` (runner/controller.cpp) and
// `trainyard submit` (runner/cli/submit_command.cpp) follow, and their dry runs show. A config is
// trained once, whatever happened to it overnight:
//   1. a config that completed is skipped (--force trains it again);
//   2. a run this machine cannot train (no such device; a one-device run on node K > 0 of a
//      multi-node batch) is recorded as skipped, with why;
//   3. a run of the config whose Slurm job is pending or running is left to Slurm (submit only:
//      it alone asks Slurm);
//   4. --force, and a multi-node batch (whose nodes must launch the same runs), start new runs;
//   5. the newest run of the config that was interrupted or failed transiently (a crash, a
//      timeout) continues under its id, from its checkpoint — for submit also one a submission
//      queued whose job never ran; a local batch leaves a Slurm run to `trainyard submit`;
//   6. otherwise the config starts a new run.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/store.h"
#include "runner/config/experiment.h"
#include "runner/slurm.h"

namespace trainyard {

// What the store holds of one config of one experiment.
struct ConfigHistory {
  std::vector<RunRecord> runs;              // newest first
  std::map<int64_t, SlurmRunRecord> slurm;  // the Slurm task records among them, by run id
};

// The store's runs of `experiment`, by config hash: read once per experiment, not once per run.
// A run recorded under a config's legacy hash (RunSpec::legacy_config_hash: before fingerprints)
// is filed under the config's hash. Empty for an experiment (or a database) it does not hold.
std::map<std::string, ConfigHistory> read_histories(Store& store, const Experiment& experiment);

enum class RunFate {
  already_completed,  // rule 1
  unavailable,        // rule 2
  with_slurm,         // rules 3 and 5: Slurm has the run
  continues,          // rule 5
  starts,             // rules 4 and 6
};

struct RunPlan {
  RunFate fate = RunFate::starts;
  // already_completed, with_slurm, continues: the run of the config it names.
  std::optional<RunRecord> run{};
  std::string reason{};       // unavailable: why
  std::string slurm_job{};    // with_slurm: the job ("1234_7")
  std::string slurm_state{};  // with_slurm, rule 3: Slurm's word ("running"); "" for rule 5
};

enum class Scheduler { this_machine, slurm };

struct PlanContext {
  Scheduler scheduler = Scheduler::this_machine;
  bool force = false;       // --force
  bool multi_node = false;  // a `trainyard run` over --nnodes > 1
  // Rule 2 (this machine): why it cannot train the run, "" when it can.
  std::string unavailable{};
  // Rule 3 (submit): Slurm's states of the jobs; without them rule 3 is not applied.
  const SlurmStates* slurm_states = nullptr;
};

RunPlan plan_run(const ConfigHistory& history, const PlanContext& context);

}  // namespace trainyard
