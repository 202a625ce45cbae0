#include "db/sqlite.h"

#include <cctype>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include <sqlite3.h>

#include "common/files.h"
#include "trainyard/error.h"

namespace trainyard::sql {

namespace {

// What the user can do about the errors a long batch meets at night.
std::string advice(sqlite3* db) {
  switch (db ? sqlite3_errcode(db) & 0xff : SQLITE_NOMEM) {
    case SQLITE_FULL:
      return "; " + std::string(kDiskFullAdvice);
    case SQLITE_READONLY:
      return "; it cannot be written (a read-only file, folder or file system): check its "
             "permissions, or record into another database with --db";
    case SQLITE_CANTOPEN:  // to write, SQLite makes its -wal and -shm files beside it
      return "; it cannot be written (SQLite could not open it to write: a read-only file, "
             "folder or file system, or a folder that is gone): check its permissions, or record "
             "into another database with --db";
    case SQLITE_IOERR:
      return "; the disk failed to read or write it (keep the database on a local disk, not a "
             "network file system)";
    case SQLITE_NOTADB:
      return "; --db (or $TRAINYARD_DB) names the SQLite file Trainyard records into: name an "
             "existing Trainyard database, or a new file";
    default:
      return "";
  }
}

// A file that is not a database is the user's to fix (--db names the wrong file): a UserError.
[[noreturn]] void raise(sqlite3* db, const std::string& message) {
  if (db && (sqlite3_errcode(db) & 0xff) == SQLITE_NOTADB) throw UserError(message);
  throw std::runtime_error(message);
}

[[noreturn]] void fail(sqlite3* db, const std::string& path, const std::string& what) {
  raise(db, "database " + path + ": " + what + ": " + (db ? sqlite3_errmsg(db) : "out of memory") +
                advice(db));
}

}  // namespace

namespace {

// `path` as a file: URI (RFC 3986: what SQLite's URI filenames take), with `query` after it.
std::string file_uri(const std::string& path, const char* query) {
  std::string uri = "file:";
  for (const unsigned char c : path) {
    if (std::isalnum(c) || std::strchr("/-._~", c))
      uri += static_cast<char>(c);
    else
      uri += fmt::format("%{:02X}", c);
  }
  return uri + "?" + query;
}

sqlite3* open(const std::string& path, const std::string& name, int flags) {
  sqlite3* db = nullptr;
  if (const int code = sqlite3_open_v2(name.c_str(), &db, flags, nullptr); code != SQLITE_OK) {
    const std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw std::runtime_error("cannot open database " + path + ": " + message);
  }
  // Another writer (a second `trainyard run`) may hold the lock briefly: wait rather than fail.
  sqlite3_busy_timeout(db, 10000);
  return db;
}

}  // namespace

Database::Database(const std::string& path, Access access) : path_(path) {
  if (access == Access::read_write) {
    db_ = open(path, path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    return;
  }
  db_ = open(path, file_uri(path, "mode=ro"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
  // SQLite opens lazily: the first read says whether the WAL index could be had.
  if (sqlite3_exec(db_, "SELECT count(*) FROM sqlite_schema", nullptr, nullptr, nullptr) ==
      SQLITE_OK)
    return;
  sqlite3_close(db_);
  db_ = open(path, file_uri(path, "immutable=1"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
}

Database::~Database() { sqlite3_close(db_); }

void Database::exec(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    raise(db_, "database " + path_ + ": " + message + advice(db_));
  }
}

Statement Database::prepare(std::string_view sql) { return Statement(*this, sql); }
int64_t Database::last_insert_id() const { return sqlite3_last_insert_rowid(db_); }
int Database::changes() const { return sqlite3_changes(db_); }

Statement::Statement(Database& db, std::string_view sql) : db_(&db) {
  if (sqlite3_prepare_v2(db.handle(), sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) !=
      SQLITE_OK)
    fail(db.handle(), db.path(), "cannot prepare '" + std::string(sql) + "'");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement::Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) {
  other.stmt_ = nullptr;
}

void Statement::check(int code) const {
  if (code != SQLITE_OK) fail(db_->handle(), db_->path(), "cannot bind a value");
}

Statement& Statement::bind(int index, int64_t value) {
  check(sqlite3_bind_int64(stmt_, index, value));
  return *this;
}
Statement& Statement::bind(int index, double value) {
  check(sqlite3_bind_double(stmt_, index, value));
  return *this;
}
Statement& Statement::bind(int index, std::string_view value) {
  check(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                          SQLITE_TRANSIENT));
  return *this;
}
Statement& Statement::bind_null(int index) {
  check(sqlite3_bind_null(stmt_, index));
  return *this;
}

bool Statement::step() {
  int code = sqlite3_step(stmt_);
  if (code == SQLITE_ROW) return true;
  if (code == SQLITE_DONE) return false;
  fail(db_->handle(), db_->path(), "statement failed");
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::column_int(int index) const { return sqlite3_column_int64(stmt_, index); }
double Statement::column_double(int index) const { return sqlite3_column_double(stmt_, index); }
bool Statement::column_is_null(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}
std::string Statement::column_text(int index) const {
  const unsigned char* text = sqlite3_column_text(stmt_, index);
  return text ? std::string(reinterpret_cast<const char*>(text),
                            static_cast<size_t>(sqlite3_column_bytes(stmt_, index)))
              : std::string();
}

// Inside another transaction it is a savepoint, so a group of store calls (collecting a task's
// records) commits or rolls back whole while each call keeps its own transaction.
Transaction::Transaction(Database& db)
    : db_(db), nested_(sqlite3_get_autocommit(db.handle()) == 0) {
  db_.exec(nested_ ? "SAVEPOINT nested" : "BEGIN IMMEDIATE");
}
Transaction::~Transaction() {
  if (!done_) {
    try {
      db_.exec(nested_ ? "ROLLBACK TO nested; RELEASE nested" : "ROLLBACK");
    } catch (...) {
    }
  }
}
void Transaction::commit() {
  db_.exec(nested_ ? "RELEASE nested" : "COMMIT");
  done_ = true;
}

}  // namespace trainyard::sql
