// The store's Slurm tables: submissions (one per `trainyard submit`) and slurm_runs (each run's
// job and records file, and how much of that file is taken in).
#include <string>

#include "common/clock.h"
#include "common/process.h"
#include "db/store.h"

namespace trainyard {

int64_t Store::create_submission() {
  db_.prepare("INSERT INTO submissions (created_at, host, user) VALUES (?, ?, ?)")
      .bind(1, utc_now())
      .bind(2, host_name())
      .bind(3, user_name())
      .run();
  return db_.last_insert_id();
}

void Store::set_submission_folder(int64_t submission_id, const std::string& folder) {
  db_.prepare("UPDATE submissions SET folder = ? WHERE id = ?")
      .bind(1, folder)
      .bind(2, submission_id)
      .run();
}

void Store::set_report_job(int64_t submission_id, const std::string& job_id) {
  db_.prepare("UPDATE submissions SET report_job = ? WHERE id = ?")
      .bind(1, job_id)
      .bind(2, submission_id)
      .run();
}

void Store::mark_submission_cancelled(int64_t submission_id) {
  db_.prepare("UPDATE submissions SET cancelled = 1 WHERE id = ?").bind(1, submission_id).run();
}

std::vector<SubmissionRecord> Store::submissions() {
  auto s = db_.prepare(
      "SELECT id, folder, created_at, host, report_job, cancelled, user FROM submissions ORDER BY "
      "id");
  std::vector<SubmissionRecord> out;
  while (s.step())
    out.push_back({.id = s.column_int(0),
                   .folder = s.column_text(1),
                   .created_at = s.column_text(2),
                   .host = s.column_text(3),
                   .report_job = s.column_text(4),
                   .cancelled = s.column_int(5) != 0,
                   .user = s.column_text(6)});
  return out;
}

void Store::assign_slurm_job(int64_t run_id, int64_t submission_id, const std::string& job_id,
                             const std::string& stem) {
  db_.prepare(
         "INSERT INTO slurm_runs (run_id, submission_id, job_id, stem) VALUES (?, ?, ?, ?) "
         "ON CONFLICT (run_id) DO UPDATE SET submission_id = excluded.submission_id, "
         "job_id = excluded.job_id, events_offset = CASE WHEN stem = excluded.stem THEN "
         "events_offset ELSE 0 END, stem = excluded.stem")
      .bind(1, run_id)
      .bind(2, submission_id)
      .bind(3, job_id)
      .bind(4, stem)
      .run();
}

namespace {
const char* const kSlurmRunColumns = "run_id, submission_id, job_id, stem, events_offset";
SlurmRunRecord read_slurm_run(const sql::Statement& s) {
  return {.run_id = s.column_int(0),
          .submission_id = s.column_int(1),
          .job_id = s.column_text(2),
          .stem = s.column_text(3),
          .events_offset = s.column_int(4)};
}
}  // namespace

std::vector<SlurmRunRecord> Store::slurm_runs() {
  auto s =
      db_.prepare(std::string("SELECT ") + kSlurmRunColumns + " FROM slurm_runs ORDER BY run_id");
  std::vector<SlurmRunRecord> out;
  while (s.step()) out.push_back(read_slurm_run(s));
  return out;
}

std::optional<SlurmRunRecord> Store::slurm_run(int64_t run_id) {
  auto s =
      db_.prepare(std::string("SELECT ") + kSlurmRunColumns + " FROM slurm_runs WHERE run_id = ?");
  s.bind(1, run_id);
  if (!s.step()) return std::nullopt;
  return read_slurm_run(s);
}

void Store::set_events_offset(int64_t run_id, int64_t offset) {
  db_.prepare("UPDATE slurm_runs SET events_offset = ? WHERE run_id = ?")
      .bind(1, offset)
      .bind(2, run_id)
      .run();
}

}  // namespace trainyard
