#include "runner/tracked_records.h"

#include <chrono>

#include <fmt/format.h>

#include "common/metrics.h"

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

}  // namespace trainyard
