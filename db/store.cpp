#include "db/store.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/json_numbers.h"
#include "common/process.h"
#include "common/text.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

// 12 hex digits from the system's entropy source: unique enough that two runs anywhere never share
// one (and the controller checks that no file of the name exists before writing).
std::string new_run_uid() {
  std::random_device entropy;
  const uint64_t bits = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
  char text[16];
  std::snprintf(text, sizeof text, "%012llx",
                static_cast<unsigned long long>(bits & 0xffffffffffffULL));
  return text;
}

const char* const kRunColumns =
    "r.id, r.experiment_id, e.name, r.variant, r.position, r.config_yaml, r.config_hash, r.status, "
    "r.precision, r.strategy, r.devices, r.queued_at, COALESCE(r.started_at, ''), "
    "COALESCE(r.ended_at, ''), r.host, r.git_revision, r.torch_version, r.device_name, "
    "r.log_path, r.pid, r.error, r.uid, r.resumes, r.failure_class, r.heartbeat_at, r.progress, "
    "r.repeat";

RunRecord read_run(const sql::Statement& s) {
  RunRecord r;
  r.id = s.column_int(0);
  r.experiment_id = s.column_int(1);
  r.experiment = s.column_text(2);
  r.variant = s.column_text(3);
  r.position = s.column_int(4);
  r.config_yaml = s.column_text(5);
  r.config_hash = s.column_text(6);
  r.status = parse_run_status(s.column_text(7));
  r.precision = s.column_text(8);
  r.strategy = s.column_text(9);
  r.devices = s.column_int(10);
  r.queued_at = s.column_text(11);
  r.started_at = s.column_text(12);
  r.ended_at = s.column_text(13);
  r.host = s.column_text(14);
  r.environment = {.git_revision = s.column_text(15),
                   .torch_version = s.column_text(16),
                   .device_name = s.column_text(17),
                   .log_path = s.column_text(18)};
  r.pid = s.column_int(19);
  r.error = s.column_text(20);
  r.uid = s.column_text(21);
  r.resumes = s.column_int(22);
  r.failure = parse_failure_class(s.column_text(23));
  r.heartbeat_at = s.column_text(24);
  r.progress = s.column_text(25);
  r.repeat = s.column_int(26);
  return r;
}

}  // namespace

const char* to_string(RunStatus status) {
  switch (status) {
    case RunStatus::queued:
      return "queued";
    case RunStatus::running:
      return "running";
    case RunStatus::completed:
      return "completed";
    case RunStatus::failed:
      return "failed";
    case RunStatus::interrupted:
      return "interrupted";
    case RunStatus::skipped:
      return "skipped";
  }
  return "?";
}

RunStatus parse_run_status(const std::string& text) {
  for (RunStatus s : {RunStatus::queued, RunStatus::running, RunStatus::completed,
                      RunStatus::failed, RunStatus::interrupted, RunStatus::skipped})
    if (text == to_string(s)) return s;
  throw std::runtime_error("unknown run status '" + text + "' in the database");
}

const char* to_string(FailureClass failure) {
  switch (failure) {
    case FailureClass::none:
      return "";
    case FailureClass::bad_input:
      return "bad-input";
    case FailureClass::out_of_memory:
      return "out-of-memory";
    case FailureClass::crashed:
      return "crashed";
    case FailureClass::timed_out:
      return "timed-out";
    case FailureClass::interrupted:
      return "interrupted";
    case FailureClass::not_started:
      return "not-started";
    case FailureClass::error:
      return "error";
  }
  return "error";
}

FailureClass parse_failure_class(const std::string& text) {
  for (FailureClass f : {FailureClass::none, FailureClass::bad_input, FailureClass::out_of_memory,
                         FailureClass::crashed, FailureClass::timed_out, FailureClass::interrupted,
                         FailureClass::not_started, FailureClass::error})
    if (text == to_string(f)) return f;
  return FailureClass::error;
}

bool is_transient(FailureClass failure) {
  return failure == FailureClass::crashed || failure == FailureClass::timed_out;
}

