// One error model for the whole program: code deep inside throws one of these; `main` catches them
// once and turns them into a message and an exit code.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

// Exported by trainyard-engine to the plugins it loads (the rest of trainyard is hidden).
#pragma GCC visibility push(default)

namespace trainyard {

// Exit codes of the `trainyard` executable.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;    // a run failed, or something unexpected broke
inline constexpr int kExitUserError = 2;  // bad config, data, weights or command line
inline constexpr int kExitNothingRan =
    3;  // every run of a batch skipped: this machine cannot run them
// The batch stopped at its --time-limit: run it again to continue (sysexits.h's EX_TEMPFAIL).
inline constexpr int kExitTimeLimit = 75;
inline constexpr int kExitInterrupted = 130;  // Ctrl-C or SIGTERM

// A problem the user can fix: bad YAML, a missing or malformed data file, bad weights, a bad
// command line. The message names the file (and line:column, key or tensor) and the fix.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // True when the message is a whole report that labels each problem itself ("file:3:5: error:
  // ..."): it is printed as it is, without another "error:" in front.
  virtual bool labelled() const { return false; }
};

// Whether an error message is an allocation failure's: LibTorch's CUDA allocator ("CUDA out of
// memory"), its CPU allocator ("can't allocate memory", "not enough memory"), operator new
// ("bad_alloc"). How the launcher classes a failed run, and how train.micro_batch_size: auto
// knows when to halve.
bool says_out_of_memory(const std::string& message);

// The user pressed Ctrl-C (SIGINT) or the process got SIGTERM.
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted") {}
};

// How a command ends when `error` escapes it: UserError -> kExitUserError, Interrupted ->
// kExitInterrupted, anything else -> kExitFailure; the message is the exception's own. The one
// mapping, used by `main` and by the worker processes alike.
struct Failure {
  int exit_code = kExitFailure;
  std::string message{};
  bool labelled = false;  // UserError::labelled()
};
Failure failure_of(const std::exception_ptr& error);

}  // namespace trainyard
#pragma GCC visibility pop
