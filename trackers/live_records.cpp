#include "trackers/live_records.h"

#include <chrono>

#include <fmt/format.h>

#include "common/metrics.h"
#include "reports/report.h"

namespace trainyard {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

TensorBoardRecords::TensorBoardRecords(RunRecords& inner, Store& store, int64_t run_id,
                                       std::string folder,
                                       std::function<void(const std::string&)> warn)
    : inner_(inner),
      store_(store),
      run_id_(run_id),
      folder_(std::move(folder)),
      warn_(std::move(warn)) {
  write([&] { rewrite_from_store(); });
}

void TensorBoardRecords::write(const std::function<void()>& write) {
  if (failed_) return;
  try {
    write();
  } catch (const std::exception& e) {
    failed_ = true;
    writer_.reset();
    warn_(fmt::format(
        "TensorBoard: {}; no more event files for this run (its figures are in the database: "
        "`trainyard export --tensorboard` writes them later)",
        e.what()));
  }
}

void TensorBoardRecords::write_pending_step() {
  if (!pending_) return;
  writer_->scalars("step", pending_->step, now_seconds(), pending_->values);
  written_.step = pending_->step;
  pending_.reset();
}

void TensorBoardRecords::rewrite_from_store() {
  pending_.reset();  // the store has it
  writer_.reset();   // closes the old file before the new one replaces it
  writer_ = std::make_unique<TensorBoardRun>(folder_);
  const std::optional<RunRecord> run = store_.run(run_id_);
  if (run) written_ = write_tensorboard_records(*writer_, store_, *run);
  writer_->flush();
}

void TensorBoardRecords::attributes(const std::map<std::string, std::string>& attributes) {
  inner_.attributes(attributes);
}

void TensorBoardRecords::epoch(int64_t epoch, const std::map<std::string, double>& values) {
  inner_.epoch(epoch, values);
  write([&] {
    const int64_t step = epoch_step({.epoch = epoch, .values = values}, epoch, std::nullopt);
    if (step <= written_.epoch) return rewrite_from_store();  // the epoch again, continued
    write_pending_step();
    std::map<std::string, double> figures = values;
    figures.erase(metric::kEpochStep);
    writer_->scalars("epoch", step, now_seconds(), figures);
    written_.epoch = step;
    writer_->flush();
  });
}

void TensorBoardRecords::step(int64_t step, const std::map<std::string, double>& values) {
  inner_.step(step, values);
  write([&] {
    // A step's figures are held until a later step comes (or the epoch ends): a validation at the
    // step of a progress line adds its figures to that step, as the store merges them.
    if (pending_ && step == pending_->step) {
      for (const auto& [key, value] : values) pending_->values[key] = value;
      return;
    }
    // A step again: a continued run's, after its checkpoint. The file is made again from the
    // store, which holds the step's figures as recorded now.
    if (step <= written_.step || (pending_ && step < pending_->step)) return rewrite_from_store();
    write_pending_step();
    pending_ = StepRow{.step = step, .values = values};
  });
}

void TensorBoardRecords::heartbeat(const std::optional<RunProgress>& progress) {
  inner_.heartbeat(progress);
  write([&] { writer_->flush(); });
}

void TensorBoardRecords::completed(const std::map<std::string, double>& metrics) {
  inner_.completed(metrics);
  write([&] {  // a completed run's end: it says nothing more
    write_pending_step();
    writer_->scalars("final", written_.last(), now_seconds(), metrics);
    writer_->session_end(RunStatus::completed, now_seconds());
    writer_->flush();
  });
}

void TensorBoardRecords::ended(RunStatus status, const std::string& error, FailureClass failure) {
  inner_.ended(status, error, failure);
  write([&] {
    write_pending_step();
    writer_->session_end(status, now_seconds());
    writer_->flush();
  });
}

namespace {

// A live logger's waits are short: a server that does not answer in time gets the run later.
MlflowServer with_short_waits(MlflowServer server) {
  server.http.connect_timeout = std::chrono::seconds(3);
  server.http.timeout = std::chrono::seconds(30);
  return server;
}

// How often a run's heartbeats send it at most (epochs and its end send it at once).
constexpr std::chrono::seconds kMlflowSendEvery{5};

}  // namespace

MlflowSender::MlflowSender(std::string db_path, MlflowServer server)
    : db_path_(std::move(db_path)),
      server_(with_short_waits(std::move(server))),
      thread_([this] { loop(); }) {}

MlflowSender::~MlflowSender() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    stop_requests_ = true;  // no request starts now; the one in flight ends within its time-outs
  }
  changed_.notify_all();
  thread_.join();
}

void MlflowSender::send(int64_t run_id) {
  {
    std::lock_guard lock(mutex_);
    requested_.insert(run_id);
    batch_runs_.insert(run_id);
  }
  changed_.notify_all();
}

std::string MlflowSender::take_problem(int64_t run_id) {
  std::lock_guard lock(mutex_);
  const auto found = new_problems_.find(run_id);
  if (found == new_problems_.end()) return "";
  std::string problem = std::move(found->second);
  new_problems_.erase(found);
  return problem;
}

