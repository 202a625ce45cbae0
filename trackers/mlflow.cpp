#include "trackers/mlflow.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "reports/report.h"
#include "trackers/run_figures.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

using nlohmann::json;

constexpr size_t kMetricsPerBatch = 1000;  // MLflow's log-batch limits
constexpr size_t kParamsPerBatch = 100;
constexpr size_t kTagsPerBatch = 100;
constexpr size_t kParamValueLength = 6000;
constexpr size_t kTagValueLength = 8000;
constexpr size_t kKeyLength = 250;

std::string dump(const json& body) {
  // Replace, never throw on, bytes that are not UTF-8 (an error message, a cut value).
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

// At most `limit` bytes, cut before a UTF-8 continuation byte (MLflow counts characters).
std::string cut(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

int64_t millis(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1000)); }

// MLflow's JSON writes int64 fields as numbers or as strings, by version.
int64_t int64_field(const json& object, const char* key) {
  const auto found = object.find(key);
  if (found == object.end() || found->is_null()) return 0;
  if (found->is_number()) return found->get<int64_t>();
  int64_t value = 0;  // a string, or anything else: 0
  if (found->is_string()) {
    const std::string text = found->get<std::string>();
    std::from_chars(text.data(), text.data() + text.size(), value);
  }
  return value;
}

std::string string_field(const json& object, const char* key) {
  const auto found = object.find(key);
  return found == object.end() || !found->is_string() ? "" : found->get<std::string>();
}

MlflowRun parse_run(const json& run) {
  const json info = run.value("info", json::object());
  MlflowRun parsed{.run_id = string_field(info, "run_id"),
                   .artifact_uri = string_field(info, "artifact_uri"),
                   .status = string_field(info, "status"),
                   .end_time = int64_field(info, "end_time")};
  const json data = run.value("data", json::object());
  for (const json& metric : data.value("metrics", json::array()))
    parsed.last_steps[string_field(metric, "key")] = int64_field(metric, "step");
  for (const json& param : data.value("params", json::array()))
    parsed.params[string_field(param, "key")] = string_field(param, "value");
  for (const json& tag : data.value("tags", json::array()))
    parsed.tags[string_field(tag, "key")] = string_field(tag, "value");
  return parsed;
}

json key_values(const std::map<std::string, std::string>& entries) {
  json list = json::array();
  for (const auto& [key, value] : entries) list.push_back({{"key", key}, {"value", value}});
  return list;
}

// A number as MLflow's protobuf JSON takes it: NaN and infinities as words (JSON has none).
json metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

// A trial a study's schedule paused ended as the schedule wanted, and can go on: FINISHED, with
// trainyard.status "paused", never KILLED (which says a run was stopped against its will).
const char* mlflow_status(const RunRecord& run) {
  if (is_paused(run)) return "FINISHED";
  switch (run.status) {
    case RunStatus::queued:
      return "SCHEDULED";
    case RunStatus::running:
      return "RUNNING";
    case RunStatus::completed:
      return "FINISHED";
    case RunStatus::failed:
      return "FAILED";
    case RunStatus::interrupted:
    case RunStatus::skipped:
      return "KILLED";
  }
  return "RUNNING";
}

// The tags a run carries: who it is, and how it ran. Empty values are left out.
std::map<std::string, std::string> run_tags(const RunRecord& run) {
  std::map<std::string, std::string> tags = {
      {"trainyard.uid", mlflow_uid(run)},
      {"trainyard.run", std::to_string(run.id)},
      {"trainyard.experiment", run.experiment},
      {"trainyard.variant", run.variant},
      {"trainyard.repeat", std::to_string(run.repeat)},
      {"trainyard.config_hash", run.config_hash},
      {"trainyard.status", is_paused(run) ? "paused" : to_string(run.status)},
      {"trainyard.precision", run.precision},
      {"trainyard.strategy", run.strategy},
      {"trainyard.devices", std::to_string(run.devices)},
      {"trainyard.device", run.environment.device_name},
      {"trainyard.torch_version", run.environment.torch_version},
      {"trainyard.host", run.host},
      {"mlflow.source.git.commit", run.environment.git_revision},
  };
  if (run.failure != FailureClass::none) tags["trainyard.failure"] = to_string(run.failure);
  tags["trainyard.error"] = run.error;
  std::erase_if(tags, [](const auto& tag) { return tag.second.empty(); });
  for (auto& [key, value] : tags) value = cut(value, kTagValueLength);
  return tags;
}

