#include "common/clock.h"

#include <ctime>

namespace trainyard {

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

double seconds_since(const std::string& timestamp) {
  const double then = unix_time_of(timestamp);
  return then == 0 ? -1 : static_cast<double>(std::time(nullptr)) - then;
}

double unix_time_of(const std::string& timestamp) {
  std::tm tm{};
  if (timestamp.empty() || !strptime(timestamp.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) return 0;
  return static_cast<double>(timegm(&tm));
}

}  // namespace trainyard
