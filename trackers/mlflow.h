// MLflow's view of the store's runs, through its REST API (api/2.0/mlflow): `trainyard export
// --mlflow URI` after the fact, `runtime.loggers: [mlflow]` while a batch trains
// (trackers/live_records.h). Each experiment is an MLflow experiment of the same name; each run
// an MLflow run named <variant>-run<id>, found again by its tag trainyard.uid, with
//   - params: its flat settings, as `trainyard runs` shows them ("train.optimizer.lr");
//   - metrics: every figure at its optimizer step, with its time (trackers/run_figures.h):
//   "step/…",
//     "epoch/…", "final/…", as in TensorBoard;
//   - tags: its variant, config hash, status, device, LibTorch version, error, and its git revision
//     as MLflow's own mlflow.source.git.commit; its status and end time as MLflow's;
//   - the experiment's report (report.html) as an artifact, by `trainyard export`.
// A study (sweep.search) is a parent run, "<variant> study", found again by its tag trainyard.uid
// ("study/<experiment>/<variant>/<hash>"): its trials and decisions counted, the last decision
// and the best trial (trial, settings, figure) as tags, every decision with its evidence as the
// artifact decisions.json; FINISHED once it has a best trial. Each trial's run is its child
// (mlflow.parentRunId), tagged trainyard.study, trainyard.trial and trainyard.rung (the rung it
// reached); a trial its schedule paused is FINISHED with trainyard.status "paused", not KILLED.
// Sending again sends only what the server lacks: a metric's points up to the step MLflow holds
// last for it are not sent again (MLflow keeps every point it is sent and cannot delete one; a
// continued run trains the steps after its checkpoint again to the same figures), params it has
// are not sent again, tags and status only when they differ. So exporting twice, or exporting
// what a live logger sent, creates nothing twice.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/http.h"
#include "db/store.h"

namespace trainyard {

// A tracking server: its address (http:// or https://) and how to sign in, from MLflow's own
// environment variables: MLFLOW_TRACKING_TOKEN (a bearer token), or MLFLOW_TRACKING_USERNAME and
// MLFLOW_TRACKING_PASSWORD. UserError for anything but an http(s) address.
struct MlflowServer {
  std::string uri;  // without a trailing slash
  HttpOptions http{};
};
MlflowServer mlflow_server(const std::string& uri);

// An MLflow run as the server holds it: what a later send compares with.
struct MlflowRun {
  std::string run_id;
  std::string artifact_uri;
  std::string status;                           // RUNNING, FINISHED, FAILED, KILLED, SCHEDULED
  int64_t end_time = 0;                         // ms since 1970; 0: none
  std::map<std::string, int64_t> last_steps{};  // metric -> the step of its latest point
  std::map<std::string, std::string> params{}, tags{};
};

// The server's refusal of a request (HTTP 4xx/5xx), with MLflow's error code
// ("INVALID_PARAMETER_VALUE"); a server that cannot be reached is a plain std::runtime_error.
class MlflowRefusal : public std::runtime_error {
 public:
  MlflowRefusal(const std::string& what, std::string code)
      : std::runtime_error(what), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

// The REST calls. Each throws std::runtime_error saying what failed: the server unreachable
// ("cannot reach …"), or its refusal with MLflow's error code and message.
class MlflowClient {
 public:
  explicit MlflowClient(MlflowServer server);
  const std::string& uri() const { return server_.uri; }
  // Once `stop` is set, no request starts ("stopped ..."; the one in flight ends within the
  // server's time-outs).
  void stop_when(const std::atomic<bool>* stop) { stop_ = stop; }