// The rung a trial that trained `epochs` reached: how many decision epochs lie below (the last
// rung's trials, every one of them; median's checks count as rungs).
int64_t rung_reached(const std::vector<StudyDecisionRow>& decisions, int64_t epochs) {
  std::set<int64_t> below;
  for (const StudyDecisionRow& d : decisions)
    if (d.epochs < epochs) below.insert(d.epochs);
  return static_cast<int64_t>(below.size());
}

// The tags of a study's trial: its study, trial and rung, and its parent (the study's run).
void add_trial_tags(Store& store, const RunRecord& run, const std::string& parent_run_id,
                    std::map<std::string, std::string>& tags) {
  const auto trial = store.study_trial_of(run.id);
  if (!trial) return;
  const auto& [key, row] = *trial;
  tags["trainyard.study"] = key.study;
  tags["trainyard.study_hash"] = key.study_hash;
  tags["trainyard.trial"] = std::to_string(row.trial);
  tags["trainyard.rung"] = std::to_string(rung_reached(store.study_decisions(key), row.epochs));
  if (!parent_run_id.empty()) tags["mlflow.parentRunId"] = parent_run_id;
}

// Sends the tags of `wanted` that `held` lacks or holds otherwise, 100 a request.
void send_changed_tags(MlflowClient& client, const MlflowRun& held,
                       const std::map<std::string, std::string>& wanted) {
  std::map<std::string, std::string> changed;
  for (const auto& [key, value] : wanted) {
    const auto it = held.tags.find(key);
    if (it == held.tags.end() || it->second != value) changed[key] = value;
    if (changed.size() == kTagsPerBatch) {
      client.log_batch(held.run_id, {}, {}, changed);
      changed.clear();
    }
  }
  if (!changed.empty()) client.log_batch(held.run_id, {}, {}, changed);
}

// A decision in a line: "rung 0 (epoch 1): trials 0, 4 went on" / "trial 6 at epoch 2: paused".
std::string decision_line(const StudyDecisionRow& d) {
  std::vector<std::string> promoted;
  for (const auto& t : json::parse(d.promoted))
    promoted.push_back(std::to_string(t.get<int64_t>()));
  if (d.trial && promoted.empty())
    return fmt::format("trial {} at epoch {}: paused", *d.trial, d.epochs);
  return fmt::format("rung {} (epoch {}): trial{} {} went on", d.rung, d.epochs,
                     promoted.size() == 1 ? "" : "s", fmt::join(promoted, ", "));
}

}  // namespace

std::string mlflow_uid(const RunRecord& run) {
  // A run recorded before runs had a uid (schema 3): its id and queue time, unique in its database.
  return run.uid.empty() ? fmt::format("run{}-{}", run.id, run.queued_at) : run.uid;
}

std::string mlflow_key(const std::string& key) {
  std::string name = key.substr(0, kKeyLength);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("_-. :/").find(c) == std::string_view::npos)
      c = '_';
  // MLflow takes names as paths that must not resolve to another: no empty, "." or ".." part.
  std::string normal;
  size_t start = 0;
  for (;;) {
    const size_t end = std::min(name.find('/', start), name.size());
    const std::string part = name.substr(start, end - start);
    normal +=
        part.empty() || part == "." || part == ".." ? std::string(part.size() + 1, '_') : part;
    if (end == name.size()) break;
    normal += '/';
    start = end + 1;
  }
  return normal.substr(0, kKeyLength);
}

