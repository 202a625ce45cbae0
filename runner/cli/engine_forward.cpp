// The light `trainyard` executable's stand-ins for the commands that resolve components — run,
// validate, list, report, submit, worker, slurm-task — so that the others (runs, status, rm,
// collect, cancel, --help) start without LibTorch (ARCHITECTURE.md, "Executables"). Each hands
// this process to trainyard-engine beside it by exec: the pid, environment, open files, terminal
// and arguments stay as they were; what changes is the program. trainyard-engine links the real
// handlers in place of this file.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "common/process.h"
#include "runner/cli/commands.h"

namespace trainyard {

namespace {

int exec_engine(const char* command, const std::vector<std::string>& args) {
  const std::string engine =
      (std::filesystem::path(self_executable()).parent_path() / kEngineExecutable).string();
  std::vector<const char*> argv = {engine.c_str(), command};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  argv.push_back(nullptr);
  execv(engine.c_str(), const_cast<char* const*>(argv.data()));
  throw std::runtime_error(
      fmt::format("cannot start {} for '{}': {}; it is built and installed beside trainyard "
                  "(scripts/build.sh builds both)",
                  engine, command, std::strerror(errno)));
}

}  // namespace

int run_command(const std::vector<std::string>& args) { return exec_engine("run", args); }
int validate_command(const std::vector<std::string>& args) { return exec_engine("validate", args); }
int list_command(const std::vector<std::string>& args) { return exec_engine("list", args); }
int report_command(const std::vector<std::string>& args) { return exec_engine("report", args); }
int sample_command(const std::vector<std::string>& args) { return exec_engine("sample", args); }
int submit_command(const std::vector<std::string>& args) { return exec_engine("submit", args); }
int worker_command(const std::vector<std::string>& args) { return exec_engine("worker", args); }
int slurm_task_command(const std::vector<std::string>& args) {
  return exec_engine("slurm-task", args);
}
int slurm_study_command(const std::vector<std::string>& args) {
  return exec_engine("slurm-study", args);
}

}  // namespace trainyard
