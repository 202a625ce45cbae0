// The console of a batch. On a terminal, log lines scroll above one status line that is redrawn in
// place — where the batch is (run i/N), the run (experiment/variant, epoch, step, loss,
// samples/s) and the ETA of the run and of the batch — as Lightning's progress bar does. When
// stderr is not a terminal (nohup, a log file), every line is printed as it comes, progress lines
// included, so the file reads as a plain periodic record.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include "runner/engine/engine.h"

namespace trainyard {

// The width of the terminal `out` writes to, in columns; 0 when it is not a terminal (a file, a
// pipe: lines are then not wrapped).
size_t terminal_width(std::FILE* out);

class BatchConsole {
 public:
  explicit BatchConsole(std::FILE* out = stderr);
  ~BatchConsole();
  BatchConsole(const BatchConsole&) = delete;
  BatchConsole& operator=(const BatchConsole&) = delete;

  bool on_terminal() const { return terminal_; }

  // Run `index` (1-based) of `total` starts: "run 7/42 resnet/bf16".
  void start_run(int index, int total, const std::string& name);
  // The run ended after `seconds`: what the batch's ETA averages.
  void end_run(double seconds);
  // A log line (already formatted): above the status line on a terminal.
  void line(const std::string& text);
  // A progress line: the status line on a terminal, `progress.line` otherwise.
  void progress(const TrainingProgress& progress);
  // Clears the status line (end of the batch).
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  std::string status_text() const;
  void draw();
  void clear();

  // A study's trials side by side (sweep.search.parallel) print from their slots' threads.
  std::recursive_mutex mutex_;
  std::FILE* out_;
  bool terminal_;
  bool drawn_ = false;
  int index_ = 0, total_ = 0;
  std::string name_;
  TrainingProgress last_{};
  bool has_progress_ = false;
  Clock::time_point run_start_ = Clock::now();
  int runs_done_ = 0;
  double seconds_done_ = 0;
};

}  // namespace trainyard