MlflowServer mlflow_server(const std::string& uri) {
  if (!uri.starts_with("http://") && !uri.starts_with("https://"))
    throw UserError(fmt::format(
        "MLflow: '{}' is not a tracking server's address; give its http:// or https:// address "
        "(start one with `mlflow server --backend-store-uri sqlite:///mlflow.db`, then "
        "http://127.0.0.1:5000)",
        uri));
  MlflowServer server{.uri = uri};
  while (server.uri.ends_with('/')) server.uri.pop_back();
  const char* token = std::getenv("MLFLOW_TRACKING_TOKEN");
  const char* user = std::getenv("MLFLOW_TRACKING_USERNAME");
  const char* password = std::getenv("MLFLOW_TRACKING_PASSWORD");
  if (token && *token) {
    server.http.headers.push_back(fmt::format("Authorization: Bearer {}", token));
  } else if (user && *user) {
    server.http.basic_auth = fmt::format("{}:{}", user, password ? password : "");
  }
  return server;
}

MlflowClient::MlflowClient(MlflowServer server) : server_(std::move(server)), http_(server_.http) {}

json MlflowClient::call(const std::string& method, const std::string& endpoint,
                        const std::string& body) {
  if (stop_ && stop_->load()) throw std::runtime_error("stopped before MLflow took everything");
  const std::string url = server_.uri + "/api/2.0/mlflow/" + endpoint;
  const HttpResponse response =
      http_.request(method, url, body, body.empty() ? "" : "application/json");
  const json answer = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (response.status == 200 && answer.is_object()) return answer;
  if (response.status == 200)  // a web page, a proxy's answer: not an MLflow server's API
    throw std::runtime_error(fmt::format(
        "{} answered with something other than MLflow's JSON (\"{}\"): is {} an MLflow tracking "
        "server's address?",
        url, cut(response.body, 80), server_.uri));
  std::string code = fmt::format("HTTP {}", response.status), message = response.body;
  if (answer.is_object()) {
    code = answer.value("error_code", code);
    message = answer.value("message", message);
  }
  throw MlflowRefusal(fmt::format("MLflow at {} refused {}: {}: {}", server_.uri, endpoint, code,
                                  cut(message, 500)),
                      code);
}

std::string MlflowClient::experiment_id(const std::string& name) {
  for (int attempt = 0;; ++attempt) {
    try {
      const json found =
          call("GET", "experiments/get-by-name?experiment_name=" + url_escape(name), "");
      const json experiment = found.value("experiment", json::object());
      if (string_field(experiment, "lifecycle_stage") == "deleted")
        throw std::runtime_error(fmt::format(
            "MLflow at {} has experiment '{}' deleted (id {}): restore it (`mlflow experiments "
            "restore --experiment-id {}`) or remove it for good (`mlflow gc`), then export "
            "again",
            server_.uri, name, string_field(experiment, "experiment_id"),
            string_field(experiment, "experiment_id")));
      return string_field(experiment, "experiment_id");
    } catch (const MlflowRefusal& e) {
      if (e.code() != "RESOURCE_DOES_NOT_EXIST" || attempt > 0) throw;
    }
    try {
      return string_field(call("POST", "experiments/create", dump({{"name", name}})),
                          "experiment_id");
    } catch (const MlflowRefusal& e) {
      if (e.code() != "RESOURCE_ALREADY_EXISTS") throw;  // created meanwhile: found next time
    }
  }
}

std::map<std::string, MlflowRun> MlflowClient::runs_by_uid(const std::string& experiment_id,
                                                           const std::string& uid) {
  std::map<std::string, MlflowRun> runs;
  json request = {{"experiment_ids", {experiment_id}}, {"max_results", 1000}};
  if (!uid.empty()) request["filter"] = fmt::format("tags.`trainyard.uid` = '{}'", uid);
  for (;;) {
    const json page = call("POST", "runs/search", dump(request));
    for (const json& run : page.value("runs", json::array())) {
      MlflowRun parsed = parse_run(run);
      const auto tag = parsed.tags.find("trainyard.uid");
      if (tag != parsed.tags.end()) runs[tag->second] = std::move(parsed);
    }
    const std::string token = string_field(page, "next_page_token");
    if (token.empty()) return runs;
    request["page_token"] = token;
  }
}

