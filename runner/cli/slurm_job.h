// What a submission's jobs share — an array task (`trainyard slurm-task`) and a study's job
// (`trainyard slurm-study`): Slurm's signals, and going back in the queue after its warning
// before the time limit.
#pragma once

#include <atomic>
#include <functional>
#include <string>

namespace trainyard {

// Installs the handlers: SIGUSR1 (Slurm's warning before the time limit, --signal=USR1@T) asks to
// stop, checkpointed, and be requeued; SIGTERM (scancel, preemption, `scontrol requeue`: Slurm
// requeues those itself) and SIGINT ask to stop.
void take_slurm_signals();
// The flag the launcher or the controller watches: a signal asked to stop.
const std::atomic<bool>& slurm_stop();
// The stop came from the time-limit warning.
bool slurm_warned();

// The environment variable `name`, or `fallback` when it is unset or empty.
std::string env_or(const char* name, const std::string& fallback);

// After the warning, the job goes back in the queue (`scontrol requeue`), unless its submission
// was cancelled (the "cancelled" mark in its folder) or it was requeued `max_requeues` times
// already (`restarts`: SLURM_RESTART_COUNT). `announce` runs just before Slurm is asked. Returns
// why it was not requeued ("": it was).
std::string requeue_after_warning(const std::string& submission, const std::string& job_id,
                                  int restarts, int max_requeues,
                                  const std::function<void()>& announce);

}  // namespace trainyard
