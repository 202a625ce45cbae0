#include "runner/trial_slots.h"

namespace trainyard {

TrialSlots::TrialSlots(const RunExecutor& like, const std::string& db_path, int count) {
  for (int k = 0; k < count; ++k) {
    auto slot = std::make_unique<Slot>();
    slot->store = std::make_unique<Store>(db_path);
    slot->executor = like.slot(*slot->store, k, count);
    slots_.push_back(std::move(slot));
  }
  for (auto& slot : slots_) slot->thread = std::thread([this, s = slot.get()] { serve(*s); });
}

TrialSlots::~TrialSlots() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  changed_.notify_all();
  for (auto& slot : slots_)
    if (slot->thread.joinable()) slot->thread.join();
}

int64_t TrialSlots::start(const PlannedRun& planned) {
  auto job = std::make_shared<Job>(Job{.planned = planned, .run = *planned.run});
  job->planned.run = &job->run;
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] {
    return busy_ + static_cast<int>(waiting_.size()) < static_cast<int>(slots_.size());
  });
  const int64_t ticket = next_ticket_++;
  jobs_[ticket] = job;
  waiting_.push_back(job);
  changed_.notify_all();
  return ticket;
}

void TrialSlots::wait(int64_t ticket, BatchSummary& summary) {
  std::shared_ptr<Job> job;
  {
    std::unique_lock lock(mutex_);
    job = jobs_.at(ticket);
    changed_.wait(lock, [&] { return job->done; });
    jobs_.erase(ticket);
  }
  summary.add(job->summary);
  if (job->error) std::rethrow_exception(job->error);
}

void TrialSlots::finish() {
  for (auto& slot : slots_) slot->executor->finish();
}

void TrialSlots::serve(Slot& slot) {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return closing_ || !waiting_.empty(); });
      if (waiting_.empty()) break;  // closing, and nothing left to train
      job = waiting_.front();
      waiting_.pop_front();
      ++busy_;
    }
    try {
      slot.executor->execute(job->planned, job->summary);
    } catch (...) {
      job->error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      --busy_;
      job->done = true;
    }
    changed_.notify_all();
  }
  slot.executor.reset();  // its warm engine ends here, in the thread that started it
}

}  // namespace trainyard