MlflowRun MlflowClient::create_run(const std::string& experiment_id, const std::string& name,
                                   int64_t start_time,
                                   const std::map<std::string, std::string>& tags) {
  const json created = call("POST", "runs/create",
                            dump({{"experiment_id", experiment_id},
                                  {"run_name", name},
                                  {"start_time", start_time},
                                  {"tags", key_values(tags)}}));
  return parse_run(created.value("run", json::object()));
}

void MlflowClient::log_batch(const std::string& run_id, const std::vector<Metric>& metrics,
                             const std::map<std::string, std::string>& params,
                             const std::map<std::string, std::string>& tags) {
  json batch = {{"run_id", run_id}, {"params", key_values(params)}, {"tags", key_values(tags)}};
  batch["metrics"] = json::array();
  for (const Metric& metric : metrics)
    batch["metrics"].push_back({{"key", metric.key},
                                {"value", metric_value(metric.value)},
                                {"timestamp", metric.timestamp},
                                {"step", metric.step}});
  call("POST", "runs/log-batch", dump(batch));
}

void MlflowClient::update_run(const std::string& run_id, const std::string& status,
                              int64_t end_time) {
  json update = {{"run_id", run_id}, {"status", status}};
  if (end_time > 0) update["end_time"] = end_time;
  call("POST", "runs/update", dump(update));
}

void MlflowClient::delete_tag(const std::string& run_id, const std::string& key) {
  call("POST", "runs/delete-tag", dump({{"run_id", run_id}, {"key", key}}));
}

bool MlflowClient::upload_artifact(const MlflowRun& run, const std::string& name,
                                   const std::string& content) {
  // "mlflow-artifacts:/<experiment>/<run>/artifacts", or with the server's address after "//".
  constexpr std::string_view kScheme = "mlflow-artifacts:";
  if (!run.artifact_uri.starts_with(kScheme)) return false;
  std::string path = run.artifact_uri.substr(kScheme.size());
  if (path.starts_with("//")) path = path.substr(std::min(path.find('/', 2), path.size()));
  while (path.starts_with('/')) path.erase(0, 1);
  const std::string url =
      fmt::format("{}/api/2.0/mlflow-artifacts/artifacts/{}/{}", server_.uri, path, name);
  const HttpResponse response = http_.request("PUT", url, content, "text/html");
  if (response.status != 200)
    throw MlflowRefusal(fmt::format("MLflow at {} refused the artifact {}: HTTP {}: {}",
                                    server_.uri, name, response.status, cut(response.body, 500)),
                        fmt::format("HTTP {}", response.status));
  return true;
}

std::string mlflow_study_uid(const StudyKey& key) {
  return fmt::format("study/{}/{}/{}", key.experiment, key.study, key.study_hash);
}

