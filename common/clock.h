// Wall-clock timestamps as the database and the records files keep them: UTC, to the second.
#pragma once

#include <chrono>
#include <string>

namespace trainyard {

// Now, as "2026-11-30T13:35:15Z".
std::string utc_now();

// Seconds since a timestamp of utc_now()'s form; negative when it cannot be read.
double seconds_since(const std::string& timestamp);

// Seconds since `start` on the steady clock: what a duration inside a process is measured by.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Seconds since 1970 of a timestamp of utc_now()'s form; 0 when it cannot be read.
double unix_time_of(const std::string& timestamp);

}  // namespace trainyard
