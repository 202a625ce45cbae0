#include "common/error.h"

namespace trainyard {

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