std::string RunProgress::to_json() const {
  return nlohmann::json{{"epoch", epoch},
                        {"epochs", epochs},
                        {"step", step},
                        {"total_steps", total_steps},
                        {"loss", json_number(loss)},
                        {"samples_per_s", json_number(samples_per_s)},
                        {"tokens_per_sample", tokens_per_sample},
                        {"eta_seconds", json_number(eta_seconds)},
                        {"micro_batch", micro_batch},
                        {"oom_events", oom_events}}
      .dump();
}

RunProgress RunProgress::from_json(const std::string& text) {
  RunProgress p;
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return p;
  // A field of the wrong type (an older NaN written as null) reads as 0, never throws.
  auto real = [&](const char* key) {
    const auto it = json.find(key);
    try {
      return it != json.end() ? number_from_json(*it) : 0.0;
    } catch (const nlohmann::json::exception&) {
      return 0.0;
    }
  };
  p.epoch = integer_or(json, "epoch", 0);
  p.epochs = integer_or(json, "epochs", 0);
  p.step = integer_or(json, "step", 0);
  p.total_steps = integer_or(json, "total_steps", 0);
  p.loss = real("loss");
  p.samples_per_s = real("samples_per_s");
  p.tokens_per_sample = integer_or(json, "tokens_per_sample", 0);
  p.eta_seconds = real("eta_seconds");
  p.micro_batch = integer_or(json, "micro_batch", 0);
  p.oom_events = integer_or(json, "oom_events", 0);
  return p;
}

bool controller_gone(const RunRecord& run) {
  return run.host == host_name() && run.pid > 0 && !process_alive(run.pid);
}

std::string run_files_stem(const RunRecord& run) {
  const std::string& log = run.environment.log_path;
  const std::string suffix = ".log";
  if (log.size() <= suffix.size() || log.compare(log.size() - suffix.size(), suffix.size(), suffix))
    return "";
  return log.substr(0, log.size() - suffix.size());
}