  // The id of the active experiment `name`, created when there is none.
  std::string experiment_id(const std::string& name);
  // The experiment's runs that carry trainyard.uid (only `uid`'s when given), by uid.
  std::map<std::string, MlflowRun> runs_by_uid(const std::string& experiment_id,
                                               const std::string& uid = "");
  MlflowRun create_run(const std::string& experiment_id, const std::string& name,
                       int64_t start_time, const std::map<std::string, std::string>& tags);
  // At most 1000 metrics and 100 params and 100 tags, as MLflow's log-batch takes them.
  struct Metric {
    std::string key;
    double value = 0;
    int64_t timestamp = 0;  // ms since 1970
    int64_t step = 0;
  };
  void log_batch(const std::string& run_id, const std::vector<Metric>& metrics,
                 const std::map<std::string, std::string>& params,
                 const std::map<std::string, std::string>& tags);
  void update_run(const std::string& run_id, const std::string& status, int64_t end_time);
  void delete_tag(const std::string& run_id, const std::string& key);
  // Writes `content` as the run's artifact `name` through the server (its mlflow-artifacts
  // proxy, `mlflow server`'s default); false when the run's artifacts live elsewhere.
  bool upload_artifact(const MlflowRun& run, const std::string& name, const std::string& content);

 private:
  // The server's JSON answer; MlflowRefusal when it refuses, std::runtime_error when it cannot be
  // reached or answers with something else (a web page: the wrong address).
  nlohmann::json call(const std::string& method, const std::string& endpoint,
                      const std::string& body);
  MlflowServer server_;
  HttpClient http_;
  const std::atomic<bool>* stop_ = nullptr;
};

// What one send did.
struct MlflowSent {
  bool created = false;  // the MLflow run is new
  size_t metrics = 0, params = 0;
  bool artifact = false;  // the report went (false too when none was given)
};

// Sends `run` (with `experiment_id`, its MLflow experiment) to the server: creates its MLflow run
// unless `existing` is it, then whatever the server lacks (see above), and `report_html`, when
// given, as its report.html. Throws as MlflowClient does; what went before the failure stays sent.
// `parent_run_id`: the MLflow run of the study whose trial `run` is (MlflowStudies::parent_of).
MlflowSent send_run_to_mlflow(MlflowClient& client, Store& store, const RunRecord& run,
                              const std::string& experiment_id,
                              const std::optional<MlflowRun>& existing,
                              const std::string* report_html = nullptr,
                              const std::string& parent_run_id = "");

// The study `key`'s parent run (see above), created unless `existing` is it, brought up to date;
// returns it as the server now holds it.
MlflowRun send_study_to_mlflow(MlflowClient& client, Store& store, const StudyKey& key,
                               const std::string& experiment_id,
                               const std::optional<MlflowRun>& existing);
std::string mlflow_study_uid(const StudyKey& key);

// The studies' parent runs one sender keeps up to date: `trainyard export`'s, or a batch's live
// sender's. Each send of a trial sends its study first (only what changed).
class MlflowStudies {
 public:
  // `held`: the experiment's runs the server holds (by uid), when the sender has them.
  MlflowStudies(MlflowClient& client, Store& store,
                const std::map<std::string, MlflowRun>& held = {});
  // The MLflow run id of the study whose trial `run` is, brought up to date; "" for a run that is
  // no study's trial.
  std::string parent_of(const RunRecord& run, const std::string& experiment_id);

 private:
  MlflowClient& client_;
  Store& store_;
  std::map<std::string, MlflowRun> held_;  // by uid
};

// What `trainyard export --mlflow` did.
struct MlflowExport {
  int runs = 0, created = 0;
  size_t metrics = 0, params = 0;
  int reports = 0;
  bool reports_elsewhere = false;       // the server keeps artifacts where only its clients write
  std::vector<std::string> problems{};  // runs the server refused, and why
};

// Every run of `experiment` ("" for all) that trained, each with its experiment's report. A run the
// server refuses is a problem, and the others go on; a server that cannot be reached stops it all
// (std::runtime_error), what went before staying sent.
MlflowExport export_mlflow(Store& store, MlflowClient& client, const std::string& experiment);

// The tag trainyard.uid that finds a run again: its uid (one made of its id and queue time for a
// run recorded before runs had one).
std::string mlflow_uid(const RunRecord& run);

// The MLflow names for a run's flat key: characters MLflow refuses (anything but letters, digits,
// "_-. :/") become "_", as do empty, "." and ".." parts between slashes (MLflow refuses a name that
// resolves to another path); cut at MLflow's 250 bytes.
std::string mlflow_key(const std::string& key);

}  // namespace trainyard