MlflowRun send_study_to_mlflow(MlflowClient& client, Store& store, const StudyKey& key,
                               const std::string& experiment_id,
                               const std::optional<MlflowRun>& existing) {
  const std::vector<StudyTrialRow> trials = store.study_trials(key);
  const std::vector<StudyDecisionRow> decisions = store.study_decisions(key);
  const std::optional<StudyOutcomeRow> outcome = store.study_outcome(key);
  std::map<std::string, std::string> tags = {
      {"trainyard.uid", mlflow_study_uid(key)},
      {"trainyard.kind", "study"},
      {"trainyard.experiment", key.experiment},
      {"trainyard.study", key.study},
      {"trainyard.study_hash", key.study_hash},
      {"trainyard.trials", std::to_string(trials.size())},
      {"trainyard.decisions", std::to_string(decisions.size())},
      {"trainyard.status", !outcome              ? "searching"
                           : outcome->best_trial ? "ended"
                                                 : "ended with no best trial"},
  };
  if (!decisions.empty()) tags["trainyard.last_decision"] = decision_line(decisions.back());
  if (outcome && outcome->best_trial) {
    tags["trainyard.best_trial"] = std::to_string(*outcome->best_trial);
    tags["trainyard.best_settings"] = cut(outcome->settings, kTagValueLength);
    if (outcome->figure) tags["trainyard.best_figure"] = fmt::format("{}", *outcome->figure);
  }
  MlflowRun held;
  if (existing) {
    held = *existing;
  } else {  // started when its first trial did
    double start = 0;
    if (!trials.empty())
      if (const auto first = store.run(trials.front().run_id); first && !first->started_at.empty())
        start = run_figures(store, *first).start;
    held = client.create_run(experiment_id, key.study + " study",
                             start > 0 ? millis(start) : millis(unix_time_of(utc_now())), tags);
  }
  send_changed_tags(client, held, tags);
  // Every decision with its evidence, whenever there are new ones.
  if (held.tags["trainyard.decisions"] != tags["trainyard.decisions"] || !existing) {
    json all = json::array();
    for (const StudyDecisionRow& d : decisions)
      all.push_back({{"decision", d.decision},
                     {"trial", d.trial ? json(*d.trial) : json(nullptr)},
                     {"rung", d.rung},
                     {"epochs", d.epochs},
                     {"evidence", json::parse(d.evidence)},
                     {"promoted", json::parse(d.promoted)},
                     {"decided_at", d.decided_at}});
    client.upload_artifact(held, "decisions.json", all.dump(1));
  }
  // Ended with no best trial (every one failed or diverged): FAILED, as a run that ended so is.
  const std::string status = !outcome ? "RUNNING" : outcome->best_trial ? "FINISHED" : "FAILED";
  if (held.status != status) {
    client.update_run(held.run_id, status, outcome ? millis(unix_time_of(utc_now())) : 0);
    held.status = status;
  }
  held.tags = std::move(tags);
  return held;
}

MlflowSent send_run_to_mlflow(MlflowClient& client, Store& store, const RunRecord& run,
                              const std::string& experiment_id,
                              const std::optional<MlflowRun>& existing,
                              const std::string* report_html, const std::string& parent_run_id) {
  MlflowSent sent;
  const RunFigures figures = run_figures(store, run);
  std::map<std::string, std::string> tags = run_tags(run);
  add_trial_tags(store, run, parent_run_id, tags);
  MlflowRun mlflow;
  if (existing) {
    mlflow = *existing;
  } else {  // created with its uid: found again by the next send, whatever fails after
    mlflow = client.create_run(experiment_id, fmt::format("{}-run{}", run.variant, run.id),
                               millis(figures.start), tags);
    sent.created = true;
  }

  send_changed_tags(client, mlflow, tags);
  for (const char* gone : {"trainyard.error", "trainyard.failure"})  // a run retried since
    if (mlflow.tags.count(gone) && !tags.count(gone)) client.delete_tag(mlflow.run_id, gone);

  std::map<std::string, std::string> params;
  for (const auto& [key, value] : store.params(run.id)) {
    const std::string name = mlflow_key(key);
    if (mlflow.params.count(name)) continue;  // MLflow's params never change
    params[name] = cut(value, kParamValueLength);
    ++sent.params;
    if (params.size() == kParamsPerBatch) {
      client.log_batch(mlflow.run_id, {}, params, {});
      params.clear();
    }
  }
  if (!params.empty()) client.log_batch(mlflow.run_id, {}, params, {});

  // In the order reached: a send that fails midway leaves each metric sent up to a step, which
  // the next send goes on from.
  // While the run trains, its latest step waits: a validation may still add to it, or replace its
  // training time, as the store merges them (TensorBoard's logger waits the same way), and MLflow
  // cannot take a point back.
  const bool ended = run.status != RunStatus::queued && run.status != RunStatus::running;
  std::vector<MlflowClient::Metric> metrics;
  for (const FigureGroup& group : figures.groups) {
    if (!ended && group.scope == "step" && group.step == figures.last_step) continue;
    for (const auto& [key, value] : group.values) {
      std::string name = mlflow_key(group.scope + "/" + key);
      const auto last = mlflow.last_steps.find(name);
      if (last != mlflow.last_steps.end() && group.step <= last->second) continue;
      metrics.push_back({.key = std::move(name),
                         .value = value,
                         .timestamp = millis(group.wall_time),
                         .step = group.step});
    }
  }
  for (size_t first = 0; first < metrics.size(); first += kMetricsPerBatch) {
    const size_t end = std::min(metrics.size(), first + kMetricsPerBatch);
    client.log_batch(mlflow.run_id, {metrics.begin() + first, metrics.begin() + end}, {}, {});
  }
  sent.metrics = metrics.size();

  const int64_t end_time = ended ? millis(figures.end) : 0;
  if (mlflow.status != mlflow_status(run) || (ended && mlflow.end_time != end_time))
    client.update_run(mlflow.run_id, mlflow_status(run), end_time);
  if (report_html) sent.artifact = client.upload_artifact(mlflow, "report.html", *report_html);
  return sent;
}

