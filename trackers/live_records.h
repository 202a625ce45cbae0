// A run's records as they are written into the store, also written where the user looks while it
// trains: `runtime.loggers: [tensorboard, mlflow]` (docs/trackers.md).
//
// TensorBoard: The store stays the source of truth:
// the event file starts from what the store holds of the run, and is rewritten from it whenever a
// figure comes again at a step already written (a continued run trains again the steps after its
// checkpoint), so TensorBoard shows one line, equal to the database. A step's figures are written
// once the next step's come (a validation may add to the step of a progress line); writing is
// buffered and flushed at each heartbeat and epoch, on the controller's side of the worker's pipe —
// never in the training step. A logger that cannot write says so once in the run's log and stops;
// the run and its database records go on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "db/run_records.h"
#include "trackers/mlflow.h"
#include "trackers/tensorboard.h"

namespace trainyard {

class TensorBoardRecords : public RunRecords {
 public:
  // `inner`: where the records go first (the store's). `folder`: the run's event-file folder
  // (tensorboard_folder). `warn`: how a failure to write is said (once).
  TensorBoardRecords(RunRecords& inner, Store& store, int64_t run_id, std::string folder,
                     std::function<void(const std::string&)> warn);
  void attributes(const std::map<std::string, std::string>& attributes) override;
  void epoch(int64_t epoch, const std::map<std::string, double>& values) override;
  void step(int64_t step, const std::map<std::string, double>& values) override;
  void heartbeat(const std::optional<RunProgress>& progress) override;
  void completed(const std::map<std::string, double>& metrics) override;
  void ended(RunStatus status, const std::string& error, FailureClass failure) override;

 private:
  // Runs `write` on the event file, unless an earlier write failed; a failure is said and ends
  // the logging.
  void write(const std::function<void()>& write);
  void rewrite_from_store();
  RunRecords& inner_;
  Store& store_;
  int64_t run_id_;
  std::string folder_;
  std::function<void(const std::string&)> warn_;
  std::unique_ptr<TensorBoardRun> writer_;
  void write_pending_step();
  TensorBoardSteps written_;
  std::optional<StepRow> pending_;  // the latest step's figures, not written yet
  bool failed_ = false;
};

// MLflow: the batch's runs sent to a tracking server while they train (MLFLOW_TRACKING_URI), from
// a thread of its own that reads each run from the database through a connection of its own and
// sends what the server lacks — send_run_to_mlflow, as `trainyard export --mlflow` does, so the two
// cannot disagree. Training never waits on the server: a request only marks the run. A server that
// is down or refuses costs the run nothing: the run's next request, or `trainyard export --mlflow`
// later, sends what it could not take.
class MlflowSender {
 public:
  MlflowSender(std::string db_path, MlflowServer server);
  ~MlflowSender();  // stops after the HTTP request in flight (at most its 30 s time-out)
  MlflowSender(const MlflowSender&) = delete;
  MlflowSender& operator=(const MlflowSender&) = delete;

  // Sends the run as the store holds it, soon.
  void send(int64_t run_id);
  // Why sending `run_id` failed, when it failed since the last call ("": nothing new).
  std::string take_problem(int64_t run_id);
  // The batch's end: waits up to `wait` for the requested sends, then sends every run once more,
  // with its experiment's report. Returns what could not be sent ("run 3: cannot reach ...").
  std::vector<std::string> finish(std::chrono::seconds wait);

 private:
  void loop();
  void send_now(Store& store, int64_t run_id, const std::string* report_html);
  std::string db_path_;
  MlflowServer server_;
  std::unique_ptr<MlflowClient> client_;               // the thread's
  std::map<std::string, std::string> experiment_ids_;  // the thread's
  std::unique_ptr<MlflowStudies> studies_;             // the thread's (over its Store)
  std::mutex mutex_;                                   // guards what follows
  std::condition_variable changed_;
  std::set<int64_t> requested_, batch_runs_;
  std::map<int64_t, std::string> new_problems_, failing_;  // failing_: the last send's failure
  bool finishing_ = false, finished_ = false, stop_ = false;
  std::atomic<bool> stop_requests_ = false;  // the client's: checked before each request
  std::thread thread_;                       // last: starts once the rest is built
};

// A run's records, and a request to send the run after each epoch, at its end, and at heartbeats
// at most every few seconds. The first failure to send is said in the run's log (once).
class MlflowRecords : public RunRecords {
 public:
  MlflowRecords(RunRecords& inner, MlflowSender& sender, int64_t run_id,
                std::function<void(const std::string&)> warn);
  void attributes(const std::map<std::string, std::string>& attributes) override;
  void epoch(int64_t epoch, const std::map<std::string, double>& values) override;
  void step(int64_t step, const std::map<std::string, double>& values) override;
  void heartbeat(const std::optional<RunProgress>& progress) override;
  void completed(const std::map<std::string, double>& metrics) override;
  void ended(RunStatus status, const std::string& error, FailureClass failure) override;

 private:
  void send(bool now);
  RunRecords& inner_;
  MlflowSender& sender_;
  int64_t run_id_;
  std::function<void(const std::string&)> warn_;
  std::chrono::steady_clock::time_point last_sent_{};
  bool warned_ = false;
};

}  // namespace trainyard
