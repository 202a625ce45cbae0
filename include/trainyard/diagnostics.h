// Where a config value came from, and the list of problems found while reading a config.
// Validation reports every problem at once, so the user fixes a file in one pass.
#pragma once

#include <string>
#include <vector>

#include "trainyard/error.h"

// Exported by trainyard-engine to the plugins it loads (the rest of trainyard is hidden).
#pragma GCC visibility push(default)

namespace trainyard {

// A place in a YAML file or on the command line. Lines and columns are 1-based; 0 means unknown.
struct Origin {
  std::string file;  // a path, or e.g. "--set train.epochs=1" for a command-line override
  int line = 0;
  int column = 0;
};

// "file:line:column" (or less, when line or column are unknown).
std::string to_string(const Origin& origin);

struct Diagnostic {
  Origin origin;
  std::string message;
};

class Diagnostics {
 public:
  void error(Origin origin, std::string message);
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  const std::vector<Diagnostic>& items() const { return items_; }

  // Compiler-style report: "file:line:col: error: message", the source line and a caret under the
  // column, for every problem, then "N errors".
  std::string format() const;

  // Throws ConfigError holding format() when there is any problem.
  void throw_if_any() const;

 private:
  std::vector<Diagnostic> items_;
};

class ConfigError : public UserError {
 public:
  explicit ConfigError(const Diagnostics& diagnostics)
      : UserError(diagnostics.format()), diagnostics_(diagnostics) {}
  const Diagnostics& diagnostics() const { return diagnostics_; }
  bool labelled() const override { return true; }  // format() labels every line "error:"

 private:
  Diagnostics diagnostics_;
};

}  // namespace trainyard
#pragma GCC visibility pop
