// Where a training run's records go while it trains: into the store (`trainyard run`'s controller,
// StoreRunRecords) or into a Slurm task's records file (RunEventWriter, db/run_events.h), which
// `trainyard collect` takes into the store later. The run's reporter and the rule for how a run
// ends (runner/run_report.h) write through this, so both paths record the same things.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "db/store.h"

namespace trainyard {

class RunRecords {
 public:
  virtual ~RunRecords() = default;
  virtual void attributes(const std::map<std::string, std::string>& attributes) = 0;
  virtual void epoch(int64_t epoch, const std::map<std::string, double>& values) = 0;
  virtual void step(int64_t step, const std::map<std::string, double>& values) = 0;
  // The run is alive; with its progress when it has any.
  virtual void heartbeat(const std::optional<RunProgress>& progress) = 0;
  virtual void completed(const std::map<std::string, double>& metrics) = 0;
  virtual void ended(RunStatus status, const std::string& error, FailureClass failure) = 0;
};

// A run's records written straight into the store, as they come.
class StoreRunRecords : public RunRecords {
 public:
  StoreRunRecords(Store& store, int64_t run_id) : store_(store), run_id_(run_id) {}
  void attributes(const std::map<std::string, std::string>& attributes) override {
    store_.record_attributes(run_id_, attributes);
  }
  void epoch(int64_t epoch, const std::map<std::string, double>& values) override {
    store_.record_epoch(run_id_, epoch, values);
  }
  void step(int64_t step, const std::map<std::string, double>& values) override {
    store_.record_step(run_id_, step, values);
  }
  void heartbeat(const std::optional<RunProgress>& progress) override {
    store_.record_heartbeat(run_id_, progress);
  }
  void completed(const std::map<std::string, double>& metrics) override {
    store_.complete_run(run_id_, metrics);
  }
  void ended(RunStatus status, const std::string& error, FailureClass failure) override {
    store_.end_run(run_id_, status, error, failure);
  }

 private:
  Store& store_;
  int64_t run_id_;
};

}  // namespace trainyard
