// A Slurm task's records file, as a collector on the login node reads it: any bytes (half lines,
// garbage, wrong types) must be taken in or skipped with a note, never throw, never tear the store.
#include <cstdio>

#include "db/run_events.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  static Store* store = [] {
    auto* s = new Store(":memory:");
    const int64_t experiment = s->upsert_experiment("e", "e.yaml", "", "");
    s->queue_run(
        experiment,
        {.variant = "v", .config_hash = "h", .precision = "32-true", .strategy = "single"});
    s->create_submission();
    return s;
  }();
  const std::string& path = fuzz::write_input(data, size, ".events.jsonl");
  const std::string stem = path.substr(0, path.size() - std::string(".events.jsonl").size());
  store->assign_slurm_job(1, 1, "1_0", stem + "-other");  // resets the offset
  store->assign_slurm_job(1, 1, "1_0", stem);
  const CollectedEvents first = collect_run_events(*store, *store->slurm_run(1));
  // Collecting again takes in nothing more.
  if (collect_run_events(*store, *store->slurm_run(1)).applied != 0) std::abort();
  if (first.applied < 0) std::abort();
  return 0;
}
