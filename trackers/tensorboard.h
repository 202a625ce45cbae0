// TensorBoard's view of the store's runs: `runtime.loggers: [tensorboard]` writes it while a run
// trains (trackers/live_records.h), `trainyard export --tensorboard DIR` after the fact. One
// folder per run, DIR/<experiment>/<variant>-run<id>/, with one event file:
//   - every figure as a scalar at its optimizer step: "step/<key>" as recorded at steps (the loss
//     at a progress line, validations inside an epoch), "epoch/<key>" at the step the epoch ended
//     (Lightning's rule), "final/<key>" (test figures, throughput, memory) at the run's last step;
//   - the run's settings (its flat params, as `trainyard runs` shows them) for the HParams
//     dashboard: a session start, and a session end with how the run ended, so the dashboard lists
//     the variants of a batch side by side with their final figures.
// The SQLite store stays the source of truth: a folder is rewritten whole from the store's records
// whenever its run starts or continues, so a continued run shows one line, never two.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "db/store.h"
#include "trackers/run_figures.h"

namespace trainyard {

// A run's event file, being written.
class TensorBoardRun {
 public:
  // Starts a new event file in `folder` (created), after removing the event files already there.
  // std::runtime_error naming the folder when it cannot be written.
  explicit TensorBoardRun(const std::string& folder);
  ~TensorBoardRun();
  TensorBoardRun(const TensorBoardRun&) = delete;
  TensorBoardRun& operator=(const TensorBoardRun&) = delete;

  // Each of `values` as a scalar "<prefix>/<key>" at `step`; NaN is left out (as the store does).
  void scalars(const std::string& prefix, int64_t step, double wall_time,
               const std::map<std::string, double>& values);
  // The hparams plugin's session start: the run's settings, and its group (its configuration: the
  // repeats of a variant form one group, which the dashboard averages).
  void session_start(const std::map<std::string, std::string>& params, const std::string& group,
                     double wall_time);
  // The session's end: completed is success, failed failure, anything else unknown.
  void session_end(RunStatus status, double wall_time);
  // Written to the file now (the writes are buffered in between).
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& event);
  std::string path_;
  std::FILE* file_ = nullptr;
};

// The run's folder under `dir`: <dir>/<experiment>/<variant>-run<id> (a name TensorBoard lists);
// a study's trial in its study's folder, <dir>/<experiment>/<variant>-study/trial<i>-run<id>, so
// TensorBoard lists a study's trials together and its HParams dashboard, pointed at the study's
// folder, compares them alone.
std::string tensorboard_folder(const std::string& dir, const RunRecord& run, Store& store);

// The last optimizer step written of each kind of figure (-1: none yet).
struct TensorBoardSteps {
  int64_t step = -1;   // "step/" figures
  int64_t epoch = -1;  // "epoch/" figures
  int64_t last() const { return std::max<int64_t>({step, epoch, 0}); }
};

// Writes into `writer` everything the store holds of `run`: its session start, its step and epoch
// figures, and, when it has ended, its final figures and session end.
TensorBoardSteps write_tensorboard_records(TensorBoardRun& writer, Store& store,
                                           const RunRecord& run);

// Every run of `experiment` ("" for all), each into its folder under `dir`; returns how many.
int export_tensorboard(Store& store, const std::string& dir, const std::string& experiment);

}  // namespace trainyard
