// Store::import_store: another database's runs and studies taken into this one. A study submitted
// to Slurm trains in a database of its own (runner/cli/slurm_study_command.cpp), for a compute
// node never writes the shared one; `trainyard collect` takes it in here once its job has let go.
//
// Both databases come from one schema (checked), so rows are copied column for column through
// temporary tables, with only the ids that differ between the two rewritten: a run's id (its uid
// is what matches it), its experiment's id (by name), and the run ids a study's trials name.
#include <string>

#include <fmt/format.h>

#include "db/store.h"

namespace trainyard {

namespace {

// The tables that hold a run's figures and settings, each keyed by run_id.
constexpr const char* kRunTables[] = {"epoch_metrics", "step_metrics", "final_metrics",
                                      "run_attributes", "run_params"};
constexpr const char* kStudyTables[] = {"study_trials", "study_decisions", "study_outcomes"};

// Detaches the other database however the import ends.
class Attached {
 public:
  Attached(sql::Database& db, const std::string& path) : db_(db) {
    db_.prepare("ATTACH DATABASE ? AS other").bind(1, path).run();
  }
  ~Attached() {
    try {
      db_.exec("DETACH DATABASE other");
    } catch (...) {
    }
  }
  Attached(const Attached&) = delete;
  Attached& operator=(const Attached&) = delete;

 private:
  sql::Database& db_;
};

}  // namespace

int Store::import_store(const std::string& other_path) {
  const Attached attached(db_, other_path);
  // Each query's statement ends before the tables it read are dropped or detached.
  auto single_number = [&](const char* query) {
    auto s = db_.prepare(query);
    s.step();
    return s.column_int(0);
  };
  if (const int64_t version = single_number("PRAGMA other.user_version"); version != kSchemaVersion)
    throw std::runtime_error(fmt::format(
        "database {} has schema version {}, this one {}; open it once with this trainyard (any "
        "command) to migrate it, then collect again",
        other_path, version, kSchemaVersion));

  sql::Transaction transaction(db_);
  db_.exec(R"sql(
    INSERT INTO main.experiments (name, file, description, report_yaml, created_at)
      SELECT name, file, description, report_yaml, created_at FROM other.experiments
      WHERE name NOT IN (SELECT name FROM main.experiments);
    -- old: the run's id there; new: here (the same run again when its uid is here already).
    CREATE TEMP TABLE imported_ids (old INTEGER PRIMARY KEY, new INTEGER);
    INSERT INTO imported_ids (old, new)
      SELECT o.id, (SELECT m.id FROM main.runs m WHERE m.uid = o.uid)
      FROM other.runs o WHERE o.uid != '';
  )sql");
  // A run here already is replaced whole: its figures may have grown since the last import.
  for (const char* table : kRunTables)
    db_.exec(fmt::format(
        "DELETE FROM main.{} WHERE run_id IN (SELECT new FROM imported_ids WHERE new IS NOT NULL)",
        table));
  db_.exec(R"sql(
    CREATE TEMP TABLE imported_runs AS
      SELECT * FROM other.runs WHERE id IN (SELECT old FROM imported_ids);
    UPDATE imported_runs SET experiment_id = (
      SELECT m.id FROM main.experiments m JOIN other.experiments o ON m.name = o.name
      WHERE o.id = imported_runs.experiment_id);
    DELETE FROM main.runs WHERE id IN (SELECT new FROM imported_ids WHERE new IS NOT NULL);
    UPDATE imported_runs SET id = (SELECT new FROM imported_ids WHERE old = imported_runs.id);
  )sql");
  // New runs get this database's next ids, in their order there.
  const int count = static_cast<int>(single_number("SELECT COUNT(*) FROM imported_runs"));
  db_.exec(R"sql(
    INSERT INTO main.runs SELECT * FROM imported_runs WHERE id IS NOT NULL;
    CREATE TEMP TABLE new_runs AS SELECT uid FROM imported_runs WHERE id IS NULL ORDER BY rowid;
    UPDATE imported_runs SET id = NULL;
    INSERT INTO main.runs SELECT * FROM imported_runs
      WHERE uid IN (SELECT uid FROM new_runs) ORDER BY rowid;
    UPDATE imported_ids SET new = (SELECT m.id FROM main.runs m JOIN other.runs o ON m.uid = o.uid
                                   WHERE o.id = imported_ids.old);
  )sql");
  for (const char* table : kRunTables)
    db_.exec(fmt::format(R"sql(
      CREATE TEMP TABLE imported_rows AS
        SELECT * FROM other.{0} WHERE run_id IN (SELECT old FROM imported_ids);
      UPDATE imported_rows SET run_id = (SELECT new FROM imported_ids WHERE old = run_id);
      INSERT INTO main.{0} SELECT * FROM imported_rows;
      DROP TABLE imported_rows;
    )sql",
                         table));
  // The studies of the other database, replaced whole (a study's rows only grow or are rewritten
  // the same: db/store_study.cpp).
  for (const char* table : kStudyTables)
    db_.exec(fmt::format(R"sql(
      DELETE FROM main.{0} WHERE (experiment, study, study_hash) IN
        (SELECT experiment, study, study_hash FROM other.{0});
      CREATE TEMP TABLE imported_rows AS SELECT * FROM other.{0};
      {1}
      INSERT INTO main.{0} SELECT * FROM imported_rows;
      DROP TABLE imported_rows;
    )sql",
                         table,
                         std::string(table) == "study_trials"
                             ? "UPDATE imported_rows SET run_id = COALESCE((SELECT new FROM "
                               "imported_ids WHERE old = run_id), 0);"
                             : ""));
  db_.exec("DROP TABLE imported_ids; DROP TABLE imported_runs; DROP TABLE new_runs;");
  transaction.commit();
  return count;
}

}  // namespace trainyard