Store::Store(const std::string& path, sql::Access access)
    : db_(path, access), read_only_(access == sql::Access::read_only) {
  if (read_only_) {
    if (const int version = schema_version(); version != kSchemaVersion)
      throw std::runtime_error(fmt::format(
          "database {} has schema version {}, and this trainyard reads version {}; it cannot be "
          "written, so it cannot be migrated: open a writable copy",
          path, version, kSchemaVersion));
    return;
  }
  // Switching a new database to WAL takes an exclusive lock, and SQLite answers "database is
  // locked" at once, without its busy handler, when another process is opening it too (a report
  // started beside `trainyard run`): wait and try again, as the busy timeout would.
  for (int attempt = 0;; ++attempt) {
    try {
      db_.exec("PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;");
      migrate();
      return;
    } catch (const std::runtime_error& e) {
      const std::string message = e.what();
      const bool locked = message.find("database is locked") != std::string::npos ||
                          message.find("database is busy") != std::string::npos;
      if (!locked || attempt >= 500) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

int64_t Store::upsert_experiment(const std::string& name, const std::string& file,
                                 const std::string& description, const std::string& report_yaml) {
  db_.prepare(
         "INSERT INTO experiments (name, file, description, report_yaml, created_at) "
         "VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET file = excluded.file, "
         "description = excluded.description, report_yaml = excluded.report_yaml")
      .bind(1, name)
      .bind(2, file)
      .bind(3, description)
      .bind(4, report_yaml)
      .bind(5, utc_now())
      .run();
  return find_experiment(name)->id;
}

std::optional<ExperimentRecord> Store::find_experiment(const std::string& name) {
  for (auto& e : experiments())
    if (e.name == name) return e;
  return std::nullopt;
}

ExperimentRecord Store::experiment_named(const std::string& name) {
  if (auto found = find_experiment(name)) return *found;
  std::vector<std::string> names;
  for (const auto& e : experiments()) names.push_back(e.name);
  const std::string guess = closest_match(name, names);
  throw UserError(fmt::format("no experiment '{}' in {}{}; experiments: {}", name, path(),
                              guess.empty() ? "" : " (did you mean '" + guess + "'?)",
                              names.empty() ? "none yet" : join(names)));
}

std::vector<ExperimentRecord> Store::experiments() {
  std::vector<ExperimentRecord> out;
  auto s = db_.prepare(
      "SELECT id, name, file, description, report_yaml, created_at FROM experiments ORDER BY id");
  while (s.step())
    out.push_back({s.column_int(0), s.column_text(1), s.column_text(2), s.column_text(3),
                   s.column_text(4), s.column_text(5)});
  return out;
}

std::optional<int64_t> Store::find_completed_run(int64_t experiment_id,
                                                 const std::string& config_hash) {
  auto s = db_.prepare(
      "SELECT id FROM runs WHERE experiment_id = ? AND config_hash = ? AND status = 'completed' "
      "ORDER BY id DESC LIMIT 1");
  s.bind(1, experiment_id).bind(2, config_hash);
  if (s.step()) return s.column_int(0);
  return std::nullopt;
}

void Store::requeue_run(int64_t run_id, bool for_slurm) {
  sql::Transaction transaction(db_);
  if (!for_slurm) db_.prepare("DELETE FROM slurm_runs WHERE run_id = ?").bind(1, run_id).run();
  db_.prepare(
         "UPDATE runs SET status = 'queued', ended_at = NULL, error = '', failure_class = '', "
         "progress = '', host = ?, pid = ? WHERE id = ?")
      .bind(1, host_name())
      .bind(2, static_cast<int64_t>(getpid()))
      .bind(3, run_id)
      .run();
  transaction.commit();
}

namespace {
std::string host_or_here(const RunPlace& place) {
  return place.host.empty() ? host_name() : place.host;
}
int64_t pid_or_mine(const RunPlace& place) {
  return place.pid > 0 ? place.pid : static_cast<int64_t>(getpid());
}
std::string at_or_now(const std::string& at) { return at.empty() ? utc_now() : at; }
}  // namespace

void Store::resume_run(int64_t run_id, const RunPlace& place) {
  db_.prepare(
         "UPDATE runs SET status = 'running', resumes = resumes + 1, host = ?, pid = ?, "
         "ended_at = NULL, error = '', failure_class = '' WHERE id = ?")
      .bind(1, host_or_here(place))
      .bind(2, pid_or_mine(place))
      .bind(3, run_id)
      .run();
}

int64_t Store::queue_run(int64_t experiment_id, const QueuedRun& run) {
  sql::Transaction transaction(db_);
  db_.prepare(
         "INSERT INTO runs (experiment_id, variant, position, config_yaml, config_hash, status, "
         "precision, strategy, devices, queued_at, host, pid, uid, repeat) "
         "VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?)")
      .bind(1, experiment_id)
      .bind(2, run.variant)
      .bind(3, run.position)
      .bind(4, run.config_yaml)
      .bind(5, run.config_hash)
      .bind(6, run.precision)
      .bind(7, run.strategy)
      .bind(8, run.devices)
      .bind(9, utc_now())
      .bind(10, host_name())
      .bind(11, static_cast<int64_t>(getpid()))
      .bind(12, new_run_uid())
      .bind(13, run.repeat)
      .run();
  const int64_t id = db_.last_insert_id();
  auto param = db_.prepare("INSERT INTO run_params (run_id, key, value) VALUES (?, ?, ?)");
  for (const auto& [key, value] : run.params) {
    param.bind(1, id).bind(2, key).bind(3, value).run();
    param.reset();
  }
  transaction.commit();
  return id;
}

std::map<std::string, std::string> Store::params(int64_t run_id) {
  std::map<std::string, std::string> out;
  auto s = db_.prepare("SELECT key, value FROM run_params WHERE run_id = ?");
  s.bind(1, run_id);
  while (s.step()) out[s.column_text(0)] = s.column_text(1);
  return out;
}

void Store::start_run(int64_t run_id, const RunEnvironment& env, const RunPlace& place) {
  db_.prepare(
         "UPDATE runs SET status = 'running', started_at = ?, host = ?, pid = ?, git_revision = ?, "
         "torch_version = ?, device_name = ?, log_path = ? WHERE id = ?")
      .bind(1, at_or_now(place.at))
      .bind(2, host_or_here(place))
      .bind(3, pid_or_mine(place))
      .bind(4, env.git_revision)
      .bind(5, env.torch_version)
      .bind(6, env.device_name)
      .bind(7, env.log_path)
      .bind(8, run_id)
      .run();
}

void Store::record_epoch(int64_t run_id, int64_t epoch,
                         const std::map<std::string, double>& values) {
  sql::Transaction transaction(db_);
  auto s = db_.prepare(
      "INSERT OR REPLACE INTO epoch_metrics (run_id, epoch, key, value) VALUES (?, ?, ?, ?)");
  for (const auto& [key, value] : values) {
    if (std::isnan(value))
      continue;  // a diverged figure: SQLite stores NaN as NULL, so it is left out
    s.bind(1, run_id).bind(2, epoch).bind(3, key).bind(4, value).run();
    s.reset();
  }
  transaction.commit();
}

void Store::record_step(int64_t run_id, int64_t step, const std::map<std::string, double>& values) {
  sql::Transaction transaction(db_);
  auto s = db_.prepare(
      "INSERT OR REPLACE INTO step_metrics (run_id, step, key, value) VALUES (?, ?, ?, ?)");
  for (const auto& [key, value] : values) {
    if (std::isnan(value)) continue;  // as in record_epoch
    s.bind(1, run_id).bind(2, step).bind(3, key).bind(4, value).run();
    s.reset();
  }
  transaction.commit();
}

void Store::record_attributes(int64_t run_id,
                              const std::map<std::string, std::string>& attributes) {
  sql::Transaction transaction(db_);
  auto s =
      db_.prepare("INSERT OR REPLACE INTO run_attributes (run_id, key, value) VALUES (?, ?, ?)");
  for (const auto& [key, value] : attributes) {
    s.bind(1, run_id).bind(2, key).bind(3, value).run();
    s.reset();
  }
  transaction.commit();
}

std::map<std::string, std::string> Store::attributes(int64_t run_id) {
  std::map<std::string, std::string> out;
  auto s = db_.prepare("SELECT key, value FROM run_attributes WHERE run_id = ?");
  s.bind(1, run_id);
  while (s.step()) out[s.column_text(0)] = s.column_text(1);
  return out;
}

void Store::complete_run(int64_t run_id, const std::map<std::string, double>& metrics,
                         const std::string& at) {
  sql::Transaction transaction(db_);
  auto s =
      db_.prepare("INSERT OR REPLACE INTO final_metrics (run_id, key, value) VALUES (?, ?, ?)");
  for (const auto& [key, value] : metrics) {
    if (std::isnan(value)) continue;  // as in record_epoch
    s.bind(1, run_id).bind(2, key).bind(3, value).run();
    s.reset();
  }
  db_.prepare(
         "UPDATE runs SET status = 'completed', ended_at = ?, error = '', failure_class = '', "
         "progress = '' WHERE id = ?")
      .bind(1, at_or_now(at))
      .bind(2, run_id)
      .run();
  transaction.commit();
}

void Store::end_run(int64_t run_id, RunStatus status, const std::string& error,
                    FailureClass failure, const std::string& at) {
  db_.prepare("UPDATE runs SET status = ?, ended_at = ?, error = ?, failure_class = ? WHERE id = ?")
      .bind(1, to_string(status))
      .bind(2, at_or_now(at))
      .bind(3, error)
      .bind(4, to_string(failure))
      .bind(5, run_id)
      .run();
}

void Store::record_heartbeat(int64_t run_id, const std::optional<RunProgress>& progress,
                             const std::string& at) {
  if (progress)
    db_.prepare("UPDATE runs SET heartbeat_at = ?, progress = ? WHERE id = ?")
        .bind(1, at_or_now(at))
        .bind(2, progress->to_json())
        .bind(3, run_id)
        .run();
  else
    db_.prepare("UPDATE runs SET heartbeat_at = ? WHERE id = ?")
        .bind(1, at_or_now(at))
        .bind(2, run_id)
        .run();
}

void Store::mark_requeued(int64_t run_id, const std::string& at) {
  db_.prepare("UPDATE runs SET status = 'queued', progress = '', heartbeat_at = ? WHERE id = ?")
      .bind(1, at_or_now(at))
      .bind(2, run_id)
      .run();
}

void Store::snapshot_to(const std::string& path) {
  db_.prepare("VACUUM INTO ?").bind(1, path).run();
}

void Store::remove_runs(const std::vector<int64_t>& run_ids) {
  sql::Transaction transaction(db_);
  for (const char* table : {"epoch_metrics", "step_metrics", "final_metrics", "run_attributes",
                            "run_params", "slurm_runs", "runs"}) {
    auto s = db_.prepare(std::string("DELETE FROM ") + table +
                         (std::string(table) == "runs" ? " WHERE id = ?" : " WHERE run_id = ?"));
    for (int64_t id : run_ids) {
      s.bind(1, id).run();
      s.reset();
    }
  }
  db_.exec("DELETE FROM experiments WHERE id NOT IN (SELECT experiment_id FROM runs)");
  transaction.commit();
}

int Store::mark_orphaned_runs_interrupted() {
  std::vector<int64_t> orphans;
  auto s = db_.prepare(
      "SELECT id, pid FROM runs WHERE status IN ('queued', 'running') AND host = ? "
      "AND id NOT IN (SELECT run_id FROM slurm_runs)");
  s.bind(1, host_name());
  while (s.step())
    if (!process_alive(s.column_int(1))) orphans.push_back(s.column_int(0));
  for (int64_t id : orphans)
    end_run(id, RunStatus::interrupted,
            "the trainyard process running it exited before it finished",
            FailureClass::interrupted);
  return static_cast<int>(orphans.size());
}

std::vector<RunRecord> Store::runs(const std::string& experiment) {
  std::string query = std::string("SELECT ") + kRunColumns +
                      " FROM runs r JOIN experiments e ON e.id = r.experiment_id";
  if (!experiment.empty()) query += " WHERE e.name = ?";
  query += " ORDER BY r.id";
  auto s = db_.prepare(query);
  if (!experiment.empty()) s.bind(1, experiment);
  std::vector<RunRecord> out;
  while (s.step()) out.push_back(read_run(s));
  return out;
}

bool Store::is_lost(const RunRecord& run) {
  return run.status == RunStatus::running &&
         (controller_gone(run) || seconds_since(run.heartbeat_at) > kStaleHeartbeatSeconds) &&
         !slurm_run(run.id);
}

std::optional<RunRecord> Store::run(int64_t run_id) {
  auto s = db_.prepare(std::string("SELECT ") + kRunColumns +
                       " FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE r.id = ?");
  s.bind(1, run_id);
  if (s.step()) return read_run(s);
  return std::nullopt;
}

std::map<std::string, double> Store::final_metrics(int64_t run_id) {
  std::map<std::string, double> out;
  auto s = db_.prepare("SELECT key, value FROM final_metrics WHERE run_id = ?");
  s.bind(1, run_id);
  while (s.step()) out[s.column_text(0)] = s.column_double(1);
  return out;
}

std::vector<EpochRow> Store::epoch_metrics(int64_t run_id) {
  std::vector<EpochRow> out;
  auto s = db_.prepare(
      "SELECT epoch, key, value FROM epoch_metrics WHERE run_id = ? ORDER BY epoch, key");
  s.bind(1, run_id);
  while (s.step()) {
    int64_t epoch = s.column_int(0);
    if (out.empty() || out.back().epoch != epoch) out.push_back({epoch, {}});
    out.back().values[s.column_text(1)] = s.column_double(2);
  }
  return out;
}

std::vector<StepRow> Store::step_metrics(int64_t run_id) {
  std::vector<StepRow> out;
  auto s =
      db_.prepare("SELECT step, key, value FROM step_metrics WHERE run_id = ? ORDER BY step, key");
  s.bind(1, run_id);
  while (s.step()) {
    int64_t step = s.column_int(0);
    if (out.empty() || out.back().step != step) out.push_back({step, {}});
    out.back().values[s.column_text(1)] = s.column_double(2);
  }
  return out;
}

}  // namespace trainyard
