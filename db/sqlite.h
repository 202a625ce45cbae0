// A thin RAII layer over the SQLite C API: a connection, prepared statements, transactions.
// Errors become std::runtime_error naming the database file and SQLite's message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace trainyard::sql {

class Statement;

enum class Access {
  read_write,  // opens or creates the file
  // Reads an existing file without writing anything, on a read-only file system too: SQLite's WAL
  // mode needs its -shm file even to read, so where none exists and none can be made the file is
  // read as immutable (nobody can write it there either).
  read_only,
};

class Database {
 public:
  explicit Database(const std::string& path, Access access = Access::read_write);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  void exec(const std::string& sql);  // one or more statements, no results
  Statement prepare(std::string_view sql);
  int64_t last_insert_id() const;
  int changes() const;
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

class Statement {
 public:
  Statement(Database& db, std::string_view sql);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds by 1-based position; returns *this so binds chain.
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, const std::string& value) {
    return bind(index, std::string_view(value));
  }
  Statement& bind_null(int index);

  bool step();  // true while a row is available
  void run();   // steps to completion, for statements without results
  void reset();

  int64_t column_int(int index) const;
  double column_double(int index) const;
  std::string column_text(int index) const;  // "" for NULL
  bool column_is_null(int index) const;

 private:
  void check(int code) const;
  Database* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back unless commit() was called. Nested in another: a
// savepoint.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  void commit();

 private:
  Database& db_;
  bool nested_;
  bool done_ = false;
};

}  // namespace trainyard::sql
