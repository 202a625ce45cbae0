// What a worker (`trainyard worker`, one rank) tells the launcher: one JSON object per line on the
// pipe at fd 3; and what the launcher asks of a warm worker (`trainyard worker --serve`): one run
// request per line on the pipe at fd 4. A dying worker can leave half a line, and a worker is code
// that may misbehave, so reading a line never throws: a line that is not a message, or a field of
// the wrong type, is dropped. Figures keep NaN and infinity (common/json_numbers.h): a diverged
// run's loss arrives as NaN, not as a crash of the controller.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "runner/engine/engine.h"

namespace trainyard {

struct WorkerMessage {
  std::optional<std::string> log, error;
  std::optional<std::map<std::string, std::string>> setup;
  std::optional<int64_t> epoch;  // with `values`
  std::optional<int64_t> step;   // with `values`
  MetricValues values;
  std::optional<TrainingProgress> progress;
  std::optional<MetricValues> result;
  // A warm worker's run has ended: the exit code a worker started for it alone would have exited
  // with (0 completed, 2 bad input, 1 failure, 130 stopped or paused at its rung).
  std::optional<int> done;
};

// One run for a warm worker: what a worker started for it alone gets as its command line
// (--config, --variant, --output-prefix, --continue-from, --pause-after-epochs) and environment
// (its intra-op threads and why), and the log file its output is added to.
struct WorkerRequest {
  std::string config_path, variant, output_prefix, continue_from;
  int64_t pause_after_epochs = 0;
  std::string log_path;  // the launcher has created it, or kept it for a run that continues
  int threads = 0;
  std::string threads_why;
};

// nullopt when the line is not a JSON object; fields of the wrong type are left out.
std::optional<WorkerMessage> parse_worker_message(std::string_view line);

// The lines a worker writes (each without its newline).
std::string log_message(const std::string& line);
std::string error_message(const std::string& message);
std::string setup_message(const std::map<std::string, std::string>& attributes);
std::string epoch_message(int64_t epoch, const MetricValues& values);
std::string step_message(int64_t step, const MetricValues& values);
std::string progress_message(const TrainingProgress& progress);
std::string result_message(const MetricValues& metrics);
std::string done_message(int exit_code);

// The launcher's side of a warm worker's requests. parse_worker_request returns nullopt for a line
// that is not a whole request (the launcher writes them; nothing else does).
std::string worker_request_message(const WorkerRequest& request);
std::optional<WorkerRequest> parse_worker_request(std::string_view line);

}  // namespace trainyard
