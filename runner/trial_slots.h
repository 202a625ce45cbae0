// A study's trials side by side (sweep.search.parallel): `count` slots, each a thread of its own
// that trains one run at a time through an executor of its own — its own connection to the store,
// warm engine and trackers (RunExecutor::slot), its runs given 1/count of the machine's CPUs when
// their runtime.threads lets the machine choose. The StudyRunner decides what trains and reads
// every figure back from the store itself; the slots only train.
//
// The threads live as long as the slots: a process is tied to the thread that started it
// (PR_SET_PDEATHSIG), so a slot's warm engine must end before its thread does, which the
// destructor sees to.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "db/store.h"
#include "runner/run_executor.h"

namespace trainyard {

class TrialSlots {
 public:
  // `like`: the batch's executor, whose settings each slot's copies; `db_path`: the store's file.
  TrialSlots(const RunExecutor& like, const std::string& db_path, int count);
  ~TrialSlots();  // waits for the runs in flight, then ends the slots' engines and threads
  TrialSlots(const TrialSlots&) = delete;
  TrialSlots& operator=(const TrialSlots&) = delete;

  // Starts training `planned` (its run copied) in a free slot, waiting for one when every slot is
  // busy; returns its ticket.
  int64_t start(const PlannedRun& planned);
  // Waits until the run of `ticket` has ended, and adds its counts to `summary`.
  void wait(int64_t ticket, BatchSummary& summary);
  // The batch is over: each slot's trackers send once more what they could not.
  void finish();

 private:
  struct Job {
    PlannedRun planned;
    RunSpec run;  // what planned.run points at: the caller's may move
    BatchSummary summary{};
    bool done = false;
    std::exception_ptr error{};
  };
  struct Slot {
    std::unique_ptr<Store> store;
    std::unique_ptr<RunExecutor> executor;
    std::thread thread;
  };
  void serve(Slot& slot);

  std::vector<std::unique_ptr<Slot>> slots_;
  std::mutex mutex_;  // guards what follows
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Job>> waiting_;  // for a slot
  std::map<int64_t, std::shared_ptr<Job>> jobs_;
  int64_t next_ticket_ = 0;
  int busy_ = 0;
  bool closing_ = false;
};

}  // namespace trainyard