MlflowStudies::MlflowStudies(MlflowClient& client, Store& store,
                             const std::map<std::string, MlflowRun>& held)
    : client_(client), store_(store) {
  for (const auto& [uid, run] : held)
    if (uid.starts_with("study/")) held_[uid] = run;
}

std::string MlflowStudies::parent_of(const RunRecord& run, const std::string& experiment_id) {
  const auto trial = store_.study_trial_of(run.id);
  if (!trial) return "";
  const std::string uid = mlflow_study_uid(trial->first);
  auto it = held_.find(uid);
  if (it == held_.end()) {  // not seen by this sender yet: perhaps by an earlier one
    // A batch's senders (one per slot of a study's trials side by side) look and create one at a
    // time, so a study gets one parent run however many send its trials.
    static std::mutex creating;
    std::lock_guard lock(creating);
    std::map<std::string, MlflowRun> found = client_.runs_by_uid(experiment_id, uid);
    std::optional<MlflowRun> existing;
    if (const auto f = found.find(uid); f != found.end()) existing = f->second;
    it = held_
             .emplace(uid,
                      send_study_to_mlflow(client_, store_, trial->first, experiment_id, existing))
             .first;
  } else {
    it->second = send_study_to_mlflow(client_, store_, trial->first, experiment_id, it->second);
  }
  return it->second.run_id;
}

MlflowExport export_mlflow(Store& store, MlflowClient& client, const std::string& experiment) {
  MlflowExport summary;
  for (const ExperimentRecord& record : store.experiments()) {
    if (!experiment.empty() && record.name != experiment) continue;
    std::vector<RunRecord> runs = store.runs(record.name);
    std::erase_if(runs, [](const RunRecord& run) {  // never trained
      return run.status == RunStatus::queued || run.status == RunStatus::skipped ||
             run.started_at.empty();
    });
    if (runs.empty()) continue;
    const std::string html = render_html(build_report(store, record.name));
    const std::string id = client.experiment_id(record.name);
    const std::map<std::string, MlflowRun> held = client.runs_by_uid(id);
    MlflowStudies studies(client, store, held);
    for (const RunRecord& run : runs) {
      const auto found = held.find(mlflow_uid(run));
      try {
        const std::string parent = studies.parent_of(run, id);
        const MlflowSent sent =
            send_run_to_mlflow(client, store, run, id,
                               found == held.end() ? std::nullopt : std::optional(found->second),
                               summary.reports_elsewhere ? nullptr : &html, parent);
        ++summary.runs;
        summary.created += sent.created;
        summary.metrics += sent.metrics;
        summary.params += sent.params;
        summary.reports += sent.artifact;
        summary.reports_elsewhere = summary.reports_elsewhere || !sent.artifact;
      } catch (const MlflowRefusal& e) {  // this run's; the others may go
        summary.problems.push_back(
            fmt::format("run {} ({}/{}): {}", run.id, run.experiment, run.variant, e.what()));
      }
    }
  }
  return summary;
}

}  // namespace trainyard
