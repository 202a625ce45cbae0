#include "runner/run_plan.h"

#include "common/text.h"

namespace trainyard {

std::map<std::string, ConfigHistory> read_histories(Store& store, const Experiment& experiment) {
  std::map<std::string, ConfigHistory> out;
  if (!store.find_experiment(experiment.name)) return out;
  std::map<std::string, std::string> current_of_legacy;
  for (const RunSpec& run : experiment.runs)
    if (run.legacy_config_hash != run.config_hash)
      current_of_legacy[run.legacy_config_hash] = run.config_hash;
  std::map<int64_t, SlurmRunRecord> slurm;
  for (SlurmRunRecord& task : store.slurm_runs()) slurm[task.run_id] = std::move(task);
  for (RunRecord& run : store.runs(experiment.name)) {  // oldest first
    if (auto current = current_of_legacy.find(run.config_hash); current != current_of_legacy.end())
      run.config_hash = current->second;
    ConfigHistory& history = out[run.config_hash];
    if (auto task = slurm.find(run.id); task != slurm.end())
      history.slurm.emplace(run.id, task->second);
    history.runs.insert(history.runs.begin(), std::move(run));
  }
  return out;
}

namespace {

const SlurmRunRecord* slurm_task_of(const ConfigHistory& history, int64_t run_id) {
  const auto task = history.slurm.find(run_id);
  return task == history.slurm.end() ? nullptr : &task->second;
}

bool can_continue(const RunRecord& run) {
  return run.status == RunStatus::interrupted ||
         (run.status == RunStatus::failed && is_transient(run.failure));
}

}  // namespace

RunPlan plan_run(const ConfigHistory& history, const PlanContext& context) {
  if (!context.force)  // 1
    for (const RunRecord& run : history.runs)
      if (run.status == RunStatus::completed)
        return {.fate = RunFate::already_completed, .run = run};
  if (!context.unavailable.empty())  // 2
    return {.fate = RunFate::unavailable, .reason = context.unavailable};
  if (context.slurm_states)  // 3
    for (const RunRecord& run : history.runs)
      if (const SlurmRunRecord* task = slurm_task_of(history, run.id))
        if (auto job = context.slurm_states->jobs.find(task->job_id);
            job != context.slurm_states->jobs.end() && job->second.active())
          return {.fate = RunFate::with_slurm,
                  .run = run,
                  .slurm_job = task->job_id,
                  .slurm_state = lower(job->second.state)};
  if (context.force || context.multi_node) return {.fate = RunFate::starts};  // 4
  const RunRecord* resumable = nullptr;                                       // 5
  for (const RunRecord& run : history.runs)
    if (can_continue(run)) {
      resumable = &run;
      break;
    }
  if (!resumable && context.scheduler == Scheduler::slurm)
    for (const RunRecord& run : history.runs)
      if (run.status == RunStatus::queued && slurm_task_of(history, run.id)) {
        resumable = &run;
        break;
      }
  if (resumable) {
    const SlurmRunRecord* task = slurm_task_of(history, resumable->id);
    if (task && context.scheduler == Scheduler::this_machine)
      return {.fate = RunFate::with_slurm, .run = *resumable, .slurm_job = task->job_id};
    return {.fate = RunFate::continues, .run = *resumable};
  }
  return {.fate = RunFate::starts};  // 6
}

}  // namespace trainyard
