#include "db/run_events.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/json_numbers.h"
#include "common/process.h"

namespace trainyard {

namespace {

using nlohmann::json;

// A line that is whole but cannot become a record (with json::exception: what a garbled line
// throws). Store errors are not caught as such: they end the collection, rolled back.
struct BadRecord : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error(fmt::format("{} {}: {}", what, path, std::strerror(errno)));
}

json event(const char* kind) { return json{{"event", kind}, {"at", utc_now()}}; }

}  // namespace

RunEventWriter::RunEventWriter(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot open the run's records file", path_);
  // Cut a torn last line: everything after the last newline.
  const off_t size = ::lseek(fd_, 0, SEEK_END);
  off_t keep = size;
  char byte = '\n';
  while (keep > 0) {
    if (::pread(fd_, &byte, 1, keep - 1) != 1) fail("cannot read", path_);
    if (byte == '\n') break;
    --keep;
  }
  if (keep != size && ::ftruncate(fd_, keep) != 0) fail("cannot truncate", path_);
  ::lseek(fd_, keep, SEEK_SET);
}

RunEventWriter::~RunEventWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void RunEventWriter::append(const std::string& line) {
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot write", path_);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd_) != 0) fail("cannot fsync", path_);
}

void RunEventWriter::started(const RunEnvironment& environment, const std::string& job) {
  json e = event("started");
  e["host"] = host_name();
  e["pid"] = static_cast<int64_t>(getpid());
  e["job"] = job;
  e["git_revision"] = environment.git_revision;
  e["torch_version"] = environment.torch_version;
  e["device_name"] = environment.device_name;
  e["log_path"] = environment.log_path;
  append(e.dump());
}

void RunEventWriter::resumed(const std::string& job) {
  json e = event("resumed");
  e["host"] = host_name();
  e["pid"] = static_cast<int64_t>(getpid());
  e["job"] = job;
  append(e.dump());
}

void RunEventWriter::attributes(const std::map<std::string, std::string>& attributes) {
  json e = event("attributes");
  e["values"] = attributes;
  append(e.dump());
}

void RunEventWriter::epoch(int64_t epoch, const std::map<std::string, double>& values) {
  json e = event("epoch");
  e["epoch"] = epoch;
  e["values"] = json_numbers(values);
  append(e.dump());
}

void RunEventWriter::step(int64_t step, const std::map<std::string, double>& values) {
  json e = event("step");
  e["step"] = step;
  e["values"] = json_numbers(values);
  append(e.dump());
}

void RunEventWriter::heartbeat(const std::optional<RunProgress>& progress) {
  json e = event("heartbeat");
  if (progress) e["progress"] = progress->to_json();
  append(e.dump());
}

void RunEventWriter::completed(const std::map<std::string, double>& metrics) {
  json e = event("completed");
  e["metrics"] = json_numbers(metrics);
  append(e.dump());
}

void RunEventWriter::ended(RunStatus status, const std::string& error, FailureClass failure) {
  json e = event("ended");
  e["status"] = to_string(status);
  e["error"] = error;
  e["failure_class"] = to_string(failure);
  append(e.dump());
}

void RunEventWriter::requeued(int restarts) {
  json e = event("requeued");
  e["restarts"] = restarts;
  append(e.dump());
}

namespace {

// One line into the store; returns true when it ended the run.
bool apply(Store& store, int64_t run_id, const json& e) {
  const std::string kind = e.at("event").get<std::string>();
  const std::string at = e.value("at", "");
  if (kind == "started") {
    store.start_run(run_id,
                    {.git_revision = e.value("git_revision", ""),
                     .torch_version = e.value("torch_version", ""),
                     .device_name = e.value("device_name", ""),
                     .log_path = e.value("log_path", "")},
                    {.host = e.value("host", ""), .pid = integer_or(e, "pid", 0), .at = at});
    store.record_heartbeat(run_id, std::nullopt, at);
  } else if (kind == "resumed") {
    store.resume_run(run_id, {.host = e.value("host", ""), .pid = integer_or(e, "pid", 0)});
    store.record_heartbeat(run_id, std::nullopt, at);
  } else if (kind == "attributes") {
    store.record_attributes(run_id, e.at("values").get<std::map<std::string, std::string>>());
  } else if (kind == "epoch") {
    store.record_epoch(run_id, integer_from_json(e.at("epoch")), numbers_from_json(e.at("values")));
  } else if (kind == "step") {
    store.record_step(run_id, integer_from_json(e.at("step")), numbers_from_json(e.at("values")));
  } else if (kind == "heartbeat") {
    std::optional<RunProgress> progress;
    if (e.contains("progress")) progress = RunProgress::from_json(e["progress"].get<std::string>());
    store.record_heartbeat(run_id, progress, at);
  } else if (kind == "completed") {
    store.complete_run(run_id, numbers_from_json(e.at("metrics")), at);
    return true;
  } else if (kind == "ended") {
    RunStatus status;
    try {
      status = parse_run_status(e.at("status").get<std::string>());
    } catch (const std::runtime_error& error) {
      throw BadRecord(error.what());
    }
    store.end_run(run_id, status, e.value("error", ""),
                  parse_failure_class(e.value("failure_class", "")), at);
    return true;
  } else if (kind == "requeued") {
    store.mark_requeued(run_id, at);
  } else {
    throw BadRecord("unknown event '" + kind + "'");
  }
  return false;
}

}  // namespace

CollectedEvents collect_run_events(Store& store, const SlurmRunRecord& task) {
  CollectedEvents collected;
  const std::string path = task.events_path();
  std::ifstream file(path, std::ios::binary);
  if (!file) return collected;  // the task has not started yet
  store.in_transaction([&] {
    // The offset again, under the write lock: another collector (a `status` beside a `report`)
    // may have taken lines in since `task` was read.
    const std::optional<SlurmRunRecord> current = store.slurm_run(task.run_id);
    if (!current || current->stem != task.stem) return;
    const int64_t offset = current->events_offset;
    file.seekg(0, std::ios::end);
    const int64_t size = static_cast<int64_t>(file.tellg());
    if (size < offset) {
      collected.problem = fmt::format(
          "{} is {} bytes, shorter than the {} already taken in: it was replaced or truncated "
          "by hand; nothing more is taken from it",
          path, size, offset);
      return;
    }
    file.seekg(offset);
    const std::string rest((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    const size_t complete = rest.rfind('\n');
    if (complete == std::string::npos) return;  // nothing new, or half a line
    size_t begin = 0;
    while (begin <= complete) {
      const size_t end = rest.find('\n', begin);
      const std::string line = rest.substr(begin, end - begin);
      const int64_t line_offset = offset + static_cast<int64_t>(begin);
      begin = end + 1;
      if (line.empty()) continue;
      try {
        // Each line whole or not at all (a savepoint): a bad field late in a line leaves nothing.
        store.in_transaction([&] {
          collected.finished = apply(store, task.run_id, json::parse(line)) || collected.finished;
        });
        ++collected.applied;
      } catch (const std::exception& error) {
        if (!dynamic_cast<const json::exception*>(&error) &&
            !dynamic_cast<const BadRecord*>(&error))
          throw;  // the store's own failure: the whole collection rolls back
        // A line that is whole but unreadable (a disk's garbage) cannot become a record; the others
        // still can.
        collected.problem = fmt::format("{}: byte {}: skipped a record that cannot be read ({})",
                                        path, line_offset, error.what());
      }
    }
    store.set_events_offset(task.run_id, offset + static_cast<int64_t>(complete) + 1);
  });
  return collected;
}

}  // namespace trainyard
