#include "runner/run_reporter.h"

#include <mutex>

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>

#include "runner/batch_records.h"

namespace trainyard {

namespace {

// Forwards a logger's lines to the batch console (above its status line).
class ConsoleSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit ConsoleSink(BatchConsole& console) : console_(console) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(message, formatted);
    std::string text = fmt::to_string(formatted);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    console_.line(text);
  }
  void flush_() override {}

 private:
  BatchConsole& console_;
};

}  // namespace

RunLog open_run_log(const std::string& name, const std::string& path, bool append,
                    spdlog::sink_ptr screen) {
  auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/!append);
  file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] %v");
  screen->set_pattern("[%H:%M:%S] %v");
  RunLog log{std::make_shared<spdlog::logger>(name + "/file", file),
             std::make_shared<spdlog::logger>(name, spdlog::sinks_init_list{screen, file})};
  log.file->flush_on(spdlog::level::info);
  log.both->flush_on(spdlog::level::info);
  return log;
}

spdlog::sink_ptr console_sink(BatchConsole& console) {
  return std::make_shared<ConsoleSink>(console);
}

RunReporter::RunReporter(RunRecords& records, RunLog log, BatchConsole* console,
                         std::chrono::seconds progress_every)
    : records_(records), log_(std::move(log)), console_(console), progress_every_(progress_every) {}

void RunReporter::on_log(const std::string& line) { log_.both->info(line); }

void RunReporter::on_setup(const std::map<std::string, std::string>& attributes) {
  records_.attributes(attributes);
}

void RunReporter::on_epoch(int64_t epoch, const MetricValues& values) {
  records_.epoch(epoch, values);
}

void RunReporter::on_step(int64_t step, const MetricValues& values) { records_.step(step, values); }

void RunReporter::on_progress(const TrainingProgress& p) {
  if (console_) {
    log_.file->info(p.line);
    console_->progress(p);
  } else {
    log_.both->info(p.line);
  }
  if (Clock::now() - last_heartbeat_ < progress_every_) return;  // not every line
  records_.heartbeat(run_progress_of(p));
  last_heartbeat_ = Clock::now();
}

void RunReporter::on_tick() {
  if (Clock::now() - last_heartbeat_ < std::chrono::seconds(kHeartbeatSeconds)) return;
  records_.heartbeat(std::nullopt);
  last_heartbeat_ = Clock::now();
}

std::string continues_from(const std::string& position) {
  return position.empty() ? "the start (it left no checkpoint)" : "its checkpoint at " + position;
}

bool keeps_checkpoint(const LaunchResult& result, bool save_state) {
  switch (result.outcome) {
    case LaunchOutcome::completed:
      return save_state;
    case LaunchOutcome::interrupted:
      return true;
    case LaunchOutcome::failed:  // train.save_state or not: nothing will continue from it
      return is_transient(result.failure);
  }
  return true;
}

void record_outcome(const LaunchResult& result, const RunEnding& ending, RunRecords& records,
                    const RunLog& log) {
  switch (result.outcome) {
    case LaunchOutcome::completed:
      records.completed(result.metrics);
      (ending.completed_on_screen ? log.both : log.file)->info("run {} completed", ending.run_id);
      break;
    case LaunchOutcome::failed:
      log.both->error("run failed ({}): {}", to_string(result.failure), result.error);
      records.ended(RunStatus::failed, result.error, result.failure);
      break;
    case LaunchOutcome::interrupted: {
      const std::string& why =
          ending.interrupted_why.empty() ? result.error : ending.interrupted_why;
      if (ending.continued_by.empty())  // paused by a study: its decision continues it, or not
        log.both->info("run {}: {}", ending.run_id, why);
      else
        log.both->warn("run {} interrupted ({}); `{}` again continues it from its checkpoint",
                       ending.run_id, why, ending.continued_by);
      records.ended(RunStatus::interrupted, why, FailureClass::interrupted);
      break;
    }
  }
  // Removed only once the outcome is recorded: a process killed in between leaves a checkpoint
  // the next batch removes (a completed run's) or continues from.
  if (!keeps_checkpoint(result, ending.save_state)) remove_checkpoint(ending.state_dir);
}

}  // namespace trainyard