std::vector<std::string> MlflowSender::finish(std::chrono::seconds wait) {
  std::unique_lock lock(mutex_);
  finishing_ = true;
  changed_.notify_all();
  const bool done = changed_.wait_for(lock, wait, [this] { return finished_; });
  std::vector<std::string> unsent;
  for (const auto& [run_id, why] : failing_)
    unsent.push_back(fmt::format("run {}: {}", run_id, why));
  if (!done) {
    stop_requests_ = true;  // what is left stays for `trainyard export --mlflow`
    unsent.push_back(fmt::format("the server did not take every run within {} s", wait.count()));
  }
  return unsent;
}

void MlflowSender::send_now(Store& store, int64_t run_id, const std::string* report_html) {
  const std::optional<RunRecord> run = store.run(run_id);
  if (!run) return;
  if (!client_) {
    client_ = std::make_unique<MlflowClient>(server_);
    client_->stop_when(&stop_requests_);
  }
  auto id = experiment_ids_.find(run->experiment);
  if (id == experiment_ids_.end())
    id = experiment_ids_.emplace(run->experiment, client_->experiment_id(run->experiment)).first;
  const std::string uid = mlflow_uid(*run);
  std::map<std::string, MlflowRun> held = client_->runs_by_uid(id->second, uid);
  const auto found = held.find(uid);
  if (!studies_) studies_ = std::make_unique<MlflowStudies>(*client_, store);
  const std::string parent = studies_->parent_of(*run, id->second);
  send_run_to_mlflow(*client_, store, *run, id->second,
                     found == held.end() ? std::nullopt : std::optional(found->second), report_html,
                     parent);
}

void MlflowSender::loop() {
  std::unique_ptr<Store> store;  // opened by the first send: the batch has created the database
  auto attempt = [&](int64_t run_id, const std::string* report_html) {
    std::string problem;
    try {
      if (!store) store = std::make_unique<Store>(db_path_, sql::Access::read_only);
      send_now(*store, run_id, report_html);
    } catch (const std::exception& e) {
      problem = e.what();
      studies_.reset();  // it holds the client
      client_.reset();   // a fresh connection next time
    }
    std::lock_guard lock(mutex_);
    if (problem.empty()) {
      failing_.erase(run_id);
    } else {
      failing_[run_id] = problem;
      new_problems_[run_id] = problem;
    }
  };
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stop_ || finishing_ || !requested_.empty(); });
    if (stop_) return;
    if (!requested_.empty()) {
      const int64_t run_id = *requested_.begin();
      requested_.erase(requested_.begin());
      lock.unlock();
      attempt(run_id, nullptr);
      lock.lock();
      continue;
    }
    // Finishing, nothing requested: every run of the batch once more, with its report.
    const std::set<int64_t> runs = batch_runs_;
    lock.unlock();
    std::map<std::string, std::string> reports;  // by experiment
    for (const int64_t run_id : runs) {
      std::string* html = nullptr;
      try {
        if (!store) store = std::make_unique<Store>(db_path_, sql::Access::read_only);
        if (const std::optional<RunRecord> run = store->run(run_id)) {
          auto report = reports.find(run->experiment);
          if (report == reports.end())
            report =
                reports.emplace(run->experiment, render_html(build_report(*store, run->experiment)))
                    .first;
          html = &report->second;
        }
      } catch (const std::exception&) {  // the report stays for `trainyard export`
      }
      attempt(run_id, html);
      if (std::lock_guard stopping(mutex_); stop_) return;
    }
    lock.lock();
    finished_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return stop_; });
    return;
  }
}

MlflowRecords::MlflowRecords(RunRecords& inner, MlflowSender& sender, int64_t run_id,
                             std::function<void(const std::string&)> warn)
    : inner_(inner), sender_(sender), run_id_(run_id), warn_(std::move(warn)) {
  send(/*now=*/true);
}

void MlflowRecords::send(bool now) {
  const auto time = std::chrono::steady_clock::now();
  if (now || time - last_sent_ >= kMlflowSendEvery) {
    sender_.send(run_id_);
    last_sent_ = time;
  }
  const std::string problem = sender_.take_problem(run_id_);
  if (!problem.empty() && !warned_) {
    warned_ = true;
    warn_(fmt::format(
        "MLflow: {}; the run goes on, its figures are in the database, and what MLflow lacks is "
        "sent again as the run goes on (or by `trainyard export --mlflow URI`)",
        problem));
  }
}

void MlflowRecords::attributes(const std::map<std::string, std::string>& attributes) {
  inner_.attributes(attributes);
}

void MlflowRecords::epoch(int64_t epoch, const std::map<std::string, double>& values) {
  inner_.epoch(epoch, values);
  send(/*now=*/true);
}

void MlflowRecords::step(int64_t step, const std::map<std::string, double>& values) {
  inner_.step(step, values);
}

void MlflowRecords::heartbeat(const std::optional<RunProgress>& progress) {
  inner_.heartbeat(progress);
  send(/*now=*/false);
}

void MlflowRecords::completed(const std::map<std::string, double>& metrics) {
  inner_.completed(metrics);
  send(/*now=*/true);
}

void MlflowRecords::ended(RunStatus status, const std::string& error, FailureClass failure) {
  inner_.ended(status, error, failure);
  send(/*now=*/true);
}

}  // namespace trainyard
