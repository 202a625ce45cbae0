#include "trainyard/error.h"

#include <algorithm>
#include <cctype>

namespace trainyard {

bool says_out_of_memory(const std::string& message) {
  std::string text = message;
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* words : {"out of memory", "bad_alloc", "bad allocation", "can't allocate memory",
                            "cannot allocate memory", "not enough memory"})
    if (text.find(words) != std::string::npos) return true;
  return false;
}

Failure failure_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const UserError& e) {
    return {.exit_code = kExitUserError, .message = e.what(), .labelled = e.labelled()};
  } catch (const Interrupted& e) {
    return {.exit_code = kExitInterrupted, .message = e.what()};
  } catch (const std::exception& e) {
    return {.exit_code = kExitFailure, .message = e.what()};
  } catch (...) {
    return {.exit_code = kExitFailure, .message = "an unknown error (not a std::exception)"};
  }
}

}  // namespace trainyard
