#include "runner/cli/slurm_job.h"

#include <csignal>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "common/process.h"
#include "common/text.h"

namespace trainyard {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_warned{false};

extern "C" void on_slurm_warning(int) {
  g_warned.store(true);
  g_stop.store(true);
}
extern "C" void on_slurm_terminate(int) { g_stop.store(true); }

}  // namespace

void take_slurm_signals() {
  std::signal(SIGUSR1, on_slurm_warning);
  std::signal(SIGTERM, on_slurm_terminate);
  std::signal(SIGINT, on_slurm_terminate);
}

const std::atomic<bool>& slurm_stop() { return g_stop; }

bool slurm_warned() { return g_warned.load(); }

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

std::string requeue_after_warning(const std::string& submission, const std::string& job_id,
                                  int restarts, int max_requeues,
                                  const std::function<void()>& announce) {
  if (std::filesystem::exists(std::filesystem::path(submission) / "cancelled"))
    return "its submission was cancelled";
  if (restarts >= max_requeues)
    return fmt::format(
        "Slurm's time-limit warning came after {} already; no more requeues (--max-requeues)",
        plural(restarts, "requeue"));
  announce();
  const CommandOutput requeue = run_program({"scontrol", "requeue", job_id});
  if (requeue.exit_code == 0) return "";
  return "Slurm refused to requeue it (" + strip(requeue.err) + ")";
}

}  // namespace trainyard
